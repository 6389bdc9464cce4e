//! The node's command line without a network: identities and config errors.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

/// `sbft-beacon run --config <config>` to completion (it fails fast on bad input).
fn run_node(config: &std::path::Path) -> std::process::Output {
    Command::new(BIN)
        .env("RUST_BACKTRACE", "0")
        .arg("run")
        .arg("--config")
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn keys_creates_an_owner_only_identity_and_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("id.key");
    let out = Command::new(BIN)
        .args(["keys", "--json", "--out"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let peer_id = v["peer_id"].as_str().unwrap().to_string();
    assert!(peer_id.starts_with("12D3KooW"), "{peer_id}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let shown = Command::new(BIN)
        .arg("keys")
        .arg("--show")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&shown.stdout).trim(), peer_id);
    // An existing identity is not overwritten by accident.
    let again = Command::new(BIN)
        .arg("keys")
        .arg("--out")
        .arg(&file)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
}

#[test]
fn bad_configs_stop_the_node_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["localnet", "--nodes", "4", "--configs-only", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let config = dir.path().join("node-0/node.toml");
    let good = std::fs::read_to_string(&config).unwrap();
    let cases = [
        (
            good.replace("pedersen-bls-chained", "bls-nope"),
            "unknown scheme",
        ),
        (
            good.replace("listen = \"/ip4/", "listen = \"/ipx/"),
            "bad listen address",
        ),
        (good.replace("identity.key", "missing.key"), "is missing"),
        (good.replace("c = 0", "c = 2"), "not 3f + 2c + 1"),
    ];
    for (text, expected) in cases {
        std::fs::write(&config, text).unwrap();
        let out = run_node(&config);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains(expected),
            "expected {expected:?} in {stderr}"
        );
    }
    // Another node's identity: refused before anything starts.
    std::fs::write(&config, &good).unwrap();
    std::fs::copy(
        dir.path().join("node-1/identity.key"),
        dir.path().join("node-0/identity.key"),
    )
    .unwrap();
    let out = run_node(&config);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("but peers[0] lists"));
}
