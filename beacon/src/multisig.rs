//! BLS multi-signatures with proofs of possession: what consensus
//! certificates are made of.
//!
//! Every member holds a key pair of its own ([`ConsensusSecretKey`]) and
//! publishes its public key with a proof of possession: a signature on the
//! public key's bytes under a domain tag of its own, as the IETF BLS draft's
//! proof-of-possession scheme defines (`BLS_POP_..._POP_`). Votes are signed
//! under the scheme's other tag (`BLS_SIG_..._POP_`), so a vote is never a
//! proof and neither is ever a beacon share (`..._NUL_`).
//!
//! A multi-signature is the sum of the signers' signatures on one message,
//! with the [`SignerBitmap`] of who signed; it verifies against the sum of
//! their public keys ([`MultisigKeys::aggregate_key`]: when most members
//! signed, the members' total minus the missing ones). The proofs of
//! possession are what makes this sound: without them a member could publish
//! `pk' = g^x - sum(others)` and sign alone for a set it does not control (the
//! chosen-key attack; bgls's README, the herumi aggregation sample). Shares of
//! one threshold polynomial are not independent keys and must never be summed
//! this way (`consensus/SAFETY.md`).
//!
//! Incoming signatures are checked in batches with random 128-bit weights and
//! bisection ([`MultisigKeys::find_invalid`]), the same algorithm as threshold
//! shares ([`crate::threshold`]).

use crate::cost;
use crate::curve::Point;
use crate::error::{Error, SignatureError};
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::threshold::{weighted_batch_verify, weighted_find_invalid, SignatureShare};
use crate::NodeIndex;
use rand_core::RngCore;
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;
use std::sync::Arc;

/// The signing tag of the proof-of-possession scheme, signatures in G2.
pub const SIGN_DST_G2: &[u8] = b"BLS_SIG_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// The signing tag of the proof-of-possession scheme, signatures in G1.
pub const SIGN_DST_G1: &[u8] = b"BLS_SIG_BLS12381G1_XMD:SHA-256_SSWU_RO_POP_";
/// The proof-of-possession tag, signatures in G2.
pub const POP_DST_G2: &[u8] = b"BLS_POP_BLS12381G2_XMD:SHA-256_SSWU_RO_POP_";
/// The proof-of-possession tag, signatures in G1.
pub const POP_DST_G1: &[u8] = b"BLS_POP_BLS12381G1_XMD:SHA-256_SSWU_RO_POP_";

/// The tag votes are hashed to the curve with under scheme `S`.
pub fn sign_dst<S: Scheme>() -> &'static [u8] {
    if S::ID.signatures_in_g1() {
        SIGN_DST_G1
    } else {
        SIGN_DST_G2
    }
}

/// The tag proofs of possession are hashed to the curve with under scheme `S`.
pub fn pop_dst<S: Scheme>() -> &'static [u8] {
    if S::ID.signatures_in_g1() {
        POP_DST_G1
    } else {
        POP_DST_G2
    }
}

/// Hashes a vote message into the signature group (the signing tag).
pub fn hash_vote<S: Scheme>(msg: &[u8]) -> S::Signature {
    S::Signature::hash_to_curve(msg, sign_dst::<S>())
}

/// A member's own consensus secret key (a scalar; the same for every scheme,
/// whose groups only decide where the public key lives).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsensusSecretKey(Scalar);

impl fmt::Debug for ConsensusSecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ConsensusSecretKey(<redacted>)")
    }
}

impl ConsensusSecretKey {
    /// A fresh key from `rng` (never zero).
    pub fn random<R: RngCore + ?Sized>(rng: &mut R) -> Self {
        loop {
            let s = Scalar::random(rng);
            if !s.is_zero() {
                return ConsensusSecretKey(s);
            }
        }
    }

    /// The key of the 32 bytes `bytes` (big-endian, canonical, non-zero; zero
    /// is refused as a non-canonical key).
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, Error> {
        match Scalar::from_bytes_be(bytes) {
            Some(s) if !s.is_zero() => Ok(ConsensusSecretKey(s)),
            _ => Err(Error::NonCanonicalScalar),
        }
    }

