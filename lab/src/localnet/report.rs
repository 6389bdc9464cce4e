//! The report of a `localnet` run: one JSON object (`--json`) or the table,
//! from what the network did ([`Outcome`]) and the nodes' logs.

use super::observe::Outcome;
use super::LocalnetArgs;
use serde_json::{json, Value};
use sim::report::Percentiles;
use std::path::Path;
use std::time::Instant;

/// What a run reports: its arguments, what the network did, and where.
pub(super) struct Report<'a> {
    pub(super) args: &'a LocalnetArgs,
    pub(super) outcome: &'a Outcome,
    /// Every node's API address.
    pub(super) http: Vec<&'a String>,
    /// The network's folder.
    pub(super) dir: &'a Path,
    /// Seconds between rounds (0: back to back).
    pub(super) period: u32,
    /// When the run began.
    pub(super) wall: Instant,
    /// The DKG's duration (s) in the nodes' logs.
    pub(super) dkg: Percentiles,
}

impl Report<'_> {
    /// Prints the report: one JSON object with `--json`, else the table.
    pub(super) fn print(&self) {
        if self.args.json {
            println!("{}", self.json());
        } else {
            self.print_table();
        }
    }

    /// The largest growth of a node's RSS (MB) from after warm-up to the end.
    fn growth(&self) -> f64 {
        self.outcome
            .rss_end_mb
            .iter()
            .zip(&self.outcome.rss_warm_mb)
            .map(|(e, w)| e - w)
            .fold(0.0, f64::max)
    }

    /// The report as one JSON object.
    fn json(&self) -> Value {
        let Report {
            args,
            outcome,
            ref http,
            dir,
            period,
            wall,
            dkg,
        } = *self;
        let (lat, delay) = (&outcome.latency, &outcome.delay);
        let mut report = json!({
            "nodes": args.nodes,
            "rounds": args.rounds,
            "scheme": args.scheme.as_str(),
            "chain_identical": outcome.chain_identical,
            "chain_verified": outcome.chain_verified,
            "beacon_latency_ms": lat,
            "commit_latency_ms": outcome.commit_latency,
            "messages_per_round": outcome.traffic.messages_per_round,
            "messages_by_kind": outcome.traffic.messages_by_kind,
            "fast_path_ratio": outcome.traffic.fast_path_ratio,
            "cpu_ms_per_round": {
                "protocol_p50": outcome.protocol_cpu.p50,
                "process_p50": outcome.process_cpu.p50,
            },
            "samples": outcome.samples,
            "per_round_beacon_p50_ms": outcome.per_round_p50,
            "http": http,
            "dir": dir.display().to_string(),
            "wall_s": wall.elapsed().as_secs_f64(),
            "startup_s": outcome.startup_s,
            "startup_cpu_s": outcome.startup_cpu_s,
            "dkg_s": dkg.p50,
        });
        if period > 0 {
            report["beacon_delay_ms"] = json!(delay);
        }
        if args.wan.enabled() {
            report["wan"] = json!({
                "regions": args.wan.regions.as_ref().map(|p| p.display().to_string()),
                "latency_ms": args.wan.latency_ms,
                "jitter_ms": args.wan.jitter_ms,
                "bandwidth_mbps": args.wan.bandwidth_mbps,
                "backend": "userspace",
            });
        }
        let growth = self.growth();
        report["rss_mb"] = json!({
            "first": outcome.rss_first_mb,
            "last": outcome.rss_end_mb,
            "max": outcome.rss_max_mb,
        });
        report["soak_rss_mb"] = json!({
            "warm": outcome.rss_warm_mb,
            "end": outcome.rss_end_mb,
            "growth_max": growth,
        });
        if args.flood > 0 {
            report["p99_under_flood_ms"] = json!(lat.p99);
        }
        report
    }

    /// Prints the report as the table.
    fn print_table(&self) {
        let Report {
            args,
            outcome,
            ref http,
            period,
            wall,
            dkg,
            ..
        } = *self;
        let (lat, delay) = (&outcome.latency, &outcome.delay);
        let growth = self.growth();
        println!(
            "{} nodes, {} rounds: chain identical on every node: {}, verifies: {}",
            args.nodes, args.rounds, outcome.chain_identical, outcome.chain_verified
        );
        println!(
            "round latency (ms, rounds 2..={} on every node, {} samples): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            args.rounds, outcome.samples, lat.p50, lat.p90, lat.p99, lat.max
        );
        let commit = &outcome.commit_latency;
        println!(
            "commit latency (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}; messages per round {:.1}, fast path {:.0}%",
            commit.p50,
            commit.p90,
            commit.p99,
            commit.max,
            outcome.traffic.messages_per_round,
            outcome.traffic.fast_path_ratio * 100.0
        );
        if period > 0 {
            println!(
                "beacon delay after its scheduled time (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
                delay.p50, delay.p90, delay.p99, delay.max
            );
        }
        println!(
            "start-up: every node served round 1 {:.2} s after launch ({:.1} CPU s in all); DKG {:.2} s (median of the nodes' logs, max {:.2})",
            outcome.startup_s, outcome.startup_cpu_s, dkg.p50, dkg.max
        );
        println!(
            "CPU per round and node (ms, median): protocol {:.2}, whole process {:.2}",
            outcome.protocol_cpu.p50, outcome.process_cpu.p50
        );
        println!(
            "APIs: {}",
            http.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!(
            "RSS per node (MB): after warm-up {:?}, at the end {:?} (growth at most {growth:.1})",
            outcome.rss_warm_mb, outcome.rss_end_mb
        );
        if args.flood > 0 {
            println!(
                "round latency p99 under a flood of {} transactions of 64 KiB per node: {:.2} ms",
                args.flood, lat.p99
            );
        }
        println!("wall {:.1} s", wall.elapsed().as_secs_f64());
    }
}
