//! The two BLS12-381 source groups G1 and G2 and the pairing, on blst.
//!
//! This module owns every `unsafe` call into blst's point functions. [`G1`] and
//! [`G2`] share one interface, [`Point`], so that the signature group can be a type
//! parameter (see [`crate::scheme`]). Decoding is strict: canonical compressed
//! encodings only, on the curve, in the prime-order subgroup, never the identity.

use crate::cost;
use crate::field::Scalar;
use crate::Error;
use blst::{
    blst_final_exp, blst_fp12, blst_fp12_is_one, blst_fp12_mul, blst_hash_to_g1, blst_hash_to_g2,
    blst_miller_loop, blst_p1, blst_p1_add_or_double, blst_p1_add_or_double_affine, blst_p1_affine,
    blst_p1_affine_in_g1, blst_p1_affine_is_inf, blst_p1_cneg, blst_p1_compress,
    blst_p1_from_affine, blst_p1_generator, blst_p1_in_g1, blst_p1_is_equal, blst_p1_is_inf,
    blst_p1_mult, blst_p1_to_affine, blst_p1_uncompress, blst_p1s_mult_pippenger,
    blst_p1s_mult_pippenger_scratch_sizeof, blst_p1s_to_affine, blst_p2, blst_p2_add_or_double,
    blst_p2_add_or_double_affine, blst_p2_affine, blst_p2_affine_in_g2, blst_p2_affine_is_inf,
    blst_p2_cneg, blst_p2_compress, blst_p2_from_affine, blst_p2_generator, blst_p2_in_g2,
    blst_p2_is_equal, blst_p2_is_inf, blst_p2_mult, blst_p2_to_affine, blst_p2_uncompress,
    blst_p2s_mult_pippenger, blst_p2s_mult_pippenger_scratch_sizeof, blst_p2s_to_affine,
    MultiPoint, BLST_ERROR,
};
use std::fmt;

/// Smallest MSM that blst's shared thread pool runs (below it, dispatching to
/// the pool costs more than it saves).
const POOL_MIN_POINTS: usize = 32;

thread_local! {
    /// Whether this thread's MSMs may use blst's shared thread pool.
    static MSM_POOL: std::cell::Cell<bool> = const { std::cell::Cell::new(true) };
}

/// Lets (`true`, the default) or stops (`false`) this thread's MSMs using
/// blst's shared thread pool. A driver that runs many members on threads of
/// its own (the simulator's workers) turns it off on them: otherwise every
/// MSM of every worker queues on one process-wide pool behind one lock, and
/// more workers burn more CPU for little more progress. Results are the same
/// either way.
pub fn set_msm_pool(enabled: bool) {
    MSM_POOL.with(|p| p.set(enabled));
}

fn msm_pool() -> bool {
    MSM_POOL.with(|p| p.get())
}

/// Bits per window of [`Point::mul_generator`]'s table: 5 bits make 51
/// additions (13 fewer than 4 bits) for 32 entries a window to read (313 KB in
/// G2), about a fifth less time per multiplication.
const COMB_BITS: usize = 5;

/// Entries per window of [`Point::mul_generator`]'s table.
const COMB_ENTRIES: usize = 1 << COMB_BITS;

/// Windows of [`Point::mul_generator`]'s table: scalars are below the group
/// order, so 255 bits.
const COMB_WINDOWS: usize = 255_usize.div_ceil(COMB_BITS);

/// Window `w` of the 32-byte little-endian `bytes`: bits `5 w .. 5 w + 5`.
fn comb_digit(bytes: &[u8; 32], w: usize) -> u64 {
    let bit = COMB_BITS * w;
    let low = u64::from(bytes[bit / 8]);
    let high = bytes.get(bit / 8 + 1).map_or(0, |b| u64::from(*b));
    ((low | high << 8) >> (bit % 8)) & (COMB_ENTRIES as u64 - 1)
}

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

