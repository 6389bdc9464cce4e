//! Honest runs for tests and fuzzers, in memory:
//!
//! - [`honest_dkg`]: the key material of an all-honest DKG, to start replicas
//!   from;
//! - [`MemberNet`] and [`run_genesis_dkg`]: genesis [`Member`]s running their
//!   DKG with each other over a FIFO network (the one such loop, for the
//!   member's step tables and the disk contract of both drivers);
//! - [`genuine_messages`] and [`relabel`]: genuine protocol messages for
//!   fuzzing message sequences: a few heights of an all-honest network, run
//!   over a zero-delay FIFO with one forced view change, so that every message
//!   kind appears with valid signatures. Fuzzers and property tests mutate
//!   these (views, heights, senders) and feed them to a [`Member`] in
//!   arbitrary order with arbitrary timers; the replica must never panic and
//!   never commit two blocks at one height.

use crate::config::ReplicaConfig;
use crate::keys::{EpochKeys, ReplicaKeys};
use crate::messages::Message;
use crate::replica::{Input, Output, Replica, Timer};
use crate::{Height, Member, MemberInput, MemberOutput, MemberTimer, View};
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

/// The in-memory network of a genesis DKG among members `0..n`: what one
/// member's outputs send is delivered in order (FIFO, at once), a broadcast
/// to each other member, and the earliest timer fires when nothing is in
/// flight. The caller owns the members: it takes the next input
/// ([`MemberNet::next_input`]), hands it to its member at
/// [`MemberNet::now`], and gives the outputs back ([`MemberNet::route`]).
/// [`run_genesis_dkg`] is that loop; a test that takes members down or
/// brings them back drives it itself.
pub struct MemberNet<S: Scheme> {
    n: u32,
    queue: VecDeque<(u32, MemberInput<S>)>,
    timers: EventQueue<(u32, MemberTimer)>,
    now: Time,
}

impl<S: Scheme> MemberNet<S> {
    /// A network of `n` members at time zero, each of `started` with a
    /// [`MemberInput::Start`] queued.
    pub fn new(n: u32, started: impl IntoIterator<Item = u32>) -> Self {
        MemberNet {
            n,
            queue: started
                .into_iter()
                .map(|i| (i, MemberInput::Start))
                .collect(),
            timers: EventQueue::new(),
            now: Time::ZERO,
        }
    }

    /// The network's time: that of the last timer fired.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Queues a [`MemberInput::Start`] for member `i` (one that comes back).
    pub fn start(&mut self, i: u32) {
        self.queue.push_back((i, MemberInput::Start));
    }

    /// The next input and the member it is for: the first message in
    /// flight, else the earliest timer (time moves on to it); `None` when
    /// nothing is left.
    pub fn next_input(&mut self) -> Option<(u32, MemberInput<S>)> {
        if let Some(next) = self.queue.pop_front() {
            return Some(next);
        }
        let (at, (to, timer)) = self.timers.pop()?;
        self.now = self.now.max(at);
        Some((to, MemberInput::Timer(timer)))
    }

    /// Moves time on to `at` if nothing is in flight and no timer fires
    /// before it (a member due back then); whether it did.
    pub fn idle_until(&mut self, at: Time) -> bool {
        let idle = self.queue.is_empty() && self.timers.next_time().is_none_or(|t| at < t);
        if idle {
            self.now = self.now.max(at);
        }
        idle
    }

    /// Carries member `from`'s outputs: its sends to members and broadcasts
    /// onto the network, its timers into the queue; the rest is the
    /// caller's to look at before.
    pub fn route(&mut self, from: u32, outputs: Vec<MemberOutput<S>>) {
        let message = |envelope| MemberInput::Message {
            from: NodeIndex(from),
            envelope,
        };
        for o in outputs {
            match o {
                MemberOutput::Effect(Effect::Send {
                    to: NodeIndex(to),
                    message: envelope,
                }) if to < self.n => self.queue.push_back((to, message(envelope))),
                MemberOutput::Effect(Effect::Broadcast(envelope)) => {
                    for to in (0..self.n).filter(|to| *to != from) {
                        self.queue.push_back((to, message(envelope.clone())));
                    }
                }
                MemberOutput::Effect(Effect::SetTimer { at, timer }) => {
                    self.timers.push(at, (from, timer))
                }
                _ => {}
            }
        }
    }
}

/// Runs the genesis DKG of `members` (member `i` at index `i`) over a
/// [`MemberNet`], every member started at time zero, until member `watched`
/// completes it ([`MemberOutput::DkgComplete`]): returns the outputs of the
/// input that completed it (not routed), or `None` if the network runs out
/// of inputs first. The members keep their state, so that a test goes on
/// from there.
pub fn run_genesis_dkg<S: Scheme>(
    members: &mut [Member<S>],
    watched: u32,
) -> Option<Vec<MemberOutput<S>>> {
    let n = u32::try_from(members.len()).ok()?;
    let mut net = MemberNet::new(n, 0..n);
    loop {
        let (to, input) = net.next_input()?;
        let out = members.get_mut(to as usize)?.handle(net.now(), input);
        let completed = out
            .iter()
            .any(|o| matches!(o, MemberOutput::DkgComplete(_)));
        if to == watched && completed {
            return Some(out);
        }
        net.route(to, out);
    }
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
