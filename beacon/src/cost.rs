//! Counts of the expensive operations a thread performed, for the simulator's
//! compute-cost model.
//!
//! Every pairing, hash to the curve, scalar multiplication and multi-scalar
//! multiplication in [`crate::curve`] bumps a thread-local counter. A driver reads
//! the delta around one call into a state machine ([`take`]) and converts it into
//! virtual CPU time; the protocol code is unaware of it. [`charge`] adds counts for
//! work a host-side cache did once on behalf of many nodes ([`crate::memo`]).
//!
//! Real nodes also want the wall time of the two heavy kinds of work:
//! [`take_timings`] returns the nanoseconds this thread spent in multi-scalar
//! multiplications and in pairing checks since the last call.

use std::cell::Cell;
use std::ops::AddAssign;

/// Number of size buckets for multi-scalar multiplications (bucket `b` holds sizes
/// in `[2^b, 2^(b+1))`).
pub const MSM_BUCKETS: usize = 33;

/// Operation counts by kind (G1 and G2 separately where the cost differs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpCounts {
    /// Miller loops (one per pairing in a product).
    pub miller_loops: u64,
    /// Final exponentiations (one per pairing-product check).
    pub final_exps: u64,
    /// Hashes to G1.
    pub hash_g1: u64,
    /// Hashes to G2.
    pub hash_g2: u64,
    /// Single scalar multiplications in G1.
    pub mul_g1: u64,
    /// Single scalar multiplications in G2.
    pub mul_g2: u64,
    /// Point additions in G1 where they are the bulk of the work: adding up
    /// the keys of a multi-signature's signers ([`crate::multisig`]).
    pub add_g1: u64,
    /// Point additions in G2 likewise (adding up votes into a certificate).
    pub add_g2: u64,
    /// MSM points in G1 by size bucket (`[b]` for sizes in `[2^b, 2^(b+1))`).
    pub msm_g1_points: [u64; MSM_BUCKETS],
    /// MSM points in G2 by size bucket.
    pub msm_g2_points: [u64; MSM_BUCKETS],
}

impl Default for OpCounts {
    fn default() -> Self {
        OpCounts {
            miller_loops: 0,
            final_exps: 0,
            hash_g1: 0,
            hash_g2: 0,
            mul_g1: 0,
            mul_g2: 0,
            add_g1: 0,
            add_g2: 0,
            msm_g1_points: [0; MSM_BUCKETS],
            msm_g2_points: [0; MSM_BUCKETS],
        }
    }
}

impl OpCounts {
    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == OpCounts::default()
    }
}

impl AddAssign<&OpCounts> for OpCounts {
    fn add_assign(&mut self, o: &OpCounts) {
        self.miller_loops += o.miller_loops;
        self.final_exps += o.final_exps;
        self.hash_g1 += o.hash_g1;
        self.hash_g2 += o.hash_g2;
        self.mul_g1 += o.mul_g1;
        self.mul_g2 += o.mul_g2;
        self.add_g1 += o.add_g1;
        self.add_g2 += o.add_g2;
        for b in 0..MSM_BUCKETS {
            self.msm_g1_points[b] += o.msm_g1_points[b];
            self.msm_g2_points[b] += o.msm_g2_points[b];
        }
    }
}

thread_local! {
    static COUNTS: Cell<OpCounts> = Cell::new(OpCounts::default());
    static TIMINGS: Cell<Timings> = Cell::new(Timings::default());
    static ENCODED: Cell<EncodedPoints> = Cell::new(EncodedPoints::default());
}

/// Curve points a thread encoded, by group: what the receiver of those bytes
/// decodes, each point decompressed and checked to be in its subgroup (the
/// bulk of decoding a protocol message; other bytes are copied).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncodedPoints {
    /// Points of G1.
    pub g1: u32,
    /// Points of G2.
    pub g2: u32,
}

/// Counts one encoded G1 (`g2 == false`) or G2 point.
pub(crate) fn encoded_point(g2: bool) {
    ENCODED.with(|c| {
        let mut v = c.get();
        if g2 {
            v.g2 = v.g2.saturating_add(1);
        } else {
            v.g1 = v.g1.saturating_add(1);
        }
        c.set(v);
    });
}

/// The points this thread encoded since the last call, and resets them: a
/// simulator reads them around encoding one message.
pub fn take_encoded() -> EncodedPoints {
    ENCODED.with(|c| c.replace(EncodedPoints::default()))
}

/// Wall time a thread spent in the heavy operations, in nanoseconds: what a
/// node's critical path splits its handling CPU into (sign, verify, combine).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// In multi-scalar multiplications (aggregation, batch verification sums:
    /// combining shares).
    pub msm_ns: u64,
    /// In pairing-product checks (verification).
    pub pairing_ns: u64,
    /// In hashes to the curve (signing, and the message of a verification).
    pub hash_ns: u64,
    /// In single scalar multiplications (signing with a share).
    pub mul_ns: u64,
}

/// The heavy operations [`Timings`] keeps apart.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Timed {
    Msm,
    Pairing,
    Hash,
    Mul,
}

/// Runs `f`, adding its wall time to this thread's total of `kind`.
pub(crate) fn timed<T>(kind: Timed, f: impl FnOnce() -> T) -> T {
    // Named exception: measures the cost of cryptography for metrics and the
    // cost model; protocol decisions never read it.
    #[allow(clippy::disallowed_methods)]
    let start = std::time::Instant::now();
    let out = f();
    let ns = start.elapsed().as_nanos() as u64;
    TIMINGS.with(|t| {
        let mut v = t.get();
        match kind {
            Timed::Msm => v.msm_ns += ns,
            Timed::Pairing => v.pairing_ns += ns,
            Timed::Hash => v.hash_ns += ns,
            Timed::Mul => v.mul_ns += ns,
        }
        t.set(v);
    });
    out
}

/// Returns this thread's timings and resets them to zero.
pub fn take_timings() -> Timings {
    TIMINGS.with(|t| t.replace(Timings::default()))
}

/// The group an operation ran in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Group {
    G1,
    G2,
}

pub(crate) fn record(f: impl FnOnce(&mut OpCounts)) {
    COUNTS.with(|c| {
        let mut v = c.get();
        f(&mut v);
        c.set(v);
    });
}

pub(crate) fn record_msm(group: Group, points: usize) {
    let bucket = (usize::BITS - 1 - points.max(1).leading_zeros()) as usize;
    record(|c| match group {
        Group::G1 => {
            c.msm_g1_points[bucket] += points as u64;
        }
        Group::G2 => {
            c.msm_g2_points[bucket] += points as u64;
        }
    });
}

/// Counts `count` point additions in the group of `P` (48-byte points are
/// G1's): the sums of multi-signatures, where additions are the work.
pub(crate) fn record_adds<P: crate::curve::Point>(count: usize) {
    let g2 = P::generator().to_bytes().len() > 48;
    record(|c| {
        if g2 {
            c.add_g2 += count as u64;
        } else {
            c.add_g1 += count as u64;
        }
    });
}

/// Returns this thread's counts and resets them to zero.
pub fn take() -> OpCounts {
    COUNTS.with(|c| c.replace(OpCounts::default()))
}

/// Adds `counts` to this thread's counts (work done once on behalf of this thread).
pub fn charge(counts: &OpCounts) {
    record(|c| *c += counts);
}
