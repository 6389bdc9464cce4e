//! The BLS12-381 scalar field F_r, on blst's Montgomery-form `blst_fr` arithmetic.
//!
//! This module owns every `unsafe` call into blst's field functions; everything
//! above it (FFT, polynomials, Lagrange coefficients, DKG) is safe code over
//! [`Scalar`]. Values are always fully reduced, so equality of the Montgomery
//! limbs is equality of field elements.

use blst::{
    blst_fr, blst_fr_add, blst_fr_cneg, blst_fr_ct_bfly, blst_fr_eucl_inverse, blst_fr_from_scalar,
    blst_fr_from_uint64, blst_fr_gs_bfly, blst_fr_mul, blst_fr_sqr, blst_fr_sub, blst_scalar,
    blst_scalar_fr_check, blst_scalar_from_bendian, blst_scalar_from_fr, blst_scalar_from_lendian,
};
use rand_core::RngCore;
use std::fmt;
use std::ops::{Add, AddAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// Two-adicity of r - 1: F_r holds a primitive 2^32-th root of unity.
pub const TWO_ADICITY: u32 = 32;

/// (r - 1) / 2^32 as little-endian 64-bit limbs; 7^this is a primitive 2^32-th root of unity.
const TRACE: [u64; 4] = [
    0xfffe_5bfe_ffff_ffff,
    0x09a1_d805_53bd_a402,
    0x299d_7d48_3339_d808,
    0x0000_0000_73ed_a753,
];

/// An element of the BLS12-381 scalar field.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Scalar(blst_fr);

impl std::hash::Hash for Scalar {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.l.hash(state);
    }
}

impl Scalar {
    /// The additive identity.
    pub const ZERO: Scalar = Scalar(blst_fr { l: [0; 4] });

    /// The multiplicative identity.
    pub fn one() -> Scalar {
        Scalar::from_u64(1)
    }

    /// The field element `v`.
    pub fn from_u64(v: u64) -> Scalar {
        let mut out = blst_fr::default();
        let limbs = [v, 0, 0, 0];
        // SAFETY: `out` is a valid blst_fr and `limbs` holds the 4 limbs blst reads.
        unsafe { blst_fr_from_uint64(&mut out, limbs.as_ptr()) };
        Scalar(out)
    }

    /// The field element `v` (always < r since r > 2^128).
    pub fn from_u128(v: u128) -> Scalar {
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(&v.to_le_bytes());
        Scalar::from_bytes_le(&bytes).expect("2^128 < r")
    }

    /// Parses a canonical big-endian encoding (value < r); `None` otherwise.
    pub fn from_bytes_be(bytes: &[u8; 32]) -> Option<Scalar> {
        let mut s = blst_scalar::default();
        // SAFETY: `bytes` is 32 readable bytes, `s` a valid output.
        unsafe { blst_scalar_from_bendian(&mut s, bytes.as_ptr()) };
        Self::from_blst_scalar(&s)
    }

    /// Parses a canonical little-endian encoding (value < r); `None` otherwise.
    pub fn from_bytes_le(bytes: &[u8; 32]) -> Option<Scalar> {
        let mut s = blst_scalar::default();
        // SAFETY: `bytes` is 32 readable bytes, `s` a valid output.
        unsafe { blst_scalar_from_lendian(&mut s, bytes.as_ptr()) };
        Self::from_blst_scalar(&s)
    }

    fn from_blst_scalar(s: &blst_scalar) -> Option<Scalar> {
        // SAFETY: `s` is a valid blst_scalar.
        if !unsafe { blst_scalar_fr_check(s) } && s.b != [0u8; 32] {
            return None;
        }
        let mut out = blst_fr::default();
        // SAFETY: `s` is reduced (checked above), `out` a valid output.
        unsafe { blst_fr_from_scalar(&mut out, s) };
        Some(Scalar(out))
    }

    /// Canonical big-endian encoding.
    pub fn to_bytes_be(&self) -> [u8; 32] {
        let mut le = self.to_bytes_le();
        le.reverse();
        le
    }

    /// Canonical little-endian encoding (the scalar format blst's multi-scalar
    /// multiplication reads).
    pub fn to_bytes_le(&self) -> [u8; 32] {
        let mut s = blst_scalar::default();
        // SAFETY: both are valid blst values.
        unsafe { blst_scalar_from_fr(&mut s, &self.0) };
        s.b
    }

