//! Step 5, verification of the view changes a NEW-VIEW carries (or a new
//! primary collects): every sender's signature (its own consensus key), in one
//! batch per signed message,
//! and the claims that decide the view-change rule (`SAFETY.md`, "Across views").

use super::safe_value::fast_candidate;
use super::verifier::{Key, Verifier};
use crate::messages::{signed, Digest, PrepareCertificate, ViewChange};
use crate::{Height, View};
use beacon::{NodeIndex, Scheme, SignatureShare};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl<S: Scheme> Verifier<S> {
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

    /// Verifies only the claims that decide [`super::safe_value::safe_value`]
    /// at height `h`: the highest prepare certificate and the fast votes of the
    /// winning digest.
    pub(super) fn deciding_claims_verify(
        &mut self,
        h: Height,
        f: u32,
        c: u32,
        vcs: &[Arc<ViewChange<S>>],
    ) -> bool {
        if let Some(p) = vcs
            .iter()
            .filter_map(|v| v.prepared.as_ref())
            .max_by_key(|p| p.view)
        {
            let message = signed::prepare(h, p.view, &p.digest);
            let quorum = 2 * f + c + 1;
            if !self.verify_certificate(&message, &p.signature, &p.signers, quorum) {
                return false;
            }
        }
        let Some((from_view, digest)) = fast_candidate(vcs, f, c) else {
            return true;
        };
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
        by_view.into_iter().all(|(view, shares)| {
            self.shares_verify(
                Key::Consensus,
                &signed::fast_vote(h, view, &digest),
                &shares,
            )
        })
    }
}
