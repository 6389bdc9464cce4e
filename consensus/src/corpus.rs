//! Genuine protocol messages for fuzzing message sequences: a few heights of an
//! all-honest network, run over a zero-delay FIFO with one forced view change,
//! so that every message kind appears with valid signatures. Fuzzers and
//! property tests mutate these (views, heights, senders) and feed them to a
//! [`crate::Member`] in arbitrary order with arbitrary timers; the replica must
//! never panic and never commit two blocks at one height.

use crate::config::ReplicaConfig;
use crate::keys::{EpochKeys, ReplicaKeys};
use crate::messages::Message;
use crate::replica::{Input, Output, Replica, Timer};
use crate::{Height, View};
use beacon::dkg::{harness, DkgOutput, DkgSettings, DkgTiming};
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::multisig::ConsensusSecretKey;
use beacon::schedule::EventQueue;
use beacon::{NodeIndex, Scheme, Time};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// Key material of an all-honest DKG for `config`, run in memory (seeded):
/// what protocol tests and fuzzers start replicas from.
pub fn honest_dkg<S: Scheme>(config: &ReplicaConfig, seed: u64) -> Vec<Arc<DkgOutput<S>>> {
    let dkg = DkgSettings {
        session: [seed as u8; 32],
        n: config.n,
        thresholds: config.dkg_thresholds(),
        dealers: Vec::new(),
        timing: DkgTiming::new(Duration::from_millis(1), 1),
        min_qualified: 1,
        max_faulty: 0,
    }
    .build();
    let memo = Memo::shared();
    let Ok(dkg) = dkg else {
        return Vec::new();
    };
    let Ok(dealers) = harness::honest(&dkg, seed, &memo) else {
        return Vec::new();
    };
    harness::run::<S, _>(dealers, seed, &harness::Disturbances::default())
        .results
        .into_iter()
        .filter_map(|r| r.and_then(Result::ok))
        .collect()
}

/// Every message delivered while `outputs.len()` honest replicas finalize
/// `heights` heights, with a view change forced at height 2: (sender, message).
pub fn genuine_messages<S: Scheme>(
    config: &ReplicaConfig,
    outputs: &[Arc<DkgOutput<S>>],
    heights: Height,
) -> Vec<(NodeIndex, Message<S>)> {
    let memo = Memo::disabled();
    let secrets: Vec<ConsensusSecretKey> = (0..outputs.len())
        .map(|i| crate::consensus_key(&[i as u8; 32]))
        .collect();
    let epoch = Arc::new(EpochKeys::of_secrets(crate::Epoch::ZERO, &secrets));
    let mut replicas: Vec<Replica<S>> = outputs
        .iter()
        .filter_map(|o| {
            let secret = secrets.get(o.me.0 as usize)?.clone();
            let keys = ReplicaKeys::from_dkg(config, o, secret, epoch.clone()).ok()?;
            Replica::new(config.clone(), keys, [o.me.0 as u8; 32], memo.clone()).ok()
        })
        .collect();
    let mut queue: VecDeque<(NodeIndex, NodeIndex, Message<S>)> = VecDeque::new();
    let mut timers: EventQueue<(NodeIndex, Timer)> = EventQueue::new();
    let mut seen = Vec::new();
    let mut now = Time::ZERO;
    let n = replicas.len() as u32;
    let push = |who: NodeIndex,
                out: Vec<Output<S>>,
                queue: &mut VecDeque<_>,
                timers: &mut EventQueue<_>| {
        for o in out {
            match o {
                Output::Effect(Effect::Send { to, message }) => queue.push_back((who, to, message)),
                Output::Effect(Effect::Broadcast(message)) => {
                    for j in (0..n).filter(|j| *j != who.0) {
                        queue.push_back((who, NodeIndex(j), message.clone()));
                    }
                }
                Output::Effect(Effect::SetTimer { at, timer }) => timers.push(at, (who, timer)),
                Output::SyncFromStore { .. } | Output::PersistVotes(_) | Output::Event(_) => {}
            }
        }
    };
    for r in replicas.iter_mut() {
        let out = r.handle(now, Input::Start);
        push(r.me(), out, &mut queue, &mut timers);
    }
    let mut forced = false;
    for _ in 0..100_000 {
        if replicas.iter().all(|r| r.chain().height() >= heights) {
            break;
        }
        // Once everyone is at height 2: a view change, as if view 0 timed out.
        if !forced && replicas.iter().all(|r| r.height() == Height::new(2)) {
            forced = true;
            for r in replicas.iter_mut() {
                let timer = Timer::ViewChange {
                    height: Height::new(2),
                    view: r.view(),
                };
                let out = r.handle(now, Input::Timer(timer));
                push(r.me(), out, &mut queue, &mut timers);
            }
        }
        if let Some((from, to, message)) = queue.pop_front() {
            seen.push((from, message.clone()));
            let Some(r) = replicas.get_mut(to.0 as usize) else {
                continue;
            };
            let out = r.handle(now, Input::Message { from, message });
            push(to, out, &mut queue, &mut timers);
            continue;
        }
        // Quiet: fire the earliest timer.
        let Some((at, (who, timer))) = timers.pop() else {
            break;
        };
        now = now.max(at);
        let out = replicas[who.0 as usize].handle(now, Input::Timer(timer));
        push(who, out, &mut queue, &mut timers);
    }
    seen
}

/// A copy of `message` moved to another height and view (where it has them):
/// what a fuzzer does to genuine messages.
pub fn relabel<S: Scheme>(message: &Message<S>, height: Height, view: View) -> Message<S> {
    let mut m = message.clone();
    match &mut m {
        Message::PrePrepare {
            height: h, view: v, ..
        }
        | Message::SignShare {
            height: h, view: v, ..
        }
        | Message::CommitShare {
            height: h, view: v, ..
        }
        | Message::NewView {
            height: h, view: v, ..
        } => {
            *h = height;
            *v = view;
        }
        Message::Prepare {
            height: h,
            certificate,
        } => {
            *h = height;
            certificate.view = view;
        }
        Message::CommitProof { certificate, .. } => {
            certificate.height = height;
            certificate.view = view;
        }
        Message::Beacon { round, .. } | Message::BeaconShare { round, .. } => *round = height,
        Message::ViewChange(vc) => {
            let vc = Arc::make_mut(vc);
            vc.height = height;
            vc.new_view = view;
        }
        Message::BlockRequest { height: h, .. } => *h = height,
        Message::SyncRequest { from_height } => *from_height = height,
        Message::BlockResponse { .. } | Message::SyncResponse { .. } => {}
    }
    m
}
