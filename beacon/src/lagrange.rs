//! Lagrange coefficients at zero for a set of signers, three interchangeable ways.
//!
//! Signer `i` (0-based) of `n` owns the evaluation point `w^i`, `w` a primitive
//! `N`-th root of unity, `N` the smallest power of two `>= n` ([`SignerDomain`]).
//! For a signer set `T`, the coefficient of `j` in `T` is
//! `lambda_j = L_j^T(0) = -V_T(0) / (x_j V_T'(x_j))`, with `V_T = prod_{k in T} (X - x_k)`.
//!
//! 1. [`lagrange_naive`] — `prod_{k != j} x_k / (x_k - x_j)`: Theta(t^2) products,
//!    one batch inversion. The baseline.
//! 2. [`lagrange_fast`] — any distinct points: product tree for `V_T`, its derivative,
//!    remainder-tree multipoint evaluation of `V_T'`: O(t log^2 t).
//! 3. [`SignerDomain::lagrange_at_zero`] with [`InterpolationMethod::RootsOfUnity`] —
//!    with `M` the complement of `T` in the `N` roots, `X^N - 1 = V_T V_M`, so
//!    `V_T'(x_j) = N / (x_j V_M(x_j))` and `V_T(0) = -1 / V_M(0)`, hence
//!    `lambda_j = V_M(x_j) / (N V_M(0))`: one vanishing polynomial of the missing
//!    set and one size-`N` FFT, no per-signer inversion. When `T` is the smaller set,
//!    the dual route (`V_T` directly, FFT of `V_T'`) is taken instead.

use crate::field::{batch_inverse, Scalar, TWO_ADICITY};
use crate::poly::{bit_reversed_index, derivative, log2_ceil, vanishing, Fft, ProductTree};
use crate::{Error, NodeIndex};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// How to compute Lagrange coefficients (all give identical results).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InterpolationMethod {
    /// Theta(t^2) textbook formula.
    Naive,
    /// O(t log^2 t) product and remainder trees, any distinct points.
    Fast,
    /// O(N log N) over the roots-of-unity signer points (the default).
    #[default]
    RootsOfUnity,
}

impl InterpolationMethod {
    /// All methods, for tests and benchmarks.
    pub const ALL: [InterpolationMethod; 3] = [Self::Naive, Self::Fast, Self::RootsOfUnity];

    /// The name used in configs and on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Fast => "fast",
            Self::RootsOfUnity => "roots_of_unity",
        }
    }
}

impl fmt::Display for InterpolationMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InterpolationMethod {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "naive" => Ok(Self::Naive),
            "fast" => Ok(Self::Fast),
            "roots_of_unity" | "rou" => Ok(Self::RootsOfUnity),
            other => Err(Error::UnknownInterpolationMethod(other.to_string())),
        }
    }
}

/// The evaluation points of `n` signers: signer `i` has `w^i`, `w` of order `N`.
pub struct SignerDomain {
    n: u32,
    fft: Arc<Fft>,
    points: Vec<Scalar>,
}

impl fmt::Debug for SignerDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignerDomain(n = {}, N = {})", self.n, self.fft.size())
    }
}

impl SignerDomain {
    /// The domain of `n >= 1` signers.
    pub fn new(n: u32) -> Result<SignerDomain, Error> {
        let log = log2_ceil(n as usize);
        if n == 0 || log > TWO_ADICITY {
            return Err(Error::InvalidThreshold { t: 1, n });
        }
        let fft = Fft::new(log);
        let w = fft.omega();
        let mut points = Vec::with_capacity(n as usize);
        let mut acc = Scalar::one();
        for _ in 0..n {
            points.push(acc);
            acc *= w;
        }
        Ok(SignerDomain { n, fft, points })
    }

