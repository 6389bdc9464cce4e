//! What the engine keeps per node: its pending events ([`Event`], with the
//! envelopes in flight they share, in a queue of its own: [`Pending`]), its
//! member and CPU ([`Slot`]), its persisted state ([`Disk`]), which a
//! crash-restart resumes from, and a crash armed to strike between two
//! durable writes ([`CrashPoint`]).

use beacon::cost::EncodedPoints;
use beacon::{NodeIndex, Scheme, Time};
use consensus::epoch::EpochChange;
use consensus::replica::CHAIN_WINDOW;
use consensus::{Behaviour, CommittedEntry, Envelope, Height, Member, MemberTimer, Message};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// An envelope in flight, shared by every recipient of one send, each kind
/// in an allocation of its own size: an [`Envelope`] is 920 bytes inline (a
/// SIGN-SHARE's three signatures), which millions of DKG shares and deals in
/// flight at 4,096 members would each pay.
#[derive(Clone)]
pub(super) enum InFlight<S: Scheme> {
    Consensus(Arc<Message<S>>),
    Dkg(Arc<beacon::dkg::session::SessionMessage>),
    Epoch(Arc<consensus::epoch::EpochMessage<S>>),
}

impl<S: Scheme> InFlight<S> {
    pub(super) fn new(envelope: Envelope<S>) -> Self {
        match envelope {
            Envelope::Consensus(m) => InFlight::Consensus(Arc::new(m)),
            Envelope::Dkg(m) => InFlight::Dkg(Arc::new(m)),
            Envelope::Epoch(m) => InFlight::Epoch(Arc::new(m)),
        }
    }

    /// The envelope (the last recipient takes it without a copy).
    pub(super) fn into_envelope(self) -> Envelope<S> {
        match self {
            InFlight::Consensus(m) => Envelope::Consensus(Arc::unwrap_or_clone(m)),
            InFlight::Dkg(m) => Envelope::Dkg(Arc::unwrap_or_clone(m)),
            InFlight::Epoch(m) => Envelope::Epoch(Arc::unwrap_or_clone(m)),
        }
    }

    pub(super) fn kind(&self) -> &'static str {
        match self {
            InFlight::Consensus(m) => m.kind(),
            InFlight::Dkg(m) => m.kind(),
            InFlight::Epoch(m) => m.kind(),
        }
    }
}

/// What can happen to a node.
pub(super) enum Event<S: Scheme> {
    Start,
    Deliver {
        from: NodeIndex,
        envelope: InFlight<S>,
        bytes: usize,
        /// The points in those bytes, which the receiver decodes.
        points: EncodedPoints,
    },
    Timer(MemberTimer),
    Transaction(Vec<u8>),
    /// The operator proposes a change of members (boxed: it is rare, and
    /// every event in the queues is the size of the largest kind).
    Propose(Box<EpochChange>),
    /// The member stops; with `lose_votes` its vote record is lost too.
    /// With a `point`, it stops later: between two durable writes.
    Crash {
        lose_votes: bool,
        point: Option<CrashPoint>,
    },
    Restart,
}

impl<S: Scheme> Event<S> {
    pub(super) fn tag(&self) -> (u8, &'static str, u32, u64) {
        match self {
            Event::Deliver { from, envelope, .. } => {
                let h = match envelope {
                    InFlight::Consensus(m) => m.height().map_or(0, Height::get),
                    InFlight::Dkg(_) | InFlight::Epoch(_) => 0,
                };
                (0, envelope.kind(), from.0, h)
            }
            Event::Start => (5, "start", 0, 0),
            Event::Timer(_) => (1, "timer", 0, 0),
            Event::Transaction(_) => (2, "transaction", 0, 0),
            Event::Crash { .. } => (3, "crash", 0, 0),
            Event::Restart => (4, "restart", 0, 0),
            Event::Propose(_) => (6, "propose", 0, 0),
        }
    }
}

/// Pending events a queue always has room for.
const KEPT_ROOM: usize = 16;

/// A node's pending events, earliest first, each stamped with the engine's
/// sequence number when it was pushed: a node's events come out in the
/// order (time, sequence) of one queue of every node's events, and a
/// window's worker takes its node's events from here (`Engine`'s index of
/// each node's earliest event finds the nodes of a window).
pub(super) struct Pending<S: Scheme> {
    heap: BinaryHeap<PendingEvent<S>>,
}

struct PendingEvent<S: Scheme> {
    at: Time,
    seq: u64,
    event: Event<S>,
}

impl<S: Scheme> PartialEq for PendingEvent<S> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<S: Scheme> Eq for PendingEvent<S> {}

