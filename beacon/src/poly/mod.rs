//! Polynomials over F_r and the radix-2 FFT: the algebra behind fast Lagrange
//! interpolation.
//!
//! Polynomials are coefficient vectors, lowest degree first. Provided here:
//! - [`Fft`]: in-place radix-2 transforms of any power-of-two size up to 2^32, over
//!   the subgroup of roots of unity (twiddle tables cached per size);
//! - multiplication (schoolbook below a cut-over, FFT above), with a wrap-around
//!   trick for monic products of power-of-two degree;
//! - [`vanishing`] `prod (X - x_i)` by divide and conquer, [`ProductTree`] keeping
//!   every level, fast division with remainder (Newton inversion of the reversed
//!   divisor) and [`ProductTree::evaluate`], the remainder-tree multipoint evaluation
//!   of von zur Gathen & Gerhard, *Modern Computer Algebra*, ch. 10.

use crate::field::{Scalar, TWO_ADICITY};
use std::sync::{Arc, Mutex, OnceLock};

/// Below this length (of the shorter factor) multiplication is schoolbook.
const SCHOOLBOOK_CUTOVER: usize = 48;
/// Below this degree of the divisor, division is schoolbook.
const DIVISION_CUTOVER: usize = 64;
/// Subtrees with at most this many points evaluate their remainder by Horner's rule.
const EVALUATION_LEAF: usize = 16;
/// Vanishing polynomials of at least this many points split across two threads.
const PARALLEL_POINTS: usize = 2048;
/// Blocks of at most this many points start from a schoolbook product.
const BLOCK_LEAF: usize = 8;
/// Transforms (in bit-reversed form) of at least this size run on two threads.
const PARALLEL_FFT: usize = 8192;

/// Twiddle factors for radix-2 FFTs of one size.
pub struct Fft {
    log_size: u32,
    /// `omega^j` for `j < size / 2`.
    forward: Vec<Scalar>,
    /// `omega^-j` for `j < size / 2`.
    inverse: Vec<Scalar>,
    /// `1 / 2^k` for `k <= log_size`.
    inv_sizes: Vec<Scalar>,
    omega: Scalar,
}

impl Fft {
    /// The (cached) transform of size `2^log_size`. Panics above 2^32, the 2-adicity
    /// of F_r: callers bound sizes first.
    pub fn new(log_size: u32) -> Arc<Fft> {
        assert!(
            log_size <= TWO_ADICITY,
            "FFT size 2^{log_size} exceeds 2^32"
        );
        static CACHE: OnceLock<Mutex<Vec<Option<Arc<Fft>>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(|| Mutex::new(vec![None; TWO_ADICITY as usize + 1]));
        let mut guard = cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = &guard[log_size as usize] {
            return f.clone();
        }
        let size = 1usize << log_size;
        let omega = Scalar::root_of_unity(log_size).expect("bounded above");
        let omega_inv = omega.inverse().expect("root of unity is non-zero");
        let powers = |w: Scalar| {
            let mut v = Vec::with_capacity(size / 2);
            let mut acc = Scalar::one();
            for _ in 0..size / 2 {
                v.push(acc);
                acc *= w;
            }
            v
        };
        let fft = Arc::new(Fft {
            log_size,
            forward: powers(omega),
            inverse: powers(omega_inv),
            inv_sizes: {
                let half = Scalar::from_u64(2).inverse().expect("2 != 0");
                let mut v = vec![Scalar::one()];
                for _ in 0..log_size {
                    let last = *v.last().expect("non-empty");
                    v.push(last * half);
                }
                v
            },
            omega,
        });
        guard[log_size as usize] = Some(fft.clone());
        fft
    }

    /// The transform size.
    pub fn size(&self) -> usize {
        1 << self.log_size
    }

    /// The primitive root of unity of this size.
    pub fn omega(&self) -> Scalar {
        self.omega
    }

    /// Evaluates in place: `values[k] <- sum_j values[j] omega^(jk)`, where `values`
    /// has this transform's size. The transforms below also accept any smaller
    /// power-of-two length (with that length's root of unity).
    pub fn forward(&self, values: &mut [Scalar]) {
        bit_reverse(values);
        self.dit(values, &self.forward);
    }

