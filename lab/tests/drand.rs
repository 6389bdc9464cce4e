//! What a drand user sees of a network of ours (issue 36), on real processes: a
//! quicknet-style local network (`bls-unchained-g1-rfc9380`, paced) serves
//! drand's v1 and v2 shapes; a file timelocked with `sbft-beacon tle` to a round
//! opens only once that round is out (before, the error names the round and
//! when it is due); and, where a Go toolchain is present, drand's own Go code
//! (`scripts/drand-interop`: go-clients' verifying HTTP client and drand's
//! tlock) verifies the chain, opens our ciphertexts and writes ones we open.
//! Without Go, the Go half skips with the reason printed.
//!
//! The same node's API is also reached over https, through a TLS-terminating
//! proxy whose certificate a CA made here signs (`common::tls`): `verify`,
//! `health` and `tle` with `--cacert`, and drand's Go code with the CA in
//! `SSL_CERT_FILE`, as drand's users reach drand's relays.
//!
//! The tests share the machine's two cores, so they run one at a time.

mod common;

use common::tls::{https_proxy, TestCa};
use common::{get, latest};

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

/// A `localnet --keep-running` of 4 nodes with one second per round, stopped
/// (SIGTERM) when dropped.
struct Localnet {
    child: Child,
    apis: Vec<String>,
}

impl Localnet {
    fn start(scheme: &str) -> Localnet {
        let (child, report) = common::localnet_running(
            BIN,
            &[
                "--nodes", "4", "--rounds", "3", "--period", "1", "--scheme", scheme,
            ],
        );
        assert_eq!(report["chain_verified"], true, "{report}");
        assert_eq!(report["scheme"], scheme, "{report}");
        let apis = common::report_apis(&report);
        Localnet { child, apis }
    }

