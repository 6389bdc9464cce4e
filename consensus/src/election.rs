//! Unpredictable leader election, pipelined: the `c + 1` collectors of
//! `(height, view 0)` are drawn from the beacon of round `height - k`, and the
//! first of them (rank 0) is the primary of `(height + 1, view 0)`. So the
//! primary of a height is drawn from the beacon of round `height - k - 1`.
//! The rank-0 collector forms the commit proof and the beacon of its height,
//! finalizes it, and proposes the next height at once: the proof and the next
//! PRE-PREPARE leave together, and back-to-back rounds take two message delays
//! (PRE-PREPARE with the previous proof, then SIGN-SHARE to the collector)
//! instead of three (`ARCHITECTURE.md`, "The beacon's critical path").
//!
//! Later views rotate from there: the primary of view `v` is
//! `primary_0 + v (mod n)`, and it is also the first collector (then the next
//! `c` members). Drawing every view at random would let a crashed or silent
//! member hold both roles in several views in a row (with `c = 0`, a view fails
//! with probability `1 - ((n - f) / n)^2` per silent member, and view timeouts
//! double); rotating bounds the failed views of a height by the silent members,
//! as in PBFT.
//!
//! Advance knowledge: whoever aggregates a beacon first (a collector of the
//! previous height, possibly Byzantine) learns the collectors it elects one
//! message delay before everyone else. The primary of a height is known one
//! round earlier than its collectors, as the first collector of the height
//! before (everyone learns it at the same time). A larger lag `k` gives no one
//! more, but lets a deployment precompute (and announces the election `k - 1`
//! rounds ahead to everyone alike).

use beacon::NodeIndex;
use sha2::{Digest, Sha256};

use crate::{Height, View};

/// The primary and collectors of one `(height, view)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Election {
    /// The primary.
    pub primary: NodeIndex,
    /// `c + 1` distinct collectors, in rank order (rank 0 acts first).
    pub collectors: Vec<NodeIndex>,
}

impl Election {
    /// The election of `(height, view)`. `previous` is the beacon randomness of
    /// round `height - k - 1` (it drew the primary of view 0), `randomness`
    /// that of round `height - k` (it draws the collectors of view 0, and the
    /// primary of `height + 1`, who is their rank 0); the genesis seed stands
    /// for rounds before the first. `collectors` is `c + 1`, at most `n`.
    pub fn draw(
        previous: &[u8],
        randomness: &[u8],
        height: Height,
        view: View,
        n: u32,
        collectors: u32,
    ) -> Election {
        let first = Self::primary(previous, height, n);
        let wanted = (collectors as usize).min(n as usize);
        if view > View::ZERO {
            let n64 = u64::from(n);
            let at = |k: u64| NodeIndex(((u64::from(first.0) + view.get() % n64 + k) % n64) as u32);
            return Election {
                primary: at(0),
                collectors: (0..wanted as u64).map(at).collect(),
            };
        }
        let mut chosen = Vec::with_capacity(wanted);
        if wanted > 0 {
            chosen.push(Self::primary(randomness, height.saturating_add(1), n));
        }
        let mut counter = 1u64;
        while chosen.len() < wanted {
            let c = Self::member(randomness, height, counter, n);
            counter += 1;
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        Election {
            primary: first,
            collectors: chosen,
        }
    }

    /// The primary of `(height, view 0)` when `randomness` is the beacon
    /// randomness of round `height - k - 1`.
    pub fn primary(randomness: &[u8], height: Height, n: u32) -> NodeIndex {
        Self::member(randomness, height, 0, n)
    }

    /// The `counter`-th member drawn from `randomness` for `height`.
    fn member(randomness: &[u8], height: Height, counter: u64, n: u32) -> NodeIndex {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/v1/election");
        h.update(randomness);
        h.update(height.get().to_be_bytes());
        h.update(View::ZERO.get().to_be_bytes());
        h.update(counter.to_be_bytes());
        let out: [u8; 32] = h.finalize().into();
        let v = u128::from_be_bytes(out[..16].try_into().expect("16 bytes"));
        NodeIndex((v % u128::from(n.max(1))) as u32)
    }

    /// The collector rank of `who`, if a collector.
    pub fn rank(&self, who: NodeIndex) -> Option<usize> {
        self.collectors.iter().position(|c| *c == who)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elections_are_deterministic_distinct_and_spread() {
        let a = Election::draw(b"seed", b"seed", Height::new(5), View::new(0), 16, 3);
        assert_eq!(
            a,
            Election::draw(b"seed", b"seed", Height::new(5), View::new(0), 16, 3)
        );
        assert_eq!(a.collectors.len(), 3);
        let mut sorted = a.collectors.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 3);
        let mut counts = [0u32; 16];
        for h in 0..1600 {
            counts[Election::draw(b"seed", b"seed", Height::new(h), View::new(0), 16, 1)
                .primary
                .0 as usize] += 1;
        }
        assert!(counts.iter().all(|c| *c > 50), "{counts:?}");
        assert_ne!(
            Election::draw(b"seed", b"seed", Height::new(5), View::new(1), 16, 1),
            a
        );
    }

    #[test]
    fn the_first_collector_is_the_next_primary() {
        let seeds: [&[u8]; 4] = [b"r0", b"r1", b"r2", b"r3"];
        for h in 1..3u64 {
            let here = Election::draw(
                seeds[h as usize - 1],
                seeds[h as usize],
                Height::new(h),
                View::ZERO,
                16,
                3,
            );
            let next = Election::draw(
                seeds[h as usize],
                seeds[h as usize + 1],
                Height::new(h + 1),
                View::ZERO,
                16,
                3,
            );
            assert_eq!(here.collectors[0], next.primary);
            assert_eq!(here.collectors.len(), 3);
            // The primary of a height does not depend on the seed that draws its collectors.
            let other = Election::draw(
                seeds[h as usize - 1],
                b"other",
                Height::new(h),
                View::ZERO,
                16,
                3,
            );
            assert_eq!(other.primary, here.primary);
        }
    }

    #[test]
    fn any_view_number_is_drawn_without_overflow() {
        for view in [u64::MAX, u64::MAX - 1, 1 << 63] {
            let e = Election::draw(
                b"seed",
                b"seed",
                Height::new(u64::MAX),
                View::new(view),
                7,
                3,
            );
            assert_eq!(e.collectors.len(), 3);
            assert!(e.primary.0 < 7);
        }
    }

    #[test]
    fn later_views_rotate_and_the_primary_collects() {
        let n = 7;
        let first = Election::draw(b"seed", b"seed", Height::new(9), View::new(0), n, 2)
            .primary
            .0;
        let mut primaries = Vec::new();
        for v in 1..=n as u64 {
            let e = Election::draw(b"seed", b"seed", Height::new(9), View::new(v), n, 2);
            assert_eq!(e.primary.0, (first + v as u32) % n);
            assert_eq!(e.collectors[0], e.primary);
            assert_eq!(e.collectors[1].0, (e.primary.0 + 1) % n);
            primaries.push(e.primary.0);
        }
        primaries.sort();
        assert_eq!(primaries, (0..n).collect::<Vec<_>>());
    }
}
