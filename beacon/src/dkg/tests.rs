use super::harness::{self, ByzantineDealer, DealerFault, Disturbances, DkgParticipant};
use super::*;
use crate::lagrange::InterpolationMethod;
use crate::scheme::{MinPk, MinSig};
use crate::threshold::SignatureShare;

fn config(n: u32, dealers: Vec<NodeIndex>) -> DkgConfig {
    let f = (n - 1) / 3;
    DkgConfig {
        session: [7; 32],
        n,
        thresholds: vec![f + 1, 2 * f + 1, 3 * f + 1],
        dealers,
        phase_timeout_us: 1_000,
        min_qualified: f + 1,
        max_faulty: f,
        max_attempts: 3,
    }
}

/// Every honest member finished with the same QUAL and keys; every threshold key
/// signs: a random t-subset of shares recovers a signature valid under the group key.
fn check_agreement<S: Scheme>(
    run: &harness::DkgRun<S>,
    honest: &[u32],
    expected_qual: &[NodeIndex],
) {
    let outputs: Vec<Arc<DkgOutput<S>>> = honest
        .iter()
        .map(|i| {
            run.results[*i as usize]
                .clone()
                .expect("finished")
                .expect("succeeded")
        })
        .collect();
    let first = &outputs[0];
    assert_eq!(first.qual, expected_qual);
    for o in &outputs {
        assert_eq!(o.qual, first.qual);
        o.check().unwrap();
        for (k, key) in o.keys.iter().enumerate() {
            assert_eq!(key.group_key(), first.keys[k].group_key());
            assert_eq!(key.verification_keys, first.keys[k].verification_keys);
        }
    }
    let domain = Arc::new(SignerDomain::new(first.n).unwrap());
    for (k, key) in first.keys.iter().enumerate() {
        let public = key.public_key(domain.clone()).unwrap();
        let t = key.threshold as usize;
        // The last t honest members sign.
        let signers = &outputs[outputs.len().saturating_sub(t)..];
        if signers.len() < t {
            continue;
        }
        let msg = b"dkg result signs";
        let shares: Vec<SignatureShare<S>> = signers
            .iter()
            .map(|o| o.keys[k].secret_share.sign::<S>(msg))
            .collect();
        let sig = public
            .aggregate(&shares, InterpolationMethod::RootsOfUnity)
            .unwrap();
        assert!(public.verify(msg, &sig), "threshold {t}");
    }
}

fn honest_run<S: Scheme>(n: u32, seed: u64) {
    let cfg = config(n, Vec::new());
    let memo = Memo::shared();
    let run = harness::run::<S>(
        harness::honest(&cfg, seed, &memo).unwrap(),
        seed,
        &Disturbances::default(),
    );
    let all: Vec<u32> = (0..n).collect();
    let qual: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
    check_agreement(&run, &all, &qual);
}

#[test]
fn honest_runs_agree_and_sign() {
    honest_run::<MinPk>(4, 1);
    honest_run::<MinSig>(7, 2);
    honest_run::<MinPk>(16, 3);
    honest_run::<MinSig>(64, 4);
}

#[test]
fn without_sharing_the_same_keys_result() {
    let cfg = config(7, Vec::new());
    let a = harness::run::<MinPk>(
        harness::honest(&cfg, 9, &Memo::shared()).unwrap(),
        9,
        &Disturbances::default(),
    );
    let b = harness::run::<MinPk>(
        harness::honest(&cfg, 9, &Memo::disabled()).unwrap(),
        10,
        &Disturbances::default(),
    );
    let key =
        |r: &harness::DkgRun<MinPk>| *r.results[0].clone().unwrap().unwrap().keys[0].group_key();
    assert_eq!(key(&a), key(&b));
}

fn with_faults<S: Scheme>(
    n: u32,
    faults: &[(u32, DealerFault)],
    seed: u64,
    disturbances: &Disturbances,
) -> harness::DkgRun<S> {
    let cfg = config(n, Vec::new());
    let memo = Memo::shared();
    let mut participants = harness::honest::<S>(&cfg, seed, &memo).unwrap();
    for (who, fault) in faults {
        let inner = Dkg::<S>::new(
            cfg.clone(),
            NodeIndex(*who),
            harness::member_seed(seed, *who),
            memo.clone(),
        )
        .unwrap();
        participants[*who as usize] =
            Box::new(ByzantineDealer::new(inner, fault.clone())) as Box<dyn DkgParticipant<S>>;
    }
    harness::run(participants, seed, disturbances)
}

