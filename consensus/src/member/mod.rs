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
use crate::epoch::{Directory, EpochChange, EpochMessage, EpochView, TransitionTimer};
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
    /// A message of an epoch change (control transactions, resharing, the new
    /// members' DKG, invitations, handoffs).
    Epoch(EpochMessage<S>),
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
            Envelope::Epoch(m) => m.kind(),
        }
    }
}

/// Timers of a member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberTimer {
    /// A DKG timer (phase or attempt end).
    Dkg(SessionTimer),
    /// A timer of the replica of epoch `epoch`.
    Replica {
        /// The epoch whose replica set it.
        epoch: u64,
        /// The timer.
        timer: Timer,
    },
    /// A timer of the change into epoch `epoch`.
    Epoch {
        /// The epoch being started.
        epoch: u64,
        /// The timer.
        timer: TransitionTimer,
    },
    /// Time to send again what an epoch change still waits for (control
    /// transactions not yet finalized, invitations, handoff requests): messages
    /// lost to a partition or to loss are not lost for good.
    EpochResend,
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
    /// The operator proposes a change of members (signed with the member key
    /// and handed to every member: see [`crate::epoch`]).
    ProposeEpoch(EpochChange),
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
    /// A step of an epoch change (see [`EpochEvent`]).
    Epoch(EpochEvent<S>),
}

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

/// What a member needs to take part in epoch changes: its member key, the
/// member keys of everyone the transport reaches, and the DKG's phase length
/// and attempts (reused by resharings).
#[derive(Clone)]
struct Identity {
    key: SigningKey,
    directory: Directory,
    /// This member's directory index.
    me: u32,
    phase_timeout_us: u64,
    max_attempts: u32,
}

