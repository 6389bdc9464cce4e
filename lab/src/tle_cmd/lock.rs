//! The timelock itself, without the network: which chains can be
//! timelocked, encryption to a round, a locked file's header, and
//! decryption with the round's signature.

use anyhow::{anyhow, bail, Context, Result};
use beacon::{ChainInfo, ChainInfoJson, Point, SchemeId, G1, G2};
use std::io::{Read, Write};

/// The hash-to-curve DST of a signing scheme.
pub(super) fn scheme_dst(scheme: SchemeId) -> Result<&'static [u8]> {
    fn dst<S: beacon::Scheme>(_: ()) -> Result<&'static [u8]> {
        Ok(S::DST)
    }
    with_bls_scheme!(scheme, dst, ())
}

/// Checks that `info`'s chain can be timelocked with `tlock`: an unchained
/// scheme whose signature group and DST are the ones `tlock` hashes round
/// numbers with (RFC 9380 `..._RO_NUL_` in G1 or G2), and a valid key.
pub(super) fn check_timelockable(info: &ChainInfo) -> Result<()> {
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
pub(super) fn parse_info(value: serde_json::Value, from: &str) -> Result<ChainInfo> {
    let json: ChainInfoJson = serde_json::from_value(value)
        .with_context(|| format!("{from} is not drand's chain info (/info) JSON"))?;
    json.to_info()
        .with_context(|| format!("chain info from {from}"))
}

/// Encrypts `src` to `round` of `info`'s chain into `dst` (armored if
/// `armor`). `info` must pass [`check_timelockable`].
pub(super) fn encrypt_to<W: Write, R: Read>(
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
pub(super) struct Header {
    /// The round it is locked to.
    pub round: u64,
    /// The chain hash it is locked to.
    pub chain_hash: Vec<u8>,
}

/// Reads the round and chain hash of a timelocked file (binary or armored).
pub(super) fn read_header<R: Read>(src: R) -> Result<Header> {
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
pub(super) fn decrypt_with<W: Write, R: Read>(
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
pub(super) fn guard_panics<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
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