#[test]
fn byzantine_dealers_are_excluded_and_honest_members_agree() {
    let n = 16; // f = 5
    let faults = vec![
        (
            1,
            DealerFault::BadShares {
                victims: vec![NodeIndex(0), NodeIndex(9)],
            },
        ),
        (4, DealerFault::WrongDegree),
        (6, DealerFault::Equivocate),
        (10, DealerFault::Silent),
        (
            13,
            DealerFault::InvalidJustification {
                victims: vec![NodeIndex(2)],
            },
        ),
    ];
    let disturbances = Disturbances {
        duplicate_all: true,
        from_non_members: true,
        replay_other_session: true,
    };
    for seed in [11, 12] {
        let run = with_faults::<MinSig>(n, &faults, seed, &disturbances);
        let bad: Vec<u32> = faults.iter().map(|(w, _)| *w).collect();
        let honest: Vec<u32> = (0..n).filter(|i| !bad.contains(i)).collect();
        let qual: Vec<NodeIndex> = honest.iter().map(|i| NodeIndex(*i)).collect();
        check_agreement(&run, &honest, &qual);
        let out = run.results[0].clone().unwrap().unwrap();
        let reasons: BTreeMap<NodeIndex, String> = out.disqualified.iter().cloned().collect();
        assert!(reasons[&NodeIndex(4)].contains("degree"));
        assert!(reasons[&NodeIndex(10)].contains("no deal"));
        assert!(reasons[&NodeIndex(1)].contains("unanswered"));
        assert!(reasons[&NodeIndex(13)].contains("justification"));
        assert!(reasons[&NodeIndex(6)].contains("justification"));
    }
}

#[test]
fn a_dealer_that_justifies_correctly_stays_qualified() {
    let n = 7;
    let faults = vec![(
        3,
        DealerFault::BadSharesThenJustified {
            victims: vec![NodeIndex(0), NodeIndex(5)],
        },
    )];
    let run = with_faults::<MinPk>(n, &faults, 21, &Disturbances::default());
    // Everyone, the victims included, ends with working keys from all 7 dealers.
    let all: Vec<u32> = (0..n).filter(|i| *i != 3).collect();
    let qual: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
    check_agreement(&run, &all, &qual);
}

#[test]
fn committee_mode_deals_to_everyone() {
    let dealers: Vec<NodeIndex> = [3u32, 9, 17, 30, 41, 55, 60]
        .iter()
        .map(|i| NodeIndex(*i))
        .collect();
    let mut cfg = config(64, dealers.clone());
    cfg.min_qualified = 3;
    let memo = Memo::shared();
    let mut participants = harness::honest::<MinPk>(&cfg, 5, &memo).unwrap();
    let inner = Dkg::<MinPk>::new(
        cfg.clone(),
        NodeIndex(9),
        harness::member_seed(5, 9),
        memo.clone(),
    )
    .unwrap();
    participants[9] = Box::new(ByzantineDealer::new(inner, DealerFault::Silent));
    let run = harness::run(participants, 5, &Disturbances::default());
    let honest: Vec<u32> = (0..64).filter(|i| *i != 9).collect();
    let qual: Vec<NodeIndex> = dealers.into_iter().filter(|d| d.0 != 9).collect();
    check_agreement(&run, &honest, &qual);
}

#[test]
fn too_few_qualified_dealers_fail() {
    let mut cfg = config(4, vec![NodeIndex(0), NodeIndex(1)]);
    cfg.min_qualified = 2;
    let memo = Memo::shared();
    let mut participants = harness::honest::<MinPk>(&cfg, 5, &memo).unwrap();
    let inner =
        Dkg::<MinPk>::new(cfg.clone(), NodeIndex(1), harness::member_seed(5, 1), memo).unwrap();
    participants[1] = Box::new(ByzantineDealer::new(inner, DealerFault::Silent));
    let run = harness::run(participants, 5, &Disturbances::default());
    assert!(matches!(&run.results[0], Some(Err(e)) if e.contains("qualified")));
}