    /// The 32 bytes of the key (big-endian): for the key file only.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes_be()
    }

    /// The public key in `S`'s key group.
    pub fn public<S: Scheme>(&self) -> S::PublicKey {
        S::PublicKey::mul_generator(&self.0)
    }

    /// The proof of possession: a signature on the public key's compressed
    /// bytes under the proof-of-possession tag.
    pub fn prove_possession<S: Scheme>(&self) -> S::Signature {
        let public = self.public::<S>().to_bytes();
        S::Signature::hash_to_curve(&public, pop_dst::<S>()).mul(&self.0)
    }

    /// The public key and its proof, as a directory lists them.
    pub fn listing<S: Scheme>(&self) -> ConsensusListing {
        ConsensusListing {
            public_key: self.public::<S>().to_bytes(),
            possession: self.prove_possession::<S>().to_bytes(),
        }
    }

    /// The listing under scheme `scheme`, chosen at run time (its groups and
    /// tags depend only on where signatures live).
    pub fn listing_for(&self, scheme: crate::SchemeId) -> ConsensusListing {
        if scheme.signatures_in_g1() {
            self.listing::<crate::MinSig>()
        } else {
            self.listing::<crate::MinPk>()
        }
    }

    /// Signs a message already hashed with [`hash_vote`].
    pub fn sign_hashed<S: Scheme>(&self, hashed: &S::Signature) -> S::Signature {
        hashed.mul(&self.0)
    }

    /// The scalar, for a fixed-base table's multiplication (never log it).
    pub fn scalar(&self) -> &Scalar {
        &self.0
    }
}

/// Checks a proof of possession of `public`.
pub fn verify_possession<S: Scheme>(public: &S::PublicKey, possession: &S::Signature) -> bool {
    if public.is_identity() || possession.is_identity() {
        return false;
    }
    let hashed = S::Signature::hash_to_curve(&public.to_bytes(), pop_dst::<S>());
    S::verify_hashed(public, &hashed, possession)
}

/// Proofs of possession one job of a split check takes ([`verify_possessions`],
/// [`decode_listings`]): a fixed number, so the operations a job counts do
/// not depend on the threads.
const POSSESSIONS_PER_JOB: usize = 32;

/// Checks many proofs of possession at once: with weights `r_i` of 128 bits
/// drawn from a hash of every key and proof (so none can be chosen after
/// them), `e(g, sum r_i pop_i) == prod e(r_i pk_i, H(pk_i))`: one Miller
/// loop per key and one final exponentiation, about half the cost of
/// checking each. True when every proof verifies (a false proof passes with
/// probability 2^-128); a caller that gets false checks them one by one to
/// name the bad one.
///
/// The encodings, hashes and Miller loops run in jobs of
/// [`POSSESSIONS_PER_JOB`] keys, and the weighted sum of the proofs in one
/// more, on [`crate::parallel`]'s threads; the caller is charged every
/// job's operations, the same as on one thread.
pub fn verify_possessions<S: Scheme>(pairs: &[(S::PublicKey, S::Signature)]) -> bool {
    use sha2::{Digest as _, Sha256};
    if pairs
        .iter()
        .any(|(pk, pop)| pk.is_identity() || pop.is_identity())
    {
        return false;
    }
    let encodings = charged(crate::parallel::map(
        pairs.chunks(POSSESSIONS_PER_JOB).collect(),
        |chunk| {
            chunk
                .iter()
                .map(|(pk, pop)| (pk.to_bytes(), pop.to_bytes()))
                .collect::<Vec<_>>()
        },
    ));
    let encoded: Vec<(Vec<u8>, Vec<u8>)> = encodings.into_iter().flatten().collect();
    let mut seed = Sha256::new();
    seed.update(b"sbft-beacon/possession-batch/1");
    seed.update(pop_dst::<S>());
    for (pk, pop) in &encoded {
        seed.update(pk);
        seed.update(pop);
    }
    let seed: [u8; 32] = seed.finalize().into();
    let weights: Vec<Scalar> = (0..pairs.len() as u64)
        .map(|i| {
            let mut h = Sha256::new();
            h.update(seed);
            h.update(i.to_be_bytes());
            let bytes: [u8; 32] = h.finalize().into();
            let mut low = [0u8; 16];
            low.copy_from_slice(&bytes[..16]);
            Scalar::from_u128(u128::from_le_bytes(low).max(1))
        })
        .collect();
    let pops: Vec<S::Signature> = pairs.iter().map(|(_, pop)| *pop).collect();
    // Job 0: the weighted sum of the proofs against the generator; then one
    // job per chunk of keys, each key weighted against its hash.
    let jobs: Vec<Option<usize>> = std::iter::once(None)
        .chain((0..pairs.len()).step_by(POSSESSIONS_PER_JOB).map(Some))
        .collect();
    let parts = charged(crate::parallel::map(jobs, |job| match job {
        None => S::miller_product(&[(
            S::PublicKey::generator().neg(),
            S::Signature::msm(&pops, &weights),
        )]),
        Some(start) => {
            let end = (start + POSSESSIONS_PER_JOB).min(pairs.len());
            let terms: Vec<(S::PublicKey, S::Signature)> = (start..end)
                .map(|i| {
                    let hashed = S::Signature::hash_to_curve(&encoded[i].0, pop_dst::<S>());
                    (pairs[i].0.mul(&weights[i]), hashed)
                })
                .collect();
            S::miller_product(&terms)
        }
    }));
    S::miller_products_are_one(&parts)
}

