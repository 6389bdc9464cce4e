//! The `reshare` scenario's side of the engine: which members leave and join,
//! the change the operators propose, what each member reports of it, and the
//! figures of the switch.

use crate::config::ReshareSection;
use crate::SimError;
use beacon::{Scheme, Time};
use consensus::disk::EpochRecord;
use consensus::epoch::{member_id, Directory, EpochChange};
use consensus::{Epoch, EpochEvent, Height};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// What the report says of a change of members.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReshareReport {
    /// Members before.
    pub old_nodes: u32,
    /// Members after.
    pub new_nodes: u32,
    /// Genesis members that left.
    pub left: Vec<u32>,
    /// Parties that joined.
    pub joined: Vec<u32>,
    /// When the operators proposed it (virtual ms).
    pub proposed_ms: f64,
    /// When the first honest member read the decision (virtual ms).
    pub decided_ms: f64,
    /// The height whose block decided it.
    pub decided_height: u64,
    /// When the last honest new member held its keys (virtual ms).
    pub ready_ms: f64,
    /// The last height of the old epoch.
    pub switch_height: u64,
    /// When the last honest new member ran the new epoch (virtual ms).
    pub switched_ms: f64,
    /// From the decision to the last honest member in the new epoch (ms): the
    /// cost of the change.
    pub transition_ms: f64,
    /// From the decision to the last honest new member holding its keys
    /// (ms): the resharing and the new members' DKG.
    pub reshare_ms: f64,
    /// `reshare_ms` over the genesis DKG's virtual time.
    pub reshare_dkg_ratio: f64,
    /// Honest new members in the new epoch.
    pub started: u32,
    /// Honest leavers that erased their shares.
    pub retired: u32,
    /// Members cut off during the change that have not come back into it: on
    /// the listed side of a partition that lasted past the decision (the new
    /// members' DKG may have gone through its attempts without them). The
    /// name is kept for scripts; a crash no longer costs a member its part.
    pub lost_by_crash: u32,
    /// The longest any honest member waited for a beacon of the rounds of
    /// the change (from the round before the deciding height to three rounds
    /// after the switch), over the median round latency of the run: the chain
    /// should not stop for more than 3.
    pub switch_gap_ratio: f64,
}

/// The change of one run, and its progress.
pub(crate) struct ReshareRun {
    pub change: EpochChange,
    pub at_height: u64,
    pub proposed: Option<Time>,
    new_members: BTreeSet<u32>,
    leavers: BTreeSet<u32>,
    joiners: Vec<u32>,
    old_nodes: u32,
    decided: Option<(Time, Height)>,
    ready: BTreeMap<u32, Time>,
    started: BTreeMap<u32, (Time, Height)>,
    retired: BTreeSet<u32>,
}

impl ReshareRun {
    /// The change of `section` for `nodes` genesis members: leavers drawn with
    /// `rng`, joiners the parties after the genesis members in `directory`.
    pub(crate) fn plan(
        section: &ReshareSection,
        nodes: u32,
        directory: &Directory,
        rng: &mut ChaCha20Rng,
    ) -> Result<Self, SimError> {
        let keys = directory.keys();
        let c = section.new_c(nodes)?;
        let mut old: Vec<u32> = (0..nodes).collect();
        old.shuffle(rng);
        let leavers: BTreeSet<u32> = old.iter().take(section.leave as usize).copied().collect();
        let joiners: Vec<u32> = (nodes..nodes + section.join).collect();
        let members: Vec<u32> = (0..nodes)
            .filter(|i| !leavers.contains(i))
            .chain(joiners.iter().copied())
            .collect();
        let change = EpochChange {
            epoch: Epoch::new(1),
            members: members
                .iter()
                .map(|i| member_id(&keys[*i as usize]))
                .collect(),
            c,
            beacon_threshold: 0,
            consensus_keys: members
                .iter()
                .filter_map(|i| {
                    directory
                        .listing(consensus::DirectoryIndex::new(*i))
                        .cloned()
                })
                .collect(),
        };
        Ok(ReshareRun {
            change,
            at_height: section.at_height,
            proposed: None,
            new_members: members.into_iter().collect(),
            leavers,
            joiners,
            old_nodes: nodes,
            decided: None,
            ready: BTreeMap::new(),
            started: BTreeMap::new(),
            retired: BTreeSet::new(),
        })
    }