#[test]
fn persisted_output_signs_after_restart() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinSig>(
        harness::honest(&cfg, 31, &Memo::shared()).unwrap(),
        31,
        &Disturbances::default(),
    );
    let outputs: Vec<Arc<DkgOutput<MinSig>>> = run
        .results
        .iter()
        .map(|r| r.clone().unwrap().unwrap())
        .collect();
    // Member 2 "restarts": its output is reloaded from bytes; no DKG runs.
    let bytes = outputs[2].encode().unwrap();
    let reloaded = DkgOutput::<MinSig>::decode(&bytes).unwrap();
    assert!(
        !format!("{reloaded:?}").contains(&format!("{:?}", reloaded.keys[0].secret_share.value()))
    );
    let domain = Arc::new(SignerDomain::new(7).unwrap());
    let public = reloaded.keys[1].public_key(domain).unwrap();
    let msg = b"after restart";
    let mut shares = vec![reloaded.keys[1].secret_share.sign::<MinSig>(msg)];
    shares.extend(
        outputs[3..]
            .iter()
            .map(|o| o.keys[1].secret_share.sign::<MinSig>(msg)),
    );
    let sig = public
        .aggregate(&shares, InterpolationMethod::RootsOfUnity)
        .unwrap();
    assert!(public.verify(msg, &sig));
    // A tampered file is rejected.
    let mut bad = bytes.clone();
    let last = bad.len() - 5;
    bad[last] ^= 1;
    assert!(DkgOutput::<MinSig>::decode(&bad).is_err());
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    let cfg = config(4, Vec::new());
    let run = harness::run::<MinPk>(
        harness::honest(&cfg, 41, &Memo::shared()).unwrap(),
        41,
        &Disturbances::default(),
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    let deal = Deal::<MinPk>::new([1; 32], NodeIndex(0), vec![vec![G1Gen::gen(); 2]], [0; 32]);
    let bytes = DkgMessage::Deal(Arc::new(deal)).encode().unwrap();
    assert!(DkgMessage::<MinPk>::decode(&bytes).is_ok());
    for cut in [0, 1, 10, bytes.len() - 1] {
        assert!(DkgMessage::<MinPk>::decode(&bytes[..cut]).is_err());
    }
    // Corrupt a point: flip a byte inside the first commitment.
    for pos in [45, 60, 80] {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x5a;
        let _ = DkgMessage::<MinPk>::decode(&bad); // must not panic
    }
    // A G1 deal decoded as a G2 deal: wrong point lengths.
    assert!(DkgMessage::<MinSig>::decode(&bytes).is_err());
    // Garbage.
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    for len in [0usize, 3, 50, 500] {
        let mut junk = vec![0u8; len];
        rand_core::RngCore::fill_bytes(&mut rng, &mut junk);
        let _ = DkgMessage::<MinPk>::decode(&junk);
    }
    // Out-of-range or inconsistent inputs to the state machine are ignored.
    let mut dkg = Dkg::<MinPk>::new(cfg, NodeIndex(0), [0; 32], Memo::disabled()).unwrap();
    let shares = DealtShares {
        session: [7; 32],
        dealer: NodeIndex(2),
        recipient: NodeIndex(0),
        shares: vec![],
        salt: [0; 32],
        path: Vec::new(),
    };
    assert!(dkg
        .handle(
            Time::ZERO,
            DkgInput::Message {
                from: NodeIndex(99),
                message: DkgMessage::Shares(shares)
            }
        )
        .is_empty());
}

struct G1Gen;
impl G1Gen {
    fn gen() -> crate::curve::G1 {
        crate::curve::G1::generator()
    }
}

#[test]
fn config_validation() {
    let mut cfg = config(4, Vec::new());
    assert!(cfg.validate().is_ok());
    cfg.thresholds = vec![5];
    assert!(cfg.validate().is_err());
    let mut cfg = config(4, vec![NodeIndex(2), NodeIndex(1)]);
    assert!(cfg.validate().is_err());
    cfg.dealers = vec![NodeIndex(1), NodeIndex(4)];
    assert!(cfg.validate().is_err());
    let mut cfg = config(4, Vec::new());
    cfg.min_qualified = 0;
    assert!(cfg.validate().is_err());
    assert!(Dkg::<MinPk>::new(
        config(4, Vec::new()),
        NodeIndex(4),
        [0; 32],
        Memo::disabled()
    )
    .is_err());
}

#[test]
fn exponent_fft_matches_horner() {
    let domain = SignerDomain::new(100).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let coeffs: Vec<Scalar> = (0..37).map(|_| Scalar::random(&mut rng)).collect();
    let g = crate::curve::G1::generator();
    let commitments: Vec<_> = coeffs.iter().map(|c| g.mul(c)).collect();
    let fast = evaluate_in_exponent(&commitments, &domain);
    let values = domain.evaluate_all(&coeffs);
    for (p, v) in fast.iter().zip(&values) {
        assert_eq!(*p, g.mul(v));
    }
}

