//! A deterministic in-memory message pump for protocol tests: seeded random
//! per-message delays, timers, Byzantine participants. (The simulator is the full
//! version of this; the pump stays small on purpose.)
#![allow(dead_code)]

use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::{ChainInfo, NodeIndex, Point, Scheme, Time};
use consensus::{
    Behaviour, ByzantineReplica, CommitPath, CommittedEntry, Input, Message, Output, Participant,
    Replica, ReplicaConfig, ReplicaKeys,
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
    pub commits: BTreeMap<u64, Vec<(NodeIndex, [u8; 32], CommitPath)>>,
    pub beacons: BTreeMap<u64, Vec<(NodeIndex, Vec<u8>)>>,
    pub evidence: Vec<consensus::Evidence>,
    pub view_changes: u64,
    pub messages: u64,
    /// Every message an honest replica sent: (time, sender, kind, height).
    pub honest_sends: Vec<(Time, NodeIndex, &'static str, Option<u64>)>,
    /// Every beacon an honest replica learned: (time, replica, round).
    pub learned: Vec<(Time, NodeIndex, u64)>,
    /// Each replica's finalized entries, as a node's store keeps them.
    pub disks: Vec<Vec<Arc<CommittedEntry<S>>>>,
    /// Per honest replica, the height of its latest invalid-share evidence
    /// against each culprit: (reporter, culprit) -> height.
    pub convictions: BTreeMap<(u32, u32), u64>,
    /// Replicas cut off: what is delivered to them, and their timers, are lost.
    pub down: std::collections::BTreeSet<u32>,
}

impl<S: Scheme> Net<S> {
    pub fn new(config: ReplicaConfig, seed: u64, byzantine: &[(u32, Behaviour)]) -> Self {
        let outputs = dkg::<S>(&config, seed);
        let disks = vec![Vec::new(); config.n as usize];
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
        for o in outputs {
            if debug {
                let h = self.nodes[who.0 as usize].current_height();
                match &o {
                    Output::Send { to, message } => eprintln!(
                        "{} n{} h{} -> n{} {} {:?}",
                        self.now,
                        who.0,
                        h,
                        to.0,
                        message.kind(),
                        message.height()
                    ),
                    Output::Broadcast(message) => eprintln!(
                        "{} n{} h{} -> all {} {:?}",
                        self.now,
                        who.0,
                        h,
                        message.kind(),
                        message.height()
                    ),
                    Output::SetTimer { timer, at } => {
                        eprintln!("{} n{} h{} timer {:?} at {}", self.now, who.0, h, timer, at)
                    }
                    Output::Committed { block, .. } => {
                        eprintln!("{} n{} committed {}", self.now, who.0, block.height)
                    }
                    Output::Beacon { beacon, .. } => {
                        eprintln!("{} n{} beacon {}", self.now, who.0, beacon.round)
                    }
                    Output::ViewChanged { height, view } => {
                        eprintln!("{} n{} view change h{} v{}", self.now, who.0, height, view)
                    }
                    _ => {}
                }
            }
            if self.nodes[who.0 as usize].is_honest() {
                if let Output::Send { message, .. } | Output::Broadcast(message) = &o {
                    self.honest_sends
                        .push((self.now, who, message.kind(), message.height()));
                }
            }
            match o {
                Output::Send { to, message } => {
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
                Output::Broadcast(message) => {
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
                Output::SetTimer { at, timer } => self.push(at, Event::Timer { who, timer }),
                Output::Committed {
                    block, certificate, ..
                } => {
                    if self.nodes[who.0 as usize].is_honest() {
                        self.commits.entry(block.height).or_default().push((
                            who,
                            certificate.digest,
                            certificate.path,
                        ));
                    }
                }
                Output::Beacon { beacon, .. } => {
                    if self.nodes[who.0 as usize].is_honest() {
                        self.learned.push((self.now, who, beacon.round));
                        self.beacons
                            .entry(beacon.round)
                            .or_default()
                            .push((who, beacon.signature));
                    }
                }
                Output::Evidence(e) => {
                    if self.nodes[who.0 as usize].is_honest() {
                        if matches!(e.kind, consensus::EvidenceKind::InvalidShare { .. }) {
                            self.convictions.insert((who.0, e.culprit.0), e.height);
                        }
                        self.evidence.push(e)
                    }
                }
                Output::ViewChanged { .. } => self.view_changes += 1,
                Output::Finalized(entry) => self.disks[who.0 as usize].push(entry),
                Output::SyncFromStore { to, from_height } => {
                    let disk = &self.disks[who.0 as usize];
                    let entries = consensus::replica::sync_response(from_height, |h| {
                        disk.get(h as usize - 1).cloned()
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

    /// Replaces replica `i` by an honest one resuming from its disk, started now.
    pub fn restart_honest(&mut self, i: usize) {
        let keys = ReplicaKeys::from_dkg(&self.config, &self.outputs[i]).unwrap();
        let chain = consensus::replica::ChainWindow::resume(self.disks[i].clone()).unwrap();
        let replica = Replica::restore(
            self.config.clone(),
            keys,
            [i as u8 ^ 0x55; 32],
            Memo::shared(),
            chain,
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
                .all(|n| n.finalized().height() >= heights)
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

    /// No two honest replicas committed different blocks at one height.
    pub fn assert_agreement(&self) {
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
        let info = ChainInfo {
            public_key: key,
            period: 0,
            genesis_time: 0,
            genesis_seed: self.config.genesis_seed.to_vec(),
            scheme: S::ID,
            beacon_id: "default".into(),
        };
        for node in self.nodes.iter().filter(|n| n.is_honest()) {
            let beacons: Vec<beacon::Beacon> = node
                .finalized()
                .iter()
                .scan(self.config.genesis_seed.to_vec(), |prev, e| {
                    let b = beacon::Beacon {
                        round: e.block.height,
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
