//! The SBFT-style replica: one pure state machine per member,
//! `handle(now, input) -> Vec<Output>`, with no I/O, clock or hidden randomness.
//!
//! # The protocol (`consensus/PROTOCOL.md`; `SAFETY.md` says why it is safe)
//! Per height `h` and view `v`, each step in the files named (steps 1-5 are
//! `PROTOCOL.md`'s; every handler cites its step as "Step N"):
//! 1. **Propose** (`primary.rs`, `mempool.rs`): the beacon of round `h - k`
//!    draws the primary and `c + 1` collectors of `(h, v)`; the primary of view
//!    0 proposes a block in PRE-PREPARE, no earlier than the round's time.
//! 2. **Vote** (`voter.rs`, `retransmit.rs`): a replica accepts one proposal per
//!    view and sends one SIGN-SHARE to the collectors — its vote on the block
//!    digest under its own key (fast-path and prepare vote at once) and its
//!    beacon share of round `h` (`SHA-256(beta_{h-1} || u64_be(h))`) — again every two fast-path timeouts
//!    until the height commits.
//! 3. **Collect and commit** (`collector.rs`, `backup.rs`, `tally.rs`,
//!    `commit.rs`, `voter.rs`): `3f + c + 1` votes make the fast-path commit
//!    proof; after the fast-path timer, `2f + c + 1` of the same votes make
//!    PREPARE, replicas answer with COMMIT shares, and `2f + c + 1` of those make
//!    the slow-path proof. Rank-0 collectors broadcast at once, backups after
//!    `rank` delays. Replicas check the proof and fetch a missing block.
//! 4. **Beacon** (`beacon_round.rs`, `tally.rs`): `t_b` beacon shares make
//!    `beta_h`, broadcast alone (with `early_beacon`) and on the commit proof;
//!    threshold BLS is unique, so it is the same whoever aggregates it. A
//!    replica that committed without a beacon sends its share to everyone.
//! 5. **View change** (`view_change.rs`, `new_view.rs`,
//!    `view_change_checks.rs`, `safe_value.rs`): on timeout, a signed
//!    VIEW-CHANGE with the highest prepare certificate and fast vote; the new
//!    primary, with `2f + 2c + 1` of them, re-proposes the only safe block in
//!    NEW-VIEW; `f + 1` replicas wanting a later view pull a replica along.
//! 6. **Finalize** (this file, `chain.rs`): a height whose block is committed and
//!    whose beacon is known is appended to the chain window; the replica enters
//!    `h + 1`.
//!
//! Around the steps: catch-up from peers (`sync.rs`), messages that arrive
//! early (`pending.rs`), keys, memo and RNG (`verifier.rs`), the state of the
//! height by role (`round.rs`), the input and output
//! vocabulary (`interface.rs`), and the outbox with the loopback (`outbox.rs`).
//!
//! # Data flow
//! [`Replica::handle`] dispatches one input to the handler of its step
//! (`Replica::dispatch`, `Replica::on_timer`). A handler changes its role's
//! state and writes to the outbox: effects, events, and messages to this
//! replica itself — a collector's own vote, a primary's own proposal, a
//! collector's proof, replays of buffered messages — which go to the loopback
//! queue. `handle` drains the loopback through the same dispatcher, then runs
//! the post-step (`Replica::advance`): commit once a verified certificate and
//! its block are known, finalize once the beacon is known too, and enter the
//! next height (whose buffered messages are replayed: drain again). No handler
//! calls another, and the height changes only in the post-step.

mod backup;
mod beacon_round;
mod chain;
mod collector;
mod commit;
mod interface;
mod mempool;
mod new_view;
mod outbox;
mod pending;
mod primary;
mod retransmit;
mod round;
pub mod safe_value;
mod sync;
mod tally;
mod verifier;
mod view_change;
mod view_change_checks;
mod voter;
mod votes;

pub use chain::{sync_response, ChainWindow, CHAIN_WINDOW};
pub use interface::{
    Event, Evidence, EvidenceKind, Input, Output, ProofKind, ReplicaEffect, ShareKind, Timer,
};
pub use sync::{block_bytes, SYNC_BATCH, SYNC_RESPONSE_BYTES};
pub use verifier::CONVICTION_HEIGHTS;
pub use votes::{Refusal, SignedVotes};

