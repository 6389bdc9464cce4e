//! The run's statistics from its honest members' events: round latencies
//! (`consensus::latency`), commit paths, views entered, evidence, and how far
//! each member finalized. An [`Observer`], fed by the engine with the events of
//! honest members only; the report's per-round figures come from here.

use crate::report::{percentiles, Percentiles, RoundStats};
use beacon::{Beacon, NodeIndex, Scheme, Time};
use consensus::latency::RoundClock;
use consensus::replica::Evidence;
use consensus::{
    Block, CommitCertificate, CommitPath, CommittedEntry, Height, Observer, ReplicaConfig, View,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Statistics of one run, per slot of the engine where they are per member.
pub struct Stats {
    /// Per slot: when it learned its recent beacons and commits.
    clocks: Vec<RoundClock>,
    /// Per round: beacon round latencies (ms) across members.
    beacon_samples: BTreeMap<u64, Vec<f64>>,
    /// Per height: commit round latencies (ms) across members.
    commit_samples: BTreeMap<Height, Vec<f64>>,
    /// Per height: the path of its first commit.
    paths: BTreeMap<Height, CommitPath>,
    /// Views entered beyond view 0.
    view_changes: BTreeSet<(Height, View)>,
    /// Per slot: the last height it finalized.
    finalized: Vec<Height>,
    /// Evidence by kind and culprit.
    evidence: BTreeMap<String, u64>,
    /// On a paced chain, the replicas' schedule (`time_of_round`).
    schedule: Option<ReplicaConfig>,
    /// Per learned beacon on a paced chain: ms from its round's time.
    delay_samples: Vec<f64>,
}

impl Stats {
    /// Statistics of `slots` slots of replicas configured by `replica`,
    /// nothing observed yet.
    pub fn new(slots: usize, replica: &ReplicaConfig) -> Self {
        Stats {
            clocks: vec![RoundClock::new(); slots],
            beacon_samples: BTreeMap::new(),
            commit_samples: BTreeMap::new(),
            paths: BTreeMap::new(),
            view_changes: BTreeSet::new(),
            finalized: vec![Height::ZERO; slots],
            evidence: BTreeMap::new(),
            schedule: (!replica.period.is_zero()).then(|| replica.clone()),
            delay_samples: Vec::new(),
        }
    }

    /// Slot `slot`'s replica started at `at` (its first round's latency
    /// counts from there).
    pub fn start(&mut self, slot: u32, at: Time) {
        self.clocks[slot as usize].start(at);
    }

    /// The last height slot `slot` finalized.
    pub fn finalized(&self, slot: u32) -> Height {
        self.finalized[slot as usize]
    }

    /// Share of heights committed on the fast path (zero when none committed).
    pub fn fast_path_ratio(&self) -> f64 {
        if self.paths.is_empty() {
            return 0.0;
        }
        let fast = self
            .paths
            .values()
            .filter(|p| **p == CommitPath::Fast)
            .count();
        fast as f64 / self.paths.len() as f64
    }

    /// Views entered beyond view 0, over all heights.
    pub fn view_changes(&self) -> u64 {
        self.view_changes.len() as u64
    }

    /// Beacon round latency over all rounds and members.
    pub fn beacon_latency(&self) -> Percentiles {
        let all: Vec<f64> = self.beacon_samples.values().flatten().copied().collect();
        percentiles(&all)
    }

    /// On a paced chain, the delay from each round's time to a member learning
    /// its beacon, over all rounds and members; `None` back to back.
    pub fn beacon_delay(&self) -> Option<Percentiles> {
        self.schedule
            .as_ref()
            .map(|_| percentiles(&self.delay_samples))
    }

    /// Commit round latency over all heights and members.
    pub fn commit_latency(&self) -> Percentiles {
        let all: Vec<f64> = self.commit_samples.values().flatten().copied().collect();
        percentiles(&all)
    }

    /// Evidence by kind and culprit.
    pub fn evidence(&self) -> &BTreeMap<String, u64> {
        &self.evidence
    }

    /// The figures of rounds `1..=rounds`.
    pub fn per_round(&self, rounds: u64) -> Vec<RoundStats> {
        let samples = |s: Option<&Vec<f64>>| percentiles(s.map(Vec::as_slice).unwrap_or(&[]));
        (1..=rounds)
            .map(|r| RoundStats {
                round: r,
                beacon_ms: samples(self.beacon_samples.get(&r)),
                commit_ms: samples(self.commit_samples.get(&Height::new(r))),
                path: self.paths.get(&Height::new(r)).map(|p| p.as_str().into()),
                view_changes: self
                    .view_changes
                    .iter()
                    .filter(|(h, _)| h.get() == r)
                    .count() as u64,
            })
            .collect()
    }
}

impl<S: Scheme> Observer<S> for Stats {
    fn committed(
        &mut self,
        node: NodeIndex,
        at: Time,
        block: &Arc<Block>,
        certificate: &CommitCertificate<S>,
    ) {
        self.paths.entry(block.height).or_insert(certificate.path);
        if let Some(latency) = self.clocks[node.0 as usize].commit(block.height, at) {
            self.commit_samples
                .entry(block.height)
                .or_default()
                .push(latency.as_secs_f64() * 1000.0);
        }
    }

    fn beacon(&mut self, node: NodeIndex, at: Time, beacon: &Beacon) {
        let height = Height::new(beacon.round);
        if let Some(schedule) = &self.schedule {
            let due = Time(schedule.time_of_round(beacon.round));
            self.delay_samples.push(at.millis_after_f64(due));
        }
        if let Some(latency) = self.clocks[node.0 as usize].beacon(height, at) {
            self.beacon_samples
                .entry(beacon.round)
                .or_default()
                .push(latency.as_secs_f64() * 1000.0);
        }
    }

    fn finalized(&mut self, node: NodeIndex, _: Time, entry: &Arc<CommittedEntry<S>>) {
        self.finalized[node.0 as usize] = entry.block.height;
    }

    fn view_changed(&mut self, _: NodeIndex, _: Time, height: Height, view: View) {
        self.view_changes.insert((height, view));
    }

    fn evidence(&mut self, _: NodeIndex, _: Time, evidence: &Evidence) {
        let key = format!("{} by {}", evidence.kind, evidence.culprit);
        *self.evidence.entry(key).or_default() += 1;
    }
}
