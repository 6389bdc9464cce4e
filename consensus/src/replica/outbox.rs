//! Where handlers put what they produce: outputs for the driver, and messages
//! for this replica itself. A message to itself (a collector's own vote, a
//! primary's own proposal) and a replay of a buffered message go through the
//! loopback queue, which [`super::Replica::handle`] drains through the same
//! dispatcher as the network's messages: no handler calls another.

use super::interface::{Event, Evidence, EvidenceKind, Output, Timer};
use crate::messages::Message;
use crate::Height;
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme, Time};
use std::collections::VecDeque;

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

/// Outputs and the loopback queue of one `handle` call.
pub(super) struct Outbox<S: Scheme> {
    outputs: Vec<Output<S>>,
    loopback: VecDeque<(Origin, Message<S>)>,
    /// How many outputs were queued when the vote record first changed in
    /// this call: those may leave before the record is durable.
    unrecorded: Option<usize>,
}

impl<S: Scheme> Outbox<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Outbox {
            outputs: Vec::new(),
            loopback: VecDeque::new(),
            unrecorded: None,
        }
    }

    /// Send `message` to `to`.
    pub(super) fn send(&mut self, to: NodeIndex, message: Message<S>) {
        self.outputs
            .push(Output::Effect(Effect::Send { to, message }));
    }

    /// Send `message` to every other replica.
    pub(super) fn broadcast(&mut self, message: Message<S>) {
        self.outputs
            .push(Output::Effect(Effect::Broadcast(message)));
    }

    /// Fire `timer` at `at`.
    pub(super) fn timer(&mut self, at: Time, timer: Timer) {
        self.outputs
            .push(Output::Effect(Effect::SetTimer { at, timer }));
    }

    /// Ask the driver to answer a sync request from its store.
    pub(super) fn sync_from_store(&mut self, to: NodeIndex, from_height: Height) {
        self.outputs.push(Output::SyncFromStore { to, from_height });
    }

    /// Report `event`.
    pub(super) fn event(&mut self, event: Event<S>) {
        self.outputs.push(Output::Event(event));
    }

    /// Report misbehaviour of `culprit` at `height`.
    pub(super) fn evidence(&mut self, culprit: NodeIndex, height: Height, kind: EvidenceKind) {
        self.event(Event::Evidence(Evidence {
            culprit,
            height,
            kind,
        }));
    }

    /// Deliver `message` to this replica (`me`) after the current one.
    pub(super) fn loop_back(&mut self, me: NodeIndex, message: Message<S>) {
        let origin = Origin {
            from: me,
            local: true,
        };
        self.loopback.push_back((origin, message));
    }

    /// Deliver a buffered message from `from` again, after the current one.
    pub(super) fn replay(&mut self, from: NodeIndex, message: Message<S>) {
        self.loopback.push_back((Origin::peer(from), message));
    }

    /// The next message of the loopback queue.
    pub(super) fn next_message(&mut self) -> Option<(Origin, Message<S>)> {
        self.loopback.pop_front()
    }

    /// The vote record is about to change: what is queued from here on may
    /// carry what it records, and waits until the record is durable.
    pub(super) fn vote_record_changes(&mut self) {
        self.unrecorded.get_or_insert(self.outputs.len());
    }

    /// The outputs so far (the loopback queue is empty when `handle` returns),
    /// and how many of them were queued before the vote record changed.
    pub(super) fn take(&mut self) -> (Vec<Output<S>>, usize) {
        let before = self.unrecorded.take().unwrap_or(0);
        (std::mem::take(&mut self.outputs), before)
    }
}