    /// The domain of `n` signers, shared process-wide (many simulated members use
    /// the same one).
    pub fn shared(n: u32) -> Result<Arc<SignerDomain>, Error> {
        static CACHE: std::sync::OnceLock<
            std::sync::Mutex<std::collections::HashMap<u32, Arc<SignerDomain>>>,
        > = std::sync::OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(d) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&n) {
            return Ok(d.clone());
        }
        let d = Arc::new(SignerDomain::new(n)?);
        cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(n, d.clone());
        Ok(d)
    }

    /// Number of signers.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The FFT size `N` (smallest power of two `>= n`).
    pub fn size(&self) -> usize {
        self.fft.size()
    }

    /// The evaluation point of `signer`.
    pub fn point(&self, signer: NodeIndex) -> Result<Scalar, Error> {
        self.points
            .get(signer.0 as usize)
            .copied()
            .ok_or(Error::SignerOutOfRange { signer, n: self.n })
    }

    /// All `n` evaluation points.
    pub fn points(&self) -> &[Scalar] {
        &self.points
    }

    /// Evaluates a polynomial of degree `< N` at every signer's point with one FFT.
    pub fn evaluate_all(&self, poly: &[Scalar]) -> Vec<Scalar> {
        let mut values = vec![Scalar::ZERO; self.size()];
        for (i, c) in poly.iter().enumerate() {
            values[i % self.size()] += *c;
        }
        self.fft.forward(&mut values);
        values.truncate(self.n as usize);
        values
    }

    /// The transform over this domain's `N` points (for evaluations "in the exponent").
    pub fn fft(&self) -> &Fft {
        &self.fft
    }

    /// Checks `signers`: every index `< n`, no repeats. Returns them sorted.
    pub fn check_signers(&self, signers: &[NodeIndex]) -> Result<Vec<NodeIndex>, Error> {
        let mut sorted = signers.to_vec();
        sorted.sort_unstable();
        for pair in sorted.windows(2) {
            if pair[0] == pair[1] {
                return Err(Error::DuplicateSigner { signer: pair[0] });
            }
        }
        if let Some(&last) = sorted.last() {
            if last.0 >= self.n {
                return Err(Error::SignerOutOfRange {
                    signer: last,
                    n: self.n,
                });
            }
        }
        Ok(sorted)
    }

    /// The Lagrange coefficients at zero of `signers` (in the given order).
    pub fn lagrange_at_zero(
        &self,
        signers: &[NodeIndex],
        method: InterpolationMethod,
    ) -> Result<LagrangeCoefficients, Error> {
        self.check_signers(signers)?;
        if signers.is_empty() {
            return Err(Error::NotEnoughShares { have: 0, need: 1 });
        }
        let coefficients = match method {
            InterpolationMethod::Naive => lagrange_naive(&self.points_of(signers))?,
            InterpolationMethod::Fast => lagrange_fast(&self.points_of(signers))?,
            InterpolationMethod::RootsOfUnity => self.lagrange_roots_of_unity(signers),
        };
        Ok(LagrangeCoefficients {
            signers: signers.to_vec(),
            coefficients,
        })
    }

    fn points_of(&self, signers: &[NodeIndex]) -> Vec<Scalar> {
        signers.iter().map(|s| self.points[s.0 as usize]).collect()
    }

    /// Roots-of-unity method; `signers` already checked (distinct, in range).
    fn lagrange_roots_of_unity(&self, signers: &[NodeIndex]) -> Vec<Scalar> {
        let size = self.size();
        let all = self.fft_points();
        let mut in_set = vec![false; size];
        for s in signers {
            in_set[s.0 as usize] = true;
        }
        if 2 * signers.len() <= size {
            // Dual route: V_T directly; lambda_j = -V_T(0) / (x_j V_T'(x_j)).
            let v_t = vanishing(&self.points_of(signers));
            let mut d = derivative(&v_t);
            d.resize(size, Scalar::ZERO);
            self.fft.forward_to_bit_reversed(&mut d);
            let log = size.trailing_zeros();
            let mut denominators: Vec<Scalar> = signers
                .iter()
                .map(|s| all[s.0 as usize] * d[bit_reversed_index(s.0 as usize, log)])
                .collect();
            let ok = batch_inverse(&mut denominators);
            debug_assert!(ok, "distinct roots of unity give non-zero V_T'");
            let minus_v0 = -v_t[0];
            denominators.into_iter().map(|inv| minus_v0 * inv).collect()
        } else {
            // Missing-set route: lambda_j = V_M(x_j) / (N V_M(0)).
            let missing: Vec<Scalar> = (0..size).filter(|&i| !in_set[i]).map(|i| all[i]).collect();
            let mut v_m = vanishing(&missing);
            let scale = (Scalar::from_u64(size as u64) * v_m[0])
                .inverse()
                .expect("V_M(0) = +-prod of roots of unity is non-zero");
            v_m.resize(size, Scalar::ZERO);
            self.fft.forward_to_bit_reversed(&mut v_m);
            let log = size.trailing_zeros();
            signers
                .iter()
                .map(|s| v_m[bit_reversed_index(s.0 as usize, log)] * scale)
                .collect()
        }
    }

    /// All `N` roots of unity (the signer points extended to the full subgroup).
    fn fft_points(&self) -> std::borrow::Cow<'_, [Scalar]> {
        if self.points.len() == self.size() {
            return std::borrow::Cow::Borrowed(&self.points);
        }
        let w = self.fft.omega();
        let mut all = self.points.clone();
        let mut acc = all.last().copied().unwrap_or(Scalar::one()) * w;
        while all.len() < self.size() {
            all.push(acc);
            acc *= w;
        }
        std::borrow::Cow::Owned(all)
    }
}

