//! Invariant checkers, fed every commit, beacon and finalized height of honest
//! members (as an [`Observer`]) and every vote they send: agreement, beacon
//! validity, uniqueness and release time, no honest member signing two values
//! for one slot (crash restarts included), liveness after the last fault heals.
//! A violation is typed (safety / liveness / crash) and carries the seed and the
//! event that broke it.

use beacon::chain::ChainInfo;
use beacon::{Beacon, NodeIndex, Scheme, SchemeId, Time};
use consensus::{
    Block, CommitCertificate, CommittedEntry, Height, Message, Observer, ReplicaConfig, View,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Heights below the highest one seen by more than this are no longer checked
/// for conflicting votes (bounded memory over long runs).
const SIGNED_WINDOW: u64 = 512;

/// A slot an honest member signs at most one value for: (member, view, kind).
type SignedSlot = (u32, View, &'static str);

/// Kinds of failure, so a campaign can sort them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailureKind {
    /// Two honest members disagree, or an invalid or second beacon appeared.
    Safety,
    /// No progress within the bound after the last fault healed.
    Liveness,
    /// A member panicked.
    Crash,
}

/// One violation.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// Kind.
    pub kind: FailureKind,
    /// Member where it showed, if one.
    pub node: Option<u32>,
    /// Virtual time (ms).
    pub time_ms: f64,
    /// What happened.
    pub detail: String,
    /// The run's seed (replays it).
    pub seed: u64,
}

/// The checkers' state.
pub struct Checker {
    /// The chain's info less its group key (known after the DKG).
    chain: ChainInfo,
    /// The replicas' parameters (release times of beacons).
    replica: ReplicaConfig,
    honest: Vec<bool>,
    seed: u64,
    group_key: Option<Vec<u8>>,
    commits: BTreeMap<Height, [u8; 32]>,
    beacons: BTreeMap<u64, Beacon>,
    violations: Vec<Violation>,
    /// What each honest member signed, by height and slot.
    signed: BTreeMap<Height, BTreeMap<SignedSlot, [u8; 32]>>,
    last_progress: Time,
    max_height: Height,
    last_time: Time,
}

impl Checker {
    /// A checker for one run of replicas with parameters `replica` and
    /// signature scheme `scheme` (the group key is the one the DKG agrees on);
    /// `honest[i]` says whether member `i` is honest.
    pub fn new(replica: &ReplicaConfig, scheme: SchemeId, honest: Vec<bool>, seed: u64) -> Self {
        Checker {
            chain: replica.chain_info(Vec::new(), scheme),
            replica: replica.clone(),
            honest,
            seed,
            group_key: None,
            commits: BTreeMap::new(),
            beacons: BTreeMap::new(),
            violations: Vec::new(),
            signed: BTreeMap::new(),
            last_progress: Time::ZERO,
            max_height: Height::ZERO,
            last_time: Time::ZERO,
        }
    }

    /// Records a violation.
    pub fn fail(&mut self, kind: FailureKind, node: Option<u32>, at: Time, detail: String) {
        self.violations.push(Violation {
            kind,
            node,
            time_ms: at.as_millis_f64(),
            detail,
            seed: self.seed,
        });
    }

    /// Whether anything failed.
    pub fn failed(&self) -> bool {
        !self.violations.is_empty()
    }

    /// All violations.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// The beacon group key all honest members derived.
    pub fn group_key(&self) -> Option<&[u8]> {
        self.group_key.as_deref()
    }

    /// The verified beacon chain (consecutive from round 1).
    pub fn beacons(&self) -> Vec<Beacon> {
        let mut out = Vec::new();
        for (r, b) in &self.beacons {
            if *r != out.len() as u64 + 1 {
                break;
            }
            out.push(b.clone());
        }
        out
    }

    /// Highest height committed by some honest member.
    pub fn committed_heights(&self) -> u64 {
        self.commits.keys().next_back().map_or(0, |h| h.get())
    }

    /// Latest event time seen.
    pub fn last_time(&self) -> Time {
        self.last_time
    }

    fn touch(&mut self, at: Time) {
        self.last_time = self.last_time.max(at);
    }

