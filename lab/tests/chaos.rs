//! `sbft-beacon chaos` for two minutes: seven members and two spares over the
//! emulated WAN, killed (during the DKG and a change of members too),
//! partitioned, skewed, slowed and with a full disk, from a fixed seed. The
//! run must inject every kind of fault and find no violation: one chain that
//! verifies from round 1, no two beacons or blocks for a round, no double
//! vote, every node back at the latest round soon after the last heal.

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

#[test]
fn two_minutes_of_chaos_inject_every_fault_and_break_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args([
            "chaos",
            "--duration",
            "120s",
            "--seed",
            "5",
            "--change-every-s",
            "40",
            "--check-every-s",
            "30",
            "--json",
            "--dir",
        ])
        .arg(dir.path())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON report ({e}): {stdout}"));
    assert_eq!(report["violations"], serde_json::json!([]), "{report:#}");
    assert!(out.status.success(), "{report:#}");
    assert_eq!(report["seed"], 5);
    for kind in [
        "kill",
        "partition",
        "clock_skew",
        "slow_link",
        "disk_full",
        "member_change",
    ] {
        assert!(
            report["faults"][kind].as_u64().unwrap_or(0) >= 1,
            "no {kind} injected: {report:#}"
        );
    }
    assert!(
        report["changes_completed"].as_u64().unwrap_or(0) >= 1,
        "{report:#}"
    );
    assert_eq!(report["double_signs"], 0);
    assert_eq!(report["chain_verified"], true);
    assert!(report["rounds"].as_u64().unwrap_or(0) >= 60, "{report:#}");
    assert!(
        report["votes_read_back"].as_u64().unwrap_or(0) > 0,
        "{report:#}"
    );
    assert!(
        report["final_recovery_s"].as_f64().unwrap_or(f64::MAX) <= 10.0,
        "{report:#}"
    );
}
