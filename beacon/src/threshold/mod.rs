//! Threshold BLS: secret key shares, signature shares, recovery of the threshold
//! signature, and share verification for collectors.
//!
//! Recovery is Lagrange coefficients ([`crate::lagrange`]) plus one multi-scalar
//! multiplication. A collector never outputs a bad signature and names bad signers:
//! 1. optimistic — recover from the first `t` shares and verify once (2 pairings);
//! 2. on failure — batch-verify with random 128-bit weights,
//!    `e(g, sum r_i s_i) == e(sum r_i vk_i, H(m))`, and bisect to the invalid shares
//!    (a failed parent whose left half passes has a failed right half: no check spent);
//! 3. recover from `t` shares that passed, and verify the result once more.
//!
//! Individual verification stays available as the baseline.

use crate::curve::{FixedBase, Point};
use crate::field::Scalar;
use crate::lagrange::{InterpolationMethod, LagrangeCoefficients, SignerDomain};
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, SignatureError};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// A signer's share of a threshold secret key: `f(w^index)`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretShare {
    /// The signer owning the share.
    pub index: NodeIndex,
    value: Scalar,
}

impl fmt::Debug for SecretShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretShare {{ index: {}, value: <redacted> }}",
            self.index
        )
    }
}

impl SecretShare {
    /// A share with the given value.
    pub fn new(index: NodeIndex, value: Scalar) -> SecretShare {
        SecretShare { index, value }
    }

    /// The secret value (for the DKG's own bookkeeping; never log it).
    pub fn value(&self) -> &Scalar {
        &self.value
    }

    /// This share's verification key `g^value` in the scheme's key group.
    pub fn verification_key<S: Scheme>(&self) -> S::PublicKey {
        S::PublicKey::mul_generator(&self.value)
    }

    /// Signs `msg`.
    pub fn sign<S: Scheme>(&self, msg: &[u8]) -> SignatureShare<S> {
        self.sign_hashed(&S::hash_message(msg))
    }

    /// Signs the message whose hash to the curve is `table`'s base: the same
    /// share as [`SecretShare::sign_hashed`], faster where many shares sign
    /// one message (simulated replicas share the table).
    pub fn sign_with_table<S: Scheme>(&self, table: &FixedBase<S::Signature>) -> SignatureShare<S> {
        SignatureShare {
            signer: self.index,
            signature: table.mul(&self.value),
        }
    }

    /// Signs the message whose hash to the curve is `hashed`.
    pub fn sign_hashed<S: Scheme>(&self, hashed: &S::Signature) -> SignatureShare<S> {
        SignatureShare {
            signer: self.index,
            signature: hashed.mul(&self.value),
        }
    }
}

/// One signer's signature share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct SignatureShare<S: Scheme> {
    /// Who signed.
    pub signer: NodeIndex,
    /// `H(m)^{share}`.
    pub signature: S::Signature,
}

/// What a collector learned from a set of shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery<S: Scheme> {
    /// The threshold signature, verified under the group key; `None` if fewer than
    /// `t` valid shares were offered.
    pub signature: Option<S::Signature>,
    /// Signers whose shares failed verification (provable misbehaviour).
    pub invalid: Vec<NodeIndex>,
}

/// The public side of a `(t, n)` threshold key: what any collector or verifier
/// needs. Cheap to clone (shared internals).
#[derive(Clone)]
pub struct ThresholdPublicKey<S: Scheme> {
    threshold: u32,
    domain: Arc<SignerDomain>,
    group_key: S::PublicKey,
    verification_keys: Arc<Vec<S::PublicKey>>,
}

impl<S: Scheme> fmt::Debug for ThresholdPublicKey<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ThresholdPublicKey(t = {}, n = {}, key = {:?})",
            self.threshold,
            self.domain.n(),
            self.group_key
        )
    }
}

impl<S: Scheme> ThresholdPublicKey<S> {
    /// A threshold key from its group key and all `n` verification keys (shared,
    /// not copied: thousands of simulated members hold the same keys).
    pub fn new(
        threshold: u32,
        domain: Arc<SignerDomain>,
        group_key: S::PublicKey,
        verification_keys: impl Into<Arc<Vec<S::PublicKey>>>,
    ) -> Result<Self, Error> {
        let verification_keys = verification_keys.into();
        let n = domain.n();
        if threshold == 0 || threshold > n {
            return Err(Error::InvalidThreshold { t: threshold, n });
        }
        if verification_keys.len() != n as usize {
            return Err(Error::LengthMismatch {
                what: "verification keys vs n",
                left: verification_keys.len(),
                right: n as usize,
            });
        }
        Ok(ThresholdPublicKey {
            threshold,
            domain,
            group_key,
            verification_keys,
        })
    }

