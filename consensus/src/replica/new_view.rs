//! Step 5, NEW-VIEW: the new primary, with `2f + 2c + 1` valid view changes,
//! re-proposes the only safe block ([`super::safe_value`]) with the view
//! changes attached (their senders' signatures verified in one batch per signed
//! message); every replica checks the signatures, the claims that decide the
//! rule, and the block, then votes on it in the new view (the block goes to the
//! voter as a local PRE-PREPARE). The argument is in `SAFETY.md`, "Across views".

use super::interface::{Event, EvidenceKind, ProofKind, Timer};
use super::outbox::Origin;
use super::primary::elect;
use super::safe_value::safe_value;
use super::Replica;
use crate::messages::{Block, Message, ViewChange};
use crate::View;
use beacon::{Scheme, Time};
use std::collections::BTreeSet;
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
        let block = match safe_value(&chosen, self.config.f, self.config.c) {
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
            view_changes: chosen,
            block,
        };
        self.outbox.broadcast(message.clone());
        self.outbox.loop_back(self.me(), message);
    }

    /// Step 5: NEW-VIEW from the primary of `view`. A NEW-VIEW whose view
    /// changes are forged or whose deciding claims do not verify is evidence
    /// against its sender; one whose block is not the safe one is ignored.
    pub(super) fn on_new_view(
        &mut self,
        now: Time,
        origin: Origin,
        view: View,
        vcs: Vec<Arc<ViewChange<S>>>,
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
        let quorum = self.config.view_change_quorum() as usize;
        let senders: BTreeSet<_> = vcs.iter().map(|v| v.from).collect();
        if vcs.len() < quorum
            || senders.len() != vcs.len()
            || vcs
                .iter()
                .any(|v| v.height != h || v.new_view != view || v.from.0 >= self.config.n)
        {
            return;
        }
        if !origin.local {
            let (f, c) = (self.config.f, self.config.c);
            let forged = !self.verifier.forged_view_changes(&vcs).is_empty();
            if forged || !self.verifier.deciding_claims_verify(h, f, c, &vcs) {
                let proof = ProofKind::NewView;
                self.outbox
                    .evidence(origin.from, h, EvidenceKind::InvalidProof { proof });
                return;
            }
        }
        match safe_value(&vcs, self.config.f, self.config.c) {
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
            view_changes: vcs,
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
