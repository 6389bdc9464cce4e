//! The result of a DKG: per threshold, the group polynomial, verification keys
//! and this member's share, with the checks a restored result must pass.

use super::Verdicts;
use crate::lagrange::SignerDomain;
use crate::scheme::Scheme;
use crate::threshold::{SecretShare, ThresholdPublicKey};
use crate::{wire, DkgError, Error, NodeIndex};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Key material for one threshold.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ThresholdKeyMaterial<S: Scheme> {
    /// The threshold `t`.
    pub threshold: u32,
    /// Group polynomial commitments (`t` points; the first is the group key).
    pub public_polynomial: Arc<Vec<S::PublicKey>>,
    /// This member's share.
    pub secret_share: SecretShare,
    /// Every member's verification key.
    pub verification_keys: Arc<Vec<S::PublicKey>>,
}

impl<S: Scheme> ThresholdKeyMaterial<S> {
    /// The group public key.
    pub fn group_key(&self) -> &S::PublicKey {
        &self.public_polynomial[0]
    }

    /// The public side, ready for collectors and verifiers.
    pub fn public_key(&self, domain: Arc<SignerDomain>) -> Result<ThresholdPublicKey<S>, Error> {
        ThresholdPublicKey::new(
            self.threshold,
            domain,
            *self.group_key(),
            self.verification_keys.clone(),
        )
    }
}

/// The result of a DKG run at one member: persist it, and a restarted member
/// needs no new DKG. The secret shares never appear in `Debug` output.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct DkgOutput<S: Scheme> {
    /// The run.
    pub session: [u8; 32],
    /// Number of members.
    pub n: u32,
    /// This member.
    pub me: NodeIndex,
    /// The qualified dealers (`QUAL`, ascending) and those excluded, with
    /// the reason.
    pub verdicts: Verdicts,
    /// One entry per requested threshold, in the order requested.
    pub keys: Vec<ThresholdKeyMaterial<S>>,
}

impl<S: Scheme> DkgOutput<S> {
    /// Encodes for persistence (wire codec).
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        wire::encode(self)
    }

    /// Decodes a persisted output and checks its consistency: every share matches
    /// its verification key, every key vector has `n` entries.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let out: DkgOutput<S> = wire::decode(bytes)?;
        out.check()?;
        Ok(out)
    }

    /// Checks internal consistency.
    pub fn check(&self) -> Result<(), Error> {
        if self.me.0 >= self.n {
            return Err(Error::SignerOutOfRange {
                signer: self.me,
                n: self.n,
            });
        }
        for k in &self.keys {
            if k.threshold == 0
                || k.threshold > self.n
                || k.verification_keys.len() != self.n as usize
                || k.public_polynomial.len() != k.threshold as usize
            {
                return Err(Error::Dkg(DkgError::KeyMaterialSize));
            }
            if k.secret_share.index != self.me
                || k.secret_share.verification_key::<S>() != k.verification_keys[self.me.0 as usize]
            {
                return Err(Error::Dkg(DkgError::ShareKeyMismatch));
            }
        }
        Ok(())
    }
}
