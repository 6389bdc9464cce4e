//! The replica's cryptography behind one type: its three key shares, the memo
//! that shares pure public computations between simulated replicas (a real node
//! passes [`Memo::disabled`], which computes everything), the seeded RNG for
//! batch-verification weights, and the replicas whose shares are no longer
//! worth verifying. Every signature a replica makes or checks goes through here.

use super::interface::ShareKind;
use crate::config::{KeyShare, ReplicaKeys};
use crate::Height;
use beacon::curve::FixedBase;
use beacon::memo::Memo;
use beacon::{
    InterpolationMethod, NodeIndex, Point, Scheme, ShareSet, SignatureShare, ThresholdPublicKey,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Heights for which a replica proven to send invalid shares is ignored.
pub const CONVICTION_HEIGHTS: u64 = 64;

/// The three threshold keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    /// Fast path, `3f + c + 1`.
    Sigma,
    /// Slow path and view changes, `2f + c + 1`.
    Tau,
    /// Beacon, `t_b`.
    Beacon,
}

impl Key {
    /// The key a share kind is made with.
    pub(super) fn of(share: ShareKind) -> Key {
        match share {
            ShareKind::Sigma => Key::Sigma,
            ShareKind::Tau | ShareKind::Commit => Key::Tau,
            ShareKind::Beacon => Key::Beacon,
        }
    }
}

/// A threshold signature recovered from shares, and the signers whose shares
/// were invalid.
pub(super) struct Recovered<S: Scheme> {
    /// The signature, unless too few valid shares remained.
    pub signature: Option<S::Signature>,
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

    /// This replica.
    pub(super) fn me(&self) -> NodeIndex {
        self.keys.me
    }

    fn key(&self, key: Key) -> &KeyShare<S> {
        key_share(&self.keys, key)
    }

    /// The public side of `key`.
    pub(super) fn public(&self, key: Key) -> &ThresholdPublicKey<S> {
        &self.key(key).public
    }

    /// Hash to the curve: kept for the last few messages (hashing to G2 costs
    /// about as much as a pairing), and shared between simulated replicas.
    pub(super) fn hash(&self, msg: &[u8]) -> S::Signature {
        let mut h = Sha256::new();
        h.update(b"hash-to-curve");
        h.update(S::DST);
        h.update(msg);
        let key: [u8; 32] = h.finalize().into();
        let mut hashed = self.hashed.borrow_mut();
        if let Some((_, point)) = hashed.iter().find(|(k, _)| *k == key) {
            return *point;
        }
        let point = *self.memo.get_or_compute(key, || S::hash_message(msg));
        if hashed.len() == HASHED_KEPT {
            hashed.pop_front();
        }
        hashed.push_back((key, point));
        point
    }

    /// Verifies a threshold signature under `key`, shared between simulated
    /// replicas.
    pub(super) fn verify(&self, key: Key, msg: &[u8], sig: &S::Signature) -> bool {
        let public = self.public(key);
        let mut h = Sha256::new();
        h.update(b"verify");
        h.update(public.group_key().to_bytes());
        h.update(msg);
        h.update(sig.to_bytes());
        let hashed = self.hash(msg);
        *self.memo.get_or_compute(h.finalize().into(), || {
            S::verify_hashed(public.group_key(), &hashed, sig)
        })
    }

    /// This replica's share of `key` on `msg`.
    pub(super) fn sign(&self, key: Key, msg: &[u8]) -> S::Signature {
        let hashed = self.hash(msg);
        let share = &self.key(key).share;
        if !self.memo.is_enabled() {
            return share.sign_hashed::<S>(&hashed).signature;
        }
        // Simulated replicas sign the same messages, each with its own
        // share: a table of the message's multiples, built once and shared,
        // makes each signature a fixed-base multiplication (the same share,
        // charged as the multiplication a node does).
        let mut h = Sha256::new();
        h.update(b"fixed-base table");
        h.update(S::DST);
        h.update(msg);
        let table = self
            .memo
            .get_or_compute_recent(h.finalize().into(), || FixedBase::new(hashed));
        share.sign_with_table::<S>(&table).signature
    }

    /// Recovers `key`'s threshold signature from `set` (one check of the
    /// interpolated signature, batch verification with bisection when it
    /// fails), convicting the signers of invalid shares at `height`.
    pub(super) fn recover(&mut self, key: Key, set: &ShareSet<S>, height: Height) -> Recovered<S> {
        let shares = set.shares();
        let public = &key_share(&self.keys, key).public;
        match public.recover(
            set.message(),
            &shares,
            InterpolationMethod::RootsOfUnity,
            &mut self.rng,
        ) {
            Ok(r) => {
                for culprit in &r.invalid {
                    self.convicted.insert(*culprit, height);
                }
                Recovered {
                    signature: r.signature,
                    invalid: r.invalid,
                }
            }
            Err(_) => Recovered {
                signature: None,
                invalid: Vec::new(),
            },
        }
    }

    /// Batch-verifies shares of `key` on `msg`, shared between simulated
    /// replicas. The random weights are derived from a hash of every share
    /// (Fiat-Shamir), so the check is a pure function of public data and stays
    /// sound: no share can be chosen after the weights.
    pub(super) fn shares_verify(&self, key: Key, msg: &[u8], shares: &[SignatureShare<S>]) -> bool {
        let public = self.public(key);
        let mut h = Sha256::new();
        h.update(b"batch-verify shares");
        h.update(public.group_key().to_bytes());
        h.update(msg);
        for s in shares {
            h.update(s.signer.0.to_be_bytes());
            h.update(s.signature.to_bytes());
        }
        let seed: [u8; 32] = h.finalize().into();
        let hashed = self.hash(msg);
        *self.memo.get_or_compute(seed, || {
            let mut rng = ChaCha20Rng::from_seed(seed);
            public.batch_verify(&hashed, shares, &mut rng)
        })
    }

    /// The signers of invalid shares of `key` on `msg` (batch verification with
    /// bisection, weights from this replica's RNG).
    pub(super) fn find_invalid(
        &mut self,
        key: Key,
        msg: &[u8],
        shares: &[SignatureShare<S>],
    ) -> Vec<NodeIndex> {
        let hashed = self.hash(msg);
        key_share(&self.keys, key)
            .public
            .find_invalid(&hashed, shares, &mut self.rng)
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

fn key_share<S: Scheme>(keys: &ReplicaKeys<S>, key: Key) -> &KeyShare<S> {
    match key {
        Key::Sigma => &keys.sigma,
        Key::Tau => &keys.tau,
        Key::Beacon => &keys.beacon,
    }
}
