//! The batched share check and the share trees: it accepts exactly what
//! per-dealer checks accept, names a bad dealer, and counts shares the deal does
//! not commit to as bad.

use super::*;
use crate::curve::G1;
use crate::effect::Effect;

/// Dealings of `dealers` random polynomials per threshold, as member `j` gets
/// them: (deal, j's shares).
fn dealings<S: Scheme>(
    n: u32,
    thresholds: &[u32],
    dealers: u32,
    j: NodeIndex,
    seed: u64,
) -> Vec<(Deal<S>, Vec<Scalar>)> {
    let domain = SignerDomain::new(n).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let g = S::PublicKey::generator();
    (0..dealers)
        .map(|d| {
            let mut commitments = Vec::new();
            let mut shares = Vec::new();
            for &t in thresholds {
                let poly: Vec<Scalar> = (0..t).map(|_| Scalar::random(&mut rng)).collect();
                commitments.push(poly.iter().map(|a| g.mul(a)).collect());
                shares.push(domain.evaluate_all(&poly)[j.0 as usize]);
            }
            (
                Deal::new(
                    [3; 32],
                    NodeIndex(d),
                    Commitments::new(&commitments),
                    [0; 32],
                ),
                shares,
            )
        })
        .collect()
}

fn batch_of<S: Scheme>(n: u32, j: NodeIndex, d: &[(Deal<S>, Vec<Scalar>)]) -> bool {
    let domain = SignerDomain::new(n).unwrap();
    let view: Vec<(&Deal<S>, &[Scalar])> = d.iter().map(|(a, b)| (a, b.as_slice())).collect();
    // A node alone evaluates `V` at its own point; simulated members share
    // its FFT at every point: both decide alike.
    let alone = batch::batch_check::<S>(&domain, &Memo::disabled(), &[3; 32], j, &view);
    let shared = batch::batch_check::<S>(&domain, &Memo::shared(), &[3; 32], j, &view);
    assert_eq!(alone, shared);
    alone
}

fn singles_of<S: Scheme>(n: u32, j: NodeIndex, d: &[(Deal<S>, Vec<Scalar>)]) -> Vec<bool> {
    let domain = SignerDomain::new(n).unwrap();
    d.iter()
        .map(|(deal, shares)| share_matches::<S>(&domain, deal, j, shares))
        .collect()
}

#[test]
fn one_bad_share_fails_the_batch_and_the_fallback_names_its_dealer() {
    let (n, j) = (10, NodeIndex(4));
    let mut d = dealings::<MinPk>(n, &[4, 7], 6, j, 1);
    assert!(batch_of(n, j, &d));
    assert!(singles_of(n, j, &d).iter().all(|ok| *ok));
    // Dealer 2 deals a bad share for the second threshold.
    d[2].1[1] += Scalar::one();
    assert!(!batch_of(n, j, &d));
    let singles = singles_of(n, j, &d);
    let bad: Vec<usize> = (0..d.len()).filter(|i| !singles[*i]).collect();
    assert_eq!(bad, vec![2]);
    // Errors that cancel in a plain sum (dealer 1: +e, dealer 3: -e) do not
    // cancel under random weights.
    let mut d = dealings::<MinSig>(n, &[4], 5, j, 2);
    let e = Scalar::from_u64(12345);
    d[1].1[0] += e;
    d[3].1[0] += -e;
    assert!(!batch_of(n, j, &d));
    assert_eq!(singles_of(n, j, &d), vec![true, false, true, false, true]);
    // Malformed: a share vector of the wrong length.
    let mut d = dealings::<MinPk>(n, &[4, 7], 3, j, 3);
    d[0].1.pop();
    assert!(!batch_of(n, j, &d));
}

