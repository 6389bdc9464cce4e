//! The VIEW-CHANGE a replica sends, and the form in which a NEW-VIEW carries
//! a quorum of them ([`ViewChangeProof`]): the senders grouped by what they
//! claim, one multi-signature per group, and the one prepare certificate that
//! decides the view-change rule (`SAFETY.md`, "Across views"). Forwarding
//! every view change whole made a NEW-VIEW grow as n² (each carries an n-bit
//! signer bitmap and a block): 16,384 members outgrew the 16 MiB message
//! bound. Aggregated, it costs 4 bytes per sender and a few hundred per
//! distinct claim.

use super::{signed, Block, Digest, FastVote, PrepareCertificate};
use crate::{ConsensusError, Height, View};
use beacon::multisig::SignerBitmap;
use beacon::{NodeIndex, Point, Scheme};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// VIEW-CHANGE: a replica's evidence for the pending height.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ViewChange<S: Scheme> {
    /// Sender.
    pub from: NodeIndex,
    /// Pending height.
    pub height: Height,
    /// The view being moved to.
    pub new_view: View,
    /// Highest prepare certificate held for this height.
    pub prepared: Option<PrepareCertificate<S>>,
    /// Highest fast-path vote cast for this height.
    pub fast_vote: Option<FastVote<S>>,
    /// The sender's beacon share for round `height` (so the new primary can
    /// aggregate the beacon even when the old view produced none); absent
    /// before the round's release time on a paced chain.
    pub beacon_share: Option<S::Signature>,
    /// The block of the highest prepare certificate or fast vote, so that the new
    /// primary can re-propose it.
    pub block: Option<Arc<Block>>,
    /// The sender's signature (its own consensus key, under its own domain tag) on
    /// [`ViewChange::signed_message`]: a NEW-VIEW forwards the view changes'
    /// signatures (added up, [`ViewChangeProof`]), so a quorum of them is a
    /// quorum of signatures, not of names.
    pub signature: S::Signature,
}

impl<S: Scheme> ViewChange<S> {
    /// What the sender signs: the height, the new view and both claims (the
    /// prepare certificate's and the fast vote's view and digest).
    pub fn signed_message(&self) -> Digest {
        signed::view_change(self.height, self.new_view, self.claims())
    }

    /// What the rule reads of it: the view and digest of its prepare
    /// certificate and of its fast vote.
    pub fn claims(&self) -> ViewChangeClaims {
        ViewChangeClaims {
            prepared: self.prepared.as_ref().map(|p| (p.view, p.digest)),
            fast_vote: self.fast_vote.as_ref().map(|v| (v.view, v.digest)),
        }
    }
}

/// What a view change claims: the part of it the view-change rule reads
/// (`replica::safe_value`), and what its sender signs with the height and view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ViewChangeClaims {
    /// The view and digest of the sender's highest prepare certificate.
    pub prepared: Option<(View, Digest)>,
    /// The view and digest of its highest fast vote.
    pub fast_vote: Option<(View, Digest)>,
}

/// The senders of one claim in a NEW-VIEW, with their signatures added up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ClaimGroup<S: Scheme> {
    /// What each of them claimed.
    pub claims: ViewChangeClaims,
    /// Who claimed it, ascending.
    pub senders: Vec<NodeIndex>,
    /// The sum of their VIEW-CHANGE signatures: a multi-signature on
    /// [`signed::view_change`] of the height, the new view and `claims`.
    pub signature: S::Signature,
    /// The sum of their fast votes, when `claims` names one: a multi-signature
    /// on [`signed::fast_vote`] of its view and digest.
    pub fast_votes: Option<S::Signature>,
}

/// The view changes of a NEW-VIEW, aggregated: one [`ClaimGroup`] per distinct
/// claim and the prepare certificate of the highest prepared claim. Built by
/// the new primary from view changes it verified one by one
/// ([`ViewChangeProof::aggregate`]); checked by every replica in one
/// multi-signature per group (`replica::view_change_checks`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ViewChangeProof<S: Scheme> {
    /// The senders grouped by claim, in the order of the claims.
    pub groups: Vec<ClaimGroup<S>>,
    /// The certificate of the highest prepared claim; `None` when nobody
    /// claims one.
    pub prepared: Option<PrepareCertificate<S>>,
}

