//! Campaigns: many seeds, each with a fault mix drawn from the seed (Byzantine
//! kinds and count, twins, together up to f; a partition, a crash-restart,
//! loss), run to completion; failing seeds are reported with their typed
//! failure, and [`outcomes`] tabulates fault kinds against outcomes.

use crate::config::{Crash, Partition, SimConfig};
use crate::invariants::{FailureKind, Violation};
use crate::SimError;
use beacon::time::{US_PER_MS, US_PER_S};
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
    /// Members run as twins.
    pub twins: u32,
    /// Whether a partition was drawn.
    pub partition: bool,
    /// Whether a crash-restart was drawn.
    pub crash_restart: bool,
    /// Its crash point, if it strikes between two durable writes: after
    /// this many writes of one step ([`crate::config::Crash::after_write`]).
    pub crash_point: Option<u32>,
    /// Message loss probability.
    pub loss: f64,
    /// Where beacon shares went (`[protocol] beacon_shares`).
    pub beacon_shares: &'static str,
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
    let c = cfg.protocol.collector_slack(n).unwrap_or(0);
    let f = (n.saturating_sub(2 * c + 1)) / 3;
    let count = rng.gen_range(0..=f);
    let (first, later) = Behaviour::ALL.split_at(Behaviour::FIRST_CAMPAIGN_KINDS);
    let mut kinds: Vec<Behaviour> = first.to_vec();
    kinds.shuffle(&mut rng);
    kinds.truncate(rng.gen_range(1..=kinds.len()));
    // Kinds added since are drawn from a stream of their own (each as likely
    // as an earlier kind is), leaving every draw above and below as it was.
    let mut added = ChaCha20Rng::seed_from_u64(seed ^ 0x0add_ed0c_1a55);
    for kind in later {
        if added.gen_bool(0.5) {
            kinds.push(*kind);
        }
    }
    cfg.faults.byzantine = count;
    cfg.faults.byzantine_kinds = kinds.iter().map(|k| k.as_str().to_string()).collect();
    cfg.faults.twins = if count < f && rng.gen_bool(0.3) {
        rng.gen_range(1..=f - count)
    } else {
        0
    };
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
            lose_votes: false,
            after_write: None,
            in_dkg: false,
        });
    }
    draw_crash_point(&mut cfg, seed);
    cfg.network.loss = if rng.gen_bool(0.3) {
        rng.gen_range(0.0..0.05)
    } else {
        0.0
    };
    // Both beacon-share routes face the same faults (drawn last, so that the
    // draws above are those of earlier campaigns).
    cfg.protocol.beacon_shares = Some(if rng.gen_bool(0.5) {
        consensus::BeaconShares::Everyone
    } else {
        consensus::BeaconShares::Collectors
    });
    // The scenario's time limit is for the scenario's own faults; the faults
    // drawn here may need longer (`consensus/SAFETY.md`, "How long a run may
    // take").
    if let Some(bound) = time_bound_us(&cfg) {
        let secs = bound.div_ceil(US_PER_S);
        cfg.invariants.max_virtual_time_s = cfg.invariants.max_virtual_time_s.max(secs);
    }
    cfg
}

/// A crash point between two durable writes (`consensus::disk`), for half
/// the seeds that drew no other transient fault (no partition, no crash:
/// one transient fault per run, and every earlier seed's mix with one is
/// as it was), from a stream of its own: in the genesis DKG's last step
/// (keys saved, the seed that dealt them not yet replaced), or, with a
/// change of members, in a member's writes of it (after its epoch record,
/// or after its cleared votes: its seed not yet replaced).
fn draw_crash_point(cfg: &mut SimConfig, seed: u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 0xc4a5_4b01_a7e5);
    if !cfg.faults.crash.is_empty() || !cfg.partitions.is_empty() || !rng.gen_bool(0.5) {
        return;
    }
    let in_dkg = cfg.reshare.is_none() || rng.gen_bool(0.3);
    let at = rng.gen_range(500..4_000);
    cfg.faults.crash.push(Crash {
        node: rng.gen_range(0..cfg.nodes),
        at_ms: at,
        restart_ms: Some(at + rng.gen_range(500..5_000)),
        lose_votes: false,
        after_write: Some(if in_dkg { 1 } else { rng.gen_range(1..=2) }),
        in_dkg,
    });
}