macro_rules! group {
    ($name:ident, $doc:literal, $len:expr, $proj:ty, $aff:ty, $add:ident, $add_aff:ident, $cneg:ident, $mult:ident,
     $is_inf:ident, $is_equal:ident, $generator:ident, $hash:ident, $compress:ident,
     $uncompress:ident, $in_group:ident, $aff_is_inf:ident, $to_aff:ident, $from_aff:ident,
     $batch_aff:ident, $tag:expr, $mulfield:ident, $hashfield:ident, $proj_in_group:ident,
     $cofactor:expr, $small_order:expr, $pippenger:ident, $pippenger_scratch:ident) => {
        #[doc = $doc]
        #[derive(Clone, Copy)]
        pub struct $name(pub(crate) $proj);

        impl $name {
            /// `sum scalars_i * points_i` with `nbits`-bit little-endian
            /// scalars: on this thread (blst's Pippenger, without its shared
            /// thread pool) where [`msm_pool`] is off for it or the MSM is
            /// small, else on blst's pool.
            fn pippenger(points: &[$aff], scalars: &[u8], nbits: usize) -> $proj {
                if msm_pool() && points.len() >= POOL_MIN_POINTS {
                    return points.mult(scalars, nbits);
                }
                let p: [*const $aff; 2] = [points.as_ptr(), std::ptr::null()];
                let s: [*const u8; 2] = [scalars.as_ptr(), std::ptr::null()];
                // SAFETY: a pure size computation.
                let words = unsafe { $pippenger_scratch(points.len()) }.div_ceil(8);
                let mut scratch = vec![0u64; words];
                let mut out = <$proj>::default();
                // SAFETY: `points` holds `points.len()` valid affine points and
                // `scalars` as many `nbits`-bit scalars (both contiguous, as the
                // null-terminated pointer arrays say); the scratch has the size
                // blst asks for; `out` is a valid output point.
                unsafe {
                    $pippenger(
                        &mut out,
                        p.as_ptr(),
                        points.len(),
                        s.as_ptr(),
                        nbits,
                        scratch.as_mut_ptr(),
                    )
                };
                out
            }

            /// `sum scalars_i * points_i` with full scalars (untimed: the
            /// callers charge it).
            fn pippenger_255(points: &[$aff], scalars: &[Scalar]) -> $name {
                let mut bytes = Vec::with_capacity(32 * scalars.len());
                for s in scalars {
                    bytes.extend_from_slice(&s.to_bytes_le());
                }
                $name(Self::pippenger(points, &bytes, 255))
            }

            /// `sum scalars_i * points_i` with 128-bit scalars (untimed: the
            /// callers charge it).
            fn pippenger_128(points: &[$aff], scalars: &[u128]) -> $name {
                let mut bytes = Vec::with_capacity(16 * scalars.len());
                for s in scalars {
                    bytes.extend_from_slice(&s.to_le_bytes());
                }
                $name(Self::pippenger(points, &bytes, 128))
            }

            /// This point in affine coordinates (for pairings and MSM inputs).
            pub(crate) fn to_affine(self) -> $aff {
                let mut out = <$aff>::default();
                // SAFETY: valid input and output points.
                unsafe { $to_aff(&mut out, &self.0) };
                out
            }

            /// The fixed-base table of [`Point::mul_generator`] (see
            /// [`Self::comb_table`]).
            fn generator_table() -> &'static [u64] {
                static TABLE: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
                TABLE.get_or_init(|| Self::comb_table(<Self as Point>::generator()))
            }

            /// The comb table of `base`, as the limbs of affine points:
            /// entry `32 w + d` is `d * 32^w * base` (entry `32 w` the
            /// identity, all zeros in affine form, which blst's mixed
            /// addition skips).
            fn comb_table(mut base: Self) -> Vec<u64> {
                const LIMBS: usize = std::mem::size_of::<$aff>() / 8;
                let mut points = Vec::with_capacity(COMB_WINDOWS * COMB_ENTRIES);
                for _ in 0..COMB_WINDOWS {
                    let mut multiple = <Self as Point>::identity();
                    for _ in 0..COMB_ENTRIES {
                        points.push(multiple);
                        multiple = multiple.add(&base);
                    }
                    // `multiple` is now 32 * base: the next window's base.
                    base = multiple;
                }
                let mut limbs = Vec::with_capacity(points.len() * LIMBS);
                for entry in Self::batch_to_affine(&points) {
                    let entry: [u64; LIMBS] =
                        // SAFETY: blst's affine points are `repr(C)` arrays of
                        // 64-bit limbs without padding, `LIMBS` of them.
                        unsafe { std::mem::transmute::<$aff, [u64; LIMBS]>(entry) };
                    limbs.extend_from_slice(&entry);
                }
                limbs
            }

            /// `scalar` times the base of the comb table `table`.
            fn comb(table: &[u64], scalar: &Scalar) -> Self {
                const LIMBS: usize = std::mem::size_of::<$aff>() / 8;
                let bytes: [u8; 32] = scalar.to_bytes_le();
                let mut acc = <$proj>::default();
                for w in 0..COMB_WINDOWS {
                    let digit = comb_digit(&bytes, w);
                    // Constant-time selection: read every entry of the window,
                    // keep the one whose index is the (secret) digit.
                    let mut limbs = [0u64; LIMBS];
                    let window = &table[COMB_ENTRIES * LIMBS * w..COMB_ENTRIES * LIMBS * (w + 1)];
                    for (d, entry) in window.chunks_exact(LIMBS).enumerate() {
                        let mask = ((d as u64 ^ digit).wrapping_sub(1) >> 63).wrapping_neg();
                        for (l, e) in limbs.iter_mut().zip(entry) {
                            *l |= e & mask;
                        }
                    }
                    // SAFETY: `limbs` holds the limbs of one table entry, a valid
                    // affine point (or all zeros, the identity), of `$aff`'s size.
                    let chosen: $aff = unsafe { std::mem::transmute::<[u64; LIMBS], $aff>(limbs) };
                    let previous = acc;
                    // SAFETY: valid inputs and output; the mixed addition handles
                    // an identity on either side and equal inputs.
                    unsafe { $add_aff(&mut acc, &previous, &chosen) };
                }
                $name(acc)
            }

            /// Converts many points to affine with one shared inversion.
            pub(crate) fn batch_to_affine(points: &[Self]) -> Vec<$aff> {
                let mut out = vec![<$aff>::default(); points.len()];
                if points.is_empty() {
                    return out;
                }
                let ptrs: Vec<*const $proj> = points.iter().map(|p| &p.0 as *const $proj).collect();
                // SAFETY: `ptrs` holds `points.len()` valid pointers that outlive the call;
                // `out` has room for as many affine points.
                unsafe { $batch_aff(out.as_mut_ptr(), ptrs.as_ptr(), points.len()) };
                out
            }
        }

        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                // SAFETY: both are valid points.
                unsafe { $is_equal(&self.0, &other.0) }
            }
        }

        impl Eq for $name {}

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({})", Self::NAME, hex::encode(self.to_bytes()))
            }
        }

        impl Point for $name {
            const COMPRESSED_LEN: usize = $len;
            const NAME: &'static str = stringify!($name);

            fn identity() -> Self {
                $name(<$proj>::default())
            }

            fn generator() -> Self {
                // SAFETY: blst returns a pointer to a static, valid generator.
                $name(unsafe { *$generator() })
            }

            fn is_identity(&self) -> bool {
                // SAFETY: valid point.
                unsafe { $is_inf(&self.0) }
            }

            fn add(&self, other: &Self) -> Self {
                let mut out = <$proj>::default();
                // SAFETY: valid inputs and output; add_or_double handles equal inputs.
                unsafe { $add(&mut out, &self.0, &other.0) };
                $name(out)
            }

            fn neg(&self) -> Self {
                let mut out = self.0;
                // SAFETY: valid point, negated in place.
                unsafe { $cneg(&mut out, true) };
                $name(out)
            }

            fn mul(&self, scalar: &Scalar) -> Self {
                cost::record(|c| c.$mulfield += 1);
                let bytes = scalar.to_bytes_le();
                let mut out = <$proj>::default();
                // SAFETY: `bytes` holds 255 bits (32 bytes) little-endian as blst expects.
                unsafe { $mult(&mut out, &self.0, bytes.as_ptr(), 255) };
                $name(out)
            }

            fn mul_generator(scalar: &Scalar) -> Self {
                // Charged as the multiplication it replaces (the cost model's
                // dealer time stays as calibrated).
                cost::record(|c| c.$mulfield += 1);
                Self::comb(Self::generator_table(), scalar)
            }

            fn comb_limbs(&self) -> Vec<u64> {
                Self::comb_table(*self)
            }

            fn mul_comb(limbs: &[u64], scalar: &Scalar) -> Self {
                cost::record(|c| c.$mulfield += 1);
                Self::comb(limbs, scalar)
            }

            fn msm(points: &[Self], scalars: &[Scalar]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return points[0].mul(&scalars[0]),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(true, || {
                    Self::pippenger_255(&Self::batch_to_affine(points), scalars)
                })
            }

            fn msm_u128(points: &[Self], scalars: &[u128]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return points[0].mul(&Scalar::from_u128(scalars[0])),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(true, || {
                    Self::pippenger_128(&Self::batch_to_affine(points), scalars)
                })
            }

            type Affine = $aff;

            fn to_affine_batch(points: &[Self]) -> Vec<$aff> {
                Self::batch_to_affine(points)
            }

            fn from_affine(point: &$aff) -> Self {
                let mut p = <$proj>::default();
                // SAFETY: valid affine input (all zeros: the identity), valid output.
                unsafe { $from_aff(&mut p, point) };
                $name(p)
            }

            fn affine_from_bytes_on_curve(bytes: &[u8]) -> Result<$aff, Error> {
                Self::decode_affine(bytes, false)
            }

            fn add_affine(&self, point: &$aff) -> Self {
                let mut out = <$proj>::default();
                // SAFETY: valid inputs and output; the mixed addition handles
                // an identity on either side and equal inputs.
                unsafe { $add_aff(&mut out, &self.0, point) };
                $name(out)
            }

            fn msm_affine(points: &[$aff], scalars: &[Scalar]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return Self::from_affine(&points[0]).mul(&scalars[0]),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(true, || Self::pippenger_255(points, scalars))
            }

            fn msm_affine_u128(points: &[$aff], scalars: &[u128]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return Self::from_affine(&points[0]).mul(&Scalar::from_u128(scalars[0])),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(true, || Self::pippenger_128(points, scalars))
            }

            fn hash_to_curve(msg: &[u8], dst: &[u8]) -> Self {
                cost::record(|c| c.$hashfield += 1);
                let mut out = <$proj>::default();
                // SAFETY: pointers and lengths describe valid slices; no augmentation.
                unsafe {
                    $hash(
                        &mut out,
                        msg.as_ptr(),
                        msg.len(),
                        dst.as_ptr(),
                        dst.len(),
                        std::ptr::null(),
                        0,
                    )
                };
                $name(out)
            }

            fn to_bytes(&self) -> Vec<u8> {
                let mut out = vec![0u8; $len];
                // SAFETY: `out` has exactly the compressed length blst writes.
                unsafe { $compress(out.as_mut_ptr(), &self.0) };
                out
            }

            fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
                Self::decode(bytes, true)
            }

            fn from_bytes_on_curve(bytes: &[u8]) -> Result<Self, Error> {
                Self::decode(bytes, false)
            }

            fn in_group(&self) -> bool {
                // SAFETY: valid point.
                unsafe { $proj_in_group(&self.0) }
            }

            fn small_order_point() -> Option<(Self, u32)> {
                let cofactor = hex::decode($cofactor).ok()?;
                let order = hex::decode(GROUP_ORDER).ok()?;
                let l: u32 = $small_order;
                // The cofactor with every factor l taken out: `m * r * P` lies in
                // the part of order a power of l (which need not be cyclic).
                let divide = |k: &[u8]| -> (Vec<u8>, u32) {
                    let mut rest = 0u32;
                    let q = k
                        .iter()
                        .map(|b| {
                            let acc = (rest << 8) | u32::from(*b);
                            rest = acc % l;
                            (acc / l) as u8
                        })
                        .collect();
                    (q, rest)
                };
                let mut m = cofactor;
                loop {
                    let (q, rest) = divide(&m);
                    if rest != 0 {
                        break;
                    }
                    m = q;
                }
                let l_bytes = l.to_be_bytes();
                // x = i for the first i whose point has an l-part; multiply it
                // by l until one more step would give the identity.
                for i in 1..=255u8 {
                    let mut bytes = vec![0u8; $len];
                    bytes[0] = 0x80;
                    bytes[$len - 1] = i;
                    let Ok(p) = Self::decode(&bytes, false) else {
                        continue;
                    };
                    let mut q = p.times_integer(&order).times_integer(&m);
                    if q.is_identity() {
                        continue;
                    }
                    loop {
                        let next = q.times_integer(&l_bytes);
                        if next.is_identity() {
                            return Some((q, l));
                        }
                        q = next;
                    }
                }
                None
            }
        }

        impl $name {
            fn decode(bytes: &[u8], check_group: bool) -> Result<Self, Error> {
                Self::decode_affine(bytes, check_group).map(|aff| Self::from_affine(&aff))
            }

            /// Strict decoding to affine form (the subgroup check only with
            /// `check_group`).
            fn decode_affine(bytes: &[u8], check_group: bool) -> Result<$aff, Error> {
                let what = Self::NAME;
                if bytes.len() != $len {
                    return Err(Error::WrongLength {
                        what,
                        expected: $len,
                        got: bytes.len(),
                    });
                }
                let mut aff = <$aff>::default();
                // SAFETY: `bytes` has the compressed length blst reads.
                match unsafe { $uncompress(&mut aff, bytes.as_ptr()) } {
                    BLST_ERROR::BLST_SUCCESS => {}
                    BLST_ERROR::BLST_POINT_NOT_ON_CURVE => return Err(Error::NotOnCurve { what }),
                    BLST_ERROR::BLST_POINT_NOT_IN_GROUP => {
                        return Err(Error::NotInSubgroup { what })
                    }
                    _ => return Err(Error::BadEncoding { what }),
                }
                // SAFETY: `aff` was written by a successful uncompress.
                if unsafe { $aff_is_inf(&aff) } {
                    return Err(Error::IdentityPoint { what });
                }
                // SAFETY: as above.
                if check_group && !unsafe { $in_group(&aff) } {
                    return Err(Error::NotInSubgroup { what });
                }
                Ok(aff)
            }

            /// `k * self` for an integer `k` (big-endian) of any length, by
            /// double-and-add: valid off the subgroup too (no endomorphism).
            pub(crate) fn times_integer(&self, k: &[u8]) -> Self {
                let mut acc = Self::identity();
                for byte in k {
                    for bit in (0..8).rev() {
                        acc = acc.add(&acc);
                        if byte >> bit & 1 == 1 {
                            acc = acc.add(self);
                        }
                    }
                }
                acc
            }
        }
    };
}

