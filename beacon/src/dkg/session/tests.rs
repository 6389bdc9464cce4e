//! Sessions over an in-memory network: agreement, late members, distinct attempts.

use super::*;
use crate::curve::G1;
use crate::dkg::{DkgSettings, DkgTiming};
use crate::effect::Effect;
use crate::multisig::{ConsensusSecretKey, SignerBitmap};
use crate::schedule::EventQueue;
use crate::scheme::MinSig;
use std::time::Duration;

/// Each member's last terminal action.
type Results = Vec<Option<Result<Arc<DkgOutput<MinSig>>, SessionFailure>>>;

/// Runs `n` honest sessions with zero latency; member `i` starts at
/// `starts[i]`. Returns each member's last terminal action.
fn run(n: u32, starts: &[u64]) -> Results {
    run_cut(n, starts, None, false, 2)
}

/// [`run`], with member `cut.0` cut off (everything to and from it lost)
/// until `cut.1`; with `recover`, every member also asks for what it lacks
/// ([`DkgSession::request_missing`]) once per phase length, as a
/// transition does, on top of the session's own asks at each phase's end. Each member has `attempts` attempts.
fn run_cut(
    n: u32,
    starts: &[u64],
    cut: Option<(u32, u64)>,
    recover: bool,
    attempts: u32,
) -> Results {
    run_sessions(n, starts, cut, recover, attempts).0
}

/// [`run_cut`], with the sessions as they ended.
fn run_sessions(
    n: u32,
    starts: &[u64],
    cut: Option<(u32, u64)>,
    recover: bool,
    attempts: u32,
) -> (Results, Vec<DkgSession<MinSig>>) {
    let f = (n - 1) / 3;
    let config = DkgSettings {
        session: [9; 32],
        n,
        thresholds: vec![f + 1],
        dealers: Vec::new(),
        timing: DkgTiming::new(Duration::from_millis(1), attempts),
        min_qualified: f + 1,
        max_faulty: f,
    }
    .build()
    .unwrap();
    let (secrets, keys) = crate::dkg::harness::member_keys(n, |i| [i as u8 + 1; 32]);
    let agreement = crate::dkg::harness::agreement_keys::<MinSig>(n, |i| [i as u8 + 101; 32]);
    let memo = Memo::disabled();
    let mut members: Vec<DkgSession<MinSig>> = (0..n)
        .map(|i| {
            DkgSession::new(
                config.clone(),
                NodeIndex(i),
                [i as u8; 32],
                memo.clone(),
                secrets[i as usize].clone(),
                keys.clone(),
                agreement[i as usize].clone(),
            )
            .unwrap()
        })
        .collect();
    let mut results = vec![None; n as usize];
    let mut timers: EventQueue<(u32, Option<SessionInput>)> = EventQueue::new();
    for (i, at) in starts.iter().enumerate() {
        timers.push(Time(*at), (i as u32, Some(SessionInput::Start)));
        if recover {
            for k in 1..40u64 {
                timers.push(Time(*at + 500 + 1_000 * k), (i as u32, None));
            }
        }
    }
    let lost = |now: Time, a: u32, b: u32| {
        cut.is_some_and(|(m, until)| now.0 < until && (a == m || b == m))
    };
    let mut now = Time::ZERO;
    let mut queue: std::collections::VecDeque<(u32, SessionInput)> = Default::default();
    let mut asks: Vec<u32> = Vec::new();
    loop {
        loop {
            let (who, actions) = if let Some(who) = asks.pop() {
                (who, members[who as usize].request_missing())
            } else if let Some((who, input)) = queue.pop_front() {
                (who, members[who as usize].handle(now, input))
            } else {
                break;
            };
            for action in actions {
                match action {
                    SessionOutput::Effect(Effect::Send { to, .. }) if lost(now, who, to.0) => {}
                    SessionOutput::Effect(Effect::Send { to, message }) => queue.push_back((
                        to.0,
                        SessionInput::Message {
                            from: NodeIndex(who),
                            message,
                        },
                    )),
                    SessionOutput::Effect(Effect::Broadcast(message)) => {
                        for j in (0..n).filter(|j| *j != who && !lost(now, who, *j)) {
                            queue.push_back((
                                j,
                                SessionInput::Message {
                                    from: NodeIndex(who),
                                    message: message.clone(),
                                },
                            ));
                        }
                    }
                    SessionOutput::Effect(Effect::SetTimer { at, timer }) => {
                        timers.push(at, (who, Some(SessionInput::Timer(timer))))
                    }
                    SessionOutput::Complete(out) => results[who as usize] = Some(Ok(out)),
                    SessionOutput::Failed(e) => results[who as usize] = Some(Err(e)),
                }
            }
        }
        let Some((at, (who, input))) = timers.pop() else {
            break;
        };
        now = at;
        match input {
            Some(input) => queue.push_back((who, input)),
            None => asks.push(who),
        }
    }
    (results, members)
}