    /// A uniformly random field element (rejection sampling on 255-bit strings).
    pub fn random<R: RngCore + ?Sized>(rng: &mut R) -> Scalar {
        loop {
            let mut bytes = [0u8; 32];
            rng.fill_bytes(&mut bytes);
            bytes[31] &= 0x7f;
            if let Some(s) = Scalar::from_bytes_le(&bytes) {
                return s;
            }
        }
    }

    /// A uniformly random non-zero 128-bit weight (for batch verification).
    pub fn random_u128<R: RngCore + ?Sized>(rng: &mut R) -> Scalar {
        loop {
            let mut bytes = [0u8; 16];
            rng.fill_bytes(&mut bytes);
            let v = u128::from_le_bytes(bytes);
            if v != 0 {
                return Scalar::from_u128(v);
            }
        }
    }

    /// Whether this is zero.
    pub fn is_zero(&self) -> bool {
        *self == Scalar::ZERO
    }

    /// The square of this element.
    pub fn square(&self) -> Scalar {
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr input and output.
        unsafe { blst_fr_sqr(&mut out, &self.0) };
        Scalar(out)
    }

    /// The inverse, or `None` for zero.
    pub fn inverse(&self) -> Option<Scalar> {
        if self.is_zero() {
            return None;
        }
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr input and output; input is non-zero.
        unsafe { blst_fr_eucl_inverse(&mut out, &self.0) };
        Some(Scalar(out))
    }

    /// `self^exp` for a little-endian 256-bit exponent.
    pub fn pow_limbs(&self, exp: &[u64; 4]) -> Scalar {
        let mut acc = Scalar::one();
        for limb in exp.iter().rev() {
            for bit in (0..64).rev() {
                acc = acc.square();
                if (limb >> bit) & 1 == 1 {
                    acc *= *self;
                }
            }
        }
        acc
    }

    /// `self^exp`.
    pub fn pow(&self, exp: u64) -> Scalar {
        self.pow_limbs(&[exp, 0, 0, 0])
    }

    /// A primitive `2^log_size`-th root of unity (`log_size <= 32`).
    pub fn root_of_unity(log_size: u32) -> Option<Scalar> {
        if log_size > TWO_ADICITY {
            return None;
        }
        let mut w = Scalar::from_u64(7).pow_limbs(&TRACE);
        for _ in log_size..TWO_ADICITY {
            w = w.square();
        }
        Some(w)
    }

    /// Cooley-Tukey butterfly in place: `(a, b) <- (a + w b, a - w b)`.
    #[inline]
    pub fn butterfly(a: &mut Scalar, b: &mut Scalar, w: &Scalar) {
        // SAFETY: three valid, distinct blst_fr values (a and b are distinct &mut).
        unsafe { blst_fr_ct_bfly(&mut a.0, &mut b.0, &w.0) };
    }

    /// Gentleman-Sande butterfly in place: `(a, b) <- (a + b, (a - b) w)`.
    #[inline]
    pub fn butterfly_gs(a: &mut Scalar, b: &mut Scalar, w: &Scalar) {
        // SAFETY: three valid, distinct blst_fr values (a and b are distinct &mut).
        unsafe { blst_fr_gs_bfly(&mut a.0, &mut b.0, &w.0) };
    }
}

/// Inverts every element in place with one field inversion (Montgomery's trick).
/// Returns `false` (and leaves `values` unchanged) if any element is zero.
pub fn batch_inverse(values: &mut [Scalar]) -> bool {
    let mut prefix = Vec::with_capacity(values.len());
    let mut acc = Scalar::one();
    for v in values.iter() {
        if v.is_zero() {
            return false;
        }
        prefix.push(acc);
        acc *= *v;
    }
    let mut inv = acc.inverse().expect("product of non-zero elements");
    for (v, p) in values.iter_mut().zip(prefix).rev() {
        let next = inv * *v;
        *v = inv * p;
        inv = next;
    }
    true
}

impl fmt::Debug for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{}", hex::encode(self.to_bytes_be()))
    }
}

impl Add for Scalar {
    type Output = Scalar;
    #[inline]
    fn add(self, rhs: Scalar) -> Scalar {
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr inputs and output.
        unsafe { blst_fr_add(&mut out, &self.0, &rhs.0) };
        Scalar(out)
    }
}