/// `decode` of every listing, in jobs of [`POSSESSIONS_PER_JOB`] on
/// [`crate::parallel`]'s threads (the jobs' operations charged to this
/// thread): the first listing that does not decode is named by its index.
/// With [`ConsensusListing::points`], the input of [`verify_possessions`].
pub fn decode_listings<T: Send>(
    listings: &[ConsensusListing],
    decode: impl Fn(&ConsensusListing) -> Result<T, Error> + Sync,
) -> Result<Vec<T>, (usize, Error)> {
    let chunks: Vec<(usize, &[ConsensusListing])> = listings
        .chunks(POSSESSIONS_PER_JOB)
        .enumerate()
        .map(|(k, chunk)| (k * POSSESSIONS_PER_JOB, chunk))
        .collect();
    let decoded = charged(crate::parallel::map(chunks, |(start, chunk)| {
        chunk
            .iter()
            .enumerate()
            .map(|(i, l)| decode(l).map_err(|e| (start + i, e)))
            .collect::<Result<Vec<_>, _>>()
    }));
    let mut all = Vec::with_capacity(listings.len());
    for chunk in decoded {
        all.extend(chunk?);
    }
    Ok(all)
}

/// The results of a [`crate::parallel::map`], each job's operations charged
/// to this thread.
fn charged<R>(done: Vec<(R, cost::OpCounts)>) -> Vec<R> {
    done.into_iter()
        .map(|(r, counts)| {
            cost::charge(&counts);
            r
        })
        .collect()
}

/// A member's public consensus key and its proof of possession, compressed:
/// what a directory, a genesis file or a change of members lists. The
/// scheme decides the groups, so the bytes are checked when decoded
/// ([`ConsensusListing::decode`]).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConsensusListing {
    /// The compressed public key (48 bytes in G1, 96 in G2).
    #[serde(with = "crate::wire::hex_bytes")]
    pub public_key: Vec<u8>,
    /// The compressed proof of possession (a signature).
    #[serde(with = "crate::wire::hex_bytes")]
    pub possession: Vec<u8>,
}

impl fmt::Debug for ConsensusListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head: String = hex::encode(&self.public_key).chars().take(16).collect();
        write!(f, "ConsensusListing({head}…)")
    }
}

impl ConsensusListing {
    /// The public key, checked: on the curve, in the subgroup, not the
    /// identity, and proven possessed.
    pub fn decode<S: Scheme>(&self) -> Result<S::PublicKey, Error> {
        let public = S::PublicKey::from_bytes(&self.public_key)?;
        let possession = S::Signature::from_bytes(&self.possession)?;
        if !verify_possession::<S>(&public, &possession) {
            return Err(Error::InvalidSignature(SignatureError::Possession));
        }
        Ok(public)
    }

    /// The public key and the proof, each checked as a point, the proof not
    /// verified: for a batch check ([`verify_possessions`]).
    pub fn points<S: Scheme>(&self) -> Result<(S::PublicKey, S::Signature), Error> {
        Ok((
            S::PublicKey::from_bytes(&self.public_key)?,
            S::Signature::from_bytes(&self.possession)?,
        ))
    }

