//! The discrete-event engine: one event queue ordered by (virtual time, sequence
//! number) (`beacon::schedule`), members driven through `consensus::Member` (the
//! same driver the real node uses), a network model, a compute-cost model, and
//! the observers of honest members' events (`consensus::observe`): the invariant
//! checkers and the statistics.
//!
//! # Determinism and threads
//! Events are processed in windows `[t, t + L)` where `L` is the network's minimum
//! latency: nothing processed in a window can cause an event at another node in
//! the same window. Within a window each node handles its own events in order
//! (its own short timers included); nodes run in parallel on `threads` workers.
//! Their effects are then merged in node order, and only the merge touches the
//! network RNG, the queue and the sequence numbers. So the trace — and the beacon
//! chain — is the same whatever the thread count.
//!
//! # Virtual CPU
//! Each member has a CPU that is busy until some time: an input is handled at
//! `max(arrival, busy_until)`, costs the cost model's price of the operations it
//! performed (counted by `beacon::cost`) plus, for a message, its decoding and
//! the network stack's CPU, and its messages leave when it is done
//! (then queue on the sender's uplink). A collector with many shares to verify is
//! a real bottleneck. With `[network] host_cores` every node runs on one host
//! with that many cores (what `compare` models for a local network): a window's
//! events are then handled in time order on one thread, and an input also waits
//! for the core that is free first. The nodes of one host also share its disk:
//! each durable write (a node's record of its votes, which it waits for; a
//! finalized height, which its store thread writes meanwhile) takes
//! `persist_votes_us`: its CPU part (`persist_votes_cpu_us`) on a core (the
//! node's, or the first free one for the store thread), the rest on the
//! disk, one write after the other, while the core is free for others.
//! Where the links are `localnet`'s WAN emulator (`[network]
//! relays_on_host`, as `compare` sets), its one relay thread works on the
//! host's cores too (`crate::host`): each message costs it `relay_us`, half
//! when it reads the message from its sender (its link's latency starts
//! then), half when it writes it to its receiver (which can handle it only
//! then).

use crate::config::SimConfig;
use crate::cost_model::CostModel;
use crate::host::{durable_write, Host};
use crate::invariants::{Checker, FailureKind};
use crate::network::{broadcast_receivers, Network};
use crate::parallel_map;
use crate::report::{FinalBeacon, Report, SnapshotReport};
use crate::reshare::ReshareRun;
use crate::snapshot::{DkgSnapshot, DkgSummary, SnapshotKey, SnapshotMode};
use crate::stats::Stats;
use crate::SimError;
use beacon::chain::{BeaconJson, ChainInfoJson};
use beacon::cost::EncodedPoints;
use beacon::dkg::relay::VerifyingKey;
use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::schedule::EventQueue;
use beacon::{NodeIndex, Point, Scheme, Time};
use consensus::epoch::{EpochChange, EpochView};
use consensus::observe::dispatch;
use consensus::replica::{sync_response, SignedVotes, CHAIN_WINDOW};
use consensus::{
    Behaviour, CommittedEntry, Envelope, EpochEvent, Event as ReplicaEvent, Height, Member,
    MemberInput, MemberOutput, MemberTimer, Message, ReplicaConfig,
};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// An envelope in flight, shared by every recipient of one send, each kind
/// in an allocation of its own size: an [`Envelope`] is 920 bytes inline (a
/// SIGN-SHARE's three signatures), which millions of DKG shares and deals in
/// flight at 4,096 members would each pay.
#[derive(Clone)]
enum InFlight<S: Scheme> {
    Consensus(Arc<Message<S>>),
    Dkg(Arc<beacon::dkg::session::SessionMessage>),
    Epoch(Arc<consensus::epoch::EpochMessage<S>>),
}

impl<S: Scheme> InFlight<S> {
    fn new(envelope: Envelope<S>) -> Self {
        match envelope {
            Envelope::Consensus(m) => InFlight::Consensus(Arc::new(m)),
            Envelope::Dkg(m) => InFlight::Dkg(Arc::new(m)),
            Envelope::Epoch(m) => InFlight::Epoch(Arc::new(m)),
        }
    }

    /// The envelope (the last recipient takes it without a copy).
    fn into_envelope(self) -> Envelope<S> {
        match self {
            InFlight::Consensus(m) => Envelope::Consensus(Arc::unwrap_or_clone(m)),
            InFlight::Dkg(m) => Envelope::Dkg(Arc::unwrap_or_clone(m)),
            InFlight::Epoch(m) => Envelope::Epoch(Arc::unwrap_or_clone(m)),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            InFlight::Consensus(m) => m.kind(),
            InFlight::Dkg(m) => m.kind(),
            InFlight::Epoch(m) => m.kind(),
        }
    }
}

/// What can happen to a node.
enum Event<S: Scheme> {
    Start,
    Deliver {
        from: NodeIndex,
        envelope: InFlight<S>,
        bytes: usize,
        /// The points in those bytes, which the receiver decodes.
        points: EncodedPoints,
    },
    Timer(MemberTimer),
    Transaction(Vec<u8>),
    /// The operator proposes a change of members.
    Propose(EpochChange),
    /// The member stops; with `lose_votes` its vote record is lost too.
    Crash {
        lose_votes: bool,
    },
    Restart,
}

impl<S: Scheme> Event<S> {
    fn tag(&self) -> (u8, &'static str, u32, u64) {
        match self {
            Event::Deliver { from, envelope, .. } => {
                let h = match envelope {
                    InFlight::Consensus(m) => m.height().map_or(0, Height::get),
                    InFlight::Dkg(_) | InFlight::Epoch(_) => 0,
                };
                (0, envelope.kind(), from.0, h)
            }
            Event::Start => (5, "start", 0, 0),
            Event::Timer(_) => (1, "timer", 0, 0),
            Event::Transaction(_) => (2, "transaction", 0, 0),
            Event::Crash { .. } => (3, "crash", 0, 0),
            Event::Restart => (4, "restart", 0, 0),
            Event::Propose(_) => (6, "propose", 0, 0),
        }
    }
}

/// A node's persisted state: what a crash-restart resumes from.
#[derive(Default)]
struct Disk<S: Scheme> {
    dkg: Option<Arc<DkgOutput<S>>>,
    /// The epoch `dkg` belongs to, once the member changed epochs.
    epoch: Option<EpochView>,
    chain: Vec<Arc<CommittedEntry<S>>>,
    /// The last record of what the replica signed (crash safety of votes).
    votes: Vec<SignedVotes<S>>,
}

/// Per-node mutable state, handed to a worker for one window.
struct Slot<S: Scheme> {
    member: Option<Member<S>>,
    disk: Disk<S>,
    busy_until: Time,
    /// When its last input's computation ended (its durable writes may end later).
    cpu_until: Time,
    cpu_us: u64,
    behaviour: Option<Behaviour>,
    /// Whether this slot runs the honest protocol alone under its identity
    /// (Byzantine members and both instances of a twin do not).
    honest: bool,
    /// The member this slot speaks as (a twin's second instance shares it).
    identity: u32,
    /// The half of the network this slot is in, for twins' routing.
    side: bool,
    /// Whether this slot is one instance of a twin pair.
    twinned: bool,
}

/// What one node did in one window.
struct NodeEffects<S: Scheme> {
    node: u32,
    outputs: Vec<(Time, MemberOutput<S>)>,
    /// When the node's store thread starts each durable write of a finalized
    /// height (only where the host is modelled).
    store_writes: Vec<Time>,
    trace: Vec<u8>,
    processed: u64,
    panic: Option<(Time, String)>,
}

