//! The DKG machine in the in-memory harness: honest and Byzantine runs agree,
//! committees, failures, transport-reported equivocation, the FFT in the exponent.

mod inputs;
mod phases;
mod share_check;

use super::harness::{
    self, ByzantineDealer, DealerFault, Disturbances, DkgParticipant, Participant,
};
use super::*;
use crate::curve::Point;
use crate::lagrange::{InterpolationMethod, SignerDomain};
use crate::scheme::{MinPk, MinSig};
use crate::threshold::SignatureShare;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::time::Duration;

fn config(n: u32, dealers: Vec<NodeIndex>) -> DkgConfig {
    settings(n, dealers).build().unwrap()
}

/// [`config`]'s settings, to edit before they are built.
fn settings(n: u32, dealers: Vec<NodeIndex>) -> DkgSettings {
    let f = (n - 1) / 3;
    DkgSettings {
        session: [7; 32],
        n,
        thresholds: vec![f + 1, 2 * f + 1, 3 * f + 1],
        dealers,
        timing: DkgTiming::new(Duration::from_millis(1), 3),
        min_qualified: f + 1,
        max_faulty: f,
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
    assert_eq!(first.verdicts.qual, expected_qual);
    for o in &outputs {
        assert_eq!(o.verdicts.qual, first.verdicts.qual);
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
    let run = harness::run::<S, _>(
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
    let a = harness::run::<MinPk, _>(
        harness::honest(&cfg, 9, &Memo::shared()).unwrap(),
        9,
        &Disturbances::default(),
    );
    let b = harness::run::<MinPk, _>(
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
            Box::new(ByzantineDealer::new(inner, fault.clone())) as Box<DkgParticipant<S>>;
    }
    harness::run(participants, seed, disturbances)
}

#[test]
fn byzantine_dealers_are_excluded_and_honest_members_agree() {
    use Disqualification::*;
    // 16 members (f = 5); each Byzantine dealer, its fault, and what every
    // honest member excludes it for.
    let n = 16;
    let byzantine = [
        (
            1,
            DealerFault::BadShares {
                victims: vec![NodeIndex(0), NodeIndex(9)],
            },
            Some(UnansweredComplaints),
        ),
        (4, DealerFault::WrongDegree, Some(WrongDegree)),
        (6, DealerFault::Equivocate, Some(InvalidJustification)),
        (10, DealerFault::Silent, Some(NoDeal)),
        (
            13,
            DealerFault::InvalidJustification {
                victims: vec![NodeIndex(2)],
            },
            Some(InvalidJustification),
        ),
    ];
    let faults: Vec<(u32, DealerFault)> =
        byzantine.iter().map(|(d, f, _)| (*d, f.clone())).collect();
    for seed in [11, 12] {
        let run = with_faults::<MinSig>(n, &faults, seed, &Disturbances::all());
        let honest: Vec<u32> = (0..n)
            .filter(|i| faults.iter().all(|(w, _)| w != i))
            .collect();
        let qual: Vec<NodeIndex> = honest.iter().map(|i| NodeIndex(*i)).collect();
        check_agreement(&run, &honest, &qual);
        for i in &honest {
            let out = run.results[*i as usize].clone().unwrap().unwrap();
            harness::assert_verdicts(&out.verdicts, n, &byzantine);
        }
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
    let cfg = DkgSettings {
        min_qualified: 3,
        ..settings(64, dealers.clone())
    }
    .build()
    .unwrap();
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
    let cfg = DkgSettings {
        min_qualified: 2,
        ..settings(4, vec![NodeIndex(0), NodeIndex(1)])
    }
    .build()
    .unwrap();
    let memo = Memo::shared();
    let mut participants = harness::honest::<MinPk>(&cfg, 5, &memo).unwrap();
    let inner =
        Dkg::<MinPk>::new(cfg.clone(), NodeIndex(1), harness::member_seed(5, 1), memo).unwrap();
    participants[1] = Box::new(ByzantineDealer::new(inner, DealerFault::Silent));
    let run = harness::run(participants, 5, &Disturbances::default());
    assert!(matches!(
        &run.results[0],
        Some(Err(DkgFailure::TooFewDealers { .. }))
    ));
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

/// The FFT in the exponent split over any number of threads gives the same
/// points and charges the caller the same multiplications: those the
/// two-thread version charged (the simulator's trace does not move; the
/// pinned count is that version's, for these inputs).
#[test]
fn exponent_fft_is_the_same_on_any_number_of_threads() {
    let domain = SignerDomain::new(200).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let g = crate::curve::G1::generator();
    let commitments: Vec<_> = (0..67).map(|_| g.mul(&Scalar::random(&mut rng))).collect();
    let mut runs = Vec::new();
    for threads in [1, 2, 5, 16] {
        crate::parallel::set_threads(threads);
        crate::cost::take();
        let points = evaluate_in_exponent(&commitments, &domain);
        runs.push((points, crate::cost::take().mul_g1));
    }
    crate::parallel::set_threads(2);
    for (points, muls) in &runs[1..] {
        assert!(*points == runs[0].0);
        assert_eq!(*muls, runs[0].1);
    }
    assert_eq!(runs[0].1, 354);
}

/// A member told (by the transport) that a dealer equivocated.
struct ToldOfEquivocation<S: Scheme> {
    inner: Dkg<S>,
    dealer: NodeIndex,
}

impl<S: Scheme> Participant<S, DkgOutput<S>> for ToldOfEquivocation<S> {
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
    let participants: Vec<Box<DkgParticipant<MinSig>>> = (0..4)
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
            }) as Box<DkgParticipant<MinSig>>
        })
        .collect();
    let run = harness::run(participants, 3, &Disturbances::default());
    check_agreement(
        &run,
        &[0, 1, 2, 3],
        &[NodeIndex(0), NodeIndex(1), NodeIndex(3)],
    );
    let out = run.results[0].clone().unwrap().unwrap();
    assert_eq!(
        out.verdicts.reason(NodeIndex(2)),
        Some(Disqualification::Equivocation)
    );
}
