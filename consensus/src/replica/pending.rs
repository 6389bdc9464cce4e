//! Messages that arrive too early wait here, bounded, and are replayed through
//! the loopback when their time comes: messages of later heights (replayed on
//! entering that height), of later views (replayed when a NEW-VIEW is
//! accepted), and, on a paced chain, proposals that arrive before the round's
//! signing time (replayed by the signing timer; signing them earlier would
//! release our beacon share early).

use crate::messages::Message;
use crate::{Height, View};
use beacon::{NodeIndex, Scheme};
use std::collections::{BTreeMap, BTreeSet};

/// Most messages buffered for future heights, and for future views (each
/// shared fairly among senders: [`FairBuffer`]).
pub const FUTURE_LIMIT: usize = 20_000;
/// Furthest height ahead that is buffered.
pub const FUTURE_HEIGHTS: u64 = 64;
/// Most proposals held per sender until a paced round's signing time: a
/// primary's PRE-PREPARE and NEW-VIEWs of a few views. Per sender, so that the
/// early proposals of others never leave no room for the primary's (honest
/// primaries propose before the round's time), and at most `n` times this.
const HELD_PER_SENDER: usize = 4;

/// Messages kept until they are due (`K`: the height or view they wait for),
/// at most [`FUTURE_LIMIT`] in all and shared fairly among their senders: when
/// the buffer is full, a message from a sender that holds fewer than the
/// sender holding most takes the place of that sender's message due last. So a
/// replica that floods messages of later heights fills only its own share, and
/// every other sender keeps at least `FUTURE_LIMIT / n` places (before, one
/// Byzantine replica's flood left no room for the next primary's proposal).
struct FairBuffer<K: Ord + Copy, S: Scheme> {
    by_key: BTreeMap<K, Vec<(NodeIndex, Message<S>)>>,
    count: usize,
    /// How many of the messages kept came from each sender.
    by_sender: BTreeMap<NodeIndex, usize>,
    /// The same counts ordered by count, then sender: the last is the sender
    /// holding most (the highest index among equals), found in `O(log n)`
    /// when a full buffer must make room.
    by_count: BTreeSet<(usize, NodeIndex)>,
}

impl<K: Ord + Copy, S: Scheme> FairBuffer<K, S> {
    fn new() -> Self {
        FairBuffer {
            by_key: BTreeMap::new(),
            count: 0,
            by_sender: BTreeMap::new(),
            by_count: BTreeSet::new(),
        }
    }

    /// Moves `from`'s count by one up (`true`) or down, in both indexes.
    fn recount(&mut self, from: NodeIndex, up: bool) {
        let old = self.by_sender.get(&from).copied().unwrap_or(0);
        let new = if up { old + 1 } else { old.saturating_sub(1) };
        self.by_count.remove(&(old, from));
        if new == 0 {
            self.by_sender.remove(&from);
        } else {
            self.by_sender.insert(from, new);
            self.by_count.insert((new, from));
        }
    }

    /// Keeps `message` from `from`, due at `key`, if there is room or it can be
    /// made fairly.
    fn keep(&mut self, key: K, from: NodeIndex, message: Message<S>) {
        if self.count >= FUTURE_LIMIT {
            let mine = self.by_sender.get(&from).copied().unwrap_or(0);
            let Some(&(most, heaviest)) = self.by_count.last() else {
                return;
            };
            // `from` is among those holding most already: its message waits no more.
            if most <= mine + 1 || !self.evict_last_of(heaviest) {
                return;
            }
        }
        self.by_key.entry(key).or_default().push((from, message));
        self.count += 1;
        self.recount(from, true);
    }

    /// Drops the message of `sender` due last; whether there was one.
    fn evict_last_of(&mut self, sender: NodeIndex) -> bool {
        let found = self.by_key.iter_mut().rev().find_map(|(key, kept)| {
            let i = kept.iter().rposition(|(f, _)| *f == sender)?;
            kept.remove(i);
            Some((*key, kept.is_empty()))
        });
        let Some((key, emptied)) = found else {
            return false;
        };
        if emptied {
            self.by_key.remove(&key);
        }
        self.uncount([sender]);
        true
    }

    /// Takes the counts of `senders`' messages off.
    fn uncount(&mut self, senders: impl IntoIterator<Item = NodeIndex>) {
        for from in senders {
            self.count -= 1;
            self.recount(from, false);
        }
    }

    /// The messages due at `key`, in arrival order.
    fn take(&mut self, key: K) -> Vec<(NodeIndex, Message<S>)> {
        let taken = self.by_key.remove(&key).unwrap_or_default();
        self.uncount(taken.iter().map(|(from, _)| *from));
        taken
    }

    /// Every message kept, in order of key then arrival.
    fn take_all(&mut self) -> Vec<(NodeIndex, Message<S>)> {
        let taken: Vec<_> = std::mem::take(&mut self.by_key)
            .into_values()
            .flatten()
            .collect();
        self.count = 0;
        self.by_sender.clear();
        self.by_count.clear();
        taken
    }
}

