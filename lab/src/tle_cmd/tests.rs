use super::files::write_atomically;
use super::lock::{check_timelockable, decrypt_with, encrypt_to, read_header, Header};
use super::time::{
    add_months, civil_from_days, days_from_civil, fmt_from_now, fmt_utc, parse_duration,
    round_at_or_after,
};
use anyhow::{bail, Result};
use beacon::chain::round_message;
use beacon::scheme::Scheme;
use beacon::Scalar;
use beacon::{Beacon, ChainInfo, Point, SchemeId};
use rand_chacha::rand_core::SeedableRng;
use std::io::Write;

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