    /// The public key alone, checked as a point but without the proof: for
    /// keys whose proofs were checked when they were listed.
    pub fn public_key<S: Scheme>(&self) -> Result<S::PublicKey, Error> {
        S::PublicKey::from_bytes(&self.public_key)
    }
}

/// Which of `n` members signed: bit `i` of byte `i / 8` (least significant
/// first) for member `i`. Decoding checks the length and that no bit past
/// `n` is set, so a bitmap names members of its epoch only.
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SignerBitmap {
    n: u32,
    bits: Vec<u8>,
}

impl fmt::Debug for SignerBitmap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SignerBitmap({} of {})", self.count(), self.n)
    }
}

#[derive(Deserialize)]
struct RawBitmap {
    n: u32,
    bits: Vec<u8>,
}

impl<'de> Deserialize<'de> for SignerBitmap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawBitmap::deserialize(deserializer)?;
        SignerBitmap::from_parts(raw.n, raw.bits).map_err(serde::de::Error::custom)
    }
}

impl SignerBitmap {
    /// No signer among `n`.
    pub fn new(n: u32) -> Self {
        SignerBitmap {
            n,
            bits: vec![0; n.div_ceil(8) as usize],
        }
    }

    /// A bitmap of `n` members from its bytes: exactly `ceil(n / 8)` of them,
    /// with no bit past `n` set.
    pub fn from_parts(n: u32, bits: Vec<u8>) -> Result<Self, Error> {
        let expected = n.div_ceil(8) as usize;
        if bits.len() != expected {
            return Err(Error::WrongLength {
                what: "signer bitmap",
                expected,
                got: bits.len(),
            });
        }
        let used = n % 8;
        if used != 0 && bits.last().is_some_and(|b| b >> used != 0) {
            return Err(Error::SignerOutOfRange {
                signer: NodeIndex(n),
                n,
            });
        }
        Ok(SignerBitmap { n, bits })
    }

    /// The bitmap of `signers` among `n` (out-of-range signers are an error).
    pub fn of(n: u32, signers: impl IntoIterator<Item = NodeIndex>) -> Result<Self, Error> {
        let mut map = SignerBitmap::new(n);
        for s in signers {
            map.insert(s)?;
        }
        Ok(map)
    }

    /// Adds `signer`.
    pub fn insert(&mut self, signer: NodeIndex) -> Result<(), Error> {
        if signer.0 >= self.n {
            return Err(Error::SignerOutOfRange { signer, n: self.n });
        }
        self.bits[(signer.0 / 8) as usize] |= 1 << (signer.0 % 8);
        Ok(())
    }

    /// Whether `signer` signed.
    pub fn contains(&self, signer: NodeIndex) -> bool {
        signer.0 < self.n && self.bits[(signer.0 / 8) as usize] >> (signer.0 % 8) & 1 == 1
    }

    /// The number of members the bitmap is over.
    pub fn n(&self) -> u32 {
        self.n
    }

    /// The number of signers.
    pub fn count(&self) -> u32 {
        self.bits.iter().map(|b| b.count_ones()).sum()
    }

    /// The signers, in order.
    pub fn signers(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        (0..self.n).map(NodeIndex).filter(|i| self.contains(*i))
    }

    /// The members that did not sign, in order.
    pub fn missing(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        (0..self.n).map(NodeIndex).filter(|i| !self.contains(*i))
    }

    /// The bits, as they travel (bit `i` of byte `i / 8` for member `i`):
    /// what a digest of the bitmap covers.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bits
    }

    /// The encoded size of a bitmap over `n` members, for admission bounds.
    pub fn encoded_len(n: u32) -> usize {
        // n as u32, the length prefix of the bytes (at most 9 bytes
        // varint-encoded), and the bytes.
        4 + 9 + n.div_ceil(8) as usize
    }
}

/// The public consensus keys of one epoch's members (by epoch index) and
/// their sum: what verifies multi-signatures and the signatures they are
/// made of. Cheap to share (`Arc`): every simulated member of an epoch holds
/// the same one.
#[derive(Clone)]
pub struct MultisigKeys<S: Scheme> {
    keys: Arc<Vec<S::PublicKey>>,
    total: S::PublicKey,
}

impl<S: Scheme> fmt::Debug for MultisigKeys<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MultisigKeys(n = {})", self.keys.len())
    }
}