    /// Interpolates in place (the inverse of [`Fft::forward`]).
    pub fn inverse(&self, values: &mut [Scalar]) {
        bit_reverse(values);
        self.dit(values, &self.inverse);
        self.scale(values);
    }

    /// Forward transform leaving the output in bit-reversed order (no permutation
    /// pass): for convolutions, where the order of the evaluations does not matter.
    pub fn forward_to_bit_reversed(&self, values: &mut [Scalar]) {
        if values.len() < PARALLEL_FFT {
            return self.dif(values, &self.forward);
        }
        // First stage on both threads, then the two halves are independent transforms.
        self.outer_stage(values, &self.forward, Scalar::butterfly_gs);
        self.on_halves(values, |half| self.dif(half, &self.forward));
    }

    /// Inverse of [`Fft::forward_to_bit_reversed`]: bit-reversed evaluations in,
    /// coefficients in natural order out.
    pub fn inverse_from_bit_reversed(&self, values: &mut [Scalar]) {
        let n = values.len();
        if n < PARALLEL_FFT {
            self.dit(values, &self.inverse);
            return self.scale(values);
        }
        // The two halves are independent transforms, then one last stage on both
        // threads, which also divides by the size.
        self.on_halves(values, |half| self.dit(half, &self.inverse));
        let inv = self.inv_sizes[n.trailing_zeros() as usize];
        self.outer_stage(values, &self.inverse, |a, b, w| {
            Scalar::butterfly(a, b, w);
            *a *= inv;
            *b *= inv;
        });
    }

    /// Runs `transform` on the two halves of `values` on two threads.
    fn on_halves(&self, values: &mut [Scalar], transform: impl Fn(&mut [Scalar]) + Sync) {
        let (lo, hi) = values.split_at_mut(values.len() / 2);
        std::thread::scope(|s| {
            s.spawn(|| transform(hi));
            transform(lo);
        });
    }

    /// The outermost stage of a size-`n` transform — `butterfly(x_j, x_{j+n/2},
    /// w^j)` for `j < n/2` — split between two threads.
    fn outer_stage(
        &self,
        values: &mut [Scalar],
        twiddles: &[Scalar],
        butterfly: impl Fn(&mut Scalar, &mut Scalar, &Scalar) + Sync,
    ) {
        let n = values.len();
        let stride = self.size() / n;
        let quarter = n / 4;
        let (lo, hi) = values.split_at_mut(n / 2);
        let (lo_a, lo_b) = lo.split_at_mut(quarter);
        let (hi_a, hi_b) = hi.split_at_mut(quarter);
        let stage = |lo: &mut [Scalar], hi: &mut [Scalar], offset: usize| {
            for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                butterfly(a, b, &twiddles[(j + offset) * stride]);
            }
        };
        std::thread::scope(|s| {
            s.spawn(|| stage(lo_b, hi_b, quarter));
            stage(lo_a, hi_a, 0);
        });
    }

    fn scale(&self, values: &mut [Scalar]) {
        let inv = self.inv_sizes[values.len().trailing_zeros() as usize];
        for v in values.iter_mut() {
            *v *= inv;
        }
    }

    fn check_len(&self, n: usize) {
        assert!(
            n.is_power_of_two() && n <= self.size(),
            "FFT input of length {n} for size {}",
            self.size()
        );
    }

    /// Decimation in time: bit-reversed input, natural-order output.
    fn dit(&self, values: &mut [Scalar], twiddles: &[Scalar]) {
        let n = values.len();
        self.check_len(n);
        let mut half = 1;
        while half < n {
            let stride = self.size() / (2 * half);
            for chunk in values.chunks_exact_mut(2 * half) {
                let (lo, hi) = chunk.split_at_mut(half);
                // Twiddle 1: no multiplication.
                let (a, b) = (lo[0], hi[0]);
                lo[0] = a + b;
                hi[0] = a - b;
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate().skip(1) {
                    Scalar::butterfly(a, b, &twiddles[j * stride]);
                }
            }
            half *= 2;
        }
    }

    /// Decimation in frequency: natural-order input, bit-reversed output.
    fn dif(&self, values: &mut [Scalar], twiddles: &[Scalar]) {
        let n = values.len();
        self.check_len(n);
        let mut half = n / 2;
        while half >= 1 {
            let stride = self.size() / (2 * half);
            for chunk in values.chunks_exact_mut(2 * half) {
                let (lo, hi) = chunk.split_at_mut(half);
                let (a, b) = (lo[0], hi[0]);
                lo[0] = a + b;
                hi[0] = a - b;
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate().skip(1) {
                    Scalar::butterfly_gs(a, b, &twiddles[j * stride]);
                }
            }
            half /= 2;
        }
    }
}

