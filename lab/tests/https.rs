//! The client commands over https, with nothing from outside: a CA made here
//! signs the certificate of a local TLS server (`common::tls`) in front of
//! plain-HTTP stand-ins (`common::standin`): a chain with a key made here
//! whose rounds come due as the test runs, and a replay of drand's published
//! quicknet rounds (`beacon/tests/data/drand-mainnet.json`). With the CA
//! given by `--cacert`, `tle encrypt` and `tle decrypt`, `verify --url` and
//! `health` work through it; with another CA, none, or a certificate for
//! another name, each is refused with an error that names the server and the
//! reason, and writes nothing; on a machine with no CA certificate, http
//! still works and https needs `--cacert`.

mod common;

use common::standin::{chain, now, serve, serve_paths, Behaviour};
use common::tls::{https_proxy, https_proxy_for, TestCa};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

fn sbft(args: &[&str]) -> Output {
    sbft_with_roots(args, None)
}

/// Runs the binary with the platform's roots, or with those of `roots`
/// (`SSL_CERT_FILE` and `SSL_CERT_DIR`, as rustls-native-certs reads them).
fn sbft_with_roots(args: &[&str], roots: Option<(&Path, &Path)>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_sbft-beacon"));
    command.args(args);
    match roots {
        Some((file, dir)) => command.env("SSL_CERT_FILE", file).env("SSL_CERT_DIR", dir),
        None => command
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR"),
    };
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    out
}

fn ok(args: &[&str]) -> Output {
    let out = sbft(args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn fails(args: &[&str]) -> String {
    let out = sbft(args);
    assert!(!out.status.success(), "{args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn plaintext() -> Vec<u8> {
    (0..100_000u32).map(|i| (i * 29 % 251) as u8).collect()
}

/// drand's quicknet as its relays serve it, from the published rounds the
/// repository carries (1, 2, 3 and 657413; the latest is the last of them).
fn quicknet_replay() -> (serde_json::Value, String) {
    let vectors: serde_json::Value =
        serde_json::from_str(include_str!("../../beacon/tests/data/drand-mainnet.json")).unwrap();
    let chain = vectors["chains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["info"]["metadata"]["beaconID"] == "quicknet")
        .expect("quicknet in the vectors")
        .clone();
    let info = chain["info"].clone();
    let beacons: Vec<serde_json::Value> = chain["beacons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            serde_json::json!({
                "round": b["round"], "randomness": b["randomness"], "signature": b["signature"]
            })
        })
        .collect();
    let served = info.clone();
    let url = serve_paths(move |path| {
        let round = match path {
            "/info" => return ("200 OK", served.to_string()),
            "/public/latest" => beacons.iter().filter_map(|b| b["round"].as_u64()).max(),
            p => p.strip_prefix("/public/").and_then(|r| r.parse().ok()),
        };
        match beacons
            .iter()
            .find(|b| round.is_some() && b["round"].as_u64() == round)
        {
            Some(b) => ("200 OK", b.to_string()),
            None => ("404 Not Found", "not found\n".into()),
        }
    });
    (info, url)
}

#[test]
fn tle_encrypts_and_decrypts_through_https() {
    let ca = TestCa::new("tle");
    let d = tempfile::tempdir().unwrap();
    let cacert = d.path().join("ca.pem");
    ca.write_pem(&cacert);
    // A chain of ours, one round a second since 20 s ago, behind TLS.
    let c = chain::<beacon::MinSigUnchained>(11, 1, now() - 20);
    let info = c.info.clone();
    let url = https_proxy(&serve(c, Behaviour::Honest), &ca);
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let (input, locked, out) = (
        d.path().join("in"),
        d.path().join("locked"),
        d.path().join("out"),
    );
    std::fs::write(&input, plaintext()).unwrap();
    let tls = ["--url", &url, "--cacert", p(&cacert)];

    let enc = ok(&[
        &["tle", "encrypt", "--duration", "3s"][..],
        &tls,
        &["-o", p(&locked), p(&input)],
    ]
    .concat());
    let note = String::from_utf8_lossy(&enc.stderr);
    let round = tlock_age::decrypt_header(std::fs::File::open(&locked).unwrap())
        .unwrap()
        .round();
    assert!(note.contains(&format!("round {round}")), "{note}");
    let due = info.time_of_round(round);
    let early = sbft(&[&["tle", "decrypt"][..], &tls, &["-o", p(&out), p(&locked)]].concat());
    // `tle` rounds its clock up to the second: a whole second before.
    if now() + 1 < due {
        let e = String::from_utf8_lossy(&early.stderr);
        assert!(!early.status.success() && e.contains("not out yet"), "{e}");
        assert!(!out.exists());
    }
    while now() < due + 1 {
        std::thread::sleep(Duration::from_millis(200));
    }
    ok(&[&["tle", "decrypt"][..], &tls, &["-o", p(&out), p(&locked)]].concat());
    assert!(std::fs::read(&out).unwrap() == plaintext());
    // A trailing slash and the short flag work as over http.
    let slash = format!("{url}/");
    ok(&[
        "tle",
        "decrypt",
        "-u",
        &slash,
        "--cacert",
        p(&cacert),
        "-o",
        p(&out),
        p(&locked),
    ]);
    assert!(std::fs::read(&out).unwrap() == plaintext());
}

#[test]
fn drands_quicknet_rounds_verify_and_open_through_https() {
    let ca = TestCa::new("quicknet");
    let d = tempfile::tempdir().unwrap();
    let cacert = d.path().join("ca.pem");
    ca.write_pem(&cacert);
    let (info, plain_url) = quicknet_replay();
    let url = https_proxy(&plain_url, &ca);
    let tls = ["--url", &url, "--cacert", p(&cacert)];

    // drand's rounds 1..=3, each under quicknet's key, fetched over https.
    let out = ok(&[&["verify"][..], &tls, &["--from", "1", "--to", "3"]].concat());
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        report.starts_with("ok: rounds 1..=3 (3 beacons) of chain ")
            && report.contains(info["hash"].as_str().unwrap()),
        "{report}"
    );

    // A file locked to quicknet's round 3 (long out: --force) opens with
    // drand's own signature of that round, fetched over https.
    let (input, locked, out) = (
        d.path().join("in"),
        d.path().join("locked.age"),
        d.path().join("out"),
    );
    std::fs::write(&input, plaintext()).unwrap();
    let enc = ok(&[
        &["tle", "encrypt", "--round", "3", "--force", "--armor"][..],
        &tls,
        &["-o", p(&locked), p(&input)],
    ]
    .concat());
    let note = String::from_utf8_lossy(&enc.stderr);
    assert!(note.contains(info["hash"].as_str().unwrap()), "{note}");
    ok(&[&["tle", "decrypt"][..], &tls, &["-o", p(&out), p(&locked)]].concat());
    assert!(std::fs::read(&out).unwrap() == plaintext());
}

