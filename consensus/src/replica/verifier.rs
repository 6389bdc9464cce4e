//! The replica's cryptography behind one type: its beacon share and its own
//! consensus key with the epoch's consensus keys, the memo that shares pure
//! public computations between simulated replicas (a real node passes
//! [`Memo::disabled`], which computes everything), the seeded RNG for
//! batch-verification weights, and the replicas whose signatures are no
//! longer worth verifying. Every signature a replica makes or checks goes
//! through here.
//!
//! Votes and view changes are signed with the member's own key, bound to the
//! epoch ([`crate::EpochKeys::binding`]), and certificates are their
//! multi-signatures with the bitmap of signers; only the beacon is a
//! threshold signature.

use super::interface::ShareKind;
use crate::keys::ReplicaKeys;
use crate::Height;
use beacon::curve::FixedBase;
use beacon::memo::Memo;
use beacon::multisig::{self, SignerBitmap};
use beacon::{InterpolationMethod, NodeIndex, Point, Scheme, ShareSet, SignatureShare};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Heights for which a replica proven to send invalid shares is ignored.
pub const CONVICTION_HEIGHTS: u64 = 64;

/// The two keys a replica signs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// Its own consensus key: fast-path votes, prepares, commits, view
    /// changes (multi-signatures).
    Consensus,
    /// Its beacon share, `t_b` (threshold signatures).
    Beacon,
}

impl Key {
    /// The key a share kind is made with.
    pub(super) fn of(share: ShareKind) -> Key {
        match share {
            ShareKind::Vote | ShareKind::Commit => Key::Consensus,
            ShareKind::Beacon => Key::Beacon,
        }
    }
}

/// A signature combined from shares or votes, with its signers, and the
/// signers whose shares were invalid.
pub(super) struct Recovered<S: Scheme> {
    /// The signature and who signed it, unless too few valid shares remained.
    pub signature: Option<(S::Signature, SignerBitmap)>,
    /// Signers of invalid shares (now convicted).
    pub invalid: Vec<NodeIndex>,
}

/// Keys, memo, RNG and convictions.
pub(super) struct Verifier<S: Scheme> {
    keys: ReplicaKeys<S>,
    memo: Arc<Memo>,
    rng: ChaCha20Rng,
    /// Replicas proven to have sent invalid shares, with the height of their
    /// last conviction: their shares are ignored for [`CONVICTION_HEIGHTS`].
    convicted: BTreeMap<NodeIndex, Height>,
    /// The last messages hashed to the curve (a round signs and verifies the
    /// same few messages several times: its vote, the prepare certificate,
    /// the commit proof, the beacon), newest last.
    hashed: RefCell<VecDeque<([u8; 32], S::Signature)>>,
}

/// Messages whose hash to the curve a replica keeps.
const HASHED_KEPT: usize = 8;

impl<S: Scheme> Verifier<S> {
    /// `seed` drives the batch-verification weights.
    pub(super) fn new(keys: ReplicaKeys<S>, memo: Arc<Memo>, seed: [u8; 32]) -> Self {
        Verifier {
            keys,
            memo,
            rng: ChaCha20Rng::from_seed(seed),
            convicted: BTreeMap::new(),
            hashed: RefCell::new(VecDeque::with_capacity(HASHED_KEPT)),
        }
    }

    /// Members of this epoch.
    pub(super) fn n(&self) -> u32 {
        self.keys.epoch.n()
    }

    /// This replica.
    pub(super) fn me(&self) -> NodeIndex {
        self.keys.me
    }

    /// `msg` hashed to the curve under `key`'s tag: kept for the last few
    /// messages (hashing to G2 costs about as much as a pairing), and shared
    /// between simulated replicas. A consensus message is bound to the epoch
    /// first.
    pub(super) fn hash(&self, key: Key, msg: &[u8]) -> S::Signature {
        let id = self.hash_id(key, msg);
        let mut hashed = self.hashed.borrow_mut();
        if let Some((_, point)) = hashed.iter().find(|(k, _)| *k == id) {
            return *point;
        }
        let point = *self.memo.get_or_compute(id, || match key {
            Key::Beacon => S::hash_message(msg),
            Key::Consensus => self.keys.epoch.hash_vote(msg),
        });
        if hashed.len() == HASHED_KEPT {
            hashed.pop_front();
        }
        hashed.push_back((id, point));
        point
    }

