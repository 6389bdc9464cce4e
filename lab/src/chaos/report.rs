//! The report of a chaos run: faults by kind, violations, the chain, the
//! recoveries, memory per node and rounds lost; as text or one JSON object.

use super::schedule::{Fault, FaultKind};
use super::{ChaosArgs, Run};
use serde::Serialize;
use sim::report::{percentiles, Percentiles};
use std::collections::BTreeMap;
use std::time::Instant;

/// A node expected back at the latest round since its fault healed.
pub(super) struct Recovery {
    pub(super) node: usize,
    pub(super) healed: Instant,
    /// The highest round any node served when it healed.
    pub(super) target: u64,
}

/// One node's memory and restarts.
#[derive(Serialize)]
pub(super) struct NodeReport {
    node: u32,
    rss_mb: super::network::Rss,
    restarts: u32,
    /// Seconds its last process ran.
    process_age_s: f64,
}

/// What a chaos run found.
#[derive(Serialize)]
pub(super) struct Report {
    seed: u64,
    nodes: u32,
    duration_s: u64,
    /// Faults injected, by kind.
    faults: BTreeMap<&'static str, u64>,
    /// Faults not injected (a target was not running), by kind.
    faults_skipped: BTreeMap<&'static str, u64>,
    changes_completed: u64,
    pub(super) violations: Vec<String>,
    /// The chain verifies from round 1 to here.
    rounds: u64,
    chain_verified: bool,
    /// The longest time (s) from a heal to the node being back at the latest
    /// round, the final recovery included.
    max_recovery_s: f64,
    final_recovery_s: f64,
    recovery_s: Percentiles,
    recovery_samples: usize,
    double_signs: u64,
    votes_read_back: usize,
    /// Rounds due by the schedule but not produced at the end.
    rounds_lost: u64,
    per_node: Vec<NodeReport>,
    dir: String,
}

impl Report {
    pub(super) fn new(
        run: &Run,
        args: &ChaosArgs,
        final_recovery_s: f64,
        dir: &std::path::Path,
    ) -> Self {
        let names = |m: &BTreeMap<FaultKind, u64>| m.iter().map(|(k, v)| (k.name(), *v)).collect();
        let mut faults: BTreeMap<&'static str, u64> = names(&run.applied);
        for k in FaultKind::RANDOM {
            faults.entry(k.name()).or_insert(0);
        }
        let (rounds, chain_verified) = match &run.rounds {
            Some(l) => (
                l.verified_to(),
                l.intact() && l.verified_to() == l.highest() && l.verified_to() > 0,
            ),
            None => (0, false),
        };
        let mut violations = run.violations.clone();
        if !chain_verified {
            violations.push(format!(
                "the chain verifies only to round {rounds} of {}",
                run.rounds.as_ref().map_or(0, |l| l.highest())
            ));
        }
        Report {
            seed: args.seed,
            nodes: args.nodes,
            duration_s: args.duration.as_secs(),
            faults,
            faults_skipped: names(&run.skipped),
            changes_completed: run.changes_done,
            violations,
            rounds,
            chain_verified,
            max_recovery_s: run
                .recoveries
                .iter()
                .copied()
                .fold(final_recovery_s, f64::max),
            final_recovery_s,
            recovery_s: percentiles(&run.recoveries),
            recovery_samples: run.recoveries.len(),
            double_signs: run.votes.double_signs,
            votes_read_back: run.votes.len(),
            rounds_lost: run.rounds_lost,
            per_node: run
                .nodes
                .iter()
                .map(|n| NodeReport {
                    node: n.index,
                    rss_mb: n.rss.clone(),
                    restarts: n.restarts,
                    process_age_s: n.since.map_or(0.0, |s| s.elapsed().as_secs_f64()),
                })
                .collect(),
            dir: dir.display().to_string(),
        }
    }

    /// Prints the report: one JSON object, or text.
    pub(super) fn print(&self, json: bool) {
        if json {
            println!("{}", serde_json::to_string(self).unwrap_or_default());
            return;
        }
        println!(
            "chaos, seed {}: {} members for {} s; faults {:?} (skipped {:?}); {} changes of members completed",
            self.seed, self.nodes, self.duration_s, self.faults, self.faults_skipped, self.changes_completed
        );
        println!(
            "chain: rounds 1..={} verify: {}; rounds lost {}; double signs {} ({} votes read back)",
            self.rounds,
            self.chain_verified,
            self.rounds_lost,
            self.double_signs,
            self.votes_read_back
        );
        let r = &self.recovery_s;
        println!(
            "recovery after a heal (s, {} samples): p50 {:.2}  p99 {:.2}  max {:.2}; after the last heal {:.2}",
            self.recovery_samples, r.p50, r.p99, self.max_recovery_s, self.final_recovery_s
        );
        for n in &self.per_node {
            let mb = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
            println!(
                "  node {}: RSS MB start {} / 1 min {} / end {}; {} restarts; last process {:.0} s",
                n.node,
                mb(n.rss_mb.start_mb),
                mb(n.rss_mb.first_minute_mb),
                mb(n.rss_mb.end_mb),
                n.restarts,
                n.process_age_s
            );
        }
        if self.violations.is_empty() {
            println!("no violations");
        } else {
            println!("{} violations:", self.violations.len());
            for v in &self.violations {
                println!("  {v}");
            }
        }
    }
}

/// One line of the schedule, for a failing run's replay.
pub(super) fn describe(f: &Fault) -> String {
    let amount = match f.kind {
        FaultKind::ClockSkew => format!(" offset {} ms", f.amount_ms),
        FaultKind::SlowLink => format!(" +{} ms", f.amount_ms),
        _ => String::new(),
    };
    format!(
        "{:>9.1} s .. {:>9.1} s  {:<13} nodes {:?}{amount}",
        f.at_ms as f64 / 1000.0,
        f.heal_ms as f64 / 1000.0,
        f.kind.name(),
        f.nodes
    )
}