impl<S: Scheme> MultisigKeys<S> {
    /// The keys of an epoch's members, each already checked (its proof of
    /// possession verified when it was listed).
    pub fn new(keys: Arc<Vec<S::PublicKey>>) -> Self {
        let total = keys
            .iter()
            .fold(S::PublicKey::identity(), |acc, k| acc.add(k));
        MultisigKeys { keys, total }
    }

    /// The number of members.
    pub fn n(&self) -> u32 {
        self.keys.len() as u32
    }

    /// Member `i`'s key.
    pub fn key(&self, i: NodeIndex) -> Option<&S::PublicKey> {
        self.keys.get(i.0 as usize)
    }

    /// Every member's key, by index.
    pub fn keys(&self) -> &[S::PublicKey] {
        &self.keys
    }

    /// The sum of every member's key.
    pub fn total(&self) -> &S::PublicKey {
        &self.total
    }

    /// The sum of the keys of the signers in `signers`: added up directly when
    /// at most half signed, else the total less the missing keys.
    pub fn aggregate_key(&self, signers: &SignerBitmap) -> Result<S::PublicKey, Error> {
        if signers.n() != self.n() {
            return Err(Error::LengthMismatch {
                what: "signer bitmap vs members",
                left: signers.n() as usize,
                right: self.keys.len(),
            });
        }
        let count = signers.count();
        if 2 * count > self.n() {
            cost::record_adds::<S::PublicKey>((self.n() - count + 1) as usize);
            let missing = signers.missing().fold(S::PublicKey::identity(), |acc, i| {
                acc.add(&self.keys[i.0 as usize])
            });
            Ok(self.total.add(&missing.neg()))
        } else {
            cost::record_adds::<S::PublicKey>(count as usize);
            Ok(signers.signers().fold(S::PublicKey::identity(), |acc, i| {
                acc.add(&self.keys[i.0 as usize])
            }))
        }
    }

    /// Verifies the multi-signature `signature` of `signers` on `hashed` (a
    /// message hashed with [`hash_vote`]): one pairing equation against the
    /// signers' aggregate key. An empty bitmap verifies nothing.
    pub fn verify(
        &self,
        hashed: &S::Signature,
        signature: &S::Signature,
        signers: &SignerBitmap,
    ) -> bool {
        if signers.count() == 0 {
            return false;
        }
        match self.aggregate_key(signers) {
            Ok(key) => S::verify_hashed(&key, hashed, signature),
            Err(_) => false,
        }
    }

    /// Verifies one member's signature on `hashed`.
    pub fn verify_one(&self, hashed: &S::Signature, signature: &SignatureShare<S>) -> bool {
        match self.key(signature.signer) {
            Some(key) => S::verify_hashed(key, hashed, &signature.signature),
            None => false,
        }
    }

    /// Batch-verifies members' signatures on `hashed` with random 128-bit
    /// weights (two MSMs and one pairing equation). Unknown signers fail it.
    pub fn batch_verify<R: RngCore + ?Sized>(
        &self,
        hashed: &S::Signature,
        signatures: &[SignatureShare<S>],
        rng: &mut R,
    ) -> bool {
        weighted_batch_verify::<S, R>(|i| self.key(i).copied(), hashed, signatures, rng)
    }

    /// The signers of exactly the invalid signatures, by batch verification
    /// and bisection.
    pub fn find_invalid<R: RngCore + ?Sized>(
        &self,
        hashed: &S::Signature,
        signatures: &[SignatureShare<S>],
        rng: &mut R,
    ) -> Vec<NodeIndex> {
        weighted_find_invalid::<S, R>(|i| self.key(i).copied(), hashed, signatures, rng)
    }
}

/// Adds up members' signatures into a multi-signature and the bitmap of
/// their signers (repeated or out-of-range signers are an error).
pub fn aggregate<S: Scheme>(
    n: u32,
    signatures: &[SignatureShare<S>],
) -> Result<(S::Signature, SignerBitmap), Error> {
    let mut signers = SignerBitmap::new(n);
    let mut sum = S::Signature::identity();
    cost::record_adds::<S::Signature>(signatures.len());
    for s in signatures {
        if signers.contains(s.signer) {
            return Err(Error::DuplicateSigner { signer: s.signer });
        }
        signers.insert(s.signer)?;
        sum = sum.add(&s.signature);
    }
    Ok((sum, signers))
}

#[cfg(test)]
mod tests;
