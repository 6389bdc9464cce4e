//! Step 5, verification of view changes: those a new primary collects, one by
//! one (every sender's signature with its own consensus key, in one batch per
//! signed message, its certificate and its fast vote), and the aggregated ones
//! a NEW-VIEW carries (one multi-signature per claim, and the claims that
//! decide the view-change rule; `SAFETY.md`, "Across views").

use super::safe_value::fast_candidate;
use super::verifier::{Key, Verifier};
use crate::messages::{
    signed, Digest, PrepareCertificate, ViewChange, ViewChangeClaims, ViewChangeProof,
};
use crate::{Height, View};
use beacon::multisig::SignerBitmap;
use beacon::{NodeIndex, Point, Scheme, SignatureShare};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl<S: Scheme> Verifier<S> {
    /// The senders whose VIEW-CHANGE signature does not verify: one batch per
    /// signed message (honest replicas with the same claims sign the same
    /// message), bisection only when a batch fails.
    fn forged_view_changes(&mut self, vcs: &[Arc<ViewChange<S>>]) -> BTreeSet<NodeIndex> {
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
            if !self.shares_verify(Key::Consensus, &msg, &shares) {
                bad.extend(self.find_invalid(Key::Consensus, &msg, &shares));
            }
        }
        bad
    }

    /// The view changes of height `h` whose signatures, certificates (of at
    /// least `prepare_quorum` signers) and votes verify (batch-verified per
    /// group of identical claims).
    pub(super) fn valid_view_changes(
        &mut self,
        h: Height,
        prepare_quorum: u32,
        vcs: &[Arc<ViewChange<S>>],
    ) -> Vec<Arc<ViewChange<S>>> {
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
            // Identical claims carry the same signature only if honest; check
            // each distinct one.
            let mut seen: Vec<&PrepareCertificate<S>> = Vec::new();
            let message = signed::prepare(h, *view, digest);
            for vc in vcs.iter().filter(|v| senders.contains(&v.from)) {
                let Some(prepared) = vc.prepared.as_ref() else {
                    continue;
                };
                let same = |p: &&PrepareCertificate<S>| {
                    p.signature == prepared.signature && p.signers == prepared.signers
                };
                if seen.iter().any(same) {
                    continue;
                }
                if self.verify_certificate(
                    &message,
                    &prepared.signature,
                    &prepared.signers,
                    prepare_quorum,
                ) {
                    seen.push(prepared);
                } else {
                    bad.insert(vc.from);
                }
            }
        }
        for ((view, digest), shares) in votes {
            let message = signed::fast_vote(h, view, &digest);
            bad.extend(self.find_invalid(Key::Consensus, &message, &shares));
        }
        vcs.iter()
            .filter(|v| !bad.contains(&v.from))
            .cloned()
            .collect()
    }

    /// Verifies a NEW-VIEW's aggregated view changes for `view` at height `h`
    /// (their form checked before, [`ViewChangeProof::check_form`]): every
    /// group's multi-signature on its claims, so that each named sender signed
    /// what it is counted for; the prepare certificate of the highest prepared
    /// claim (at least `2f + c + 1` signers); and the fast votes of the winning
    /// digest, if the rule picks one. `claims`: the proof's claim counts
    /// ([`ViewChangeProof::claim_counts`]), which the caller reads again for
    /// the rule.
    pub(super) fn new_view_proof_verifies(
        &mut self,
        h: Height,
        view: View,
        (f, c): (u32, u32),
        proof: &ViewChangeProof<S>,
        claims: &[(ViewChangeClaims, u32)],
    ) -> bool {
        let n = self.n();
        let signers = |senders: &[NodeIndex]| SignerBitmap::of(n, senders.iter().copied()).ok();
        for group in &proof.groups {
            let message = signed::view_change(h, view, group.claims);
            let Some(bitmap) = signers(&group.senders) else {
                return false;
            };
            if !self.verify_certificate(&message, &group.signature, &bitmap, 1) {
                return false;
            }
        }
        if let Some(p) = &proof.prepared {
            let message = signed::prepare(h, p.view, &p.digest);
            if !self.verify_certificate(&message, &p.signature, &p.signers, 2 * f + c + 1) {
                return false;
            }
        }
        let Some((from_view, digest)) = fast_candidate(claims, f, c) else {
            return true;
        };
        // The winning digest's votes, added up per view: one check each.
        let mut by_view: BTreeMap<View, (S::Signature, Vec<NodeIndex>)> = BTreeMap::new();
        for group in &proof.groups {
            let Some((vote_view, _)) = group
                .claims
                .fast_vote
                .filter(|(v, d)| *v >= from_view && *d == digest)
            else {
                continue;
            };
            let Some(votes) = group.fast_votes else {
                return false;
            };
            let (sum, senders) = by_view
                .entry(vote_view)
                .or_insert_with(|| (S::Signature::identity(), Vec::new()));
            *sum = sum.add(&votes);
            senders.extend(&group.senders);
        }
        by_view.into_iter().all(|(vote_view, (sum, senders))| {
            let message = signed::fast_vote(h, vote_view, &digest);
            signers(&senders)
                .is_some_and(|bitmap| self.verify_certificate(&message, &sum, &bitmap, 1))
        })
    }
}