/// The position of index `j` in a bit-reversed array of length `2^log`.
pub fn bit_reversed_index(j: usize, log: u32) -> usize {
    if log == 0 {
        0
    } else {
        j.reverse_bits() >> (usize::BITS - log)
    }
}

/// Permutes `values` (power-of-two length) into bit-reversed index order.
pub fn bit_reverse(values: &mut [Scalar]) {
    let n = values.len();
    if n <= 2 {
        return;
    }
    let shift = usize::BITS - n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> shift;
        if i < j {
            values.swap(i, j);
        }
    }
}

/// Smallest `k` with `2^k >= n`.
pub fn log2_ceil(n: usize) -> u32 {
    n.max(1).next_power_of_two().trailing_zeros()
}

/// Evaluates `poly` at `x` (Horner's rule).
pub fn evaluate(poly: &[Scalar], x: Scalar) -> Scalar {
    poly.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + *c)
}

/// The formal derivative.
pub fn derivative(poly: &[Scalar]) -> Vec<Scalar> {
    poly.iter()
        .enumerate()
        .skip(1)
        .map(|(i, c)| *c * Scalar::from_u64(i as u64))
        .collect()
}

/// The product `a * b`.
pub fn mul(a: &[Scalar], b: &[Scalar]) -> Vec<Scalar> {
    if a.is_empty() || b.is_empty() {
        return Vec::new();
    }
    let out_len = a.len() + b.len() - 1;
    if a.len().min(b.len()) <= SCHOOLBOOK_CUTOVER {
        return schoolbook(a, b);
    }
    let mut out = cyclic_product(a, b, log2_ceil(out_len));
    out.truncate(out_len);
    out
}

/// `a * b mod (X^size - 1)` for `size = 2^log_size` by FFT.
fn cyclic_product(a: &[Scalar], b: &[Scalar], log_size: u32) -> Vec<Scalar> {
    let fft = Fft::new(log_size);
    let size = fft.size();
    let mut fa = vec![Scalar::ZERO; size];
    let mut fb = vec![Scalar::ZERO; size];
    for (i, c) in a.iter().enumerate() {
        fa[i % size] += *c;
    }
    for (i, c) in b.iter().enumerate() {
        fb[i % size] += *c;
    }
    fft.forward_to_bit_reversed(&mut fa);
    fft.forward_to_bit_reversed(&mut fb);
    for (x, y) in fa.iter_mut().zip(&fb) {
        *x *= *y;
    }
    fft.inverse_from_bit_reversed(&mut fa);
    fa
}

fn schoolbook(a: &[Scalar], b: &[Scalar]) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; a.len() + b.len() - 1];
    for (i, x) in a.iter().enumerate() {
        for (j, y) in b.iter().enumerate() {
            out[i + j] += *x * *y;
        }
    }
    out
}

/// The product of two monic polynomials. When the product's degree `d` is a power
/// of two, a size-`d` cyclic product suffices: the only wrapped coefficient is the
/// leading 1, which lands on the constant term and is moved back.
pub fn mul_monic(a: &[Scalar], b: &[Scalar]) -> Vec<Scalar> {
    let degree = a.len() + b.len() - 2;
    if a.len().min(b.len()) <= SCHOOLBOOK_CUTOVER || !degree.is_power_of_two() {
        return mul(a, b);
    }
    let mut out = cyclic_product(a, b, degree.trailing_zeros());
    out[0] -= Scalar::one();
    out.push(Scalar::one());
    out
}

