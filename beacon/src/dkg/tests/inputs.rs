//! Bad input and restored state: malformed messages, invalid configs, a
//! persisted result that signs after a restart.

use super::*;
use crate::DkgError;

#[test]
fn persisted_output_signs_after_restart() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinSig, _>(
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

/// `DkgOutput` as nodes stored it before a disqualification reason had a
/// type and before `QUAL` and the exclusions were one [`Verdicts`]: the same
/// fields, flat, the reason as its text.
#[derive(serde::Serialize)]
#[serde(bound = "")]
struct OutputWithTextReasons<S: Scheme> {
    session: [u8; 32],
    n: u32,
    me: NodeIndex,
    qual: Vec<NodeIndex>,
    disqualified: Vec<(NodeIndex, String)>,
    keys: Vec<ThresholdKeyMaterial<S>>,
}

#[test]
fn an_output_stored_with_text_reasons_still_decodes() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinSig, _>(
        harness::honest(&cfg, 37, &Memo::shared()).unwrap(),
        37,
        &Disturbances::default(),
    );
    let output = run.results[2].clone().unwrap().unwrap();
    let with_text = |reasons: &[(u32, &str)]| {
        let old = OutputWithTextReasons::<MinSig> {
            session: output.session,
            n: output.n,
            me: output.me,
            qual: output.verdicts.qual.clone(),
            disqualified: reasons
                .iter()
                .map(|(d, r)| (NodeIndex(*d), r.to_string()))
                .collect(),
            keys: output.keys.clone(),
        };
        crate::wire::encode(&old).unwrap()
    };
    let bytes = with_text(&[
        (4, "commitments of the wrong degree"),
        (5, "complaints left unanswered"),
        (6, "equivocating broadcasts"),
    ]);
    let reloaded = DkgOutput::<MinSig>::decode(&bytes).unwrap();
    assert_eq!(
        reloaded.verdicts.disqualified,
        vec![
            (NodeIndex(4), Disqualification::WrongDegree),
            (NodeIndex(5), Disqualification::UnansweredComplaints),
            (NodeIndex(6), Disqualification::Equivocation),
        ]
    );
    assert_eq!(reloaded.verdicts.qual, output.verdicts.qual);
    // Written again, it is the same bytes.
    assert_eq!(reloaded.encode().unwrap(), bytes);
    // A reason no version wrote is a decode error that names it.
    let e = DkgOutput::<MinSig>::decode(&with_text(&[(4, "late")])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "wire: dkg: unknown reason for a dealer's disqualification \"late\""
    );
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    let cfg = config(4, Vec::new());
    let run = harness::run::<MinPk, _>(
        harness::honest(&cfg, 41, &Memo::shared()).unwrap(),
        41,
        &Disturbances::default(),
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    let deal = Deal::<MinPk>::new(
        [1; 32],
        NodeIndex(0),
        crate::dkg::Commitments::new(&[vec![G1Gen::gen(); 2]]),
        [0; 32],
    );
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
        path: Vec::new().into(),
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
    let mut cfg = config(4, Vec::new()).settings();
    assert!(cfg.validate().is_ok());
    cfg.thresholds = vec![5];
    assert_eq!(cfg.validate(), Err(Error::InvalidThreshold { t: 5, n: 4 }));
    cfg.thresholds = Vec::new();
    assert_eq!(cfg.validate(), Err(Error::Dkg(DkgError::NoThresholds)));
    let mut cfg = config(4, vec![NodeIndex(1), NodeIndex(2)]).settings();
    cfg.dealers = vec![NodeIndex(2), NodeIndex(1)];
    assert_eq!(cfg.validate(), Err(Error::Dkg(DkgError::DealersUnsorted)));
    cfg.dealers = vec![NodeIndex(1), NodeIndex(4)];
    assert!(cfg.validate().is_err());
    let mut cfg = config(4, Vec::new()).settings();
    cfg.min_qualified = 0;
    assert_eq!(
        cfg.validate(),
        Err(Error::Dkg(DkgError::MinQualified {
            min_qualified: 0,
            dealers: 4
        }))
    );
    let mut cfg = config(4, Vec::new()).settings();
    cfg.timing.max_attempts = 17;
    assert_eq!(
        cfg.validate(),
        Err(Error::Dkg(DkgError::MaxAttempts { max_attempts: 17 }))
    );
    let mut cfg = config(4, Vec::new()).settings();
    cfg.max_faulty = 2;
    assert_eq!(
        cfg.validate(),
        Err(Error::Dkg(DkgError::TooManyFaulty {
            max_faulty: 2,
            n: 4
        }))
    );
    assert!(Dkg::<MinPk>::new(
        config(4, Vec::new()),
        NodeIndex(4),
        [0; 32],
        Memo::disabled()
    )
    .is_err());
}