/// One node's share of a window: its index, its state, its events.
type Work<'a, S> = (u32, &'a mut Slot<S>, Vec<(Time, Event<S>)>);

/// Read-only context of a window.
struct Shared<'a> {
    costs: &'a CostModel,
    replica: &'a ReplicaConfig,
    memo: &'a Arc<Memo>,
    seed: u64,
    /// Every party's member key, and the DKG's phase and attempts: a
    /// restarted member's identity.
    keys: &'a Arc<Vec<VerifyingKey>>,
    phase_timeout_us: u64,
    max_attempts: u32,
    /// Every party, joiners included: the receivers of a broadcast and its sender.
    parties: u32,
}

/// The most recent entries of a node's disk, which a restarted member resumes
/// from (its replica keeps no more).
fn recent<S: Scheme>(disk: &[Arc<CommittedEntry<S>>]) -> Vec<Arc<CommittedEntry<S>>> {
    disk[disk.len().saturating_sub(CHAIN_WINDOW)..].to_vec()
}

fn member_seed(seed: u64, node: u32) -> [u8; 32] {
    beacon::schedule::index_seed(b"sbft-beacon sim member", seed, node)
}

/// Mixed into the seed for the network's randomness.
const NETWORK_SEED: u64 = 0x006e_6574_776f_726b;
/// Mixed into the seed for the client load's randomness.
const LOAD_SEED: u64 = 0x6c6f_6164;
/// Mixed into both again where the rounds start afresh at a cut.
const ROUNDS_SEED: u64 = 0x726f_756e_6473_0000;

/// The host's cores and disk, when every node runs on one host.
fn host_of(cfg: &SimConfig, costs: &CostModel) -> Option<Host> {
    (cfg.network.host_cores > 0).then(|| {
        let relay_us = cfg.network.relays_on_host.then(|| costs.relay_us());
        Host::new(cfg.network.host_cores, relay_us)
    })
}

impl<S: Scheme> NodeEffects<S> {
    fn new(node: u32) -> Self {
        NodeEffects {
            node,
            outputs: Vec::new(),
            store_writes: Vec::new(),
            trace: Vec::new(),
            processed: 0,
            panic: None,
        }
    }
}

/// Runs one node's events of a window `[.., end)`, on a core of its own.
fn run_node<S: Scheme>(
    node: u32,
    slot: &mut Slot<S>,
    mut events: Vec<(Time, Event<S>)>,
    end: Time,
    shared: &Shared<'_>,
) -> NodeEffects<S> {
    let mut fx = NodeEffects::new(node);
    // Local queue, in the window's order; own timers below `end` join it.
    let mut local = EventQueue::new();
    for (t, e) in events.drain(..) {
        local.push(t, e);
    }
    while let Some((at, event)) = local.pop() {
        let timers = step(node, slot, at, event, end, shared, &mut fx, None);
        if fx.panic.is_some() {
            break;
        }
        for (t, e) in timers {
            local.push(t, e);
        }
    }
    fx
}

/// Runs every node's events of a window `[.., end)` in time order on the host's
/// shared cores: an input starts when its node and a core are both free.
fn run_on_host<S: Scheme>(
    work: Vec<Work<'_, S>>,
    host: &mut Host,
    end: Time,
    shared: &Shared<'_>,
) -> Vec<NodeEffects<S>> {
    let mut slots: Vec<(u32, &mut Slot<S>, NodeEffects<S>)> = Vec::with_capacity(work.len());
    let mut queue = EventQueue::new();
    for (k, (node, slot, events)) in work.into_iter().enumerate() {
        for (t, e) in events {
            queue.push(t, (k, e));
        }
        slots.push((node, slot, NodeEffects::new(node)));
    }
    while let Some((at, (k, event))) = queue.pop() {
        let (node, slot, fx) = &mut slots[k];
        if fx.panic.is_some() {
            continue;
        }
        // A message reaches its node once the emulator's relay has written it.
        let at = match event {
            Event::Deliver { .. } => host.relay_write(at),
            _ => at,
        };
        let (core, free) = host.earliest();
        let before = slot.cpu_until;
        let sent_before = fx.outputs.len();
        let timers = step(
            *node,
            slot,
            at.max(free),
            event,
            end,
            shared,
            fx,
            Some(&mut host.disk),
        );
        if slot.cpu_until > before {
            host.occupy(core, slot.cpu_until);
        }
        for at in fx.store_writes.drain(..) {
            host.store_write(at, shared.costs.persist_split_us());
        }
        // The relays read what the node sent: each copy leaves then.
        host.relay_reads(&mut fx.outputs, sent_before, slot.identity, shared.parties);
        for (t, e) in timers {
            queue.push(t, (k, e));
        }
    }
    slots.into_iter().map(|(_, _, fx)| fx).collect()
}

