//! The committee of dealers: drawn from public randomness fixed after the
//! membership (the genesis seed), and sized so that the DKG's key stays secret
//! and its run succeeds except with probability at most 2^-[`SECURITY_BITS`].
//!
//! # Rule
//! With `f` of the `n` members corrupt (chosen before the seed is known), the
//! number `X` of corrupt dealers in a uniformly drawn committee of `K` follows
//! the hypergeometric distribution `Hyp(n, f, K)`. Let `m(K)` be the smallest `m`
//! with `P[X >= m] <= 2^-40`, and require at least `m(K)` qualified dealers:
//! - safety: a `QUAL` of `m(K)` or more dealers contains an honest one (its
//!   polynomial is secret and uniform) unless `X >= m(K)`;
//! - liveness: the `K - X` honest dealers always qualify, and `K - X >= m(K)`
//!   unless `X > K - m(K)`, which is no more likely than `X >= m(K)` when
//!   `K >= 2 m(K) - 1`.
//!
//! The committee is the smallest `K` (at least the requested size) meeting
//! `K >= 2 m(K) - 1`; when none smaller than `n` does, every member deals and
//! `min_qualified = f + 1` (exact: at most `f` dealers are corrupt).
//! Each bound fails with probability at most 2^-40 (together at most 2^-39).
//! A fixed, public committee such as `i * n / K` is unsafe under this rule: an
//! adversary that chooses whom to corrupt takes all of it.
//!
//! # The worst-case committee
//! [`Committee::worst_case`] needs no draw: any `2f + 1` members, of which
//! `f + 1` must qualify. Whichever `f` members are corrupt, a `QUAL` of `f + 1`
//! holds an honest dealer, and the `f + 1` or more honest dealers qualify. It
//! is exact, not probabilistic, and saves a third of the dealings at
//! `n = 3f + 1`; a change of members uses it for the new members' DKG.

use crate::NodeIndex;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore as _, SeedableRng as _};
use sha2::{Digest as _, Sha256};

/// Failure probability exponent of the committee rule (2^-40).
pub const SECURITY_BITS: u32 = 40;

/// The dealers of a DKG and the fewest of them that must qualify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committee {
    /// The dealers, sorted; empty means every member deals.
    pub dealers: Vec<NodeIndex>,
    /// Fewest qualified dealers for the run to succeed.
    pub min_qualified: u32,
}

impl Committee {
    /// The committee of `n` members with up to `f` corrupt, of at least
    /// `requested` dealers (0: every member), drawn from `seed` (the genesis
    /// seed: public, and fixed after the membership).
    pub fn draw(n: u32, f: u32, requested: u32, seed: &[u8; 32]) -> Committee {
        let everyone = Committee {
            dealers: Vec::new(),
            min_qualified: (f + 1).min(n.max(1)),
        };
        if requested == 0 || requested >= n {
            return everyone;
        }
        let table = LogFactorials::new(n);
        let Some((size, min_qualified)) = (requested..n).find_map(|k| {
            let m = min_qualified(&table, n, f, k);
            (k >= 2 * m - 1).then_some((k, m))
        }) else {
            return everyone;
        };
        Committee {
            dealers: sample(n, size, seed),
            min_qualified,
        }
    }

    /// The worst-case committee of `n` members with up to `f` corrupt (module
    /// header): `2f + 1` dealers, `first` (member indices below `n`, in their
    /// order, duplicates skipped) before the others by index; every member
    /// when `2f + 1 >= n`. The dealers come out sorted.
    pub fn worst_case(n: u32, f: u32, first: &[NodeIndex]) -> Committee {
        let size = f.saturating_mul(2).saturating_add(1);
        if size >= n {
            return Committee::draw(n, f, 0, &[0; 32]);
        }
        let mut dealers: Vec<NodeIndex> = Vec::with_capacity(size as usize);
        let mut taken = vec![false; n as usize];
        let ordered = first.iter().copied().chain((0..n).map(NodeIndex));
        for i in ordered.filter(|i| i.0 < n) {
            if dealers.len() == size as usize {
                break;
            }
            if !std::mem::replace(&mut taken[i.0 as usize], true) {
                dealers.push(i);
            }
        }
        dealers.sort_unstable();
        Committee {
            dealers,
            min_qualified: f + 1,
        }
    }
}

/// `ln(i!)` for `i <= n`.
struct LogFactorials(Vec<f64>);

impl LogFactorials {
    fn new(n: u32) -> Self {
        let mut v = Vec::with_capacity(n as usize + 1);
        let mut acc = 0.0f64;
        v.push(acc);
        for i in 1..=n {
            acc += f64::from(i).ln();
            v.push(acc);
        }
        LogFactorials(v)
    }

    fn ln_choose(&self, a: u32, b: u32) -> f64 {
        self.0[a as usize] - self.0[b as usize] - self.0[(a - b) as usize]
    }
}

/// Smallest `m` with `P[X >= m] <= 2^-SECURITY_BITS`, `X ~ Hyp(n, f, k)`.
fn min_qualified(table: &LogFactorials, n: u32, f: u32, k: u32) -> u32 {
    let bound = -f64::from(SECURITY_BITS) * std::f64::consts::LN_2;
    let low = k.saturating_sub(n - f);
    let high = f.min(k);
    let ln_total = table.ln_choose(n, k);
    // Add the tail from the top down until it exceeds the bound.
    let mut tail = 0.0f64;
    let mut m = high + 1;
    for x in (low..=high).rev() {
        let ln_p = table.ln_choose(f, x) + table.ln_choose(n - f, k - x) - ln_total;
        tail += ln_p.exp();
        if tail.ln() > bound {
            break;
        }
        m = x;
    }
    m.max(1)
}