/// A member that gets one bad share in a whole DKG complains about exactly that
/// dealer (found by the fallback after the batch fails), and the dealer, silent
/// afterwards, is excluded while everyone else agrees.
#[test]
fn a_bad_share_is_caught_in_a_run() {
    let n = 7;
    let faults = vec![(
        5,
        DealerFault::BadShares {
            victims: vec![NodeIndex(2)],
        },
    )];
    let run = with_faults::<MinSig>(n, &faults, 17, &Disturbances::default());
    let honest: Vec<u32> = (0..n).filter(|i| *i != 5).collect();
    let qual: Vec<NodeIndex> = honest.iter().map(|i| NodeIndex(*i)).collect();
    check_agreement(&run, &honest, &qual);
    let out = run.results[2].clone().unwrap().unwrap();
    assert_eq!(
        out.verdicts.reason(NodeIndex(5)),
        Some(Disqualification::UnansweredComplaints)
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// The batched check accepts exactly the dealings that every single check
    /// accepts.
    #[test]
    fn batch_accepts_exactly_what_single_checks_accept(
        seed in 0u64..1_000,
        n in 4u32..12,
        dealers in 1u32..6,
        corrupt in proptest::collection::vec((0u32..6, 0usize..2, 1u64..1_000), 0..4),
        cancel in proptest::bool::ANY,
    ) {
        let j = NodeIndex(seed as u32 % n);
        let thresholds = [2.min(n), n.div_ceil(2)];
        let mut d = dealings::<MinPk>(n, &thresholds, dealers, j, seed);
        for (dealer, k, delta) in &corrupt {
            let i = (*dealer % dealers) as usize;
            d[i].1[*k] += Scalar::from_u64(*delta);
        }
        if cancel && dealers >= 2 {
            // Opposite errors in two dealings: a plain sum would miss them.
            let e = Scalar::from_u64(seed + 1);
            d[0].1[0] += e;
            d[1].1[0] += -e;
        }
        let all_good = singles_of(n, j, &d).iter().all(|ok| *ok);
        proptest::prop_assert_eq!(batch_of(n, j, &d), all_good);
    }
}
#[test]
fn share_trees_authenticate_exactly_their_leaves() {
    let leaves: Vec<[u8; 32]> = (0..5u8).map(|i| [i + 1; 32]).collect();
    let tree = batch::ShareTree::new(leaves.clone());
    for (j, leaf) in leaves.iter().enumerate() {
        let path = tree.path(NodeIndex(j as u32));
        assert_eq!(path.len(), 3);
        assert!(batch::in_share_tree(
            &tree.root(),
            *leaf,
            NodeIndex(j as u32),
            &path,
            8
        ));
        // Another index, another leaf, a short path or another size: no.
        let other = NodeIndex((j as u32 + 1) % 5);
        assert!(!batch::in_share_tree(&tree.root(), *leaf, other, &path, 8));
        assert!(!batch::in_share_tree(
            &tree.root(),
            [9; 32],
            NodeIndex(j as u32),
            &path,
            8
        ));
        assert!(!batch::in_share_tree(
            &tree.root(),
            *leaf,
            NodeIndex(j as u32),
            &path[1..],
            8
        ));
        assert!(!batch::in_share_tree(
            &tree.root(),
            *leaf,
            NodeIndex(j as u32),
            &path,
            16
        ));
    }
    assert!(!batch::in_share_tree(
        &tree.root(),
        leaves[0],
        NodeIndex(9),
        &tree.path(NodeIndex(0)),
        8
    ));
}

/// Correct shares the deal does not commit to count as bad: the victims
/// complain, the dealer reveals the shares, and it stays qualified.
#[test]
fn shares_outside_the_share_root_draw_a_complaint() {
    let n = 7;
    let faults = vec![(
        4,
        DealerFault::UncommittedShares {
            victims: vec![NodeIndex(1), NodeIndex(6)],
        },
    )];
    let run = with_faults::<MinPk>(n, &faults, 23, &Disturbances::default());
    let all: Vec<u32> = (0..n).collect();
    let qual: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
    check_agreement(&run, &all, &qual);
    // A justification phase ran (the complaints were answered).
    assert!(run.messages > u64::from(n * (n - 1)) * 3);
}

/// Deal commitments are decoded without per-point subgroup checks. A dealer
/// that hides a small-order component from every share check is excluded all
/// the same, and every honest member agrees on keys in the subgroup: by a
/// complaint where a member's batched check (whose FFT does not keep the hidden
/// structure) fails and the exact per-dealer check finds the deal off the
/// group, else at step 4 by the subgroup check of the group polynomials.
#[test]
fn a_small_order_component_hidden_from_every_share_check_is_excluded() {
    let runs = [(4u32, 0u32, 5u64), (7, 3, 6), (4, 2, 7)];
    for (n, bad, seed) in runs {
        let faults = vec![(bad, DealerFault::OffGroupCommitments)];
        let run = with_faults::<MinPk>(n, &faults, seed, &Disturbances::default());
        let honest: Vec<u32> = (0..n).filter(|i| *i != bad).collect();
        let qual: Vec<NodeIndex> = honest.iter().map(|i| NodeIndex(*i)).collect();
        check_agreement(&run, &honest, &qual);
        for i in &honest {
            let out = run.results[*i as usize].clone().unwrap().unwrap();
            assert_eq!(out.verdicts.disqualified.len(), 1);
            assert_eq!(out.verdicts.disqualified[0].0, NodeIndex(bad));
            for key in &out.keys {
                assert!(key.public_polynomial.iter().all(Point::in_group));
                assert!(key.verification_keys.iter().all(Point::in_group));
            }
        }
    }
    // The same in G2 (keys of the G1-signature scheme): order 13.
    let faults = [(1, DealerFault::OffGroupCommitments)];
    let run = with_faults::<MinSig>(7, &faults, 8, &Disturbances::default());
    let honest: Vec<u32> = (0..7).filter(|i| *i != 1).collect();
    let qual: Vec<NodeIndex> = honest.iter().map(|i| NodeIndex(*i)).collect();
    check_agreement(&run, &honest, &qual);
}

/// Step 4 itself: with the off-group deal among the candidates and no
/// complaint at all (as when every batched check passed), the dealer is
/// excluded by the subgroup check of the group polynomials, and the keys are in
/// the group. Without that check the group key would carry the hidden component.
#[test]
fn step_four_excludes_a_deal_off_the_group_that_drew_no_complaint() {
    let n = 7;
    let cfg = config(n, Vec::new());
    let bad = NodeIndex(3);
    let me = NodeIndex(0);
    let mut member = Dkg::<MinPk>::new(
        cfg.clone(),
        me,
        harness::member_seed(9, 0),
        Memo::disabled(),
    )
    .unwrap();
    for action in member.handle(Time::ZERO, DkgInput::Start) {
        if let DkgAction::Effect(Effect::Broadcast(DkgMessage::Deal(deal))) = action {
            member.board.deals.insert(me, deal);
        }
    }
    for i in 1..n {
        let inner = Dkg::<MinPk>::new(
            cfg.clone(),
            NodeIndex(i),
            harness::member_seed(9, i),
            Memo::disabled(),
        )
        .unwrap();
        let mut dealer: Box<DkgParticipant<MinPk>> = if NodeIndex(i) == bad {
            Box::new(ByzantineDealer::new(
                inner,
                DealerFault::OffGroupCommitments,
            ))
        } else {
            Box::new(inner)
        };
        for action in dealer.handle(Time::ZERO, DkgInput::Start) {
            match action {
                DkgAction::Effect(Effect::Broadcast(DkgMessage::Deal(deal))) => {
                    member.board.deals.insert(NodeIndex(i), deal);
                }
                DkgAction::Effect(Effect::Send {
                    to,
                    message: DkgMessage::Shares(s),
                }) if to == me => {
                    member.board.shares.insert(NodeIndex(i), s.shares.clone());
                }
                _ => {}
            }
        }
    }
    assert!(!member.board.deals[&bad]
        .commitments
        .points()
        .all(|p| p.in_group()));
    let actions = member.finalize();
    let Some(DkgAction::Done(out)) = actions.first() else {
        panic!("finalize failed: {actions:?}");
    };
    assert_eq!(
        out.verdicts.disqualified,
        vec![(bad, Disqualification::CommitmentsOutsideGroup)]
    );
    assert!(!out.verdicts.qual.contains(&bad));
    for key in &out.keys {
        assert!(key.public_polynomial.iter().all(Point::in_group));
        assert!(key.verification_keys.iter().all(Point::in_group));
    }
}

/// The hidden component vanishes at every other member: the deal is on the
/// curve and survives the wire, its points are not all in the group, and the
/// shares satisfy the Feldman equations computed exactly (double-and-add, no
/// endomorphism that assumes the subgroup). `share_matches` refuses it.
#[test]
fn the_hidden_component_vanishes_at_every_other_member() {
    let n = 7;
    let cfg = config(n, Vec::new());
    let dealer = NodeIndex(2);
    let seed = harness::member_seed(1, 2);
    let mut honest = Dkg::<MinPk>::new(cfg.clone(), dealer, seed, Memo::disabled()).unwrap();
    let actions = honest.handle(Time::ZERO, DkgInput::Start);
    let mut byzantine = ByzantineDealer::new(
        Dkg::<MinPk>::new(cfg, dealer, seed, Memo::disabled()).unwrap(),
        DealerFault::OffGroupCommitments,
    );
    let bad_actions = byzantine.handle(Time::ZERO, DkgInput::Start);
    let deal_of = |actions: &[DkgAction<MinPk>]| {
        actions.iter().find_map(|a| match a {
            DkgAction::Effect(Effect::Broadcast(DkgMessage::Deal(d))) => Some(d.clone()),
            _ => None,
        })
    };
    let (good, bad) = (deal_of(&actions).unwrap(), deal_of(&bad_actions).unwrap());
    assert!(good.commitments.points().all(|p| p.in_group()));
    assert!(!bad.commitments.points().all(|p| p.in_group()));
    let encoded = crate::wire::encode(&DkgMessage::Deal(bad.clone())).unwrap();
    let decoded: DkgMessage<MinPk> = crate::wire::decode(&encoded).unwrap();
    assert!(matches!(decoded, DkgMessage::Deal(d) if d.digest() == bad.digest()));
    let domain = SignerDomain::new(n).unwrap();
    let mut checked = 0;
    for a in &actions {
        if let DkgAction::Effect(Effect::Send {
            to,
            message: DkgMessage::Shares(s),
        }) = a
        {
            let x = domain.point(*to).unwrap();
            for (c, share) in bad.commitments.to_rows().iter().zip(&s.shares) {
                let mut power = Scalar::one();
                let mut sum = G1::identity();
                for point in c {
                    sum = sum.add(&point.times_integer(&power.to_bytes_be()));
                    power *= x;
                }
                assert_eq!(sum, G1::generator().mul(share), "member {to:?}");
            }
            assert!(share_matches::<MinPk>(&domain, &good, *to, &s.shares));
            assert!(!share_matches::<MinPk>(&domain, &bad, *to, &s.shares));
            checked += 1;
        }
    }
    assert_eq!(checked, n - 1);
}