/// Handles one event at a node: it starts at `ready` (its arrival, or later
/// when it waited for a core) or when the node is free, whichever is later.
/// Returns the node's own timers that fall before `end`, to handle in this
/// window. `disk`: when the host's shared disk is next free, if modelled (else
/// each node has a disk of its own).
#[allow(clippy::too_many_arguments)]
fn step<S: Scheme>(
    node: u32,
    slot: &mut Slot<S>,
    ready: Time,
    event: Event<S>,
    end: Time,
    shared: &Shared<'_>,
    fx: &mut NodeEffects<S>,
    mut disk: Option<&mut Time>,
) -> Vec<(Time, Event<S>)> {
    let mut local = Vec::new();
    let start = ready.max(slot.busy_until);
    let (kind, what, from, height) = event.tag();
    fx.trace.extend_from_slice(&start.0.to_be_bytes());
    fx.trace.extend_from_slice(&[kind]);
    fx.trace.extend_from_slice(what.as_bytes());
    fx.trace.extend_from_slice(&from.to_be_bytes());
    fx.trace.extend_from_slice(&height.to_be_bytes());
    fx.processed += 1;
    let (points, delivered) = match &event {
        Event::Deliver { points, .. } => (*points, true),
        _ => (EncodedPoints::default(), false),
    };
    let (input, bytes) = match event {
        Event::Crash { lose_votes } => {
            slot.member = None;
            if lose_votes {
                slot.disk.votes.clear();
            }
            return local;
        }
        Event::Restart => {
            if slot.member.is_some() {
                return local;
            }
            let Some(dkg) = slot.disk.dkg.clone() else {
                return local;
            };
            let epoch = slot
                .disk
                .epoch
                .clone()
                .unwrap_or_else(|| EpochView::genesis(shared.replica.clone()));
            let seed = member_seed(shared.seed, slot.identity);
            let restored = Member::restore_in(
                epoch,
                &dkg,
                recent(&slot.disk.chain),
                slot.disk.votes.clone(),
                member_seed(shared.seed, node),
                shared.memo.clone(),
                slot.behaviour,
            )
            .map(|m| {
                m.with_identity(
                    slot.identity,
                    consensus::member_key(&seed),
                    shared.keys.clone(),
                    shared.phase_timeout_us,
                    shared.max_attempts,
                )
            });
            match restored {
                Ok(m) => slot.member = Some(m),
                Err(e) => {
                    fx.panic = Some((start, format!("restore failed: {e}")));
                    return local;
                }
            }
            (MemberInput::Start, 0)
        }
        Event::Start => (MemberInput::Start, 0),
        Event::Deliver {
            from,
            envelope,
            bytes,
            ..
        } => (
            MemberInput::Message {
                from,
                envelope: envelope.into_envelope(),
            },
            bytes,
        ),
        Event::Timer(t) => (MemberInput::Timer(t), 0),
        Event::Transaction(tx) => {
            let len = tx.len();
            (MemberInput::ClientTransaction(tx), len)
        }
        Event::Propose(change) => (MemberInput::ProposeEpoch(change), 0),
    };
    let Some(member) = slot.member.as_mut() else {
        return local;
    };
    beacon::cost::take();
    let result = catch_unwind(AssertUnwindSafe(|| member.handle(start, input)));
    let counts = beacon::cost::take();
    let outputs = match result {
        Ok(o) => o,
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panic".into());
            fx.panic = Some((start, msg));
            return local;
        }
    };
    // The node waits for each durable write of its vote record.
    let persisted = outputs
        .iter()
        .filter(|o| matches!(o, MemberOutput::PersistVotes(_)))
        .count();
    let mut cpu = shared.costs.cost_us(&counts, bytes, points);
    if delivered {
        cpu += shared.costs.transport_us();
    }
    // Each write's CPU on the node's core, then its time on the disk.
    let (write_cpu, write_disk) = shared.costs.persist_split_us();
    slot.cpu_us += cpu + (write_cpu + write_disk) * persisted as u64;
    slot.cpu_until = start.plus_micros(cpu + write_cpu * persisted as u64);
    let mut done = slot.cpu_until;
    for _ in 0..persisted {
        done = durable_write(disk.as_deref_mut(), done, write_disk);
    }
    slot.busy_until = done;
    for o in outputs {
        match o {
            MemberOutput::Effect(Effect::SetTimer { at, timer }) if at < end => {
                local.push((at, Event::Timer(timer)))
            }
            // Written before anything else of this step leaves the node.
            MemberOutput::PersistVotes(record) => slot.disk.votes = record,
            MemberOutput::DkgComplete(out) => {
                slot.disk.dkg = Some(out.clone());
                fx.outputs.push((done, MemberOutput::DkgComplete(out)));
            }
            MemberOutput::SyncFromStore { to, from_height } => {
                // The node's disk answers what its replica no longer keeps.
                let disk = &slot.disk.chain;
                let entries = sync_response(from_height, |h| {
                    disk.get(usize::try_from(h.get()).ok()?.checked_sub(1)?)
                        .cloned()
                });
                if !entries.is_empty() {
                    let message = Envelope::Consensus(Message::SyncResponse { entries });
                    let send = MemberOutput::Effect(Effect::Send { to, message });
                    fx.outputs.push((done, send));
                }
            }
            MemberOutput::Event(ReplicaEvent::Finalized(entry)) => {
                // The store thread writes it, on a host's core and disk
                // (`run_on_host`), not the node's.
                if disk.is_some() {
                    fx.store_writes.push(done);
                }
                slot.disk.chain.push(entry.clone());
                let event = ReplicaEvent::Finalized(entry);
                fx.outputs.push((done, MemberOutput::Event(event)));
            }
            other => fx.outputs.push((done, other)),
        }
    }
    local
}

/// A simulation in progress.
struct Engine<S: Scheme> {
    cfg: SimConfig,
    replica: ReplicaConfig,
    costs: CostModel,
    network: Network,
    memo: Arc<Memo>,
    slots: Vec<Slot<S>>,
    /// Every node's pending events: (slot, event).
    queue: EventQueue<(u32, Event<S>)>,
    uplink_free: Vec<Time>,
    /// The host's cores and disk when every node runs on one host (`[network] host_cores`).
    host: Option<Host>,
    net_rng: ChaCha20Rng,
    load_rng: ChaCha20Rng,
    next_tx: Option<Time>,
    trace: Sha256,
    checker: Checker,
    processed: u64,
    // Statistics.
    dkg_done: Vec<Option<Time>>,
    /// Every party's member key.
    keys: Arc<Vec<VerifyingKey>>,
    phase_timeout_us: u64,
    max_attempts: u32,
    dkg_dealers: u32,
    dkg_qualified: u32,
    dkg_disqualified: BTreeMap<u32, String>,
    dkg_end: Option<Time>,
    rounds_started_wall: Option<Instant>,
    /// Consensus messages sent, by kind (from the first, which may come
    /// before the slowest member's DKG ends).
    consensus_messages: BTreeMap<&'static str, u64>,
    consensus_bytes: u64,
    /// DKG and epoch messages sent, by kind.
    dkg_messages: BTreeMap<&'static str, u64>,
    dkg_bytes: u64,
    /// What honest members' events say: latencies, paths, views, evidence.
    stats: Stats,
    cpu_at_rounds_start: u64,
    /// Per member: the slot of its twin's second instance, if it has one.
    twin_slot: Vec<Option<u32>>,
    /// Parties the network reaches: the genesis members, then joiners.
    parties: u32,
    /// The change of members of the `reshare` scenario.
    reshare: Option<ReshareRun>,
    /// When each scheduled crash strikes and the member restarts (node, down,
    /// back; never back: the end of time).
    crash_times: Vec<(u32, Time, Time)>,
    /// What identifies this run's DKG in a snapshot.
    snapshot_key: SnapshotKey,
    /// The snapshot this run starts from, until it starts.
    loaded: Option<DkgSnapshot<S>>,
    /// The DKG's figures from the snapshot this run started from.
    loaded_summary: Option<DkgSummary>,
    /// With a snapshot: the cut, once every honest member finished its DKG
    /// (taken after the window's effects are merged).
    cut_at: Option<Time>,
    /// The trace from the start of the rounds at the cut (runs with a
    /// snapshot only).
    rounds_trace: Option<Sha256>,
    /// Writing the snapshot failed.
    snapshot_error: Option<SimError>,
    /// When the run started (the DKG's wall time, for a snapshot).
    started_wall: Instant,
}

/// Progress callback: (rounds finalized by every honest node, target rounds).
pub type Progress<'a> = &'a (dyn Fn(u64, u64) + Sync);

/// Runs a scenario to completion and reports (violations are in the report).
pub fn run(
    cfg: &SimConfig,
    progress: Option<Progress<'_>>,
) -> Result<(Report, Option<serde_json::Value>), SimError> {
    match cfg.scheme {
        beacon::SchemeId::PedersenBlsChained => run_with::<beacon::MinPk>(cfg, progress),
        beacon::SchemeId::BlsChainedG1Rfc9380 => run_with::<beacon::MinSig>(cfg, progress),
        beacon::SchemeId::BlsUnchainedG1Rfc9380 => {
            run_with::<beacon::MinSigUnchained>(cfg, progress)
        }
        beacon::SchemeId::PedersenBlsUnchained => run_with::<beacon::MinPkUnchained>(cfg, progress),
        beacon::SchemeId::InsecureMock => run_with::<beacon::mock::InsecureMock>(cfg, progress),
    }
}

fn run_with<S: Scheme>(
    cfg: &SimConfig,
    progress: Option<Progress<'_>>,
) -> Result<(Report, Option<serde_json::Value>), SimError> {
    let wall = Instant::now();
    let mut engine = Engine::<S>::new(cfg)?;
    engine.start()?;
    engine.run(progress);
    if let Some(e) = engine.snapshot_error.take() {
        return Err(e);
    }
    let chain = engine.chain_json();
    Ok((engine.report(wall.elapsed().as_secs_f64()), chain))
}

