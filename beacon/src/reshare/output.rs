//! What a resharing leaves a participant with: the new group's public side and,
//! for a new member, its share; persisted like the DKG's output.

use crate::dkg::{ThresholdKeyMaterial, Verdicts};
use crate::lagrange::SignerDomain;
use crate::scheme::Scheme;
use crate::threshold::{SecretShare, ThresholdPublicKey};
use crate::{wire, Error, NodeIndex, ReshareError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The result of a resharing at one participant. Old members that leave get the
/// new public material and no share. The share never appears in `Debug` output.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ReshareOutput<S: Scheme> {
    /// The session ([`ReshareEpoch::session`]).
    pub session: [u8; 32],
    /// The epoch this resharing starts (the new group's shares sign from the
    /// switch to it on).
    pub epoch: u64,
    /// Size of the new group.
    pub n: u32,
    /// This participant's new index, if it is a new member (an old member
    /// that leaves has none, and no share).
    pub me: Option<NodeIndex>,
    /// The qualified old dealers (old indices; the first `t_old` of `QUAL`
    /// were combined) and those excluded, with the reason (one that dealt
    /// nothing in time counts as excluded).
    pub verdicts: Verdicts,
    /// The new threshold.
    pub threshold: u32,
    /// The new public polynomial (`threshold` points; the first is the unchanged
    /// group key).
    pub public_polynomial: Arc<Vec<S::PublicKey>>,
    /// Every new member's verification key.
    pub verification_keys: Arc<Vec<S::PublicKey>>,
    /// This participant's new share, if it is a new member.
    pub share: Option<SecretShare>,
}

impl<S: Scheme> ReshareOutput<S> {
    /// The group public key (the old one).
    pub fn group_key(&self) -> &S::PublicKey {
        &self.public_polynomial[0]
    }

    /// The new key material in the DKG's shape, for a new member.
    pub fn key_material(&self) -> Option<ThresholdKeyMaterial<S>> {
        Some(ThresholdKeyMaterial {
            threshold: self.threshold,
            public_polynomial: self.public_polynomial.clone(),
            secret_share: self.share.clone()?,
            verification_keys: self.verification_keys.clone(),
        })
    }

    /// The new group's public side, for collectors and verifiers.
    pub fn public_key(&self) -> Result<ThresholdPublicKey<S>, Error> {
        ThresholdPublicKey::new(
            self.threshold,
            SignerDomain::shared(self.n)?,
            *self.group_key(),
            self.verification_keys.clone(),
        )
    }

    /// Checks internal consistency: sizes, and the share against its key.
    pub fn check(&self) -> Result<(), Error> {
        if self.threshold == 0
            || self.threshold > self.n
            || self.public_polynomial.len() != self.threshold as usize
            || self.verification_keys.len() != self.n as usize
        {
            return Err(Error::Reshare(ReshareError::KeyMaterialSize));
        }
        match (&self.share, self.me) {
            (None, None) => Ok(()),
            (Some(share), Some(me)) if share.index == me && me.0 < self.n => {
                if share.verification_key::<S>() == self.verification_keys[me.0 as usize] {
                    Ok(())
                } else {
                    Err(Error::Reshare(ReshareError::ShareKeyMismatch))
                }
            }
            _ => Err(Error::Reshare(ReshareError::ShareIndexMismatch)),
        }
    }

    /// Encodes for persistence (wire codec).
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        wire::encode(self)
    }

    /// Decodes a persisted output and checks it ([`ReshareOutput::check`]).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let out: ReshareOutput<S> = wire::decode(bytes)?;
        out.check()?;
        Ok(out)
    }
}