    /// An honest member finished the DKG with this beacon group key.
    pub fn on_group_key(&mut self, node: u32, at: Time, key: Vec<u8>) {
        self.touch(at);
        match &self.group_key {
            Some(k) if *k != key => self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                "honest members derived different group keys".into(),
            ),
            Some(_) => {}
            None => self.group_key = Some(key),
        }
    }

    /// An honest member `node` sent `message`: it never signs two values for
    /// one slot — SIGN-SHARE, COMMIT share and PRE-PREPARE per `(height,
    /// view)`, its own VIEW-CHANGE per `(height, new view)` — even after a
    /// crash and restart (what SBFT's quorum intersections assume of it).
    pub fn on_signed<S: Scheme>(&mut self, node: u32, at: Time, message: &Message<S>) {
        let Some((height, view, kind, digest)) = message.vote_slot() else {
            return;
        };
        if matches!(message, Message::ViewChange(vc) if vc.from.0 != node) {
            return;
        }
        let floor = self.max_height.saturating_sub(SIGNED_WINDOW);
        if height < floor {
            return;
        }
        while self
            .signed
            .first_key_value()
            .is_some_and(|(h, _)| *h < floor)
        {
            self.signed.pop_first();
        }
        let slots = self.signed.entry(height).or_default();
        let Some(first) = slots.insert((node, view, kind), digest) else {
            return;
        };
        if first != digest {
            // Keep the first value: a third one is reported against it too.
            slots.insert((node, view, kind), first);
            self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                format!(
                    "honest member {node} signed two values for {kind} at height {height}, view {view}: {} and {}",
                    hex::encode(&first[..4]),
                    hex::encode(&digest[..4])
                ),
            );
        }
    }

    /// Agreement: one block per height among honest members.
    pub fn on_commit(&mut self, node: u32, at: Time, height: Height, digest: [u8; 32]) {
        self.touch(at);
        if !self.honest[node as usize] {
            return;
        }
        match self.commits.get(&height) {
            Some(d) if *d != digest => self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                format!(
                    "agreement: height {height} committed as {} and {}",
                    hex::encode(d),
                    hex::encode(digest)
                ),
            ),
            Some(_) => {}
            None => {
                self.commits.insert(height, digest);
            }
        }
    }

    /// Validity (verifies under the group key, chains on the previous beacon in
    /// a chained scheme, carries no link in an unchained one) and uniqueness (one
    /// signature per round).
    pub fn on_beacon(&mut self, node: u32, at: Time, beacon: &Beacon) {
        self.touch(at);
        if !self.honest[node as usize] {
            return;
        }
        if let Some(b) = self.beacons.get(&beacon.round) {
            if b.signature != beacon.signature || b.previous_signature != beacon.previous_signature
            {
                self.fail(
                    FailureKind::Safety,
                    Some(node),
                    at,
                    format!("uniqueness: two beacons for round {}", beacon.round),
                );
            }
            return;
        }
        let expected_prev = if beacon.round == 1 {
            Some(self.chain.genesis_seed.clone())
        } else {
            self.beacons
                .get(&(beacon.round - 1))
                .map(|b| b.signature.clone())
        };
        let linked = if self.chain.scheme.is_chained() {
            expected_prev.is_none_or(|p| p == beacon.previous_signature)
        } else {
            beacon.previous_signature.is_empty()
        };
        if !linked {
            self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                if self.chain.scheme.is_chained() {
                    format!(
                        "validity: round {} does not chain on round {}",
                        beacon.round,
                        beacon.round - 1
                    )
                } else {
                    format!(
                        "validity: unchained round {} carries a previous signature",
                        beacon.round
                    )
                },
            );
            return;
        }
        let Some(key) = self.group_key.clone() else {
            self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                "beacon before any group key".into(),
            );
            return;
        };
        let info = ChainInfo {
            public_key: key,
            ..self.chain.clone()
        };
        if let Err(e) = info.verify_beacon(beacon) {
            self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                format!("validity: {e}"),
            );
            return;
        }
        self.beacons.insert(beacon.round, beacon.clone());
    }

    /// Release time: an honest member learns no beacon before its round's
    /// release time (on a paced chain).
    fn on_beacon_time(&mut self, node: u32, at: Time, round: u64) {
        let release = self.replica.release_time(round);
        if at.0 < release {
            self.fail(
                FailureKind::Safety,
                Some(node),
                at,
                format!("beacon {round} learned before its release time {release} us"),
            );
        }
    }

    /// An honest member finalized `height`.
    pub fn on_progress(&mut self, at: Time, height: Height) {
        self.touch(at);
        if height > self.max_height {
            self.max_height = height;
            self.last_progress = at;
        }
    }

    /// Liveness: after `last_heal`, some honest member must finalize a new height
    /// at least every `bound_us`.
    pub fn check_liveness(
        &mut self,
        now: Time,
        bound_us: u64,
        last_heal: Option<Time>,
    ) -> Option<()> {
        let heal = last_heal?;
        let since = self.last_progress.max(heal);
        if now.micros_since(since) > bound_us {
            self.fail(
                FailureKind::Liveness,
                None,
                now,
                format!("no height finalized for {} ms after the last fault healed (stuck after height {})", bound_us / 1000, self.max_height),
            );
            return Some(());
        }
        None
    }
}

/// The checker observes honest members' events only (the engine's choice).
impl<S: Scheme> Observer<S> for Checker {
    fn committed(
        &mut self,
        node: NodeIndex,
        at: Time,
        block: &Arc<Block>,
        certificate: &CommitCertificate<S>,
    ) {
        self.on_commit(node.0, at, block.height, certificate.digest);
    }

    fn beacon(&mut self, node: NodeIndex, at: Time, beacon: &Beacon) {
        self.on_beacon_time(node.0, at, beacon.round);
        self.on_beacon(node.0, at, beacon);
    }

    fn finalized(&mut self, _: NodeIndex, at: Time, entry: &Arc<CommittedEntry<S>>) {
        self.on_progress(at, entry.block.height);
    }
}