impl<S: Scheme> Engine<S> {
    fn new(cfg: &SimConfig) -> Result<Self, SimError> {
        let costs = CostModel::from_toml(&crate::config::read_relative(
            cfg.base_dir.as_deref(),
            &cfg.cost_model,
        )?)?;
        let regions = cfg.region_table()?;
        let joiners = cfg.reshare.as_ref().map_or(0, |r| r.join);
        let parties = cfg.nodes + joiners;
        let network = Network::new(&cfg.network, regions.as_ref(), parties);
        let replica = cfg.replica_config()?;
        if cfg.faults.byzantine + cfg.faults.twins > replica.f {
            return Err(SimError::TooManyFaulty {
                byzantine: cfg.faults.byzantine,
                twins: cfg.faults.twins,
                f: replica.f,
                n: cfg.nodes,
                c: replica.c,
            });
        }
        let n = cfg.nodes;
        let mut rng = ChaCha20Rng::seed_from_u64(cfg.seed);
        // Byzantine replicas: chosen by the seed, kinds cycled.
        let mut indices: Vec<u32> = (0..n).collect();
        indices.shuffle(&mut rng);
        let kinds: Vec<Behaviour> = cfg
            .faults
            .byzantine_kinds
            .iter()
            .map(|k| k.parse().map_err(SimError::Config))
            .collect::<Result<_, _>>()?;
        let mut behaviours = vec![None; n as usize];
        for (i, node) in indices
            .iter()
            .take(cfg.faults.byzantine as usize)
            .enumerate()
        {
            behaviours[*node as usize] = Some(kinds[i % kinds.len()]);
        }
        // Twins: the next members in the seed's order; every other member is
        // put on one side at random (a twin's instances talk to one side each).
        let twins: Vec<u32> = indices
            .iter()
            .skip(cfg.faults.byzantine as usize)
            .take(cfg.faults.twins as usize)
            .copied()
            .collect();
        let sides: Vec<bool> = if twins.is_empty() {
            vec![false; n as usize]
        } else {
            (0..n).map(|_| rng.gen_bool(0.5)).collect()
        };
        // The committee is drawn from the genesis seed (public, fixed with the
        // membership), its size and min_qualified from the committee rule.
        let session: [u8; 32] = Sha256::digest(format!("sbft-beacon sim dkg {}", cfg.seed)).into();
        let dkg = replica
            .dkg_config(
                session,
                cfg.dkg.dealers,
                cfg.dkg.phase_timeout_ms,
                cfg.dkg.max_attempts,
            )
            .map_err(|e| SimError::Config(format!("[dkg] {e}")))?;
        // Every party's member key: the genesis members, then the joiners.
        let keys: Arc<Vec<_>> = Arc::new(
            (0..parties)
                .map(|i| consensus::member_key(&member_seed(cfg.seed, i)).verifying_key())
                .collect(),
        );
        let reshare = match &cfg.reshare {
            Some(r) => Some(ReshareRun::plan(r, n, &keys, &mut rng)?),
            None => None,
        };
        let dealer_count = dkg.dealer_list().len() as u32;
        let snapshot_key = SnapshotKey {
            scenario: cfg.name.clone(),
            seed: cfg.seed,
            nodes: n,
            scheme: S::ID.as_str().to_string(),
            thresholds: dkg.thresholds.clone(),
            dealers: dkg.dealer_list().iter().map(|d| d.0).collect(),
            byzantine: behaviours
                .iter()
                .enumerate()
                .filter_map(|(i, b)| b.map(|b| (i as u32, b.as_str().to_string())))
                .collect(),
            twins: twins.clone(),
            member_keys: keys
                .iter()
                .fold(Sha256::new(), |h, k| h.chain_update(k.as_bytes()))
                .finalize()
                .into(),
        };
        // A run from a snapshot builds no DKG sessions: its members are
        // rebuilt from their keys at the cut (`start`).
        let loaded = match &cfg.dkg_snapshot {
            Some(SnapshotMode::Load(path)) => Some(
                DkgSnapshot::<S>::load(path, &snapshot_key, cfg.threads).map_err(|reason| {
                    SimError::Snapshot {
                        path: path.clone(),
                        reason,
                    }
                })?,
            ),
            Some(SnapshotMode::Save(path)) => {
                // Fail now, not after the DKG, where the file cannot be written.
                std::fs::File::create(path).map_err(|e| SimError::Snapshot {
                    path: path.clone(),
                    reason: e.into(),
                })?;
                None
            }
            None => None,
        };
        let memo = Memo::shared();
        let mut slots = Vec::with_capacity(n as usize);
        for i in 0..n {
            let member = if loaded.is_some() {
                None
            } else {
                Some(Member::new(
                    replica.clone(),
                    dkg.clone(),
                    NodeIndex(i),
                    member_seed(cfg.seed, i),
                    memo.clone(),
                    consensus::member_key(&member_seed(cfg.seed, i)),
                    keys.clone(),
                    behaviours[i as usize],
                )?)
            };
            let twinned = twins.contains(&i);
            slots.push(Slot {
                member,
                disk: Disk::default(),
                busy_until: Time::ZERO,
                cpu_until: Time::ZERO,
                cpu_us: 0,
                behaviour: behaviours[i as usize],
                honest: behaviours[i as usize].is_none() && !twinned,
                identity: i,
                side: if twinned { false } else { sides[i as usize] },
                twinned,
            });
        }
        for i in n..parties {
            let member = Member::joining(
                EpochView::genesis(replica.clone()),
                i,
                member_seed(cfg.seed, i),
                memo.clone(),
                consensus::member_key(&member_seed(cfg.seed, i)),
                keys.clone(),
                dkg.phase_timeout_us,
                dkg.max_attempts,
            )?;
            slots.push(Slot {
                member: Some(member),
                disk: Disk::default(),
                busy_until: Time::ZERO,
                cpu_until: Time::ZERO,
                cpu_us: 0,
                behaviour: None,
                honest: true,
                identity: i,
                side: false,
                twinned: false,
            });
        }
        let honest: Vec<bool> = slots.iter().map(|s| s.honest).collect();
        // The second instances: started from their twin's key material once its
        // DKG is over.
        let mut twin_slot = vec![None; parties as usize];
        for (j, m) in twins.iter().enumerate() {
            twin_slot[*m as usize] = Some(parties + j as u32);
            slots.push(Slot {
                member: None,
                disk: Disk::default(),
                busy_until: Time::ZERO,
                cpu_until: Time::ZERO,
                cpu_us: 0,
                behaviour: None,
                honest: false,
                identity: *m,
                side: true,
                twinned: true,
            });
        }
        let total = slots.len();
        let host = host_of(cfg, &costs);
        Ok(Engine {
            checker: Checker::new(&replica, S::ID, honest, cfg.seed),
            cfg: cfg.clone(),
            replica,
            costs,
            network,
            memo,
            slots,
            queue: EventQueue::new(),
            uplink_free: vec![Time::ZERO; total],
            host,
            net_rng: ChaCha20Rng::seed_from_u64(cfg.seed ^ NETWORK_SEED),
            load_rng: ChaCha20Rng::seed_from_u64(cfg.seed ^ LOAD_SEED),
            next_tx: None,
            trace: Sha256::new(),
            processed: 0,
            dkg_done: vec![None; total],
            phase_timeout_us: dkg.phase_timeout_us,
            max_attempts: dkg.max_attempts,
            keys,
            dkg_dealers: dealer_count,
            dkg_qualified: 0,
            dkg_disqualified: BTreeMap::new(),
            dkg_end: None,
            rounds_started_wall: None,
            consensus_messages: BTreeMap::new(),
            consensus_bytes: 0,
            dkg_messages: BTreeMap::new(),
            dkg_bytes: 0,
            stats: Stats::new(total),
            twin_slot,
            cpu_at_rounds_start: 0,
            parties,
            reshare,
            crash_times: Vec::new(),
            snapshot_key,
            loaded,
            loaded_summary: None,
            cut_at: None,
            rounds_trace: None,
            snapshot_error: None,
            started_wall: Instant::now(),
        })
    }

