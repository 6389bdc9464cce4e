//! Signature schemes: which group holds keys and which holds signatures.
//!
//! The signature group is a type parameter ([`Scheme`]), chosen at the top of a
//! program from a [`SchemeId`] in the config; code below is generic over it.
//! - [`MinPk`] = `pedersen-bls-chained` (drand's default chain): keys in G1 (48 B),
//!   signatures in G2 (96 B).
//! - [`MinSig`] = `bls-chained-g1-rfc9380`: signatures in G1 (48 B), keys in G2 (96 B);
//!   faster signing and aggregation, the DST of drand's quicknet.
//! - [`MinSigUnchained`] = `bls-unchained-g1-rfc9380`, drand's quicknet: [`MinSig`]'s
//!   groups and DST, and round `r` signs `SHA-256(u64_be(r))` alone.
//! - [`MinPkUnchained`] = `pedersen-bls-unchained`: [`MinPk`]'s groups and DST,
//!   unchained.
//!
//! Chained or not is a property of the [`SchemeId`] (`Scheme::ID`); the round's
//! message is [`crate::chain::round_message`]. An unchained round's message is
//! known in advance: that is what timelock encryption to a round relies on, and
//! why no share of round `r` may leave before `r` is due (`consensus/SAFETY.md`).

use crate::curve::{
    miller_product, miller_products_are_one, pairing_product_is_one, MillerProduct, Point, G1, G2,
};
use crate::Error;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt;
use std::str::FromStr;

/// Hash-to-curve DST for signatures in G2 (drand's chained scheme).
pub const DST_G2: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_NUL_";
/// Hash-to-curve DST for signatures in G1 (drand's quicknet).
pub const DST_G1: &[u8] = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_NUL_";

/// A BLS signature scheme over BLS12-381: the key group, the signature group and
/// the pairing equation between them.
pub trait Scheme: Copy + Clone + Default + fmt::Debug + Send + Sync + 'static {
    /// Group of public keys and verification keys.
    type PublicKey: Point + Serialize + DeserializeOwned;
    /// Group of signatures and signature shares.
    type Signature: Point + Serialize + DeserializeOwned;
    /// The scheme identifier (groups, DST, chained or not).
    const ID: SchemeId;
    /// Hash-to-curve domain separation tag.
    const DST: &'static [u8];

    /// Whether `prod_i e(keys_i, sigs_i) == 1` (keys in the key group, signatures in
    /// the signature group).
    fn pairing_product_is_one(terms: &[(Self::PublicKey, Self::Signature)]) -> bool;

    /// A product of pairings before the final exponentiation: one part of a
    /// [`Scheme::pairing_product_is_one`] check split over threads.
    type MillerProduct: Copy + Send + Sync;

    /// The part of a pairing-product check that `terms` contribute (one
    /// Miller loop counted per term).
    fn miller_product(terms: &[(Self::PublicKey, Self::Signature)]) -> Self::MillerProduct;

    /// Whether the product of `parts` is one: the pairing-product check of
    /// every part's terms together (one final exponentiation counted).
    fn miller_products_are_one(parts: &[Self::MillerProduct]) -> bool;

    /// Hashes a message into the signature group.
    fn hash_message(msg: &[u8]) -> Self::Signature {
        Self::Signature::hash_to_curve(msg, Self::DST)
    }

    /// Checks `e(g, sig) == e(key, hashed)` with `g` the key group's generator.
    fn verify_hashed(
        key: &Self::PublicKey,
        hashed: &Self::Signature,
        sig: &Self::Signature,
    ) -> bool {
        let g = Self::PublicKey::generator().neg();
        Self::pairing_product_is_one(&[(g, *sig), (*key, *hashed)])
    }

    /// Verifies a signature on `msg`.
    fn verify(key: &Self::PublicKey, msg: &[u8], sig: &Self::Signature) -> bool {
        Self::verify_hashed(key, &Self::hash_message(msg), sig)
    }
}