impl<S: Scheme> ViewChangeProof<S> {
    /// Aggregates view changes of one height and view from distinct senders:
    /// groups them by claim, adds up each group's signatures and fast votes,
    /// and keeps the highest prepare certificate. The caller verified each
    /// one (signature, certificate, fast vote) before.
    pub fn aggregate(view_changes: &[Arc<ViewChange<S>>]) -> Self {
        let mut groups: BTreeMap<ViewChangeClaims, ClaimGroup<S>> = BTreeMap::new();
        for vc in view_changes {
            let claims = vc.claims();
            let group = groups.entry(claims).or_insert_with(|| ClaimGroup {
                claims,
                senders: Vec::new(),
                signature: S::Signature::identity(),
                fast_votes: claims.fast_vote.map(|_| S::Signature::identity()),
            });
            group.senders.push(vc.from);
            group.signature = group.signature.add(&vc.signature);
            if let (Some(sum), Some(vote)) = (group.fast_votes.as_mut(), vc.fast_vote.as_ref()) {
                *sum = sum.add(&vote.share);
            }
        }
        let mut groups: Vec<ClaimGroup<S>> = groups.into_values().collect();
        for group in &mut groups {
            group.senders.sort_unstable();
        }
        let prepared = view_changes
            .iter()
            .filter_map(|vc| vc.prepared.as_ref())
            .max_by_key(|p| p.view)
            .cloned();
        ViewChangeProof { groups, prepared }
    }

    /// Every sender, group by group.
    pub fn senders(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.groups.iter().flat_map(|g| g.senders.iter().copied())
    }

    /// Each distinct claim with how many senders made it: what the view-change
    /// rule reads.
    pub fn claim_counts(&self) -> Vec<(ViewChangeClaims, u32)> {
        self.groups
            .iter()
            .map(|g| (g.claims, g.senders.len() as u32))
            .collect()
    }

    /// The view and digest of the highest prepared claim.
    pub fn highest_prepared(&self) -> Option<(View, Digest)> {
        self.groups
            .iter()
            .filter_map(|g| g.claims.prepared)
            .max_by_key(|(view, _)| *view)
    }

