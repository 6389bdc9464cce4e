//! Parameters, roles and hostile inputs: clear errors, ignored messages, no panics.

use super::*;
use crate::scheme::{MinPk, MinSig};

fn small() -> (ReshareEpoch<MinPk>, Vec<SecretShare>) {
    let (polynomial, shares) = old_group::<MinPk>(4, 2, 21);
    (epoch(&ids(0..4), polynomial, &ids(2..6), 3), shares)
}

#[test]
fn epoch_validation_names_the_problem() {
    let (good, _) = small();
    let good = good.settings();
    assert!(good.validate().is_ok());
    let mut e = good.clone();
    e.new_threshold = 5;
    assert_eq!(e.validate(), Err(Error::InvalidThreshold { t: 5, n: 4 }));
    e.new_threshold = 0;
    assert!(e.validate().is_err());
    let mut e = good.clone();
    e.old_public_polynomial = Arc::new(vec![crate::curve::G1::generator(); 5]);
    assert_eq!(e.validate(), Err(Error::InvalidThreshold { t: 5, n: 4 }));
    e.old_public_polynomial = Arc::new(Vec::new());
    assert!(e.validate().is_err());
    let mut e = good.clone();
    e.new_members.push(id(3));
    assert!(matches!(
        e.validate(),
        Err(Error::Reshare(ReshareError::DuplicateMember {
            set: MemberSet::New,
            ..
        }))
    ));
    let mut e = good.clone();
    e.old_members.clear();
    assert!(e.validate().is_err());
    let mut e = good.clone();
    e.phase_timeout_us = 0;
    assert!(e.validate().is_err());
}

#[test]
fn session_is_deterministic_and_binds_every_parameter() {
    let (good, _) = small();
    let good = good.settings();
    assert_eq!(good.session(), good.clone().session());
    let variants = [
        ReshareSettings {
            epoch: 2,
            ..good.clone()
        },
        ReshareSettings {
            new_threshold: 2,
            ..good.clone()
        },
        ReshareSettings {
            new_members: ids(2..7),
            ..good.clone()
        },
        ReshareSettings {
            old_members: ids([0, 1, 3, 2]),
            ..good.clone()
        },
        ReshareSettings {
            old_public_polynomial: old_group::<MinPk>(4, 2, 22).0,
            ..good.clone()
        },
    ];
    for v in variants {
        assert_ne!(v.session(), good.session());
    }
}

#[test]
fn roster_puts_old_members_first_then_the_joining_ones() {
    let (e, _) = small();
    let roster = e.roster();
    assert_eq!(roster.participants(), ids([0, 1, 2, 3, 4, 5]).as_slice());
    assert_eq!(roster.index_of(&id(4)), Some(NodeIndex(4)));
    assert_eq!(roster.index_of(&id(9)), None);
    assert_eq!(roster.old_index(NodeIndex(1)), Some(NodeIndex(1)));
    assert_eq!(roster.old_index(NodeIndex(4)), None);
    assert_eq!(roster.new_index(NodeIndex(1)), None);
    assert_eq!(roster.new_index(NodeIndex(2)), Some(NodeIndex(0)));
    assert_eq!(roster.new_index(NodeIndex(5)), Some(NodeIndex(3)));
    assert_eq!(roster.new_index(NodeIndex(99)), None);
    assert_eq!(roster.participant_of_new(NodeIndex(3)), Some(NodeIndex(5)));
    assert_eq!(roster.participant_of_new(NodeIndex(4)), None);
}

#[test]
fn a_resharer_checks_who_it_is_and_what_it_holds() {
    let (e, shares) = small();
    let new = |me: MemberId, share: Option<SecretShare>| {
        Resharer::new(e.clone(), me, share, [0; 32], Memo::disabled()).map(|_| ())
    };
    assert!(new(id(1), Some(shares[1].clone())).is_ok());
    assert!(new(id(5), None).is_ok());
    assert!(new(id(1), None).is_ok());
    assert_eq!(
        new(id(9), None),
        Err(Error::Reshare(ReshareError::NotAParticipant {
            member: id(9)
        }))
    );
    // Another member's share, a share given to a joining member, a wrong share.
    assert!(new(id(1), Some(shares[2].clone())).is_err());
    assert!(new(id(5), Some(shares[1].clone())).is_err());
    let wrong = SecretShare::new(NodeIndex(1), *shares[1].value() + Scalar::one());
    assert_eq!(
        new(id(1), Some(wrong)),
        Err(Error::Reshare(ReshareError::OldShareMismatch {
            old_index: NodeIndex(1)
        }))
    );
}

