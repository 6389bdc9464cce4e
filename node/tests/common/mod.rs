//! Helpers shared by the real-process tests.
#![allow(dead_code)]

use std::process::Command;

/// Writes identities and configs of an `n`-node local network with
/// `localnet --configs-only` (plus `extra` arguments) into a fresh directory;
/// returns it with each node's HTTP API address.
pub fn localnet_configs(bin: &str, n: u32, extra: &[&str]) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin)
        .args(["localnet", "--nodes", &n.to_string()])
        .args(extra)
        .args(["--configs-only", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let apis = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let start = l.find("(API ").unwrap() + 5;
            l[start..l.len() - 1].to_string()
        })
        .collect();
    (dir, apis)
}
