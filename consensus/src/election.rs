//! Unpredictable leader election: the primary and the `c + 1` collectors of
//! `(height, view 0)` are drawn from the beacon of round `height - k`. Later
//! views rotate from there: the primary of view `v` is `primary_0 + v (mod n)`,
//! and it is also the first collector (then the next `c` members). Drawing every
//! view at random would let a crashed or silent member hold both roles in
//! several views in a row (with `c = 0`, a view fails with probability
//! `1 - ((n - f) / n)^2` per silent member, and view timeouts double); rotating
//! bounds the failed views of a height by the silent members, as in PBFT.
//!
//! Advance knowledge: whoever aggregates that beacon first (a collector of the
//! previous height, possibly Byzantine) learns the election one message delay
//! before everyone else. That head start is the only advance knowledge anyone has;
//! a larger lag `k` gives no one more, but lets a deployment precompute (and
//! announces the election `k - 1` rounds ahead to everyone alike).

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
    /// Draws the election from `randomness` (SHA-256 of the electing beacon, or
    /// the genesis seed before there is one).
    pub fn draw(
        randomness: &[u8],
        height: Height,
        view: View,
        n: u32,
        collectors: u32,
    ) -> Election {
        let mut counter = 0u64;
        let mut next = || {
            let mut h = Sha256::new();
            h.update(b"sbft-beacon/v1/election");
            h.update(randomness);
            h.update(height.get().to_be_bytes());
            h.update(view.get().to_be_bytes());
            h.update(counter.to_be_bytes());
            counter += 1;
            let out: [u8; 32] = h.finalize().into();
            // 128 bits modulo n: bias below 2^-100.
            let v = u128::from_be_bytes(out[..16].try_into().expect("16 bytes"));
            NodeIndex((v % n as u128) as u32)
        };
        let wanted = (collectors as usize).min(n as usize);
        if view > View::ZERO {
            let first = Self::draw(randomness, height, View::ZERO, n, collectors).primary;
            // `view % n` first: a view number from the network may be anything.
            let n64 = u64::from(n);
            let at = |k: u64| NodeIndex(((u64::from(first.0) + view.get() % n64 + k) % n64) as u32);
            return Election {
                primary: at(0),
                collectors: (0..wanted as u64).map(at).collect(),
            };
        }
        let primary = next();
        let mut chosen = Vec::with_capacity(wanted);
        while chosen.len() < wanted {
            let c = next();
            if !chosen.contains(&c) {
                chosen.push(c);
            }
        }
        Election {
            primary,
            collectors: chosen,
        }
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
        let a = Election::draw(b"seed", Height::new(5), View::new(0), 16, 3);
        assert_eq!(
            a,
            Election::draw(b"seed", Height::new(5), View::new(0), 16, 3)
        );
        assert_eq!(a.collectors.len(), 3);
        let mut sorted = a.collectors.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 3);
        let mut counts = [0u32; 16];
        for h in 0..1600 {
            counts[Election::draw(b"seed", Height::new(h), View::new(0), 16, 1)
                .primary
                .0 as usize] += 1;
        }
        assert!(counts.iter().all(|c| *c > 50), "{counts:?}");
        assert_ne!(
            Election::draw(b"seed", Height::new(5), View::new(1), 16, 1),
            a
        );
    }

    #[test]
    fn any_view_number_is_drawn_without_overflow() {
        for view in [u64::MAX, u64::MAX - 1, 1 << 63] {
            let e = Election::draw(b"seed", Height::new(u64::MAX), View::new(view), 7, 3);
            assert_eq!(e.collectors.len(), 3);
            assert!(e.primary.0 < 7);
        }
    }

    #[test]
    fn later_views_rotate_and_the_primary_collects() {
        let n = 7;
        let first = Election::draw(b"seed", Height::new(9), View::new(0), n, 2)
            .primary
            .0;
        let mut primaries = Vec::new();
        for v in 1..=n as u64 {
            let e = Election::draw(b"seed", Height::new(9), View::new(v), n, 2);
            assert_eq!(e.primary.0, (first + v as u32) % n);
            assert_eq!(e.collectors[0], e.primary);
            assert_eq!(e.collectors[1].0, (e.primary.0 + 1) % n);
            primaries.push(e.primary.0);
        }
        primaries.sort();
        assert_eq!(primaries, (0..n).collect::<Vec<_>>());
    }
}
