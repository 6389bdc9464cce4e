//! The run report: the figures of a simulation as one JSON object (and the
//! table the CLI prints).

use crate::invariants::Violation;
use beacon::dkg::Disqualification;
use serde::Serialize;
use std::collections::BTreeMap;

/// Latency percentiles (ms).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Percentiles of `samples` (nearest rank); zeros when empty.
pub fn percentiles(samples: &[f64]) -> Percentiles {
    if samples.is_empty() {
        return Percentiles::default();
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[(((v.len() as f64) * q).ceil() as usize).clamp(1, v.len()) - 1];
    Percentiles {
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        max: v[v.len() - 1],
    }
}

/// The last beacon.
#[derive(Clone, Debug, Serialize)]
pub struct FinalBeacon {
    /// Round.
    pub round: u64,
    /// Signature, hex.
    pub signature: String,
    /// SHA-256 of the signature, hex.
    pub randomness: String,
}

/// One round's figures.
#[derive(Clone, Debug, Serialize)]
pub struct RoundStats {
    /// Round (= height).
    pub round: u64,
    /// Beacon latency across honest nodes (ms).
    pub beacon_ms: Percentiles,
    /// Commit round latency across honest nodes (ms).
    pub commit_ms: Percentiles,
    /// Commit path of the height.
    pub path: Option<String>,
    /// Views entered at this height beyond view 0.
    pub view_changes: u64,
}

/// A DKG snapshot a run saved or started from.
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotReport {
    /// `saved` (this run's DKG was written to the file) or `loaded` (this
    /// run's DKG came from the file: `dkg_wall_s` is the time to read it).
    pub action: String,
    /// The file.
    pub file: String,
    /// Wall time of the DKG in the run that saved it (s).
    pub dkg_wall_s: f64,
}

/// A crash that struck between two durable writes of one step (a crash
/// point: [`crate::config::Crash::after_write`]).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CrashPointHit {
    /// The node.
    pub node: u32,
    /// When it struck (virtual ms).
    pub at_ms: f64,
    /// The kinds of the step's writes made before it (`consensus::disk`:
    /// `keys`, `epoch`, `votes`, `seed`).
    pub written: Vec<&'static str>,
    /// The kinds of the step's writes it prevented.
    pub lost: Vec<&'static str>,
}

/// A simulation report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Replicas.
    pub nodes: u32,
    /// Byzantine tolerance.
    pub f: u32,
    /// Extra collectors.
    pub c: u32,
    /// Scheme id.
    pub scheme: String,
    /// Worker threads used.
    pub threads: usize,
    /// Byzantine replicas simulated.
    pub byzantine: u32,
    /// Beacons produced (consecutive from round 1).
    pub rounds: u64,
    /// Highest committed height.
    pub heights_committed: u64,
    /// Share of heights committed on the fast path.
    pub fast_path_ratio: f64,
    /// Views entered beyond view 0, over all heights.
    pub view_changes: u64,
    /// Virtual time at which the last honest node finished the DKG (ms).
    pub dkg_virtual_ms: f64,
    /// Dealers of the DKG (the committee drawn from the genesis seed, or all).
    pub dkg_dealers: u32,
    /// Qualified dealers in the honest members' result.
    pub dkg_qualified: u32,
    /// Dealers an honest member excluded, with its reason.
    pub dkg_disqualified: BTreeMap<u32, Disqualification>,
    /// Wall time of the DKG part (s).
    pub dkg_wall_s: f64,
    /// DKG and epoch-change messages sent in the whole run, by kind
    /// (`dkg-summary`, `dkg-broadcast`, ...).
    pub dkg_messages_by_kind: BTreeMap<String, u64>,
    /// DKG and epoch-change messages sent per member.
    pub dkg_messages_per_member: f64,
    /// DKG and epoch-change bytes sent per member.
    pub dkg_bytes_per_member: f64,
    /// Beacon round latency (ms): from learning beta_{h-1} to learning beta_h.
    pub beacon_latency_ms: Percentiles,
    /// On a paced chain, the delay (ms) from a round's time to a member
    /// learning its beacon (`localnet`'s `beacon_delay_ms`); absent back to back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beacon_delay_ms: Option<Percentiles>,
    /// Commit round latency (ms): from committing block h-1 to committing block
    /// h (`consensus::latency`).
    pub commit_latency_ms: Percentiles,
    /// Consensus messages per height, whole network (every consensus message
    /// sent in the run, divided by the heights committed).
    pub messages_per_round: f64,
    /// Consensus messages sent in the whole run, by kind (`sign-share`,
    /// `pre-prepare`, ...).
    pub messages_by_kind: BTreeMap<String, u64>,
    /// Consensus bytes per height, whole network.
    pub bytes_per_round: f64,
    /// Consensus messages per node per height.
    pub messages_per_node_per_round: f64,
    /// Consensus bytes per node per height.
    pub bytes_per_node_per_round: f64,
    /// Virtual CPU per node per height (ms), from the cost model.
    pub cpu_ms_per_node_per_round: f64,
    /// Wall time (s).
    pub wall_s: f64,
    /// Wall time of the rounds after the DKG (s).
    pub rounds_wall_s: f64,
    /// Events processed.
    pub events: u64,
    /// Events per wall second.
    pub events_per_s: f64,
    /// Virtual time simulated (s).
    pub virtual_s: f64,
    /// Hash of the trace: equal seeds and configs give equal hashes.
    pub trace_hash: String,
    /// Hash of the trace from the start of the rounds at the cut, in a run
    /// that saves or loads a DKG snapshot (`crate::snapshot`): the run that
    /// saved a snapshot and every run from it with the same configuration
    /// give the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds_trace_hash: Option<String>,
    /// The DKG snapshot this run saved, or started from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dkg_snapshot: Option<SnapshotReport>,
    /// The last beacon.
    pub final_beacon: Option<FinalBeacon>,
    /// The beacon group public key, hex.
    pub group_public_key: Option<String>,
    /// Invariant violations (empty when none).
    pub violations: Vec<Violation>,
    /// Evidence reported by honest members, by kind and culprit.
    pub evidence: BTreeMap<String, u64>,
    /// The change of members, in the `reshare` scenario.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reshare: Option<crate::reshare::ReshareReport>,
    /// The crashes that struck between two durable writes (none without a
    /// crash point).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crash_points: Vec<CrashPointHit>,
    /// Per-round latencies.
    pub per_round: Vec<RoundStats>,
    /// How the simulator's own work would spread over more threads
    /// (`crate::host_parallelism`): the host's measurement, which varies
    /// from run to run.
    pub host_parallelism: crate::host_parallelism::HostParallelism,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        let p = percentiles(&v);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(percentiles(&[]).max, 0.0);
        assert_eq!(percentiles(&[3.0]).p50, 3.0);
    }
}
