//! Step 5, the view-change rule: which block is safe to propose in a new view, given a
//! quorum of signed VIEW-CHANGE messages (SBFT's rule; the argument is in
//! `SAFETY.md`). Pure functions of the view changes, shared by the new primary
//! (which picks the block) and every replica (which checks it).

use crate::messages::{Digest, ViewChange};
use crate::View;
use beacon::Scheme;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The fast-path candidate of a set of view changes: the highest view `w` such
/// that one digest has at least `f + c + 1` fast votes cast in views `>= w`.
pub fn fast_candidate<S: Scheme>(
    vcs: &[Arc<ViewChange<S>>],
    f: u32,
    c: u32,
) -> Option<(View, Digest)> {
    let mut views: Vec<View> = vcs
        .iter()
        .filter_map(|v| v.fast_vote.as_ref().map(|f| f.view))
        .collect();
    views.sort_unstable();
    views.dedup();
    for w in views.into_iter().rev() {
        let mut counts: BTreeMap<Digest, u32> = BTreeMap::new();
        for v in vcs
            .iter()
            .filter_map(|v| v.fast_vote.as_ref())
            .filter(|v| v.view >= w)
        {
            *counts.entry(v.digest).or_default() += 1;
        }
        if let Some((d, _)) = counts.into_iter().find(|(_, n)| *n > f + c) {
            return Some((w, d));
        }
    }
    None
}

/// The only block digest that is safe to propose in a new view, given `2f + 2c + 1`
/// view changes (SBFT's view-change rule; argument in `SAFETY.md`):
/// - `v_p`, `d_p`: the highest prepare certificate;
/// - a fast-path candidate `(w, d_f)` ([`fast_candidate`]) with `w > v_p` wins;
/// - else the prepared digest `d_p`;
/// - else `None`: any fresh block is safe.
pub fn safe_value<S: Scheme>(vcs: &[Arc<ViewChange<S>>], f: u32, c: u32) -> Option<Digest> {
    let prepared = vcs
        .iter()
        .filter_map(|v| v.prepared.as_ref())
        .max_by_key(|p| p.view);
    match (fast_candidate(vcs, f, c), prepared) {
        (Some((w, d)), Some(p)) if w > p.view => Some(d),
        (Some((_, d)), None) => Some(d),
        (_, Some(p)) => Some(p.digest),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{FastVote, PrepareCertificate};
    use crate::Height;
    use beacon::{MinSig, NodeIndex, Point, G1};

    type S = MinSig;

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
                signers: beacon::multisig::SignerBitmap::new(4),
            }),
            fast_vote: fast.map(|(view, d)| FastVote {
                view: View::new(view),
                digest: [d; 32],
                share: sig,
            }),
            beacon_share: Some(sig),
            block: None,
            signature: sig,
        })
    }

    /// SBFT's view-change rule as a table: (view changes, f, c) -> safe digest.
    #[test]
    fn safe_value_table() {
        struct Case {
            desc: &'static str,
            f: u32,
            c: u32,
            vcs: Vec<Arc<ViewChange<S>>>,
            expected: Option<u8>,
        }
        let cases = vec![
            Case {
                desc: "nothing prepared or voted: fresh block",
                f: 1,
                c: 0,
                vcs: vec![vc(0, None, None), vc(1, None, None), vc(2, None, None)],
                expected: None,
            },
            Case {
                desc: "highest prepare certificate wins",
                f: 1,
                c: 0,
                vcs: vec![
                    vc(0, Some((1, 7)), None),
                    vc(1, Some((2, 8)), None),
                    vc(2, None, None),
                ],
                expected: Some(8),
            },
            Case {
                desc: "f+c+1 fast votes above the prepare view win",
                f: 1,
                c: 0,
                vcs: vec![
                    vc(0, Some((1, 7)), Some((1, 7))),
                    vc(1, None, Some((3, 5))),
                    vc(2, None, Some((3, 5))),
                ],
                expected: Some(5),
            },
            Case {
                desc: "fast votes at the prepare view do not override it",
                f: 1,
                c: 0,
                vcs: vec![
                    vc(0, Some((3, 7)), Some((3, 7))),
                    vc(1, None, Some((3, 5))),
                    vc(2, None, Some((3, 5))),
                ],
                expected: Some(7),
            },
            Case {
                desc: "f fast votes are not enough",
                f: 1,
                c: 0,
                vcs: vec![
                    vc(0, None, Some((2, 5))),
                    vc(1, None, None),
                    vc(2, None, None),
                ],
                expected: None,
            },
            Case {
                desc: "votes for one digest across later views add up",
                f: 1,
                c: 1,
                vcs: vec![
                    vc(0, None, Some((2, 5))),
                    vc(1, None, Some((4, 5))),
                    vc(2, None, Some((3, 5))),
                    vc(3, None, Some((4, 6))),
                    vc(4, None, None),
                ],
                expected: Some(5),
            },
            Case {
                desc: "a lone conflicting vote in a later view is ignored",
                f: 1,
                c: 0,
                vcs: vec![
                    vc(0, None, Some((1, 5))),
                    vc(1, None, Some((1, 5))),
                    vc(2, None, Some((2, 9))),
                ],
                expected: Some(5),
            },
        ];
        for case in cases {
            assert_eq!(
                safe_value(&case.vcs, case.f, case.c),
                case.expected.map(|d| [d; 32]),
                "{}",
                case.desc
            );
        }
    }
}
