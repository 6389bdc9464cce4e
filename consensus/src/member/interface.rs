//! What a member takes and gives: the one wire envelope, its timers, its
//! inputs and its outputs.

use super::EpochEvent;
use crate::disk::DiskWrite;
use crate::epoch::{EpochChange, EpochMessage, TransitionTimer};
use crate::messages::Message;
use crate::replica::{Event, Output, SignedVotes, Timer};
use crate::ConsensusError;
use crate::{Epoch, Height};
use beacon::dkg::session::{SessionFailure, SessionMessage, SessionTimer};
use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::{wire, NodeIndex, Scheme};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// Why a member's start-up key generation ended without keys it can use.
#[derive(Clone, Debug, thiserror::Error)]
pub enum KeyGenerationFailure {
    /// The DKG session ended without an agreed result.
    #[error(transparent)]
    Session(#[from] SessionFailure),
    /// The agreed result does not give this member a valid replica (its key
    /// material does not fit the network's configuration).
    #[error("the DKG's key material does not fit the replica: {0}")]
    Keys(Arc<ConsensusError>),
}

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
        epoch: Epoch,
        /// The timer.
        timer: Timer,
    },
    /// A timer of the change into epoch `epoch`.
    Epoch {
        /// The epoch being started.
        epoch: Epoch,
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
    /// A durable write other than the vote record (key material, the epoch
    /// record, the cleared vote record, a new seed), in the order the writes
    /// must be durable, before anything after it is carried out: a driver
    /// hands it to [`crate::disk::persist`].
    Persist(DiskWrite<S>),
    /// The DKG finished (its key material is persisted by the
    /// [`MemberOutput::Persist`] before this).
    DkgComplete(Arc<DkgOutput<S>>),
    /// The DKG failed.
    DkgFailed(KeyGenerationFailure),
    /// An event of the replica (commits, beacons, finalized heights, evidence...).
    Event(Event<S>),
    /// A step of an epoch change (see [`EpochEvent`]).
    Epoch(EpochEvent<S>),
}

impl fmt::Display for MemberTimer {
    /// `dkg …`, `replica 0 view-change(4,0)`, `epoch 1 Erase`, `epoch-resend`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberTimer::Dkg(timer) => write!(f, "dkg {timer:?}"),
            MemberTimer::Replica { epoch, timer } => write!(f, "replica {epoch} {timer}"),
            MemberTimer::Epoch { epoch, timer } => write!(f, "epoch {epoch} {timer:?}"),
            MemberTimer::EpochResend => write!(f, "epoch-resend"),
        }
    }
}

impl<S: Scheme> fmt::Display for MemberOutput<S> {
    /// One line per output, as step tables write them: `send epoch-invite
    /// to 4`, `broadcast pre-prepare`, `timer epoch-resend`, `dkg-complete`,
    /// `persist keys`, `persist new-seed`, `epoch 1 decided at 3`,
    /// `epoch 1 retired after 4`, and the replica's
    /// events as its outputs write them (`finalized 3`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberOutput::Effect(Effect::Send { to, message }) => {
                write!(f, "send {} to {}", message.kind(), to.0)
            }
            MemberOutput::Effect(Effect::Broadcast(m)) => write!(f, "broadcast {}", m.kind()),
            MemberOutput::Effect(Effect::SetTimer { timer, .. }) => write!(f, "timer {timer}"),
            MemberOutput::SyncFromStore { to, from_height } => {
                write!(f, "sync-from-store {} from {from_height}", to.0)
            }
            MemberOutput::PersistVotes(record) => Output::<S>::PersistVotes(record.clone()).fmt(f),
            MemberOutput::Persist(write) => write.fmt(f),
            MemberOutput::DkgComplete(_) => write!(f, "dkg-complete"),
            MemberOutput::DkgFailed(reason) => write!(f, "dkg-failed: {reason}"),
            MemberOutput::Event(event) => Output::Event(event.clone()).fmt(f),
            MemberOutput::Epoch(EpochEvent::Decided { epoch, height }) => {
                write!(f, "epoch {epoch} decided at {height}")
            }
            MemberOutput::Epoch(EpochEvent::Ready { epoch, .. }) => {
                write!(f, "epoch {epoch} ready")
            }
            MemberOutput::Epoch(EpochEvent::Started { epoch, start, .. }) => {
                write!(f, "epoch {epoch} started at {start}")
            }
            MemberOutput::Epoch(EpochEvent::Retired { epoch, height }) => {
                write!(f, "epoch {epoch} retired after {height}")
            }
            MemberOutput::Epoch(EpochEvent::Failed { epoch, reason }) => {
                write!(f, "epoch {epoch} failed: {reason}")
            }
        }
    }
}
