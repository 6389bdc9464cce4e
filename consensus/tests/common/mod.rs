//! A deterministic in-memory message pump for protocol tests: seeded random
//! per-message delays, timers, Byzantine members. It drives `Member`s (restored
//! from a precomputed honest DKG, Byzantine ones with their behaviour) through
//! the path the simulator and the node use, with their event queue
//! (`beacon::schedule`) and observer interface (`consensus::observe`). The
//! simulator is the full version of this; the pump stays small on purpose.
#![allow(dead_code)]

use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::schedule::EventQueue;
use beacon::{Beacon, NodeIndex, Point, Scheme, Time};
use consensus::observe::{dispatch, Observer};
use consensus::replica::{ChainWindow, Evidence};
use consensus::{
    Behaviour, Block, CommitCertificate, CommitPath, CommittedEntry, Envelope, Height, Member,
    MemberInput, MemberOutput, MemberTimer, Message, Participant, ReplicaConfig, SignedVotes, View,
};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The defaults for `n` replicas with `c` extra collectors, with timeouts short
/// enough for hand-scheduled networks (30 ms fast path, 300 ms view change,
/// 40 ms backup collector).
pub fn fast_config(n: u32, c: u32) -> ReplicaConfig {
    ReplicaConfig::new(n, c)
        .unwrap()
        .with(|s| {
            s.fast_path_timeout_us = 30_000;
            s.view_change_timeout_us = 300_000;
            s.backup_collector_delay_us = 40_000;
        })
        .unwrap()
}

pub fn dkg<S: Scheme>(config: &ReplicaConfig, seed: u64) -> Vec<Arc<DkgOutput<S>>> {
    let outputs = consensus::corpus::honest_dkg(config, seed);
    assert_eq!(outputs.len(), config.n as usize, "the honest DKG completes");
    outputs
}

enum Event<S: Scheme> {
    Deliver {
        from: NodeIndex,
        to: NodeIndex,
        envelope: Envelope<S>,
    },
    Timer {
        who: NodeIndex,
        timer: MemberTimer,
    },
}

/// What the pump saw of its members' events: the test pump's observer.
pub struct Record<S: Scheme> {
    /// Whether each member is honest now (a restarted one is).
    pub honest: Vec<bool>,
    /// Per height: (member, digest, path) of every honest commit.
    pub commits: BTreeMap<Height, Vec<(NodeIndex, [u8; 32], CommitPath)>>,
    /// Per round: (member, signature) of every beacon an honest member learned.
    pub beacons: BTreeMap<u64, Vec<(NodeIndex, Vec<u8>)>>,
    /// Evidence reported by honest members.
    pub evidence: Vec<Evidence>,
    /// Views entered by any member.
    pub view_changes: u64,
    /// Every beacon an honest member learned: (time, member, round).
    pub learned: Vec<(Time, NodeIndex, u64)>,
    /// Each member's finalized entries, as a node's store keeps them.
    pub disks: Vec<Vec<Arc<CommittedEntry<S>>>>,
    /// Per honest member, the height of its latest invalid-share evidence
    /// against each culprit: (reporter, culprit) -> height.
    pub convictions: BTreeMap<(u32, u32), Height>,
}

impl<S: Scheme> Record<S> {
    fn honest(&self, node: NodeIndex) -> bool {
        self.honest[node.0 as usize]
    }
}

impl<S: Scheme> Observer<S> for Record<S> {
    fn committed(
        &mut self,
        node: NodeIndex,
        _: Time,
        block: &Arc<Block>,
        certificate: &CommitCertificate<S>,
    ) {
        if self.honest(node) {
            let commit = (node, certificate.digest, certificate.path);
            self.commits.entry(block.height).or_default().push(commit);
        }
    }

    fn beacon(&mut self, node: NodeIndex, at: Time, beacon: &Beacon) {
        if self.honest(node) {
            self.learned.push((at, node, beacon.round));
            let signature = (node, beacon.signature.clone());
            self.beacons
                .entry(beacon.round)
                .or_default()
                .push(signature);
        }
    }

    fn finalized(&mut self, node: NodeIndex, _: Time, entry: &Arc<CommittedEntry<S>>) {
        self.disks[node.0 as usize].push(entry.clone());
    }

    fn view_changed(&mut self, _: NodeIndex, _: Time, _: Height, _: View) {
        self.view_changes += 1;
    }

