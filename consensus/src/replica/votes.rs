//! Crash safety of votes: what this replica signed, by height, and the rule
//! that it never signs anything else for the same slot — not even after a
//! crash that lost its memory. Every vote goes through [`VoteLog`] before it is
//! signed; a new entry makes the replica emit [`super::Output::PersistVotes`]
//! first in the outputs of that `handle` call, and the driver persists it
//! (durably) before it carries out any other output. A restarted replica is
//! given the record back ([`super::Replica::restore`]) and resumes from it: it
//! re-sends the same votes, keeps its prepare certificate, and returns to the
//! view it had moved to.
//!
//! The slots and their rule (the SBFT paper's honest-replica behaviour, and
//! what `SAFETY.md`'s quorum intersections assume of an honest replica):
//! - SIGN-SHARE (the vote): one digest per `(height, view)`.
//! - COMMIT share: one digest per `(height, view)`, with the prepare
//!   certificate it answers (a VIEW-CHANGE must report it).
//! - PRE-PREPARE or NEW-VIEW: one block per `(height, view)` as its primary.
//! - VIEW-CHANGE: one per `(height, new view)`, and never a vote in a view
//!   below the latest view this replica asked to change to.
//!
//! Beacon shares need no entry: threshold BLS is unique, so a replica's share
//! of a round is the same whenever it signs it.
//!
//! The record also keeps the body of every block it names. After a restart of
//! every member at once, nobody else holds the block of the height in
//! progress: a view change must re-propose a prepared (or fast-voted) block,
//! and a primary may propose nothing but the block it proposed before, so
//! without the bodies that height could never finish.

use crate::messages::{Block, Digest, PrepareCertificate, ViewChange};
use crate::{Height, View};
use beacon::Scheme;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What one replica signed at one height (the persisted record).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct SignedVotes<S: Scheme> {
    /// The height.
    pub height: Height,
    /// The digest of each view's SIGN-SHARE.
    pub votes: BTreeMap<View, Digest>,
    /// The digest of each view's COMMIT share.
    pub commits: BTreeMap<View, Digest>,
    /// The highest prepare certificate a COMMIT share answered.
    pub prepared: Option<PrepareCertificate<S>>,
    /// The digest of each view's proposal (as its primary).
    pub proposals: BTreeMap<View, Digest>,
    /// The latest VIEW-CHANGE sent.
    pub view_change: Option<Arc<ViewChange<S>>>,
    /// The bodies of the blocks named above that this replica held when it
    /// signed (see the module header). Not part of the record's encoding: a
    /// store keeps each body once, by digest, beside the record, so a record
    /// written three times per height does not write its block three times.
    #[serde(skip)]
    pub blocks: BTreeMap<Digest, Arc<Block>>,
}

impl<S: Scheme> SignedVotes<S> {
    /// Nothing signed at `height`.
    pub fn new(height: Height) -> Self {
        SignedVotes {
            height,
            votes: BTreeMap::new(),
            commits: BTreeMap::new(),
            prepared: None,
            proposals: BTreeMap::new(),
            view_change: None,
            blocks: BTreeMap::new(),
        }
    }

    /// The digests of the blocks this record names: voted, committed,
    /// proposed, and the prepared one.
    pub fn named(&self) -> impl Iterator<Item = &Digest> + '_ {
        self.votes
            .values()
            .chain(self.commits.values())
            .chain(self.proposals.values())
            .chain(self.prepared.as_ref().map(|p| &p.digest))
    }

    /// The latest view this replica asked to change to (0 when none).
    pub fn view_change_view(&self) -> View {
        self.view_change
            .as_ref()
            .map_or(View::ZERO, |vc| vc.new_view)
    }
}

/// Why the log refused a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another value was signed for this slot.
    Conflict,
    /// A VIEW-CHANGE to a later view was sent: no votes in earlier views.
    ViewLeft,
}

/// The record of every height not yet finalized here, and whether it changed
/// since it was last handed to the driver.
pub(super) struct VoteLog<S: Scheme> {
    heights: BTreeMap<Height, SignedVotes<S>>,
    dirty: bool,
}