group!(
    G1,
    "A point of G1 (48-byte compressed encoding).",
    48,
    blst_p1,
    blst_p1_affine,
    blst_p1_add_or_double,
    blst_p1_add_or_double_affine,
    blst_p1_cneg,
    blst_p1_mult,
    blst_p1_is_inf,
    blst_p1_is_equal,
    blst_p1_generator,
    blst_hash_to_g1,
    blst_p1_compress,
    blst_p1_uncompress,
    blst_p1_affine_in_g1,
    blst_p1_affine_is_inf,
    blst_p1_to_affine,
    blst_p1_from_affine,
    blst_p1s_to_affine,
    cost::Group::G1,
    mul_g1,
    hash_g1,
    blst_p1_in_g1,
    "396c8c005555e1568c00aaab0000aaab",
    3,
    blst_p1s_mult_pippenger,
    blst_p1s_mult_pippenger_scratch_sizeof
);

group!(
    G2,
    "A point of G2 (96-byte compressed encoding).",
    96,
    blst_p2,
    blst_p2_affine,
    blst_p2_add_or_double,
    blst_p2_add_or_double_affine,
    blst_p2_cneg,
    blst_p2_mult,
    blst_p2_is_inf,
    blst_p2_is_equal,
    blst_p2_generator,
    blst_hash_to_g2,
    blst_p2_compress,
    blst_p2_uncompress,
    blst_p2_affine_in_g2,
    blst_p2_affine_is_inf,
    blst_p2_to_affine,
    blst_p2_from_affine,
    blst_p2s_to_affine,
    cost::Group::G2,
    mul_g2,
    hash_g2,
    blst_p2_in_g2,
    "05d543a95414e7f1091d50792876a202cd91de4547085abaa68a205b2e5a7ddfa628f1cb4d9e82ef21537e293a6691ae1616ec6e786f0c70cf1c38e31c7238e5",
    13,
    blst_p2s_mult_pippenger,
    blst_p2s_mult_pippenger_scratch_sizeof
);