    /// The threshold `t`.
    pub fn threshold(&self) -> u32 {
        self.threshold
    }

    /// The number of signers `n`.
    pub fn n(&self) -> u32 {
        self.domain.n()
    }

    /// The signers' evaluation domain.
    pub fn domain(&self) -> &Arc<SignerDomain> {
        &self.domain
    }

    /// The group public key `g^{f(0)}`.
    pub fn group_key(&self) -> &S::PublicKey {
        &self.group_key
    }

    /// The verification key of `signer`.
    pub fn verification_key(&self, signer: NodeIndex) -> Result<&S::PublicKey, Error> {
        self.verification_keys
            .get(signer.0 as usize)
            .ok_or(Error::SignerOutOfRange {
                signer,
                n: self.n(),
            })
    }

    /// All verification keys.
    pub fn verification_keys(&self) -> &[S::PublicKey] {
        &self.verification_keys
    }

    /// Verifies a threshold signature under the group key.
    pub fn verify(&self, msg: &[u8], sig: &S::Signature) -> bool {
        S::verify(&self.group_key, msg, sig)
    }

    /// Verifies one share on its own (the baseline: 2 pairings per share).
    pub fn verify_share(&self, hashed: &S::Signature, share: &SignatureShare<S>) -> bool {
        match self.verification_key(share.signer) {
            Ok(vk) => S::verify_hashed(vk, hashed, &share.signature),
            Err(_) => false,
        }
    }

    /// Coefficients for recovering from exactly `signers` (reusable across messages).
    pub fn coefficients(
        &self,
        signers: &[NodeIndex],
        method: InterpolationMethod,
    ) -> Result<LagrangeCoefficients, Error> {
        if signers.len() < self.threshold as usize {
            return Err(Error::NotEnoughShares {
                have: signers.len(),
                need: self.threshold as usize,
            });
        }
        self.domain.lagrange_at_zero(signers, method)
    }

    /// Recovers the threshold signature from the first `t` shares, without any
    /// verification. Errors on fewer than `t` shares, a repeated signer or an
    /// out-of-range signer anywhere in `shares`.
    pub fn aggregate(
        &self,
        shares: &[SignatureShare<S>],
        method: InterpolationMethod,
    ) -> Result<S::Signature, Error> {
        let signers: Vec<NodeIndex> = shares.iter().map(|s| s.signer).collect();
        self.domain.check_signers(&signers)?;
        let t = self.threshold as usize;
        if shares.len() < t {
            return Err(Error::NotEnoughShares {
                have: shares.len(),
                need: t,
            });
        }
        let coefficients = self.domain.lagrange_at_zero(&signers[..t], method)?;
        Ok(combine::<S>(&coefficients, &shares[..t]))
    }

    /// Batch-verifies `shares` against `hashed` with random 128-bit weights
    /// (two MSMs and two pairings). Out-of-range signers make it fail.
    pub fn batch_verify<R: RngCore + ?Sized>(
        &self,
        hashed: &S::Signature,
        shares: &[SignatureShare<S>],
        rng: &mut R,
    ) -> bool {
        weighted_batch_verify::<S, R>(
            |i| self.verification_key(i).ok().copied(),
            hashed,
            shares,
            rng,
        )
    }

    /// The signers of exactly the invalid shares, by batch verification and
    /// bisection ([`weighted_find_invalid`]).
    pub fn find_invalid<R: RngCore + ?Sized>(
        &self,
        hashed: &S::Signature,
        shares: &[SignatureShare<S>],
        rng: &mut R,
    ) -> Vec<NodeIndex> {
        weighted_find_invalid::<S, R>(
            |i| self.verification_key(i).ok().copied(),
            hashed,
            shares,
            rng,
        )
    }

    /// The collector's path: optimistic recovery from the first `t` shares; on
    /// failure, batch verification and bisection, then recovery from `t` valid
    /// shares. The returned signature always verifies under the group key.
    pub fn recover<R: RngCore + ?Sized>(
        &self,
        msg: &[u8],
        shares: &[SignatureShare<S>],
        method: InterpolationMethod,
        rng: &mut R,
    ) -> Result<Recovery<S>, Error> {
        let candidate = self.aggregate(shares, method)?;
        let hashed = S::hash_message(msg);
        if S::verify_hashed(&self.group_key, &hashed, &candidate) {
            return Ok(Recovery {
                signature: Some(candidate),
                invalid: Vec::new(),
            });
        }
        let invalid = self.find_invalid(&hashed, shares, rng);
        let valid: Vec<SignatureShare<S>> = shares
            .iter()
            .filter(|s| !invalid.contains(&s.signer))
            .copied()
            .collect();
        if valid.len() < self.threshold as usize {
            return Ok(Recovery {
                signature: None,
                invalid,
            });
        }
        let signature = self.aggregate(&valid, method)?;
        if !S::verify_hashed(&self.group_key, &hashed, &signature) {
            return Err(Error::InvalidSignature(SignatureError::InconsistentKey));
        }
        Ok(Recovery {
            signature: Some(signature),
            invalid,
        })
    }
}