impl<S: Scheme> VoteLog<S> {
    /// The log a replica resumes with: `records` from its store, those below
    /// `height` (finalized since) dropped.
    pub(super) fn restore(records: Vec<SignedVotes<S>>, height: Height) -> Self {
        VoteLog {
            heights: records
                .into_iter()
                .filter(|r| r.height >= height)
                .map(|r| (r.height, r))
                .collect(),
            dirty: false,
        }
    }

    /// The record of `height`, if anything was signed there.
    pub(super) fn at(&self, height: Height) -> Option<&SignedVotes<S>> {
        self.heights.get(&height)
    }

    fn entry(&mut self, height: Height) -> &mut SignedVotes<S> {
        self.heights
            .entry(height)
            .or_insert_with(|| SignedVotes::new(height))
    }

    /// Records a slot of `height` (`slot` picks the map) as `digest`, with
    /// the block's body when held: `Ok` when it is new (now recorded) or the
    /// same as before.
    fn claim(
        &mut self,
        height: Height,
        view: View,
        digest: Digest,
        block: Option<&Arc<Block>>,
        slot: fn(&mut SignedVotes<S>) -> &mut BTreeMap<View, Digest>,
    ) -> Result<(), Refusal> {
        let record = self.entry(height);
        if view < record.view_change_view() {
            return Err(Refusal::ViewLeft);
        }
        let mut changed = false;
        match slot(record).get(&view) {
            Some(d) if *d == digest => {}
            Some(_) => return Err(Refusal::Conflict),
            None => {
                slot(record).insert(view, digest);
                changed = true;
            }
        }
        if let Some(block) = block {
            if let std::collections::btree_map::Entry::Vacant(e) = record.blocks.entry(digest) {
                e.insert(block.clone());
                changed = true;
            }
        }
        // Only the bodies a restart can use stay: of the latest vote, commit
        // and proposal, and of the prepared block (a height that goes through
        // many views keeps at most four bodies, not one per view).
        let kept: Vec<Digest> = [
            record.votes.last_key_value().map(|(_, d)| *d),
            record.commits.last_key_value().map(|(_, d)| *d),
            record.proposals.last_key_value().map(|(_, d)| *d),
            record.prepared.as_ref().map(|p| p.digest),
        ]
        .into_iter()
        .flatten()
        .collect();
        let before = record.blocks.len();
        record.blocks.retain(|d, _| kept.contains(d));
        self.dirty |= changed || record.blocks.len() != before;
        Ok(())
    }

    /// May this replica sign SIGN-SHARE on `block` (of digest `digest`) in
    /// `(height, view)`?
    pub(super) fn vote(
        &mut self,
        height: Height,
        view: View,
        digest: Digest,
        block: &Arc<Block>,
    ) -> Result<(), Refusal> {
        self.claim(height, view, digest, Some(block), |r| &mut r.votes)
    }

    /// May this replica propose `block` (of digest `digest`) in
    /// `(height, view)`?
    pub(super) fn propose(
        &mut self,
        height: Height,
        view: View,
        digest: Digest,
        block: &Arc<Block>,
    ) -> Result<(), Refusal> {
        self.claim(height, view, digest, Some(block), |r| &mut r.proposals)
    }

    /// The block this replica proposed in `(height, view)`, if it did and
    /// holds its body: a restarted primary proposes it again, never another.
    pub(super) fn proposal(&self, height: Height, view: View) -> Option<Arc<Block>> {
        let record = self.at(height)?;
        record.blocks.get(record.proposals.get(&view)?).cloned()
    }

    /// May this replica send a COMMIT share answering `certificate` at
    /// `height`? Records the certificate with it, and the block when held.
    pub(super) fn commit(
        &mut self,
        height: Height,
        certificate: &PrepareCertificate<S>,
        block: Option<&Arc<Block>>,
    ) -> Result<(), Refusal> {
        let (view, digest) = (certificate.view, certificate.digest);
        self.claim(height, view, digest, block, |r| &mut r.commits)?;
        let record = self.entry(height);
        if record.prepared.as_ref().is_none_or(|p| p.view < view) {
            record.prepared = Some(certificate.clone());
            self.dirty = true;
        }
        Ok(())
    }