/// Keys in G1, signatures in G2: drand's `pedersen-bls-chained`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinPk;

/// Signatures in G1, keys in G2: `bls-chained-g1-rfc9380`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinSig;

impl Scheme for MinPk {
    type PublicKey = G1;
    type Signature = G2;
    const ID: SchemeId = SchemeId::PedersenBlsChained;
    const DST: &'static [u8] = DST_G2;
    fn pairing_product_is_one(terms: &[(G1, G2)]) -> bool {
        pairing_product_is_one(terms)
    }
    type MillerProduct = MillerProduct;
    fn miller_product(terms: &[(G1, G2)]) -> MillerProduct {
        miller_product(terms)
    }
    fn miller_products_are_one(parts: &[MillerProduct]) -> bool {
        miller_products_are_one(parts)
    }
}

impl Scheme for MinSig {
    type PublicKey = G2;
    type Signature = G1;
    const ID: SchemeId = SchemeId::BlsChainedG1Rfc9380;
    const DST: &'static [u8] = DST_G1;
    fn pairing_product_is_one(terms: &[(G2, G1)]) -> bool {
        let swapped: Vec<(G1, G2)> = terms.iter().map(|(k, s)| (*s, *k)).collect();
        pairing_product_is_one(&swapped)
    }
    type MillerProduct = MillerProduct;
    fn miller_product(terms: &[(G2, G1)]) -> MillerProduct {
        let swapped: Vec<(G1, G2)> = terms.iter().map(|(k, s)| (*s, *k)).collect();
        miller_product(&swapped)
    }
    fn miller_products_are_one(parts: &[MillerProduct]) -> bool {
        miller_products_are_one(parts)
    }
}

/// Keys in G1, signatures in G2, unchained: drand's `pedersen-bls-unchained`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinPkUnchained;

/// Signatures in G1, keys in G2, unchained: drand's quicknet,
/// `bls-unchained-g1-rfc9380`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MinSigUnchained;

impl Scheme for MinPkUnchained {
    type PublicKey = G1;
    type Signature = G2;
    const ID: SchemeId = SchemeId::PedersenBlsUnchained;
    const DST: &'static [u8] = DST_G2;
    fn pairing_product_is_one(terms: &[(G1, G2)]) -> bool {
        MinPk::pairing_product_is_one(terms)
    }
    type MillerProduct = MillerProduct;
    fn miller_product(terms: &[(G1, G2)]) -> MillerProduct {
        miller_product(terms)
    }
    fn miller_products_are_one(parts: &[MillerProduct]) -> bool {
        miller_products_are_one(parts)
    }
}

impl Scheme for MinSigUnchained {
    type PublicKey = G2;
    type Signature = G1;
    const ID: SchemeId = SchemeId::BlsUnchainedG1Rfc9380;
    const DST: &'static [u8] = DST_G1;
    fn pairing_product_is_one(terms: &[(G2, G1)]) -> bool {
        MinSig::pairing_product_is_one(terms)
    }
    type MillerProduct = MillerProduct;
    fn miller_product(terms: &[(G2, G1)]) -> MillerProduct {
        MinSig::miller_product(terms)
    }
    fn miller_products_are_one(parts: &[MillerProduct]) -> bool {
        miller_products_are_one(parts)
    }
}

/// A scheme identifier as drand writes it in chain info (`schemeID`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub enum SchemeId {
    /// Chained, signatures in G2 (drand's default network).
    #[default]
    PedersenBlsChained,
    /// Chained, signatures in G1 with the RFC 9380 G1 DST (this project's fast scheme).
    BlsChainedG1Rfc9380,
    /// Unchained, signatures in G1 (drand's quicknet).
    BlsUnchainedG1Rfc9380,
    /// Unchained, signatures in G2 (drand's `pedersen-bls-unchained`).
    PedersenBlsUnchained,
    /// INSECURE: the [`crate::mock::InsecureMock`] stand-in for protocol-only
    /// simulations far beyond 4096 signers. Never for real use.
    InsecureMock,
}

