//! The checks of a chaos run, fed with what the nodes serve and what their
//! disks hold (killed nodes included):
//! - [`RoundLedger`]: one beacon and one block per round across every node,
//!   and the chain, as far as it is contiguous from round 1, verifies under
//!   the group key with drand's rules;
//! - [`VoteLedger`]: no member signed two different votes (a SIGN-SHARE, a
//!   COMMIT share or a proposal) for one height and view, from the votes the
//!   members persisted.
//!
//! Each check returns the violations it found as sentences; none is a pass.

use beacon::{Beacon, ChainInfo};
use consensus::Digest;
use std::collections::BTreeMap;

/// What one round looked like the first time a node showed it.
struct RoundSeen {
    signature: Vec<u8>,
    /// The beacon, until the chain was verified past it.
    beacon: Option<Beacon>,
    block: Option<Digest>,
    node: u32,
}

/// Beacons and blocks by round, as every node showed them.
pub(crate) struct RoundLedger {
    info: ChainInfo,
    rounds: BTreeMap<u64, RoundSeen>,
    /// The chain verifies from round 1 to here.
    verified_to: u64,
    /// The last verified beacon (the link of the next).
    last_verified: Option<Beacon>,
    /// Set once the chain failed to verify (checking stops there).
    broken: bool,
}

impl RoundLedger {
    /// An empty ledger for the chain of `info`.
    pub(crate) fn new(info: ChainInfo) -> Self {
        RoundLedger {
            info,
            rounds: BTreeMap::new(),
            verified_to: 0,
            last_verified: None,
            broken: false,
        }
    }

    /// Records `beacon` as node `node` shows it; a violation if another node
    /// (or this one, earlier) showed another beacon for the round.
    pub(crate) fn beacon(&mut self, node: u32, beacon: Beacon) -> Option<String> {
        let round = beacon.round;
        match self.rounds.get_mut(&round) {
            Some(seen) if seen.signature != beacon.signature => Some(format!(
                "two beacons for round {round}: node {} has {}, node {node} has {}",
                seen.node,
                short(&seen.signature),
                short(&beacon.signature)
            )),
            Some(_) => None,
            None => {
                self.rounds.insert(
                    round,
                    RoundSeen {
                        signature: beacon.signature.clone(),
                        beacon: (round > self.verified_to).then_some(beacon),
                        block: None,
                        node,
                    },
                );
                None
            }
        }
    }

    /// Records the block of height `round` in node `node`'s store; a
    /// violation if another block was seen for it.
    pub(crate) fn block(&mut self, node: u32, round: u64, digest: Digest) -> Option<String> {
        let seen = self.rounds.get_mut(&round)?;
        match seen.block {
            Some(b) if b != digest => Some(format!(
                "two blocks for height {round}: {} and {} (node {node})",
                short(&b),
                short(&digest)
            )),
            Some(_) => None,
            None => {
                seen.block = Some(digest);
                None
            }
        }
    }

    /// Verifies the rounds contiguous from the last verified one; a
    /// violation (once) at the first round that does not verify.
    pub(crate) fn verify(&mut self) -> Option<String> {
        if self.broken {
            return None;
        }
        let mut next = Vec::new();
        let mut r = self.verified_to + 1;
        while let Some(b) = self.rounds.get(&r).and_then(|s| s.beacon.clone()) {
            next.push(b);
            r += 1;
        }
        if next.is_empty() {
            return None;
        }
        if let Err(e) = self.info.verify_chain(self.last_verified.as_ref(), &next) {
            self.broken = true;
            return Some(format!("the chain does not verify: {e}"));
        }
        self.verified_to = r - 1;
        self.last_verified = next.pop();
        for (_, seen) in self.rounds.range_mut(..=self.verified_to) {
            seen.beacon = None;
        }
        None
    }

    /// The chain checked against.
    pub(crate) fn info(&self) -> &ChainInfo {
        &self.info
    }

    /// The chain verifies from round 1 to here (0: not yet round 1).
    pub(crate) fn verified_to(&self) -> u64 {
        self.verified_to
    }

    /// Whether no round failed to verify.
    pub(crate) fn intact(&self) -> bool {
        !self.broken
    }

    /// The highest round any node showed.
    pub(crate) fn highest(&self) -> u64 {
        self.rounds.keys().next_back().copied().unwrap_or(0)
    }
}

/// One vote of a member, as it persisted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum VoteKind {
    SignShare,
    Commit,
    Proposal,
}

/// Every vote seen in the members' persisted records, by member, height,
/// view and kind.
#[derive(Default)]
pub(crate) struct VoteLedger {
    votes: BTreeMap<(u32, u64, u64, VoteKind), Digest>,
    /// Distinct double signs found.
    pub(crate) double_signs: u64,
}

impl VoteLedger {
    /// Records that `node` signed `digest` as a `kind` vote at `height` and
    /// `view`; a violation if it signed another digest there before.
    pub(crate) fn vote(
        &mut self,
        node: u32,
        height: u64,
        view: u64,
        kind: VoteKind,
        digest: Digest,
    ) -> Option<String> {
        match self.votes.get(&(node, height, view, kind)) {
            Some(d) if *d != digest => {
                self.double_signs += 1;
                Some(format!(
                    "node {node} signed two {kind:?} votes at height {height}, view {view}: {} and {}",
                    short(d),
                    short(&digest)
                ))
            }
            Some(_) => None,
            None => {
                self.votes.insert((node, height, view, kind), digest);
                None
            }
        }
    }