    fn evidence(&mut self, node: NodeIndex, _: Time, evidence: &Evidence) {
        if self.honest(node) {
            if matches!(evidence.kind, consensus::EvidenceKind::InvalidShare { .. }) {
                self.convictions
                    .insert((node.0, evidence.culprit.0), evidence.height);
            }
            self.evidence.push(evidence.clone());
        }
    }
}

pub struct Net<S: Scheme> {
    pub nodes: Vec<Member<S>>,
    pub config: ReplicaConfig,
    pub outputs: Vec<Arc<DkgOutput<S>>>,
    queue: EventQueue<Event<S>>,
    pub now: Time,
    rng: ChaCha20Rng,
    pub min_delay_us: u64,
    pub max_delay_us: u64,
    /// What the members' events said.
    pub record: Record<S>,
    pub messages: u64,
    /// Every message an honest member sent: (time, sender, kind, height).
    pub honest_sends: Vec<(Time, NodeIndex, &'static str, Option<Height>)>,
    /// Members cut off: what is delivered to them, and their timers, are lost.
    pub down: std::collections::BTreeSet<u32>,
    /// Each member's last persisted record of what it signed.
    pub vote_disks: Vec<Vec<SignedVotes<S>>>,
    /// What each honest member signed: (member, height, view, kind) -> value.
    pub signed: BTreeMap<(u32, Height, View, &'static str), [u8; 32]>,
    /// Slots for which an honest member signed two values.
    pub conflicting_votes: Vec<String>,
}

impl<S: Scheme> Net<S> {
    pub fn new(config: ReplicaConfig, seed: u64, byzantine: &[(u32, Behaviour)]) -> Self {
        let outputs = dkg::<S>(&config, seed);
        let n = config.n as usize;
        let memo = Memo::shared();
        let directory = directory::<S>(n);
        let nodes: Vec<Member<S>> = outputs
            .iter()
            .map(|o| {
                let behaviour = byzantine.iter().find(|(i, _)| *i == o.me.0).map(|b| b.1);
                let seed = [o.me.0 as u8; 32];
                Member::restore(
                    config.clone(),
                    &directory,
                    consensus::RestoredParts {
                        output: o,
                        consensus: consensus::consensus_key(&seed),
                        chain: Vec::new(),
                        votes: Vec::new(),
                        seed,
                        memo: memo.clone(),
                        adversary: behaviour.map(Behaviour::adversary),
                    },
                )
                .unwrap()
            })
            .collect();
        let record = Record {
            honest: nodes.iter().map(Member::is_honest).collect(),
            commits: BTreeMap::new(),
            beacons: BTreeMap::new(),
            evidence: Vec::new(),
            view_changes: 0,
            learned: Vec::new(),
            disks: vec![Vec::new(); n],
            convictions: BTreeMap::new(),
        };
        Net {
            nodes,
            config,
            outputs,
            queue: EventQueue::new(),
            now: Time::ZERO,
            rng: ChaCha20Rng::seed_from_u64(seed ^ 0x5eed),
            min_delay_us: 1_000,
            max_delay_us: 10_000,
            record,
            down: Default::default(),
            vote_disks: vec![Vec::new(); n],
            signed: BTreeMap::new(),
            conflicting_votes: Vec::new(),
            messages: 0,
            honest_sends: Vec::new(),
        }
    }

    /// Member `i`'s finalized heights.
    pub fn chain(&self, i: usize) -> &ChainWindow<S> {
        self.replica(i).finalized()
    }

    /// The height member `i` is deciding.
    pub fn current_height(&self, i: usize) -> Height {
        self.replica(i).current_height()
    }

    fn replica(&self, i: usize) -> &dyn Participant<S> {
        self.nodes[i]
            .replica()
            .expect("a restored member has a replica")
    }

    fn delay(&mut self) -> u64 {
        self.min_delay_us + self.rng.next_u64() % (self.max_delay_us - self.min_delay_us + 1)
    }

    fn send(&mut self, from: NodeIndex, to: NodeIndex, envelope: Envelope<S>) {
        let at = self.now.plus_micros(self.delay());
        self.queue.push(at, Event::Deliver { from, to, envelope });
    }

    fn apply(&mut self, who: NodeIndex, outputs: Vec<MemberOutput<S>>) {
        let debug = std::env::var("PUMP_DEBUG").is_ok();
        let honest = self.nodes[who.0 as usize].is_honest();
        for o in outputs {
            if debug {
                let h = self.current_height(who.0 as usize);
                eprintln!("{} n{} h{}: {o:?}", self.now, who.0, h);
            }
            if let (true, MemberOutput::Effect(e)) = (honest, &o) {
                if let Some(Envelope::Consensus(message)) = e.message() {
                    self.honest_sends
                        .push((self.now, who, message.kind(), message.height()));
                    self.check_signed(who, message);
                }
            }
            match o {
                MemberOutput::Effect(Effect::Send { to, message }) => self.send(who, to, message),
                MemberOutput::Effect(Effect::Broadcast(message)) => {
                    for j in (0..self.config.n).filter(|j| *j != who.0) {
                        self.send(who, NodeIndex(j), message.clone());
                    }
                }
                MemberOutput::Effect(Effect::SetTimer { at, timer }) => {
                    self.queue.push(at, Event::Timer { who, timer })
                }
                MemberOutput::Event(e) => dispatch(&mut self.record, who, self.now, &e),
                MemberOutput::PersistVotes(record) => self.vote_disks[who.0 as usize] = record,
                MemberOutput::SyncFromStore { to, from_height } => {
                    let disk = &self.record.disks[who.0 as usize];
                    let entries = consensus::replica::sync_response(from_height, |h| {
                        disk.get(usize::try_from(h.get()).ok()?.checked_sub(1)?)
                            .cloned()
                    });
                    if !entries.is_empty() {
                        let message = Message::SyncResponse { entries };
                        self.send(who, to, Envelope::Consensus(message));
                    }
                }
                MemberOutput::Persist(_)
                | MemberOutput::DkgComplete(_)
                | MemberOutput::DkgFailed(_) => {
                    unreachable!("a restored member runs no DKG and changes no epoch")
                }
                MemberOutput::Epoch(e) => unreachable!("no epoch change here: {e:?}"),
            }
        }
    }

    /// An honest member never signs two values for one slot.
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

    /// Replaces member `i` by an honest one resuming from its disk (chain and
    /// vote record), started now.
    pub fn restart_honest(&mut self, i: usize) {
        let votes = self.vote_disks[i].clone();
        self.restart_with_votes(i, votes);
    }

    /// Replaces member `i` by an honest one resuming from its chain and the
    /// vote record `votes`, started now.
    pub fn restart_with_votes(&mut self, i: usize, votes: Vec<SignedVotes<S>>) {
        self.nodes[i] = Member::restore(
            self.config.clone(),
            &directory::<S>(self.config.n as usize),
            consensus::RestoredParts {
                output: &self.outputs[i],
                consensus: consensus::consensus_key(&[i as u8; 32]),
                chain: self.record.disks[i].clone(),
                votes,
                seed: [i as u8 ^ 0x55; 32],
                memo: Memo::shared(),
                adversary: None,
            },
        )
        .unwrap();
        self.record.honest[i] = true;
        self.input(NodeIndex(i as u32), MemberInput::Start);
    }

    /// Hands `input` to member `who` now and carries out its outputs.
    pub fn input(&mut self, who: NodeIndex, input: MemberInput<S>) {
        let out = self.nodes[who.0 as usize].handle(self.now, input);
        self.apply(who, out);
    }

    pub fn start(&mut self) {
        for i in 0..self.nodes.len() {
            self.input(NodeIndex(i as u32), MemberInput::Start);
        }
    }

    /// Runs until every honest member finalized `heights` or `deadline` passes.
    pub fn run_until(&mut self, heights: u64, deadline: Time) -> bool {
        loop {
            let done = (0..self.nodes.len())
                .filter(|i| self.nodes[*i].is_honest() && !self.down.contains(&(*i as u32)))
                .all(|i| self.chain(i).height() >= Height::new(heights));
            if done {
                return true;
            }
            if !self.step(deadline) {
                return false;
            }
        }
    }

    /// Carries out the next event if it comes no later than `deadline` (what
    /// is due to a member that is down is lost); `false` when none does.
    pub fn step(&mut self, deadline: Time) -> bool {
        match self.queue.next_time() {
            Some(at) if at <= deadline => {}
            _ => return false,
        }
        let Some((at, event)) = self.queue.pop() else {
            return false;
        };
        self.now = at;
        let (who, input) = match event {
            Event::Deliver { from, to, envelope } => {
                self.messages += 1;
                (to, MemberInput::Message { from, envelope })
            }
            Event::Timer { who, timer } => (who, MemberInput::Timer(timer)),
        };
        if !self.down.contains(&who.0) {
            self.input(who, input);
        }
        true
    }

    /// Runs every event of the next `micros` microseconds, then moves the
    /// clock to that time.
    pub fn run_for(&mut self, micros: u64) {
        let until = self.now.plus_micros(micros);
        while self.step(until) {}
        self.now = until;
    }

    /// Every member loses power at once: each is down, and every message in
    /// flight and every timer is lost.
    pub fn crash_all(&mut self) {
        self.down = (0..self.config.n).collect();
        self.queue = EventQueue::new();
    }

    /// No two honest members committed different blocks at one height, and
    /// no honest member signed two values for one slot.
    pub fn assert_agreement(&self) {
        assert!(
            self.conflicting_votes.is_empty(),
            "{:?}",
            self.conflicting_votes
        );
        for (h, commits) in &self.record.commits {
            let first = commits[0].1;
            assert!(
                commits.iter().all(|c| c.1 == first),
                "disagreement at height {h}: {commits:?}"
            );
        }
        for (h, beacons) in &self.record.beacons {
            assert!(
                beacons.iter().all(|b| b.1 == beacons[0].1),
                "two beacons at round {h}"
            );
        }
    }

    /// Every honest member's chain verifies with drand's rules for its scheme.
    pub fn assert_beacons_verify(&self) {
        let key = self.outputs[0].keys[0].group_key().to_bytes();
        let info = self.config.chain_info(key, S::ID);
        for i in (0..self.nodes.len()).filter(|i| self.nodes[*i].is_honest()) {
            let beacons: Vec<Beacon> = self
                .chain(i)
                .iter()
                .scan(self.config.genesis_seed.to_vec(), |prev, e| {
                    let b = Beacon::new(S::ID, e.block.height.get(), e.beacon.to_bytes(), prev);
                    *prev = b.signature.clone();
                    Some(b)
                })
                .collect();
            info.verify_chain(None, &beacons).unwrap();
        }
    }

    pub fn fast_commits(&self) -> usize {
        self.record
            .commits
            .values()
            .flatten()
            .filter(|c| c.2 == CommitPath::Fast)
            .count()
    }

    pub fn all_commits(&self) -> usize {
        self.record.commits.values().map(Vec::len).sum()
    }
}

/// The directory of the pump's `n` members: member `i`'s keys derive from
/// the seed `[i; 32]`.
pub fn directory<S: Scheme>(n: usize) -> consensus::epoch::Directory {
    let seeds: Vec<[u8; 32]> = (0..n).map(|i| [i as u8; 32]).collect();
    consensus::epoch::Directory::derived::<S>(&seeds)
}

/// The replica keys of the pump's members from their DKG outputs: member
/// `i`'s consensus key derives from the seed `[i; 32]`, as in [`directory`].
pub fn replica_keys<S: Scheme>(
    config: &ReplicaConfig,
    outputs: &[Arc<DkgOutput<S>>],
) -> Vec<consensus::ReplicaKeys<S>> {
    let secrets: Vec<_> = (0..outputs.len())
        .map(|i| consensus::consensus_key(&[i as u8; 32]))
        .collect();
    let epoch = Arc::new(consensus::EpochKeys::of_secrets(
        consensus::Epoch::ZERO,
        &secrets,
    ));
    outputs
        .iter()
        .map(|o| {
            let secret = secrets[o.me.0 as usize].clone();
            consensus::ReplicaKeys::from_dkg(config, o, secret, epoch.clone()).unwrap()
        })
        .collect()
}

/// [`Member::restore`] of the pump's member `output.me`: its consensus key
/// and the directory of [`directory`].
#[allow(clippy::too_many_arguments)]
pub fn restore<S: Scheme>(
    config: ReplicaConfig,
    output: &DkgOutput<S>,
    chain: Vec<Arc<CommittedEntry<S>>>,
    votes: Vec<SignedVotes<S>>,
    seed: [u8; 32],
    memo: Arc<Memo>,
    adversary: Option<Arc<dyn consensus::Adversary<S>>>,
) -> Result<Member<S>, consensus::ConsensusError> {
    let directory = directory::<S>(config.n as usize);
    let consensus = consensus::consensus_key(&[output.me.0 as u8; 32]);
    Member::restore(
        config,
        &directory,
        consensus::RestoredParts {
            output,
            consensus,
            chain,
            votes,
            seed,
            memo,
            adversary,
        },
    )
}
