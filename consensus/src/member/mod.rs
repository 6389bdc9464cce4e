//! One network member from start-up on: the DKG session (relay, attempts,
//! agreement: `beacon::dkg::session`), then the replica built from its result. This is the driver logic the simulator and the real node share; they
//! differ only in who delivers inputs and carries outputs.
//!
//! Consensus messages that arrive while the DKG is still running are kept (up to
//! a bound) and replayed when the replica starts. A member restored from persisted
//! key material and chain skips the DKG.
//!
//! A member keeps its finished DKG session for as long as the DKG itself may
//! take ([`DkgTiming::bound_us`]), while it runs the genesis epoch, and only to
//! answer members that ask for their deals, shares and the agreed certificate:
//! a genesis member that was down while the others dealt restarts its DKG from
//! its stored seed, asks, and adopts the agreed keys (`consensus/SAFETY.md`, "A
//! member's part of a change survives its crash"). Its seed, which dealt, stays
//! on its disk as long, marked ([`crate::disk::DealingSeed`]): restarted in
//! that time, it rebuilds the session from it ([`Member::with_finished_dkg`])
//! and answers as before; then it asks for a new seed.
//!
//! The replica's discipline: handlers only emit. What the DKG session, the
//! replica and the transition return goes into the loopback queue of
//! `outbox` as self-inputs, and [`Member::handle`] drains it through one
//! dispatcher (`dispatch_self`), depth first, so that outputs leave in the
//! order of the steps that caused them; no handler calls another. A driver
//! makes a member Byzantine by plugging in an [`Adversary`]; this module
//! names no Byzantine kind.
//!
//! This module owns a member's phases and the dispatch of its inputs;
//! `interface` has what it takes and gives (envelope, timers, inputs,
//! outputs), `outbox` where handlers put what they produce, `construct` how
//! it is built, `genesis` its genesis DKG session (running, then finished
//! and kept to answer members that missed it), `epochs` its side of changes
//! of members (by role: change, joiner, dealer); `tests` has its step
//! tables.

use crate::epoch::Decision;
use crate::epoch::{EpochView, MemberIdentity};
use crate::messages::Message;
use crate::participant::{Adversary, Participant};
use crate::replica::{Event, Input, Output, Timer};
use crate::{DirectoryIndex, Epoch, Height};
use beacon::dkg::relay::SigningKey;
use beacon::dkg::session::{SessionInput, SessionParticipant};
use beacon::dkg::{DkgOutput, DkgTiming};
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::multisig::ConsensusSecretKey;
use beacon::{NodeIndex, Scheme, Time};
use genesis::FinishedDkg;
use outbox::{Generation, Outbox, SelfInput};
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// Most consensus messages kept while the DKG runs.
const EARLY_LIMIT: usize = 10_000;

enum Phase<S: Scheme> {
    Dkg(Box<dyn SessionParticipant<S>>),
    Replica(Box<dyn Participant<S>>),
    /// A member that joins a running network: it waits for an invitation, then
    /// for its keys and the handoff of the chain.
    Joining,
    /// A member that left the group: it no longer holds shares.
    Retired,
    Failed,
}

/// What a member needs to take part in epoch changes: who it is, and the
/// DKG's timing (resharings reuse its phase length).
#[derive(Clone)]
struct Identity {
    who: MemberIdentity,
    timing: DkgTiming,
}

/// One member: DKG, then replica, epoch after epoch.
pub struct Member<S: Scheme> {
    me: NodeIndex,
    seed: [u8; 32],
    memo: Arc<Memo>,
    /// What a driver plugged in to make this member misbehave (none: honest).
    adversary: Option<Arc<dyn Adversary<S>>>,
    phase: Phase<S>,
    /// The genesis DKG's session after it completed (see the module header).
    finished_dkg: Option<FinishedDkg<S>>,
    /// Until when the stored seed, marked as the one that dealt the genesis
    /// keys, is kept ([`crate::disk::DealingSeed`]); none once replaced.
    dealing_seed_until: Option<Time>,
    early: Vec<(NodeIndex, Message<S>)>,
    /// The current epoch (its members and replica configuration).
    epoch: EpochView,
    /// The current epoch's key material (none before the DKG, or once retired).
    keys: Option<Arc<DkgOutput<S>>>,
    /// This member's own consensus key (its votes in every epoch it is in).
    consensus: ConsensusSecretKey,
    identity: Option<Identity>,
    /// Its part in the change out of the current epoch.
    change: epochs::Change<S>,
    /// What it was told as a joiner of the current epoch's change.
    joiner: epochs::Joiner<S>,
    /// What it serves as an old member after the latest switch.
    dealer: epochs::Dealer<S>,
    /// How many epoch ends this member read: what the replica of an ended
    /// epoch still produced is dropped.
    generation: Generation,
}

