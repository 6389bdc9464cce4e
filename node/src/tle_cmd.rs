//! `sbft-beacon tle`: timelock encryption to a future round of an unchained
//! chain, interoperable with drand's `tle` (drand/tlock): the output is an age
//! file with one `tlock {round} {chain hash}` stanza, which drand's `tle`,
//! `tlock-js` and `tlock_age` decrypt once the round is out, and this command
//! decrypts theirs (binary or ASCII-armored).
//!
//! - `tle encrypt --round R | --duration D`: needs only the chain info (from a
//!   node's `/info`, or a file); no round has to exist yet.
//! - `tle decrypt`: reads the round and chain hash from the file, fetches the
//!   chain info and that round from a node, verifies the round's signature
//!   under the chain's public key, and only then decrypts. Nothing is written
//!   to `-o FILE` unless decryption succeeds (a temporary file beside it is
//!   renamed at the end).
//!
//! Only unchained schemes can be timelocked: a chained round signs the
//! previous round's signature too, which nobody knows in advance. Chains with
//! period 0 (back-to-back rounds) have no round schedule to lock to.

use anyhow::{anyhow, bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson, Point, SchemeId, G1, G2};
use clap::{ArgGroup, Args, Subcommand};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The HTTP API of a local node by default: node 0 of `deploy compose
/// --publish-http 8000` and the example `node.toml` (`http = "127.0.0.1:8000"`).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8000";

/// How long one HTTP request may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of `tle`.
#[derive(Args)]
pub struct TleArgs {
    #[command(subcommand)]
    command: TleCommand,
}

#[derive(Subcommand)]
enum TleCommand {
    /// Encrypt to a future round: decryptable by anyone once the round is out.
    Encrypt(EncryptArgs),
    /// Decrypt a timelocked file: fetches and verifies its round's beacon.
    Decrypt(DecryptArgs),
}

/// Options of `tle encrypt`.
#[derive(Args)]
#[command(group(ArgGroup::new("when").required(true).args(["round", "duration"])))]
pub struct EncryptArgs {
    /// Round to encrypt to.
    #[arg(long, short = 'r')]
    round: Option<u64>,
    /// Encrypt to the first round due at or after now + DURATION: a number and
    /// a unit, or several (`90s`, `5m`, `2h`, `1d`, `1w`, `1M`, `1y`, `1d12h`),
    /// as drand's `tle` (`M` months and `y` years are calendar ones, in UTC).
    #[arg(long, short = 'D')]
    duration: Option<String>,
    /// A node's HTTP API (drand's v1 shape) to read the chain info from
    /// (`{URL}/info`).
    #[arg(long, short = 'u', default_value = DEFAULT_URL, conflicts_with = "chain_info")]
    url: String,
    /// Read drand's chain info JSON (`/info`) from FILE instead of a node.
    #[arg(long, value_name = "FILE")]
    chain_info: Option<PathBuf>,
    /// Write the ciphertext to FILE (default: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// ASCII-armor the output (age's PEM-like armor, as `tle --armor`).
    #[arg(long, short = 'a')]
    armor: bool,
    /// Encrypt to a round that is already due (anyone can decrypt it now).
    #[arg(long, short = 'f')]
    force: bool,
    /// File to encrypt (default, or `-`: standard input).
    #[arg(value_name = "INPUT")]
    input: Option<PathBuf>,
}

/// Options of `tle decrypt`.
#[derive(Args)]
pub struct DecryptArgs {
    /// A node's HTTP API (drand's v1 shape) serving the file's chain:
    /// `{URL}/info` and `{URL}/public/{round}` (or `{URL}/{chain hash}/...`).
    #[arg(long, short = 'u', default_value = DEFAULT_URL)]
    url: String,
    /// Write the plaintext to FILE (default: standard output); created only if
    /// decryption succeeds.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Timelocked file, binary or armored (default, or `-`: standard input).
    #[arg(value_name = "INPUT")]
    input: Option<PathBuf>,
}

/// Runs `tle encrypt` or `tle decrypt`.
pub fn run(args: TleArgs) -> Result<()> {
    match args.command {
        TleCommand::Encrypt(a) => encrypt_cmd(a),
        TleCommand::Decrypt(a) => decrypt_cmd(a),
    }
}

// ---------------------------------------------------------------------------
// Time: now, durations, rounds, UTC dates.

