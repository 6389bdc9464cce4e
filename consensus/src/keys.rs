//! The key material a replica signs and verifies with: its share of the
//! beacon key (the one threshold key, dealt by the DKG and carried across
//! changes of members by resharing), its own consensus key, and the epoch's
//! public consensus keys ([`EpochKeys`]).
//!
//! Consensus certificates are multi-signatures of the members' own keys
//! (`beacon::multisig`), each registered with a proof of possession and
//! bound to its epoch: the epoch's number and key list are hashed into every
//! vote ([`EpochKeys::binding`]), so a certificate of one epoch is nothing in
//! another. Never aggregate under shares of the beacon polynomial:
//! `consensus/SAFETY.md`, "Certificates are multi-signatures".

use crate::config::ReplicaConfig;
use crate::{ConsensusError, Epoch};
use beacon::dkg::DkgOutput;
use beacon::multisig::{self, ConsensusListing, ConsensusSecretKey, MultisigKeys};
use beacon::{NodeIndex, Point, Scheme, SecretShare, SignerDomain, ThresholdPublicKey};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// One threshold key as a replica holds it: its share and the public side.
#[derive(Clone, Debug)]
pub struct KeyShare<S: Scheme> {
    /// This replica's secret share.
    pub share: SecretShare,
    /// Group key and every verification key.
    pub public: ThresholdPublicKey<S>,
}

/// The public consensus keys of one epoch's members, by epoch index, bound to
/// the epoch. Shared (`Arc`) by every replica of a simulated epoch.
#[derive(Clone, Debug)]
pub struct EpochKeys<S: Scheme> {
    epoch: Epoch,
    keys: MultisigKeys<S>,
    binding: [u8; 32],
}

impl<S: Scheme> EpochKeys<S> {
    /// The keys of epoch `epoch`'s members from their listings, in epoch
    /// order. With `check_possession`, every proof of possession is verified
    /// (two pairings each: where a listing enters the system, at start or when
    /// a change of members is decided); without it, only the points are.
    pub fn from_listings(
        epoch: Epoch,
        listings: &[ConsensusListing],
        check_possession: bool,
    ) -> Result<Self, ConsensusError> {
        let named = |(i, source): (usize, beacon::Error)| ConsensusError::ConsensusKey {
            member: i as u32,
            source,
        };
        let keys = if check_possession {
            let pairs = multisig::decode_listings(listings, ConsensusListing::points::<S>)
                .map_err(named)?;
            // One batch; where it fails, each proof alone names the bad one.
            if !multisig::verify_possessions::<S>(&pairs) {
                for (i, l) in listings.iter().enumerate() {
                    l.decode::<S>().map_err(|e| named((i, e)))?;
                }
            }
            pairs.into_iter().map(|(pk, _)| pk).collect()
        } else {
            multisig::decode_listings(listings, ConsensusListing::public_key::<S>).map_err(named)?
        };
        Ok(Self::new(epoch, Arc::new(keys), listings))
    }

    fn new(epoch: Epoch, keys: Arc<Vec<S::PublicKey>>, listings: &[ConsensusListing]) -> Self {
        EpochKeys {
            epoch,
            keys: MultisigKeys::new(keys),
            binding: binding(epoch, listings),
        }
    }

    /// The epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The number of members.
    pub fn n(&self) -> u32 {
        self.keys.n()
    }

    /// The members' keys and their sum.
    pub fn keys(&self) -> &MultisigKeys<S> {
        &self.keys
    }

    /// What every vote of this epoch is bound to: the epoch's number and its
    /// members' keys.
    pub fn binding(&self) -> &[u8; 32] {
        &self.binding
    }

    /// A vote message of this epoch hashed to the curve: bound to the epoch,
    /// under the proof-of-possession scheme's signing tag.
    pub fn hash_vote(&self, msg: &[u8]) -> S::Signature {
        multisig::hash_vote::<S>(&[self.binding.as_slice(), msg].concat())
    }

    /// The keys of members whose consensus keys are `secrets` (in epoch
    /// order), in epoch `epoch`: for tests and generated corpora, where the
    /// secrets are known.
    pub fn of_secrets(epoch: Epoch, secrets: &[ConsensusSecretKey]) -> Self {
        let listings: Vec<ConsensusListing> = secrets.iter().map(|s| s.listing::<S>()).collect();
        let keys = secrets.iter().map(|s| s.public::<S>()).collect();
        Self::new(epoch, Arc::new(keys), &listings)
    }
}

/// `compute`'s result, shared through `memo` under `key` when it succeeds
/// (simulated members each charged its work); a typed error, which the memo
/// cannot share, is computed again by the caller that meets it.
pub(crate) fn memoized<T: Clone + std::any::Any + Send + Sync, E>(
    memo: &beacon::memo::Memo,
    key: [u8; 32],
    compute: impl Fn() -> Result<T, E>,
) -> Result<T, E> {
    match memo.get_or_compute(key, || compute().ok()).as_ref() {
        Some(value) => Ok(value.clone()),
        None => compute(),
    }
}

/// SHA-256 of an epoch's number and its members' listed keys.
pub fn binding(epoch: Epoch, listings: &[ConsensusListing]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/epoch-consensus-keys/1");
    h.update(epoch.get().to_be_bytes());
    h.update((listings.len() as u64).to_be_bytes());
    for l in listings {
        h.update((l.public_key.len() as u64).to_be_bytes());
        h.update(&l.public_key);
    }
    h.finalize().into()
}

