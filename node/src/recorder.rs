//! What a node does with its replica's events ([`consensus::Observer`]): the
//! metrics ([`crate::metrics`]) and the API's round statistics, the log lines,
//! and the finalized heights handed to the persistence thread.
//!
//! It owns the round clock (`consensus::latency`) and the CPU counted since the
//! last beacon, which the event loop feeds as it handles inputs.

use crate::clock::process_cpu_ns;
use crate::http::{ApiState, RoundStat};
use beacon::{Beacon, NodeIndex, Scheme, Time};
use consensus::latency::RoundClock;
use consensus::replica::Evidence;
use consensus::{Block, CommitCertificate, CommittedEntry, Height, Observer, ReplicaConfig, View};
use std::collections::BTreeMap;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use tracing::debug;

/// The node's observer of its replica's events.
pub struct Recorder<S: Scheme> {
    state: Arc<ApiState>,
    persist: Sender<Arc<CommittedEntry<S>>>,
    replica: ReplicaConfig,
    /// Protocol-thread CPU since the last beacon (ns) and process CPU then.
    cpu_since_beacon: u64,
    process_cpu_at_beacon: u64,
    /// Whether the last beacon was learned live (its successor's latency is meaningful).
    live: bool,
    /// When recent beacons were learned here (round latency).
    clock: RoundClock,
    /// Commits of blocks whose beacon was not learned yet (their latency and
    /// path join the round's statistics when it is), a few at most.
    commits: BTreeMap<u64, (Option<f64>, &'static str)>,
}

/// Commits waiting for their beacon, at most (catch-up commits many at once).
const PENDING_COMMITS: usize = 16;

impl<S: Scheme> Recorder<S> {
    /// A recorder publishing to `state`, handing finalized heights to
    /// `persist`, for a replica with parameters `replica`.
    pub fn new(
        state: Arc<ApiState>,
        persist: Sender<Arc<CommittedEntry<S>>>,
        replica: ReplicaConfig,
    ) -> Self {
        Recorder {
            state,
            persist,
            replica,
            cpu_since_beacon: 0,
            process_cpu_at_beacon: process_cpu_ns(),
            live: false,
            clock: RoundClock::new(),
            commits: BTreeMap::new(),
        }
    }

    /// The replica started (or was restored) at `at`: round latency counts
    /// from here.
    pub fn start(&mut self, at: Time) {
        self.clock.start(at);
    }

    /// The protocol thread spent `ns` nanoseconds of CPU on an input.
    pub fn spent(&mut self, ns: u64) {
        self.cpu_since_beacon += ns;
    }
}

impl<S: Scheme> Observer<S> for Recorder<S> {
    fn finalized(&mut self, _: NodeIndex, _: Time, entry: &Arc<CommittedEntry<S>>) {
        // The receiver lives as long as the node; a send error means it
        // already stopped on a store failure.
        let _ = self.persist.send(entry.clone());
    }

    fn beacon(&mut self, _: NodeIndex, learned_at: Time, beacon: &Beacon) {
        let latency_us = self
            .clock
            .beacon(Height::new(beacon.round), learned_at)
            .map_or(0, |d| d.as_micros() as u64);
        tracing::trace!(target: "timeline", at = learned_at.0, round = beacon.round, "beacon");
        let process = process_cpu_ns();
        // Its block may have committed first.
        let commit = self.commits.remove(&beacon.round);
        let stat = RoundStat {
            round: beacon.round,
            learned_at_us: learned_at.0,
            latency_ms: latency_us as f64 / 1000.0,
            delay_ms: (!self.replica.period.is_zero()).then(|| {
                let due = Time(self.replica.time_of_round(beacon.round));
                learned_at.millis_after_f64(due)
            }),
            protocol_cpu_ms: self.cpu_since_beacon as f64 / 1e6,
            process_cpu_ms: process.saturating_sub(self.process_cpu_at_beacon) as f64 / 1e6,
            commit_latency_ms: commit.and_then(|(latency, _)| latency),
            path: commit.map(|(_, path)| path),
        };
        self.cpu_since_beacon = 0;
        self.process_cpu_at_beacon = process;
        // A beacon learned right after another one (catch-up) has no
        // meaningful latency; one learned live does.
        if self.live && latency_us > 0 {
            let metrics = &self.state.metrics;
            metrics.round_latency.observe(latency_us as f64 * 1e-6);
            self.state
                .chain
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .record(stat.clone());
        }
        self.live = true;
        debug!(
            round = beacon.round,
            latency_ms = stat.latency_ms,
            cpu_ms = stat.protocol_cpu_ms,
            "beacon"
        );
    }

    fn committed(
        &mut self,
        _: NodeIndex,
        at: Time,
        block: &Arc<Block>,
        certificate: &CommitCertificate<S>,
    ) {
        let path = certificate.path;
        self.state.metrics.committed(path);
        let round = block.height.get();
        let latency = self
            .clock
            .commit(block.height, at)
            .filter(|_| self.live)
            .map(|d| d.as_micros() as f64 / 1000.0);
        let recorded = self
            .state
            .chain
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .record_commit(round, latency, path.as_str());
        if !recorded {
            self.commits.insert(round, (latency, path.as_str()));
            while self.commits.len() > PENDING_COMMITS {
                self.commits.pop_first();
            }
        }
        debug!(
            height = block.height.get(),
            view = certificate.view.get(),
            path = path.as_str(),
            "committed"
        );
    }

    fn view_changed(&mut self, _: NodeIndex, _: Time, height: Height, view: View) {
        self.state.metrics.view_changes.inc();
        crate::warn_throttled!(height = height.get(), view = view.get(), "view change");
    }

    fn evidence(&mut self, _: NodeIndex, _: Time, e: &Evidence) {
        let what = e.kind.to_string();
        self.state.metrics.misbehaved(e.culprit.0);
        crate::warn_throttled!(
            culprit = e.culprit.0,
            height = e.height.get(),
            what,
            "misbehaviour"
        );
    }
}