/// Batch-verifies signatures on `hashed`, each under its signer's key
/// (`key_of`), with random 128-bit weights: two MSMs and two pairings. A
/// signer without a key makes it fail. Threshold shares and members' own
/// signatures ([`crate::multisig`]) are checked alike.
pub(crate) fn weighted_batch_verify<S: Scheme, R: RngCore + ?Sized>(
    key_of: impl Fn(NodeIndex) -> Option<S::PublicKey>,
    hashed: &S::Signature,
    shares: &[SignatureShare<S>],
    rng: &mut R,
) -> bool {
    if shares.is_empty() {
        return true;
    }
    let mut keys = Vec::with_capacity(shares.len());
    for s in shares {
        match key_of(s.signer) {
            Some(vk) => keys.push(vk),
            None => return false,
        }
    }
    let weights: Vec<Scalar> = shares.iter().map(|_| Scalar::random_u128(rng)).collect();
    let sigs: Vec<S::Signature> = shares.iter().map(|s| s.signature).collect();
    let sig_sum = S::Signature::msm(&sigs, &weights);
    let key_sum = S::PublicKey::msm(&keys, &weights);
    S::verify_hashed(&key_sum, hashed, &sig_sum)
}

/// The signers of exactly the invalid signatures on `hashed`, by batch
/// verification and bisection.
///
/// One set of random weights serves the whole bisection: a node's weighted sums
/// are its left child's (one MSM per group over the left half) plus the right
/// child's, so the right child's sums come for free by subtraction.
pub(crate) fn weighted_find_invalid<S: Scheme, R: RngCore + ?Sized>(
    key_of: impl Fn(NodeIndex) -> Option<S::PublicKey>,
    hashed: &S::Signature,
    shares: &[SignatureShare<S>],
    rng: &mut R,
) -> Vec<NodeIndex> {
    let mut invalid = Vec::new();
    let mut weighted = Vec::with_capacity(shares.len());
    let mut keys = Vec::with_capacity(shares.len());
    for s in shares {
        match key_of(s.signer) {
            Some(vk) => {
                weighted.push(s);
                keys.push(vk);
            }
            // A signature of no known signer is invalid on its face.
            None => invalid.push(s.signer),
        }
    }
    if weighted.is_empty() {
        return invalid;
    }
    let sigs: Vec<S::Signature> = weighted.iter().map(|s| s.signature).collect();
    let weights: Vec<Scalar> = sigs.iter().map(|_| Scalar::random_u128(rng)).collect();
    let batch = WeightedBatch::<S> {
        hashed,
        sigs: &sigs,
        keys: &keys,
        weights: &weights,
    };
    let (sig_sum, key_sum) = batch.sums(0..sigs.len());
    let mut found = Vec::new();
    batch.bisect(0..sigs.len(), sig_sum, key_sum, false, &mut found);
    invalid.extend(found.into_iter().map(|i| weighted[i].signer));
    invalid.sort();
    invalid
}

/// Shares with fixed random weights, for bisection.
struct WeightedBatch<'a, S: Scheme> {
    hashed: &'a S::Signature,
    sigs: &'a [S::Signature],
    keys: &'a [S::PublicKey],
    weights: &'a [Scalar],
}

impl<S: Scheme> WeightedBatch<'_, S> {
    fn sums(&self, range: std::ops::Range<usize>) -> (S::Signature, S::PublicKey) {
        let w = &self.weights[range.clone()];
        (
            S::Signature::msm(&self.sigs[range.clone()], w),
            S::PublicKey::msm(&self.keys[range], w),
        )
    }

    /// Pushes the indices in `range` of the invalid shares; `sig_sum`/`key_sum` are
    /// the weighted sums over `range`; `known_bad` skips a check whose failure is implied.
    fn bisect(
        &self,
        range: std::ops::Range<usize>,
        sig_sum: S::Signature,
        key_sum: S::PublicKey,
        known_bad: bool,
        invalid: &mut Vec<usize>,
    ) {
        if range.is_empty() || (!known_bad && S::verify_hashed(&key_sum, self.hashed, &sig_sum)) {
            return;
        }
        if range.len() == 1 {
            invalid.push(range.start);
            return;
        }
        let mid = range.start + range.len() / 2;
        let (left_sig, left_key) = self.sums(range.start..mid);
        let right_sig = sig_sum.add(&left_sig.neg());
        let right_key = key_sum.add(&left_key.neg());
        let left_ok = S::verify_hashed(&left_key, self.hashed, &left_sig);
        if !left_ok {
            self.bisect(range.start..mid, left_sig, left_key, true, invalid);
        }
        // If the left half passed, the failure of the whole lies in the right half.
        self.bisect(mid..range.end, right_sig, right_key, left_ok, invalid);
    }
}