impl<S: Scheme> PartialOrd for PendingEvent<S> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<S: Scheme> Ord for PendingEvent<S> {
    /// Reversed: the heap's greatest is the earliest (time, sequence).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

impl<S: Scheme> Default for Pending<S> {
    fn default() -> Self {
        Pending {
            heap: BinaryHeap::new(),
        }
    }
}

impl<S: Scheme> Pending<S> {
    /// Adds `event` at `at`, pushed as the engine's `seq`-th event.
    pub(super) fn push(&mut self, at: Time, seq: u64, event: Event<S>) {
        self.heap.push(PendingEvent { at, seq, event });
    }

    /// How many events wait.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    /// When the earliest event is due.
    pub(super) fn next_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.at)
    }

    /// The events due before `end`, in order. A queue that swelled (a
    /// member receives every dealer's deal and shares at once) gives back
    /// what it no longer holds: thousands of members kept that room for the
    /// whole run.
    pub(super) fn take_before(&mut self, end: Time) -> Vec<(Time, Event<S>)> {
        let mut out = Vec::new();
        while self.next_time().is_some_and(|t| t < end) {
            if let Some(e) = self.heap.pop() {
                out.push((e.at, e.event));
            }
        }
        let kept = self.heap.len().max(KEPT_ROOM);
        if self.heap.capacity() > 4 * kept {
            self.heap.shrink_to(2 * kept);
        }
        out
    }

    /// Drops every event.
    pub(super) fn clear(&mut self) {
        self.heap.clear();
    }
}

/// A node's persisted state: what a crash-restart resumes from.
pub(super) use crate::disk::SimDisk as Disk;

impl CrashPoint {
    /// The crash point of `crash`, if it has one.
    pub(super) fn of(crash: &crate::config::Crash) -> Option<Self> {
        Some(CrashPoint {
            after_write: crash.after_write?,
            lose_votes: crash.lose_votes,
            down_us: crash
                .restart_ms
                .map(|r| r.saturating_sub(crash.at_ms).saturating_mul(1_000)),
        })
    }
}

/// A crash that strikes between two durable writes of one step
/// ([`crate::config::Crash::after_write`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct CrashPoint {
    /// It strikes right after this many writes of the first step that
    /// makes more.
    pub(super) after_write: u32,
    /// Its record of what the replica signed is lost too.
    pub(super) lose_votes: bool,
    /// The member restarts this long after it strikes (never: `None`).
    pub(super) down_us: Option<u64>,
}

/// Per-node mutable state, handed to a worker for one window.
pub(super) struct Slot<S: Scheme> {
    /// Its pending events.
    pub(super) pending: Pending<S>,
    pub(super) member: Option<Member<S>>,
    pub(super) disk: Disk<S>,
    pub(super) busy_until: Time,
    /// When its last input's computation ended (its durable writes may end later).
    pub(super) cpu_until: Time,
    pub(super) cpu_us: u64,
    pub(super) behaviour: Option<Behaviour>,
    /// Whether this slot runs the honest protocol alone under its identity
    /// (Byzantine members and both instances of a twin do not).
    pub(super) honest: bool,
    /// The member this slot speaks as (a twin's second instance shares it).
    pub(super) identity: u32,
    /// The half of the network this slot is in, for twins' routing.
    pub(super) side: bool,
    /// Whether this slot is one instance of a twin pair.
    pub(super) twinned: bool,
    /// A crash waiting for its point between two durable writes.
    pub(super) armed: Option<CrashPoint>,
}

impl<S: Scheme> Slot<S> {
    /// The slot of an honest member that speaks as `identity`, runs
    /// `member` (or none yet), and has done nothing: its disk empty, its
    /// CPU free, on the first side of the network; `seed`: the seed its
    /// member starts with, on its disk.
    pub(super) fn new(identity: u32, member: Option<Member<S>>, seed: [u8; 32]) -> Self {
        Slot {
            pending: Pending::default(),
            member,
            disk: Disk::new(seed),
            busy_until: Time::ZERO,
            cpu_until: Time::ZERO,
            cpu_us: 0,
            behaviour: None,
            honest: true,
            identity,
            side: false,
            twinned: false,
            armed: None,
        }
    }
}

/// The most recent entries of a node's disk, which a restarted member resumes
/// from (its replica keeps no more).
pub(super) fn recent<S: Scheme>(disk: &[Arc<CommittedEntry<S>>]) -> Vec<Arc<CommittedEntry<S>>> {
    disk[disk.len().saturating_sub(CHAIN_WINDOW)..].to_vec()
}

pub(super) fn member_seed(seed: u64, node: u32) -> [u8; 32] {
    beacon::schedule::index_seed(b"sbft-beacon sim member", seed, node)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Millions of events wait in members' queues at thousands of members
    /// (and each is moved through the merge's deliveries): a rare large
    /// kind must not make every event large.
    #[test]
    fn an_event_is_small() {
        assert!(std::mem::size_of::<Event<beacon::MinSig>>() <= 40);
        assert!(std::mem::size_of::<Event<beacon::MinPk>>() <= 40);
    }
}
