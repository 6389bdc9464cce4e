//! Table-driven step tests: one replica, one input, the expected outputs.

mod common;

use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Point, Scheme, Time};
use consensus::messages::{signed, CommitCertificate};
use consensus::{
    Block, CommitPath, Election, EvidenceKind, Input, Message, Output, Replica, ReplicaConfig,
    ReplicaKeys, Timer,
};
use std::sync::Arc;

type S = MinSig;

struct Step {
    desc: &'static str,
    input: Input<S>,
    expect: fn(&[Output<S>]) -> bool,
}

fn kinds(out: &[Output<S>]) -> Vec<String> {
    out.iter()
        .map(|o| match o {
            Output::Send { to, message } => format!("send {} to {}", message.kind(), to.0),
            Output::Broadcast(m) => format!("broadcast {}", m.kind()),
            Output::SetTimer { timer, .. } => format!("timer {timer:?}"),
            Output::Committed { .. } => "committed".into(),
            Output::Beacon { .. } => "beacon".into(),
            Output::Finalized(_) => "finalized".into(),
            Output::ViewChanged { .. } => "view-changed".into(),
            Output::Evidence(e) => format!("evidence {:?}", e.kind),
            Output::SyncFromStore { to, from_height } => {
                format!("sync {} from store from {from_height}", to.0)
            }
        })
        .collect()
}

fn has(out: &[Output<S>], pred: impl Fn(&Output<S>) -> bool) -> bool {
    out.iter().any(pred)
}

#[test]
fn single_replica_transitions() {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let outputs = common::dkg::<S>(&config, 77);
    let election = Election::draw(&config.genesis_seed, 1, 0, 4, 1);
    // A replica that is neither the primary nor the collector of (1, 0), if any.
    let me = (0..4u32)
        .map(NodeIndex)
        .find(|i| *i != election.primary && !election.collectors.contains(i))
        .unwrap_or(NodeIndex((election.primary.0 + 1) % 4));
    let keys = ReplicaKeys::from_dkg(&config, &outputs[me.0 as usize]).unwrap();
    let mut replica = Replica::<S>::new(config.clone(), keys, [1; 32], Memo::disabled());
    let primary = election.primary;
    let collector = election.collectors[0];
    let block = Arc::new(Block {
        height: 1,
        parent: [0; 32],
        previous_beacon: config.genesis_seed.to_vec(),
        transactions: vec![b"tx".to_vec()],
    });
    let other = Arc::new(Block {
        transactions: vec![b"other".to_vec()],
        ..(*block).clone()
    });
    let not_primary = (0..4u32)
        .map(NodeIndex)
        .find(|i| *i != primary && *i != me)
        .unwrap();
    // A valid fast-path certificate for `other`, made from everyone's sigma shares.
    let digest = other.digest();
    let msg = signed::fast_vote(1, 0, &digest);
    let shares: Vec<_> = outputs
        .iter()
        .map(|o| o.keys[2].secret_share.sign::<S>(&msg))
        .collect();
    let sigma_public = ReplicaKeys::from_dkg(&config, &outputs[0])
        .unwrap()
        .sigma
        .public;
    let signature = sigma_public
        .aggregate(&shares, beacon::InterpolationMethod::RootsOfUnity)
        .unwrap();
    let certificate = CommitCertificate {
        height: 1,
        view: 0,
        digest,
        path: CommitPath::Fast,
        signature,
    };

    let steps = vec![
        Step {
            desc: "start: arm the view-change timer",
            input: Input::Start,
            expect: |o| {
                has(o, |x| {
                    matches!(
                        x,
                        Output::SetTimer {
                            timer: Timer::ViewChange { height: 1, view: 0 },
                            ..
                        }
                    )
                })
            },
        },
        Step {
            desc: "pre-prepare from a replica that is not the primary: ignored",
            input: Input::Message {
                from: not_primary,
                message: Message::PrePrepare {
                    height: 1,
                    view: 0,
                    block: block.clone(),
                },
            },
            expect: |o| o.is_empty(),
        },
        Step {
            desc: "pre-prepare from the primary: one sign-share to the collector, kept for retransmission",
            input: Input::Message {
                from: primary,
                message: Message::PrePrepare {
                    height: 1,
                    view: 0,
                    block: block.clone(),
                },
            },
            expect: |o| {
                o.len() == 2
                    && has(o, |x| {
                        matches!(
                            x,
                            Output::Send {
                                message: Message::SignShare { .. },
                                ..
                            }
                        )
                    })
                    && has(o, |x| {
                        matches!(
                            x,
                            Output::SetTimer {
                                timer: Timer::Retransmit { height: 1, view: 0 },
                                ..
                            }
                        )
                    })
            },
        },
        Step {
            desc: "the same pre-prepare again: nothing",
            input: Input::Message {
                from: primary,
                message: Message::PrePrepare {
                    height: 1,
                    view: 0,
                    block: block.clone(),
                },
            },
            expect: |o| o.is_empty(),
        },
        Step {
            desc: "a second, different pre-prepare: evidence against the primary",
            input: Input::Message {
                from: primary,
                message: Message::PrePrepare {
                    height: 1,
                    view: 0,
                    block: other.clone(),
                },
            },
            expect: |o| {
                o.len() == 1
                    && has(
                        o,
                        |x| matches!(x, Output::Evidence(e) if e.kind == EvidenceKind::ConflictingProposals { view: 0 }),
                    )
            },
        },
        Step {
            desc: "an invalid beacon: evidence against its sender",
            input: Input::Message {
                from: collector,
                message: Message::Beacon {
                    round: 1,
                    signature: <S as Scheme>::Signature::generator(),
                },
            },
            expect: |o| {
                has(
                    o,
                    |x| matches!(x, Output::Evidence(e) if e.kind == EvidenceKind::InvalidProof { what: "beacon" }),
                )
            },
        },
        Step {
            desc: "a valid commit proof for a block never seen: ask the sender for it",
            input: Input::Message {
                from: collector,
                message: Message::CommitProof {
                    certificate: certificate.clone(),
                    beacon: None,
                },
            },
            expect: |o| {
                o.len() == 1
                    && has(o, |x| {
                        matches!(
                            x,
                            Output::Send {
                                message: Message::BlockRequest { height: 1, .. },
                                ..
                            }
                        )
                    })
            },
        },
        Step {
            desc: "the block arrives: committed (no beacon yet, so not finalized)",
            input: Input::Message {
                from: collector,
                message: Message::BlockResponse {
                    block: other.clone(),
                },
            },
            expect: |o| {
                has(o, |x| matches!(x, Output::Committed { .. }))
                    && !has(o, |x| matches!(x, Output::Finalized(_)))
            },
        },
        Step {
            desc: "a message two heights ahead: ask its sender to sync",
            input: Input::Message {
                from: not_primary,
                message: Message::Beacon {
                    round: 3,
                    signature: <S as Scheme>::Signature::generator(),
                },
            },
            expect: |o| {
                has(o, |x| {
                    matches!(
                        x,
                        Output::Send {
                            message: Message::SyncRequest { from_height: 1 },
                            ..
                        }
                    )
                })
            },
        },
        Step {
            desc: "view-change timer after a commit without beacon: re-armed, no view change",
            input: Input::Timer(Timer::ViewChange { height: 1, view: 0 }),
            expect: |o| {
                !has(o, |x| matches!(x, Output::ViewChanged { .. }))
                    && has(o, |x| matches!(x, Output::SetTimer { .. }))
            },
        },
    ];
    for (i, step) in steps.into_iter().enumerate() {
        let out = replica.handle(Time::from_millis(i as u64), step.input);
        assert!(
            (step.expect)(&out),
            "step {i} ({}): got {:?}",
            step.desc,
            kinds(&out)
        );
    }
}