use crate::config::ReplicaConfig;
use crate::election::Election;
use crate::keys::ReplicaKeys;
use crate::messages::{CommittedEntry, Message};
use crate::ConsensusError;
use crate::{Height, View};
use backup::Backups;
use beacon::memo::Memo;
use beacon::{NodeIndex, Point, Scheme, Time};
use mempool::Mempool;
use outbox::{Origin, Outbox};
use pending::FutureHeights;
pub use pending::{FUTURE_HEIGHTS, FUTURE_LIMIT};
use primary::elect;
use round::Round;
use std::sync::Arc;
use verifier::Verifier;
use votes::VoteLog;

/// Messages for views more than this far above the current one are ignored: no
/// honest replica gets there before the timeouts in between have run, and a view
/// number from the network must never drive arithmetic or memory.
pub const VIEW_WINDOW: u64 = 1024;

/// One honest replica.
pub struct Replica<S: Scheme> {
    config: ReplicaConfig,
    verifier: Verifier<S>,
    started: bool,
    chain: ChainWindow<S>,
    height: Height,
    view: View,
    /// The beacon signature of `height - 1` (the genesis seed at height 1).
    previous_beacon: Vec<u8>,
    round: Round<S>,
    mempool: Mempool,
    future: FutureHeights<S>,
    sync: sync::CatchUp<S>,
    backups: Backups<S>,
    /// What this replica signed at heights not yet finalized (crash safety).
    votes: VoteLog<S>,
    outbox: Outbox<S>,
}

impl<S: Scheme> Replica<S> {
    /// A replica at height 1. `seed` drives its private randomness (batch
    /// verification weights); `memo` shares pure public computations in simulation.
    /// `config` is valid by construction; keys that do not fit it are refused
    /// ([`ReplicaKeys::check`]).
    pub fn new(
        config: ReplicaConfig,
        keys: ReplicaKeys<S>,
        seed: [u8; 32],
        memo: Arc<Memo>,
    ) -> Result<Self, ConsensusError> {
        Self::restore(config, keys, seed, memo, ChainWindow::default(), Vec::new())
    }

    /// A replica resuming after `chain` (its most recent persisted finalized
    /// heights; see [`ChainWindow::resume`]) with the record of what it signed
    /// (the last [`Output::PersistVotes`] it emitted): it never signs anything
    /// else for those slots, sends the same votes again, and returns to the view
    /// it had moved to. Keys that do not fit `config` are refused.
    pub fn restore(
        config: ReplicaConfig,
        keys: ReplicaKeys<S>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        chain: ChainWindow<S>,
        votes: Vec<SignedVotes<S>>,
    ) -> Result<Self, ConsensusError> {
        keys.check(&config)?;
        let height = chain.height().saturating_add(1);
        let previous_beacon = chain
            .last()
            .map(|e| e.beacon.to_bytes())
            .unwrap_or_else(|| config.genesis_seed.to_vec());
        let round = Round::new(&config, &chain, height, &previous_beacon);
        Ok(Replica {
            verifier: Verifier::new(keys, memo, seed),
            config,
            started: false,
            chain,
            height,
            view: View::ZERO,
            previous_beacon,
            round,
            mempool: Mempool::new(),
            future: FutureHeights::new(),
            sync: sync::CatchUp::new(),
            backups: Backups::new(),
            votes: VoteLog::restore(votes, height),
            outbox: Outbox::new(),
        })
    }

    /// The height being decided.
    pub fn height(&self) -> Height {
        self.height
    }

    /// The current view.
    pub fn view(&self) -> View {
        self.view
    }

    /// This replica.
    pub fn me(&self) -> NodeIndex {
        self.verifier.me()
    }

    /// The most recent finalized heights.
    pub fn chain(&self) -> &ChainWindow<S> {
        &self.chain
    }

    /// The configuration.
    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// The primary and collectors of `view` at the current height.
    pub fn election_of(&self, view: View) -> Election {
        elect(&self.config, &self.chain, self.height, view)
    }