/// The virtual time by which a run of `cfg` reaches its target rounds with the
/// faults it draws, from the protocol's timeouts alone (`consensus/SAFETY.md`,
/// "How long a run may take"): the DKG's last deadline, the end of the last
/// partition or crash, the height those interrupted, and every height sitting
/// out one failed view per faulty member (Byzantine or twin) plus view 0, one
/// more with message loss, then one normal-case view (within `tau(0)`).
/// `None` for a configuration that does not build.
pub fn time_bound_us(cfg: &SimConfig) -> Option<u64> {
    let replica = cfg.replica_config().ok()?;
    let tau = |v: u64| replica.view_timeout_us(v);
    let faulty = u64::from(cfg.faults.byzantine + cfg.faults.twins);
    let lossy = u64::from(cfg.network.loss > 0.0);
    // Every attempt of the DKG ends within its phases, each attempt's phases
    // twice as long as the last one's.
    let dkg = cfg.dkg.timing().bound_us();
    // The end of the last transient fault, and the views its height may
    // have entered by then (each needs its whole timeout to pass).
    let healed = cfg
        .partitions
        .iter()
        .map(|p| p.heal_ms)
        .chain(
            cfg.faults
                .crash
                .iter()
                .map(|c| c.restart_ms.unwrap_or(c.at_ms)),
        )
        .max()
        .unwrap_or(0)
        .saturating_mul(US_PER_MS);
    let entered = (1..)
        .take_while(|v| replica.recovery_bound_us(*v) <= healed)
        .count() as u64;
    let height = replica
        .recovery_bound_us(faulty + lossy + 1)
        .saturating_add(tau(0))
        .saturating_add(replica.period.as_micros());
    let interrupted = if healed == 0 {
        0
    } else {
        replica.recovery_bound_us(entered + faulty + lossy + 2)
    };
    Some(
        dkg.saturating_add(healed)
            .saturating_add(interrupted)
            .saturating_add(height.saturating_mul(cfg.rounds)),
    )
}

/// Runs `seeds` consecutive seeds from `first_seed` on fault mixes drawn from
/// `base`, on `jobs` threads (each seed is deterministic on its own; the runs
/// come back in seed order).
pub fn run(
    base: &SimConfig,
    first_seed: u64,
    seeds: u64,
    jobs: usize,
    on_run: &(dyn Fn(&CampaignRun) + Sync),
) -> Result<Vec<CampaignRun>, SimError> {
    let next = std::sync::atomic::AtomicU64::new(first_seed);
    let end = first_seed.saturating_add(seeds);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if seed >= end {
                    break;
                }
                let run = run_seed(base, seed);
                if let Ok(r) = &run {
                    on_run(r);
                }
                let failed = run.is_err();
                results
                    .lock()
                    .expect("no worker panics holding the lock")
                    .push(run);
                if failed {
                    next.store(end, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    let mut runs = results
        .into_inner()
        .expect("no worker panics holding the lock")
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    runs.sort_by_key(|r| r.seed);
    Ok(runs)
}

fn run_seed(base: &SimConfig, seed: u64) -> Result<CampaignRun, SimError> {
    let mut cfg = draw(base, seed);
    // The jobs share the cores: each seed runs on one thread (its results are
    // the same for any thread count).
    cfg.threads = 1;
    let (report, _) = crate::run(&cfg, None)?;
    Ok(CampaignRun {
        seed,
        byzantine: (0..cfg.faults.byzantine as usize)
            .map(|i| cfg.faults.byzantine_kinds[i % cfg.faults.byzantine_kinds.len()].clone())
            .collect(),
        twins: cfg.faults.twins,
        partition: !cfg.partitions.is_empty(),
        crash_restart: !cfg.faults.crash.is_empty(),
        crash_point: cfg.faults.crash.iter().find_map(|c| c.after_write),
        loss: cfg.network.loss,
        beacon_shares: cfg
            .protocol
            .beacon_shares
            .unwrap_or_else(|| consensus::BeaconShares::for_network(cfg.nodes, cfg.protocol.period))
            .name(),
        rounds: report.rounds,
        violations: report.violations,
        trace_hash: report.trace_hash,
    })
}

/// One row of a campaign's table: a fault kind and how the runs with it ended.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Outcomes {
    /// Fault kind: a Byzantine behaviour, `twins`, `partition`, `crash-restart`,
    /// `loss` or `none`.
    pub kind: String,
    /// Runs with this fault.
    pub runs: u64,
    /// Runs without a violation.
    pub ok: u64,
    /// Agreement or validity violations.
    pub safety: u64,
    /// Liveness violations.
    pub liveness: u64,
    /// Members that panicked.
    pub crash: u64,
}

/// Fault kinds against outcomes, one row per kind that occurred.
pub fn outcomes(runs: &[CampaignRun]) -> Vec<Outcomes> {
    let mut rows: Vec<Outcomes> = Behaviour::ALL
        .iter()
        .map(|b| b.as_str())
        .chain(["twins", "partition", "crash-restart", "loss", "none"])
        .map(|k| Outcomes {
            kind: k.to_string(),
            ..Outcomes::default()
        })
        .collect();
    for run in runs {
        let mut kinds: Vec<&str> = run.byzantine.iter().map(String::as_str).collect();
        if run.twins > 0 {
            kinds.push("twins");
        }
        if run.partition {
            kinds.push("partition");
        }
        if run.crash_restart {
            kinds.push("crash-restart");
        }
        if run.loss > 0.0 {
            kinds.push("loss");
        }
        if kinds.is_empty() {
            kinds.push("none");
        }
        kinds.sort_unstable();
        kinds.dedup();
        for row in rows.iter_mut().filter(|r| kinds.contains(&r.kind.as_str())) {
            row.runs += 1;
            match run.violations.first().map(|v| v.kind) {
                None => row.ok += 1,
                Some(FailureKind::Safety) => row.safety += 1,
                Some(FailureKind::Liveness) => row.liveness += 1,
                Some(FailureKind::Crash) => row.crash += 1,
            }
        }
    }
    rows.retain(|r| r.runs > 0);
    rows
}