    /// Waits until node 0 serves `round` (rounds are one second apart).
    fn wait_for(&self, round: u64) {
        let start = Instant::now();
        while latest(&self.apis[0]) < round {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "round {round} never came (latest {})",
                latest(&self.apis[0])
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Localnet {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

fn sbft(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `drand-interop`, built once from `scripts/drand-interop` with the Go
/// toolchain; `Err(reason)` where it cannot be (no Go, or no module proxy
/// and a cold module cache).
fn drand_interop() -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let go = Command::new("go").arg("version").output();
            if !go.is_ok_and(|o| o.status.success()) {
                return Err("no Go toolchain (`go` is not on PATH)".into());
            }
            let source = Path::new("../scripts/drand-interop");
            let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("drand-interop");
            let build = Command::new("go")
                .current_dir(source)
                .env("GOTOOLCHAIN", "local")
                .args(["build", "-trimpath", "-buildvcs=false", "-o"])
                .arg(&out)
                .arg(".")
                .output()
                .unwrap();
            if build.status.success() {
                return Ok(out);
            }
            let err = String::from_utf8_lossy(&build.stderr).into_owned();
            // Only an unreachable module proxy is a reason to skip; any other
            // failure (a compile error, a go.sum mismatch) fails the test.
            let offline = [
                "dial tcp",
                "proxy.golang.org",
                "no such host",
                "403 Forbidden",
            ]
            .iter()
            .any(|m| err.contains(m))
                && !err.contains(".go:");
            assert!(offline, "building scripts/drand-interop failed:\n{err}");
            Err(format!("the Go module proxy is unreachable: {err}"))
        })
        .as_ref()
        .map(|p| p.as_path())
        .map_err(Clone::clone)
}

fn go_tool(tool: &Path, args: &[&str]) -> Output {
    Command::new(tool).args(args).output().unwrap()
}

/// [`go_tool`] trusting the CA certificates in `cacert` only (Go reads the
/// platform's roots from `SSL_CERT_FILE`), or the platform's with `None`.
fn go_tool_trusting(tool: &Path, cacert: Option<&Path>, args: &[&str]) -> Output {
    let mut command = Command::new(tool);
    command.args(args).env_remove("SSL_CERT_DIR");
    match cacert {
        Some(path) => command.env("SSL_CERT_FILE", path),
        None => command.env_remove("SSL_CERT_FILE"),
    };
    command.output().unwrap()
}

/// A body of `len` bytes that is not all one value.
fn plaintext(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn a_quicknet_style_network_serves_drand_users() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let net = Localnet::start("bls-unchained-g1-rfc9380");
    let api = &net.apis[1];

    // drand's shapes: v1 with randomness and no previous_signature, v2 without
    // randomness; one chain, named by its scheme.
    let info = get(&format!("{api}/info")).unwrap();
    assert_eq!(info["schemeID"], "bls-unchained-g1-rfc9380");
    assert_eq!(info["period"], 1);
    let hash = info["hash"].as_str().unwrap().to_string();
    let v1 = get(&format!("{api}/public/2")).unwrap();
    let keys: Vec<&str> = v1.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys.len(), 3, "{v1}");
    for k in ["round", "randomness", "signature"] {
        assert!(keys.contains(&k), "{v1}");
    }
    let v2 = get(&format!("{api}/v2/beacons/default/rounds/2")).unwrap();
    assert_eq!(
        v2,
        serde_json::json!({"round": 2, "signature": v1["signature"]}),
        "v2 is v1 without randomness"
    );
    assert_eq!(
        get(&format!("{api}/v2/chains/{hash}/rounds/2")).unwrap(),
        v2
    );
    let v2info = get(&format!("{api}/v2/beacons/default/info")).unwrap();
    assert_eq!(v2info["scheme"], "bls-unchained-g1-rfc9380");
    assert_eq!(v2info["chain_hash"], hash.as_str());
    assert_eq!(get(&format!("{api}/v2/chains")).unwrap()[0], hash.as_str());
    common::assert_verifies(BIN, &["--url", api]);

    // A file timelocked to a round three seconds ahead: closed before, open after.
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    let body = plaintext(1 << 20);
    std::fs::write(&plain, &body).unwrap();
    let locked = dir.path().join("locked.age");
    let target = latest(api) + 3;
    let r = target.to_string();
    let out = sbft(&[
        "tle",
        "encrypt",
        "--round",
        &r,
        "--url",
        api,
        "-o",
        p(&locked),
        p(&plain),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let opened = dir.path().join("opened");
    let early = sbft(&["tle", "decrypt", "--url", api, "-o", p(&opened), p(&locked)]);
    if latest(api) < target {
        assert!(!early.status.success(), "{}", text(&early));
        let err = String::from_utf8_lossy(&early.stderr);
        assert!(
            err.contains(&format!("round {target}")) && err.contains("due"),
            "the error names the round and when it is due: {err}"
        );
        assert!(
            !opened.exists(),
            "nothing is written before the round is out"
        );
    }
    net.wait_for(target);
    let out = sbft(&["tle", "decrypt", "--url", api, "-o", p(&opened), p(&locked)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&opened).unwrap(), body);

    // The same API over https, behind a TLS-terminating proxy.
    let ca = TestCa::new("drand-users");
    let cacert = dir.path().join("ca.pem");
    ca.write_pem(&cacert);
    let https = https_proxy(api, &ca);
    let tls = ["--url", https.as_str(), "--cacert", p(&cacert)];
    common::assert_verifies(BIN, &tls);
    let out = sbft(&[&["health"][..], &tls].concat());
    assert!(out.status.success(), "{}", text(&out));
    let target = latest(api) + 2;
    let r = target.to_string();
    let locked_https = dir.path().join("locked-https.age");
    let out = sbft(
        &[
            &["tle", "encrypt", "--round", &r][..],
            &tls,
            &["-o", p(&locked_https), p(&plain)],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    net.wait_for(target);
    let opened_https = dir.path().join("opened-https");
    let out = sbft(
        &[
            &["tle", "decrypt"][..],
            &tls,
            &["-o", p(&opened_https), p(&locked_https)],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&opened_https).unwrap(), body);

    // drand's own Go code, where Go is present.
    let tool = match drand_interop() {
        Ok(tool) => tool,
        Err(reason) => {
            println!("skipped: drand's Go client and tlock against the network: {reason}");
            return;
        }
    };
    let out = go_tool(
        tool,
        &[
            "client-verify",
            "--url",
            api,
            "--rounds",
            "3",
            "--chain-hash",
            &hash,
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["verified_rounds"], 3, "{summary}");
    assert_eq!(summary["scheme"], "bls-unchained-g1-rfc9380", "{summary}");
    // drand's client over https: refused without our CA, verifies with it.
    let verify_https = [
        "client-verify",
        "--url",
        https.as_str(),
        "--rounds",
        "3",
        "--chain-hash",
        &hash,
    ];
    let out = go_tool_trusting(tool, None, &verify_https);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("certificate"),
        "{}",
        text(&out)
    );
    let out = go_tool_trusting(tool, Some(&cacert), &verify_https);
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["verified_rounds"], 3, "{summary}");
    // Ours to theirs: drand's tlock opens the file `tle` wrote.
    let theirs = dir.path().join("opened-by-drand");
    let out = go_tool(
        tool,
        &[
            "tle-decrypt",
            "--url",
            api,
            "--in",
            p(&locked),
            "--out",
            p(&theirs),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&theirs).unwrap(), body);
    // And over https: drand's tlock opens the file our `tle` locked over https.
    let theirs_https = dir.path().join("opened-by-drand-https");
    let out = go_tool_trusting(
        tool,
        Some(&cacert),
        &[
            "tle-decrypt",
            "--url",
            https.as_str(),
            "--in",
            p(&locked_https),
            "--out",
            p(&theirs_https),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&theirs_https).unwrap(), body);
    // Theirs to ours: drand's tlock locks a file to the chain info we serve.
    let info_file = dir.path().join("info.json");
    std::fs::write(&info_file, serde_json::to_vec(&info).unwrap()).unwrap();
    let target = latest(api) + 2;
    let r = target.to_string();
    let by_drand = dir.path().join("by-drand.age");
    let out = go_tool(
        tool,
        &[
            "tle-encrypt",
            "--chain-info",
            p(&info_file),
            "--round",
            &r,
            "--in",
            p(&plain),
            "--out",
            p(&by_drand),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    net.wait_for(target);
    let ours = dir.path().join("opened-by-us");
    let out = sbft(&["tle", "decrypt", "--url", api, "-o", p(&ours), p(&by_drand)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&ours).unwrap(), body);
    let ours_https = dir.path().join("opened-by-us-https");
    let out = sbft(
        &[
            &["tle", "decrypt"][..],
            &tls,
            &["-o", p(&ours_https), p(&by_drand)],
        ]
        .concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read(&ours_https).unwrap(), body);
}

/// The other unchained scheme (signatures in G2) and drand's default chained
/// one: drand's Go client verifies both chains; a chained chain cannot be
/// timelocked, and `tle` says so.
#[test]
fn drand_verifies_our_other_chains() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for scheme in ["pedersen-bls-unchained", "pedersen-bls-chained"] {
        let net = Localnet::start(scheme);
        let api = &net.apis[0];
        net.wait_for(4);
        let out = sbft(&["tle", "encrypt", "--round", "100", "--url", api]);
        if scheme == "pedersen-bls-chained" {
            assert!(!out.status.success(), "{}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(scheme), "the error names the scheme: {err}");
        } else {
            assert!(out.status.success(), "{}", text(&out));
        }
        let tool = match drand_interop() {
            Ok(tool) => tool,
            Err(reason) => {
                println!("skipped: drand's Go client against {scheme}: {reason}");
                continue;
            }
        };
        let out = go_tool(tool, &["client-verify", "--url", api, "--rounds", "4"]);
        assert!(out.status.success(), "{scheme}: {}", text(&out));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(summary["verified_rounds"], 4, "{summary}");
        assert_eq!(summary["scheme"], scheme, "{summary}");
    }
}