/// The order `r` of the prime-order subgroups, big-endian hex.
const GROUP_ORDER: &str = "73eda753299d7d483339d80809a1d80553bda402fffe5bfeffffffff00000001";

/// Whether `prod_i e(g1_i, g2_i) == 1` in G_T. Terms with an identity point contribute 1.
pub fn pairing_product_is_one(terms: &[(G1, G2)]) -> bool {
    cost::timed(false, || pairing_product_is_one_untimed(terms))
}

fn pairing_product_is_one_untimed(terms: &[(G1, G2)]) -> bool {
    let mut acc: Option<blst_fp12> = None;
    for (p, q) in terms {
        if p.is_identity() || q.is_identity() {
            continue;
        }
        let (pa, qa) = (p.to_affine(), q.to_affine());
        let mut ml = blst_fp12::default();
        // SAFETY: valid affine points, valid output.
        unsafe { blst_miller_loop(&mut ml, &qa, &pa) };
        acc = Some(match acc {
            None => ml,
            Some(a) => {
                let mut out = blst_fp12::default();
                // SAFETY: valid Fp12 inputs and output.
                unsafe { blst_fp12_mul(&mut out, &a, &ml) };
                out
            }
        });
    }
    let Some(acc) = acc else { return true };
    cost::record(|c| {
        c.miller_loops += terms.len() as u64;
        c.final_exps += 1;
    });
    let mut out = blst_fp12::default();
    // SAFETY: valid Fp12 input and output.
    unsafe { blst_final_exp(&mut out, &acc) };
    // SAFETY: valid Fp12.
    unsafe { blst_fp12_is_one(&out) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    /// A small-order point decodes on the curve, fails the subgroup check, and
    /// strict decoding refuses it; points of the subgroup pass both ways.
    fn small_order<P: Point>(want_l: u32) {
        let (t, l) = P::small_order_point().unwrap();
        assert_eq!(l, want_l);
        assert!(!t.is_identity() && !t.in_group());
        let mut acc = P::identity();
        for _ in 0..l {
            acc = acc.add(&t);
        }
        assert!(acc.is_identity(), "order {l}");
        // A subgroup point plus the small-order one: on the curve, off the group.
        let g = P::generator().mul(&Scalar::from_u64(7));
        assert!(g.in_group());
        let off = g.add(&t);
        assert!(!off.in_group());
        let bytes = off.to_bytes();
        assert!(matches!(
            P::from_bytes(&bytes),
            Err(Error::NotInSubgroup { .. })
        ));
        assert_eq!(P::from_bytes_on_curve(&bytes).unwrap(), off);
        assert_eq!(P::from_bytes_on_curve(&g.to_bytes()).unwrap(), g);
        // Wrong lengths are refused by both decoders.
        assert!(P::from_bytes_on_curve(&bytes[1..]).is_err());
    }

    #[test]
    fn small_order_points_are_refused_by_strict_decoding_only() {
        small_order::<G1>(3);
        small_order::<G2>(13);
    }

    fn roundtrip<P: Point>() {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let p = P::generator().mul(&Scalar::random(&mut rng));
        let bytes = p.to_bytes();
        assert_eq!(bytes.len(), P::COMPRESSED_LEN);
        assert_eq!(P::from_bytes(&bytes).unwrap(), p);
        assert!(matches!(
            P::from_bytes(&bytes[1..]),
            Err(Error::WrongLength { .. })
        ));
        assert!(matches!(
            P::from_bytes(&P::identity().to_bytes()),
            Err(Error::IdentityPoint { .. })
        ));
        // x = 0 with the compression bit set is not a point of either curve.
        let mut bad = vec![0u8; P::COMPRESSED_LEN];
        bad[0] = 0x80;
        assert!(P::from_bytes(&bad).is_err());
        // Missing compression flag.
        let mut uncompressed_flag = bytes.clone();
        uncompressed_flag[0] &= 0x7f;
        assert!(P::from_bytes(&uncompressed_flag).is_err());
    }

    #[test]
    fn encodings_roundtrip_and_reject_garbage() {
        roundtrip::<G1>();
        roundtrip::<G2>();
    }

    /// Finds a compressed encoding of a curve point outside the prime-order subgroup.
    fn off_subgroup<P: Point>() -> Vec<u8> {
        for x in 1u8..=255 {
            let mut bytes = vec![0u8; P::COMPRESSED_LEN];
            bytes[0] = 0x80;
            *bytes.last_mut().unwrap() = x;
            if let Err(Error::NotInSubgroup { .. }) = P::from_bytes(&bytes) {
                return bytes;
            }
        }
        panic!("no off-subgroup point found");
    }

    #[test]
    fn rejects_points_outside_the_subgroup() {
        off_subgroup::<G1>();
        off_subgroup::<G2>();
    }

    fn mul_generator_matches_mul<P: Point>() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let mut scalars = vec![Scalar::ZERO, Scalar::one(), -Scalar::one()];
        scalars.extend((0..32).map(|_| Scalar::random(&mut rng)));
        for s in &scalars {
            assert_eq!(P::mul_generator(s), P::generator().mul(s), "{s:?}");
        }
    }

    fn fixed_base_matches_mul<P: Point>() {
        let mut rng = ChaCha20Rng::seed_from_u64(8);
        let base = P::generator().mul(&Scalar::random(&mut rng));
        let table = FixedBase::new(base);
        assert_eq!(table.base(), &base);
        let mut scalars = vec![Scalar::ZERO, Scalar::one(), -Scalar::one()];
        scalars.extend((0..32).map(|_| Scalar::random(&mut rng)));
        for s in &scalars {
            assert_eq!(table.mul(s), base.mul(s), "{s:?}");
        }
        let identity = FixedBase::new(P::identity());
        assert!(identity.mul(&Scalar::random(&mut rng)).is_identity());
    }

    #[test]
    fn a_fixed_base_table_gives_the_products_of_mul() {
        fixed_base_matches_mul::<G1>();
        fixed_base_matches_mul::<G2>();
    }

    #[test]
    fn comb_digits_rebuild_the_scalar() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        for s in [
            -Scalar::one(),
            Scalar::random(&mut rng),
            Scalar::random(&mut rng),
        ] {
            let bytes = s.to_bytes_le();
            let mut rebuilt = [0u8; 32];
            for w in 0..COMB_WINDOWS {
                let digit = comb_digit(&bytes, w);
                assert!(digit < COMB_ENTRIES as u64);
                for b in 0..COMB_BITS {
                    let bit = COMB_BITS * w + b;
                    if digit >> b & 1 == 1 {
                        rebuilt[bit / 8] |= 1 << (bit % 8);
                    }
                }
            }
            assert_eq!(rebuilt, bytes);
        }
    }

    #[test]
    fn fixed_base_multiplication_matches_blst() {
        mul_generator_matches_mul::<G1>();
        mul_generator_matches_mul::<G2>();
    }

    #[test]
    fn msm_matches_naive_sum() {
        // With blst's pool (from 32 points) and on this thread alone.
        for pool in [true, false] {
            set_msm_pool(pool);
            msm_matches_naive_sum_on_sizes();
        }
        set_msm_pool(true);
    }

    fn msm_matches_naive_sum_on_sizes() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        for n in [0usize, 1, 2, 5, 31, 40] {
            let points: Vec<G1> = (0..n)
                .map(|_| G1::generator().mul(&Scalar::random(&mut rng)))
                .collect();
            let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
            let naive = points
                .iter()
                .zip(&scalars)
                .fold(G1::identity(), |acc, (p, s)| acc.add(&p.mul(s)));
            assert_eq!(G1::msm(&points, &scalars), naive);
            let points2: Vec<G2> = (0..n)
                .map(|_| G2::generator().mul(&Scalar::random(&mut rng)))
                .collect();
            let naive2 = points2
                .iter()
                .zip(&scalars)
                .fold(G2::identity(), |acc, (p, s)| acc.add(&p.mul(s)));
            assert_eq!(G2::msm(&points2, &scalars), naive2);
            let short: Vec<u128> = (0..n).map(|i| (i as u128 + 3) << 100 | 12345).collect();
            let as_scalars: Vec<Scalar> = short.iter().map(|s| Scalar::from_u128(*s)).collect();
            assert_eq!(G1::msm_u128(&points, &short), G1::msm(&points, &as_scalars));
            assert_eq!(
                G2::msm_u128(&points2, &short),
                G2::msm(&points2, &as_scalars)
            );
        }
    }

    #[test]
    fn pairing_is_bilinear() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let a = Scalar::random(&mut rng);
        let b = Scalar::random(&mut rng);
        let lhs = (G1::generator().mul(&a), G2::generator().mul(&b));
        let rhs = (G1::generator().mul(&(a * b)).neg(), G2::generator());
        assert!(pairing_product_is_one(&[lhs, rhs]));
        let wrong = (G1::generator().mul(&(a + b)).neg(), G2::generator());
        assert!(!pairing_product_is_one(&[lhs, wrong]));
    }
}