    fn push(&mut self, at: Time, node: u32, event: Event<S>) {
        self.queue.push(at, (node, event));
    }

    /// Starts the members: their DKG, or, from a snapshot, the rounds at its
    /// cut.
    fn start(&mut self) -> Result<(), SimError> {
        if let Some(snapshot) = self.loaded.take() {
            self.dkg_qualified = snapshot.summary.qualified;
            self.dkg_disqualified = snapshot.summary.disqualified.clone();
            self.dkg_bytes = snapshot.summary.bytes;
            self.loaded_summary = Some(snapshot.summary);
            return self
                .start_rounds(Time(snapshot.cut_us), snapshot.outputs)
                .map_err(|(_, e)| e.into());
        }
        for i in 0..self.cfg.nodes {
            self.push(Time::ZERO, i, Event::Start);
        }
        Ok(())
    }

    /// The cut of a run with a snapshot (see [`crate::snapshot`]): every
    /// honest member finished its DKG at `at`. Saves the snapshot if asked,
    /// then starts the rounds afresh.
    fn cut(&mut self, at: Time) {
        let outputs: Vec<Option<Arc<DkgOutput<S>>>> = (0..self.cfg.nodes as usize)
            .map(|i| self.slots[i].disk.dkg.clone())
            .collect();
        if let Some(SnapshotMode::Save(path)) = &self.cfg.dkg_snapshot {
            let snapshot = DkgSnapshot {
                key: self.snapshot_key.clone(),
                cut_us: at.0,
                summary: DkgSummary {
                    dealers: self.dkg_dealers,
                    qualified: self.dkg_qualified,
                    disqualified: self.dkg_disqualified.clone(),
                    messages_by_kind: self
                        .dkg_messages
                        .iter()
                        .map(|(k, v)| (k.to_string(), *v))
                        .collect(),
                    bytes: self.dkg_bytes,
                    wall_s: self.started_wall.elapsed().as_secs_f64(),
                },
                outputs: outputs.clone(),
            };
            if let Err(reason) = snapshot.save(path) {
                self.snapshot_error = Some(SimError::Snapshot {
                    path: path.clone(),
                    reason,
                });
            }
        }
        if let Err((node, e)) = self.start_rounds(at, outputs) {
            self.checker.fail(
                FailureKind::Crash,
                Some(node),
                at,
                format!("rebuilding the member from its keys failed: {e}"),
            );
        }
    }

    /// Starts the rounds at `at` from nothing but each genesis member's key
    /// material (`outputs`, by index): no event pending, every member and
    /// joiner built afresh, every CPU and link free, the network's and the
    /// load's randomness drawn anew. A run with a snapshot and the run that
    /// saved it both go through here, so their rounds are the same.
    fn start_rounds(
        &mut self,
        at: Time,
        outputs: Vec<Option<Arc<DkgOutput<S>>>>,
    ) -> Result<(), (u32, consensus::ConsensusError)> {
        self.queue = EventQueue::new();
        self.net_rng = ChaCha20Rng::seed_from_u64(self.cfg.seed ^ NETWORK_SEED ^ ROUNDS_SEED);
        self.load_rng = ChaCha20Rng::seed_from_u64(self.cfg.seed ^ LOAD_SEED ^ ROUNDS_SEED);
        self.next_tx = None;
        self.uplink_free.fill(Time::ZERO);
        self.host = host_of(&self.cfg, &self.costs);
        // The DKG's shared results are no use to the rounds.
        self.memo.clear();
        self.stats = Stats::new(self.slots.len());
        for slot in &mut self.slots {
            slot.member = None;
            slot.disk = Disk::default();
            slot.busy_until = at;
            slot.cpu_until = at;
        }
        // Each rebuild checks the member's shares against its keys: on
        // every thread.
        let behaviours: Vec<Option<Behaviour>> = self.slots.iter().map(|s| s.behaviour).collect();
        let members = parallel_map(&outputs, self.cfg.threads, |i, out| {
            let out = out.as_ref()?;
            let node = i as u32;
            let seed = member_seed(self.cfg.seed, node);
            Some(
                Member::restore(
                    self.replica.clone(),
                    out,
                    Vec::new(),
                    Vec::new(),
                    seed,
                    self.memo.clone(),
                    behaviours[i],
                )
                .map(|m| {
                    m.with_identity(
                        node,
                        consensus::member_key(&seed),
                        self.keys.clone(),
                        self.phase_timeout_us,
                        self.max_attempts,
                    )
                }),
            )
        });
        for (i, (out, member)) in outputs.into_iter().zip(members).enumerate() {
            let (Some(out), Some(member)) = (out, member) else {
                continue;
            };
            let node = i as u32;
            let member = member.map_err(|e| (node, e))?;
            self.slots[i].member = Some(member);
            self.slots[i].disk.dkg = Some(out.clone());
            self.stats.start(node, at);
            if self.slots[i].honest {
                self.checker
                    .on_group_key(node, at, out.keys[0].group_key().to_bytes());
            }
            self.push(at, node, Event::Start);
            self.start_twin(node, at, &out);
        }
        for i in self.cfg.nodes..self.parties {
            let member = Member::joining(
                EpochView::genesis(self.replica.clone()),
                i,
                member_seed(self.cfg.seed, i),
                self.memo.clone(),
                consensus::member_key(&member_seed(self.cfg.seed, i)),
                self.keys.clone(),
                self.phase_timeout_us,
                self.max_attempts,
            )
            .map_err(|e| (i, e))?;
            self.slots[i as usize].member = Some(member);
        }
        self.rounds_trace = Some(Sha256::new());
        self.begin_rounds(at);
        Ok(())
    }

    /// Whether the run waits for its cut: it has a snapshot, and its rounds
    /// have not started (members that finished their DKG early only help
    /// the others').
    fn before_cut(&self) -> bool {
        self.cfg.dkg_snapshot.is_some() && self.rounds_trace.is_none()
    }