impl Sub for Scalar {
    type Output = Scalar;
    #[inline]
    fn sub(self, rhs: Scalar) -> Scalar {
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr inputs and output.
        unsafe { blst_fr_sub(&mut out, &self.0, &rhs.0) };
        Scalar(out)
    }
}

impl Mul for Scalar {
    type Output = Scalar;
    #[inline]
    fn mul(self, rhs: Scalar) -> Scalar {
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr inputs and output.
        unsafe { blst_fr_mul(&mut out, &self.0, &rhs.0) };
        Scalar(out)
    }
}

impl Neg for Scalar {
    type Output = Scalar;
    #[inline]
    fn neg(self) -> Scalar {
        let mut out = blst_fr::default();
        // SAFETY: valid blst_fr input and output.
        unsafe { blst_fr_cneg(&mut out, &self.0, true) };
        Scalar(out)
    }
}

impl AddAssign for Scalar {
    #[inline]
    fn add_assign(&mut self, rhs: Scalar) {
        *self = *self + rhs;
    }
}

impl SubAssign for Scalar {
    #[inline]
    fn sub_assign(&mut self, rhs: Scalar) {
        *self = *self - rhs;
    }
}

impl MulAssign for Scalar {
    #[inline]
    fn mul_assign(&mut self, rhs: Scalar) {
        *self = *self * rhs;
    }
}

impl std::iter::Sum for Scalar {
    fn sum<I: Iterator<Item = Scalar>>(iter: I) -> Scalar {
        iter.fold(Scalar::ZERO, |a, b| a + b)
    }
}

impl std::iter::Product for Scalar {
    fn product<I: Iterator<Item = Scalar>>(iter: I) -> Scalar {
        iter.fold(Scalar::one(), |a, b| a * b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn arithmetic_identities() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        for _ in 0..50 {
            let a = Scalar::random(&mut rng);
            let b = Scalar::random(&mut rng);
            assert_eq!(a + b - b, a);
            assert_eq!(a * b, b * a);
            assert_eq!(a + (-a), Scalar::ZERO);
            if !a.is_zero() {
                assert_eq!(a * a.inverse().unwrap(), Scalar::one());
            }
            assert_eq!(Scalar::from_bytes_be(&a.to_bytes_be()), Some(a));
            assert_eq!(Scalar::from_bytes_le(&a.to_bytes_le()), Some(a));
        }
        assert_eq!(
            Scalar::from_u64(6) * Scalar::from_u64(7),
            Scalar::from_u64(42)
        );
        assert_eq!(Scalar::ZERO.inverse(), None);
    }

    #[test]
    fn rejects_non_canonical_encodings() {
        assert!(Scalar::from_bytes_be(&[0xff; 32]).is_none());
        let r_minus_one = -Scalar::one();
        assert!(Scalar::from_bytes_be(&r_minus_one.to_bytes_be()).is_some());
        // r itself is not canonical.
        let mut r = r_minus_one.to_bytes_be();
        r[31] += 1;
        assert!(Scalar::from_bytes_be(&r).is_none());
    }

    #[test]
    fn roots_of_unity_have_exact_order() {
        let w = Scalar::root_of_unity(TWO_ADICITY).unwrap();
        let mut x = w;
        for _ in 0..31 {
            assert_ne!(x, Scalar::one());
            x = x.square();
        }
        assert_ne!(x, Scalar::one());
        assert_eq!(x.square(), Scalar::one());
        let w8 = Scalar::root_of_unity(3).unwrap();
        assert_eq!(w8.pow(8), Scalar::one());
        assert_ne!(w8.pow(4), Scalar::one());
        assert!(Scalar::root_of_unity(33).is_none());
    }

    #[test]
    fn batch_inverse_matches_single_inverses() {
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let values: Vec<Scalar> = (0..37).map(|_| Scalar::random(&mut rng)).collect();
        let mut inv = values.clone();
        assert!(batch_inverse(&mut inv));
        for (v, i) in values.iter().zip(&inv) {
            assert_eq!(v.inverse().unwrap(), *i);
        }
        let mut with_zero = vec![Scalar::one(), Scalar::ZERO];
        assert!(!batch_inverse(&mut with_zero));
        assert_eq!(with_zero, vec![Scalar::one(), Scalar::ZERO]);
    }
}