impl SchemeId {
    /// The identifier string.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::PedersenBlsChained => "pedersen-bls-chained",
            Self::BlsChainedG1Rfc9380 => "bls-chained-g1-rfc9380",
            Self::BlsUnchainedG1Rfc9380 => "bls-unchained-g1-rfc9380",
            Self::PedersenBlsUnchained => "pedersen-bls-unchained",
            Self::InsecureMock => "insecure-mock",
        }
    }

    /// Whether round `r`'s message includes round `r - 1`'s signature.
    pub fn is_chained(&self) -> bool {
        !matches!(
            self,
            Self::BlsUnchainedG1Rfc9380 | Self::PedersenBlsUnchained
        )
    }

    /// The schemes a network of ours signs with (all but the insecure mock),
    /// in the order help texts list them.
    pub const SIGNING: [SchemeId; 4] = [
        Self::PedersenBlsChained,
        Self::BlsChainedG1Rfc9380,
        Self::BlsUnchainedG1Rfc9380,
        Self::PedersenBlsUnchained,
    ];

    /// Whether signatures are in G1 (keys in G2).
    pub fn signatures_in_g1(&self) -> bool {
        matches!(
            self,
            Self::BlsChainedG1Rfc9380 | Self::BlsUnchainedG1Rfc9380
        )
    }
}

impl fmt::Display for SchemeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SchemeId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "pedersen-bls-chained" => Ok(Self::PedersenBlsChained),
            "bls-chained-g1-rfc9380" => Ok(Self::BlsChainedG1Rfc9380),
            "bls-unchained-g1-rfc9380" => Ok(Self::BlsUnchainedG1Rfc9380),
            "pedersen-bls-unchained" => Ok(Self::PedersenBlsUnchained),
            "insecure-mock" => Ok(Self::InsecureMock),
            other => Err(Error::UnknownScheme(other.to_string())),
        }
    }
}

impl TryFrom<String> for SchemeId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<SchemeId> for String {
    fn from(id: SchemeId) -> String {
        id.as_str().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::Scalar;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn sign_verify<S: Scheme>() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        let sk = Scalar::random(&mut rng);
        let pk = S::PublicKey::generator().mul(&sk);
        let sig = S::hash_message(b"hello").mul(&sk);
        assert!(S::verify(&pk, b"hello", &sig));
        assert!(!S::verify(&pk, b"hellp", &sig));
        assert!(!S::verify(&S::PublicKey::generator(), b"hello", &sig));
    }

    #[test]
    fn every_scheme_signs_and_verifies() {
        sign_verify::<MinPk>();
        sign_verify::<MinSig>();
        sign_verify::<MinPkUnchained>();
        sign_verify::<MinSigUnchained>();
    }

    #[test]
    fn unchained_schemes_share_groups_and_dst_with_their_chained_twins() {
        assert_eq!(MinSigUnchained::DST, MinSig::DST);
        assert_eq!(MinPkUnchained::DST, MinPk::DST);
        for id in SchemeId::SIGNING {
            let chained = matches!(
                id,
                SchemeId::PedersenBlsChained | SchemeId::BlsChainedG1Rfc9380
            );
            assert_eq!(id.is_chained(), chained, "{id}");
        }
        assert!(MinSigUnchained::ID.signatures_in_g1());
        assert!(!MinPkUnchained::ID.signatures_in_g1());
    }

    #[test]
    fn scheme_ids_roundtrip() {
        for id in [
            SchemeId::PedersenBlsChained,
            SchemeId::BlsChainedG1Rfc9380,
            SchemeId::BlsUnchainedG1Rfc9380,
            SchemeId::PedersenBlsUnchained,
            SchemeId::InsecureMock,
        ] {
            assert_eq!(id.as_str().parse::<SchemeId>().unwrap(), id);
        }
        assert!(matches!(
            "bls".parse::<SchemeId>(),
            Err(Error::UnknownScheme(_))
        ));
    }
}
