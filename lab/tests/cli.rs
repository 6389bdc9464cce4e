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

/// A 4-node network's configs written into `dir` by `localnet --configs-only`:
/// node 0's config file and its text.
fn localnet_configs(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let out = Command::new(BIN)
        .args(["localnet", "--nodes", "4", "--configs-only", "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let config = dir.join("node-0/node.toml");
    let good = std::fs::read_to_string(&config).unwrap();
    (config, good)
}

/// Writes `text` to `config` and checks that the node refuses to start with
/// `expected` in its error.
fn refused_with(config: &std::path::Path, text: &str, expected: &str) {
    std::fs::write(config, text).unwrap();
    let out = run_node(config);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(expected),
        "expected {expected:?} in {stderr}"
    );
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
    // The consensus key, beside it: a G1 key and a G2 proof by default.
    let consensus = dir.path().join("consensus.key");
    assert_eq!(
        v["consensus_file"].as_str().unwrap(),
        consensus.display().to_string()
    );
    assert_eq!(v["consensus_key"].as_str().unwrap().len(), 2 * 48);
    assert_eq!(v["possession"].as_str().unwrap().len(), 2 * 96);
    #[cfg(unix)]
    for f in [&file, &consensus] {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(f).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", f.display());
    }
    let shown = Command::new(BIN)
        .arg("keys")
        .arg("--show")
        .arg(&file)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[0], peer_id);
    let key_line = format!(
        "consensus_key = \"{}\"",
        v["consensus_key"].as_str().unwrap()
    );
    assert_eq!(lines[1], key_line);
    // Under a scheme with signatures in G1, the key is in G2.
    let g1 = Command::new(BIN)
        .args([
            "keys",
            "--json",
            "--scheme",
            "bls-unchained-g1-rfc9380",
            "--show",
        ])
        .arg(&file)
        .output()
        .unwrap();
    let g1: serde_json::Value = serde_json::from_slice(&g1.stdout).unwrap();
    assert_eq!(g1["consensus_key"].as_str().unwrap().len(), 2 * 96);
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
    let (config, good) = localnet_configs(dir.path());
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
        refused_with(&config, &text, expected);
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

/// Every peer's consensus key comes with a proof of possession, checked at
/// start under the network's scheme: a listing whose proof does not verify
/// stops the node with an error naming the peer; so does a consensus key
/// file that is not the one listed for the node, or none.
#[test]
fn consensus_keys_without_valid_proofs_stop_the_node() {
    let dir = tempfile::tempdir().unwrap();
    let (config, good) = localnet_configs(dir.path());
    // Peer 2 lists peer 3's proof.
    let proofs: Vec<&str> = good
        .lines()
        .filter(|l| l.starts_with("possession = "))
        .collect();
    assert_eq!(proofs.len(), 4);
    let swapped = good.replacen(proofs[2], "possession = \"PLACEHOLDER\"", 1);
    let swapped = swapped.replacen(proofs[3], proofs[2], 1);
    let swapped = swapped.replacen("possession = \"PLACEHOLDER\"", proofs[3], 1);
    let not_hex = good.replacen(proofs[1], "possession = \"zz\"", 1);
    for (text, expected) in [
        (swapped, "peer 2: its consensus key is refused"),
        (not_hex, "peer 1: possession is not hex"),
    ] {
        refused_with(&config, &text, expected);
    }
    std::fs::write(&config, &good).unwrap();
    std::fs::copy(
        dir.path().join("node-1/consensus.key"),
        dir.path().join("node-0/consensus.key"),
    )
    .unwrap();
    let out = run_node(&config);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not the consensus key peers[0] lists"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_file(dir.path().join("node-0/consensus.key")).unwrap();
    let out = run_node(&config);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("consensus key file"));
}