    /// Checks the form, before any signature: at least `quorum` distinct
    /// senders, each below `n`, ascending within its group; distinct claims,
    /// each with a fast-vote sum exactly when it names a fast vote; and a
    /// prepare certificate that is the highest prepared claim, which every
    /// claim of that view names (two prepare certificates of one view name
    /// one digest, `SAFETY.md`).
    pub fn check_form(&self, n: u32, quorum: u32) -> Result<(), ConsensusError> {
        let malformed = |reason: &'static str| Err(ConsensusError::MalformedNewView { reason });
        let mut seen = SignerBitmap::new(n);
        let mut count: u32 = 0;
        for (i, group) in self.groups.iter().enumerate() {
            if group.senders.is_empty() {
                return malformed("a claim without senders");
            }
            if group.fast_votes.is_some() != group.claims.fast_vote.is_some() {
                return malformed("a fast-vote sum that does not match its claim");
            }
            if i > 0 && self.groups[i - 1].claims >= group.claims {
                return malformed("claims out of order or repeated");
            }
            if group.senders.windows(2).any(|w| w[0] >= w[1]) {
                return malformed("senders out of order within a claim");
            }
            for sender in &group.senders {
                if sender.0 >= n {
                    return malformed("a sender outside the epoch");
                }
                if seen.contains(*sender) {
                    return malformed("a sender counted twice");
                }
                // In range: checked above.
                let _ = seen.insert(*sender);
                count += 1;
            }
        }
        if count < quorum {
            return malformed("fewer senders than a view-change quorum");
        }
        let highest = self.highest_prepared();
        if let Some((view, digest)) = highest {
            let other = self
                .groups
                .iter()
                .filter_map(|g| g.claims.prepared)
                .any(|(v, d)| v == view && d != digest);
            if other {
                return malformed("two prepared digests in the highest prepared view");
            }
        }
        match (highest, &self.prepared) {
            (None, None) => Ok(()),
            (Some((view, digest)), Some(p)) if p.view == view && p.digest == digest => Ok(()),
            _ => malformed("a prepare certificate that is not the highest prepared claim"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::{MinSig, G1};

    type S = MinSig;

    /// A view change of `from` at height 1 for view 9, claiming a prepare
    /// certificate and a fast vote as (view, digest byte).
    fn vc(from: u32, prepared: Option<(u64, u8)>, fast: Option<(u64, u8)>) -> Arc<ViewChange<S>> {
        let sig = G1::generator();
        Arc::new(ViewChange {
            from: NodeIndex(from),
            height: Height::new(1),
            new_view: View::new(9),
            prepared: prepared.map(|(view, d)| PrepareCertificate {
                view: View::new(view),
                digest: [d; 32],
                signature: sig,
                signers: SignerBitmap::new(4),
            }),
            fast_vote: fast.map(|(view, d)| FastVote {
                view: View::new(view),
                digest: [d; 32],
                share: sig,
            }),
            beacon_share: None,
            block: None,
            signature: sig,
        })
    }

    fn reason(proof: &ViewChangeProof<S>) -> Option<&'static str> {
        match proof.check_form(4, 3) {
            Ok(()) => None,
            Err(ConsensusError::MalformedNewView { reason }) => Some(reason),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn aggregating_groups_senders_by_claim_and_keeps_the_highest_certificate() {
        let vcs = [
            vc(2, Some((1, 7)), None),
            vc(0, None, Some((2, 5))),
            vc(1, Some((3, 8)), Some((3, 8))),
            vc(3, None, Some((2, 5))),
        ];
        let proof = ViewChangeProof::aggregate(&vcs);
        assert_eq!(reason(&proof), None);
        assert_eq!(proof.groups.len(), 3);
        let fives = proof
            .groups
            .iter()
            .find(|g| g.claims.fast_vote == Some((View::new(2), [5; 32])))
            .unwrap();
        assert_eq!(fives.senders, vec![NodeIndex(0), NodeIndex(3)]);
        assert_eq!(fives.signature, G1::generator().add(&G1::generator()));
        assert_eq!(fives.fast_votes, Some(fives.signature));
        assert_eq!(proof.prepared.as_ref().map(|p| p.view), Some(View::new(3)));
        assert_eq!(proof.highest_prepared(), Some((View::new(3), [8; 32])));
        assert_eq!(proof.senders().count(), 4);
    }

    /// Each way a NEW-VIEW's view changes can be ill-formed, refused before
    /// any signature is checked.
    #[test]
    fn a_malformed_proof_is_refused_with_its_reason() {
        let good = ViewChangeProof::aggregate(&[
            vc(0, Some((1, 7)), None),
            vc(1, None, Some((2, 5))),
            vc(2, None, None),
        ]);
        assert_eq!(reason(&good), None);
        let edit = |f: Edit| {
            let mut p = good.clone();
            f(&mut p);
            reason(&p)
        };
        type Edit<'a> = &'a dyn Fn(&mut ViewChangeProof<S>);
        let cases: [(&str, Edit); 9] = [
            ("a sender counted twice", &|p| {
                p.groups[1].senders = vec![NodeIndex(0)]
            }),
            ("senders out of order within a claim", &|p| {
                p.groups[1].senders = vec![NodeIndex(2), NodeIndex(2)]
            }),
            ("a sender outside the epoch", &|p| {
                p.groups[1].senders = vec![NodeIndex(4)]
            }),
            ("fewer senders than a view-change quorum", &|p| {
                p.groups.pop();
            }),
            ("a claim without senders", &|p| p.groups[0].senders.clear()),
            ("claims out of order or repeated", &|p| p.groups.swap(0, 1)),
            ("a fast-vote sum that does not match its claim", &|p| {
                for g in &mut p.groups {
                    g.fast_votes = Some(G1::generator());
                }
            }),
            (
                "a prepare certificate that is not the highest prepared claim",
                &|p| p.prepared = None,
            ),
            ("two prepared digests in the highest prepared view", &|p| {
                let g = p
                    .groups
                    .iter_mut()
                    .find(|g| g.claims.prepared.is_none())
                    .unwrap();
                g.claims.prepared = Some((View::new(1), [9; 32]));
                p.groups.sort_by_key(|g| g.claims);
            }),
        ];
        for (expected, f) in cases {
            assert_eq!(edit(f), Some(expected), "{expected}");
        }
    }
}