/// The Lagrange coefficients at zero of one signer set: computed once, reused for
/// every recovery from the same signers (whatever the message or the key, as long
/// as the key's degree is below the set's size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LagrangeCoefficients {
    signers: Vec<NodeIndex>,
    coefficients: Vec<Scalar>,
}

impl LagrangeCoefficients {
    /// The signers, in the order of [`LagrangeCoefficients::coefficients`].
    pub fn signers(&self) -> &[NodeIndex] {
        &self.signers
    }

    /// The coefficients.
    pub fn coefficients(&self) -> &[Scalar] {
        &self.coefficients
    }

    /// `sum_j lambda_j values[j]`: the interpolated value at zero.
    pub fn interpolate(&self, values: &[Scalar]) -> Result<Scalar, Error> {
        if values.len() != self.coefficients.len() {
            return Err(Error::LengthMismatch {
                what: "values vs coefficients",
                left: values.len(),
                right: self.coefficients.len(),
            });
        }
        Ok(values
            .iter()
            .zip(&self.coefficients)
            .map(|(v, l)| *v * *l)
            .sum())
    }
}

fn check_points(points: &[Scalar]) -> Result<(), Error> {
    let mut seen = std::collections::HashSet::with_capacity(points.len());
    if points.is_empty() || points.iter().any(|p| p.is_zero() || !seen.insert(*p)) {
        return Err(Error::InvalidPoints);
    }
    Ok(())
}

/// Theta(t^2) Lagrange coefficients at zero for distinct non-zero `points`:
/// `lambda_j = P / (x_j prod_{k != j} (x_k - x_j))` with `P = prod_k x_k`.
pub fn lagrange_naive(points: &[Scalar]) -> Result<Vec<Scalar>, Error> {
    check_points(points)?;
    let product: Scalar = points.iter().copied().product();
    let mut denominators: Vec<Scalar> = points
        .iter()
        .enumerate()
        .map(|(j, xj)| {
            let mut d = *xj;
            for (k, xk) in points.iter().enumerate() {
                if k != j {
                    d *= *xk - *xj;
                }
            }
            d
        })
        .collect();
    batch_inverse(&mut denominators);
    Ok(denominators.into_iter().map(|inv| product * inv).collect())
}

