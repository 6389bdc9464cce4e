//! Polynomials in the exponent: checking a dealt share against its dealer's
//! Feldman commitments, and evaluating committed polynomials at every member
//! (an FFT over the group).

use crate::curve::Point;
use crate::dkg::Deal;
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::poly::log2_ceil;
use crate::scheme::Scheme;
use crate::NodeIndex;

/// Whether `shares` (one per threshold) of member `j` match the dealer's commitments:
/// `g^{s_k} == sum_i C_{k,i} x_j^i` (one MSM per threshold), with every
/// commitment in the prime-order subgroup. (Commitments are decoded on the curve
/// only; off the subgroup an MSM's result depends on how blst splits it, which
/// can differ between machines, so such a deal never matches.)
pub fn share_matches<S: Scheme>(
    domain: &SignerDomain,
    deal: &Deal<S>,
    j: NodeIndex,
    shares: &[Scalar],
) -> bool {
    let Ok(x) = domain.point(j) else { return false };
    if !deal.commitments_in_group() {
        return false;
    }
    deal.commitments.rows().zip(shares).all(|(c, s)| {
        S::PublicKey::msm_affine(c, &powers(x, c.len())) == S::PublicKey::generator().mul(s)
    })
}

/// `1, x, x^2, ..., x^(len - 1)`: the weights that evaluate a committed
/// polynomial of `len` coefficients at `x` in one MSM.
pub(crate) fn powers(x: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = Vec::with_capacity(len);
    let mut power = Scalar::one();
    for _ in 0..len {
        out.push(power);
        power *= x;
    }
    out
}

/// Evaluates the polynomial with coefficients `g^{a_i}` "in the exponent" at every
/// member's point: an FFT over the group (`(N/2) log N` scalar multiplications),
/// instead of `n` separate evaluations. From `N = 64` each stage's butterflies
/// are split over [`crate::parallel::threads`] threads.
pub fn evaluate_in_exponent<P: Point>(coefficients: &[P], domain: &SignerDomain) -> Vec<P> {
    let size = domain.size();
    let mut values = vec![P::identity(); size];
    for (i, c) in coefficients.iter().enumerate() {
        values[i % size] = values[i % size].add(c);
    }
    let log = log2_ceil(size);
    let fft = domain.fft();
    let omega = fft.omega();
    // Twiddles w^j for j < N/2.
    let mut twiddles = Vec::with_capacity(size / 2);
    let mut acc = Scalar::one();
    for _ in 0..size / 2 {
        twiddles.push(acc);
        acc *= omega;
    }
    bit_reverse_points(&mut values, log);
    let mut half = 1;
    while half < size {
        let stride = size / (2 * half);
        if size >= SPLIT_FROM {
            split_stage(&mut values, half, &twiddles);
        } else {
            for chunk in values.chunks_exact_mut(2 * half) {
                let (lo, hi) = chunk.split_at_mut(half);
                butterflies(lo, hi, 0, stride, &twiddles, true);
            }
        }
        half *= 2;
    }
    values.truncate(domain.n() as usize);
    values
}

/// The smallest FFT in the exponent whose stages are split over threads.
const SPLIT_FROM: usize = 64;

/// Butterflies per job of a split stage. The jobs do not depend on the
/// threads (so neither does the measured path of the FFT: see
/// [`crate::host_work`]): 32 jobs per stage at 1,024 members, each of 16
/// multiplications.
const BUTTERFLIES_PER_JOB: usize = 16;

/// The butterflies `(lo[j], hi[j])` of one stage, whose twiddle for `j` is
/// `twiddles[(j + offset) * stride]`. With `skip`, an identity `hi[j]` and
/// the twiddle 1 (`j + offset == 0`) cost no multiplication.
fn butterflies<P: Point>(
    lo: &mut [P],
    hi: &mut [P],
    offset: usize,
    stride: usize,
    twiddles: &[Scalar],
    skip: bool,
) {
    for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        if skip && b.is_identity() {
            *b = *a;
            continue;
        }
        let wb = if skip && j + offset == 0 {
            *b
        } else {
            b.mul(&twiddles[(j + offset) * stride])
        };
        let (x, y) = (a.add(&wb), a.add(&wb.neg()));
        *a = x;
        *b = y;
    }
}

/// One butterfly job: pieces `(lo, hi, offset)` of one or more chunks.
type StageJob<'a, P> = Vec<(&'a mut [P], &'a mut [P], usize)>;

/// One stage (butterflies `half` apart) of an FFT of `values.len() >= 64`
/// points, split into jobs of [`BUTTERFLIES_PER_JOB`] butterflies over
/// [`crate::parallel::threads`] threads.
///
/// The multiplications charged to the caller are exactly those the
/// two-thread version of this FFT charged (it counted the half it ran on the
/// calling thread, not its helper's): in every stage but the last, the
/// chunks of the upper half of `values`, skipping identities and the
/// twiddle 1; in the last, the lower half of the butterflies, each with its
/// multiplication. So the virtual cost of a simulated member, and the trace,
/// do not depend on the threads.
fn split_stage<P: Point>(values: &mut [P], half: usize, twiddles: &[Scalar]) {
    let size = values.len();
    let chunks = size / (2 * half);
    let stride = chunks;
    let last = chunks == 1;
    let jobs_count = (size / 2 / BUTTERFLIES_PER_JOB).max(2);
    let mut jobs: Vec<StageJob<'_, P>> = Vec::with_capacity(jobs_count);
    if jobs_count <= chunks {
        // Whole chunks per job.
        let per = chunks / jobs_count;
        for group in values.chunks_exact_mut(2 * half * per) {
            let pieces = group
                .chunks_exact_mut(2 * half)
                .map(|chunk| {
                    let (lo, hi) = chunk.split_at_mut(half);
                    (lo, hi, 0)
                })
                .collect();
            jobs.push(pieces);
        }
    } else {
        // Each chunk's butterflies split in parts.
        let part = half / (jobs_count / chunks);
        for chunk in values.chunks_exact_mut(2 * half) {
            let (lo, hi) = chunk.split_at_mut(half);
            for (p, (lo, hi)) in lo
                .chunks_exact_mut(part)
                .zip(hi.chunks_exact_mut(part))
                .enumerate()
            {
                jobs.push(vec![(lo, hi, p * part)]);
            }
        }
    }
    let count = jobs.len();
    let done = crate::parallel::map(jobs, |pieces| {
        for (lo, hi, offset) in pieces {
            butterflies(lo, hi, offset, stride, twiddles, !last);
        }
    });
    for (i, ((), counts)) in done.iter().enumerate() {
        let lower = i < count / 2;
        if lower == last {
            crate::cost::charge(counts);
        }
    }
}

fn bit_reverse_points<P: Copy>(values: &mut [P], log: u32) {
    if log == 0 {
        return;
    }
    for i in 0..values.len() {
        let j = i.reverse_bits() >> (usize::BITS - log);
        if i < j {
            values.swap(i, j);
        }
    }
}
