//! The report of a run ([`Engine::report`]) and its beacon chain in drand's
//! JSON ([`Engine::chain_json`]).

use super::Engine;
use crate::report::{FinalBeacon, Report, SnapshotReport};
use crate::reshare::ReshareReport;
use crate::snapshot::SnapshotMode;
use beacon::chain::{BeaconJson, ChainInfoJson};
use beacon::Scheme;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;

impl<S: Scheme> Engine<S> {
    pub(super) fn chain_json(&self) -> Option<serde_json::Value> {
        let key = self.checker.group_key()?;
        let info = self.replica.chain_info(key.to_vec(), S::ID);
        let beacons: Vec<BeaconJson> = self
            .checker
            .beacons()
            .iter()
            .map(BeaconJson::from)
            .collect();
        Some(serde_json::json!({ "info": ChainInfoJson::from(&info), "beacons": beacons }))
    }

    pub(super) fn report(&self, wall_s: f64) -> Report {
        let rounds_wall_s = self
            .rounds_started_wall
            .map(|t| t.elapsed().as_secs_f64())
            .unwrap_or(0.0);
        let dkg_wall_s = (wall_s - rounds_wall_s).max(0.0);
        let beacons = self.checker.beacons();
        let rounds = beacons.len() as u64;
        let heights = self.checker.committed_heights();
        let n = self.cfg.nodes as f64;
        let per = |v: u64| {
            if heights > 0 {
                v as f64 / heights as f64
            } else {
                0.0
            }
        };
        let cpu_rounds: u64 =
            self.slots.iter().map(|s| s.cpu_us).sum::<u64>() - self.cpu_at_rounds_start;
        let last = beacons.last();
        let finish = |mut trace: Sha256| {
            if let Some(b) = last {
                trace.update(b.round.to_be_bytes());
                trace.update(&b.signature);
            }
            hex::encode(trace.finalize())
        };
        let (trace_hash, rounds_trace_hash) = self.trace.hashes(finish);
        let dkg_messages = self.dkg_messages_by_kind();
        let dkg_snapshot = self.snapshot_report(dkg_wall_s);
        let f = self.replica.f;
        let consensus_messages: u64 = self.sent.consensus.messages.values().sum();
        Report {
            scenario: self.cfg.name.clone(),
            seed: self.cfg.seed,
            nodes: self.cfg.nodes,
            f,
            c: self.replica.c,
            scheme: S::ID.as_str().to_string(),
            threads: self.cfg.threads,
            byzantine: self.cfg.faults.byzantine,
            rounds,
            heights_committed: heights,
            fast_path_ratio: self.stats.fast_path_ratio(),
            view_changes: self.stats.view_changes(),
            dkg_virtual_ms: self.dkg_end.map(|t| t.as_millis_f64()).unwrap_or(0.0),
            dkg_dealers: self.dkg_dealers,
            dkg_qualified: self.dkg_qualified,
            dkg_disqualified: self.dkg_disqualified.clone(),
            dkg_wall_s,
            dkg_messages_per_member: dkg_messages.values().sum::<u64>() as f64 / n,
            dkg_messages_by_kind: dkg_messages,
            dkg_bytes_per_member: self.sent.dkg.bytes as f64 / n,
            beacon_latency_ms: self.stats.beacon_latency(),
            beacon_delay_ms: self.stats.beacon_delay(),
            commit_latency_ms: self.stats.commit_latency(),
            messages_per_round: per(consensus_messages),
            messages_by_kind: self
                .sent
                .consensus
                .messages
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            bytes_per_round: per(self.sent.consensus.bytes),
            messages_per_node_per_round: per(consensus_messages) / n,
            bytes_per_node_per_round: per(self.sent.consensus.bytes) / n,
            cpu_ms_per_node_per_round: per(cpu_rounds) / n / 1000.0,
            wall_s,
            rounds_wall_s,
            events: self.processed,
            events_per_s: if wall_s > 0.0 {
                self.processed as f64 / wall_s
            } else {
                0.0
            },
            virtual_s: self.checker.last_time().as_secs_f64(),
            trace_hash,
            rounds_trace_hash,
            dkg_snapshot,
            final_beacon: last.map(|b| FinalBeacon {
                round: b.round,
                signature: hex::encode(&b.signature),
                randomness: hex::encode(b.randomness()),
            }),
            group_public_key: self.checker.group_key().map(hex::encode),
            violations: self.checker.violations().to_vec(),
            evidence: self.stats.evidence().clone(),
            reshare: self.reshare_report(rounds),
            crash_points: self.crash_points.clone(),
            per_round: self.stats.per_round(rounds),
            host_parallelism: self.host_meter.report(self.cfg.threads),
        }
    }

