//! `sbft-beacon tle` end to end, against small stand-ins of a node's HTTP API
//! (drand's v1 `/info` and `/public/{round}`, `common/standin.rs`) with a key
//! made here: a round
//! is served only once it is due, so a file locked a few seconds ahead opens
//! only after them; a server that lies about a signature, or serves another
//! chain, is caught; nothing is written to `-o` when decryption fails.

mod common;

use beacon::{Beacon, ChainInfo, ChainInfoJson};
use common::standin::{chain, now, serve, Behaviour, Chain};
use std::io::{BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sbft-beacon"))
}

fn dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or_default()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

fn ok(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let out = run(args, stdin);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fails(args: &[&str], stdin: Option<&[u8]>) -> String {
    let out = run(args, stdin);
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn plaintext() -> Vec<u8> {
    (0..300_000u32).map(|i| (i * 31 % 253) as u8).collect()
}

fn header_round(file: &Path) -> u64 {
    let f = std::fs::File::open(file).unwrap();
    tlock_age::decrypt_header(BufReader::new(f))
        .unwrap()
        .round()
}

#[test]
fn a_file_opens_only_once_its_round_is_out() {
    // Period 1, genesis 20 s ago: round r is due at genesis + r - 1.
    let c = chain::<beacon::MinSigUnchained>(1, 1, now() - 20);
    let info = c.info.clone();
    let url = serve(c, Behaviour::Honest);
    let d = dir();
    let (input, locked, out) = (
        d.path().join("in"),
        d.path().join("locked"),
        d.path().join("out"),
    );
    std::fs::write(&input, plaintext()).unwrap();

    let before = now();
    let enc = ok(
        &[
            "tle",
            "encrypt",
            "--duration",
            "5s",
            "--url",
            &url,
            "-o",
            p(&locked),
            p(&input),
        ],
        None,
    );
    let after = now();
    let note = String::from_utf8_lossy(&enc.stderr);
    let round = header_round(&locked);
    let due = info.time_of_round(round);
    // The first round due at or after the command's (whole-second, rounded
    // up) now + 5 s, that now being in [before, after + 1].
    assert!(due >= before + 5 && due <= after + 6, "round {round}");
    assert!(info.time_of_round(round - 1) < after + 6, "round {round}");
    assert!(note.contains(&format!("round {round}")), "{note}");

    // Not out yet: a clear error, the due time, and no output file.
    let e = fails(
        &["tle", "decrypt", "--url", &url, "-o", p(&out), p(&locked)],
        None,
    );
    // `tle` rounds its clock up to the second: a whole second before.
    if now() + 1 < due {
        assert!(
            e.contains(&format!("round {round}")) && e.contains("not out yet"),
            "{e}"
        );
        assert!(e.contains(" UTC") && e.contains("in "), "{e}");
    } // else: this machine took over 4 s to run two commands.
    assert!(!out.exists());
    assert_eq!(
        std::fs::read_dir(d.path()).unwrap().count(),
        2,
        "no temporary left"
    );

    // Once due, it opens: to a file, and from stdin to stdout.
    while now() < info.time_of_round(round) + 1 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    ok(
        &["tle", "decrypt", "--url", &url, "-o", p(&out), p(&locked)],
        None,
    );
    assert!(std::fs::read(&out).unwrap() == plaintext());
    let ct = std::fs::read(&locked).unwrap();
    let stdout = ok(&["tle", "decrypt", "--url", &url], Some(&ct)).stdout;
    assert!(stdout == plaintext());
}

#[test]
fn encrypt_refuses_what_cannot_be_timelocked() {
    let d = dir();
    let input = d.path().join("in");
    std::fs::write(&input, b"secret").unwrap();
    let locked = d.path().join("locked");

    // A chained scheme: refused, naming it.
    let url = serve(chain::<beacon::MinPk>(2, 3, now()), Behaviour::Honest);
    let e = fails(
        &[
            "tle",
            "encrypt",
            "--round",
            "100000",
            "--url",
            &url,
            p(&input),
        ],
        None,
    );
    assert!(
        e.contains("pedersen-bls-chained") && e.contains("chained"),
        "{e}"
    );
    // Period 0: no due times.
    let url = serve(
        chain::<beacon::MinSigUnchained>(3, 0, now()),
        Behaviour::Honest,
    );
    let e = fails(
        &[
            "tle",
            "encrypt",
            "--duration",
            "1h",
            "--url",
            &url,
            p(&input),
        ],
        None,
    );
    assert!(e.contains("period 0"), "{e}");
    // A past round: refused unless forced.
    let url = serve(
        chain::<beacon::MinSigUnchained>(4, 3, now() - 300),
        Behaviour::Honest,
    );
    let e = fails(
        &[
            "tle",
            "encrypt",
            "--round",
            "2",
            "--url",
            &url,
            "-o",
            p(&locked),
            p(&input),
        ],
        None,
    );
    assert!(e.contains("round 2") && e.contains("--force"), "{e}");
    assert!(!locked.exists());
    // A malformed duration, a missing round, both.
    let e = fails(
        &[
            "tle",
            "encrypt",
            "--duration",
            "10",
            "--url",
            &url,
            p(&input),
        ],
        None,
    );
    assert!(e.contains("malformed duration"), "{e}");
    fails(&["tle", "encrypt", "--url", &url, p(&input)], None);
    fails(
        &[
            "tle",
            "encrypt",
            "--round",
            "5",
            "--duration",
            "5s",
            p(&input),
        ],
        None,
    );
    // No node there.
    let e = fails(
        &[
            "tle",
            "encrypt",
            "--duration",
            "5s",
            "--url",
            "http://127.0.0.1:9",
            p(&input),
        ],
        None,
    );
    assert!(e.contains("127.0.0.1:9"), "{e}");
}

#[test]
fn decrypt_checks_the_chain_and_the_signature() {
    let c = chain::<beacon::MinPkUnchained>(5, 3, now() - 600);
    let info = c.info.clone();
    let honest = serve(c, Behaviour::Honest);
    let liar = serve(
        chain::<beacon::MinPkUnchained>(5, 3, now() - 600),
        Behaviour::Lies,
    );
    let behind = serve(
        chain::<beacon::MinPkUnchained>(5, 3, now() - 600),
        Behaviour::Behind,
    );
    let other = serve(
        chain::<beacon::MinPkUnchained>(6, 3, now() - 600),
        Behaviour::Honest,
    );
    let d = dir();
    let (input, locked, armored, out) = (
        d.path().join("in"),
        d.path().join("locked"),
        d.path().join("locked.age"),
        d.path().join("out"),
    );
    std::fs::write(&input, plaintext()).unwrap();
    // Offline, from a chain info file; a past round, forced; armored too.
    let info_file = d.path().join("info.json");
    std::fs::write(
        &info_file,
        serde_json::to_string(&ChainInfoJson::from(&info)).unwrap(),
    )
    .unwrap();
    let enc = ok(
        &[
            "tle",
            "encrypt",
            "--round",
            "7",
            "--force",
            "--chain-info",
            p(&info_file),
            "-o",
            p(&locked),
            p(&input),
        ],
        None,
    );
    assert!(String::from_utf8_lossy(&enc.stderr).contains("ago"));
    let armor = ok(
        &[
            "tle",
            "encrypt",
            "-r",
            "7",
            "-f",
            "-a",
            "--chain-info",
            p(&info_file),
            p(&input),
        ],
        None,
    );
    assert!(armor
        .stdout
        .starts_with(b"-----BEGIN AGE ENCRYPTED FILE-----"));
    std::fs::write(&armored, &armor.stdout).unwrap();

    // A lying node: the signature does not verify, nothing is written.
    let e = fails(
        &["tle", "decrypt", "--url", &liar, "-o", p(&out), p(&locked)],
        None,
    );
    assert!(
        e.contains("does not verify") && e.contains("round 7"),
        "{e}"
    );
    assert!(!out.exists());
    // A node of another chain.
    let e = fails(
        &["tle", "decrypt", "--url", &other, "-o", p(&out), p(&locked)],
        None,
    );
    assert!(
        e.contains(&hex::encode(info.hash())) && e.contains("serves chain"),
        "{e}"
    );
    // A node that has not got the round though it is due.
    let e = fails(
        &[
            "tle",
            "decrypt",
            "--url",
            &behind,
            "-o",
            p(&out),
            p(&locked),
        ],
        None,
    );
    assert!(
        e.contains("round 7") && e.contains("ago") && e.contains("404 Not Found"),
        "{e}"
    );
    // An existing output is left alone on failure.
    std::fs::write(&out, b"keep me").unwrap();
    fails(
        &["tle", "decrypt", "--url", &liar, "-o", p(&out), p(&locked)],
        None,
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");

    // The honest node opens both, overwriting the output.
    ok(
        &[
            "tle",
            "decrypt",
            "--url",
            &honest,
            "-o",
            p(&out),
            p(&locked),
        ],
        None,
    );
    assert!(std::fs::read(&out).unwrap() == plaintext());
    ok(
        &[
            "tle",
            "decrypt",
            "-u",
            &format!("{honest}/"),
            "-o",
            p(&out),
            p(&armored),
        ],
        None,
    );
    assert!(std::fs::read(&out).unwrap() == plaintext());

    // Malformed files fail cleanly (no panic: `run` checks).
    let junk = d.path().join("junk");
    for bytes in [
        &b""[..],
        b"not age",
        b"age-encryption.org/v1\n-> X25519 abc\n",
    ] {
        std::fs::write(&junk, bytes).unwrap();
        let e = fails(
            &["tle", "decrypt", "--url", &honest, "-o", p(&out), p(&junk)],
            None,
        );
        assert!(e.contains("junk"), "{e}");
    }
    let mut bad = std::fs::read(&locked).unwrap();
    let n = bad.len();
    bad[n - 100] ^= 1;
    std::fs::write(&junk, &bad).unwrap();
    std::fs::remove_file(&out).unwrap();
    fails(
        &["tle", "decrypt", "--url", &honest, "-o", p(&out), p(&junk)],
        None,
    );
    assert!(!out.exists());
    let e = fails(
        &[
            "tle",
            "decrypt",
            "--url",
            &honest,
            p(&d.path().join("missing")),
        ],
        None,
    );
    assert!(e.contains("missing"), "{e}");
}

#[test]
fn help_lists_the_interface() {
    let out = ok(&["tle", "encrypt", "--help"], None);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--round",
        "--duration",
        "--url",
        "--chain-info",
        "--cacert",
        "--output",
        "[INPUT]",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
    let out = ok(&["tle", "decrypt", "--help"], None);
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--url",
        "--cacert",
        "--output",
        "[INPUT]",
        "http://127.0.0.1:8000",
    ] {
        assert!(help.contains(flag), "{flag}: {help}");
    }
}

/// A file made by drand's own Go `tle` (armored), from drand/tlock's
/// `testdata/lorem-tle-testnet-quicknet-t-2024-01-17-15-28.tle`: the
/// `testdata/lorem.txt` there (1063 bytes of lorem ipsum) locked to round
/// 5423142 of drand's testnet chain quicknet-t (bls-unchained-g1-rfc9380).
const DRAND_TLE_FILE: &str = "-----BEGIN AGE ENCRYPTED FILE-----
YWdlLWVuY3J5cHRpb24ub3JnL3YxCi0+IHRsb2NrIDU0MjMxNDIgY2M5YzM5ODQ0
MjczN2NiZDE0MTUyNjYwMDkxOWVkZDY5ZjFkNmY5YjRhZGI2N2U0ZDkxMmZiYzY0
MzQxYTlhNQpoek0rRzZyMFgvcjdxc0tlUnlyZ2wwbUc2ZFlDajdTeFhNUncvY2ZV
RWhNWE0vYklaOGU4VnUxU3RxNkZHV3RMCkRSVnVaYm9BT0xQR1VoQVhzNjdReEY4
eEFSMjBveWJNZGZUMHFOZU43U1J4V0ZQU1hYck80dTZZcUtBZGl3MGcKaG9tU3BK
dTdqZnAzVnZpb0JKTVA1WXlaYzVqM0wrakhMYU9xdHBoUExKdwotLS0gdEJwcFZR
VUdabkVMVTF6TWFMb040VHp4Wmp2RFMxM29zTjVvQ0ppN1d0bwr0aKdwOuhX9epf
ewK2KOYCOM6p+cEzMFxYGUGjjui/NiDG4h8ih0fdr+N3Ig81+GH3h9KcfdkbZHV6
L+hEGVZvAwWcOXi45iSCfUQO6ID4YA9/4AuxjnlSnwXFKcdwc4lMyhQdKE2Fe9j2
SHG++eFe7fQi9M64ic3FOcNcrBXDNCmv7qUhSBxW8fFZjoJER5+oZd61yArLldMh
KWByL5iyg83cSfB79e9mHnAk/Y4fznlJzkgVc8eh9CWvY2rtVufwmUYZoBKnFd80
M0FwnrvLDZmujUpiikZopEql4x8OUxhkrWfqoFfInUWnekP/rNbYhgs2ySS33/5C
4K1ppS070rMysVoFMzpyiGFmQymx0JPh+vQ+kPGjtTrN2KplQ7XRMNehNeDjc++i
fukz/ILwOvoWZBlHdS/IWR6TS4lK6PEQaRBq8jOX5zNOIdTCNfjy2i9JVuQwLA3l
dz6+JWEiq9k25MPciF6zKvsxkmDvlamacmu2SXoo11lkW7o1QlWG8602+Uk4FYi8
HukJ8PHWAxC3fJf1Tb0EeUIcKG2hbXkzCOb/KlmsYZpPeDgoYS1WGiOlvXorjqHI
Cv0y2K+LakpgFM17whY47rpf+gwPbbf5i+wOCSQ31rlgECjJbrEctVaGIohCEDhF
xh+MQcPzAkKgTPWkd7xEFJyAch87V4/crCVYGBWRkB+oG+g3l5RHcANKtDmdGMCK
nLZ98aAXr4UIl/dLloctp+akmjUN0lYbbHWeYN+Qp1WwpD4j3xPgO9k7kHLR9gR1
9eYX/Esk9AaAjcLWT041WH3CsrfMBh1Hm5zA0HEa0mcKjNPfPA+7U6yix8JSiDj3
bG4Sb+jtHdQfISpGM+Bo9VatM1kFTMSVTPDsuSTRxuOdfUdk4sum4AxWuug5u+AN
ffHVI7+RCHguatWuxYNlgEcgQ2EX2+RsBjbTjmUD+nNGRzMEh9MdFwdImhlgwUin
zLZXP6MAsri7YOTWiD21zJ5shxaPhWi2ERDrnjYTs9P95BPiT025gMn/MMHcqqpz
hNVN7hY8TpaKxXm9DErYD5h+qs87zVX24isfxw1Ix0eX42+tU1CbSRoG/NbxMdQV
fq/Aeim86Fq7Q3BsrlJ6YfB8bMILSB2VfgfbWwIkg2972LZttgTLk1Q4eeZGODUL
RgqTJ7w6GTdHDphbjckAo5JmRlHTt7Bl2vnRZIrsD09I+hmkT8NfRc9R3Gy4q6jD
jroKDtZJzOahH9pGQAZoR2714upgZK5541KgA4bbeMnPb84+1g+FxEj6q/t1uCgv
3WhuJtmwHAbRw5abwJz+HkiXBWYfp2oyVG2ZJ+XjQFcnYiYx2HSm73ly1ICS36Qq
rw4ve/c4w5gUoOZJ+YTmoWJHdmKo6GbD+OV3yBOUbhMu/mUyKWwDyFZE/TYNBV1y
yFtROCURe6axDDcOUgR+QEsl8oKXA6rppMwIeMg=
-----END AGE ENCRYPTED FILE-----
";

/// drand's quicknet-t chain info (its `/info`): the hash below is checked by
/// `ChainInfoJson::to_info`.
fn quicknet_t() -> ChainInfo {
    let json = r#"{
        "public_key": "b15b65b46fb29104f6a4b5d1e11a8da6344463973d423661bb0804846a0ecd1ef93c25057f1c0baab2ac53e56c662b66072f6d84ee791a3382bfb055afab1e6a375538d8ffc451104ac971d2dc9b168e2d3246b0be2015969cbaac298f6502da",
        "period": 3,
        "genesis_time": 1689232296,
        "hash": "cc9c398442737cbd141526600919edd69f1d6f9b4adb67e4d912fbc64341a9a5",
        "groupHash": "40d49d910472d4adb1d67f65db8332f11b4284eecf05c05c5eacd5eef7d40e2d",
        "schemeID": "bls-unchained-g1-rfc9380",
        "metadata": {"beaconID": "quicknet-t"}
    }"#;
    serde_json::from_str::<ChainInfoJson>(json)
        .unwrap()
        .to_info()
        .unwrap()
}

/// quicknet-t's round 5423142 signature (verified below under its key).
const QUICKNET_T_SIG_5423142: &str =
    "96fce8e2f70e2784577c8f2d8bd36af7a4b0dfd73dd91469d8556b36d2973a4f84681a45b1af2ce0511e5a32dd72508f";

#[test]
fn decrypts_a_file_made_by_drands_go_tle() {
    let info = quicknet_t();
    let sig = hex::decode(QUICKNET_T_SIG_5423142).unwrap();
    let round = 5_423_142;
    info.verify_beacon(&Beacon::new(info.scheme, round, sig.clone(), &[]))
        .unwrap();
    // A stand-in relay of quicknet-t serving its real round 5423142 (and,
    // for other rounds, that same signature, which verifies for none).
    let url = serve(
        Chain {
            info: info.clone(),
            sign: Box::new(move |_| sig.clone()),
        },
        Behaviour::Honest,
    );
    let d = dir();
    let (file, out) = (d.path().join("lorem.tle"), d.path().join("lorem.txt"));
    std::fs::write(&file, DRAND_TLE_FILE).unwrap();
    assert_eq!(header_round(&file), round);
    ok(
        &["tle", "decrypt", "--url", &url, "-o", p(&out), p(&file)],
        None,
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.len(), 1063);
    assert!(text.starts_with("Lorem ipsum dolor sit amet, consectetur adipiscing elit."));
    assert!(text.ends_with("per conubia nostra, per inceptos himenaeos.\n"));

    // And our own file for the same chain and round opens the same way.
    let info_file = d.path().join("info.json");
    std::fs::write(
        &info_file,
        serde_json::to_string(&ChainInfoJson::from(&info)).unwrap(),
    )
    .unwrap();
    let ours = d.path().join("ours.tle");
    ok(
        &[
            "tle",
            "encrypt",
            "-r",
            "5423142",
            "-f",
            "-a",
            "--chain-info",
            p(&info_file),
            "-o",
            p(&ours),
            p(&out),
        ],
        None,
    );
    let again = ok(&["tle", "decrypt", "--url", &url, p(&ours)], None);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
}