/// One member: DKG, then replica, epoch after epoch.
pub struct Member<S: Scheme> {
    me: NodeIndex,
    seed: [u8; 32],
    memo: Arc<Memo>,
    behaviour: Option<Behaviour>,
    phase: Phase<S>,
    early: Vec<(NodeIndex, Message<S>)>,
    /// The current epoch (its members and replica configuration).
    epoch: EpochView,
    /// The current epoch's key material (none before the DKG, or once retired).
    keys: Option<Arc<DkgOutput<S>>>,
    identity: Option<Identity>,
    epochs: epochs::EpochState<S>,
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
    /// the member keys of everyone the transport reaches, by index: the `dkg.n`
    /// genesis members first, then parties that may join later. `behaviour`
    /// makes it Byzantine (its DKG session for DKG behaviours, its replica for
    /// the others).
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
        let genesis = Arc::new(keys.iter().take(config.n as usize).copied().collect());
        let identity = Identity {
            key: key.clone(),
            directory: Directory::new(keys),
            me: me.0,
            phase_timeout_us: dkg.phase_timeout_us,
            max_attempts: dkg.max_attempts,
        };
        let session = DkgSession::new(dkg, me, derive(&seed, b"dkg"), memo.clone(), key, genesis)?;
        let state: Box<dyn SessionParticipant<S>> = match behaviour {
            Some(b) if b.is_dkg() => Box::new(ByzantineSession::new(session, b)),
            _ => Box::new(session),
        };
        Ok(Self::assemble(
            me,
            EpochView::genesis(config),
            None,
            seed,
            memo,
            behaviour,
            Phase::Dkg(state),
            Some(identity),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        me: NodeIndex,
        epoch: EpochView,
        keys: Option<Arc<DkgOutput<S>>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
        phase: Phase<S>,
        identity: Option<Identity>,
    ) -> Self {
        let epochs = epochs::EpochState::new(&epoch, identity.as_ref().map(|i| &i.directory));
        Member {
            me,
            seed,
            memo,
            behaviour,
            phase,
            early: Vec::new(),
            epoch,
            keys,
            identity,
            epochs,
        }
    }

    /// A member restored from persisted key material, its most recent finalized
    /// heights (consecutive, ending at the last; at least the last
    /// [`crate::replica::CHAIN_WINDOW`] of them when the chain is that long) and
    /// the last [`MemberOutput::PersistVotes`] record (empty when none): no DKG.
    /// It takes part in epoch changes once given its identity
    /// ([`Member::with_identity`]).
    pub fn restore(
        config: ReplicaConfig,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
    ) -> Result<Self, ConsensusError> {
        Self::restore_in(
            EpochView::genesis(config),
            output,
            chain,
            votes,
            seed,
            memo,
            behaviour,
        )
    }

    /// [`Member::restore`] in epoch `epoch` (the members and configuration of
    /// the last [`EpochEvent::Started`], whose key material `output` is).
    pub fn restore_in(
        epoch: EpochView,
        output: &DkgOutput<S>,
        chain: Vec<Arc<CommittedEntry<S>>>,
        votes: Vec<SignedVotes<S>>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        behaviour: Option<Behaviour>,
    ) -> Result<Self, ConsensusError> {
        epoch.config.validate()?;
        output.check()?;
        if output.n != epoch.config.n || epoch.members.len() != epoch.config.n as usize {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: output.n,
                dkg_thresholds: output.keys.iter().map(|k| k.threshold).collect(),
                n: epoch.members.len() as u32,
                thresholds: epoch.config.dkg_thresholds(),
            });
        }
        let replica =
            Self::build_replica(&epoch.config, output, chain, votes, &seed, &memo, behaviour)?;
        Ok(Self::assemble(
            output.me,
            epoch,
            Some(Arc::new(output.clone())),
            seed,
            memo,
            behaviour,
            Phase::Replica(replica),
            None,
        ))
    }

    /// A party that joins the running network whose current epoch is `epoch`
    /// (the members it trusts to invite it): it waits for `f + 1` identical
    /// invitations, takes part in the change, and runs the new epoch's replica
    /// from the handoff. `me` is its directory index in `keys`; resharings use
    /// phases of `phase_timeout_us` and the new members' DKG `max_attempts`.
    #[allow(clippy::too_many_arguments)]
    pub fn joining(
        epoch: EpochView,
        me: u32,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Result<Self, ConsensusError> {
        epoch.config.validate()?;
        let directory = Directory::new(keys);
        if directory.key(me) != Some(&key.verifying_key()) {
            return Err(ConsensusError::Beacon(beacon::Error::Reshare(format!(
                "party {me}: the member key does not match the directory"
            ))));
        }
        let identity = Identity {
            key,
            directory,
            me,
            phase_timeout_us,
            max_attempts,
        };
        Ok(Self::assemble(
            NodeIndex(me),
            epoch,
            None,
            seed,
            memo,
            None,
            Phase::Joining,
            Some(identity),
        ))
    }

    /// Gives a restored member its identity (see [`Member::new`] for `keys`), so
    /// that it takes part in epoch changes.
    pub fn with_identity(
        mut self,
        me: u32,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        phase_timeout_us: u64,
        max_attempts: u32,
    ) -> Self {
        let directory = Directory::new(keys);
        self.epochs = epochs::EpochState::new(&self.epoch, Some(&directory));
        self.identity = Some(Identity {
            key,
            directory,
            me,
            phase_timeout_us,
            max_attempts,
        });
        self
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

    /// This member's index in the current epoch (its directory index while it
    /// joins or once it left).
    pub fn index(&self) -> NodeIndex {
        self.me
    }

    /// The current epoch.
    pub fn epoch(&self) -> &EpochView {
        &self.epoch
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
        self.behaviour.is_none()
    }

    /// Handles one input at `now`. `from` in messages is the sender's
    /// directory index (its index in the genesis epoch for genesis members).
    pub fn handle(&mut self, now: Time, input: MemberInput<S>) -> Vec<MemberOutput<S>> {
        let mut out = Vec::new();
        match input {
            MemberInput::Start => match &mut self.phase {
                Phase::Dkg(dkg) => {
                    let actions = dkg.handle(now, SessionInput::Start);
                    self.on_dkg_actions(now, actions, &mut out);
                }
                Phase::Replica(r) => {
                    // A restored member reads the control transactions of its
                    // stored window first: proposals it had counted before it
                    // stopped, a decision, or a switch it missed.
                    let window: Vec<_> = r.finalized().iter().cloned().collect();
                    for entry in &window {
                        if self.on_finalized(now, entry, &mut out) {
                            return out;
                        }
                    }
                    if let Phase::Replica(r) = &mut self.phase {
                        let outputs = r.handle(now, Input::Start);
                        self.on_replica(now, outputs, &mut out);
                    }
                }
                _ => {}
            },
            MemberInput::Message { from, envelope } => match envelope {
                Envelope::Dkg(message) => {
                    if let Phase::Dkg(dkg) = &mut self.phase {
                        let actions = dkg.handle(now, SessionInput::Message { from, message });
                        self.on_dkg_actions(now, actions, &mut out);
                    }
                }
                Envelope::Consensus(message) => self.on_consensus(now, from.0, message, &mut out),
                Envelope::Epoch(message) => self.on_epoch_message(now, from.0, message, &mut out),
            },
            MemberInput::Timer(MemberTimer::Dkg(t)) => {
                if let Phase::Dkg(dkg) = &mut self.phase {
                    let actions = dkg.handle(now, SessionInput::Timer(t));
                    self.on_dkg_actions(now, actions, &mut out);
                }
            }
            MemberInput::Timer(MemberTimer::Replica { epoch, timer }) => {
                if let (Phase::Replica(r), true) = (&mut self.phase, epoch == self.epoch.number) {
                    let outputs = r.handle(now, Input::Timer(timer));
                    self.on_replica(now, outputs, &mut out);
                }
            }
            MemberInput::Timer(MemberTimer::Epoch { epoch, timer }) => {
                self.on_transition_timer(now, epoch, timer, &mut out)
            }
            MemberInput::Timer(MemberTimer::EpochResend) => self.on_resend(now, &mut out),
            MemberInput::ClientTransaction(tx) => {
                if let Phase::Replica(r) = &mut self.phase {
                    let outputs = r.handle(now, Input::ClientTransaction(tx));
                    self.on_replica(now, outputs, &mut out);
                }
            }
            MemberInput::ProposeEpoch(change) => self.propose_epoch(now, change, &mut out),
        }
        out
    }

    /// A consensus message from directory member `from`: to the replica under
    /// its epoch index; kept too when it may belong to the next epoch.
    fn on_consensus(
        &mut self,
        now: Time,
        from: u32,
        message: Message<S>,
        out: &mut Vec<MemberOutput<S>>,
    ) {
        self.epochs
            .keep_ahead(from, &message, self.current_height());
        if let Message::SyncRequest { from_height } = &message {
            // A member of an earlier epoch that fell behind its end: this
            // member's store answers (heights up to the switch are certified
            // by that epoch's keys, and show it where the epoch ended).
            let stored = matches!(self.phase, Phase::Replica(_) | Phase::Retired);
            let known = self
                .identity
                .as_ref()
                .is_some_and(|i| from < i.directory.len());
            if stored && known && self.epoch.number > 0 && self.epoch.index_of(from).is_none() {
                out.push(MemberOutput::SyncFromStore {
                    to: NodeIndex(from),
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
                    self.on_replica(now, outputs, out);
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

    /// Carries out a replica's outputs: indices to directory indices, timers
    /// tagged with the epoch, finalized blocks read for control transactions.
    /// When a block ends the epoch, what the replica did after it is dropped.
    fn on_replica(&mut self, now: Time, outputs: Vec<Output<S>>, out: &mut Vec<MemberOutput<S>>) {
        let epoch = self.epoch.number;
        for o in outputs {
            match o {
                Output::Effect(e) => {
                    let e = match e {
                        Effect::Send { to, message } => match self.epoch.directory_of(to) {
                            Some(d) => Effect::Send {
                                to: NodeIndex(d),
                                message,
                            },
                            None => continue,
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
                            to: NodeIndex(d),
                            from_height,
                        })
                    }
                }
                Output::PersistVotes(record) => out.push(MemberOutput::PersistVotes(record)),
                Output::Event(Event::Finalized(entry)) => {
                    out.push(MemberOutput::Event(Event::Finalized(entry.clone())));
                    if self.on_finalized(now, &entry, out) {
                        // The epoch ended with this height: the rest was the old
                        // epoch's next height, which never happens.
                        return;
                    }
                }
                Output::Event(e) => out.push(MemberOutput::Event(e)),
            }
        }
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
                        &self.epoch.config,
                        &output,
                        Vec::new(),
                        Vec::new(),
                        &self.seed,
                        &self.memo,
                        self.behaviour,
                    ) {
                        Ok(mut replica) => {
                            self.keys = Some(output);
                            let mut outputs = replica.handle(now, Input::Start);
                            for (from, message) in std::mem::take(&mut self.early) {
                                outputs
                                    .extend(replica.handle(now, Input::Message { from, message }));
                            }
                            self.phase = Phase::Replica(replica);
                            self.on_replica(now, outputs, out);
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

mod epochs;
pub use epochs::EpochEvent;