/// Every member output keys, all with the same group key.
fn assert_all_agree(results: &Results) {
    let keys: Vec<_> = results
        .iter()
        .enumerate()
        .map(|(i, r)| match r {
            Some(Ok(out)) => out.keys[0].group_key().to_bytes(),
            other => panic!("member {i}: {other:?}"),
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
}

/// A member cut off through the whole first attempt (deals, complaints,
/// votes all lost; it goes on to attempt 1 alone) asks the dealers for what
/// it lacks at the end of each phase of its own attempt: their deals, its
/// shares and the certificate of attempt 0 take it back to that attempt, and
/// it outputs the others' keys, with no driver asking for it. Before the
/// session asked by itself, this member failed ("no agreement"); a driver's
/// own asks ([`DkgSession::request_missing`]) change nothing.
#[test]
fn a_member_cut_off_through_an_attempt_asks_by_itself_and_gets_the_agreed_keys() {
    let starts = [0, 0, 0, 0];
    let cut = Some((3, 4_500));
    let by_itself = run_cut(4, &starts, cut, false, 2);
    assert_all_agree(&by_itself);
    let asked_too = run_cut(4, &starts, cut, true, 2);
    assert_all_agree(&asked_too);
}

/// A member that restarts in the middle of the deal phase (it starts over,
/// having missed every deal and share) asks for them and completes.
#[test]
fn a_member_that_missed_the_deals_asks_for_them_and_completes() {
    let starts = [0, 0, 0, 0];
    let cut = Some((2, 1_200));
    let results = run_cut(4, &starts, cut, true, 2);
    for (i, r) in results.iter().enumerate() {
        assert!(matches!(r, Some(Ok(_))), "member {i}: {r:?}");
    }
}

/// A member that restarts long after the others agreed (its one attempt
/// ends alone, with its own deal only) asks every dealer; the certificate
/// comes with the first dealer's answer, before the other dealers' deals and
/// shares: it adopts the agreed keys once the last of them is in, within
/// its attempt (seed 730102 of the change-of-members campaign, where it
/// waited for a new certificate that never came and failed).
#[test]
fn a_member_that_restarts_after_the_agreement_adopts_once_the_asked_material_is_in() {
    let starts = [0, 0, 0, 25_000];
    let cut = Some((3, 28_200));
    let results = run_cut(4, &starts, cut, true, 1);
    assert_all_agree(&results);
}

/// A member answers a request with what the asker wants of it, and only
/// that: a member that holds every deal and share and waits for agreement
/// asks for the certificate alone. Answering every request with the deal
/// and shares too cost each dealer of `huge` (16,384 members) about 10,000
/// answers of 5,460 points each.
#[test]
fn a_request_is_answered_with_what_the_asker_wants() {
    let (results, mut members) = run_sessions(4, &[0, 0, 0, 0], None, false, 2);
    assert_all_agree(&results);
    let kinds = |wants: Wants, members: &mut [DkgSession<MinSig>], at: u64| -> Vec<&'static str> {
        let message = SessionMessage::Request { attempt: 0, wants };
        members[0]
            .handle(
                Time(at),
                SessionInput::Message {
                    from: NodeIndex(1),
                    message,
                },
            )
            .into_iter()
            .filter_map(|o| match o {
                SessionOutput::Effect(Effect::Send { to, message }) => {
                    assert_eq!(to, NodeIndex(1));
                    Some(message.kind())
                }
                _ => None,
            })
            .collect()
    };
    let gap = 1_000_000; // past the answer's rate limit (half a phase)
    let certificate = Wants {
        deal: false,
        shares: false,
        certificate: true,
    };
    assert_eq!(kinds(certificate, &mut members, gap), ["dkg-certificate"]);
    let material = Wants {
        deal: true,
        shares: true,
        certificate: false,
    };
    assert_eq!(
        kinds(material, &mut members, 2 * gap),
        ["dkg-broadcast", "dkg-shares"]
    );
    let everything = Wants {
        deal: true,
        shares: true,
        certificate: true,
    };
    assert_eq!(
        kinds(everything, &mut members, 3 * gap),
        ["dkg-broadcast", "dkg-shares", "dkg-certificate"]
    );
}

#[test]
fn honest_sessions_agree() {
    let results = run(4, &[0, 0, 0, 0]);
    let keys: Vec<_> = results
        .iter()
        .map(|r| r.clone().unwrap().unwrap().keys[0].group_key().to_bytes())
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(results[0].clone().unwrap().unwrap().session, [9; 32]);
}

/// A member that starts late sees the quorum form before it finalizes: it
/// must wait for its own result, not give up.
#[test]
fn a_late_member_still_completes_with_the_quorum() {
    let results = run(4, &[0, 0, 0, 400]);
    for (i, r) in results.iter().enumerate() {
        assert!(matches!(r, Some(Ok(_))), "member {i}: {r:?}");
    }
}

#[test]
fn attempts_have_distinct_sessions() {
    assert_ne!(attempt_session(&[1; 32], 0), attempt_session(&[1; 32], 1));
    assert_ne!(attempt_session(&[1; 32], 0), [1; 32]);
}

/// Member `me` of a run of `n` members (`f = (n - 1) / 3`, the first five
/// dealing when `hub`), started, with every member's consensus secret.
fn voter(n: u32, me: u32, hub: bool) -> (DkgSession<MinSig>, Vec<ConsensusSecretKey>) {
    let f = (n - 1) / 3;
    let config = DkgSettings {
        session: [9; 32],
        n,
        thresholds: vec![f + 1],
        dealers: if hub {
            [0, 1, 2, 3, 4].map(NodeIndex).to_vec()
        } else {
            Vec::new()
        },
        timing: DkgTiming::new(Duration::from_millis(1), 2),
        min_qualified: f + 1,
        max_faulty: f,
    }
    .build()
    .unwrap();
    let (secrets, keys) = crate::dkg::harness::member_keys(n, |i| [i as u8 + 1; 32]);
    let consensus: Vec<ConsensusSecretKey> = (1..=n)
        .map(|i| ConsensusSecretKey::from_bytes(&[i as u8; 32]).unwrap())
        .collect();
    let agreement = AgreementKeys::<MinSig>::of_secrets(&consensus);
    let mut s = DkgSession::<MinSig>::new(
        config,
        NodeIndex(me),
        [me as u8; 32],
        Memo::disabled(),
        secrets[me as usize].clone(),
        keys,
        agreement[me as usize].clone(),
    )
    .unwrap();
    s.handle(Time::ZERO, SessionInput::Start);
    (s, consensus)
}

/// A result some test votes for, and its id.
fn claimed() -> (Arc<Vec<NodeIndex>>, [u8; 32], [u8; 32]) {
    let qual = Arc::new(vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)]);
    let digest = [3; 32];
    let id = result_id(&qual, &digest);
    (qual, digest, id)
}