/// The member key (signing DKG broadcasts and results) derived from a member's
/// seed: what the simulator uses (a real node signs with its identity key).
pub fn member_key(seed: &[u8; 32]) -> SigningKey {
    SigningKey::from_bytes(&derive(seed, b"member-key"))
}

/// The consensus key derived from a member's seed: what the simulator and the
/// tests use (a real node reads its own from its key file).
pub fn consensus_key(seed: &[u8; 32]) -> ConsensusSecretKey {
    let mut rng = rand_chacha::ChaCha20Rng::from_seed(derive(seed, b"consensus-key"));
    ConsensusSecretKey::random(&mut rng)
}

/// Derives a labelled 32-byte seed from a member's seed.
fn derive(seed: &[u8; 32], label: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update(seed);
    h.finalize().into()
}

impl<S: Scheme> Member<S> {
    /// This member's index in the current epoch (its directory index while it
    /// joins or once it left).
    pub fn index(&self) -> NodeIndex {
        self.me
    }

    /// The current epoch.
    pub fn epoch(&self) -> &EpochView {
        &self.epoch
    }

    /// Replaces the seed that this member's later dealings and randomness
    /// derive from. A node replaces it with a fresh one, durably stored first,
    /// once the keys a seed dealt are stored: a dealing never outlives its
    /// seed, and a member that restarts in the middle of a DKG or a change
    /// reads the seed it dealt from (`consensus/SAFETY.md`, "A member's part
    /// of a change survives its crash"). Running sessions keep their own.
    pub fn replace_seed(&mut self, seed: [u8; 32]) {
        self.seed = seed;
    }

    /// Whether the DKG is over (successfully) and this member runs a replica.
    pub fn has_keys(&self) -> bool {
        matches!(self.phase, Phase::Replica(_))
    }

    /// Whether this member waits to join, or left.
    pub fn is_outside(&self) -> bool {
        matches!(self.phase, Phase::Joining | Phase::Retired)
    }

    /// Whether this member left the group (its shares are erased).
    pub fn is_retired(&self) -> bool {
        matches!(self.phase, Phase::Retired)
    }

    /// What the DKG waits for, while it runs (for logs).
    pub fn dkg_progress(&self) -> Option<String> {
        match &self.phase {
            Phase::Dkg(dkg) => Some(dkg.progress()),
            _ => None,
        }
    }

    /// The replica, once the DKG is over.
    pub fn replica(&self) -> Option<&dyn Participant<S>> {
        match &self.phase {
            Phase::Replica(r) => Some(r.as_ref()),
            _ => None,
        }
    }

    /// Whether this member follows the protocol.
    pub fn is_honest(&self) -> bool {
        self.adversary.is_none()
    }

    /// Handles one input at `now`: dispatches it, then drains the loopback
    /// (what the DKG session, the replica and the transition returned) through
    /// the same kind of dispatcher, depth first (see `outbox`). `from` in
    /// messages is the sender's directory index (its index in the genesis
    /// epoch for genesis members).
    pub fn handle(&mut self, now: Time, input: MemberInput<S>) -> Vec<MemberOutput<S>> {
        let mut out = Outbox::new();
        self.erase_finished_dkg(now);
        self.dispatch(now, input, &mut out);
        while let Some(input) = out.next_input() {
            self.dispatch_self(now, input, &mut out);
        }
        self.expire_dealing_seed(now, &mut out);
        out.take()
    }

