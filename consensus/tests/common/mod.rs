//! A deterministic in-memory message pump for protocol tests: seeded random
//! per-message delays, timers, Byzantine participants. (The simulator is the full
//! version of this; the pump stays small on purpose.)
#![allow(dead_code)]

use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::{NodeIndex, Point, Scheme, Time};
use consensus::{
    Behaviour, ByzantineReplica, CommitPath, CommittedEntry, Event as ReplicaEvent, Height, Input,
    Message, Output, Participant, Replica, ReplicaConfig, ReplicaKeys, SignedVotes, View,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

pub fn dkg<S: Scheme>(config: &ReplicaConfig, seed: u64) -> Vec<Arc<DkgOutput<S>>> {
    let outputs = consensus::corpus::honest_dkg(config, seed);
    assert_eq!(outputs.len(), config.n as usize, "the honest DKG completes");
    outputs
}

enum Event<S: Scheme> {
    Deliver {
        from: NodeIndex,
        to: NodeIndex,
        message: Message<S>,
    },
    Timer {
        who: NodeIndex,
        timer: consensus::Timer,
    },
}

pub struct Net<S: Scheme> {
    pub nodes: Vec<Box<dyn Participant<S>>>,
    pub config: ReplicaConfig,
    pub outputs: Vec<Arc<DkgOutput<S>>>,
    queue: BinaryHeap<Reverse<(Time, u64, usize)>>,
    events: BTreeMap<usize, Event<S>>,
    seq: u64,
    pub now: Time,
    rng: ChaCha20Rng,
    pub min_delay_us: u64,
    pub max_delay_us: u64,
    /// Per height: (replica, digest, path) of every commit.
    pub commits: BTreeMap<Height, Vec<(NodeIndex, [u8; 32], CommitPath)>>,
    pub beacons: BTreeMap<u64, Vec<(NodeIndex, Vec<u8>)>>,
    pub evidence: Vec<consensus::Evidence>,
    pub view_changes: u64,
    pub messages: u64,
    /// Every message an honest replica sent: (time, sender, kind, height).
    pub honest_sends: Vec<(Time, NodeIndex, &'static str, Option<Height>)>,
    /// Every beacon an honest replica learned: (time, replica, round).
    pub learned: Vec<(Time, NodeIndex, u64)>,
    /// Each replica's finalized entries, as a node's store keeps them.
    pub disks: Vec<Vec<Arc<CommittedEntry<S>>>>,
    /// Per honest replica, the height of its latest invalid-share evidence
    /// against each culprit: (reporter, culprit) -> height.
    pub convictions: BTreeMap<(u32, u32), Height>,
    /// Replicas cut off: what is delivered to them, and their timers, are lost.
    pub down: std::collections::BTreeSet<u32>,
    /// Each replica's last persisted record of what it signed.
    pub vote_disks: Vec<Vec<SignedVotes<S>>>,
    /// What each honest replica signed: (replica, height, view, kind) -> value.
    pub signed: BTreeMap<(u32, Height, View, &'static str), [u8; 32]>,
    /// Slots for which an honest replica signed two values.
    pub conflicting_votes: Vec<String>,
}

impl<S: Scheme> Net<S> {
    pub fn new(config: ReplicaConfig, seed: u64, byzantine: &[(u32, Behaviour)]) -> Self {
        let outputs = dkg::<S>(&config, seed);
        let n = config.n as usize;
        let disks = vec![Vec::new(); n];
        let memo = Memo::shared();
        let nodes = outputs
            .iter()
            .map(|o| {
                let keys = ReplicaKeys::from_dkg(&config, o).unwrap();
                let replica = Replica::new(
                    config.clone(),
                    keys.clone(),
                    [o.me.0 as u8; 32],
                    memo.clone(),
                );
                match byzantine.iter().find(|(i, _)| *i == o.me.0) {
                    Some((_, b)) => Box::new(ByzantineReplica::new(replica, keys, *b))
                        as Box<dyn Participant<S>>,
                    None => Box::new(replica) as Box<dyn Participant<S>>,
                }
            })
            .collect();
        Net {
            nodes,
            config,
            outputs,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            seq: 0,
            now: Time::ZERO,
            rng: ChaCha20Rng::seed_from_u64(seed ^ 0x5eed),
            min_delay_us: 1_000,
            max_delay_us: 10_000,
            commits: BTreeMap::new(),
            beacons: BTreeMap::new(),
            evidence: Vec::new(),
            view_changes: 0,
            disks,
            down: Default::default(),
            vote_disks: vec![Vec::new(); n],
            signed: BTreeMap::new(),
            conflicting_votes: Vec::new(),
            convictions: BTreeMap::new(),
            messages: 0,
            honest_sends: Vec::new(),
            learned: Vec::new(),
        }
    }

    fn push(&mut self, at: Time, event: Event<S>) {
        self.seq += 1;
        let id = self.seq as usize;
        self.events.insert(id, event);
        self.queue.push(Reverse((at, self.seq, id)));
    }

    fn delay(&mut self) -> u64 {
        self.min_delay_us + self.rng.next_u64() % (self.max_delay_us - self.min_delay_us + 1)
    }

    fn apply(&mut self, who: NodeIndex, outputs: Vec<Output<S>>) {
        let debug = std::env::var("PUMP_DEBUG").is_ok();
        let honest = self.nodes[who.0 as usize].is_honest();
        for o in outputs {
            if debug {
                let h = self.nodes[who.0 as usize].current_height();
                eprintln!("{} n{} h{}: {o}", self.now, who.0, h);
            }
            if honest {
                if let Some(message) = o.message() {
                    self.honest_sends
                        .push((self.now, who, message.kind(), message.height()));
                    self.check_signed(who, message);
                }
            }
            match o {
                Output::Effect(Effect::Send { to, message }) => {
                    let at = self.now.plus_micros(self.delay());
                    self.push(
                        at,
                        Event::Deliver {
                            from: who,
                            to,
                            message,
                        },
                    );
                }
                Output::Effect(Effect::Broadcast(message)) => {
                    for j in 0..self.config.n {
                        if j != who.0 {
                            let at = self.now.plus_micros(self.delay());
                            self.push(
                                at,
                                Event::Deliver {
                                    from: who,
                                    to: NodeIndex(j),
                                    message: message.clone(),
                                },
                            );
                        }
                    }
                }
                Output::Effect(Effect::SetTimer { at, timer }) => {
                    self.push(at, Event::Timer { who, timer })
                }
                Output::Event(ReplicaEvent::Committed { block, certificate }) => {
                    if honest {
                        self.commits.entry(block.height).or_default().push((
                            who,
                            certificate.digest,
                            certificate.path,
                        ));
                    }
                }
                Output::Event(ReplicaEvent::Beacon(beacon)) => {
                    if honest {
                        self.learned.push((self.now, who, beacon.round));
                        self.beacons
                            .entry(beacon.round)
                            .or_default()
                            .push((who, beacon.signature));
                    }
                }
                Output::Event(ReplicaEvent::Evidence(e)) => {
                    if honest {
                        if matches!(e.kind, consensus::EvidenceKind::InvalidShare { .. }) {
                            self.convictions.insert((who.0, e.culprit.0), e.height);
                        }
                        self.evidence.push(e)
                    }
                }
                Output::Event(ReplicaEvent::ViewChanged { .. }) => self.view_changes += 1,
                Output::Event(ReplicaEvent::Finalized(entry)) => {
                    self.disks[who.0 as usize].push(entry)
                }
                Output::PersistVotes(record) => self.vote_disks[who.0 as usize] = record,
                Output::SyncFromStore { to, from_height } => {
                    let disk = &self.disks[who.0 as usize];
                    let entries = consensus::replica::sync_response(from_height, |h| {
                        disk.get(usize::try_from(h.get()).ok()?.checked_sub(1)?)
                            .cloned()
                    });
                    if !entries.is_empty() {
                        let at = self.now.plus_micros(self.delay());
                        let message = Message::SyncResponse { entries };
                        let deliver = Event::Deliver {
                            from: who,
                            to,
                            message,
                        };
                        self.push(at, deliver);
                    }
                }
            }
        }
    }

    /// An honest replica never signs two values for one slot.
    fn check_signed(&mut self, who: NodeIndex, message: &Message<S>) {
        let Some((height, view, kind, digest)) = message.vote_slot() else {
            return;
        };
        if matches!(message, Message::ViewChange(vc) if vc.from != who) {
            return;
        }
        match self.signed.insert((who.0, height, view, kind), digest) {
            Some(d) if d != digest => self.conflicting_votes.push(format!(
                "replica {} signed two values for {kind} at height {height}, view {view}",
                who.0
            )),
            _ => {}
        }
    }

    /// Replaces replica `i` by an honest one resuming from its disk (chain and
    /// vote record), started now.
    pub fn restart_honest(&mut self, i: usize) {
        let votes = self.vote_disks[i].clone();
        self.restart_with_votes(i, votes);
    }

    /// Replaces replica `i` by an honest one resuming from its chain and the
    /// vote record `votes`, started now.
    pub fn restart_with_votes(&mut self, i: usize, votes: Vec<SignedVotes<S>>) {
        let keys = ReplicaKeys::from_dkg(&self.config, &self.outputs[i]).unwrap();
        let chain = consensus::replica::ChainWindow::resume(self.disks[i].clone()).unwrap();
        let replica = Replica::restore(
            self.config.clone(),
            keys,
            [i as u8 ^ 0x55; 32],
            Memo::shared(),
            chain,
            votes,
        );
        self.nodes[i] = Box::new(replica);
        let out = self.nodes[i].handle(self.now, Input::Start);
        self.apply(NodeIndex(i as u32), out);
    }

    pub fn start(&mut self) {
        for i in 0..self.nodes.len() {
            let out = self.nodes[i].handle(self.now, Input::Start);
            self.apply(NodeIndex(i as u32), out);
        }
    }

    /// Runs until every honest replica finalized `heights` or `deadline` passes.
    pub fn run_until(&mut self, heights: u64, deadline: Time) -> bool {
        loop {
            if self
                .nodes
                .iter()
                .filter(|n| n.is_honest() && !self.down.contains(&n.index().0))
                .all(|n| n.finalized().height() >= Height::new(heights))
            {
                return true;
            }
            let Some(Reverse((at, _, id))) = self.queue.pop() else {
                return false;
            };
            if at > deadline {
                return false;
            }
            self.now = at;
            let event = self.events.remove(&id).unwrap();
            let (who, input) = match event {
                Event::Deliver { from, to, message } => {
                    self.messages += 1;
                    (to, Input::Message { from, message })
                }
                Event::Timer { who, timer } => (who, Input::Timer(timer)),
            };
            if self.down.contains(&who.0) {
                continue;
            }
            let out = self.nodes[who.0 as usize].handle(self.now, input);
            self.apply(who, out);
        }
    }

    /// No two honest replicas committed different blocks at one height, and
    /// no honest replica signed two values for one slot.
    pub fn assert_agreement(&self) {
        assert!(
            self.conflicting_votes.is_empty(),
            "{:?}",
            self.conflicting_votes
        );
        for (h, commits) in &self.commits {
            let first = commits[0].1;
            assert!(
                commits.iter().all(|c| c.1 == first),
                "disagreement at height {h}: {commits:?}"
            );
        }
        for (h, beacons) in &self.beacons {
            assert!(
                beacons.iter().all(|b| b.1 == beacons[0].1),
                "two beacons at round {h}"
            );
        }
    }

    /// Every honest replica's chain verifies with drand's chained rules.
    pub fn assert_beacons_verify(&self) {
        let key = self.outputs[0].keys[0].group_key().to_bytes();
        let info = self.config.chain_info(key, S::ID);
        for node in self.nodes.iter().filter(|n| n.is_honest()) {
            let beacons: Vec<beacon::Beacon> = node
                .finalized()
                .iter()
                .scan(self.config.genesis_seed.to_vec(), |prev, e| {
                    let b = beacon::Beacon {
                        round: e.block.height.get(),
                        signature: e.beacon.to_bytes(),
                        previous_signature: prev.clone(),
                    };
                    *prev = b.signature.clone();
                    Some(b)
                })
                .collect();
            info.verify_chain(None, &beacons).unwrap();
        }
    }

    pub fn fast_commits(&self) -> usize {
        self.commits
            .values()
            .flatten()
            .filter(|c| c.2 == CommitPath::Fast)
            .count()
    }

    pub fn all_commits(&self) -> usize {
        self.commits.values().map(Vec::len).sum()
    }
}
