//! Steps 2 and 3 as a voter: accept one proposal per view and send SIGN-SHARE
//! (its vote and its beacon share) to the collectors, and the beacon share to
//! everyone else too where `beacon_shares = "everyone"`; answer a valid PREPARE with
//! a COMMIT share. What a voter holds — its fast vote and its highest prepare
//! certificate — is what its VIEW-CHANGE reports in step 5.

use super::interface::{EvidenceKind, ProofKind};
use super::outbox::Origin;
use super::verifier::Key;
use super::Replica;
use crate::config::BeaconShares;
use crate::messages::{signed, Block, Digest, FastVote, Message, PrepareCertificate};
use crate::View;
use beacon::{Scheme, Time};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A voter's state at one height.
pub(super) struct Voter<S: Scheme> {
    /// The digest accepted in each view.
    accepted: BTreeMap<View, Digest>,
    /// The latest fast-path vote.
    fast_vote: Option<FastVote<S>>,
    /// The highest prepare certificate seen.
    prepared: Option<PrepareCertificate<S>>,
    /// Views whose COMMIT share was sent.
    commit_share_sent: BTreeSet<View>,
}

impl<S: Scheme> Voter<S> {
    /// Nothing accepted or voted.
    pub(super) fn new() -> Self {
        Voter {
            accepted: BTreeMap::new(),
            fast_vote: None,
            prepared: None,
            commit_share_sent: BTreeSet::new(),
        }
    }

    /// The latest fast-path vote.
    pub(super) fn fast_vote(&self) -> Option<&FastVote<S>> {
        self.fast_vote.as_ref()
    }

    /// The highest prepare certificate.
    pub(super) fn prepared(&self) -> Option<&PrepareCertificate<S>> {
        self.prepared.as_ref()
    }

    /// Whether a proposal of `view` was accepted.
    pub(super) fn has_accepted(&self, view: View) -> bool {
        self.accepted.contains_key(&view)
    }

    /// The digest a VIEW-CHANGE carries the block of: the prepared one, else the
    /// fast-voted one.
    pub(super) fn claimed(&self) -> Option<Digest> {
        self.prepared
            .as_ref()
            .map(|p| p.digest)
            .or(self.fast_vote.as_ref().map(|v| v.digest))
    }
}

impl<S: Scheme> Replica<S> {
    /// Steps 1-2: a proposal. From the network, only view 0's primary proposes
    /// in PRE-PREPARE; blocks of later views come in NEW-VIEW, which decides
    /// what is safe and hands the block here as a local PRE-PREPARE (so does the
    /// primary's own proposal). One proposal per view: a second, different one
    /// is evidence against the primary. The vote is one SIGN-SHARE to the
    /// collectors with the vote on the digest and the beacon share.
    pub(super) fn on_pre_prepare(
        &mut self,
        now: Time,
        origin: Origin,
        view: View,
        block: Arc<Block>,
    ) {
        if view != self.view || self.round.view_change.in_progress() {
            return;
        }
        if !origin.local && (origin.from != self.round.election.primary || view > View::ZERO) {
            return;
        }
        if !self.block_is_valid(&block) {
            return;
        }
        let digest = block.digest();
        let h = self.height;
        let voter = &mut self.round.voter;
        if let Some(existing) = voter.accepted.get(&view) {
            if *existing != digest {
                let primary = self.round.election.primary;
                let kind = EvidenceKind::ConflictingProposals { view };
                self.outbox.evidence(primary, h, kind);
            }
            return;
        }
        if self.config.beacon_share_route() == BeaconShares::Everyone {
            // The beacon share is not a vote (signing it again gives the same
            // bytes), so the non-collectors get it before the write of the
            // vote record, which the vote below waits for: no fsync on the
            // beacon's path.
            let share = self.own_beacon_share();
            self.share_beacon_with_everyone(share);
        }
        // Never two votes in one view, not even across a crash (`votes.rs`).
        if self.record().vote(h, view, digest, &block).is_err() {
            return;
        }
        self.round.voter.accepted.insert(view, digest);
        self.round.blocks.insert(digest, block);
        self.send_vote(now, view, digest);
    }

