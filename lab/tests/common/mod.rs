//! Helpers shared by the real-process tests.
#![allow(dead_code)]

pub mod standin;
pub mod tls;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Blocking JSON GET; `None` on any failure.
pub fn get(url: &str) -> Option<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .ok()?;
        let r = client.get(url).send().await.ok()?;
        if !r.status().is_success() {
            return None;
        }
        r.json().await.ok()
    })
}

/// Runs `bin verify` with `args` (a `--url` among them) and fails with its
/// report unless the chain verifies; returns the report.
pub fn assert_verifies(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).arg("verify").args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    stdout
}

/// The latest round a node's API serves (0 when it answers none).
pub fn latest(api: &str) -> u64 {
    get(&format!("{api}/public/latest"))
        .and_then(|v| v["round"].as_u64())
        .unwrap_or(0)
}

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

/// Starts `bin localnet ARGS --json --keep-running` and waits for its one-line
/// JSON report (printed once the requested rounds are in); returns the running
/// process (the network stays up until it is signalled) and the report.
pub fn localnet_running(bin: &str, args: &[&str]) -> (Child, serde_json::Value) {
    let mut child = Command::new(bin)
        .arg("localnet")
        .args(args)
        .args(["--json", "--keep-running"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let report = serde_json::from_str(line.trim()).expect("one JSON line");
    (child, report)
}

/// The HTTP API addresses a `localnet --json` report lists.
pub fn report_apis(report: &serde_json::Value) -> Vec<String> {
    report["http"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}