    /// What names `msg` hashed under `key`: the tag, the epoch's binding for
    /// a consensus message, and the message.
    fn hash_id(&self, key: Key, msg: &[u8]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"hash-to-curve");
        match key {
            Key::Beacon => h.update(S::DST),
            Key::Consensus => {
                h.update(multisig::sign_dst::<S>());
                h.update(self.keys.epoch.binding());
            }
        }
        h.update(msg);
        h.finalize().into()
    }

    /// Verifies a beacon (a threshold signature under the group key), shared
    /// between simulated replicas.
    pub(super) fn verify_beacon(&self, msg: &[u8], sig: &S::Signature) -> bool {
        let public = &self.keys.beacon.public;
        let mut h = Sha256::new();
        h.update(b"verify");
        h.update(public.group_key().to_bytes());
        h.update(msg);
        h.update(sig.to_bytes());
        let hashed = self.hash(Key::Beacon, msg);
        *self.memo.get_or_compute(h.finalize().into(), || {
            S::verify_hashed(public.group_key(), &hashed, sig)
        })
    }

    /// Verifies a certificate: a multi-signature on `msg` by `signers`, at
    /// least `quorum` distinct members of this epoch. Shared between
    /// simulated replicas.
    pub(super) fn verify_certificate(
        &self,
        msg: &[u8],
        sig: &S::Signature,
        signers: &SignerBitmap,
        quorum: u32,
    ) -> bool {
        if signers.n() != self.keys.epoch.n() || signers.count() < quorum {
            return false;
        }
        let mut h = Sha256::new();
        h.update(b"verify certificate");
        h.update(self.keys.epoch.binding());
        h.update(msg);
        h.update(sig.to_bytes());
        h.update(beacon::wire::encode(signers).unwrap_or_default());
        let hashed = self.hash(Key::Consensus, msg);
        *self.memo.get_or_compute(h.finalize().into(), || {
            self.keys.epoch.keys().verify(&hashed, sig, signers)
        })
    }

    /// This replica's signature on `msg`: its beacon share, or its vote with
    /// its own consensus key.
    pub(super) fn sign(&self, key: Key, msg: &[u8]) -> S::Signature {
        let hashed = self.hash(key, msg);
        let secret = match key {
            Key::Beacon => self.keys.beacon.share.value(),
            Key::Consensus => self.keys.consensus.scalar(),
        };
        if !self.memo.is_enabled() {
            return hashed.mul(secret);
        }
        // Simulated replicas sign the same messages, each with its own
        // key: a table of the message's multiples, built once and shared,
        // makes each signature a fixed-base multiplication (the same key,
        // charged as the multiplication a node does).
        let mut h = Sha256::new();
        h.update(b"fixed-base table");
        h.update(self.hash_id(key, msg));
        let table = self
            .memo
            .get_or_compute_recent(h.finalize().into(), || FixedBase::new(hashed));
        table.mul(secret)
    }

    /// Combines `set` under `key`: the beacon by interpolation (one check of
    /// the interpolated signature, batch verification with bisection when it
    /// fails), a certificate by adding the votes (one check of the sum, the
    /// same bisection when it fails). The signers of invalid shares are
    /// convicted at `height`.
    pub(super) fn recover(&mut self, key: Key, set: &ShareSet<S>, height: Height) -> Recovered<S> {
        let recovered = match key {
            Key::Beacon => self.recover_beacon(set),
            Key::Consensus => self.aggregate_votes(set),
        };
        for culprit in &recovered.invalid {
            self.convicted.insert(*culprit, height);
        }
        recovered
    }

    fn recover_beacon(&mut self, set: &ShareSet<S>) -> Recovered<S> {
        let shares = set.shares();
        match self.keys.beacon.public.recover(
            set.message(),
            &shares,
            InterpolationMethod::RootsOfUnity,
            &mut self.rng,
        ) {
            Ok(r) => Recovered {
                signature: r.signature.map(|sig| {
                    let signers = shares.iter().map(|s| s.signer);
                    let n = self.keys.beacon.public.n();
                    (
                        sig,
                        SignerBitmap::of(n, signers).unwrap_or(SignerBitmap::new(n)),
                    )
                }),
                invalid: r.invalid,
            },
            Err(_) => Recovered {
                signature: None,
                invalid: Vec::new(),
            },
        }
    }

    /// Adds up the votes of `set` into a multi-signature of every valid vote:
    /// the sum is checked once (shared between simulated replicas); when it
    /// fails, bisection names the invalid votes and the rest are added.
    fn aggregate_votes(&mut self, set: &ShareSet<S>) -> Recovered<S> {
        let n = self.keys.epoch.n();
        let votes = set.shares();
        let Ok((sum, signers)) = multisig::aggregate::<S>(n, &votes) else {
            return Recovered {
                signature: None,
                invalid: Vec::new(),
            };
        };
        if self.verify_certificate(set.message(), &sum, &signers, 1) {
            return Recovered {
                signature: Some((sum, signers)),
                invalid: Vec::new(),
            };
        }
        let invalid = self.find_invalid(Key::Consensus, set.message(), &votes);
        let valid: Vec<SignatureShare<S>> = votes
            .into_iter()
            .filter(|v| !invalid.contains(&v.signer))
            .collect();
        let signature = match multisig::aggregate::<S>(n, &valid) {
            Ok((sum, signers)) if signers.count() > 0 => Some((sum, signers)),
            _ => None,
        };
        Recovered { signature, invalid }
    }

    /// Batch-verifies signatures of `key` on `msg` (beacon shares, or
    /// members' votes), shared between simulated replicas. The random
    /// weights are derived from a hash of every signature (Fiat-Shamir), so
    /// the check is a pure function of public data and stays sound: no
    /// signature can be chosen after the weights.
    pub(super) fn shares_verify(&self, key: Key, msg: &[u8], shares: &[SignatureShare<S>]) -> bool {
        let mut h = Sha256::new();
        h.update(b"batch-verify shares");
        match key {
            Key::Beacon => h.update(self.keys.beacon.public.group_key().to_bytes()),
            Key::Consensus => h.update(self.keys.epoch.binding()),
        }
        h.update(msg);
        for s in shares {
            h.update(s.signer.0.to_be_bytes());
            h.update(s.signature.to_bytes());
        }
        let seed: [u8; 32] = h.finalize().into();
        let hashed = self.hash(key, msg);
        *self.memo.get_or_compute(seed, || {
            let mut rng = ChaCha20Rng::from_seed(seed);
            match key {
                Key::Beacon => self
                    .keys
                    .beacon
                    .public
                    .batch_verify(&hashed, shares, &mut rng),
                Key::Consensus => self
                    .keys
                    .epoch
                    .keys()
                    .batch_verify(&hashed, shares, &mut rng),
            }
        })
    }

    /// The signers of invalid signatures of `key` on `msg` (batch
    /// verification with bisection, weights from this replica's RNG).
    pub(super) fn find_invalid(
        &mut self,
        key: Key,
        msg: &[u8],
        shares: &[SignatureShare<S>],
    ) -> Vec<NodeIndex> {
        let hashed = self.hash(key, msg);
        match key {
            Key::Beacon => self
                .keys
                .beacon
                .public
                .find_invalid(&hashed, shares, &mut self.rng),
            Key::Consensus => self
                .keys
                .epoch
                .keys()
                .find_invalid(&hashed, shares, &mut self.rng),
        }
    }

    /// Whether `from`'s shares are ignored at `height`: convicted less than
    /// [`CONVICTION_HEIGHTS`] ago (a conviction expires, so a replica that was
    /// faulty once, say with a corrupted key it has since restored, counts again).
    pub(super) fn is_convicted(&self, from: NodeIndex, height: Height) -> bool {
        self.convicted
            .get(&from)
            .is_some_and(|at| height < at.saturating_add(CONVICTION_HEIGHTS))
    }
}
