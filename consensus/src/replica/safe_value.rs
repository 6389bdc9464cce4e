//! Step 5, the view-change rule: which block is safe to propose in a new view, given the
//! claims of a quorum of signed VIEW-CHANGE messages (SBFT's rule; the argument is in
//! `SAFETY.md`). Pure functions of the claims and how many senders made each,
//! shared by the new primary (which picks the block) and every replica (which
//! checks it): both read them from the same [`ViewChangeProof`](crate::messages::ViewChangeProof).

use crate::messages::{Digest, ViewChangeClaims};
use crate::View;
use std::collections::BTreeMap;

/// The fast-path candidate of a quorum's claims (each with its number of
/// senders): the highest view `w` such that one digest has at least
/// `f + c + 1` fast votes cast in views `>= w`.
pub fn fast_candidate(
    claims: &[(ViewChangeClaims, u32)],
    f: u32,
    c: u32,
) -> Option<(View, Digest)> {
    let mut views: Vec<View> = claims
        .iter()
        .filter_map(|(claim, _)| claim.fast_vote.map(|(view, _)| view))
        .collect();
    views.sort_unstable();
    views.dedup();
    for w in views.into_iter().rev() {
        let mut counts: BTreeMap<Digest, u32> = BTreeMap::new();
        for (claim, senders) in claims {
            if let Some((_, digest)) = claim.fast_vote.filter(|(view, _)| *view >= w) {
                *counts.entry(digest).or_default() += senders;
            }
        }
        if let Some((d, _)) = counts.into_iter().find(|(_, n)| *n > f + c) {
            return Some((w, d));
        }
    }
    None
}

/// The only block digest that is safe to propose in a new view, given the
/// claims of `2f + 2c + 1` view changes (SBFT's view-change rule; argument in
/// `SAFETY.md`):
/// - `v_p`, `d_p`: the highest prepared claim (its certificate travels with
///   the claims and is verified);
/// - a fast-path candidate `(w, d_f)` ([`fast_candidate`]) with `w > v_p` wins;
/// - else the prepared digest `d_p`;
/// - else `None`: any fresh block is safe.
pub fn safe_value(claims: &[(ViewChangeClaims, u32)], f: u32, c: u32) -> Option<Digest> {
    let prepared = claims
        .iter()
        .filter_map(|(claim, _)| claim.prepared)
        .max_by_key(|(view, _)| *view);
    match (fast_candidate(claims, f, c), prepared) {
        (Some((w, d)), Some((v_p, _))) if w > v_p => Some(d),
        (Some((_, d)), None) => Some(d),
        (_, Some((_, d_p))) => Some(d_p),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One sender's claims: (view, digest byte) of its prepare certificate and
    /// of its fast vote.
    fn vc(_from: u32, prepared: Option<(u64, u8)>, fast: Option<(u64, u8)>) -> ViewChangeClaims {
        let claim = |(view, d): (u64, u8)| (View::new(view), [d; 32]);
        ViewChangeClaims {
            prepared: prepared.map(claim),
            fast_vote: fast.map(claim),
        }
    }

    /// The claims as a NEW-VIEW carries them: each distinct one with its count.
    fn counted(claims: &[ViewChangeClaims]) -> Vec<(ViewChangeClaims, u32)> {
        let mut counts: BTreeMap<ViewChangeClaims, u32> = BTreeMap::new();
        for claim in claims {
            *counts.entry(*claim).or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// SBFT's view-change rule as a table: (view changes, f, c) -> safe digest.
    #[test]
    fn safe_value_table() {
        struct Case {
            desc: &'static str,
            f: u32,
            c: u32,
            vcs: Vec<ViewChangeClaims>,
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
                safe_value(&counted(&case.vcs), case.f, case.c),
                case.expected.map(|d| [d; 32]),
                "{}",
                case.desc
            );
        }
    }
}