/// Messages of later heights (kept across heights).
pub(super) struct FutureHeights<S: Scheme> {
    kept: FairBuffer<Height, S>,
}

impl<S: Scheme> FutureHeights<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        FutureHeights {
            kept: FairBuffer::new(),
        }
    }

    /// Keeps `message` of height `h` (the current height is `current`) if it is
    /// near enough and there is room for its sender.
    pub(super) fn keep(
        &mut self,
        current: Height,
        h: Height,
        from: NodeIndex,
        message: Message<S>,
    ) {
        if h <= current.saturating_add(FUTURE_HEIGHTS) {
            self.kept.keep(h, from, message);
        }
    }

    /// How many distinct replicas sent the messages of later heights kept.
    pub(super) fn senders(&self) -> usize {
        self.kept.by_sender.len()
    }

    /// The messages of height `h`, in arrival order.
    pub(super) fn take(&mut self, h: Height) -> Vec<(NodeIndex, Message<S>)> {
        self.kept.take(h)
    }

    /// The `k`-th (modulo their number) of the distinct senders of messages of
    /// later heights, in order of height then arrival: replicas that claim to be
    /// ahead of us. Asking them in turn reaches an honest one within `f + 1`
    /// requests; always asking the first let a Byzantine replica that sent an
    /// early message and never answers stall us forever.
    pub(super) fn sender(&self, k: usize) -> Option<NodeIndex> {
        let mut seen = BTreeSet::new();
        let senders: Vec<NodeIndex> = self
            .kept
            .by_key
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
    views: FairBuffer<View, S>,
    held: Vec<(NodeIndex, Message<S>)>,
}

impl<S: Scheme> Waiting<S> {
    /// Empty.
    pub(super) fn new() -> Self {
        Waiting {
            views: FairBuffer::new(),
            held: Vec::new(),
        }
    }

    /// Keeps a message of the later view `view`, if there is room for its
    /// sender.
    pub(super) fn keep_for_view(&mut self, view: View, from: NodeIndex, message: Message<S>) {
        self.views.keep(view, from, message);
    }

    /// The messages kept for later views, in order of view then arrival.
    pub(super) fn take_views(&mut self) -> Vec<(NodeIndex, Message<S>)> {
        self.views.take_all()
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

    fn junk(h: u64) -> Message<MinSig> {
        Message::SyncRequest {
            from_height: Height::new(h),
        }
    }

    /// A sender flooding the buffer of later heights takes room from the
    /// sender holding most, never from those holding less: replicas that sent
    /// a few messages keep them all, and the flood stays within the limit.
    #[test]
    fn a_flood_of_later_heights_evicts_only_the_flooders_own_messages() {
        let mut future = FutureHeights::<MinSig>::new();
        let now = Height::new(1);
        for i in 0..3 {
            for h in 2..12 {
                future.keep(now, Height::new(h), NodeIndex(i), junk(h));
            }
        }
        for k in 0..3 * FUTURE_LIMIT as u64 {
            future.keep(now, Height::new(2 + k % 60), NodeIndex(7), junk(k));
        }
        assert_eq!(future.kept.count, FUTURE_LIMIT);
        for i in 0..3 {
            assert_eq!(future.kept.by_sender[&NodeIndex(i)], 10);
        }
        // A newcomer still gets in, at the flooder's expense (its message due
        // last goes).
        future.keep(now, Height::new(2), NodeIndex(9), junk(2));
        assert!(future
            .take(Height::new(2))
            .iter()
            .any(|(f, _)| *f == NodeIndex(9)));
        let last = *future.kept.by_key.keys().next_back().unwrap();
        assert!(last <= Height::new(61));
        // Counts stay consistent with what is kept.
        let kept: usize = future.kept.by_key.values().map(Vec::len).sum();
        assert_eq!(kept, future.kept.count);
        assert_eq!(future.kept.by_sender.values().sum::<usize>(), kept);
        // The ordered index holds the same counts.
        let by_count: BTreeSet<(usize, NodeIndex)> = future
            .kept
            .by_sender
            .iter()
            .map(|(s, c)| (*c, *s))
            .collect();
        assert_eq!(by_count, future.kept.by_count);
    }

    /// Messages of later views are shared fairly the same way: a flood of one
    /// sender leaves room for the new primary's PRE-PREPARE.
    #[test]
    fn a_flood_of_later_views_leaves_room_for_other_senders() {
        let mut waiting = Waiting::<MinSig>::new();
        for k in 0..FUTURE_LIMIT as u64 + 100 {
            waiting.keep_for_view(View::new(2 + k % 100), NodeIndex(3), junk(1));
        }
        waiting.keep_for_view(View::new(1), NodeIndex(0), junk(1));
        let views = waiting.take_views();
        assert_eq!(views.len(), FUTURE_LIMIT);
        assert_eq!(views[0].0, NodeIndex(0), "in order of view: view 1 first");
        assert!(waiting.take_views().is_empty());
    }
}