/// A certificate counts only as a valid multi-signature of `n - f` distinct
/// members on its result: too few signers, a bitmap over another `n`, a
/// signer named who did not sign, or a signature on another message change
/// nothing.
#[test]
fn only_a_valid_multisignature_certificate_counts_as_a_quorum() {
    let (n, f) = (7u32, 2u32);
    let (mut s, consensus) = voter(n, 6, true);
    let session = s.session();
    let (qual, digest, id) = claimed();
    let hashed = s.hashed_vote(&session, &id);
    let other = s.hashed_vote(&session, &[4; 32]);
    let sum = |signers: &[u32], hashed: &G1| {
        signers.iter().fold(G1::identity(), |acc, m| {
            acc.add(&consensus[*m as usize].sign_hashed::<MinSig>(hashed))
        })
    };
    let certificate = |named: &[u32], over: u32, signature: G1| SessionInput::Message {
        from: NodeIndex(0),
        message: SessionMessage::Certificate(Arc::new(ResultCertificate {
            attempt: 0,
            qual: qual.clone(),
            keys_digest: digest,
            signers: SignerBitmap::of(over, named.iter().map(|m| NodeIndex(*m))).unwrap(),
            signature: signature.to_bytes(),
        })),
    };
    let quorum = [0, 1, 2, 3, 4];
    assert_eq!(quorum.len() as u32, n - f);
    for bad in [
        certificate(&quorum[..4], n, sum(&quorum[..4], &hashed)),
        certificate(&quorum, n + 1, sum(&quorum, &hashed)),
        certificate(&quorum, n, sum(&quorum[..4], &hashed)),
        certificate(&quorum, n, sum(&quorum, &other)),
    ] {
        s.handle(Time::ZERO, bad);
        assert!(!s.is_agreed(&id));
    }
    s.handle(Time::ZERO, certificate(&quorum, n, sum(&quorum, &hashed)));
    assert!(s.is_agreed(&id));
}