#[test]
fn health_probes_through_https() {
    let ca = TestCa::new("health");
    let d = tempfile::tempdir().unwrap();
    let cacert = d.path().join("ca.pem");
    ca.write_pem(&cacert);
    let c = chain::<beacon::MinSigUnchained>(12, 1, now() - 5);
    let up = https_proxy(&serve(c, Behaviour::Honest), &ca);
    let out = ok(&["health", "--url", &up, "--cacert", p(&cacert)]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("200 OK"));
    // A node that is behind: the probe fails, saying what the node said.
    let c = chain::<beacon::MinSigUnchained>(13, 1, now() - 5);
    let behind = https_proxy(&serve(c, Behaviour::Behind), &ca);
    let e = fails(&["health", "--url", &behind, "--cacert", p(&cacert)]);
    assert!(e.contains("503"), "{e}");
    // --cacert is for a URL.
    let e = fails(&["health", "--cacert", p(&cacert)]);
    assert!(e.contains("--cacert"), "{e}");
}

/// Every client command, refused the same way: the error's first line names
/// the server (`127.0.0.1:PORT`) and the reason, and nothing is written.
#[test]
fn a_certificate_not_trusted_is_refused_naming_the_server_and_the_reason() {
    let (ours, other) = (TestCa::new("ours"), TestCa::new("other"));
    let d = tempfile::tempdir().unwrap();
    let (our_pem, other_pem) = (d.path().join("ours.pem"), d.path().join("other.pem"));
    ours.write_pem(&our_pem);
    other.write_pem(&other_pem);
    let c = chain::<beacon::MinSigUnchained>(14, 1, now() - 60);
    let info = c.info.clone();
    let plain = serve(c, Behaviour::Honest);
    let url = https_proxy(&plain, &ours);
    let server = url.strip_prefix("https://").unwrap().to_string();
    let (input, locked, out) = (
        d.path().join("in"),
        d.path().join("locked"),
        d.path().join("out"),
    );
    std::fs::write(&input, plaintext()).unwrap();
    // A file to decrypt, made offline.
    let info_file = d.path().join("info.json");
    std::fs::write(
        &info_file,
        serde_json::to_string(&beacon::ChainInfoJson::from(&info)).unwrap(),
    )
    .unwrap();
    ok(&[
        "tle",
        "encrypt",
        "-r",
        "5",
        "-f",
        "--chain-info",
        p(&info_file),
        "-o",
        p(&locked),
        p(&input),
    ]);

    let first_line = |e: &str| {
        e.lines()
            .find_map(|l| l.strip_prefix("Error: "))
            .unwrap_or_default()
            .to_string()
    };
    let commands = |cacert: Option<&Path>, url: &str| -> Vec<Vec<String>> {
        let tls: Vec<String> = match cacert {
            Some(path) => vec![
                "--url".into(),
                url.into(),
                "--cacert".into(),
                p(path).into(),
            ],
            None => vec!["--url".into(), url.into()],
        };
        let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = head.iter().map(|s| s.to_string()).collect();
            v.extend(tls.iter().cloned());
            v.extend(tail.iter().map(|s| s.to_string()));
            v
        };
        vec![
            with(
                &["tle", "encrypt", "--duration", "1m"],
                &["-o", p(&out), p(&input)],
            ),
            with(&["tle", "decrypt"], &["-o", p(&out), p(&locked)]),
            with(&["verify"], &[]),
            with(&["health"], &[]),
        ]
    };
    // Another CA, and only the platform's roots.
    for (cacert, trusted) in [
        (
            Some(other_pem.as_path()),
            format!("or in {}", p(&other_pem)),
        ),
        (None, "the platform's root store".to_string()),
    ] {
        for args in commands(cacert, &url) {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let e = fails(&args);
            let line = first_line(&e);
            assert!(
                line.starts_with(&format!(
                    "{server}: the server's TLS certificate is refused"
                )) && line.contains("not signed by a certificate authority")
                    && line.contains(&trusted)
                    && line.contains("--cacert FILE")
                    && line.contains("UnknownIssuer"),
                "{args:?}: {e}"
            );
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
        }
    }
    // Our CA, but a certificate for another name.
    let elsewhere = https_proxy_for(&plain, &ours, &["beacon.invalid"]);
    let server = elsewhere.strip_prefix("https://").unwrap().to_string();
    for args in commands(Some(&our_pem), &elsewhere) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let line = first_line(&fails(&args));
        assert!(
            line.starts_with(&format!(
                "{server}: the server's TLS certificate is refused"
            )) && line.contains("not issued for 127.0.0.1"),
            "{args:?}: {line}"
        );
    }
    // https to a plain-HTTP server.
    let to_http = plain.replace("http://", "https://");
    for args in [
        &["verify", "--url", &to_http][..],
        &[
            "tle",
            "encrypt",
            "-D",
            "1m",
            "--url",
            &to_http,
            "-o",
            p(&out),
            p(&input),
        ],
    ] {
        let line = first_line(&fails(args));
        assert!(
            line.starts_with(to_http.strip_prefix("https://").unwrap())
                && line.contains("TLS handshake")
                && line.contains("does it speak https?"),
            "{args:?}: {line}"
        );
    }
    assert!(!out.exists());
    // A --cacert that is not a certificate, or is missing, is named.
    let junk = d.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    for bad in [&junk, &d.path().join("missing.pem")] {
        let e = fails(&["verify", "--url", &url, "--cacert", p(bad)]);
        assert!(e.contains(p(bad)), "{e}");
    }
    // And with our CA all four work.
    for args in commands(Some(&our_pem), &url) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args);
    }
    assert!(std::fs::read(&out).unwrap() == plaintext());
}