    /// The VIEW-CHANGE already sent for `(height, new_view)`, to be sent again
    /// unchanged; `Err` when one for a later view was sent.
    pub(super) fn sent_view_change(
        &self,
        height: Height,
        new_view: View,
    ) -> Result<Option<Arc<ViewChange<S>>>, Refusal> {
        let Some(vc) = self.at(height).and_then(|r| r.view_change.as_ref()) else {
            return Ok(None);
        };
        match vc.new_view.cmp(&new_view) {
            std::cmp::Ordering::Greater => Err(Refusal::ViewLeft),
            std::cmp::Ordering::Equal => Ok(Some(vc.clone())),
            std::cmp::Ordering::Less => Ok(None),
        }
    }

    /// Records a VIEW-CHANGE about to be sent (a later one than any before).
    pub(super) fn view_change(&mut self, vc: Arc<ViewChange<S>>) {
        let record = self.entry(vc.height);
        if record.view_change_view() < vc.new_view {
            record.view_change = Some(vc);
            self.dirty = true;
        }
    }

    /// Forgets the heights below `height` (finalized).
    /// (A stored record of finalized heights is ignored on restore, so this
    /// needs no write.)
    pub(super) fn prune(&mut self, height: Height) {
        self.heights.retain(|h, _| *h >= height);
    }