    /// Routes one input to its handler.
    fn dispatch(&mut self, now: Time, input: MemberInput<S>, out: &mut Outbox<S>) {
        if matches!(input, MemberInput::Start) {
            self.arm_kept_deal_erasure(out);
        }
        match input {
            MemberInput::Start => match self.phase {
                Phase::Dkg(_) => self.on_session_input(now, SessionInput::Start, out),
                Phase::Replica(_) => self.on_restart(out),
                // A joiner asks the members it trusts for an invitation at
                // once (it may restart during a change), then periodically.
                Phase::Joining => self.on_resend(now, out),
                Phase::Retired | Phase::Failed => {}
            },
            MemberInput::Message { from, envelope } => match envelope {
                Envelope::Dkg(message) => {
                    self.on_session_input(now, SessionInput::Message { from, message }, out)
                }
                Envelope::Consensus(message) => {
                    self.on_consensus(now, DirectoryIndex::of_address(from), message, out)
                }
                Envelope::Epoch(message) => {
                    self.on_epoch_message(now, DirectoryIndex::of_address(from), message, out)
                }
            },
            MemberInput::Timer(MemberTimer::Dkg(t)) => {
                self.on_session_input(now, SessionInput::Timer(t), out)
            }
            MemberInput::Timer(MemberTimer::Replica { epoch, timer }) => {
                self.on_replica_timer(now, epoch, timer, out)
            }
            MemberInput::Timer(MemberTimer::Epoch { epoch, timer }) => {
                self.on_transition_timer(now, epoch, timer, out)
            }
            MemberInput::Timer(MemberTimer::EpochResend) => self.on_resend(now, out),
            MemberInput::ClientTransaction(tx) => self.on_client_transaction(now, tx, out),
            MemberInput::ProposeEpoch(change) => self.on_propose_epoch(now, change, out),
        }
    }

    /// Routes one self-input to its handler; what the replica of an epoch
    /// that ended still produced is dropped.
    fn dispatch_self(&mut self, now: Time, input: SelfInput<S>, out: &mut Outbox<S>) {
        match input {
            SelfInput::Replica { generation, .. }
            | SelfInput::StartReplica { generation }
            | SelfInput::Finalized { generation, .. }
            | SelfInput::Decision { generation, .. }
                if generation != self.generation => {}
            // A joiner's notices are for the change it still waits for.
            SelfInput::Named { epoch, .. }
                if !matches!(self.phase, Phase::Joining)
                    || Some(epoch) != self.epoch.number.checked_add(1) => {}
            SelfInput::Session(output) => self.on_session_output(now, output, out),
            SelfInput::Replica { epoch, output, .. } => self.on_replica_output(epoch, output, out),
            SelfInput::StartReplica { .. } => self.on_replica_start(now, out),
            SelfInput::Finalized { entry, .. } => self.on_finalized(&entry, out),
            SelfInput::Decision {
                decision: Decision::Decided { change, height },
                ..
            } => self.on_decided(now, change, height, out),
            SelfInput::Decision {
                decision:
                    Decision::Switch {
                        height,
                        digest,
                        dealers,
                    },
                ..
            } => self.on_switch(now, height, digest, dealers, out),
            SelfInput::Decision {
                decision:
                    Decision::Named {
                        digest, dealers, ..
                    },
                ..
            } => self.on_named(now, digest, dealers, out),
            SelfInput::Transition { epoch, event } => self.on_transition(now, epoch, event, out),
            SelfInput::Early {
                epoch,
                from,
                message,
            } => self.on_early_message(now, epoch, from, message, out),
            SelfInput::RetryJoin => self.on_retry_join(now, out),
            SelfInput::Named {
                digest, dealers, ..
            } => self.on_named(now, digest, dealers, out),
            SelfInput::ArmResend => self.arm_resend(now, out),
        }
    }

    /// A restored member reads the control transactions of its stored window
    /// first (proposals it had counted before it stopped, a decision, or a
    /// switch it missed), then starts its replica, unless the epoch ended.
    fn on_restart(&mut self, out: &mut Outbox<S>) {
        if let Phase::Replica(r) = &self.phase {
            for entry in r.finalized().iter() {
                out.loop_back(SelfInput::Finalized {
                    generation: self.generation,
                    entry: entry.clone(),
                });
            }
            out.loop_back(SelfInput::StartReplica {
                generation: self.generation,
            });
        }
    }

    /// Starts the restored replica.
    fn on_replica_start(&mut self, now: Time, out: &mut Outbox<S>) {
        if let Phase::Replica(r) = &mut self.phase {
            let outputs = r.handle(now, Input::Start);
            self.queue_replica(outputs, out);
        }
    }

