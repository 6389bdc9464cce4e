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
//!
//! `--url` is http or https (`--cacert FILE` for a private CA): the client is
//! [`node_cli::http_client`]'s.
//!
//! Files: here the arguments and the two commands; `time.rs` durations,
//! rounds and dates; `lock.rs` the timelock itself; `fetch.rs` the node's
//! API; `files.rs` input and output files.

mod fetch;
mod files;
mod lock;
#[cfg(test)]
mod tests;
mod time;

pub(crate) use time::parse_duration;

use anyhow::{bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfo};
use clap::{ArgGroup, Args, Subcommand};
use fetch::fetch_info;
use files::{input_name, is_stdio, open_input, write_atomically};
use lock::{check_timelockable, decrypt_with, encrypt_to, parse_info, read_header, Header};
use node_cli::http_client::{base_url, runtime, ApiClient, TlsArgs};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use time::{fmt_from_now, fmt_utc, now_ceil, round_at_or_after};

/// The HTTP API of a local node by default: node 0 of `deploy compose
/// --publish-http 8000` and the example `node.toml` (`http = "127.0.0.1:8000"`).
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:8000";

/// How long one HTTP request may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of `tle`.
#[derive(Args)]
pub(crate) struct TleArgs {
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
pub(crate) struct EncryptArgs {
    /// Round to encrypt to.
    #[arg(long, short = 'r')]
    round: Option<u64>,
    /// Encrypt to the first round due at or after now + DURATION: a number and
    /// a unit, or several (`90s`, `5m`, `2h`, `1d`, `1w`, `1M`, `1y`, `1d12h`),
    /// as drand's `tle` (`M` months and `y` years are calendar ones, in UTC).
    #[arg(long, short = 'D')]
    duration: Option<String>,
    /// A node's or a relay's HTTP API (drand's v1 shape, http or https) to
    /// read the chain info from (`{URL}/info`).
    #[arg(long, short = 'u', default_value = DEFAULT_URL, conflicts_with = "chain_info")]
    url: String,
    /// `--cacert FILE`, for an https `--url`.
    #[command(flatten)]
    tls: TlsArgs,
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
pub(crate) struct DecryptArgs {
    /// A node's or a relay's HTTP API (drand's v1 shape, http or https)
    /// serving the file's chain: `{URL}/info` and `{URL}/public/{round}` (or
    /// `{URL}/{chain hash}/...`).
    #[arg(long, short = 'u', default_value = DEFAULT_URL)]
    url: String,
    /// `--cacert FILE`, for an https `--url`.
    #[command(flatten)]
    tls: TlsArgs,
    /// Write the plaintext to FILE (default: standard output); created only if
    /// decryption succeeds.
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,
    /// Timelocked file, binary or armored (default, or `-`: standard input).
    #[arg(value_name = "INPUT")]
    input: Option<PathBuf>,
}

/// Runs `tle encrypt` or `tle decrypt`.
pub(crate) fn run(args: TleArgs) -> Result<()> {
    match args.command {
        TleCommand::Encrypt(a) => encrypt_cmd(a),
        TleCommand::Decrypt(a) => decrypt_cmd(a),
    }
}

fn encrypt_cmd(args: EncryptArgs) -> Result<()> {
    let now = now_ceil()?;
    let duration = match &args.duration {
        Some(d) => Some(parse_duration(d, now)?),
        None => None,
    };
    let info = match &args.chain_info {
        Some(_) if args.tls.cacert.is_some() => {
            bail!("--cacert is for an https --url; --chain-info reads a file")
        }
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let value = serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?;
            parse_info(value, &path.display().to_string())?
        }
        None => {
            let base = base_url(&args.url)?;
            let client = ApiClient::new(&args.tls, HTTP_TIMEOUT)?;
            runtime()?.block_on(fetch_info(&client, &base))?
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
    client: &ApiClient,
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
    client: &ApiClient,
    base: &str,
    info: &ChainInfo,
    round: u64,
) -> Result<Beacon> {
    let hash = hex::encode(info.hash());
    let url = format!("{base}/public/{round}");
    let value = match client.get_json(&url).await {
        Ok(v) => v,
        Err(e) => {
            let now = now_ceil()?;
            let due = info.time_of_round(round);
            let latest = client
                .get_json(&format!("{base}/public/latest"))
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
    let client = ApiClient::new(&args.tls, HTTP_TIMEOUT)?;
    let (info, beacon) = runtime()?.block_on(async {
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
