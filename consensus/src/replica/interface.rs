//! What goes into the replica and what comes out: inputs and timers; outputs
//! split into effects (the network, timers, the driver's store) and events (what
//! happened: for persistence, metrics, checkers). Events carry no time stamps:
//! the driver knows when it received them (see [`crate::latency`]).

use crate::messages::{Block, CommitCertificate, CommittedEntry, Message};
use crate::{Height, View};
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme};
use std::fmt;
use std::sync::Arc;

/// Inputs of a replica.
#[derive(Clone, Debug)]
pub enum Input<S: Scheme> {
    /// Start (or resume) participating.
    Start,
    /// A message from an authenticated sender.
    Message {
        /// Sender.
        from: NodeIndex,
        /// Message.
        message: Message<S>,
    },
    /// A timer fired.
    Timer(Timer),
    /// A client transaction (opaque bytes).
    ClientTransaction(Vec<u8>),
    /// A membership control transaction from an authenticated member
    /// ([`crate::epoch::Control`]): it goes into blocks before client
    /// transactions, and a full client pool does not keep it out.
    ControlTransaction(Vec<u8>),
}

/// Timers a replica asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// A collector's fast-path wait is over.
    FastPath {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// No commit in time: change view.
    ViewChange {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// Send this view's shares to the collectors again.
    Retransmit {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// A backup collector's turn to act.
    BackupCollector {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// A paced round's signing time: proposals held until now may be signed.
    Release {
        /// Height.
        height: Height,
    },
}

impl fmt::Display for Timer {
    /// `fast-path(h,v)`, `view-change(h,v)`, `retransmit(h,v)`,
    /// `backup-collector(h,v)`, `release(h)`: the names step tables use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Timer::FastPath { height, view } => write!(f, "fast-path({height},{view})"),
            Timer::ViewChange { height, view } => write!(f, "view-change({height},{view})"),
            Timer::Retransmit { height, view } => write!(f, "retransmit({height},{view})"),
            Timer::BackupCollector { height, view } => {
                write!(f, "backup-collector({height},{view})")
            }
            Timer::Release { height } => write!(f, "release({height})"),
        }
    }
}

/// The replica's network and timer effects (the one effect type of the
/// workspace's state machines).
pub type ReplicaEffect<S> = Effect<Message<S>, Timer>;

/// Outputs of a replica: effects for the driver to carry out, and events.
#[derive(Clone, Debug)]
pub enum Output<S: Scheme> {
    /// Send, broadcast, or set a timer.
    Effect(ReplicaEffect<S>),
    /// A peer asked for finalized heights older than this replica keeps in
    /// memory: the driver answers from its store with a
    /// [`Message::SyncResponse`] (see [`super::sync_response`]).
    SyncFromStore {
        /// Who asked.
        to: NodeIndex,
        /// First height wanted.
        from_height: Height,
    },
    /// What this replica signed at the heights not yet finalized (see
    /// [`super::SignedVotes`]): always the first output of a `handle` call, and
    /// the driver must persist it durably (replacing the previous record)
    /// before it carries out any other output of that call. A restarted
    /// replica is given the last record back ([`super::Replica::restore`]).
    PersistVotes(Vec<super::SignedVotes<S>>),
    /// Something happened.
    Event(Event<S>),
}

/// What happened in a replica. The driver stamps events with its own clock.
#[derive(Clone, Debug)]
pub enum Event<S: Scheme> {
    /// A block committed.
    Committed {
        /// The block.
        block: Arc<Block>,
        /// Its proof.
        certificate: CommitCertificate<S>,
    },
    /// A beacon became known (verified), in drand's format.
    Beacon(beacon::Beacon),
    /// A height is complete (block and beacon): persist it.
    Finalized(Arc<CommittedEntry<S>>),
    /// This replica moved to a new view.
    ViewChanged {
        /// Height.
        height: Height,
        /// New view.
        view: View,
    },
    /// Provable misbehaviour of another replica.
    Evidence(Evidence),
}

/// What a collector or replica proved about another replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The misbehaving replica.
    pub culprit: NodeIndex,
    /// Height.
    pub height: Height,
    /// What it did.
    pub kind: EvidenceKind,
}