    /// The whole record, when it changed since the last call.
    pub(super) fn take_changed(&mut self) -> Option<Vec<SignedVotes<S>>> {
        if !std::mem::take(&mut self.dirty) {
            return None;
        }
        Some(self.heights.values().cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::{MinSig, Point as _};

    fn cert(view: View, digest: u8) -> PrepareCertificate<MinSig> {
        PrepareCertificate {
            view,
            digest: [digest; 32],
            signature: <MinSig as Scheme>::Signature::generator(),
            signers: beacon::multisig::SignerBitmap::new(4),
        }
    }

    fn body() -> Arc<Block> {
        Arc::new(Block {
            height: Height::new(3),
            parent: [0; 32],
            previous_beacon: vec![1; 48],
            transactions: vec![vec![7]],
        })
    }

    fn vc(height: Height, new_view: View) -> Arc<ViewChange<MinSig>> {
        Arc::new(ViewChange {
            from: beacon::NodeIndex(0),
            height,
            new_view,
            prepared: None,
            fast_vote: None,
            beacon_share: None,
            block: None,
            signature: <MinSig as Scheme>::Signature::generator(),
        })
    }

    #[test]
    fn one_digest_per_slot_and_the_same_one_again() {
        let mut log = VoteLog::<MinSig>::restore(Vec::new(), Height::new(1));
        assert_eq!(
            log.vote(Height::new(3), View::new(0), [1; 32], &body()),
            Ok(())
        );
        assert!(log.take_changed().is_some());
        assert_eq!(
            log.vote(Height::new(3), View::new(0), [1; 32], &body()),
            Ok(())
        );
        assert!(log.take_changed().is_none(), "the same vote is no change");
        assert_eq!(
            log.vote(Height::new(3), View::new(0), [2; 32], &body()),
            Err(Refusal::Conflict)
        );
        assert_eq!(
            log.vote(Height::new(3), View::new(1), [2; 32], &body()),
            Ok(())
        );
        assert_eq!(
            log.propose(Height::new(3), View::new(0), [9; 32], &body()),
            Ok(())
        );
        assert_eq!(
            log.propose(Height::new(3), View::new(0), [8; 32], &body()),
            Err(Refusal::Conflict)
        );
        assert_eq!(
            log.commit(Height::new(3), &cert(View::new(1), 2), None),
            Ok(())
        );
        assert_eq!(
            log.commit(Height::new(3), &cert(View::new(1), 3), None),
            Err(Refusal::Conflict)
        );
        assert_eq!(
            log.at(Height::new(3)).unwrap().prepared,
            Some(cert(View::new(1), 2))
        );
    }

    #[test]
    fn no_votes_below_a_view_change() {
        let mut log = VoteLog::<MinSig>::restore(Vec::new(), Height::new(1));
        log.view_change(vc(Height::new(5), View::new(2)));
        assert_eq!(
            log.vote(Height::new(5), View::new(1), [1; 32], &body()),
            Err(Refusal::ViewLeft)
        );
        assert_eq!(
            log.commit(Height::new(5), &cert(View::new(1), 1), None),
            Err(Refusal::ViewLeft)
        );
        assert_eq!(
            log.vote(Height::new(5), View::new(2), [1; 32], &body()),
            Ok(())
        );
        assert_eq!(
            log.sent_view_change(Height::new(5), View::new(1)),
            Err(Refusal::ViewLeft)
        );
        assert_eq!(
            log.sent_view_change(Height::new(5), View::new(2)),
            Ok(Some(vc(Height::new(5), View::new(2))))
        );
        assert_eq!(log.sent_view_change(Height::new(5), View::new(3)), Ok(None));
        assert_eq!(log.sent_view_change(Height::new(6), View::new(1)), Ok(None));
    }

    #[test]
    fn a_restored_log_keeps_the_heights_not_finalized() {
        let mut log = VoteLog::<MinSig>::restore(Vec::new(), Height::new(1));
        log.vote(Height::new(7), View::new(0), [1; 32], &body())
            .unwrap();
        log.vote(Height::new(8), View::new(0), [2; 32], &body())
            .unwrap();
        let record = log.take_changed().unwrap();
        let mut restored = VoteLog::restore(record, Height::new(8));
        assert!(restored.at(Height::new(7)).is_none());
        assert_eq!(
            restored.vote(Height::new(8), View::new(0), [3; 32], &body()),
            Err(Refusal::Conflict)
        );
        restored.prune(Height::new(9));
        assert!(restored.at(Height::new(8)).is_none());
    }

    #[test]
    fn a_height_of_many_views_keeps_a_bounded_number_of_bodies() {
        let mut log = VoteLog::<MinSig>::restore(Vec::new(), Height::new(1));
        for v in 0..50u8 {
            let mut block = (*body()).clone();
            block.transactions = vec![vec![v; 1000]];
            let block = Arc::new(block);
            let view = View::new(u64::from(v));
            log.vote(Height::new(3), view, block.digest(), &block)
                .unwrap();
            log.propose(Height::new(3), view, block.digest(), &block)
                .unwrap();
        }
        let record = log.take_changed().unwrap();
        assert!(record[0].blocks.len() <= 4, "{}", record[0].blocks.len());
        let last = record[0].votes[&View::new(49)];
        assert!(record[0].blocks.contains_key(&last));
        assert_eq!(record[0].votes.len(), 50, "the digests all stay");
    }

    #[test]
    fn the_record_keeps_the_bodies_it_names_and_a_primary_gets_its_proposal_back() {
        let mut log = VoteLog::<MinSig>::restore(Vec::new(), Height::new(1));
        let b = body();
        log.propose(Height::new(3), View::new(0), [9; 32], &b)
            .unwrap();
        log.commit(Height::new(3), &cert(View::new(0), 4), None)
            .unwrap();
        let record = log.take_changed().unwrap();
        assert_eq!(record[0].blocks.len(), 1, "the commit had no body");
        assert_eq!(record[0].named().count(), 3);
        let restored = VoteLog::restore(record, Height::new(3));
        assert_eq!(restored.proposal(Height::new(3), View::new(0)), Some(b));
        assert_eq!(restored.proposal(Height::new(3), View::new(1)), None);
        // A body learned later for a slot already signed is a change to persist.
        let mut log = restored;
        assert!(log.take_changed().is_none());
        log.commit(Height::new(3), &cert(View::new(0), 4), Some(&body()))
            .unwrap();
        assert!(log.take_changed().is_some());
    }
}