/// `sum_j lambda_j s_j`: one multi-scalar multiplication. `shares` must be in the
/// order of `coefficients.signers()`.
pub fn combine<S: Scheme>(
    coefficients: &LagrangeCoefficients,
    shares: &[SignatureShare<S>],
) -> S::Signature {
    debug_assert!(coefficients
        .signers()
        .iter()
        .zip(shares)
        .all(|(a, b)| *a == b.signer));
    let points: Vec<S::Signature> = shares.iter().map(|s| s.signature).collect();
    S::Signature::msm(&points, coefficients.coefficients())
}

/// Shares for one message, as a collector accumulates them: rejects shares for
/// another message, repeated signers and out-of-range signers.
#[derive(Clone, Debug)]
pub struct ShareSet<S: Scheme> {
    message: Vec<u8>,
    n: u32,
    shares: BTreeMap<NodeIndex, S::Signature>,
}

impl<S: Scheme> ShareSet<S> {
    /// An empty set for `message` among `n` signers.
    pub fn new(message: Vec<u8>, n: u32) -> Self {
        ShareSet {
            message,
            n,
            shares: BTreeMap::new(),
        }
    }

    /// The message these shares sign.
    pub fn message(&self) -> &[u8] {
        &self.message
    }

    /// Adds a share for `message`.
    pub fn insert(&mut self, message: &[u8], share: SignatureShare<S>) -> Result<(), Error> {
        if message != self.message.as_slice() {
            return Err(Error::MessageMismatch {
                signer: share.signer,
            });
        }
        if share.signer.0 >= self.n {
            return Err(Error::SignerOutOfRange {
                signer: share.signer,
                n: self.n,
            });
        }
        if self.shares.contains_key(&share.signer) {
            return Err(Error::DuplicateSigner {
                signer: share.signer,
            });
        }
        self.shares.insert(share.signer, share.signature);
        Ok(())
    }

    /// Removes a signer's share (e.g. after it was proven invalid).
    pub fn remove(&mut self, signer: NodeIndex) {
        self.shares.remove(&signer);
    }

    /// Number of shares held.
    pub fn len(&self) -> usize {
        self.shares.len()
    }

    /// Whether no share is held.
    pub fn is_empty(&self) -> bool {
        self.shares.is_empty()
    }

    /// Whether `signer` contributed.
    pub fn contains(&self, signer: NodeIndex) -> bool {
        self.shares.contains_key(&signer)
    }

    /// The shares, ordered by signer.
    pub fn shares(&self) -> Vec<SignatureShare<S>> {
        self.shares
            .iter()
            .map(|(signer, signature)| SignatureShare {
                signer: *signer,
                signature: *signature,
            })
            .collect()
    }
}

/// A trusted-dealer `(t, n)` sharing of a random secret, for tests and benchmarks
/// (the protocol itself uses the DKG). Returns the public key and the `n` shares.
pub fn deal<S: Scheme, R: RngCore + ?Sized>(
    threshold: u32,
    n: u32,
    rng: &mut R,
) -> Result<(ThresholdPublicKey<S>, Vec<SecretShare>), Error> {
    if threshold == 0 || threshold > n {
        return Err(Error::InvalidThreshold { t: threshold, n });
    }
    let domain = Arc::new(SignerDomain::new(n)?);
    let poly: Vec<Scalar> = (0..threshold).map(|_| Scalar::random(rng)).collect();
    let values = domain.evaluate_all(&poly);
    let shares: Vec<SecretShare> = values
        .iter()
        .enumerate()
        .map(|(i, v)| SecretShare::new(NodeIndex(i as u32), *v))
        .collect();
    let g = S::PublicKey::generator();
    let verification_keys: Vec<S::PublicKey> = values.iter().map(|v| g.mul(v)).collect();
    let public = ThresholdPublicKey::new(threshold, domain, g.mul(&poly[0]), verification_keys)?;
    Ok((public, shares))
}

#[cfg(test)]
mod tests;