    /// How many votes were read back.
    pub(crate) fn len(&self) -> usize {
        self.votes.len()
    }
}

fn short(bytes: &[u8]) -> String {
    hex::encode(&bytes[..bytes.len().min(6)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::field::Scalar;
    use beacon::{MinPk, Point as _, Scheme as _, SchemeId, G1};

    /// A chain of `rounds` beacons signed with one key, and its info.
    fn chain(rounds: u64) -> (ChainInfo, Vec<Beacon>) {
        let sk = Scalar::from_u64(12_345);
        let info = ChainInfo {
            public_key: G1::generator().mul(&sk).to_bytes(),
            period: 0,
            genesis_time: 0,
            genesis_seed: vec![9; 32],
            scheme: SchemeId::PedersenBlsChained,
            beacon_id: "default".into(),
        };
        let mut previous = info.genesis_seed.clone();
        let mut out = Vec::new();
        for round in 1..=rounds {
            let msg = beacon::chain::round_message(SchemeId::PedersenBlsChained, round, &previous);
            let signature = MinPk::hash_message(&msg).mul(&sk).to_bytes();
            out.push(Beacon {
                round,
                signature: signature.clone(),
                previous_signature: previous.clone(),
            });
            previous = signature;
        }
        (info, out)
    }

    #[test]
    fn an_honest_chain_verifies_and_shows_no_violation() {
        let (info, beacons) = chain(6);
        let mut ledger = RoundLedger::new(info);
        for node in 0..3 {
            for b in &beacons[..4 + node as usize] {
                assert_eq!(ledger.beacon(node, b.clone()), None);
                assert_eq!(ledger.block(node, b.round, [b.round as u8; 32]), None);
            }
            assert_eq!(ledger.verify(), None);
        }
        assert_eq!(ledger.verified_to(), 6);
        assert!(ledger.intact());
    }

    #[test]
    fn two_beacons_for_one_round_are_a_violation() {
        let (info, beacons) = chain(3);
        let mut ledger = RoundLedger::new(info);
        assert_eq!(ledger.beacon(0, beacons[1].clone()), None);
        let mut other = beacons[1].clone();
        other.signature[5] ^= 1;
        let v = ledger.beacon(4, other).expect("a violation");
        assert!(v.contains("two beacons for round 2"), "{v}");
    }

    #[test]
    fn two_blocks_for_one_height_are_a_violation() {
        let (info, beacons) = chain(2);
        let mut ledger = RoundLedger::new(info);
        ledger.beacon(0, beacons[0].clone());
        assert_eq!(ledger.block(0, 1, [1; 32]), None);
        assert_eq!(ledger.block(2, 1, [1; 32]), None);
        assert!(ledger.block(3, 1, [2; 32]).is_some());
    }

    #[test]
    fn a_broken_chain_is_a_violation_once() {
        let (info, mut beacons) = chain(5);
        // Round 4 links to a signature that is not round 3's.
        beacons[3].previous_signature = beacons[1].signature.clone();
        let mut ledger = RoundLedger::new(info);
        for b in &beacons[..3] {
            ledger.beacon(0, b.clone());
        }
        assert_eq!(ledger.verify(), None);
        assert_eq!(ledger.verified_to(), 3);
        for b in &beacons[3..] {
            ledger.beacon(0, b.clone());
        }
        assert!(ledger.verify().is_some());
        assert!(!ledger.intact());
        assert_eq!(ledger.verify(), None);
        assert_eq!(ledger.verified_to(), 3);
    }

    #[test]
    fn a_gap_holds_verification_until_it_is_filled() {
        let (info, beacons) = chain(4);
        let mut ledger = RoundLedger::new(info);
        for b in [&beacons[0], &beacons[2], &beacons[3]] {
            ledger.beacon(1, b.clone());
        }
        assert_eq!(ledger.verify(), None);
        assert_eq!(ledger.verified_to(), 1);
        ledger.beacon(2, beacons[1].clone());
        assert_eq!(ledger.verify(), None);
        assert_eq!(ledger.verified_to(), 4);
    }

    #[test]
    fn a_double_vote_is_a_violation_and_a_repeated_vote_is_not() {
        let mut votes = VoteLedger::default();
        assert_eq!(votes.vote(2, 10, 0, VoteKind::SignShare, [1; 32]), None);
        assert_eq!(votes.vote(2, 10, 0, VoteKind::SignShare, [1; 32]), None);
        // Another view, another kind, another member: not a double vote.
        assert_eq!(votes.vote(2, 10, 1, VoteKind::SignShare, [2; 32]), None);
        assert_eq!(votes.vote(2, 10, 0, VoteKind::Commit, [2; 32]), None);
        assert_eq!(votes.vote(3, 10, 0, VoteKind::SignShare, [2; 32]), None);
        assert!(votes.vote(2, 10, 0, VoteKind::SignShare, [2; 32]).is_some());
        assert_eq!(votes.double_signs, 1);
        assert_eq!(votes.len(), 4);
    }
}