    /// Honest members running a replica, by slot (not those waiting to join,
    /// or retired).
    fn honest_inside(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.honest && s.member.as_ref().is_some_and(|m| !m.is_outside()))
            .map(|(i, _)| i as u32)
    }

    /// Whether member `node` was cut off during the change of members: it
    /// sat on the listed side of a partition that lasted past the decision.
    /// Such a member is not excused, nor is one that crashed during the
    /// change: it asks for the deals, sub-shares and certificate it lacks and
    /// completes (`consensus::epoch`, "Faults and late members"). The report
    /// counts them (`lost_by_crash`, the name kept for scripts).
    fn cut_off_in_change(&self, node: u32) -> bool {
        let Some(r) = self.reshare.as_ref() else {
            return false;
        };
        match (r.decided_at(), self.dkg_end) {
            (Some(decided), Some(end)) => self.cfg.partitions.iter().any(|p| {
                end.plus_millis(p.heal_ms) >= decided
                    && p.side.iter().any(|[a, b]| (*a..=*b).contains(&node))
            }),
            _ => false,
        }
    }

    fn honest_alive_done(&self) -> bool {
        let target = Height::new(self.cfg.rounds);
        let honest: Vec<bool> = self.slots.iter().map(|s| s.honest).collect();
        self.reshare.as_ref().is_none_or(|r| r.complete(&honest))
            && !self.restart_ahead()
            && self
                .honest_inside()
                .all(|i| self.stats.finalized(i) >= target)
    }

    /// Whether an honest member is down with its restart still ahead: the run
    /// is not done without it (with every member down at once, no member runs
    /// at all, and the target must not count as reached by nobody).
    fn restart_ahead(&self) -> bool {
        let Some(next) = self.queue.next_time() else {
            return false;
        };
        self.crash_times.iter().any(|(node, _, back)| {
            let slot = &self.slots[*node as usize];
            slot.honest && slot.member.is_none() && *back != Time(u64::MAX) && next <= *back
        })
    }

    fn run(&mut self, progress: Option<Progress<'_>>) {
        let lookahead = self.network.min_latency_us().max(1);
        let max_time = Time(
            self.cfg
                .invariants
                .max_virtual_time_s
                .saturating_mul(1_000_000),
        );
        let mut last_progress_report = 0;
        let threads = self.cfg.threads.max(1);
        // At least the time to sit out 2f + 6 failed views: primaries and collectors
        // are elected at random, so Byzantine ones can follow each other for a few
        // views (with a third of them Byzantine, ten in a row happen well under
        // once in a thousand heights).
        let views = (2 * u64::from(self.replica.f) + 6).min(30);
        let liveness_bound = (self.cfg.invariants.liveness_bound_ms * 1000)
            .max(self.replica.recovery_bound_us(views));
        loop {
            if self.checker.failed() || self.honest_alive_done() {
                break;
            }
            self.schedule_load();
            let Some(t0) = self.queue.next_time() else {
                self.checker.fail(
                    FailureKind::Liveness,
                    None,
                    Time::ZERO,
                    "no events left before the target rounds".into(),
                );
                break;
            };
            if t0 > max_time {
                self.checker.fail(
                    FailureKind::Liveness,
                    None,
                    t0,
                    format!(
                        "target not reached within {} s of virtual time",
                        self.cfg.invariants.max_virtual_time_s
                    ),
                );
                break;
            }
            if self
                .checker
                .check_liveness(t0, liveness_bound, self.last_fault_heal())
                .is_some()
            {
                break;
            }
            let end = t0.plus_micros(lookahead);
            let mut per_node: BTreeMap<u32, Vec<(Time, Event<S>)>> = BTreeMap::new();
            while let Some((t, (node, event))) = self.queue.pop_before(end) {
                per_node.entry(node).or_default().push((t, event));
            }
            let effects = self.process_window(per_node, end, threads);
            for fx in effects {
                self.merge(fx);
            }
            if let Some(at) = self.cut_at.take() {
                self.cut(at);
            }
            self.schedule_reshare(end);
            if let Some(p) = progress {
                let done = self.min_honest_finalized();
                if done != last_progress_report {
                    last_progress_report = done;
                    p(done, self.cfg.rounds);
                }
            }
        }
        if !self.checker.failed() && !self.honest_alive_done() {
            self.checker.fail(
                FailureKind::Liveness,
                None,
                Time::ZERO,
                "stopped before the target rounds".into(),
            );
        }
    }

    fn min_honest_finalized(&self) -> u64 {
        self.honest_inside()
            .map(|i| self.stats.finalized(i).get())
            .min()
            .unwrap_or(0)
    }

    /// The operators propose the change once an honest member finalized its
    /// height.
    fn schedule_reshare(&mut self, now: Time) {
        let Some(r) = self.reshare.as_mut() else {
            return;
        };
        let reached = (0..self.cfg.nodes)
            .filter(|i| self.slots[*i as usize].honest)
            .any(|i| self.stats.finalized(i).get() >= r.at_height);
        if r.proposed.is_some() || !reached {
            return;
        }
        r.proposed = Some(now);
        let change = r.change.clone();
        for i in 0..self.cfg.nodes {
            self.queue.push(now, (i, Event::Propose(change.clone())));
        }
    }

    fn last_fault_heal(&self) -> Option<Time> {
        let origin = self.dkg_end?;
        let crashes = self
            .cfg
            .faults
            .crash
            .iter()
            .map(|c| origin.plus_millis(c.restart_ms.unwrap_or(c.at_ms)));
        crashes
            .chain(self.network.last_heal())
            .max()
            .or(Some(origin))
    }

    fn process_window(
        &mut self,
        per_node: BTreeMap<u32, Vec<(Time, Event<S>)>>,
        end: Time,
        threads: usize,
    ) -> Vec<NodeEffects<S>> {
        let shared = Shared {
            costs: &self.costs,
            replica: &self.replica,
            memo: &self.memo,
            seed: self.cfg.seed,
            keys: &self.keys,
            phase_timeout_us: self.phase_timeout_us,
            max_attempts: self.max_attempts,
            parties: self.parties,
        };
        // Pair each busy node with exclusive access to its slot.
        let mut work: Vec<Work<'_, S>> = Vec::with_capacity(per_node.len());
        let mut events = per_node.into_iter().peekable();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if events.peek().is_some_and(|(n, _)| *n as usize == i) {
                let (n, evs) = events.next().expect("peeked");
                work.push((n, slot, evs));
            }
        }
        if let Some(host) = self.host.as_mut() {
            return run_on_host(work, host, end, &shared);
        }
        if threads <= 1 || work.len() < 2 {
            return work
                .into_iter()
                .map(|(n, slot, evs)| run_node(n, slot, evs, end, &shared))
                .collect();
        }
        // Workers take the nodes one at a time (a dealer's deal costs
        // thousands of times a receiver's step: fixed chunks left most
        // workers idle), and the effects go back in node order, so the
        // trace is the same for any thread count. A worker's MSMs stay on
        // it: blst's one shared pool would serialize them all.
        let count = work.len();
        let queue: Vec<std::sync::Mutex<Option<Work<'_, S>>>> = work
            .into_iter()
            .map(|w| std::sync::Mutex::new(Some(w)))
            .collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut done: Vec<(usize, NodeEffects<S>)> = Vec::with_capacity(count);
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads.min(count))
                .map(|_| {
                    let (queue, next, shared) = (&queue, &next, &shared);
                    s.spawn(move || {
                        beacon::curve::set_msm_pool(false);
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(item) = queue.get(i) else {
                                break;
                            };
                            let taken = item.lock().unwrap_or_else(|e| e.into_inner()).take();
                            if let Some((n, slot, evs)) = taken {
                                mine.push((i, run_node(n, slot, evs, end, shared)));
                            }
                        }
                        mine
                    })
                })
                .collect();
            for h in handles {
                done.extend(
                    h.join()
                        .expect("simulation worker panicked outside a member"),
                );
            }
        });
        done.sort_unstable_by_key(|(i, _)| *i);
        done.into_iter().map(|(_, fx)| fx).collect()
    }

    fn schedule_load(&mut self) {
        let rate = self.cfg.load.tx_per_second;
        let Some(origin) = self.dkg_end else { return };
        if rate <= 0.0 {
            return;
        }
        let horizon = self.queue.next_time().map_or(origin, |t| t.plus_micros(1));
        let interval = (1e6 / rate).max(1.0) as u64;
        let mut next = self.next_tx.unwrap_or(origin);
        while next < horizon {
            let node = self.load_rng.gen_range(0..self.cfg.nodes);
            let mut tx = vec![0u8; self.cfg.load.tx_bytes.max(8)];
            self.load_rng.fill(&mut tx[..]);
            self.push(next, node, Event::Transaction(tx));
            next = next.plus_micros(interval);
        }
        self.next_tx = Some(next);
    }

    /// Applies one node's effects: network, timers, observations. Sequential, in
    /// node order: the only place that draws network randomness.
    fn merge(&mut self, fx: NodeEffects<S>) {
        self.trace.update(fx.node.to_be_bytes());
        self.trace.update(&fx.trace);
        if let Some(rounds) = self.rounds_trace.as_mut() {
            rounds.update(fx.node.to_be_bytes());
            rounds.update(&fx.trace);
        }
        self.processed += fx.processed;
        let node = fx.node;
        let honest = self.slots[node as usize].honest;
        let before_cut = self.before_cut();
        for (at, output) in fx.outputs {
            // Before the cut, a member that finished its DKG early only helps
            // the others': what its replica does is dropped.
            if before_cut
                && matches!(
                    &output,
                    MemberOutput::Effect(
                        Effect::Send {
                            message: Envelope::Consensus(_),
                            ..
                        } | Effect::Broadcast(Envelope::Consensus(_))
                    ) | MemberOutput::Event(_)
                        | MemberOutput::Epoch(_)
                        | MemberOutput::SyncFromStore { .. }
                )
            {
                continue;
            }
            if let MemberOutput::Effect(
                Effect::Send {
                    message: Envelope::Consensus(m),
                    ..
                }
                | Effect::Broadcast(Envelope::Consensus(m)),
            ) = &output
            {
                if honest {
                    self.checker.on_signed(node, at, m);
                }
            }
            match output {
                MemberOutput::Effect(Effect::Send { to, message }) => {
                    self.send(node, at, &[to], message)
                }
                MemberOutput::Effect(Effect::Broadcast(envelope)) => {
                    let me = self.slots[node as usize].identity;
                    let all: Vec<NodeIndex> = broadcast_receivers(me, self.parties).collect();
                    self.send(node, at, &all, envelope);
                }
                MemberOutput::Effect(Effect::SetTimer { at: when, timer }) => {
                    self.push(when, node, Event::Timer(timer))
                }
                // Answered from (and written to) the node's disk in `run_node`.
                MemberOutput::SyncFromStore { .. } | MemberOutput::PersistVotes(_) => {}
                MemberOutput::DkgComplete(out) => self.on_dkg_complete(node, at, &out),
                MemberOutput::DkgFailed(reason) => {
                    if self.slots[node as usize].honest {
                        self.checker.fail(
                            FailureKind::Liveness,
                            Some(node),
                            at,
                            format!("DKG failed: {reason}"),
                        );
                    }
                }
                // The checker and the statistics watch honest members only.
                MemberOutput::Event(e) if honest => {
                    dispatch(&mut self.checker, NodeIndex(node), at, &e);
                    dispatch(&mut self.stats, NodeIndex(node), at, &e);
                }
                MemberOutput::Event(_) => {}
                MemberOutput::Epoch(e) if honest => self.on_epoch_event(node, at, e),
                MemberOutput::Epoch(_) => {}
            }
        }
        if let Some((t, msg)) = fx.panic {
            self.checker.fail(
                FailureKind::Crash,
                Some(node),
                t,
                format!("member panicked: {msg}"),
            );
        }
    }

    /// The slot that receives a consensus message from slot `from` to member
    /// `to`, if any: a twin's instances each talk to their own side only.
    fn route(&self, from: u32, to: u32) -> Option<u32> {
        let sender = &self.slots[from as usize];
        if let Some(twin) = self.twin_slot.get(to as usize).copied().flatten() {
            if self.slots[twin as usize].member.is_some() {
                return Some(if sender.side { twin } else { to });
            }
        }
        let receiver = &self.slots[to as usize];
        (!sender.twinned || sender.side == receiver.side).then_some(to)
    }

    fn send(&mut self, from: u32, at: Time, to: &[NodeIndex], envelope: Envelope<S>) {
        beacon::cost::take_encoded();
        let bytes = envelope.encode().map(|b| b.len()).unwrap_or(0);
        let points = beacon::cost::take_encoded();
        let consensus = matches!(envelope, Envelope::Consensus(_));
        let transmit = self.network.transmit_us(bytes);
        let envelope = InFlight::new(envelope);
        let identity = self.slots[from as usize].identity;
        for t in to {
            let slot = if consensus {
                match self.route(from, t.0) {
                    Some(s) => s,
                    None => continue,
                }
            } else {
                t.0
            };
            let depart = at
                .max(self.uplink_free[from as usize])
                .plus_micros(transmit);
            self.uplink_free[from as usize] = depart;
            if consensus {
                *self.consensus_messages.entry(envelope.kind()).or_default() += 1;
                self.consensus_bytes += bytes as u64;
            } else {
                *self.dkg_messages.entry(envelope.kind()).or_default() += 1;
                self.dkg_bytes += bytes as u64;
            }
            let arrivals =
                self.network
                    .arrivals(&mut self.net_rng, identity, t.0, depart, !consensus);
            for arrival in arrivals {
                self.push(
                    arrival,
                    slot,
                    Event::Deliver {
                        from: NodeIndex(identity),
                        envelope: envelope.clone(),
                        bytes,
                        points,
                    },
                );
            }
        }
    }

    fn on_dkg_complete(&mut self, node: u32, at: Time, out: &Arc<DkgOutput<S>>) {
        self.dkg_done[node as usize] = Some(at);
        self.stats.start(node, at);
        self.start_twin(node, at, out);
        if self.slots[node as usize].honest {
            let key = out.keys[0].group_key().to_bytes();
            self.checker.on_group_key(node, at, key);
            self.dkg_qualified = out.qual.len() as u32;
            for (dealer, reason) in &out.disqualified {
                self.dkg_disqualified
                    .entry(dealer.0)
                    .or_insert_with(|| reason.clone());
            }
        }
        // Genesis members only: joiners have no DKG of their own.
        let all_done =
            self.slots.iter().enumerate().all(|(i, s)| {
                self.dkg_done[i].is_some() || !s.honest || i as u32 >= self.cfg.nodes
            });
        if all_done && self.dkg_end.is_none() && self.cut_at.is_none() {
            let end = self.dkg_done.iter().flatten().max().copied().unwrap_or(at);
            if self.cfg.dkg_snapshot.is_some() {
                self.cut_at = Some(end);
            } else {
                self.begin_rounds(end);
            }
        }
    }

    /// Member `node`'s twin, if it has one, starts its second instance at
    /// `at` with `out`: the same keys, its own randomness.
    fn start_twin(&mut self, node: u32, at: Time, out: &Arc<DkgOutput<S>>) {
        let Some(twin) = self.twin_slot.get(node as usize).copied().flatten() else {
            return;
        };
        let mut seed = member_seed(self.cfg.seed, node);
        seed[0] ^= 0x77;
        if let Ok(m) = Member::restore(
            self.replica.clone(),
            out,
            Vec::new(),
            Vec::new(),
            seed,
            self.memo.clone(),
            None,
        ) {
            let slot = &mut self.slots[twin as usize];
            slot.member = Some(m);
            slot.disk.dkg = Some(out.clone());
            self.dkg_done[twin as usize] = Some(at);
            self.stats.start(twin, at);
            self.push(at, twin, Event::Start);
        }
    }

    /// The rounds start at `end`: the faults of the scenario are scheduled
    /// from there.
    fn begin_rounds(&mut self, end: Time) {
        self.dkg_end = Some(end);
        self.rounds_started_wall = Some(Instant::now());
        self.cpu_at_rounds_start = self.slots.iter().map(|s| s.cpu_us).sum();
        self.network
            .install_partitions(&self.cfg.partitions, end, self.cfg.nodes);
        let crashes = self.cfg.faults.crash.clone();
        for c in crashes {
            let crash = Event::Crash {
                lose_votes: c.lose_votes,
            };
            self.push(end.plus_millis(c.at_ms), c.node, crash);
            let back = c.restart_ms.map_or(Time(u64::MAX), |r| end.plus_millis(r));
            self.crash_times
                .push((c.node, end.plus_millis(c.at_ms), back));
            if let Some(r) = c.restart_ms {
                self.push(end.plus_millis(r), c.node, Event::Restart);
            }
        }
    }

    /// An honest member's step of an epoch change: recorded, and checked (a
    /// failure is a liveness violation; new key material under another group
    /// key a safety one).
    fn on_epoch_event(&mut self, node: u32, at: Time, event: EpochEvent<S>) {
        if let Some(r) = self.reshare.as_mut() {
            r.on_event(node, at, &event);
        }
        match event {
            EpochEvent::Failed { epoch, reason } => self.checker.fail(
                FailureKind::Liveness,
                Some(node),
                at,
                format!("the change into epoch {epoch} failed: {reason}"),
            ),
            EpochEvent::Started {
                epoch,
                members,
                config,
                output,
                ..
            } => {
                let key = output.keys[0].group_key().to_bytes();
                if self
                    .checker
                    .group_key()
                    .is_some_and(|k| k != key.as_slice())
                {
                    self.checker.fail(
                        FailureKind::Safety,
                        Some(node),
                        at,
                        "the new epoch's beacon key has another group key".into(),
                    );
                }
                if node >= self.cfg.nodes {
                    self.stats.start(node, at);
                }
                let disk = &mut self.slots[node as usize].disk;
                disk.dkg = Some(output);
                disk.epoch = Some(EpochView::new(epoch, members, config));
            }
            EpochEvent::Retired { .. } => {
                // It erased its shares: nothing to restart with.
                self.slots[node as usize].disk.dkg = None;
            }
            _ => {}
        }
    }

    fn chain_json(&self) -> Option<serde_json::Value> {
        let key = self.checker.group_key()?;
        let info = self.replica.chain_info(key.to_vec(), S::ID);
        let beacons: Vec<BeaconJson> = self
            .checker
            .beacons()
            .iter()
            .map(BeaconJson::from)
            .collect();
        Some(serde_json::json!({ "info": ChainInfoJson::from(&info), "beacons": beacons }))
    }

    fn report(&self, wall_s: f64) -> Report {
        let rounds_wall_s = self
            .rounds_started_wall
            .map(|t| t.elapsed().as_secs_f64())
            .unwrap_or(0.0);
        let dkg_wall_s = (wall_s - rounds_wall_s).max(0.0);
        let beacons = self.checker.beacons();
        let rounds = beacons.len() as u64;
        let heights = self.checker.committed_heights();
        let n = self.cfg.nodes as f64;
        let per = |v: u64| {
            if heights > 0 {
                v as f64 / heights as f64
            } else {
                0.0
            }
        };
        let cpu_rounds: u64 =
            self.slots.iter().map(|s| s.cpu_us).sum::<u64>() - self.cpu_at_rounds_start;
        let last = beacons.last();
        let finish = |mut trace: Sha256| {
            if let Some(b) = last {
                trace.update(b.round.to_be_bytes());
                trace.update(&b.signature);
            }
            hex::encode(trace.finalize())
        };
        let mut dkg_messages: BTreeMap<String, u64> = self
            .loaded_summary
            .as_ref()
            .map(|s| s.messages_by_kind.clone())
            .unwrap_or_default();
        for (k, v) in &self.dkg_messages {
            *dkg_messages.entry(k.to_string()).or_default() += v;
        }
        let dkg_snapshot = self.cfg.dkg_snapshot.as_ref().map(|mode| {
            let (action, file) = match mode {
                SnapshotMode::Save(p) => ("saved", p),
                SnapshotMode::Load(p) => ("loaded", p),
            };
            SnapshotReport {
                action: action.into(),
                file: file.display().to_string(),
                dkg_wall_s: self
                    .loaded_summary
                    .as_ref()
                    .map_or(dkg_wall_s, |s| s.wall_s),
            }
        });
        let f = self.replica.f;
        let consensus_messages: u64 = self.consensus_messages.values().sum();
        Report {
            scenario: self.cfg.name.clone(),
            seed: self.cfg.seed,
            nodes: self.cfg.nodes,
            f,
            c: self.replica.c,
            scheme: S::ID.as_str().to_string(),
            threads: self.cfg.threads,
            byzantine: self.cfg.faults.byzantine,
            rounds,
            heights_committed: heights,
            fast_path_ratio: self.stats.fast_path_ratio(),
            view_changes: self.stats.view_changes(),
            dkg_virtual_ms: self.dkg_end.map(|t| t.as_millis_f64()).unwrap_or(0.0),
            dkg_dealers: self.dkg_dealers,
            dkg_qualified: self.dkg_qualified,
            dkg_disqualified: self.dkg_disqualified.clone(),
            dkg_wall_s,
            dkg_messages_per_member: dkg_messages.values().sum::<u64>() as f64 / n,
            dkg_messages_by_kind: dkg_messages,
            dkg_bytes_per_member: self.dkg_bytes as f64 / n,
            beacon_latency_ms: self.stats.beacon_latency(),
            commit_latency_ms: self.stats.commit_latency(),
            messages_per_round: per(consensus_messages),
            messages_by_kind: self
                .consensus_messages
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
            bytes_per_round: per(self.consensus_bytes),
            messages_per_node_per_round: per(consensus_messages) / n,
            bytes_per_node_per_round: per(self.consensus_bytes) / n,
            cpu_ms_per_node_per_round: per(cpu_rounds) / n / 1000.0,
            wall_s,
            rounds_wall_s,
            events: self.processed,
            events_per_s: if wall_s > 0.0 {
                self.processed as f64 / wall_s
            } else {
                0.0
            },
            virtual_s: self.checker.last_time().as_millis_f64() / 1000.0,
            trace_hash: finish(self.trace.clone()),
            rounds_trace_hash: self.rounds_trace.clone().map(finish),
            dkg_snapshot,
            final_beacon: last.map(|b| FinalBeacon {
                round: b.round,
                signature: hex::encode(&b.signature),
                randomness: hex::encode(b.randomness()),
            }),
            group_public_key: self.checker.group_key().map(hex::encode),
            violations: self.checker.violations().to_vec(),
            evidence: self.stats.evidence().clone(),
            reshare: self.reshare.as_ref().map(|r| {
                let per_round = self.stats.per_round(rounds);
                let p50s: Vec<f64> = per_round.iter().map(|p| p.beacon_ms.p50).collect();
                let median = crate::report::percentiles(&p50s).p50;
                // The whole change: from the round before the deciding
                // height (the deals and their checks start there) to three
                // rounds into the new epoch.
                let switch = r.start_height().map_or(0, |h| h.get());
                let decided = r.decided_height().map_or(switch, |h| h.get());
                let from = decided.min(switch).saturating_sub(1);
                let around = per_round
                    .iter()
                    .filter(|p| (from..switch + 3).contains(&p.round))
                    .map(|p| p.beacon_ms.max)
                    .fold(0.0, f64::max);
                let gap = if median > 0.0 { around / median } else { 0.0 };
                {
                    let lost = (0..self.slots.len() as u32)
                        .filter(|i| self.cut_off_in_change(*i))
                        .count() as u32;
                    r.report(gap, self.dkg_end.map_or(0.0, |t| t.as_millis_f64()), lost)
                }
            }),
            per_round: self.stats.per_round(rounds),
        }
    }
}
