//! The one time-ordered event queue of every driver: the simulator's engine,
//! the node's timers, the protocol tests' pump and the DKG harness.
//!
//! [`EventQueue`] owns the pending events and their order: the earliest time
//! first, and among events at one time the one pushed first (FIFO). The order
//! is total and depends only on the pushes, so a seeded driver replays the same
//! run. [`index_seed`] gives each member of a seeded run its own RNG seed.

use crate::Time;
use sha2::{Digest as _, Sha256};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The RNG seed of member `index` in a run seeded with `seed`: SHA-256 of
/// `domain`, `seed` and `index` (each driver names its own domain).
pub fn index_seed(domain: &[u8], seed: u64, index: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(domain);
    h.update(seed.to_be_bytes());
    h.update(index.to_be_bytes());
    h.finalize().into()
}

/// One queued event: its time, the sequence number it was pushed with, and
/// the event (which takes no part in the order).
struct Entry<E> {
    at: Time,
    seq: u64,
    event: E,
}

impl<E> Entry<E> {
    fn key(&self) -> (Time, u64) {
        (self.at, self.seq)
    }
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    /// Reversed: the heap's greatest entry is the earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Events ordered by time, then by the order they were pushed in.
pub struct EventQueue<E> {
    heap: BinaryHeap<Entry<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Queues `event` at `at`, after every event already queued at `at`.
    pub fn push(&mut self, at: Time, event: E) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            event,
        });
    }

    /// The earliest event and its time, without removing it.
    pub fn peek(&self) -> Option<(Time, &E)> {
        self.heap.peek().map(|e| (e.at, &e.event))
    }

    /// The time of the earliest event.
    pub fn next_time(&self) -> Option<Time> {
        self.heap.peek().map(|e| e.at)
    }

    /// Removes and returns the earliest event and its time.
    pub fn pop(&mut self) -> Option<(Time, E)> {
        self.heap.pop().map(|e| (e.at, e.event))
    }

    /// Removes and returns the earliest event if it is due before `end`.
    pub fn pop_before(&mut self, end: Time) -> Option<(Time, E)> {
        if self.next_time()? < end {
            self.pop()
        } else {
            None
        }
    }

    /// Events queued.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is queued.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain<E>(q: &mut EventQueue<E>) -> Vec<(u64, E)> {
        std::iter::from_fn(|| q.pop().map(|(t, e)| (t.0, e))).collect()
    }

    #[test]
    fn earliest_time_first() {
        let mut q = EventQueue::new();
        for (t, e) in [(30, 'c'), (10, 'a'), (20, 'b'), (5, 'z')] {
            q.push(Time(t), e);
        }
        assert_eq!(q.len(), 4);
        assert_eq!(q.peek(), Some((Time(5), &'z')));
        assert_eq!(
            drain(&mut q),
            vec![(5, 'z'), (10, 'a'), (20, 'b'), (30, 'c')]
        );
        assert!(q.is_empty());
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn ties_are_first_in_first_out() {
        let mut q = EventQueue::new();
        q.push(Time(7), 1);
        q.push(Time(3), 2);
        q.push(Time(7), 3);
        q.push(Time(3), 4);
        // Pushed after some pops: still behind what waits at the same time.
        assert_eq!(q.pop(), Some((Time(3), 2)));
        q.push(Time(7), 5);
        q.push(Time(3), 6);
        assert_eq!(drain(&mut q), vec![(3, 4), (3, 6), (7, 1), (7, 3), (7, 5)]);
    }

    #[test]
    fn events_take_no_part_in_the_order() {
        // Events without any order of their own, pushed in reverse.
        struct Unordered(u32);
        let mut q = EventQueue::new();
        for i in (0..100u32).rev() {
            q.push(Time(u64::from(i % 4)), Unordered(i));
        }
        let order: Vec<(u64, u32)> = drain(&mut q).into_iter().map(|(t, e)| (t, e.0)).collect();
        let mut expected: Vec<(u64, u32)> =
            (0..100u32).rev().map(|i| (u64::from(i % 4), i)).collect();
        expected.sort_by_key(|(t, _)| *t); // stable: pushes in order within a time
        assert_eq!(order, expected);
    }

    #[test]
    fn pop_before_stops_at_the_end() {
        let mut q = EventQueue::new();
        for t in [1, 2, 3, 4] {
            q.push(Time(t), t);
        }
        let mut got = Vec::new();
        while let Some((_, e)) = q.pop_before(Time(3)) {
            got.push(e);
        }
        assert_eq!(got, vec![1, 2]);
        assert_eq!(q.next_time(), Some(Time(3)));
    }
}