/// The vanishing polynomial `prod_i (X - points[i])` (monic, degree `points.len()`).
///
/// The points are cut into power-of-two blocks (the binary digits of their count);
/// each block's product is built in evaluation form ([`block_evaluations`]) and the
/// few block polynomials are multiplied at the end, smallest first.
pub fn vanishing(points: &[Scalar]) -> Vec<Scalar> {
    let mut blocks = Vec::new();
    let mut rest = points;
    while !rest.is_empty() {
        let size = 1usize << (usize::BITS - 1 - rest.len().leading_zeros());
        let (block, tail) = rest.split_at(size);
        blocks.push(block);
        rest = tail;
    }
    let mut out = vec![Scalar::one()];
    let Some(largest) = blocks.first() else {
        return out;
    };
    let fft = Fft::new(largest.len().trailing_zeros() + 1);
    for block in blocks.into_iter().rev() {
        let mut coefficients = block_evaluations(&fft, block);
        fft.inverse_from_bit_reversed(&mut coefficients);
        // The evaluations are those of P mod (X^d - 1) = P - X^d + 1.
        coefficients[0] -= Scalar::one();
        coefficients.push(Scalar::one());
        out = mul_monic(&out, &coefficients);
    }
    out
}

/// Evaluations of `P = prod_i (X - points[i])` on the `d`-th roots of unity, in
/// bit-reversed order, for `d = points.len()` a power of two and `fft` of size at
/// least `2d`. These are the values of `P mod (X^d - 1)`, which determine the monic `P`.
///
/// In bit-reversed order the first half of a size-`2h` transform holds the values
/// on the `h`-th roots and the second half those on their coset `w_2h * <w_h>`; so a
/// parent is the pointwise product of its children's values and of their
/// extensions to the coset ([`coset_extension`]): four size-`h` transforms per
/// product, no permutation pass.
pub fn block_evaluations(fft: &Fft, points: &[Scalar]) -> Vec<Scalar> {
    let d = points.len();
    debug_assert!(d.is_power_of_two() && 2 * d <= fft.size());
    if d <= BLOCK_LEAF {
        // Schoolbook product, then one small transform of P mod (X^d - 1).
        let mut p = Vec::with_capacity(d + 1);
        p.push(Scalar::one());
        for x in points {
            p.push(Scalar::ZERO);
            for k in (1..p.len()).rev() {
                let prev = p[k - 1];
                p[k] = prev - *x * p[k];
            }
            p[0] = -(*x * p[0]);
        }
        let lead = p.pop().expect("degree d");
        p[0] += lead;
        fft.forward_to_bit_reversed(&mut p);
        return p;
    }
    let (left, right) = points.split_at(d / 2);
    let half = |pts: &[Scalar]| {
        let evals = block_evaluations(fft, pts);
        let coset = coset_extension(fft, &evals);
        (evals, coset)
    };
    let ((le, lc), (re, rc)) = if d >= PARALLEL_POINTS {
        std::thread::scope(|s| {
            let handle = s.spawn(|| half(left));
            let r = half(right);
            (handle.join().expect("vanishing thread panicked"), r)
        })
    } else {
        (half(left), half(right))
    };
    let mut out = Vec::with_capacity(d);
    out.extend(le.iter().zip(&re).map(|(a, b)| *a * *b));
    out.extend(lc.iter().zip(&rc).map(|(a, b)| *a * *b));
    out
}

/// Given the bit-reversed values of a monic degree-`h` polynomial `P` on the `h`-th
/// roots, its bit-reversed values on the coset `zeta * <w_h>`, `zeta = w_2h`:
/// `P = q' + X^h` with `q' = (P mod X^h - 1) - 1`, and `(zeta y)^h = -1`.
fn coset_extension(fft: &Fft, evals: &[Scalar]) -> Vec<Scalar> {
    let h = evals.len();
    let mut q = evals.to_vec();
    fft.inverse_from_bit_reversed(&mut q);
    q[0] -= Scalar::one();
    // zeta^k = w_2h^k = w_max^(k * max / 2h): every (max / 2h)-th twiddle.
    let stride = fft.size() / (2 * h);
    for (k, c) in q.iter_mut().enumerate() {
        *c *= fft.forward[k * stride];
    }
    fft.forward_to_bit_reversed(&mut q);
    let one = Scalar::one();
    for v in q.iter_mut() {
        *v -= one;
    }
    q
}

