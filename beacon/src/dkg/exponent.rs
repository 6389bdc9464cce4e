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
/// member's point: an FFT over the group (`(N/2) log N` scalar multiplications, on
/// two threads for large `N`), instead of `n` separate evaluations.
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
        let stage = |chunk: &mut [P]| {
            let (lo, hi) = chunk.split_at_mut(half);
            for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                if b.is_identity() {
                    *b = *a;
                    continue;
                }
                let wb = if j == 0 {
                    *b
                } else {
                    b.mul(&twiddles[j * stride])
                };
                let (x, y) = (a.add(&wb), a.add(&wb.neg()));
                *a = x;
                *b = y;
            }
        };
        let chunks = size / (2 * half);
        if size >= 64 && chunks >= 2 {
            let (left, right) = values.split_at_mut(size / 2);
            std::thread::scope(|s| {
                s.spawn(|| left.chunks_exact_mut(2 * half).for_each(stage));
                right.chunks_exact_mut(2 * half).for_each(stage);
            });
        } else if size >= 64 {
            // Last stage: one chunk; split its butterflies between two threads.
            let (lo, hi) = values.split_at_mut(half);
            let (lo_a, lo_b) = lo.split_at_mut(half / 2);
            let (hi_a, hi_b) = hi.split_at_mut(half / 2);
            let part = |lo: &mut [P], hi: &mut [P], offset: usize| {
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let wb = b.mul(&twiddles[(j + offset) * stride]);
                    let (x, y) = (a.add(&wb), a.add(&wb.neg()));
                    *a = x;
                    *b = y;
                }
            };
            std::thread::scope(|s| {
                s.spawn(|| part(lo_b, hi_b, half / 2));
                part(lo_a, hi_a, 0);
            });
        } else {
            values.chunks_exact_mut(2 * half).for_each(stage);
        }
        half *= 2;
    }
    values.truncate(domain.n() as usize);
    values
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
