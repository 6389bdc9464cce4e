//! Fuzzing of message sequences (property test; the `member_sequence` fuzz
//! target does the same with libFuzzer): genuine messages, moved to arbitrary
//! heights, views and senders, and arbitrary timers, fed to a `Member` in any
//! order. It must never panic and never commit two blocks at one height.

mod common;

use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Time};
use consensus::corpus::{genuine_messages, relabel};
use consensus::{
    Envelope, Epoch, Event, Height, Member, MemberInput, MemberOutput, MemberTimer, Message,
    ReplicaConfig, Timer, View,
};
use proptest::prelude::*;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

type S = MinSig;

struct Fixture {
    config: ReplicaConfig,
    outputs: Vec<Arc<beacon::dkg::DkgOutput<S>>>,
    messages: Vec<(NodeIndex, Message<S>)>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let config = ReplicaConfig::new(4, 0).unwrap();
        let outputs = common::dkg::<S>(&config, 41);
        let messages = genuine_messages(&config, &outputs, Height::new(4));
        Fixture {
            config,
            outputs,
            messages,
        }
    })
}

#[derive(Clone, Debug)]
enum Op {
    /// Genuine message `index`, as is or moved to (height, view), from `from`.
    Message {
        index: usize,
        relabel: Option<(u64, u64)>,
        from: u32,
    },
    Timer(u8, u64, u64),
    Tick(u64),
}

fn number() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..6, Just(u64::MAX), Just(u64::MAX - 1), any::<u64>()]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<usize>(), proptest::option::of((number(), number())), prop_oneof![0u32..4, any::<u32>()])
            .prop_map(|(index, relabel, from)| Op::Message { index, relabel, from }),
        2 => (0u8..5, number(), number()).prop_map(|(k, h, v)| Op::Timer(k, h, v)),
        1 => (0u64..2_000_000).prop_map(Op::Tick),
    ]
}

fn timer(kind: u8, height: u64, view: u64) -> Timer {
    let (height, view) = (Height::new(height), View::new(view));
    match kind {
        0 => Timer::FastPath { height, view },
        1 => Timer::ViewChange { height, view },
        2 => Timer::Retransmit { height, view },
        3 => Timer::BackupCollector { height, view },
        _ => Timer::Release { height },
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn arbitrary_sequences_never_panic_or_fork(me in 0u32..4, ops in proptest::collection::vec(op(), 1..80)) {
        let f = fixture();
        let mut member = Member::<S>::restore(f.config.clone(), &common::directory::<S>(f.config.n as usize), consensus::RestoredParts { output: &f.outputs[me as usize], consensus: consensus::consensus_key(&[me as u8; 32]), chain: Vec::new(), votes: Vec::new(), seed: [me as u8; 32], memo: Memo::disabled(), adversary: None })
        .unwrap();
        let mut now = Time::ZERO;
        let mut committed: BTreeMap<Height, [u8; 32]> = BTreeMap::new();
        let mut check = |out: Vec<MemberOutput<S>>| {
            for o in out {
                if let MemberOutput::Event(Event::Committed { certificate, .. }) = o {
                    let d = committed.entry(certificate.height).or_insert(certificate.digest);
                    assert_eq!(*d, certificate.digest, "two commits at height {}", certificate.height);
                }
            }
        };
        check(member.handle(now, MemberInput::Start));
        for op in ops {
            let input = match op {
                Op::Message { index, relabel: r, from } => {
                    let (sender, m) = &f.messages[index % f.messages.len()];
                    let message = match r {
                        Some((h, v)) => relabel(m, Height::new(h), View::new(v)),
                        None => m.clone(),
                    };
                    let from = if from < 4 { NodeIndex(from) } else { *sender };
                    MemberInput::Message { from, envelope: Envelope::Consensus(message) }
                }
                Op::Timer(k, h, v) => MemberInput::Timer(MemberTimer::Replica { epoch: Epoch::ZERO, timer: timer(k, h, v) }),
                Op::Tick(us) => {
                    now = now.plus_micros(us);
                    continue;
                }
            };
            check(member.handle(now, input));
        }
    }
}

#[test]
fn the_corpus_has_every_consensus_message_kind() {
    let f = fixture();
    let kinds: std::collections::BTreeSet<&str> =
        f.messages.iter().map(|(_, m)| m.kind()).collect();
    for k in [
        "pre-prepare",
        "sign-share",
        "commit-proof",
        "beacon",
        "view-change",
        "new-view",
    ] {
        assert!(kinds.contains(k), "no {k} in {kinds:?}");
    }
}