    /// Records an honest member's epoch event.
    pub(crate) fn on_event<S: Scheme>(&mut self, node: u32, at: Time, event: &EpochEvent<S>) {
        match event {
            EpochEvent::Decided { height, .. } => {
                self.decided.get_or_insert((at, *height));
            }
            EpochEvent::Ready { .. } => {
                self.ready.entry(node).or_insert(at);
            }
            EpochEvent::Started { start, .. } => {
                self.started.entry(node).or_insert((at, *start));
            }
            EpochEvent::Retired { .. } => {
                self.retired.insert(node);
            }
            EpochEvent::Failed { .. } => {}
        }
    }

    /// Records what an honest member's disk holds after a crash struck
    /// between its writes of the change (`record`, written at `at`): the
    /// event after those writes was lost with the crash, and the member
    /// restarts in the epoch it recorded.
    pub(crate) fn on_record(&mut self, node: u32, at: Time, record: &EpochRecord) {
        if record.retired {
            self.retired.insert(node);
        } else {
            self.started
                .entry(node)
                .or_insert((at, Height::new(record.start)));
        }
    }

    /// Whether every honest new member runs the new epoch and every honest
    /// leaver retired.
    pub(crate) fn complete(&self, honest: &[bool]) -> bool {
        let is_honest = |i: &u32| honest.get(*i as usize).copied().unwrap_or(false);
        self.new_members
            .iter()
            .filter(|i| is_honest(i))
            .all(|i| self.started.contains_key(i))
            && self
                .leavers
                .iter()
                .filter(|i| is_honest(i))
                .all(|i| self.retired.contains(i))
    }

    /// When the first honest member read the decision.
    pub(crate) fn decided_at(&self) -> Option<Time> {
        self.decided.map(|(t, _)| t)
    }

    /// The height whose block decided the change, once decided.
    pub(crate) fn decided_height(&self) -> Option<Height> {
        self.decided.map(|(_, h)| h)
    }

    /// The height the new epoch starts at, once some member runs it.
    pub(crate) fn start_height(&self) -> Option<Height> {
        self.started.values().map(|(_, h)| *h).min()
    }

    /// The report's figures; `gap_ratio` from the engine's statistics,
    /// `dkg_ms` the genesis DKG's virtual time, `lost_by_crash` the members
    /// cut off during the change.
    pub(crate) fn report(&self, gap_ratio: f64, dkg_ms: f64, lost_by_crash: u32) -> ReshareReport {
        let ready = self.ready.values().max().copied();
        let ms = |t: Option<Time>| t.map_or(0.0, |t| t.as_millis_f64());
        let decided = self.decided.map(|(t, _)| t);
        let switched = self.started.values().map(|(t, _)| *t).max();
        ReshareReport {
            old_nodes: self.old_nodes,
            new_nodes: self.new_members.len() as u32,
            left: self.leavers.iter().copied().collect(),
            joined: self.joiners.clone(),
            proposed_ms: ms(self.proposed),
            decided_ms: ms(decided),
            decided_height: self.decided.map_or(0, |(_, h)| h.get()),
            ready_ms: ms(ready),
            switch_height: self.start_height().map_or(0, |h| h.get().saturating_sub(1)),
            switched_ms: ms(switched),
            transition_ms: match (decided, switched) {
                (Some(d), Some(s)) => s.as_millis_f64() - d.as_millis_f64(),
                _ => 0.0,
            },
            reshare_ms: match (decided, ready) {
                (Some(d), Some(r)) => r.as_millis_f64() - d.as_millis_f64(),
                _ => 0.0,
            },
            reshare_dkg_ratio: match (decided, ready) {
                (Some(d), Some(r)) if dkg_ms > 0.0 => {
                    (r.as_millis_f64() - d.as_millis_f64()) / dkg_ms
                }
                _ => 0.0,
            },
            started: self.started.len() as u32,
            lost_by_crash,
            retired: self.retired.len() as u32,
            switch_gap_ratio: gap_ratio,
        }
    }
}
