//! Arbitrary sequences of messages and timers for one member: genuine messages
//! (from `consensus::corpus`) moved to fuzzed heights, views and senders, raw
//! fuzzed envelopes, and fuzzed timers. Nothing may panic, and the member never
//! commits two blocks at one height.
#![no_main]
use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Time};
use consensus::corpus::{genuine_messages, honest_dkg, relabel};
use consensus::{
    Envelope, Event, Height, Member, MemberInput, MemberOutput, MemberTimer, Message,
    ReplicaConfig, Timer, View,
};
use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

type S = MinSig;

struct Fixture {
    config: ReplicaConfig,
    outputs: Vec<Arc<DkgOutput<S>>>,
    messages: Vec<(NodeIndex, Message<S>)>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let config = ReplicaConfig::new(4, 0).unwrap();
        let outputs = honest_dkg(&config, 7);
        let messages = genuine_messages(&config, &outputs, Height::new(4));
        Fixture {
            config,
            outputs,
            messages,
        }
    })
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    for (i, x) in data.iter().skip(at).take(8).enumerate() {
        b[i] = *x;
    }
    u64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&me, mut rest)) = data.split_first() else {
        return;
    };
    let me = (me % 4) as usize;
    // Member i's consensus key derives from [i; 32], as in
    // `genuine_messages`.
    let seeds: Vec<[u8; 32]> = (0..4u8).map(|i| [i; 32]).collect();
    let directory = consensus::epoch::Directory::derived::<S>(&seeds);
    let Ok(mut member) = Member::<S>::restore(
        f.config.clone(),
        &directory,
        consensus::RestoredParts {
            output: &f.outputs[me],
            consensus: consensus::consensus_key(&seeds[me]),
            chain: Vec::new(),
            votes: Vec::new(),
            seed: [me as u8; 32],
            memo: Memo::disabled(),
            adversary: None,
        },
    ) else {
        return;
    };
    let mut now = Time::ZERO;
    let mut committed: BTreeMap<Height, [u8; 32]> = BTreeMap::new();
    let mut check = |out: Vec<MemberOutput<S>>| {
        for o in out {
            if let MemberOutput::Event(Event::Committed { certificate, .. }) = o {
                let d = committed
                    .entry(certificate.height)
                    .or_insert(certificate.digest);
                assert_eq!(*d, certificate.digest);
            }
        }
    };
    check(member.handle(now, MemberInput::Start));
    while rest.len() >= 18 {
        let (op, tail) = rest.split_at(18);
        rest = tail;
        let (a, b) = (u64_at(op, 2), u64_at(op, 10));
        let input = match op[0] % 5 {
            0 => {
                let (sender, m) = &f.messages[a as usize % f.messages.len()];
                let from = if op[1] < 200 {
                    NodeIndex(u32::from(op[1] % 4))
                } else {
                    *sender
                };
                MemberInput::Message {
                    from,
                    envelope: Envelope::Consensus(m.clone()),
                }
            }
            1 => {
                let (sender, m) = &f.messages[usize::from(op[1]) % f.messages.len()];
                MemberInput::Message {
                    from: *sender,
                    envelope: Envelope::Consensus(relabel(m, Height::new(a % 8), View::new(b))),
                }
            }
            2 => {
                // A raw envelope of the next `a % 512` bytes.
                let len = (a as usize % 512).min(rest.len());
                let (raw, tail) = rest.split_at(len);
                rest = tail;
                match Envelope::<S>::decode(raw) {
                    Ok(envelope) => MemberInput::Message {
                        from: NodeIndex(u32::from(op[1])),
                        envelope,
                    },
                    Err(_) => continue,
                }
            }
            3 => {
                let (height, view) = (Height::new(a), View::new(b));
                let timer = match op[1] % 5 {
                    0 => Timer::FastPath { height, view },
                    1 => Timer::ViewChange { height, view },
                    2 => Timer::Retransmit { height, view },
                    3 => Timer::BackupCollector { height, view },
                    _ => Timer::Release { height },
                };
                MemberInput::Timer(MemberTimer::Replica { epoch: 0, timer })
            }
            _ => {
                now = now.plus_micros(a % 2_000_000);
                continue;
            }
        };
        check(member.handle(now, input));
    }
});
