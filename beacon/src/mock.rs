//! INSECURE stand-in scheme for protocol-only simulations far beyond 4096
//! signers. Never use it for anything real.
//!
//! A "point" is its own discrete logarithm: [`MockPoint`] wraps a scalar `x`
//! standing for `g^x`, group addition is scalar addition, and the "pairing"
//! `e(g^a, g^b)` is the scalar `a b`. Every algebraic identity the protocol relies
//! on (threshold interpolation, Feldman checks, batch verification) still holds,
//! so DKG, aggregation and verification behave exactly as with BLS, at the cost of
//! field multiplications. Anyone can forge anything: the scheme id says so
//! (`insecure-mock`), and it is never a default.

use crate::curve::Point;
use crate::field::Scalar;
use crate::scheme::{Scheme, SchemeId};
use crate::Error;
use sha2::{Digest, Sha256};

/// A point of the mock group: the scalar `x` standing for `g^x`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MockPoint(pub Scalar);

impl Point for MockPoint {
    const COMPRESSED_LEN: usize = 32;
    const NAME: &'static str = "MockPoint";

    fn identity() -> Self {
        MockPoint(Scalar::ZERO)
    }

    fn generator() -> Self {
        MockPoint(Scalar::one())
    }

    fn is_identity(&self) -> bool {
        self.0.is_zero()
    }

    fn add(&self, other: &Self) -> Self {
        MockPoint(self.0 + other.0)
    }

    fn neg(&self) -> Self {
        MockPoint(-self.0)
    }

    fn mul(&self, scalar: &Scalar) -> Self {
        MockPoint(self.0 * *scalar)
    }

    fn msm(points: &[Self], scalars: &[Scalar]) -> Self {
        assert_eq!(points.len(), scalars.len(), "msm: length mismatch");
        MockPoint(points.iter().zip(scalars).map(|(p, s)| p.0 * *s).sum())
    }

    type Affine = MockPoint;

    fn to_affine_batch(points: &[Self]) -> Vec<Self> {
        points.to_vec()
    }

    fn from_affine(point: &Self) -> Self {
        *point
    }

    fn affine_from_bytes_on_curve(bytes: &[u8]) -> Result<Self, Error> {
        Self::from_bytes_on_curve(bytes)
    }

    fn add_affine(&self, point: &Self) -> Self {
        self.add(point)
    }

    fn msm_affine(points: &[Self], scalars: &[Scalar]) -> Self {
        Self::msm(points, scalars)
    }

    fn msm_affine_u128(points: &[Self], scalars: &[u128]) -> Self {
        Self::msm_u128(points, scalars)
    }

    fn hash_to_curve(msg: &[u8], dst: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(dst);
        h.update(msg);
        let mut bytes: [u8; 32] = h.finalize().into();
        bytes[0] &= 0x3f; // below 2^254 < r
        MockPoint(Scalar::from_bytes_be(&bytes).expect("reduced"))
    }

    fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes_be().to_vec()
    }

    fn from_bytes_on_curve(bytes: &[u8]) -> Result<Self, Error> {
        Self::from_bytes(bytes)
    }

    fn in_group(&self) -> bool {
        true
    }

    fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        let what = Self::NAME;
        let arr: [u8; 32] = bytes.try_into().map_err(|_| Error::WrongLength {
            what,
            expected: 32,
            got: bytes.len(),
        })?;
        let s = Scalar::from_bytes_be(&arr).ok_or(Error::NonCanonicalScalar)?;
        if s.is_zero() {
            return Err(Error::IdentityPoint { what });
        }
        Ok(MockPoint(s))
    }
}

/// The insecure mock scheme (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InsecureMock;

impl Scheme for InsecureMock {
    type PublicKey = MockPoint;
    type Signature = MockPoint;
    const ID: SchemeId = SchemeId::InsecureMock;
    const DST: &'static [u8] = b"SBFT-BEACON-INSECURE-MOCK";

    fn pairing_product_is_one(terms: &[(MockPoint, MockPoint)]) -> bool {
        terms
            .iter()
            .map(|(a, b)| a.0 * b.0)
            .sum::<Scalar>()
            .is_zero()
    }

    /// The mock's "pairing" is a product of scalars, its target group their
    /// sum: a part is the sum of its terms' products.
    type MillerProduct = Scalar;

    fn miller_product(terms: &[(MockPoint, MockPoint)]) -> Scalar {
        terms.iter().map(|(a, b)| a.0 * b.0).sum()
    }

    fn miller_products_are_one(parts: &[Scalar]) -> bool {
        parts.iter().copied().sum::<Scalar>().is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lagrange::InterpolationMethod;
    use crate::threshold::deal;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn threshold_signing_and_bisection_work_in_the_mock_group() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (public, shares) = deal::<InsecureMock, _>(3, 7, &mut rng).unwrap();
        let h = InsecureMock::hash_message(b"m");
        let mut sigs: Vec<_> = shares
            .iter()
            .map(|s| s.sign_hashed::<InsecureMock>(&h))
            .collect();
        let sig = public
            .aggregate(&sigs[2..5], InterpolationMethod::RootsOfUnity)
            .unwrap();
        assert!(public.verify(b"m", &sig));
        assert!(!public.verify(b"n", &sig));
        sigs[4].signature = sigs[4].signature.add(&MockPoint::generator());
        assert_eq!(
            public.find_invalid(&h, &sigs, &mut rng),
            vec![crate::NodeIndex(4)]
        );
        assert!(MockPoint::from_bytes(&[0u8; 32]).is_err());
        assert!(MockPoint::from_bytes(&[1u8; 31]).is_err());
    }
}
