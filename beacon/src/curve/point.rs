//! The interface of a source group, [`Point`] (the operations threshold BLS
//! needs, implemented once per group in `group.rs`), and [`FixedBase`], a point
//! with a table of its multiples.

use crate::field::Scalar;
use crate::Error;
use std::fmt;

/// A point of G1 or G2: the operations threshold BLS needs, implemented once per group.
pub trait Point: Copy + Eq + Send + Sync + fmt::Debug + 'static {
    /// Length of the canonical compressed encoding (48 for G1, 96 for G2).
    const COMPRESSED_LEN: usize;
    /// "G1" or "G2", for error messages.
    const NAME: &'static str;
    /// The identity element.
    fn identity() -> Self;
    /// The standard generator.
    fn generator() -> Self;
    /// Whether this is the identity.
    fn is_identity(&self) -> bool;
    /// Group addition.
    fn add(&self, other: &Self) -> Self;
    /// Group negation.
    fn neg(&self) -> Self;
    /// Scalar multiplication.
    fn mul(&self, scalar: &Scalar) -> Self;
    /// `scalar * generator()`, the same as [`Point::mul`] on the generator but
    /// with a table of the generator's multiples (fixed-base comb, 5-bit
    /// windows, each table entry picked in constant time): several times
    /// faster, for dealers committing to thousands of secret coefficients.
    fn mul_generator(scalar: &Scalar) -> Self {
        Self::generator().mul(scalar)
    }
    /// The comb table of `self`'s multiples that [`FixedBase`] holds, as
    /// 64-bit limbs (empty where the group has no comb: [`FixedBase::mul`]
    /// then multiplies plainly).
    fn comb_limbs(&self) -> Vec<u64> {
        Vec::new()
    }
    /// `scalar` times the base of the comb table `limbs` (from
    /// [`Point::comb_limbs`]); charged as one [`Point::mul`].
    fn mul_comb(limbs: &[u64], scalar: &Scalar) -> Self {
        let _ = (limbs, scalar);
        Self::identity()
    }
    /// The point in affine coordinates: two thirds of the projective size, and
    /// the form blst's MSMs read. For points held by the million (the DKG's
    /// deal commitments, see `dkg::Commitments`).
    type Affine: Copy + Eq + Send + Sync + fmt::Debug + 'static;
    /// `points` in affine form (one inversion shared by all of them).
    fn to_affine_batch(points: &[Self]) -> Vec<Self::Affine>;
    /// The point whose affine form is `point` (no arithmetic).
    fn from_affine(point: &Self::Affine) -> Self;
    /// [`Point::from_bytes_on_curve`], kept in affine form (as decoded).
    fn affine_from_bytes_on_curve(bytes: &[u8]) -> Result<Self::Affine, Error>;
    /// `self + point`: a mixed addition, cheaper than [`Point::add`].
    fn add_affine(&self, point: &Self::Affine) -> Self;
    /// [`Point::msm`] over affine points (no conversion first).
    fn msm_affine(points: &[Self::Affine], scalars: &[Scalar]) -> Self;
    /// [`Point::msm_u128`] over affine points (no conversion first).
    fn msm_affine_u128(points: &[Self::Affine], scalars: &[u128]) -> Self;
    /// Multi-scalar multiplication `sum_i scalars[i] * points[i]` (blst's Pippenger,
    /// multi-threaded for large inputs). Panics if the lengths differ (a caller bug).
    fn msm(points: &[Self], scalars: &[Scalar]) -> Self;
    /// [`Point::msm`] with 128-bit scalars (random weights): half the doublings.
    /// Panics if the lengths differ (a caller bug).
    fn msm_u128(points: &[Self], scalars: &[u128]) -> Self {
        let scalars: Vec<Scalar> = scalars.iter().map(|s| Scalar::from_u128(*s)).collect();
        Self::msm(points, &scalars)
    }
    /// Hash to the curve per RFC 9380 (`XMD:SHA-256_SSWU_RO`) with domain separation tag `dst`.
    fn hash_to_curve(msg: &[u8], dst: &[u8]) -> Self;
    /// Canonical compressed encoding.
    fn to_bytes(&self) -> Vec<u8>;
    /// Strict decoding: length, encoding, curve membership, subgroup membership, non-identity.
    fn from_bytes(bytes: &[u8]) -> Result<Self, Error>;
    /// [`Point::from_bytes`] without the subgroup check, which is most of the
    /// cost of decoding: for points of which the caller checks only a combination
    /// with [`Point::in_group`] (the DKG's deal commitments, see
    /// `dkg::finalize`). Such a point may carry a component of small order, so
    /// it may only be added, compared and used in [`Point::msm`], never in a
    /// pairing or [`Point::mul`] (whose endomorphism speed-up assumes the
    /// subgroup).
    fn from_bytes_on_curve(bytes: &[u8]) -> Result<Self, Error>;
    /// Whether this point lies in the prime-order subgroup (every point from
    /// [`Point::from_bytes`] and arithmetic on such points does).
    fn in_group(&self) -> bool;
    /// A point of small prime order `l` on the curve (outside the prime-order
    /// subgroup), with `l`: what a Byzantine dealer can hide in commitments, for
    /// tests of the subgroup checks. `None` where the group has none.
    fn small_order_point() -> Option<(Self, u32)> {
        None
    }
}

/// A point with a table of its multiples (the comb of
/// [`Point::mul_generator`], for any base): each multiplication is then a few
/// dozen mixed additions with constant-time table reads, several times faster
/// than [`Point::mul`]. Worth it where one point is multiplied by many
/// scalars: thousands of simulated replicas signing the same message, each
/// with its own share. The products are the same points [`Point::mul`] gives.
pub struct FixedBase<P: Point> {
    base: P,
    limbs: Vec<u64>,
}

impl<P: Point> FixedBase<P> {
    /// The table of `base` (about 1,600 additions to build).
    pub fn new(base: P) -> Self {
        FixedBase {
            base,
            limbs: base.comb_limbs(),
        }
    }

    /// The base point.
    pub fn base(&self) -> &P {
        &self.base
    }

    /// `scalar * base`, charged as one multiplication.
    pub fn mul(&self, scalar: &Scalar) -> P {
        if self.limbs.is_empty() {
            return self.base.mul(scalar);
        }
        P::mul_comb(&self.limbs, scalar)
    }
}

impl<P: Point> fmt::Debug for FixedBase<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FixedBase({:?})", self.base)
    }
}