/// Kinds of misbehaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EvidenceKind {
    /// An invalid signature share.
    InvalidShare {
        /// Which share.
        share: ShareKind,
    },
    /// Two different proposals from the primary in one view.
    ConflictingProposals {
        /// View.
        view: View,
    },
    /// Two votes of one kind from one replica in one view (shares on two
    /// different digests): equivocation, which crash safety rules out for
    /// honest replicas.
    ConflictingVotes {
        /// View.
        view: View,
        /// Which vote.
        share: ShareKind,
    },
    /// A beacon, proof or certificate that does not verify.
    InvalidProof {
        /// Which message.
        proof: ProofKind,
    },
}

impl fmt::Display for EvidenceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvidenceKind::InvalidShare { share } => write!(f, "invalid {share} share"),
            EvidenceKind::ConflictingProposals { view } => {
                write!(f, "conflicting proposals in view {view}")
            }
            EvidenceKind::ConflictingVotes { view, share } => {
                write!(f, "conflicting {share} votes in view {view}")
            }
            EvidenceKind::InvalidProof { proof } => write!(f, "invalid {proof}"),
        }
    }
}

/// The signature shares a replica sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShareKind {
    /// The vote in SIGN-SHARE (the member's own key): fast-path and prepare
    /// vote at once.
    Vote,
    /// Slow-path COMMIT vote (the member's own key).
    Commit,
    /// Beacon share (beacon key), in SIGN-SHARE, VIEW-CHANGE or BEACON-SHARE.
    Beacon,
}

impl ShareKind {
    /// `vote`, `commit` or `beacon`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareKind::Vote => "vote",
            ShareKind::Commit => "commit",
            ShareKind::Beacon => "beacon",
        }
    }
}

impl fmt::Display for ShareKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The aggregated messages a replica checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKind {
    /// A commit proof (fast or slow path).
    CommitProof,
    /// A PREPARE's certificate.
    Prepare,
    /// A NEW-VIEW (forged view changes or unverifiable claims).
    NewView,
    /// A beacon.
    Beacon,
}

impl ProofKind {
    /// `commit proof`, `prepare`, `new-view` or `beacon`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProofKind::CommitProof => "commit proof",
            ProofKind::Prepare => "prepare",
            ProofKind::NewView => "new-view",
            ProofKind::Beacon => "beacon",
        }
    }
}

impl fmt::Display for ProofKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<S: Scheme> Output<S> {
    /// Send `message` to `to`.
    pub fn send(to: NodeIndex, message: Message<S>) -> Self {
        Output::Effect(Effect::Send { to, message })
    }

    /// Send `message` to every other replica.
    pub fn broadcast(message: Message<S>) -> Self {
        Output::Effect(Effect::Broadcast(message))
    }

    /// The event, if this output is one.
    pub fn event(&self) -> Option<&Event<S>> {
        match self {
            Output::Event(e) => Some(e),
            _ => None,
        }
    }

    /// The message sent, if this output sends one.
    pub fn message(&self) -> Option<&Message<S>> {
        match self {
            Output::Effect(e) => e.message(),
            _ => None,
        }
    }
}

impl<S: Scheme> fmt::Display for Output<S> {
    /// One line per output, as step tables write them: `send sign-share to 2`,
    /// `broadcast commit-proof`, `timer retransmit(1,0)`, `committed 1`,
    /// `beacon 1`, `finalized 1`, `view-changed (1,1)`, `evidence invalid
    /// beacon by 3`, `sync-from-store 2 from 1`, `persist-votes 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Effect(Effect::Send { to, message }) => {
                write!(f, "send {} to {}", message.kind(), to.0)
            }
            Output::Effect(Effect::Broadcast(m)) => write!(f, "broadcast {}", m.kind()),
            Output::Effect(Effect::SetTimer { timer, .. }) => write!(f, "timer {timer}"),
            Output::SyncFromStore { to, from_height } => {
                write!(f, "sync-from-store {} from {from_height}", to.0)
            }
            Output::PersistVotes(record) => {
                write!(f, "persist-votes")?;
                for r in record {
                    write!(f, " {}", r.height)?;
                }
                Ok(())
            }
            Output::Event(Event::Committed { block, .. }) => {
                write!(f, "committed {}", block.height)
            }
            Output::Event(Event::Beacon(b)) => write!(f, "beacon {}", b.round),
            Output::Event(Event::Finalized(e)) => write!(f, "finalized {}", e.block.height),
            Output::Event(Event::ViewChanged { height, view }) => {
                write!(f, "view-changed ({height},{view})")
            }
            Output::Event(Event::Evidence(e)) => {
                write!(f, "evidence {} by {}", e.kind, e.culprit.0)
            }
        }
    }
}
