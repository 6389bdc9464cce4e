//! Where handlers put what they produce: outputs for the driver, and messages
//! for this replica itself, in the workspace's one [`Queue`]
//! ([`beacon::effect::Outbox`], drained in its one order). A message to
//! itself (a collector's own vote, a primary's own proposal) and a replay of
//! a buffered message are looped back, and [`super::Replica::handle`] drains
//! them through the same dispatcher as the network's messages: no handler
//! calls another. This file only names the replica's pushes.

use super::interface::{Event, Evidence, EvidenceKind, Output, Timer};
use crate::messages::Message;
use crate::Height;
use beacon::effect::{Effect, Outbox as Queue};
use beacon::{NodeIndex, Scheme, Time};

/// Where a dispatched message comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Origin {
    /// The sender (this replica for its own messages).
    pub from: NodeIndex,
    /// Whether this replica produced it (its proofs need no checking); a
    /// message from the network, replayed or not, is never local, even when
    /// it names this replica as its sender (a twin's).
    pub local: bool,
}

impl Origin {
    /// A message from the network.
    pub(super) fn peer(from: NodeIndex) -> Self {
        Origin { from, local: false }
    }
}

/// Outputs and the loopback of one `handle` call.
pub(super) struct Outbox<S: Scheme> {
    queue: Queue<Output<S>, (Origin, Message<S>)>,
}

impl<S: Scheme> Outbox<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Outbox {
            queue: Queue::new(),
        }
    }

    /// Send `message` to `to`.
    pub(super) fn send(&mut self, to: NodeIndex, message: Message<S>) {
        self.queue
            .push(Output::Effect(Effect::Send { to, message }));
    }

    /// Send `message` to every other replica.
    pub(super) fn broadcast(&mut self, message: Message<S>) {
        self.queue.push(Output::Effect(Effect::Broadcast(message)));
    }

    /// Fire `timer` at `at`.
    pub(super) fn timer(&mut self, at: Time, timer: Timer) {
        self.queue
            .push(Output::Effect(Effect::SetTimer { at, timer }));
    }

    /// Ask the driver to answer a sync request from its store.
    pub(super) fn sync_from_store(&mut self, to: NodeIndex, from_height: Height) {
        self.queue.push(Output::SyncFromStore { to, from_height });
    }

    /// Report `event`.
    pub(super) fn event(&mut self, event: Event<S>) {
        self.queue.push(Output::Event(event));
    }

    /// Report misbehaviour of `culprit` at `height`.
    pub(super) fn evidence(&mut self, culprit: NodeIndex, height: Height, kind: EvidenceKind) {
        self.event(Event::Evidence(Evidence {
            culprit,
            height,
            kind,
        }));
    }

    /// Deliver `message` to this replica (`me`), as its next step.
    pub(super) fn loop_back(&mut self, me: NodeIndex, message: Message<S>) {
        let origin = Origin {
            from: me,
            local: true,
        };
        self.queue.loop_back((origin, message));
    }

    /// Deliver a buffered message from `from` again, as its next step.
    pub(super) fn replay(&mut self, from: NodeIndex, message: Message<S>) {
        self.queue.loop_back((Origin::peer(from), message));
    }

    /// The next message looped back.
    pub(super) fn next_message(&mut self) -> Option<(Origin, Message<S>)> {
        self.queue.next_input()
    }

    /// The vote record is about to change: what is queued from here on may
    /// carry what it records, and waits until the record is durable.
    pub(super) fn vote_record_changes(&mut self) {
        self.queue.mark();
    }

    /// The outputs so far (nothing is looped back when `handle` returns),
    /// and how many lead them that were queued before the vote record
    /// changed.
    pub(super) fn take(&mut self) -> (Vec<Output<S>>, usize) {
        let (outputs, before) = self.queue.take_marked();
        (outputs, before.unwrap_or(0))
    }
}