/// A machine without any CA certificate (the node's minimal container image):
/// plain HTTP still works (the image's health check), https is refused saying
/// so, and works with `--cacert`.
#[test]
fn a_machine_without_ca_certificates_still_speaks_http_and_https_with_cacert() {
    let ca = TestCa::new("bare");
    let d = tempfile::tempdir().unwrap();
    let (no_file, no_dir, cacert) = (
        d.path().join("no-certificates.pem"),
        d.path().join("no-certificates"),
        d.path().join("ca.pem"),
    );
    std::fs::write(&no_file, "").unwrap();
    std::fs::create_dir(&no_dir).unwrap();
    ca.write_pem(&cacert);
    let bare = Some((no_file.as_path(), no_dir.as_path()));
    let plain = serve(
        chain::<beacon::MinSigUnchained>(15, 1, now() - 5),
        Behaviour::Honest,
    );
    let url = https_proxy(&plain, &ca);

    let out = sbft_with_roots(&["health", "--url", &plain], bare);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sbft_with_roots(&["health", "--url", &url], bare);
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && e.contains("it has no CA certificate at all")
            && e.contains("--cacert"),
        "{e}"
    );
    let out = sbft_with_roots(&["health", "--url", &url, "--cacert", p(&cacert)], bare);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // And SSL_CERT_FILE naming our CA is a root store like the platform's.
    let out = sbft_with_roots(
        &["verify", "--url", &url],
        Some((cacert.as_path(), no_dir.as_path())),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