/// Unix time now, in whole seconds rounded up (a round due at or after
/// `now_ceil() + d` is due at or after the real now + d).
fn now_ceil() -> Result<i64> {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .context("the system clock is before 1970")?;
    let s = i64::try_from(d.as_secs()).context("the system clock is past year 292e9")?;
    Ok(s + i64::from(d.subsec_nanos() > 0))
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`; `d` may
/// exceed the month's length (it is added as days, as Go's `AddDate` does).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `(y, m, d)` of day `z` since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `unix` as `YYYY-MM-DD HH:MM:SS UTC`.
fn fmt_utc(unix: i64) -> String {
    let (y, m, d) = civil_from_days(unix.div_euclid(86_400));
    let s = unix.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// `in N s` or `N s ago` (with days/hours/minutes past two minutes).
fn fmt_from_now(t: i64, now: i64) -> String {
    let delta = t.saturating_sub(now);
    let secs = delta.unsigned_abs();
    let human = if secs >= 120 {
        let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
        let mut parts = Vec::new();
        if d > 0 {
            parts.push(format!("{d}d"));
        }
        if d > 0 || h > 0 {
            parts.push(format!("{h}h"));
        }
        parts.push(format!("{m}m{s}s"));
        format!(" = {}", parts.join(""))
    } else {
        String::new()
    };
    if delta >= 0 {
        format!("in {secs} s{human}")
    } else {
        format!("{secs} s{human} ago")
    }
}

/// `unix` plus `months` calendar months in UTC, normalized as Go's `AddDate`
/// (Jan 31 + 1 month = Mar 3 or 2).
fn add_months(unix: i64, months: i64) -> Option<i64> {
    let (y, m, d) = civil_from_days(unix.div_euclid(86_400));
    let total = (y.checked_mul(12)?)
        .checked_add(m - 1)?
        .checked_add(months)?;
    let (y2, m2) = (total.div_euclid(12), total.rem_euclid(12) + 1);
    if y2.unsigned_abs() > 1_000_000_000 {
        return None;
    }
    days_from_civil(y2, m2, d)
        .checked_mul(86_400)?
        .checked_add(unix.rem_euclid(86_400))
}

/// Seconds from `start` (Unix time) to `start + duration`, with drand `tle`'s
/// duration syntax: one or more `<number><unit>`, units `s m h d w M y`, each
/// at most once (`M` and `y` are calendar months and years from `start`, UTC).
pub fn parse_duration(input: &str, start: i64) -> Result<u64> {
    const UNITS: &str = "smhdwMy";
    let malformed = || {
        anyhow!(
            "malformed duration {input:?}: expected a number and a unit, or several \
             (units s, m, h, d, w, M = months, y = years; e.g. 30s, 5m, 2h, 1d12h)"
        )
    };
    let mut seen = String::new();
    let mut total: i64 = 0;
    let mut rest = input;
    if rest.is_empty() {
        return Err(malformed());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let unit = rest[digits..].chars().next().ok_or_else(malformed)?;
        if digits == 0 || !UNITS.contains(unit) {
            return Err(malformed());
        }
        if seen.contains(unit) {
            bail!("malformed duration {input:?}: unit {unit:?} appears twice");
        }
        seen.push(unit);
        let too_large = || anyhow!("duration {input:?} is too large");
        let n: i64 = rest[..digits].parse().map_err(|_| too_large())?;
        let secs = match unit {
            's' => Some(n),
            'm' => n.checked_mul(60),
            'h' => n.checked_mul(3600),
            'd' => n.checked_mul(86_400),
            'w' => n.checked_mul(7 * 86_400),
            'M' => add_months(start, n).and_then(|t| t.checked_sub(start)),
            'y' => n
                .checked_mul(12)
                .and_then(|months| add_months(start, months))
                .and_then(|t| t.checked_sub(start)),
            _ => unreachable!("checked against UNITS"),
        };
        total = secs
            .and_then(|s| total.checked_add(s))
            .ok_or_else(too_large)?;
        rest = &rest[digits + unit.len_utf8()..];
    }
    if total <= 0 {
        bail!("duration {input:?} is zero: give a time in the future");
    }
    u64::try_from(total).map_err(|_| anyhow!("duration {input:?} is too large"))
}

/// The first round of `info` due at or after Unix time `t`.
pub fn round_at_or_after(info: &ChainInfo, t: i64) -> Result<u64> {
    if info.period == 0 {
        bail!(
            "chain {} has period 0 (back-to-back rounds): its rounds have no due time, \
             so it cannot be used for timelock encryption",
            hex::encode(info.hash())
        );
    }
    if t <= info.genesis_time {
        return Ok(1);
    }
    let elapsed = u64::try_from(i128::from(t) - i128::from(info.genesis_time))
        .context("time out of range")?;
    let steps = elapsed.div_ceil(u64::from(info.period));
    let round = steps.checked_add(1).context("round out of range (u64)")?;
    debug_assert!(info.time_of_round(round) >= t);
    Ok(round)
}

// ---------------------------------------------------------------------------
// Chains and schemes.

/// The hash-to-curve DST of a signing scheme.
fn scheme_dst(scheme: SchemeId) -> Result<&'static [u8]> {
    fn dst<S: beacon::Scheme>(_: ()) -> Result<&'static [u8]> {
        Ok(S::DST)
    }
    with_bls_scheme!(scheme, dst, ())
}

/// Checks that `info`'s chain can be timelocked with `tlock`: an unchained
/// scheme whose signature group and DST are the ones `tlock` hashes round
/// numbers with (RFC 9380 `..._RO_NUL_` in G1 or G2), and a valid key.
pub fn check_timelockable(info: &ChainInfo) -> Result<()> {
    let scheme = info.scheme;
    let hash = hex::encode(info.hash());
    if scheme.is_chained() {
        bail!(
            "chain {hash} uses the chained scheme {scheme}: round r signs round r-1's \
             signature too, which nobody knows in advance, so it cannot be used for \
             timelock encryption (use an unchained scheme such as bls-unchained-g1-rfc9380)"
        );
    }
    let dst = scheme_dst(scheme)
        .with_context(|| format!("scheme {scheme} cannot be used for timelock encryption"))?;
    // tlock (rfc9380 feature) hashes to G1 with the RFC 9380 G1 DST and to G2
    // with the G2 DST: another DST would make ciphertexts nobody can open.
    let (tlock_dst, key_len) = if scheme.signatures_in_g1() {
        (beacon::scheme::DST_G1, G2::COMPRESSED_LEN)
    } else {
        (beacon::scheme::DST_G2, G1::COMPRESSED_LEN)
    };
    if dst != tlock_dst {
        bail!(
            "scheme {scheme} hashes rounds with DST {:?}, not tlock's {:?}: \
             it cannot be used for timelock encryption",
            String::from_utf8_lossy(dst),
            String::from_utf8_lossy(tlock_dst)
        );
    }
    let key = &info.public_key;
    let parsed = if scheme.signatures_in_g1() {
        G2::from_bytes(key).map(|_| ())
    } else {
        G1::from_bytes(key).map(|_| ())
    };
    parsed.with_context(|| {
        format!(
            "chain {hash}: the public key ({} bytes) is not a valid {scheme} key \
             (a {key_len}-byte compressed point)",
            key.len()
        )
    })
}

/// Parses drand's chain info JSON and checks its hash.
fn parse_info(value: serde_json::Value, from: &str) -> Result<ChainInfo> {
    let json: ChainInfoJson = serde_json::from_value(value)
        .with_context(|| format!("{from} is not drand's chain info (/info) JSON"))?;
    json.to_info()
        .with_context(|| format!("chain info from {from}"))
}

// ---------------------------------------------------------------------------
// HTTP.

fn base_url(url: &str) -> Result<String> {
    let base = url.trim_end_matches('/').to_string();
    if base.starts_with("https://") {
        bail!(
            "{url}: https is not supported by this build (our nodes serve plain HTTP); \
             use an http:// URL"
        );
    }
    if base.starts_with("http://") {
        Ok(base)
    } else if !base.contains("://") && !base.is_empty() {
        Ok(format!("http://{base}")) // `127.0.0.1:8000`
    } else {
        bail!("{url:?} is not an http:// URL")
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the HTTP runtime")
}

fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .context("HTTP client")
}

async fn fetch_info(client: &reqwest::Client, base: &str) -> Result<ChainInfo> {
    let url = format!("{base}/info");
    let value = node::http::get_json(client, &url)
        .await
        .with_context(|| format!("no chain info from {base}: is a node's HTTP API there?"))?;
    parse_info(value, &url)
}

// ---------------------------------------------------------------------------
// Files.

fn is_stdio(path: &Option<PathBuf>) -> bool {
    path.as_deref().is_none_or(|p| p == Path::new("-"))
}

/// Writes through `write` into a temporary file beside `path`, renamed to
/// `path` only if `write` succeeds (nothing is created or truncated
/// otherwise). An existing file's permissions are kept; a new file gets
/// owner-only ones.
fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".tle-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let value = {
        let mut w = std::io::BufWriter::new(tmp.as_file());
        let value = write(&mut w)?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        value
    };
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Best effort: the rename below matters, the mode is a courtesy.
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(value)
}

fn open_input(input: &Option<PathBuf>) -> Result<Box<dyn Read>> {
    if is_stdio(input) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let path = input.as_deref().expect("not stdin");
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

fn input_name(input: &Option<PathBuf>) -> String {
    if is_stdio(input) {
        "standard input".into()
    } else {
        input.as_deref().expect("not stdin").display().to_string()
    }
}

// ---------------------------------------------------------------------------
// Encryption and decryption (no network).

/// Encrypts `src` to `round` of `info`'s chain into `dst` (armored if
/// `armor`). `info` must pass [`check_timelockable`].
pub fn encrypt_to<W: Write, R: Read>(
    dst: W,
    src: R,
    info: &ChainInfo,
    round: u64,
    armor: bool,
) -> Result<W> {
    check_timelockable(info)?;
    if round == 0 {
        bail!("round 0 is not a beacon round (rounds start at 1)");
    }
    let hash = info.hash();
    let fail = |e: tlock_age::TLockAgeError| anyhow!("timelock encryption failed: {e}");
    if armor {
        let mut w = tlock_age::armor::ArmoredWriter::wrap_output(dst)
            .map_err(|e| anyhow!("timelock encryption failed: {e}"))?;
        tlock_age::encrypt(&mut w, src, &hash, &info.public_key, round).map_err(fail)?;
        w.finish()
            .map_err(|e| anyhow!("timelock encryption failed: {e}"))
    } else {
        let mut dst = dst;
        tlock_age::encrypt(&mut dst, src, &hash, &info.public_key, round).map_err(fail)?;
        Ok(dst)
    }
}

/// What a timelocked file's header says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The round it is locked to.
    pub round: u64,
    /// The chain hash it is locked to.
    pub chain_hash: Vec<u8>,
}

/// Reads the round and chain hash of a timelocked file (binary or armored).
pub fn read_header<R: Read>(src: R) -> Result<Header> {
    match guard_panics(|| Ok(tlock_age::decrypt_header(src)))? {
        Ok(h) if h.round() == 0 => bail!("malformed timelock header: round 0"),
        Ok(h) => Ok(Header {
            round: h.round(),
            chain_hash: h.hash(),
        }),
        Err(tlock_age::TLockAgeError::Decrypt(e)) => {
            bail!("not an age-encrypted file ({e})")
        }
        Err(tlock_age::TLockAgeError::InvalidRecipient) => {
            bail!("a passphrase-encrypted age file, not a timelocked one")
        }
        Err(tlock_age::TLockAgeError::Header { round, chain }) => match (round, chain) {
            (None, None) => bail!("an age file without a tlock stanza: not timelock-encrypted"),
            _ => bail!("malformed tlock stanza in the age header"),
        },
        Err(e) => bail!("reading the age header: {e}"),
    }
}

/// Decrypts `src` (a file locked to `round` of the chain `chain_hash`) with
/// that round's signature into `dst`. Callers verify the signature first
/// (`ChainInfo::verify_beacon`): a wrong one gives an error, not garbage, but
/// names no culprit.
pub fn decrypt_with<W: Write, R: Read>(
    dst: W,
    src: R,
    chain_hash: &[u8],
    signature: &[u8],
) -> Result<()> {
    let result = guard_panics(|| Ok(tlock_age::decrypt(dst, src, chain_hash, signature))).context(
        "the signature does not open this file (wrong round or chain, or a corrupt file)",
    )?;
    result.map_err(|e| match e {
        // No stanza opened: age says "No matching keys found".
        tlock_age::TLockAgeError::Decrypt(e) => anyhow!(
            "the signature does not open this file (wrong round or chain, or a corrupt \
             file): {e}"
        ),
        tlock_age::TLockAgeError::IO(e) => anyhow!("decryption failed (corrupt file?): {e}"),
        e => anyhow!("decryption failed: {e}"),
    })
}

thread_local! {
    static QUIET_PANICS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic into an error. `tlock` 0.0.10 asserts (panics)
/// where a ciphertext does not open with the signature given; its message is
/// kept off standard error.
fn guard_panics<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET_PANICS.with(|q| q.get()) {
                previous(info);
            }
        }));
    });
    let was = QUIET_PANICS.with(|q| q.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET_PANICS.with(|q| q.set(was));
    result.unwrap_or_else(|_| Err(anyhow!("tlock rejected the input")))
}

// ---------------------------------------------------------------------------
// The commands.

fn encrypt_cmd(args: EncryptArgs) -> Result<()> {
    let now = now_ceil()?;
    let duration = match &args.duration {
        Some(d) => Some(parse_duration(d, now)?),
        None => None,
    };
    let info = match &args.chain_info {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?;
            parse_info(value, &path.display().to_string())?
        }
        None => {
            let base = base_url(&args.url)?;
            runtime()?.block_on(async { fetch_info(&client()?, &base).await })?
        }
    };
    let hash = hex::encode(info.hash());
    check_timelockable(&info)?;
    let round = match (args.round, duration) {
        (Some(round), _) => {
            if round == 0 {
                bail!("round 0 is not a beacon round (rounds start at 1)");
            }
            if info.period == 0 {
                round_at_or_after(&info, now)?; // the period-0 error
            }
            let due = info.time_of_round(round);
            if due <= now && !args.force {
                bail!(
                    "round {round} of chain {hash} was due at {} ({}): anyone can decrypt \
                     it already; pass --force to encrypt to it anyway",
                    fmt_utc(due),
                    fmt_from_now(due, now)
                );
            }
            round
        }
        (None, Some(d)) => {
            let t = now
                .checked_add(i64::try_from(d).unwrap_or(i64::MAX))
                .context("duration too large")?;
            round_at_or_after(&info, t)?
        }
        (None, None) => bail!("give --round R or --duration D"),
    };
    let src = open_input(&args.input)?;
    match &args.output {
        Some(path) if path != Path::new("-") => write_atomically(path, |w| {
            encrypt_to(w, src, &info, round, args.armor).map(|_| ())
        })?,
        _ => {
            let stdout = std::io::stdout().lock();
            let mut w = encrypt_to(
                std::io::BufWriter::new(stdout),
                src,
                &info,
                round,
                args.armor,
            )?;
            w.flush().context("writing standard output")?;
        }
    }
    let due = info.time_of_round(round);
    eprintln!(
        "encrypted {} to round {round} of chain {hash} ({}): decryptable from {} ({})",
        input_name(&args.input),
        info.scheme,
        fmt_utc(due),
        fmt_from_now(due, now)
    );
    Ok(())
}

/// Fetches the chain info of `header`'s chain from `url` (or from
/// `{url}/{chain hash}`, as drand relays serve several chains): the base URL
/// that serves it, and the info.
async fn fetch_chain(
    client: &reqwest::Client,
    url: &str,
    header: &Header,
) -> Result<(String, ChainInfo)> {
    let base = base_url(url)?;
    let wanted = hex::encode(&header.chain_hash);
    let info = fetch_info(client, &base).await?;
    if info.hash()[..] == header.chain_hash[..] {
        return Ok((base, info));
    }
    let sub = format!("{base}/{wanted}");
    if let Ok(other) = fetch_info(client, &sub).await {
        if other.hash()[..] == header.chain_hash[..] {
            return Ok((sub, other));
        }
    }
    bail!(
        "the file is locked to chain {wanted}, but {base} serves chain {}: \
         give the --url of a node of chain {wanted}",
        hex::encode(info.hash())
    )
}

/// Fetches round `round` from `base` and verifies it under `info`.
async fn fetch_round(
    client: &reqwest::Client,
    base: &str,
    info: &ChainInfo,
    round: u64,
) -> Result<Beacon> {
    let hash = hex::encode(info.hash());
    let url = format!("{base}/public/{round}");
    let value = match node::http::get_json(client, &url).await {
        Ok(v) => v,
        Err(e) => {
            let now = now_ceil()?;
            let due = info.time_of_round(round);
            let latest = node::http::get_json(client, &format!("{base}/public/latest"))
                .await
                .ok()
                .and_then(|v| v["round"].as_u64());
            let latest = latest.map_or(String::new(), |l| format!("; the latest round is {l}"));
            if info.period == 0 {
                bail!(
                    "round {round} of chain {hash} is not available ({e}){latest}; \
                     the chain has period 0, so rounds have no due time"
                );
            }
            if due > now {
                bail!(
                    "round {round} of chain {hash} is not out yet: it is due at {} ({}){latest}",
                    fmt_utc(due),
                    fmt_from_now(due, now)
                );
            }
            bail!(
                "round {round} of chain {hash} was due at {} ({}) but could not be fetched \
                 ({e}){latest}",
                fmt_utc(due),
                fmt_from_now(due, now)
            );
        }
    };
    let json: BeaconJson = serde_json::from_value(value)
        .with_context(|| format!("{url} is not drand's beacon JSON"))?;
    let beacon = json
        .to_beacon()
        .with_context(|| format!("{url} served a malformed beacon"))?;
    if beacon.round != round {
        bail!(
            "{url} served round {} instead of round {round}",
            beacon.round
        );
    }
    info.verify_beacon(&beacon).with_context(|| {
        format!(
            "{url} served a signature for round {round} that does not verify under chain \
             {hash}'s public key: refusing to use it"
        )
    })?;
    Ok(beacon)
}

fn decrypt_cmd(args: DecryptArgs) -> Result<()> {
    let name = input_name(&args.input);
    // stdin is read once: keep it for the header and the payload.
    let stdin_bytes = if is_stdio(&args.input) {
        let mut buf = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut buf)
            .context("reading standard input")?;
        Some(buf)
    } else {
        None
    };
    let reopen = || -> Result<Box<dyn Read + '_>> {
        match &stdin_bytes {
            Some(b) => Ok(Box::new(b.as_slice())),
            None => open_input(&args.input),
        }
    };
    let header = read_header(reopen()?).with_context(|| name.clone())?;
    let (info, beacon) = runtime()?.block_on(async {
        let client = client()?;
        let (base, info) = fetch_chain(&client, &args.url, &header).await?;
        check_timelockable(&info)?;
        let beacon = fetch_round(&client, &base, &info, header.round).await?;
        anyhow::Ok((info, beacon))
    })?;
    let hash = info.hash();
    let opened = |w: &mut dyn Write| {
        decrypt_with(w, reopen()?, &hash, &beacon.signature)
            .with_context(|| format!("{name} (round {})", header.round))
    };
    match &args.output {
        Some(path) if path != Path::new("-") => {
            write_atomically(path, |w| opened(w))?;
        }
        _ => {
            // Whole, then written: no partial plaintext on a corrupt file.
            let mut buf = Vec::new();
            opened(&mut buf)?;
            let mut out = std::io::stdout().lock();
            out.write_all(&buf)
                .and_then(|()| out.flush())
                .context("writing standard output")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::chain::round_message;
    use beacon::scheme::Scheme;
    use beacon::Scalar;
    use rand_chacha::rand_core::SeedableRng;

    const QUICKNET_HASH: &str = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";
    const QUICKNET_KEY: &str = "83cf0f2896adee7eb8b5f01fcad3912212c437e0073e911fb90022d3e760183c8c4b450b6a0a6c3ac6a5776a2d1064510d1fec758c921cc22b0e17e63aaf4bcb5ed66304de9cf809bd274ca73bab4af5a6e9c76a4bc09e76eae8991ef5ece45a";
    /// Quicknet round 1000 (tlock 0.0.10's test vector).
    const QUICKNET_SIG_1000: &str = "b44679b9a59af2ec876b1a6b1ad52ea9b1615fc3982b19576350f93447cb1125e342b73a8dd2bacbe47e4b6b63ed5e39";

    fn quicknet() -> ChainInfo {
        ChainInfo {
            public_key: hex::decode(QUICKNET_KEY).unwrap(),
            period: 3,
            genesis_time: 1_692_803_367,
            // drand's unchained chains have the genesis seed too.
            genesis_seed: hex::decode(
                "f477d5c89f21a17c863a7f937c6a6d15859414d2be09cd448d4279af331c5d3e",
            )
            .unwrap(),
            scheme: SchemeId::BlsUnchainedG1Rfc9380,
            beacon_id: "quicknet".into(),
        }
    }

    #[test]
    fn durations_parse_like_drands_tle() {
        let t = 1_700_000_000; // 2023-11-14 22:13:20 UTC
        assert_eq!(parse_duration("30s", t).unwrap(), 30);
        assert_eq!(parse_duration("5m", t).unwrap(), 300);
        assert_eq!(parse_duration("2h", t).unwrap(), 7200);
        assert_eq!(parse_duration("1d", t).unwrap(), 86_400);
        assert_eq!(parse_duration("1w", t).unwrap(), 7 * 86_400);
        assert_eq!(
            parse_duration("1d12h30m5s", t).unwrap(),
            86_400 + 43_200 + 1805
        );
        assert_eq!(parse_duration("5s1h", t).unwrap(), 3605);
        // Calendar months and years: November has 30 days; 2024 is a leap year.
        assert_eq!(parse_duration("1M", t).unwrap(), 30 * 86_400);
        assert_eq!(parse_duration("1y", t).unwrap(), 366 * 86_400);
        assert_eq!(parse_duration("2M", t).unwrap(), (30 + 31) * 86_400);
        for bad in [
            "",
            "30",
            "s",
            "1.5h",
            "-5s",
            "1x",
            "5 s",
            "1h1h",
            "0s",
            "0h0m",
            "1H",
            "99999999999999999999s",
            "9223372036854775807d",
            "1000000000000y",
        ] {
            assert!(parse_duration(bad, t).is_err(), "{bad:?} parsed");
        }
        let e = parse_duration("1h1h", t).unwrap_err().to_string();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(fmt_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(fmt_utc(1_692_803_367), "2023-08-23 15:09:27 UTC");
        assert_eq!(fmt_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        for day in [-800_000, -1, 0, 59, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(day);
            assert_eq!(days_from_civil(y, m, d), day);
        }
        // Go's AddDate normalization, in UTC: Jan 31 + 1 month = Feb 31 = Mar 3 (2023).
        let jan31 = days_from_civil(2023, 1, 31) * 86_400;
        assert_eq!(
            civil_from_days(add_months(jan31, 1).unwrap() / 86_400),
            (2023, 3, 3)
        );
        assert_eq!(fmt_from_now(130, 100), "in 30 s");
        assert_eq!(fmt_from_now(70, 100), "30 s ago");
        assert_eq!(fmt_from_now(100 + 90_061, 100), "in 90061 s = 1d1h1m1s");
    }

    #[test]
    fn round_from_duration_is_the_first_due_at_or_after() {
        let info = quicknet(); // period 3, genesis 1692803367
        let g = info.genesis_time;
        assert_eq!(round_at_or_after(&info, g - 100).unwrap(), 1);
        assert_eq!(round_at_or_after(&info, g).unwrap(), 1);
        assert_eq!(round_at_or_after(&info, g + 1).unwrap(), 2);
        assert_eq!(round_at_or_after(&info, g + 3).unwrap(), 2);
        assert_eq!(round_at_or_after(&info, g + 4).unwrap(), 3);
        for t in (g..g + 50).chain([g + 1_000_000_007]) {
            let r = round_at_or_after(&info, t).unwrap();
            assert!(info.time_of_round(r) >= t);
            assert!(r == 1 || info.time_of_round(r - 1) < t);
        }
        // now + 30 s on quicknet: 10 rounds later.
        let now = g + 3000;
        let d = parse_duration("30s", now).unwrap() as i64;
        assert_eq!(round_at_or_after(&info, now + d).unwrap(), 1001 + 10);
        let mut zero = info.clone();
        zero.period = 0;
        let e = round_at_or_after(&zero, g + 10).unwrap_err().to_string();
        assert!(e.contains("period 0"), "{e}");
    }

    #[test]
    fn quicknet_info_hashes_and_its_round_1000_verifies() {
        let info = quicknet();
        assert_eq!(hex::encode(info.hash()), QUICKNET_HASH);
        let sig = hex::decode(QUICKNET_SIG_1000).unwrap();
        let b = Beacon::new(info.scheme, 1000, sig.clone(), &[]);
        info.verify_beacon(&b).unwrap();
        assert!(info
            .verify_beacon(&Beacon::new(info.scheme, 1001, sig, &[]))
            .is_err());
        check_timelockable(&info).unwrap();
    }

    #[test]
    fn quicknet_round_trip_with_drands_signature() {
        let info = quicknet();
        let msg: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for armor in [false, true] {
            let ct = encrypt_to(Vec::new(), msg.as_slice(), &info, 1000, armor).unwrap();
            assert_eq!(
                read_header(ct.as_slice()).unwrap(),
                Header {
                    round: 1000,
                    chain_hash: hex::decode(QUICKNET_HASH).unwrap()
                }
            );
            let mut out = Vec::new();
            let sig = hex::decode(QUICKNET_SIG_1000).unwrap();
            decrypt_with(&mut out, ct.as_slice(), &info.hash(), &sig).unwrap();
            assert_eq!(out, msg);
        }
    }

    /// A key of `S`'s chain and round `round`'s signature under it.
    fn chain_of<S: Scheme>(seed: u64) -> (ChainInfo, impl Fn(u64) -> Vec<u8>) {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let secret = Scalar::random(&mut rng);
        let info = ChainInfo {
            public_key: S::PublicKey::generator().mul(&secret).to_bytes(),
            period: 3,
            genesis_time: 1_700_000_000,
            genesis_seed: vec![7; 32],
            scheme: S::ID,
            beacon_id: "tle-test".into(),
        };
        let sign = move |round: u64| {
            S::hash_message(&round_message(S::ID, round, &[]))
                .mul(&secret)
                .to_bytes()
        };
        (info, sign)
    }

    fn round_trip<S: Scheme>(_: ()) -> Result<()> {
        if S::ID.is_chained() {
            let (info, _) = chain_of::<S>(1);
            let e = check_timelockable(&info).unwrap_err().to_string();
            assert!(e.contains(S::ID.as_str()) && e.contains("chained"), "{e}");
            let e = encrypt_to(Vec::new(), &b"x"[..], &info, 5, false).unwrap_err();
            assert!(e.to_string().contains("chained"));
            return Ok(());
        }
        let (info, sign) = chain_of::<S>(2);
        check_timelockable(&info)?;
        let round = 4242;
        let sig = sign(round);
        info.verify_beacon(&Beacon::new(S::ID, round, sig.clone(), &[]))?;
        let mut msg = vec![0u8; 1 << 20];
        rand_chacha::rand_core::RngCore::fill_bytes(
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(3),
            &mut msg,
        );
        let ct = encrypt_to(Vec::new(), msg.as_slice(), &info, round, false)?;
        assert!(ct.len() > msg.len());
        let h = read_header(ct.as_slice())?;
        assert_eq!((h.round, h.chain_hash), (round, info.hash().to_vec()));
        let mut out = Vec::new();
        decrypt_with(&mut out, ct.as_slice(), &info.hash(), &sig)?;
        assert!(out == msg, "{}: plaintext differs", S::ID);
        // The previous and next rounds' signatures do not open it, without a panic.
        for wrong in [round - 1, round + 1] {
            let mut out = Vec::new();
            let e = decrypt_with(&mut out, ct.as_slice(), &info.hash(), &sign(wrong))
                .unwrap_err()
                .to_string();
            assert!(e.contains("does not open"), "{}: {e}", S::ID);
        }
        // Nor does another chain's key's signature of the same round.
        let (_, other) = chain_of::<S>(9);
        assert!(decrypt_with(Vec::new(), ct.as_slice(), &info.hash(), &other(round)).is_err());
        // Nor the right signature under another chain hash.
        assert!(decrypt_with(Vec::new(), ct.as_slice(), &[0u8; 32], &sig).is_err());
        Ok(())
    }

    #[test]
    fn every_signing_scheme_round_trips_or_is_refused() -> Result<()> {
        for id in SchemeId::SIGNING {
            with_bls_scheme!(id, round_trip, ())?;
        }
        let mut mock = quicknet();
        mock.scheme = SchemeId::InsecureMock;
        assert!(check_timelockable(&mock).is_err());
        Ok(())
    }

    #[test]
    fn bad_keys_are_refused_before_encrypting() {
        let mut info = quicknet();
        info.public_key.truncate(48);
        let e = check_timelockable(&info).unwrap_err();
        assert!(format!("{e:#}").contains("not a valid"), "{e:#}");
        let mut info = quicknet();
        info.public_key[5] ^= 1;
        assert!(encrypt_to(Vec::new(), &b"x"[..], &info, 5, false).is_err());
        assert!(encrypt_to(Vec::new(), &b"x"[..], &quicknet(), 0, false).is_err());
    }

    #[test]
    fn malformed_ciphertexts_fail_cleanly() {
        let info = quicknet();
        let sig = hex::decode(QUICKNET_SIG_1000).unwrap();
        let msg = vec![42u8; 200_000];
        let ct = encrypt_to(Vec::new(), msg.as_slice(), &info, 1000, false).unwrap();
        // Not age at all, an empty file, a truncated header.
        for junk in [&b""[..], b"hello world", &ct[..40]] {
            assert!(read_header(junk).is_err());
            assert!(decrypt_with(Vec::new(), junk, &info.hash(), &sig).is_err());
        }
        // Flip bytes everywhere: header, stanza body, MAC, payload; truncate.
        let mut step = 1;
        let mut i = 0;
        while i < ct.len() {
            let mut bad = ct.clone();
            bad[i] ^= 0x55;
            let mut out = Vec::new();
            let r = decrypt_with(&mut out, bad.as_slice(), &info.hash(), &sig);
            assert!(
                r.is_err() || out == msg,
                "byte {i} flipped gave other plaintext"
            );
            let _ = read_header(bad.as_slice());
            i += step;
            if i > 400 {
                step = 4099;
            }
        }
        for cut in [ct.len() - 1, ct.len() - 20_000, 300] {
            assert!(decrypt_with(Vec::new(), &ct[..cut], &info.hash(), &sig).is_err());
        }
        // An age file for another kind of recipient (a tlock stanza renamed).
        let text = String::from_utf8_lossy(&ct[..200]).replace("-> tlock ", "-> xlock ");
        let mut other = text.into_bytes();
        other.extend_from_slice(&ct[200..]);
        let e = read_header(other.as_slice()).unwrap_err().to_string();
        assert!(e.contains("tlock"), "{e}");
    }

    #[test]
    fn atomic_writes_leave_nothing_on_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        std::fs::write(&path, b"old").unwrap();
        let r: Result<()> = write_atomically(&path, |w| {
            w.write_all(b"partial")?;
            bail!("boom")
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        let fresh = dir.path().join("fresh.bin");
        assert!(write_atomically(&fresh, |_| -> Result<()> { bail!("boom") }).is_err());
        assert!(!fresh.exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_atomically(&path, |w| Ok(w.write_all(b"new")?)).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }
}
