//! One network member from start-up on: the DKG session (relay, attempts,
//! agreement: `beacon::dkg::session`), then the replica built from its result. This is the driver logic the simulator and the real node share; they
//! differ only in who delivers inputs and carries outputs.
//!
//! Consensus messages that arrive while the DKG is still running are kept (up to
//! a bound) and replayed when the replica starts. A member restored from persisted
//! key material and chain skips the DKG.

use crate::byzantine::{Behaviour, ByzantineReplica};
use crate::byzantine_dkg::ByzantineSession;
use crate::config::{ReplicaConfig, ReplicaKeys};
use crate::messages::{CommittedEntry, Message};
use crate::participant::Participant;
use crate::replica::{ChainWindow, Event, Input, Output, Replica, SignedVotes, Timer};
use crate::ConsensusError;
use crate::Height;
use beacon::dkg::relay::{SigningKey, VerifyingKey};
use beacon::dkg::session::{
    DkgSession, SessionAction, SessionInput, SessionMessage, SessionParticipant, SessionTimer,
};
use beacon::dkg::{DkgConfig, DkgOutput};
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::{wire, NodeIndex, Scheme, Time};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// Most consensus messages kept while the DKG runs.
const EARLY_LIMIT: usize = 10_000;

/// Everything that travels between members: one enum, one codec.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum Envelope<S: Scheme> {
    /// A DKG message (relayed broadcasts, private shares, signed results).
    Dkg(SessionMessage),
    /// A consensus message.
    Consensus(Message<S>),
}

impl<S: Scheme> Envelope<S> {
    /// Encodes with the wire codec.
    pub fn encode(&self) -> Result<Vec<u8>, ConsensusError> {
        Ok(wire::encode(self)?)
    }

    /// Decodes with the wire codec; malformed or oversized input is an error.
    pub fn decode(bytes: &[u8]) -> Result<Self, ConsensusError> {
        Ok(wire::decode(bytes)?)
    }

    /// Short name of the message kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Envelope::Dkg(m) => m.kind(),
            Envelope::Consensus(m) => m.kind(),
        }
    }
}

/// Timers of a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberTimer {
    /// A DKG timer (phase or attempt end).
    Dkg(SessionTimer),
    /// A replica timer.
    Replica(Timer),
}

/// Inputs of a member.
#[derive(Clone, Debug)]
pub enum MemberInput<S: Scheme> {
    /// Start (run the DKG, or resume the replica when restored).
    Start,
    /// A message from an authenticated peer.
    Message {
        /// Sender.
        from: NodeIndex,
        /// Message.
        envelope: Envelope<S>,
    },
    /// A timer fired.
    Timer(MemberTimer),
    /// A client transaction.
    ClientTransaction(Vec<u8>),
}

/// Outputs of a member: effects for its driver, and events.
#[derive(Clone, Debug)]
pub enum MemberOutput<S: Scheme> {
    /// Send, broadcast, or set a timer (DKG and replica alike).
    Effect(Effect<Envelope<S>, MemberTimer>),
    /// Answer a peer's sync request from the store (see
    /// [`Output::SyncFromStore`]).
    SyncFromStore {
        /// Who asked.
        to: NodeIndex,
        /// First height wanted.
        from_height: Height,
    },
    /// What the replica signed at the heights not yet finalized: persist it
    /// durably, replacing the previous record, before carrying out any output
    /// after it (see [`Output::PersistVotes`]); [`Member::restore`] takes the
    /// last one back.
    PersistVotes(Vec<SignedVotes<S>>),
    /// The DKG finished: persist the key material.
    DkgComplete(Arc<DkgOutput<S>>),
    /// The DKG failed.
    DkgFailed(String),
    /// An event of the replica (commits, beacons, finalized heights, evidence...).
    Event(Event<S>),
}

enum Phase<S: Scheme> {
    Dkg(Box<dyn SessionParticipant<S>>),
    Replica(Box<dyn Participant<S>>),
    Failed,
}

