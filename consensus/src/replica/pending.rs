//! Messages that arrive too early wait here, bounded, and are replayed through
//! the loopback when their time comes: messages of later heights (replayed on
//! entering that height), of later views (replayed when a NEW-VIEW is
//! accepted), and, on a paced chain, proposals that arrive before the round's
//! signing time (replayed by the signing timer; signing them earlier would
//! release our beacon share early).

use crate::messages::Message;
use crate::Height;
use beacon::{NodeIndex, Scheme};
use std::collections::{BTreeMap, BTreeSet};

/// Most messages buffered for future heights, and for future views.
pub(super) const FUTURE_LIMIT: usize = 20_000;
/// Furthest height ahead that is buffered.
pub(super) const FUTURE_HEIGHTS: u64 = 64;
/// Most proposals held per sender until a paced round's signing time: a
/// primary's PRE-PREPARE and NEW-VIEWs of a few views. Per sender, so that the
/// early proposals of others never leave no room for the primary's (honest
/// primaries propose before the round's time), and at most `n` times this.
const HELD_PER_SENDER: usize = 4;

/// Messages of later heights (kept across heights).
pub(super) struct FutureHeights<S: Scheme> {
    by_height: BTreeMap<Height, Vec<(NodeIndex, Message<S>)>>,
    count: usize,
    /// How many of the messages kept came from each sender.
    by_sender: BTreeMap<NodeIndex, usize>,
}

impl<S: Scheme> FutureHeights<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        FutureHeights {
            by_height: BTreeMap::new(),
            count: 0,
            by_sender: BTreeMap::new(),
        }
    }

    /// Keeps `message` of height `h` (the current height is `current`) if it is
    /// near enough and there is room.
    pub(super) fn keep(
        &mut self,
        current: Height,
        h: Height,
        from: NodeIndex,
        message: Message<S>,
    ) {
        if h <= current.saturating_add(FUTURE_HEIGHTS) && self.count < FUTURE_LIMIT {
            self.by_height.entry(h).or_default().push((from, message));
            self.count += 1;
            *self.by_sender.entry(from).or_default() += 1;
        }
    }

    /// How many distinct replicas sent the messages of later heights kept.
    pub(super) fn senders(&self) -> usize {
        self.by_sender.len()
    }

    /// The messages of height `h`, in arrival order.
    pub(super) fn take(&mut self, h: Height) -> Vec<(NodeIndex, Message<S>)> {
        let taken = self.by_height.remove(&h).unwrap_or_default();
        self.count -= taken.len();
        for (from, _) in &taken {
            if let Some(c) = self.by_sender.get_mut(from) {
                *c -= 1;
                if *c == 0 {
                    self.by_sender.remove(from);
                }
            }
        }
        taken
    }

    /// The `k`-th (modulo their number) of the distinct senders of messages of
    /// later heights, in order of height then arrival: replicas that claim to be
    /// ahead of us. Asking them in turn reaches an honest one within `f + 1`
    /// requests; always asking the first let a Byzantine replica that sent an
    /// early message and never answers stall us forever.
    pub(super) fn sender(&self, k: usize) -> Option<NodeIndex> {
        let mut seen = BTreeSet::new();
        let senders: Vec<NodeIndex> = self
            .by_height
            .values()
            .flatten()
            .map(|(from, _)| *from)
            .filter(|from| seen.insert(*from))
            .collect();
        (!senders.is_empty()).then(|| senders[k % senders.len()])
    }
}

/// Messages of the current height that wait for a later view or the release
/// time.
pub(super) struct Waiting<S: Scheme> {
    views: Vec<(NodeIndex, Message<S>)>,
    held: Vec<(NodeIndex, Message<S>)>,
}

impl<S: Scheme> Waiting<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Waiting {
            views: Vec::new(),
            held: Vec::new(),
        }
    }

    /// Keeps a message of a later view, if there is room.
    pub(super) fn keep_for_view(&mut self, from: NodeIndex, message: Message<S>) {
        if self.views.len() < FUTURE_LIMIT {
            self.views.push((from, message));
        }
    }

    /// The messages kept for later views.
    pub(super) fn take_views(&mut self) -> Vec<(NodeIndex, Message<S>)> {
        std::mem::take(&mut self.views)
    }

    /// Holds a proposal until the signing time, if `from` has room.
    pub(super) fn hold(&mut self, from: NodeIndex, message: Message<S>) {
        if self.held.iter().filter(|(f, _)| *f == from).count() < HELD_PER_SENDER {
            self.held.push((from, message));
        }
    }

    /// The proposals held.
    pub(super) fn take_held(&mut self) -> Vec<(NodeIndex, Message<S>)> {
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::MinSig;

    /// A replica flooding early proposals fills its own room only: the
    /// primary's proposal, arriving later, is still held (it was dropped once
    /// 64 proposals of anyone were held).
    #[test]
    fn early_proposals_of_one_sender_leave_room_for_the_primary() {
        let mut waiting = Waiting::<MinSig>::new();
        let junk = || Message::SyncRequest {
            from_height: Height::new(1),
        };
        for _ in 0..1_000 {
            waiting.hold(NodeIndex(3), junk());
        }
        waiting.hold(NodeIndex(0), junk());
        let held = waiting.take_held();
        assert_eq!(
            held.iter().filter(|(f, _)| *f == NodeIndex(3)).count(),
            HELD_PER_SENDER
        );
        assert!(held.iter().any(|(f, _)| *f == NodeIndex(0)));
    }
}