    /// A timer of the replica of `epoch`: to the replica, if it still runs.
    fn on_replica_timer(&mut self, now: Time, epoch: Epoch, timer: Timer, out: &mut Outbox<S>) {
        if let (Phase::Replica(r), true) = (&mut self.phase, epoch == self.epoch.number) {
            let outputs = r.handle(now, Input::Timer(timer));
            self.queue_replica(outputs, out);
        }
    }

    /// A client transaction: to the replica's mempool.
    fn on_client_transaction(&mut self, now: Time, tx: Vec<u8>, out: &mut Outbox<S>) {
        if let Phase::Replica(r) = &mut self.phase {
            let outputs = r.handle(now, Input::ClientTransaction(tx));
            self.queue_replica(outputs, out);
        }
    }

    /// A consensus message from directory member `from`: to the replica under
    /// its epoch index; kept too when it may belong to the next epoch.
    fn on_consensus(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        message: Message<S>,
        out: &mut Outbox<S>,
    ) {
        self.change
            .keep_ahead(from, &message, self.current_height());
        if let Message::SyncRequest { from_height } = &message {
            // A member of an earlier epoch that fell behind its end: this
            // member's store answers (heights up to the switch are certified
            // by that epoch's keys, and show it where the epoch ended).
            let stored = matches!(self.phase, Phase::Replica(_) | Phase::Retired);
            let known = self
                .identity
                .as_ref()
                .is_some_and(|i| from.get() < i.who.directory.len());
            if stored
                && known
                && self.epoch.number > Epoch::ZERO
                && self.epoch.index_of(from).is_none()
            {
                out.push(MemberOutput::SyncFromStore {
                    to: from.address(),
                    from_height: *from_height,
                });
                return;
            }
        }
        match &mut self.phase {
            Phase::Dkg(_) if self.early.len() < EARLY_LIMIT => {
                if let Some(i) = self.epoch.index_of(from) {
                    self.early.push((i, message));
                }
            }
            Phase::Replica(r) => {
                if let Some(i) = self.epoch.index_of(from) {
                    let outputs = r.handle(now, Input::Message { from: i, message });
                    self.queue_replica(outputs, out);
                }
            }
            _ => {}
        }
    }

    fn current_height(&self) -> Option<Height> {
        match &self.phase {
            Phase::Replica(r) => Some(r.current_height()),
            _ => None,
        }
    }

    /// Queues what the current replica returned, one output at a time.
    fn queue_replica(&self, outputs: Vec<Output<S>>, out: &mut Outbox<S>) {
        for output in outputs {
            out.loop_back(SelfInput::Replica {
                generation: self.generation,
                epoch: self.epoch.number,
                output,
            });
        }
    }

    /// Carries out one output of the replica of `epoch`: indices to
    /// directory indices, timers tagged with the epoch, finalized blocks
    /// queued to be read for control transactions.
    fn on_replica_output(&mut self, epoch: Epoch, output: Output<S>, out: &mut Outbox<S>) {
        match output {
            Output::Effect(e) => {
                let e = match e {
                    Effect::Send { to, message } => match self.epoch.directory_of(to) {
                        Some(d) => Effect::Send {
                            to: d.address(),
                            message,
                        },
                        None => return,
                    },
                    other => other,
                };
                out.push(MemberOutput::Effect(e.map(Envelope::Consensus, |timer| {
                    MemberTimer::Replica { epoch, timer }
                })))
            }
            Output::SyncFromStore { to, from_height } => {
                if let Some(d) = self.epoch.directory_of(to) {
                    out.push(MemberOutput::SyncFromStore {
                        to: d.address(),
                        from_height,
                    })
                }
            }
            Output::PersistVotes(record) => out.push(MemberOutput::PersistVotes(record)),
            Output::Event(Event::Finalized(entry)) => {
                out.push(MemberOutput::Event(Event::Finalized(entry.clone())));
                out.loop_back(SelfInput::Finalized {
                    generation: self.generation,
                    entry,
                });
            }
            Output::Event(e) => out.push(MemberOutput::Event(e)),
        }
    }
}

mod construct;
mod epochs;
mod genesis;
mod interface;
mod outbox;
pub use construct::RestoredParts;
pub use epochs::{EpochChangeFailure, EpochEvent};
pub use interface::{Envelope, KeyGenerationFailure, MemberInput, MemberOutput, MemberTimer};

#[cfg(test)]
mod tests;