#[test]
fn view_change_timer_without_commit_changes_view() {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let outputs = common::dkg::<S>(&config, 78);
    let keys = ReplicaKeys::from_dkg(&config, &outputs[2]).unwrap();
    let mut replica = Replica::<S>::new(config, keys, [2; 32], Memo::disabled());
    replica.handle(Time::ZERO, Input::Start);
    let out = replica.handle(
        Time::from_millis(5),
        Input::Timer(Timer::ViewChange { height: 1, view: 0 }),
    );
    assert!(
        has(&out, |x| matches!(
            x,
            Output::ViewChanged { height: 1, view: 1 }
        )),
        "{:?}",
        kinds(&out)
    );
    assert!(has(
        &out,
        |x| matches!(x, Output::Broadcast(Message::ViewChange(v)) if v.new_view == 1)
    ));
    assert!(has(&out, |x| matches!(
        x,
        Output::SetTimer {
            timer: Timer::ViewChange { height: 1, view: 1 },
            ..
        }
    )));
    // A stale timer does nothing.
    let out = replica.handle(
        Time::from_millis(6),
        Input::Timer(Timer::ViewChange { height: 1, view: 0 }),
    );
    assert!(out.is_empty());
}

#[test]
fn malformed_messages_decode_to_errors() {
    let block = Block {
        height: 1,
        parent: [0; 32],
        previous_beacon: vec![1; 32],
        transactions: vec![vec![7; 10]],
    };
    let m = Message::<S>::PrePrepare {
        height: 1,
        view: 0,
        block: Arc::new(block),
    };
    let bytes = m.encode().unwrap();
    assert!(Message::<S>::decode(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(Message::<S>::decode(&bytes[..cut]).is_err());
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(Message::<S>::decode(&trailing).is_err());
    let share = Message::<S>::Beacon {
        round: 1,
        signature: <S as Scheme>::Signature::generator(),
    }
    .encode()
    .unwrap();
    let mut bad = share.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(Message::<S>::decode(&bad).is_err());
    assert!(Message::<beacon::MinPk>::decode(&share).is_err());
}