/// Votes are checked as one sum once a result has `n - f` of them. Where
/// the sum fails, the invalid vote is found and dropped, its sender votes
/// no more in the attempt, and the quorum forms from the valid votes: the
/// certificate names exactly their senders.
#[test]
fn an_invalid_vote_is_dropped_and_the_valid_ones_make_the_quorum() {
    let n = 7u32;
    let (mut s, consensus) = voter(n, 0, false);
    let session = s.session();
    let (qual, digest, id) = claimed();
    let hashed = s.hashed_vote(&session, &id);
    let vote = |m: u32, hashed: &G1| SessionInput::Message {
        from: NodeIndex(m),
        message: SessionMessage::Result(SignedResult {
            attempt: 0,
            from: NodeIndex(m),
            qual: qual.clone(),
            keys_digest: digest,
            signature: consensus[m as usize]
                .sign_hashed::<MinSig>(hashed)
                .to_bytes(),
        }),
    };
    let wrong = s.hashed_vote(&session, &[4; 32]);
    // Five votes, a quorum, one of them (member 3's) on another message.
    for m in [1, 2, 4, 5] {
        s.handle(Time::ZERO, vote(m, &hashed));
    }
    s.handle(Time::ZERO, vote(3, &wrong));
    assert!(!s.is_agreed(&id));
    assert!(s.rejected.contains(&NodeIndex(3)));
    assert_eq!(s.tally[&id].count, 4);
    // Member 3's valid vote now counts for nothing; member 6's makes it.
    s.handle(Time::ZERO, vote(3, &hashed));
    assert!(!s.is_agreed(&id));
    s.handle(Time::ZERO, vote(6, &hashed));
    let (_, certificate) = s.agreed().unwrap();
    let signers: Vec<u32> = certificate.signers.signers().map(|m| m.0).collect();
    assert_eq!(signers, [1, 2, 4, 5, 6]);
    // A vote that is no point of the group is no vote either.
    let (mut s, _) = voter(n, 0, false);
    let mut garbage = vote(1, &hashed);
    if let SessionInput::Message {
        message: SessionMessage::Result(v),
        ..
    } = &mut garbage
    {
        v.signature = vec![0xff; 96];
    }
    s.handle(Time::ZERO, garbage);
    assert!(s.rejected.contains(&NodeIndex(1)) && s.votes.is_empty());
}

/// A certificate is a multi-signature and a bitmap: its size does not grow
/// with a signature per signer (it did: 68 bytes each, 830 KB at 16,384
/// members).
#[test]
fn a_certificate_is_one_point_and_a_bit_per_member() {
    let n = 16_384u32;
    let certificate = ResultCertificate {
        attempt: 0,
        qual: Arc::new((0..380).map(NodeIndex).collect()),
        keys_digest: [1; 32],
        signers: SignerBitmap::of(n, (0..n - n / 3).map(NodeIndex)).unwrap(),
        signature: G1::generator().to_bytes(),
    };
    let bytes = crate::wire::encode(&SessionMessage::Certificate(Arc::new(certificate))).unwrap();
    assert!(bytes.len() < 4 * 1024, "{} bytes", bytes.len());
}