/// `k` distinct members of `0..n`, sorted, drawn from `seed` (partial
/// Fisher-Yates over a ChaCha20 stream).
fn sample(n: u32, k: u32, seed: &[u8; 32]) -> Vec<NodeIndex> {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/dkg-committee/1");
    h.update(seed);
    let mut rng = ChaCha20Rng::from_seed(h.finalize().into());
    let mut all: Vec<u32> = (0..n).collect();
    for i in 0..k as usize {
        let left = (n as usize - i) as u64;
        // Rejection sampling: uniform in 0..left.
        let zone = u64::MAX - u64::MAX % left;
        let r = loop {
            let r = rng.next_u64();
            if r < zone {
                break r % left;
            }
        };
        all.swap(i, i + r as usize);
    }
    let mut chosen: Vec<NodeIndex> = all[..k as usize].iter().map(|i| NodeIndex(*i)).collect();
    chosen.sort();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worst_case_committee_is_two_f_plus_one_preferred_first() {
        let c = Committee::worst_case(96, 31, &[NodeIndex(90), NodeIndex(5), NodeIndex(90)]);
        assert_eq!(c.dealers.len(), 63);
        assert_eq!(c.min_qualified, 32);
        assert!(c.dealers.contains(&NodeIndex(90)));
        assert!(c.dealers.windows(2).all(|w| w[0] < w[1]));
        // Whichever f dealers are corrupt, f + 1 honest ones remain, and any
        // f + 1 qualified hold an honest one.
        assert!(c.dealers.len() as u32 - 31 >= c.min_qualified);
        assert!(c.min_qualified > 31);
        // Out-of-range preferences are skipped; small groups: everyone deals.
        let c = Committee::worst_case(7, 2, &[NodeIndex(9), NodeIndex(6)]);
        assert_eq!(c.dealers.len(), 5);
        assert!(c.dealers.contains(&NodeIndex(6)));
        let c = Committee::worst_case(4, 1, &[]);
        assert_eq!(c.dealers, vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)]);
        assert_eq!(c.min_qualified, 2);
        assert_eq!(Committee::worst_case(3, 1, &[]).dealers, Vec::new());
    }

    #[test]
    fn the_committee_is_drawn_from_the_seed_not_fixed() {
        let a = Committee::draw(4096, 1364, 64, &[1; 32]);
        let b = Committee::draw(4096, 1364, 64, &[2; 32]);
        assert_eq!(a, Committee::draw(4096, 1364, 64, &[1; 32]));
        assert_ne!(a.dealers, b.dealers);
        let k = a.dealers.len() as u64;
        let fixed: Vec<NodeIndex> = (0..k).map(|i| NodeIndex((i * 4096 / k) as u32)).collect();
        assert_ne!(a.dealers, fixed);
        assert!(a.dealers.windows(2).all(|w| w[0] < w[1]));
        assert!(a.dealers.last().unwrap().0 < 4096);
    }

    #[test]
    fn sizes_follow_the_hypergeometric_rule() {
        // A third corrupt: 64 dealers are not enough, the rule raises the size.
        let c = Committee::draw(4096, 1364, 64, &[1; 32]);
        let k = c.dealers.len() as u32;
        assert!(k > 64 && k < 4096, "k = {k}");
        assert!(k + 1 >= 2 * c.min_qualified);
        let table = LogFactorials::new(4096);
        assert_eq!(c.min_qualified, min_qualified(&table, 4096, 1364, k));
        // Fewer corrupt members, smaller committee.
        let small = Committee::draw(4096, 100, 1, &[1; 32]);
        assert!(small.dealers.len() < 64, "{}", small.dealers.len());
        // No corruption: one dealer suffices.
        assert_eq!(Committee::draw(100, 0, 1, &[1; 32]).min_qualified, 1);
        // Small networks: 11 of 16 with f = 5 deal, 6 must qualify.
        let small = Committee::draw(16, 5, 4, &[1; 32]);
        assert_eq!((small.dealers.len(), small.min_qualified), (11, 6));
        let all = Committee::draw(16, 5, 0, &[1; 32]);
        assert_eq!(
            all,
            Committee {
                dealers: Vec::new(),
                min_qualified: 6
            }
        );
        for (n, f) in [(4096, 1364), (4096, 100), (1000, 333), (64, 20)] {
            let c = Committee::draw(n, f, 1, &[1; 32]);
            eprintln!(
                "n = {n}, f = {f}: K = {}, min_qualified = {}",
                c.dealers.len(),
                c.min_qualified
            );
        }
    }

    #[test]
    fn tail_bound_matches_exact_small_cases() {
        // n = 10, f = 3, k = 10: X = 3 surely, so m = 4.
        let t = LogFactorials::new(10);
        assert_eq!(min_qualified(&t, 10, 3, 10), 4);
        // k = 1: P[X >= 1] = 0.3 > 2^-40, so m = 2 (X <= 1).
        assert_eq!(min_qualified(&t, 10, 3, 1), 2);
    }
}