    /// Handles one input at time `now`: dispatches it, drains the loopback, and
    /// runs the post-step until nothing is left to do.
    pub fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        match input {
            Input::Start if !self.started => {
                self.started = true;
                self.enter_height(now);
            }
            Input::Message { from, message } if self.started && from.0 < self.config.n => {
                self.dispatch(now, Origin::peer(from), message)
            }
            Input::Timer(timer) if self.started => self.on_timer(now, timer),
            Input::ClientTransaction(tx) => self.mempool.add(&self.config, tx),
            Input::ControlTransaction(tx) => self.mempool.add_control(&self.config, tx),
            Input::Start | Input::Message { .. } | Input::Timer(_) => {}
        }
        loop {
            while let Some((origin, message)) = self.outbox.next_message() {
                self.dispatch(now, origin, message);
            }
            if !self.advance(now) {
                break;
            }
        }
        let (mut outputs, unrecorded) = self.outbox.take();
        if let Some(record) = self.votes.take_changed() {
            // Persisted before anything queued since the record changed goes
            // out. What came before carries nothing it records (a proof or a
            // beacon this replica aggregated, events), and leaves at once: a
            // collector's proof and beacon do not wait for the write of the
            // proposal it makes next.
            let at = unrecorded.min(outputs.len());
            outputs.insert(at, Output::PersistVotes(record));
        }
        outputs
    }

    /// The record of what this replica signed, about to change (every change
    /// goes through here, so the outputs it guards are known).
    fn record(&mut self) -> &mut VoteLog<S> {
        self.outbox.vote_record_changes();
        &mut self.votes
    }

    /// Routes one message to the handler of its step, or buffers it: messages
    /// of later heights until that height, of later views until a NEW-VIEW,
    /// proposals until the round's signing time.
    fn dispatch(&mut self, now: Time, origin: Origin, message: Message<S>) {
        let from = origin.from;
        let message = match message {
            Message::SyncRequest { from_height } => return self.on_sync_request(from, from_height),
            Message::SyncResponse { entries } => return self.on_sync_response(origin, entries),
            Message::BlockRequest { height, digest } => {
                return self.on_block_request(from, height, digest)
            }
            Message::BeaconShare { round, share } => {
                return self.on_beacon_share(now, origin, round, share)
            }
            m => m,
        };
        let Some(h) = message.height() else { return };
        if message
            .view()
            .is_some_and(|v| v > self.view.saturating_add(VIEW_WINDOW))
        {
            return;
        }
        if !origin.local
            && matches!(
                message,
                Message::CommitProof { .. } | Message::Beacon { .. }
            )
        {
            self.backups.note_peer_result(h, &message);
        }
        if h < self.height {
            return;
        }
        if h > self.height {
            self.future.keep(self.height, h, from, message);
            if h >= self.height.saturating_add(2) {
                let _ = self.maybe_sync(now, from);
            } else if self.future.senders() > self.config.f as usize {
                // More than f replicas are past this height, so an honest one
                // finalized it: we missed its proof (a collector that sent it to
                // some only, a partition). Ask now, not at our view timer,
                // which can be 16 view timeouts away.
                self.sync_with_someone_ahead(now);
            }
            return;
        }
        if !origin.local {
            let early = now < Time(self.config.signing_time(h.get()));
            if early
                && matches!(
                    message,
                    Message::PrePrepare { .. } | Message::NewView { .. }
                )
            {
                // Signing it would release our beacon share before the round's time.
                return self.round.waiting.hold(from, message);
            }
            let waits_for_view = matches!(
                message,
                Message::PrePrepare { .. }
                    | Message::SignShare { .. }
                    | Message::CommitShare { .. }
            );
            if let Some(view) = message.view().filter(|v| *v > self.view && waits_for_view) {
                return self.round.waiting.keep_for_view(view, from, message);
            }
        }
        match message {
            Message::PrePrepare { view, block, .. } => {
                self.on_pre_prepare(now, origin, view, block)
            }
            Message::SignShare {
                view,
                digest,
                vote,
                beacon,
                ..
            } => {
                let shares = collector::VoteShares { vote, beacon };
                self.on_sign_share(now, origin, view, digest, shares)
            }
            Message::CommitProof {
                certificate,
                beacon,
            } => {
                // The beacon riding on the proof goes to the beacon round first.
                if let Some(signature) = beacon {
                    self.on_beacon(origin, signature);
                }
                self.on_commit_proof(origin, certificate)
            }
            Message::Prepare { certificate, .. } => self.on_prepare(now, origin, certificate),
            Message::CommitShare {
                view,
                digest,
                share,
                ..
            } => self.on_commit_share(now, origin, view, digest, share),
            Message::Beacon { signature, .. } => self.on_beacon(origin, signature),
            Message::ViewChange(vc) => self.on_view_change(now, origin, vc),
            Message::NewView {
                view, proof, block, ..
            } => self.on_new_view(now, origin, view, proof, block),
            Message::BlockResponse { block } => self.on_block_response(block),
            Message::SyncRequest { .. }
            | Message::SyncResponse { .. }
            | Message::BlockRequest { .. }
            | Message::BeaconShare { .. } => {}
        }
    }

    /// Routes a timer of the current height (stale ones are ignored).
    fn on_timer(&mut self, now: Time, timer: Timer) {
        let h = self.height;
        match timer {
            Timer::Release { height } if height == h => {
                for (from, message) in self.round.waiting.take_held() {
                    self.outbox.replay(from, message);
                }
            }
            Timer::FastPath { height, view } if height == h => self.on_fast_path_timer(now, view),
            Timer::ViewChange { height, view } if height == h && view == self.view => {
                self.on_view_timer(now, view)
            }
            Timer::BackupCollector { height, view } => self.on_backup_timer(height, view),
            Timer::Retransmit { height, view } if height == h => {
                self.on_retransmit_timer(now, view)
            }
            _ => {}
        }
    }

    /// The post-step (step 6): commit once a verified certificate and its block
    /// are known; once the beacon is known too, finalize the height and enter
    /// the next. Returns whether the height changed.
    fn advance(&mut self, now: Time) -> bool {
        if let Some((block, certificate)) = self.round.commit.take_ready(&self.round.blocks) {
            self.mempool.remove_committed(&block);
            self.outbox.event(Event::Committed { block, certificate });
        }
        let (Some((block, certificate)), Some(beacon)) =
            (self.round.commit.committed(), self.round.beacon.known())
        else {
            return false;
        };
        let Some(next) = self.height.next() else {
            return false;
        };
        let entry = Arc::new(CommittedEntry {
            block: block.clone(),
            certificate: certificate.clone(),
            beacon,
        });
        self.chain.push(entry.clone());
        self.outbox.event(Event::Finalized(entry));
        self.previous_beacon = beacon.to_bytes();
        self.height = next;
        self.enter_height(now);
        true
    }

    /// Starts the current height at view 0: the primary proposes, timers are
    /// armed, and what arrived early for this
    /// height is replayed.
    fn enter_height(&mut self, now: Time) {
        let h = self.height;
        self.view = View::ZERO;
        self.round = Round::new(&self.config, &self.chain, h, &self.previous_beacon);
        self.record().prune(h);
        self.resume_votes(now);
        let round_time = Time(self.config.time_of_round(h.get()));
        if self.round.election.primary == self.me() {
            // At once, even before the round's time on a paced chain: replicas
            // (this one included) hold the proposal until the signing time, so
            // their votes and beacon shares leave at that time, two message
            // delays before the beacon, not three.
            self.propose(now);
        }
        let at = now
            .max(round_time)
            .plus_micros(self.config.view_timeout_us(0));
        self.outbox.timer(
            at,
            Timer::ViewChange {
                height: h,
                view: View::ZERO,
            },
        );
        let release = Time(self.config.signing_time(h.get()));
        if release > now {
            self.outbox.timer(release, Timer::Release { height: h });
        }
        if let Some((from, rest)) = self.sync.take_rest() {
            self.outbox.replay(from, rest);
        }
        for (from, message) in self.future.take(h) {
            self.outbox.replay(from, message);
        }
    }
}
