//! Step 5, NEW-VIEW: the new primary, with `2f + 2c + 1` valid view changes,
//! re-proposes the only safe block ([`super::safe_value`]) with the view
//! changes attached, aggregated ([`ViewChangeProof`]: their senders grouped by
//! claim, one multi-signature per group); every replica checks the form, each
//! group's signature, the claims that decide the rule, and the block, then
//! votes on it in the new view (the block goes to the voter as a local
//! PRE-PREPARE). The argument is in `SAFETY.md`, "Across views".

use super::interface::{Event, EvidenceKind, ProofKind, Timer};
use super::outbox::Origin;
use super::primary::elect;
use super::safe_value::safe_value;
use super::Replica;
use crate::messages::{Block, Message, ViewChange, ViewChangeProof};
use crate::View;
use beacon::{Scheme, Time};
use std::sync::Arc;

impl<S: Scheme> Replica<S> {
    /// As the primary of `view`: with `2f + 2c + 1` valid view changes, send
    /// NEW-VIEW (to ourselves too, through the loopback).
    pub(super) fn try_new_view(&mut self, view: View) {
        if self.round.view_change.new_view_sent(view) {
            return;
        }
        let quorum = self.config.view_change_quorum() as usize;
        let Some(candidates) = self.round.view_change.received(view) else {
            return;
        };
        if candidates.len() < quorum {
            return;
        }
        let h = self.height;
        let valid = self
            .verifier
            .valid_view_changes(h, self.config.slow_threshold(), &candidates);
        if valid.len() < quorum {
            return;
        }
        let chosen: Vec<Arc<ViewChange<S>>> = valid.into_iter().take(quorum).collect();
        let proof = ViewChangeProof::aggregate(&chosen);
        let block = match safe_value(&proof.claim_counts(), self.config.f, self.config.c) {
            Some(d) => {
                let carried = || chosen.iter().filter_map(|v| v.block.clone());
                match self
                    .round
                    .blocks
                    .get(&d)
                    .cloned()
                    .or_else(|| carried().find(|b| b.digest() == d))
                {
                    Some(b) => b,
                    None => return,
                }
            }
            // A restarted primary proposes the block it proposed before.
            None => self
                .votes
                .proposal(h, view)
                .unwrap_or_else(|| Arc::new(self.fresh_block())),
        };
        // One block per view from its primary, even across a crash (`votes.rs`).
        if self
            .record()
            .propose(h, view, block.digest(), &block)
            .is_err()
        {
            return;
        }
        self.round.view_change.mark_new_view_sent(view);
        let message = Message::NewView {
            height: h,
            view,
            proof,
            block,
        };
        self.outbox.broadcast(message.clone());
        self.outbox.loop_back(self.me(), message);
    }

    /// Step 5: NEW-VIEW from the primary of `view`. A malformed one is
    /// ignored; one whose view changes' signatures or deciding claims do not
    /// verify is evidence against its sender; one whose block is not the safe
    /// one is ignored.
    pub(super) fn on_new_view(
        &mut self,
        now: Time,
        origin: Origin,
        view: View,
        proof: ViewChangeProof<S>,
        block: Arc<Block>,
    ) {
        let h = self.height;
        if view == View::ZERO || view < self.view || self.round.voter.has_accepted(view) {
            return;
        }
        let election = elect(&self.config, &self.chain, h, view);
        if origin.from != election.primary {
            return;
        }
        let quorum = self.config.view_change_quorum();
        if proof.check_form(self.config.n, quorum).is_err() {
            return;
        }
        let (f, c) = (self.config.f, self.config.c);
        let claims = proof.claim_counts();
        if !origin.local
            && !self
                .verifier
                .new_view_proof_verifies(h, view, (f, c), &proof, &claims)
        {
            let proof = ProofKind::NewView;
            self.outbox
                .evidence(origin.from, h, EvidenceKind::InvalidProof { proof });
            return;
        }
        match safe_value(&claims, f, c) {
            Some(d) if block.digest() != d => return,
            _ => {}
        }
        if !self.block_is_valid(&block) {
            return;
        }
        if view > self.view || self.round.view_change.in_progress() {
            if view > self.view {
                self.outbox.event(Event::ViewChanged { height: h, view });
            }
            self.view = view;
            self.round.election = election;
            let at = now.plus_micros(self.config.view_timeout_us(view.get()));
            self.outbox.timer(at, Timer::ViewChange { height: h, view });
        }
        self.round.view_change.accepted(Message::NewView {
            height: h,
            view,
            proof,
            block: block.clone(),
        });
        // The voter takes the block from here, then what waited for this view.
        let proposal = Message::PrePrepare {
            height: h,
            view,
            block,
        };
        self.outbox.loop_back(self.me(), proposal);
        for (from, message) in self.round.waiting.take_views() {
            self.outbox.replay(from, message);
        }
    }
}