/// One member: DKG, then replica.
pub struct Member<S: Scheme> {
    me: NodeIndex,
    config: ReplicaConfig,
    seed: [u8; 32],
    memo: Arc<Memo>,
    behaviour: Option<Behaviour>,
    phase: Phase<S>,
    early: Vec<(NodeIndex, Message<S>)>,
}

/// The member key (signing DKG broadcasts and results) derived from a member's
/// seed: what the simulator uses (a real node signs with its identity key).
pub fn member_key(seed: &[u8; 32]) -> SigningKey {
    SigningKey::from_bytes(&derive(seed, b"member-key"))
}

/// Derives a labelled 32-byte seed from a member's seed.
fn derive(seed: &[u8; 32], label: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(label);
    h.update(seed);
    h.finalize().into()
}

impl<S: Scheme> Member<S> {
    /// A member that will run the DKG described by `dkg` (its thresholds must be
    /// `config.dkg_thresholds()`), signing its DKG messages with `key`; `keys` are
    /// every member's public keys by index. `behaviour` makes it Byzantine (its
    /// DKG session for DKG behaviours, its replica for the others).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: ReplicaConfig,
        dkg: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        behaviour: Option<Behaviour>,
    ) -> Result<Self, ConsensusError> {
        config.validate()?;
        if dkg.thresholds != config.dkg_thresholds() || dkg.n != config.n {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: dkg.n,
                dkg_thresholds: dkg.thresholds.clone(),
                n: config.n,
                thresholds: config.dkg_thresholds(),
            });
        }
        let session = DkgSession::new(dkg, me, derive(&seed, b"dkg"), memo.clone(), key, keys)?;
        let state: Box<dyn SessionParticipant<S>> = match behaviour {
            Some(b) if b.is_dkg() => Box::new(ByzantineSession::new(session, b)),
            _ => Box::new(session),
        };
        Ok(Member {
            me,
            config,
            seed,
            memo,
            behaviour,
            phase: Phase::Dkg(state),
            early: Vec::new(),
        })
    }

    /// A member restored from persisted key material, its most recent finalized
    /// heights (consecutive, ending at the last; at least the last
    /// [`crate::replica::CHAIN_WINDOW`] of them when the chain is that long) and
    /// the last [`MemberOutput::PersistVotes`] record (empty when none): no DKG.
    pub fn restore(
        config: ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
    ) -> Result<Self, ConsensusError> {
        config.validate()?;
        output.check()?;
        let replica = Self::build_replica(&config, output, chain, votes, &seed, &memo, behaviour)?;
        Ok(Member {
            me: output.me,
            config,
            seed,
            memo,
            behaviour,
            phase: Phase::Replica(replica),
            early: Vec::new(),
        })
    }

    fn build_replica(
        config: &ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        behaviour: Option<Behaviour>,
    ) -> Result<Box<dyn Participant<S>>, ConsensusError> {
        let keys = ReplicaKeys::from_dkg(config, output)?;
        let chain = ChainWindow::resume(chain).ok_or(ConsensusError::ChainGap)?;
        let replica = Replica::restore(
            config.clone(),
            keys.clone(),
            derive(seed, b"replica"),
            memo.clone(),
            chain,
            votes,
        );
        Ok(match behaviour {
            Some(b) => Box::new(ByzantineReplica::new(replica, keys, b)),
            None => Box::new(replica),
        })
    }

    /// This member's index.
    pub fn index(&self) -> NodeIndex {
        self.me
    }

    /// Whether the DKG is over (successfully).
    pub fn has_keys(&self) -> bool {
        matches!(self.phase, Phase::Replica(_))
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
        self.behaviour.is_none()
    }

    /// Handles one input at `now`.
    pub fn handle(&mut self, now: Time, input: MemberInput<S>) -> Vec<MemberOutput<S>> {
        let mut out = Vec::new();
        match input {
            MemberInput::Start => match &mut self.phase {
                Phase::Dkg(dkg) => {
                    let actions = dkg.handle(now, SessionInput::Start);
                    self.on_dkg_actions(now, actions, &mut out);
                }
                Phase::Replica(r) => {
                    let outputs = r.handle(now, Input::Start);
                    Self::wrap(outputs, &mut out);
                }
                Phase::Failed => {}
            },
            MemberInput::Message { from, envelope } => match (&mut self.phase, envelope) {
                (Phase::Dkg(dkg), Envelope::Dkg(message)) => {
                    let actions = dkg.handle(now, SessionInput::Message { from, message });
                    self.on_dkg_actions(now, actions, &mut out);
                }
                (Phase::Dkg(_), Envelope::Consensus(message)) if self.early.len() < EARLY_LIMIT => {
                    self.early.push((from, message));
                }
                (Phase::Replica(r), Envelope::Consensus(message)) => {
                    let outputs = r.handle(now, Input::Message { from, message });
                    Self::wrap(outputs, &mut out);
                }
                _ => {}
            },
            MemberInput::Timer(MemberTimer::Dkg(t)) => {
                if let Phase::Dkg(dkg) = &mut self.phase {
                    let actions = dkg.handle(now, SessionInput::Timer(t));
                    self.on_dkg_actions(now, actions, &mut out);
                }
            }
            MemberInput::Timer(MemberTimer::Replica(t)) => {
                if let Phase::Replica(r) = &mut self.phase {
                    let outputs = r.handle(now, Input::Timer(t));
                    Self::wrap(outputs, &mut out);
                }
            }
            MemberInput::ClientTransaction(tx) => {
                if let Phase::Replica(r) = &mut self.phase {
                    let outputs = r.handle(now, Input::ClientTransaction(tx));
                    Self::wrap(outputs, &mut out);
                }
            }
        }
        out
    }

    fn wrap(outputs: Vec<Output<S>>, out: &mut Vec<MemberOutput<S>>) {
        out.extend(outputs.into_iter().map(|o| match o {
            Output::Effect(e) => {
                MemberOutput::Effect(e.map(Envelope::Consensus, MemberTimer::Replica))
            }
            Output::SyncFromStore { to, from_height } => {
                MemberOutput::SyncFromStore { to, from_height }
            }
            Output::PersistVotes(record) => MemberOutput::PersistVotes(record),
            Output::Event(e) => MemberOutput::Event(e),
        }));
    }

    fn on_dkg_actions(
        &mut self,
        now: Time,
        actions: Vec<SessionAction<S>>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        for action in actions {
            match action {
                SessionAction::Send { to, message } => {
                    out.push(MemberOutput::Effect(Effect::Send {
                        to,
                        message: Envelope::Dkg(message),
                    }))
                }
                SessionAction::Broadcast(message) => out.push(MemberOutput::Effect(
                    Effect::Broadcast(Envelope::Dkg(message)),
                )),
                SessionAction::SetTimer { at, timer } => {
                    out.push(MemberOutput::Effect(Effect::SetTimer {
                        at,
                        timer: MemberTimer::Dkg(timer),
                    }))
                }
                SessionAction::Failed(reason) => {
                    self.phase = Phase::Failed;
                    out.push(MemberOutput::DkgFailed(reason));
                }
                SessionAction::Complete(output) => {
                    out.push(MemberOutput::DkgComplete(output.clone()));
                    match Self::build_replica(
                        &self.config,
                        &output,
                        Vec::new(),
                        Vec::new(),
                        &self.seed,
                        &self.memo,
                        self.behaviour,
                    ) {
                        Ok(mut replica) => {
                            let outputs = replica.handle(now, Input::Start);
                            Self::wrap(outputs, out);
                            for (from, message) in std::mem::take(&mut self.early) {
                                let outputs = replica.handle(now, Input::Message { from, message });
                                Self::wrap(outputs, out);
                            }
                            self.phase = Phase::Replica(replica);
                        }
                        Err(e) => {
                            self.phase = Phase::Failed;
                            out.push(MemberOutput::DkgFailed(e.to_string()));
                        }
                    }
                }
            }
        }
    }
}