#[test]
fn malformed_and_misaddressed_messages_are_ignored() {
    let (e, shares) = small();
    let session = e.session();
    // Participant 4 is a joining member; participant 0 an old one.
    let mut joining =
        Resharer::<MinPk>::new(e.clone(), id(4), None, [1; 32], Memo::disabled()).unwrap();
    let deal = |dealer: u32, len: usize| {
        DkgMessage::Deal(Arc::new(Deal::new(
            session,
            NodeIndex(dealer),
            crate::dkg::Commitments::new(&[vec![crate::curve::G1::generator(); len]]),
            [0; 32],
        )))
    };
    let shares_msg = |dealer: u32, recipient: u32, values: Vec<Scalar>| {
        DkgMessage::Shares(DealtShares {
            session,
            dealer: NodeIndex(dealer),
            recipient: NodeIndex(recipient),
            shares: values,
            salt: [0; 32],
            path: Vec::new().into(),
        })
    };
    let hostile: Vec<(u32, DkgMessage<MinPk>)> = vec![
        (99, deal(99, 3)),
        (u32::MAX, deal(0, 3)),
        (4, deal(4, 3)),
        (1, deal(0, 3)),
        (0, shares_msg(0, 4, vec![])),
        (0, shares_msg(0, 4, vec![Scalar::one(); 2])),
        (0, shares_msg(0, 3, vec![Scalar::one()])),
        (5, shares_msg(5, 4, vec![Scalar::one()])),
        (
            1,
            DkgMessage::Complaint(Complaint {
                session,
                from: NodeIndex(1),
                dealers: vec![NodeIndex(0), NodeIndex(u32::MAX)],
            }),
        ),
        (
            5,
            DkgMessage::Justification(Arc::new(Justification {
                session,
                dealer: NodeIndex(5),
                revealed: vec![(NodeIndex(4), vec![])],
            })),
        ),
    ];
    for (from, message) in hostile {
        let out = joining.handle(
            Time::ZERO,
            ReshareInput::Message {
                from: NodeIndex(from),
                message,
            },
        );
        assert!(out.is_empty());
    }
    // Timers out of order, a faulty report for a non-participant, then the real
    // sequence: no dealer dealt, so the run fails with a clear error.
    assert!(joining
        .handle(
            Time::ZERO,
            ReshareInput::Timer(DkgTimer::EndOfJustifications)
        )
        .is_empty());
    joining.handle(
        Time::ZERO,
        ReshareInput::Faulty {
            member: NodeIndex(u32::MAX),
        },
    );
    // A deal of the wrong degree from old member 1 (accepted, then disqualified).
    joining.handle(
        Time::ZERO,
        ReshareInput::Message {
            from: NodeIndex(1),
            message: deal(1, 7),
        },
    );
    joining.handle(Time::ZERO, ReshareInput::Start);
    let mut last = Vec::new();
    for timer in [
        DkgTimer::EndOfDeal,
        DkgTimer::EndOfComplaints,
        DkgTimer::EndOfJustifications,
    ] {
        last.extend(joining.handle(Time::ZERO, ReshareInput::Timer(timer)));
    }
    // Its own (empty) complaint, then the failure: with no justification due,
    // the justification phase ends at once.
    assert!(matches!(
        last.as_slice(),
        [
            ResharePhaseOutput::Effect(Effect::Broadcast(DkgMessage::Complaint(_))),
            ResharePhaseOutput::Effect(Effect::SetTimer { .. }),
            ..
        ]
    ));
    assert!(matches!(
        &last[last.len() - 1..],
        [ResharePhaseOutput::Failed(DkgFailure::TooFewDealers {
            qualified: 0,
            need: 2
        })]
    ));
    assert_eq!(joining.phase(), DkgPhase::Failed);
    // Over: everything after is ignored.
    assert!(joining.handle(Time::ZERO, ReshareInput::Start).is_empty());
    // A dealer that deals to the joining member: shares go to participants by
    // their participant index, one sub-share each.
    let mut dealer = Resharer::<MinSig>::new(
        epoch(&ids(0..4), old_group::<MinSig>(4, 2, 21).0, &ids(2..6), 3),
        id(0),
        Some(old_group::<MinSig>(4, 2, 21).1[0].clone()),
        [2; 32],
        Memo::disabled(),
    )
    .unwrap();
    let out = dealer.handle(Time::ZERO, ReshareInput::Start);
    let mut to: Vec<u32> = out
        .iter()
        .filter_map(|a| match a {
            ResharePhaseOutput::Effect(Effect::Send {
                to,
                message: DkgMessage::Shares(s),
            }) if s.shares.len() == 1 => Some(to.0),
            _ => None,
        })
        .collect();
    to.sort_unstable();
    assert_eq!(to, vec![2, 3, 4, 5]);
    let _ = shares;
}

/// [`ReshareOutput`] as it was encoded before `QUAL` and the exclusions were
/// one [`Verdicts`]: the same fields, flat.
#[derive(serde::Serialize)]
#[serde(bound = "")]
struct FlatOutput<S: Scheme> {
    session: [u8; 32],
    epoch: u64,
    n: u32,
    me: Option<NodeIndex>,
    qual: Vec<NodeIndex>,
    disqualified: Vec<(NodeIndex, Disqualification)>,
    threshold: u32,
    public_polynomial: Arc<Vec<S::PublicKey>>,
    verification_keys: Arc<Vec<S::PublicKey>>,
    share: Option<SecretShare>,
}

#[test]
fn an_output_encodes_to_the_bytes_of_its_flat_fields() {
    let (epoch, shares) = small();
    let silent = [(3, ResharerFault::Silent)];
    let run = run_with(
        &epoch,
        &all_shares(&shares),
        &silent,
        23,
        &Disturbances::default(),
    );
    let outputs = check_reshared(&run, &epoch, &[3]);
    let out = outputs[0].clone().unwrap();
    assert_eq!(
        out.verdicts.reason(NodeIndex(3)),
        Some(Disqualification::NoDeal)
    );
    let flat = FlatOutput::<MinPk> {
        session: out.session,
        epoch: out.epoch,
        n: out.n,
        me: out.me,
        qual: out.verdicts.qual.clone(),
        disqualified: out.verdicts.disqualified.clone(),
        threshold: out.threshold,
        public_polynomial: out.public_polynomial.clone(),
        verification_keys: out.verification_keys.clone(),
        share: out.share.clone(),
    };
    let bytes = wire::encode(&flat).unwrap();
    assert_eq!(out.encode().unwrap(), bytes);
    let reloaded = ReshareOutput::<MinPk>::decode(&bytes).unwrap();
    assert_eq!(reloaded.verdicts, out.verdicts);
    assert_eq!(reloaded.encode().unwrap(), bytes);
}