/// The inverse of `f` modulo `X^precision`, for `f(0) = 1` (Newton iteration
/// `g <- g (2 - f g)`, doubling the precision each step).
fn inverse_series(f: &[Scalar], precision: usize) -> Vec<Scalar> {
    debug_assert_eq!(f[0], Scalar::one());
    let mut g = vec![Scalar::one()];
    let mut k = 1;
    while k < precision {
        k = (2 * k).min(precision);
        let f_trunc = &f[..f.len().min(k)];
        let mut fg = mul(f_trunc, &g);
        fg.truncate(k);
        // e = 2 - f g  (mod X^k)
        for c in fg.iter_mut() {
            *c = -*c;
        }
        fg[0] += Scalar::from_u64(2);
        let mut next = mul(&g, &fg);
        next.truncate(k);
        g = next;
    }
    g
}

/// The remainder of `a` modulo the monic polynomial `b` (`deg b >= 1`).
pub fn remainder(a: &[Scalar], b: &[Scalar]) -> Vec<Scalar> {
    let m = b.len() - 1;
    if a.len() <= m {
        return a.to_vec();
    }
    if m < DIVISION_CUTOVER {
        let mut r = a.to_vec();
        for i in (m..r.len()).rev() {
            let q = r[i];
            if q.is_zero() {
                continue;
            }
            for (j, bj) in b.iter().enumerate().take(m) {
                r[i - m + j] -= q * *bj;
            }
            r[i] = Scalar::ZERO;
        }
        r.truncate(m);
        return r;
    }
    // Reversed polynomials turn division into a power-series product.
    let k = a.len() - m; // number of quotient coefficients
    let rev_b: Vec<Scalar> = b.iter().rev().copied().collect();
    let inv = inverse_series(&rev_b, k);
    let rev_a: Vec<Scalar> = a.iter().rev().take(k).copied().collect();
    let mut rev_q = mul(&rev_a, &inv);
    rev_q.truncate(k);
    rev_q.resize(k, Scalar::ZERO);
    rev_q.reverse();
    let qb = mul(&rev_q, b);
    (0..m).map(|i| a[i] - qb[i]).collect()
}

/// A product tree over points: level 0 holds the linear factors `X - x_i`, each
/// level above the products of adjacent pairs (an odd last node moves up as is),
/// the top level the single vanishing polynomial of all points.
pub struct ProductTree {
    levels: Vec<Vec<Vec<Scalar>>>,
}

impl ProductTree {
    /// Builds the tree over `points` (at least one point).
    pub fn new(points: &[Scalar]) -> ProductTree {
        assert!(!points.is_empty(), "product tree over no points");
        let mut levels = vec![points
            .iter()
            .map(|p| vec![-*p, Scalar::one()])
            .collect::<Vec<_>>()];
        while levels.last().map(Vec::len) != Some(1) {
            let below = levels.last().expect("non-empty");
            let next = below
                .chunks(2)
                .map(|pair| match pair {
                    [a, b] => mul_monic(a, b),
                    [a] => a.clone(),
                    _ => unreachable!("chunks(2)"),
                })
                .collect();
            levels.push(next);
        }
        ProductTree { levels }
    }

    /// The vanishing polynomial of all points (the root).
    pub fn root(&self) -> &[Scalar] {
        &self.levels.last().expect("non-empty")[0]
    }

    /// Evaluates `poly` at every point, in the order the points were given, by
    /// reducing it down the tree (remainder tree).
    pub fn evaluate(&self, poly: &[Scalar]) -> Vec<Scalar> {
        let top = self.levels.len() - 1;
        let mut out = Vec::with_capacity(self.levels[0].len());
        self.evaluate_node(top, 0, remainder(poly, self.root()), &mut out);
        out
    }

    /// Number of leaves under node `index` of `level`.
    fn leaves(&self, level: usize, index: usize) -> std::ops::Range<usize> {
        let start = index << level;
        let end = ((index + 1) << level).min(self.levels[0].len());
        start..end
    }

    fn evaluate_node(&self, level: usize, index: usize, rem: Vec<Scalar>, out: &mut Vec<Scalar>) {
        let leaves = self.leaves(level, index);
        if level == 0 || leaves.len() <= EVALUATION_LEAF {
            for leaf in leaves {
                let x = -self.levels[0][leaf][0];
                out.push(evaluate(&rem, x));
            }
            return;
        }
        let children = &self.levels[level - 1];
        for child in [2 * index, 2 * index + 1] {
            if child < children.len() {
                let r = remainder(&rem, &children[child]);
                self.evaluate_node(level - 1, child, r, out);
            }
        }
    }
}

#[cfg(test)]
mod tests;
