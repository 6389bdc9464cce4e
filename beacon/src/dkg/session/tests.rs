//! Sessions over an in-memory network: agreement, late members, distinct attempts.

use super::*;
use crate::schedule::EventQueue;
use crate::scheme::MinSig;

/// Runs `n` honest sessions with zero latency; member `i` starts at
/// `starts[i]`. Returns each member's last terminal action.
fn run(n: u32, starts: &[u64]) -> Vec<Option<Result<Arc<DkgOutput<MinSig>>, String>>> {
    let f = (n - 1) / 3;
    let config = DkgSettings {
        session: [9; 32],
        n,
        thresholds: vec![f + 1],
        dealers: Vec::new(),
        phase_timeout_us: 1_000,
        min_qualified: f + 1,
        max_faulty: f,
        max_attempts: 2,
    }
    .build()
    .unwrap();
    let (secrets, keys) = crate::dkg::harness::member_keys(n, |i| [i as u8 + 1; 32]);
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
            )
            .unwrap()
        })
        .collect();
    let mut results = vec![None; n as usize];
    let mut timers: EventQueue<(u32, SessionInput)> = EventQueue::new();
    for (i, at) in starts.iter().enumerate() {
        timers.push(Time(*at), (i as u32, SessionInput::Start));
    }
    let mut now = Time::ZERO;
    let mut queue: std::collections::VecDeque<(u32, SessionInput)> = Default::default();
    loop {
        while let Some((who, input)) = queue.pop_front() {
            for action in members[who as usize].handle(now, input) {
                match action {
                    SessionAction::Send { to, message } => queue.push_back((
                        to.0,
                        SessionInput::Message {
                            from: NodeIndex(who),
                            message,
                        },
                    )),
                    SessionAction::Broadcast(message) => {
                        for j in (0..n).filter(|j| *j != who) {
                            queue.push_back((
                                j,
                                SessionInput::Message {
                                    from: NodeIndex(who),
                                    message: message.clone(),
                                },
                            ));
                        }
                    }
                    SessionAction::SetTimer { at, timer } => {
                        timers.push(at, (who, SessionInput::Timer(timer)))
                    }
                    SessionAction::Complete(out) => results[who as usize] = Some(Ok(out)),
                    SessionAction::Failed(e) => results[who as usize] = Some(Err(e)),
                }
            }
        }
        let Some((at, (who, input))) = timers.pop() else {
            break;
        };
        now = at;
        queue.push_back((who, input));
    }
    results
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

/// A certificate counts only with `n - f` valid signatures of distinct
/// members on its result: short, forged or repeated ones change nothing.
#[test]
fn only_a_full_valid_certificate_counts_as_a_quorum() {
    let (n, f) = (7u32, 2u32);
    let config = DkgSettings {
        session: [9; 32],
        n,
        thresholds: vec![f + 1],
        dealers: [0, 1, 2, 3, 4].map(NodeIndex).to_vec(),
        phase_timeout_us: 1_000,
        min_qualified: 3,
        max_faulty: f,
        max_attempts: 2,
    }
    .build()
    .unwrap();
    let (secrets, keys) = crate::dkg::harness::member_keys(n, |i| [i as u8 + 1; 32]);
    let mut s = DkgSession::<MinSig>::new(
        config,
        NodeIndex(6),
        [6; 32],
        Memo::disabled(),
        secrets[6].clone(),
        keys,
    )
    .unwrap();
    s.handle(Time::ZERO, SessionInput::Start);
    let session = s.session();
    let qual = Arc::new(vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)]);
    let digest = [3; 32];
    let id = result_id(&qual, &digest);
    let sign = |m: u32| {
        use ed25519_dalek::Signer as _;
        let bytes = result_bytes(&session, NodeIndex(m), &id);
        (
            NodeIndex(m),
            secrets[m as usize].sign(&bytes).to_bytes().to_vec(),
        )
    };
    let certificate = |votes: Vec<(NodeIndex, Vec<u8>)>| SessionInput::Message {
        from: NodeIndex(0),
        message: SessionMessage::Certificate(Arc::new(ResultCertificate {
            attempt: 0,
            qual: qual.clone(),
            keys_digest: digest,
            votes,
        })),
    };
    let valid: Vec<_> = (0..5).map(sign).collect();
    let mut forged = valid.clone();
    forged[2].1[0] ^= 1;
    let mut repeated = valid.clone();
    repeated[4] = valid[3].clone();
    for bad in [valid[..4].to_vec(), forged, repeated] {
        s.handle(Time::ZERO, certificate(bad));
        assert_eq!(s.tally.get(&id), None);
    }
    s.handle(Time::ZERO, certificate(valid));
    assert_eq!(s.tally.get(&id), Some(&5));
}
