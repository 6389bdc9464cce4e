//! Verification of the view changes a NEW-VIEW carries (or a new primary
//! collects): every sender's signature, in one batch per signed message, and the
//! claims that decide the view-change rule (`SAFETY.md`, "Across views").

use super::Replica;
use crate::messages::{signed, Digest, ViewChange};
use crate::view_change::fast_candidate;
use crate::View;
use beacon::{NodeIndex, Point, Scheme, SignatureShare, ThresholdPublicKey};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl<S: Scheme> Replica<S> {
    /// The senders whose VIEW-CHANGE signature does not verify: one batch per
    /// signed message (honest replicas with the same claims sign the same
    /// message), bisection only when a batch fails.
    pub(super) fn forged_view_changes(
        &mut self,
        vcs: &[Arc<ViewChange<S>>],
    ) -> BTreeSet<NodeIndex> {
        let mut by_message: BTreeMap<Digest, Vec<SignatureShare<S>>> = BTreeMap::new();
        for vc in vcs {
            by_message
                .entry(vc.signed_message())
                .or_default()
                .push(SignatureShare {
                    signer: vc.from,
                    signature: vc.signature,
                });
        }
        let mut bad = BTreeSet::new();
        for (msg, shares) in by_message {
            if !self.shares_verify(&self.keys.tau.public, &msg, &shares) {
                let hashed = self.hash(&msg);
                bad.extend(
                    self.keys
                        .tau
                        .public
                        .find_invalid(&hashed, &shares, &mut self.rng),
                );
            }
        }
        bad
    }

    /// The view changes whose signatures, certificates and votes verify
    /// (batch-verified per group of identical claims).
    pub(super) fn valid_view_changes(
        &mut self,
        vcs: &[Arc<ViewChange<S>>],
    ) -> Vec<Arc<ViewChange<S>>> {
        let h = self.height;
        let mut bad = self.forged_view_changes(vcs);
        let mut certs: BTreeMap<(View, Digest), Vec<NodeIndex>> = BTreeMap::new();
        let mut votes: BTreeMap<(View, Digest), Vec<SignatureShare<S>>> = BTreeMap::new();
        for vc in vcs {
            if let Some(p) = &vc.prepared {
                certs.entry((p.view, p.digest)).or_default().push(vc.from);
            }
            if let Some(v) = &vc.fast_vote {
                votes
                    .entry((v.view, v.digest))
                    .or_default()
                    .push(SignatureShare {
                        signer: vc.from,
                        signature: v.share,
                    });
            }
        }
        for ((view, digest), senders) in &certs {
            // Identical claims carry the same signature only if honest; check each distinct one.
            let mut seen: Vec<S::Signature> = Vec::new();
            for vc in vcs.iter().filter(|v| senders.contains(&v.from)) {
                let sig = vc.prepared.as_ref().expect("grouped").signature;
                if seen.contains(&sig) {
                    continue;
                }
                if self.verify(
                    &self.keys.tau.public,
                    &signed::prepare(h, *view, digest),
                    &sig,
                ) {
                    seen.push(sig);
                } else {
                    bad.insert(vc.from);
                }
            }
        }
        for ((view, digest), shares) in votes {
            let hashed = self.hash(&signed::fast_vote(h, view, &digest));
            let invalid = self
                .keys
                .sigma
                .public
                .find_invalid(&hashed, &shares, &mut self.rng);
            bad.extend(invalid);
        }
        vcs.iter()
            .filter(|v| !bad.contains(&v.from))
            .cloned()
            .collect()
    }

    /// Verifies only the claims that decide [`safe_value`]: the highest prepare
    /// certificate and the fast votes of the winning digest.
    pub(super) fn deciding_claims_verify(&mut self, vcs: &[Arc<ViewChange<S>>]) -> bool {
        let h = self.height;
        if let Some(p) = vcs
            .iter()
            .filter_map(|v| v.prepared.as_ref())
            .max_by_key(|p| p.view)
        {
            if !self.verify(
                &self.keys.tau.public,
                &signed::prepare(h, p.view, &p.digest),
                &p.signature,
            ) {
                return false;
            }
        }
        if let Some((from_view, digest)) = fast_candidate(vcs, self.config.f, self.config.c) {
            let mut by_view: BTreeMap<View, Vec<SignatureShare<S>>> = BTreeMap::new();
            for vc in vcs {
                if let Some(v) = vc
                    .fast_vote
                    .as_ref()
                    .filter(|v| v.view >= from_view && v.digest == digest)
                {
                    by_view.entry(v.view).or_default().push(SignatureShare {
                        signer: vc.from,
                        signature: v.share,
                    });
                }
            }
            for (view, shares) in by_view {
                if !self.votes_verify(&signed::fast_vote(h, view, &digest), &shares) {
                    return false;
                }
            }
        }
        true
    }

    /// Batch-verifies sigma shares on `msg`, shared between simulated replicas.
    /// The random weights are derived from a hash of every share (Fiat-Shamir), so
    /// the check is a pure function of public data and stays sound: no share can
    /// be chosen after the weights.
    pub(super) fn votes_verify(&self, msg: &[u8], shares: &[SignatureShare<S>]) -> bool {
        self.shares_verify(&self.keys.sigma.public, msg, shares)
    }

    /// Batch-verifies shares of `public`'s key on `msg` (weights as in
    /// [`Self::votes_verify`]).
    pub(super) fn shares_verify(
        &self,
        public: &ThresholdPublicKey<S>,
        msg: &[u8],
        shares: &[SignatureShare<S>],
    ) -> bool {
        let mut h = Sha256::new();
        h.update(b"batch-verify shares");
        h.update(public.group_key().to_bytes());
        h.update(msg);
        for s in shares {
            h.update(s.signer.0.to_be_bytes());
            h.update(s.signature.to_bytes());
        }
        let key: [u8; 32] = h.finalize().into();
        let hashed = self.hash(msg);
        *self.memo.get_or_compute(key, || {
            let mut rng = ChaCha20Rng::from_seed(key);
            public.batch_verify(&hashed, shares, &mut rng)
        })
    }
}