    /// Step 2: signs and sends SIGN-SHARE on `digest` in `view` (its vote,
    /// which is both its fast vote and its prepare vote, and the beacon
    /// share), and keeps the fast vote for view changes.
    fn send_vote(&mut self, now: Time, view: View, digest: Digest) {
        let h = self.height;
        // One signature is the fast vote and the prepare vote (`messages::signed`).
        let vote = self
            .verifier
            .sign(Key::Consensus, &signed::fast_vote(h, view, &digest));
        let beacon = self.own_beacon_share();
        self.round.voter.fast_vote = Some(FastVote {
            view,
            digest,
            share: vote,
        });
        let message = Message::SignShare {
            height: h,
            view,
            digest,
            vote,
            beacon,
        };
        self.send_to_collectors(now, view, message);
        if self.config.beacon_share_route() == BeaconShares::Everyone {
            // Once per height: already done before the vote's write, unless
            // this vote is one resumed after a restart.
            self.share_beacon_with_everyone(beacon);
        }
    }

    /// After a restart (crash safety, `votes.rs`): the prepare certificate this
    /// replica answered and its fast vote come back from the record of the
    /// current height, it returns to the view it had asked to change to
    /// (sending the same VIEW-CHANGE again), and it sends its vote of that view
    /// again, the same as before.
    pub(super) fn resume_votes(&mut self, now: Time) {
        let Some(record) = self.votes.at(self.height).cloned() else {
            return;
        };
        // The bodies it named: a view change carries them, and a new primary
        // proposes them again (no one else may hold them any more).
        for (digest, block) in &record.blocks {
            if self.block_is_valid(block) {
                self.round
                    .blocks
                    .entry(*digest)
                    .or_insert_with(|| block.clone());
            }
        }
        let voter = &mut self.round.voter;
        voter.prepared = record.prepared.clone();
        if let Some((&view, &digest)) = record.votes.last_key_value() {
            let share = self.verifier.sign(
                Key::Consensus,
                &signed::fast_vote(self.height, view, &digest),
            );
            self.round.voter.fast_vote = Some(FastVote {
                view,
                digest,
                share,
            });
        }
        if record.view_change_view() > self.view {
            self.start_view_change(now, record.view_change_view());
        }
        if let Some(&digest) = record.votes.get(&self.view) {
            self.round.voter.accepted.insert(self.view, digest);
            self.send_vote(now, self.view, digest);
        }
    }

    /// Step 3, slow path: a valid prepare certificate is recorded (the highest
    /// one goes into view changes) and, in the current view, earns one COMMIT
    /// share to the collectors.
    pub(super) fn on_prepare(
        &mut self,
        now: Time,
        origin: Origin,
        certificate: PrepareCertificate<S>,
    ) {
        let h = self.height;
        let view = certificate.view;
        let voter = &self.round.voter;
        if voter.prepared.as_ref().is_some_and(|p| p.view >= view) && view != self.view {
            return;
        }
        // A copy of the certificate already held (collectors send it again
        // until the height commits) is not verified again: the held one, which
        // was, stands in for it (a forged copy's signature must never reach
        // the vote record).
        let held = voter
            .prepared
            .as_ref()
            .filter(|p| p.view == view && p.digest == certificate.digest)
            .cloned();
        let held_copy = held.is_some();
        let certificate = held.unwrap_or(certificate);
        let message = signed::prepare(h, view, &certificate.digest);
        if !origin.local
            && !held_copy
            && !self.verifier.verify_certificate(
                &message,
                &certificate.signature,
                &certificate.signers,
                self.config.slow_threshold(),
            )
        {
            let kind = EvidenceKind::InvalidProof {
                proof: ProofKind::Prepare,
            };
            self.outbox.evidence(origin.from, h, kind);
            return;
        }
        let voter = &mut self.round.voter;
        if voter.prepared.as_ref().is_none_or(|p| p.view < view) {
            voter.prepared = Some(certificate.clone());
        }
        if view != self.view
            || self.round.view_change.in_progress()
            || !self.round.voter.commit_share_sent.insert(view)
        {
            return;
        }
        self.outbox.vote_record_changes();
        let block = self.round.blocks.get(&certificate.digest);
        if self.votes.commit(h, &certificate, block).is_err() {
            return;
        }
        let digest = certificate.digest;
        let share = self
            .verifier
            .sign(Key::Consensus, &signed::commit(h, view, &digest));
        let message = Message::CommitShare {
            height: h,
            view,
            digest,
            share,
        };
        self.send_to_collectors(now, view, message);
    }
}
