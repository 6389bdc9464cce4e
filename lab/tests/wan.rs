//! Real nodes over the emulated WAN against the simulator (`compare`): a
//! 4-node network with a constant 20 ms one-way latency on every link. The bound
//! is loose (30%) because CI machines are noisy; the tight comparisons are
//! measured with `sbft-beacon compare` and recorded in docs/results.md.

use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

#[test]
fn the_simulator_predicts_an_emulated_four_node_wan() {
    let out = Command::new(BIN)
        .args([
            "compare",
            "--nodes",
            "4",
            "--rounds",
            "40",
            "--latency-ms",
            "20",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let real = &report["real"];
    assert_eq!(real["chain_identical"], true, "{real}");
    assert_eq!(real["chain_verified"], true, "{real}");
    assert_eq!(real["wan"]["latency_ms"], 20.0, "{real}");
    let sim = report["sim"]["beacon_latency_ms"]["p50"].as_f64().unwrap();
    let p50 = real["beacon_latency_ms"]["p50"].as_f64().unwrap();
    // Two one-way delays at least: the proposal (which leaves with the previous
    // height's proof, from its collector) and the shares to the collector.
    assert!(p50 >= 40.0, "real p50 {p50} ms is below two 20 ms hops");
    let error = report["error"]["beacon_p50"].as_f64().unwrap();
    assert!(
        error.abs() <= 0.30,
        "simulated p50 {sim:.1} ms vs real {p50:.1} ms: error {:+.0}%",
        error * 100.0
    );
    // Both sides report the same figures, each with its error.
    let commit = real["commit_latency_ms"]["p50"].as_f64().unwrap();
    assert!(commit >= 40.0, "real commit p50 {commit} ms: {real}");
    for key in [
        "commit_p50",
        "commit_p99",
        "messages_per_round",
        "fast_path_ratio",
    ] {
        assert!(report["error"][key].is_f64(), "error.{key}: {report}");
    }
    let messages = |side: &Value| side["messages_per_round"].as_f64().unwrap();
    let (s, r) = (messages(&report["sim"]), messages(real));
    assert!(
        (s - r).abs() <= 0.25 * s,
        "messages per round: sim {s}, real {r}"
    );
    let fast = real["fast_path_ratio"].as_f64().unwrap();
    assert!(fast > 0.0 && fast <= 1.0, "real fast-path ratio {fast}");
    assert!(real["messages_by_kind"]["sign-share"].as_f64().unwrap() > 0.0);
}
