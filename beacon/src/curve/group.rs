//! [`G1`] and [`G2`] on blst: the `group!` macro implements [`Point`] once for
//! both (arithmetic, MSMs on blst's Pippenger, the fixed-base comb, hashing
//! to the curve, strict encoding and decoding, the small-order points of the
//! tests), and holds every `unsafe` call into blst's point functions.

use super::comb::{comb_digit, COMB_ENTRIES, COMB_WINDOWS};
use super::msm_pool::{msm_pool, POOL_MIN_POINTS};
use super::point::Point;
use crate::cost;
use crate::field::Scalar;
use crate::Error;
use blst::{
    blst_hash_to_g1, blst_hash_to_g2, blst_p1, blst_p1_add_or_double, blst_p1_add_or_double_affine,
    blst_p1_affine, blst_p1_affine_in_g1, blst_p1_affine_is_inf, blst_p1_cneg, blst_p1_compress,
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

        impl $name {
            /// The point's projective coordinates as they lie in memory: equal
            /// bytes are equal points (not conversely). Unlike
            /// [`Point::to_bytes`], no field inversion: what the simulator's
            /// fingerprint of a message uses ([`crate::wire::encoded_len_and_fingerprint`]).
            pub(crate) fn projective_bytes(&self) -> &[u8] {
                // SAFETY: blst's projective point is plain data (`repr(C)`,
                // 64-bit limbs only, so no padding), valid for its whole size.
                unsafe {
                    std::slice::from_raw_parts(
                        (&self.0 as *const $proj).cast::<u8>(),
                        std::mem::size_of::<$proj>(),
                    )
                }
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
                cost::timed(cost::Timed::Mul, || unsafe {
                    $mult(&mut out, &self.0, bytes.as_ptr(), 255)
                });
                $name(out)
            }

            fn mul_generator(scalar: &Scalar) -> Self {
                // Charged as the multiplication it replaces (the cost model's
                // dealer time stays as calibrated).
                cost::record(|c| c.$mulfield += 1);
                cost::timed(cost::Timed::Mul, || Self::comb(Self::generator_table(), scalar))
            }

            fn comb_limbs(&self) -> Vec<u64> {
                Self::comb_table(*self)
            }

            fn mul_comb(limbs: &[u64], scalar: &Scalar) -> Self {
                cost::record(|c| c.$mulfield += 1);
                cost::timed(cost::Timed::Mul, || Self::comb(limbs, scalar))
            }

            fn msm(points: &[Self], scalars: &[Scalar]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return points[0].mul(&scalars[0]),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(cost::Timed::Msm, || {
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
                cost::timed(cost::Timed::Msm, || {
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
                cost::timed(cost::Timed::Msm, || Self::pippenger_255(points, scalars))
            }

            fn msm_affine_u128(points: &[$aff], scalars: &[u128]) -> Self {
                assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
                match points.len() {
                    0 => return Self::identity(),
                    1 => return Self::from_affine(&points[0]).mul(&Scalar::from_u128(scalars[0])),
                    n => cost::record_msm($tag, n),
                }
                cost::timed(cost::Timed::Msm, || Self::pippenger_128(points, scalars))
            }

            fn hash_to_curve(msg: &[u8], dst: &[u8]) -> Self {
                cost::record(|c| c.$hashfield += 1);
                let mut out = <$proj>::default();
                // SAFETY: pointers and lengths describe valid slices; no augmentation.
                cost::timed(cost::Timed::Hash, || unsafe {
                    $hash(
                        &mut out,
                        msg.as_ptr(),
                        msg.len(),
                        dst.as_ptr(),
                        dst.len(),
                        std::ptr::null(),
                        0,
                    )
                });
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