/// O(t log^2 t) Lagrange coefficients at zero for distinct non-zero `points`:
/// `lambda_j = -V_T(0) / (x_j V_T'(x_j))`, `V_T'` evaluated by a remainder tree.
pub fn lagrange_fast(points: &[Scalar]) -> Result<Vec<Scalar>, Error> {
    check_points(points)?;
    let tree = ProductTree::new(points);
    let v0 = tree.root()[0];
    let values = tree.evaluate(&derivative(tree.root()));
    let mut denominators: Vec<Scalar> = values.iter().zip(points).map(|(d, x)| *d * *x).collect();
    if !batch_inverse(&mut denominators) {
        return Err(Error::InvalidPoints);
    }
    Ok(denominators.into_iter().map(|inv| -v0 * inv).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::poly::evaluate;
    use proptest::prelude::*;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn coefficients(domain: &SignerDomain, signers: &[NodeIndex]) -> Vec<Vec<Scalar>> {
        InterpolationMethod::ALL
            .iter()
            .map(|m| {
                domain
                    .lagrange_at_zero(signers, *m)
                    .unwrap()
                    .coefficients()
                    .to_vec()
            })
            .collect()
    }

    fn recovers_secret(domain: &SignerDomain, signers: &[NodeIndex], seed: u64) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let poly: Vec<Scalar> = (0..signers.len())
            .map(|_| Scalar::random(&mut rng))
            .collect();
        let shares: Vec<Scalar> = signers
            .iter()
            .map(|s| evaluate(&poly, domain.point(*s).unwrap()))
            .collect();
        for m in InterpolationMethod::ALL {
            let l = domain.lagrange_at_zero(signers, m).unwrap();
            assert_eq!(l.interpolate(&shares).unwrap(), poly[0], "method {m}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn methods_agree_on_random_subsets(n in 1u32..300, seed in any::<u64>(), frac in 0.0f64..=1.0) {
            let domain = SignerDomain::new(n).unwrap();
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            let t = ((n as f64 * frac).ceil() as u32).clamp(1, n);
            let mut all: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
            // Fisher-Yates with the seeded RNG: a scattered subset.
            for i in (1..all.len()).rev() {
                let j = (rand_core::RngCore::next_u64(&mut rng) % (i as u64 + 1)) as usize;
                all.swap(i, j);
            }
            let signers = &all[..t as usize];
            let c = coefficients(&domain, signers);
            prop_assert_eq!(&c[0], &c[1]);
            prop_assert_eq!(&c[0], &c[2]);
            recovers_secret(&domain, signers, seed);
        }

        #[test]
        fn methods_agree_on_contiguous_ranges(n in 1u32..200, start_frac in 0.0f64..1.0, t_frac in 0.0f64..=1.0) {
            let domain = SignerDomain::new(n).unwrap();
            let start = ((n as f64 * start_frac) as u32).min(n - 1);
            let t = ((((n - start) as f64) * t_frac).ceil() as u32).clamp(1, n - start);
            let signers: Vec<NodeIndex> = (start..start + t).map(NodeIndex).collect();
            let c = coefficients(&domain, &signers);
            prop_assert_eq!(&c[0], &c[1]);
            prop_assert_eq!(&c[0], &c[2]);
        }
    }

    #[test]
    fn edge_cases_t1_and_t_equals_n() {
        for n in [1u32, 2, 3, 5, 8, 13, 64, 100, 1000] {
            let domain = SignerDomain::new(n).unwrap();
            let all: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
            let c = coefficients(&domain, &all);
            assert_eq!(c[0], c[1]);
            assert_eq!(c[0], c[2]);
            recovers_secret(&domain, &all, n as u64);
            let one = [NodeIndex(n - 1)];
            for m in InterpolationMethod::ALL {
                assert_eq!(
                    domain.lagrange_at_zero(&one, m).unwrap().coefficients(),
                    &[Scalar::one()]
                );
            }
        }
    }

    #[test]
    fn large_subsets_agree() {
        // Crosses the parallel and FFT cut-overs of the polynomial code.
        let n = 5000u32;
        let domain = SignerDomain::new(n).unwrap();
        let signers: Vec<NodeIndex> = (0..n).filter(|i| i % 3 != 1).map(NodeIndex).collect();
        let fast = domain
            .lagrange_at_zero(&signers, InterpolationMethod::Fast)
            .unwrap();
        let rou = domain
            .lagrange_at_zero(&signers, InterpolationMethod::RootsOfUnity)
            .unwrap();
        assert_eq!(fast, rou);
        recovers_secret(&domain, &signers[..2500], 77);
    }

    #[test]
    fn bad_signer_sets_are_errors() {
        let domain = SignerDomain::new(10).unwrap();
        for m in InterpolationMethod::ALL {
            assert_eq!(
                domain.lagrange_at_zero(&[NodeIndex(1), NodeIndex(1)], m),
                Err(Error::DuplicateSigner {
                    signer: NodeIndex(1)
                })
            );
            assert_eq!(
                domain.lagrange_at_zero(&[NodeIndex(10)], m),
                Err(Error::SignerOutOfRange {
                    signer: NodeIndex(10),
                    n: 10
                })
            );
            assert!(domain.lagrange_at_zero(&[], m).is_err());
        }
        assert_eq!(
            lagrange_naive(&[Scalar::one(), Scalar::one()]),
            Err(Error::InvalidPoints)
        );
        assert_eq!(lagrange_fast(&[Scalar::ZERO]), Err(Error::InvalidPoints));
        assert!(SignerDomain::new(0).is_err());
    }

    #[test]
    fn arbitrary_points_work_for_naive_and_fast() {
        let points: Vec<Scalar> = (1..=40u64).map(|i| Scalar::from_u64(i * i + 3)).collect();
        assert_eq!(
            lagrange_naive(&points).unwrap(),
            lagrange_fast(&points).unwrap()
        );
    }

    #[test]
    fn method_names_parse_and_unknown_ones_are_named() {
        for m in InterpolationMethod::ALL {
            assert_eq!(m.as_str().parse::<InterpolationMethod>(), Ok(m));
        }
        assert_eq!("rou".parse(), Ok(InterpolationMethod::RootsOfUnity));
        let e = "cubic".parse::<InterpolationMethod>().unwrap_err();
        assert_eq!(e, Error::UnknownInterpolationMethod("cubic".into()));
        assert_eq!(
            e.to_string(),
            "unknown interpolation method \"cubic\" (naive, fast, roots_of_unity)"
        );
    }
}
