//! The batched share check and the share trees: it accepts exactly what
//! per-dealer checks accept, names a bad dealer, and counts shares the deal does
//! not commit to as bad.

use super::*;

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
                Deal::new([3; 32], NodeIndex(d), commitments, [0; 32]),
                shares,
            )
        })
        .collect()
}

fn batch_of<S: Scheme>(n: u32, j: NodeIndex, d: &[(Deal<S>, Vec<Scalar>)]) -> bool {
    let domain = SignerDomain::new(n).unwrap();
    let view: Vec<(&Deal<S>, &[Scalar])> = d.iter().map(|(a, b)| (a, b.as_slice())).collect();
    batch::batch_check::<S>(&domain, &Memo::disabled(), &[3; 32], j, &view)
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
    assert!(out
        .disqualified
        .iter()
        .any(|(d, why)| *d == NodeIndex(5) && why.contains("unanswered")));
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
