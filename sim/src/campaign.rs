//! Campaigns: many seeds, each with a fault mix drawn from the seed (Byzantine
//! kinds and count up to f, a partition, a crash-restart, loss), run to
//! completion; failing seeds are reported with their typed failure.

use crate::config::{Crash, Partition, SimConfig};
use crate::invariants::Violation;
use crate::SimError;
use consensus::Behaviour;
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use serde::Serialize;

/// One run of a campaign.
#[derive(Clone, Debug, Serialize)]
pub struct CampaignRun {
    /// Seed (replay with `sim --seed`; the fault mix is derived from it).
    pub seed: u64,
    /// Byzantine replicas and their kinds.
    pub byzantine: Vec<String>,
    /// Whether a partition was drawn.
    pub partition: bool,
    /// Whether a crash-restart was drawn.
    pub crash_restart: bool,
    /// Message loss probability.
    pub loss: f64,
    /// Beacons produced.
    pub rounds: u64,
    /// Violations.
    pub violations: Vec<Violation>,
    /// Trace hash.
    pub trace_hash: String,
}

/// The fault mix for `seed`, applied to a copy of `base`.
pub fn draw(base: &SimConfig, seed: u64) -> SimConfig {
    let mut cfg = base.clone();
    cfg.seed = seed;
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0xca4d_a16e);
    let n = cfg.nodes;
    let f = (n.saturating_sub(2 * cfg.protocol.c + 1)) / 3;
    let count = rng.gen_range(0..=f);
    let mut kinds: Vec<Behaviour> = Behaviour::ALL.to_vec();
    kinds.shuffle(&mut rng);
    kinds.truncate(rng.gen_range(1..=kinds.len()));
    cfg.faults.byzantine = count;
    cfg.faults.byzantine_kinds = kinds.iter().map(|k| k.as_str().to_string()).collect();
    cfg.partitions.clear();
    if rng.gen_bool(0.4) && n >= 4 {
        let start = rng.gen_range(500..3_000);
        let side_end = rng.gen_range(0..n / 2);
        cfg.partitions.push(Partition {
            start_ms: start,
            heal_ms: start + rng.gen_range(1_000..8_000),
            side: vec![[0, side_end]],
        });
    }
    cfg.faults.crash.clear();
    if rng.gen_bool(0.3) {
        let at = rng.gen_range(500..4_000);
        cfg.faults.crash.push(Crash {
            node: rng.gen_range(0..n),
            at_ms: at,
            restart_ms: Some(at + rng.gen_range(500..5_000)),
        });
    }
    cfg.network.loss = if rng.gen_bool(0.3) {
        rng.gen_range(0.0..0.05)
    } else {
        0.0
    };
    cfg
}

/// Runs `seeds` consecutive seeds from `first_seed` on fault mixes drawn from `base`.
pub fn run(
    base: &SimConfig,
    first_seed: u64,
    seeds: u64,
    on_run: &dyn Fn(&CampaignRun),
) -> Result<Vec<CampaignRun>, SimError> {
    let mut runs = Vec::new();
    for seed in first_seed..first_seed + seeds {
        let cfg = draw(base, seed);
        let (report, _) = crate::run(&cfg, None)?;
        let run = CampaignRun {
            seed,
            byzantine: (0..cfg.faults.byzantine as usize)
                .map(|i| cfg.faults.byzantine_kinds[i % cfg.faults.byzantine_kinds.len()].clone())
                .collect(),
            partition: !cfg.partitions.is_empty(),
            crash_restart: !cfg.faults.crash.is_empty(),
            loss: cfg.network.loss,
            rounds: report.rounds,
            violations: report.violations,
            trace_hash: report.trace_hash,
        };
        on_run(&run);
        runs.push(run);
    }
    Ok(runs)
}
