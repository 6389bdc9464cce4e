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
/// Below this number of points, [`vanishing`] multiplies linear factors one by one.
const VANISHING_LEAF: usize = 32;
/// Below this degree of the divisor, division is schoolbook.
const DIVISION_CUTOVER: usize = 64;
/// Subtrees with at most this many points evaluate their remainder by Horner's rule.
const EVALUATION_LEAF: usize = 16;
/// Vanishing polynomials of at least this many points split across two threads.
const PARALLEL_POINTS: usize = 2048;

/// Twiddle factors for radix-2 FFTs of one size.
pub struct Fft {
    log_size: u32,
    /// `omega^j` for `j < size / 2`.
    forward: Vec<Scalar>,
    /// `omega^-j` for `j < size / 2`.
    inverse: Vec<Scalar>,
    size_inv: Scalar,
    omega: Scalar,
}

impl Fft {
    /// The (cached) transform of size `2^log_size`. Panics above 2^32, the 2-adicity
    /// of F_r: callers bound sizes first.
    pub fn new(log_size: u32) -> Arc<Fft> {
        assert!(log_size <= TWO_ADICITY, "FFT size 2^{log_size} exceeds 2^32");
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
            size_inv: Scalar::from_u64(size as u64).inverse().expect("size < r"),
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
    /// has this transform's size.
    pub fn forward(&self, values: &mut [Scalar]) {
        self.transform(values, &self.forward);
    }

    /// Interpolates in place (the inverse of [`Fft::forward`]).
    pub fn inverse(&self, values: &mut [Scalar]) {
        self.transform(values, &self.inverse);
        for v in values.iter_mut() {
            *v *= self.size_inv;
        }
    }

    fn transform(&self, values: &mut [Scalar], twiddles: &[Scalar]) {
        let n = values.len();
        assert_eq!(n, self.size(), "FFT input of the wrong size");
        if n <= 1 {
            return;
        }
        let shift = usize::BITS - self.log_size;
        for i in 0..n {
            let j = i.reverse_bits() >> shift;
            if i < j {
                values.swap(i, j);
            }
        }
        let mut half = 1;
        while half < n {
            let stride = n / (2 * half);
            for chunk in values.chunks_exact_mut(2 * half) {
                let (lo, hi) = chunk.split_at_mut(half);
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    Scalar::butterfly(a, b, &twiddles[j * stride]);
                }
            }
            half *= 2;
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
    fft.forward(&mut fa);
    fft.forward(&mut fb);
    for (x, y) in fa.iter_mut().zip(&fb) {
        *x *= *y;
    }
    fft.inverse(&mut fa);
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
pub fn vanishing(points: &[Scalar]) -> Vec<Scalar> {
    if points.len() <= VANISHING_LEAF {
        let mut out = Vec::with_capacity(points.len() + 1);
        out.push(Scalar::one());
        for p in points {
            // out <- out * (X - p)
            out.push(Scalar::ZERO);
            for k in (1..out.len()).rev() {
                let prev = out[k - 1];
                out[k] = prev - *p * out[k];
            }
            out[0] = -(*p * out[0]);
        }
        return out;
    }
    let (left, right) = points.split_at(points.len() / 2);
    let (l, r) = if points.len() >= PARALLEL_POINTS {
        std::thread::scope(|s| {
            let handle = s.spawn(|| vanishing(right));
            let l = vanishing(left);
            (l, handle.join().expect("vanishing thread panicked"))
        })
    } else {
        (vanishing(left), vanishing(right))
    };
    mul_monic(&l, &r)
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
        let mut levels = vec![points.iter().map(|p| vec![-*p, Scalar::one()]).collect::<Vec<_>>()];
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
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn random_poly(rng: &mut ChaCha20Rng, len: usize) -> Vec<Scalar> {
        (0..len).map(|_| Scalar::random(rng)).collect()
    }

    #[test]
    fn fft_roundtrip_and_matches_evaluation() {
        let mut rng = ChaCha20Rng::seed_from_u64(6);
        for log in 0..8 {
            let fft = Fft::new(log);
            let poly = random_poly(&mut rng, fft.size());
            let mut values = poly.clone();
            fft.forward(&mut values);
            let w = fft.omega();
            for (k, v) in values.iter().enumerate() {
                assert_eq!(*v, evaluate(&poly, w.pow(k as u64)));
            }
            fft.inverse(&mut values);
            assert_eq!(values, poly);
        }
    }

    #[test]
    fn multiplication_methods_agree() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for (la, lb) in [(1, 1), (3, 70), (100, 100), (129, 257), (60, 61)] {
            let a = random_poly(&mut rng, la);
            let b = random_poly(&mut rng, lb);
            assert_eq!(mul(&a, &b), schoolbook(&a, &b));
        }
        // Monic wrap-around: degree 128 product of two degree-64 monic polynomials.
        let mut a = random_poly(&mut rng, 64);
        a.push(Scalar::one());
        let mut b = random_poly(&mut rng, 64);
        b.push(Scalar::one());
        assert_eq!(mul_monic(&a, &b), schoolbook(&a, &b));
    }

    #[test]
    fn vanishing_vanishes_exactly_on_points() {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        for n in [1usize, 2, 31, 33, 200, 300] {
            let points = random_poly(&mut rng, n);
            let v = vanishing(&points);
            assert_eq!(v.len(), n + 1);
            assert_eq!(*v.last().unwrap(), Scalar::one());
            for p in &points {
                assert!(evaluate(&v, *p).is_zero());
            }
            assert!(!evaluate(&v, Scalar::random(&mut rng)).is_zero());
            assert_eq!(ProductTree::new(&points).root(), v.as_slice());
        }
    }

    #[test]
    fn remainder_matches_schoolbook() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        for (la, m) in [(10, 3), (300, 100), (257, 128), (500, 499), (80, 90)] {
            let a = random_poly(&mut rng, la);
            let mut b = random_poly(&mut rng, m);
            b.push(Scalar::one());
            let r = remainder(&a, &b);
            // a - r must vanish at b's roots; check via a random evaluation of a - r - q b
            // indirectly: r has degree < m and a ≡ r (mod b) ⇔ remainder of (a - r) is 0.
            assert!(r.len() <= m.max(la.min(m)));
            let mut diff = a.clone();
            for (i, c) in r.iter().enumerate() {
                diff[i] -= *c;
            }
            let mut slow = diff.clone();
            for i in (m..slow.len()).rev() {
                let q = slow[i];
                for j in 0..m {
                    slow[i - m + j] -= q * b[j];
                }
                slow[i] = Scalar::ZERO;
            }
            assert!(slow.iter().all(Scalar::is_zero), "la={la} m={m}");
        }
    }

    #[test]
    fn multipoint_evaluation_matches_horner() {
        let mut rng = ChaCha20Rng::seed_from_u64(10);
        for n in [1usize, 2, 17, 100, 513] {
            let points = random_poly(&mut rng, n);
            let poly = random_poly(&mut rng, n + 5);
            let tree = ProductTree::new(&points);
            let fast = tree.evaluate(&poly);
            let slow: Vec<Scalar> = points.iter().map(|p| evaluate(&poly, *p)).collect();
            assert_eq!(fast, slow, "n={n}");
        }
    }
}