/// What a replica signs with: its beacon share and its own consensus key,
/// with the epoch's public consensus keys.
#[derive(Clone, Debug)]
pub struct ReplicaKeys<S: Scheme> {
    /// This replica.
    pub me: NodeIndex,
    /// Beacon key (`t_b`): the only threshold key.
    pub beacon: KeyShare<S>,
    /// This member's own consensus key (votes, view changes).
    pub consensus: ConsensusSecretKey,
    /// The epoch's public consensus keys.
    pub epoch: Arc<EpochKeys<S>>,
}

impl<S: Scheme> ReplicaKeys<S> {
    /// This member's vote on `msg`: its own consensus key on the message
    /// bound to the epoch.
    pub fn sign_vote(&self, msg: &[u8]) -> S::Signature {
        self.epoch.hash_vote(msg).mul(self.consensus.scalar())
    }

    /// Checks that these keys fit `config`: this replica among its `n`, the
    /// beacon key over `n` signers with threshold `t_b`, the epoch's consensus
    /// keys over the same `n`, and this member's key among them. A replica is
    /// built only with keys that pass.
    pub fn check(&self, config: &ReplicaConfig) -> Result<(), ConsensusError> {
        let expected = config.dkg_thresholds();
        let got = vec![self.beacon.public.threshold()];
        let n = self.beacon.public.n();
        if got != expected || n != config.n || self.me.0 >= config.n {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: n,
                dkg_thresholds: got,
                n: config.n,
                thresholds: expected,
            });
        }
        self.check_consensus(config.n)
    }

    fn check_consensus(&self, n: u32) -> Result<(), ConsensusError> {
        if self.epoch.n() != n {
            return Err(ConsensusError::ConsensusKeyCount {
                listed: self.epoch.n(),
                n,
            });
        }
        let mine = self.consensus.public::<S>();
        if self.epoch.keys().key(self.me) != Some(&mine) {
            return Err(ConsensusError::NotMyConsensusKey { member: self.me.0 });
        }
        Ok(())
    }

    /// The keys of a DKG (or resharing) run with thresholds
    /// `config.dkg_thresholds()`, this member's consensus key `consensus` and
    /// the epoch's consensus keys `epoch`.
    pub fn from_dkg(
        config: &ReplicaConfig,
        output: &DkgOutput<S>,
        consensus: ConsensusSecretKey,
        epoch: Arc<EpochKeys<S>>,
    ) -> Result<Self, ConsensusError> {
        let expected = config.dkg_thresholds();
        let got: Vec<u32> = output.keys.iter().map(|k| k.threshold).collect();
        if got != expected || output.n != config.n {
            return Err(ConsensusError::DkgMismatch {
                dkg_n: output.n,
                dkg_thresholds: got,
                n: config.n,
                thresholds: expected,
            });
        }
        let domain = SignerDomain::shared(config.n)?;
        let keys = ReplicaKeys {
            me: output.me,
            beacon: KeyShare {
                share: output.keys[0].secret_share.clone(),
                public: output.keys[0].public_key(domain)?,
            },
            consensus,
            epoch,
        };
        keys.check_consensus(config.n)?;
        Ok(keys)
    }
}

/// Whether `listing` is `secret`'s public key under `S` (a member checks that
/// a directory or a change lists its own key).
pub fn lists<S: Scheme>(listing: &ConsensusListing, secret: &ConsensusSecretKey) -> bool {
    listing.public_key == secret.public::<S>().to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::MinPk;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    fn listings(n: u32) -> (Vec<ConsensusSecretKey>, Vec<ConsensusListing>) {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let secrets: Vec<_> = (0..n)
            .map(|_| ConsensusSecretKey::random(&mut rng))
            .collect();
        let listed = secrets.iter().map(|s| s.listing::<MinPk>()).collect();
        (secrets, listed)
    }

    #[test]
    fn a_listing_without_a_valid_proof_is_refused_and_named() {
        let (_, mut listed) = listings(4);
        assert!(EpochKeys::<MinPk>::from_listings(Epoch::ZERO, &listed, true).is_ok());
        listed[2].possession = listed[1].possession.clone();
        let err = EpochKeys::<MinPk>::from_listings(Epoch::ZERO, &listed, true).unwrap_err();
        assert!(
            matches!(err, ConsensusError::ConsensusKey { member: 2, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("member 2"), "{err}");
        // Points are still checked without the proofs.
        assert!(EpochKeys::<MinPk>::from_listings(Epoch::ZERO, &listed, false).is_ok());
        listed[3].public_key.truncate(10);
        assert!(EpochKeys::<MinPk>::from_listings(Epoch::ZERO, &listed, false).is_err());
    }

    #[test]
    fn the_binding_names_the_epoch_and_the_keys() {
        let (_, listed) = listings(4);
        let e1 = Epoch::ZERO.next().unwrap();
        assert_ne!(binding(Epoch::ZERO, &listed), binding(e1, &listed));
        assert_ne!(binding(e1, &listed[..3]), binding(e1, &listed));
        let mut swapped = listed.clone();
        swapped.swap(0, 1);
        assert_ne!(binding(e1, &swapped), binding(e1, &listed));
    }
}