/// A member told (by the transport) that a dealer equivocated.
struct ToldOfEquivocation<S: Scheme> {
    inner: Dkg<S>,
    dealer: NodeIndex,
}

impl<S: Scheme> DkgParticipant<S> for ToldOfEquivocation<S> {
    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>> {
        // Told before anything else happens (phases end on events: by the
        // time a timer fires, the run is over).
        let mut out = Vec::new();
        if matches!(input, DkgInput::Start) {
            out.extend(self.inner.handle(
                now,
                DkgInput::Faulty {
                    member: self.dealer,
                },
            ));
        }
        out.extend(self.inner.handle(now, input));
        out
    }
}

#[test]
fn an_equivocating_dealer_reported_by_the_transport_is_excluded() {
    let cfg = config(4, Vec::new());
    let memo = Memo::disabled();
    let participants: Vec<Box<dyn DkgParticipant<MinSig>>> = (0..4)
        .map(|i| {
            let inner = Dkg::new(
                cfg.clone(),
                NodeIndex(i),
                harness::member_seed(3, i),
                memo.clone(),
            )
            .unwrap();
            Box::new(ToldOfEquivocation {
                inner,
                dealer: NodeIndex(2),
            }) as Box<dyn DkgParticipant<MinSig>>
        })
        .collect();
    let run = harness::run(participants, 3, &Disturbances::default());
    check_agreement(
        &run,
        &[0, 1, 2, 3],
        &[NodeIndex(0), NodeIndex(1), NodeIndex(3)],
    );
    let out = run.results[0].clone().unwrap().unwrap();
    assert!(out
        .disqualified
        .iter()
        .any(|(d, why)| *d == NodeIndex(2) && why.contains("equivocat")));
}

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

/// Phases end on events: an honest run needs no timer (messages take no time
/// in the harness), and a silent dealer costs the deal phase's timeout plus
/// the complaint phase's (its complaint never comes), not three phases.
#[test]
fn phases_end_when_everything_is_in() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinPk>(
        harness::honest(&cfg, 5, &Memo::shared()).unwrap(),
        5,
        &Disturbances::default(),
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert_eq!(run.finished_at, Time::ZERO);
    let silent = with_faults::<MinPk>(7, &[(3, DealerFault::Silent)], 5, &Disturbances::default());
    assert_eq!(
        silent.finished_at,
        Time::ZERO.plus_micros(2 * cfg.phase_timeout_us)
    );
}

/// Whole sessions over the relay: an honest run ends without a timer, and its
/// attestations are one summary per member pair and kind (deals, complaints;
/// no justification is due), with no lists or pulls.
#[test]
fn honest_sessions_end_on_events_with_bounded_attestations() {
    let n = 10u32;
    let mut cfg = config(n, Vec::new());
    cfg.max_faulty = (n - 1) / 3;
    let run = harness::run_sessions::<MinSig>(
        harness::honest_sessions(&cfg, 8, &Memo::shared()).unwrap(),
        8,
        harness::Delivery::Fifo,
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert_eq!(run.finished_at, Time::ZERO);
    let pairs = u64::from(n * (n - 1));
    let count = |kind: &str| run.traffic.get(kind).map_or(0, |t| t.0);
    assert_eq!(count("dkg-summary"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-broadcast"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-shares"), pairs);
    assert_eq!(count("dkg-result"), pairs);
    for kind in ["dkg-pull", "dkg-pull-versions", "dkg-versions"] {
        assert_eq!(count(kind), 0, "{kind}: {:?}", run.traffic);
    }
    // Any delivery order: still one summary per pair and kind; members that
    // hear of broadcasts before they arrive ask a few lists and payloads.
    let run = harness::run_sessions::<MinSig>(
        harness::honest_sessions(&cfg, 8, &Memo::shared()).unwrap(),
        8,
        harness::Delivery::Random,
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    let count = |kind: &str| run.traffic.get(kind).map_or(0, |t| t.0);
    assert_eq!(count("dkg-summary"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-broadcast"), 2 * pairs + count("dkg-pull"));
    assert!(count("dkg-pull-versions") <= 2 * pairs, "{:?}", run.traffic);
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