    /// DKG messages sent, by kind: the snapshot's (if this run started
    /// from one) and this run's.
    fn dkg_messages_by_kind(&self) -> BTreeMap<String, u64> {
        let mut dkg_messages: BTreeMap<String, u64> = self
            .loaded_summary
            .as_ref()
            .map(|s| s.messages_by_kind.clone())
            .unwrap_or_default();
        for (k, v) in &self.sent.dkg.messages {
            *dkg_messages.entry(k.to_string()).or_default() += v;
        }
        dkg_messages
    }

    /// What this run did with a DKG snapshot, if it had one; `dkg_wall_s`:
    /// this run's DKG wall time (a loaded snapshot's is the run's that saved it).
    fn snapshot_report(&self, dkg_wall_s: f64) -> Option<SnapshotReport> {
        self.cfg.dkg_snapshot.as_ref().map(|mode| {
            let (action, file) = match mode {
                SnapshotMode::Save(p) => ("saved", p),
                SnapshotMode::Load(p) => ("loaded", p),
            };
            SnapshotReport {
                action: action.into(),
                file: file.display().to_string(),
                dkg_wall_s: self
                    .loaded_summary
                    .as_ref()
                    .map_or(dkg_wall_s, |s| s.wall_s),
            }
        })
    }

    /// The change of members of the `reshare` scenario, if it ran one, over
    /// the run's `rounds`.
    fn reshare_report(&self, rounds: u64) -> Option<ReshareReport> {
        let r = self.reshare.as_ref()?;
        let per_round = self.stats.per_round(rounds);
        let p50s: Vec<f64> = per_round.iter().map(|p| p.beacon_ms.p50).collect();
        let median = crate::report::percentiles(&p50s).p50;
        // The whole change: from the round before the deciding height (the
        // deals and their checks start there) to three rounds into the new
        // epoch.
        let switch = r.start_height().map_or(0, |h| h.get());
        let decided = r.decided_height().map_or(switch, |h| h.get());
        let from = decided.min(switch).saturating_sub(1);
        let around = per_round
            .iter()
            .filter(|p| (from..switch + 3).contains(&p.round))
            .map(|p| p.beacon_ms.max)
            .fold(0.0, f64::max);
        let gap = if median > 0.0 { around / median } else { 0.0 };
        let lost = (0..self.slots.len() as u32)
            .filter(|i| self.cut_off_in_change(*i))
            .count() as u32;
        let dkg_ms = self.dkg_end.map_or(0.0, |t| t.as_millis_f64());
        Some(r.report(gap, dkg_ms, lost))
    }

    /// Whether member `node` was cut off during the change of members: it
    /// sat on the listed side of a partition that lasted past the decision.
    /// Such a member is not excused, nor is one that crashed during the
    /// change: it asks for the deals, sub-shares and certificate it lacks and
    /// completes (`consensus::epoch`, "Faults and late members"). The report
    /// counts them (`lost_by_crash`, the name kept for scripts).
    fn cut_off_in_change(&self, node: u32) -> bool {
        let Some(r) = self.reshare.as_ref() else {
            return false;
        };
        match (r.decided_at(), self.dkg_end) {
            (Some(decided), Some(end)) => self.cfg.partitions.iter().any(|p| {
                end.plus_millis(p.heal_ms) >= decided
                    && p.side.iter().any(|[a, b]| (*a..=*b).contains(&node))
            }),
            _ => false,
        }
    }
}
