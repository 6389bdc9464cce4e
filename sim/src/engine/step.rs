//! The step: one window's events handled at each node, in parallel on the
//! workers ([`Engine::process_window`]) or in time order on a modelled host's
//! shared cores, and one event at one node ([`step`]): its input to the
//! member, its CPU and durable writes, and the outputs it hands back
//! ([`NodeEffects`]) for the merge.

use super::effects::{encode_sends, Encoded};
use super::node::{member_seed, recent, CrashPoint, Event, Slot};
use super::pool::{Pool, Task};
use super::Engine;
use crate::cost_model::CostModel;
use crate::host::{durable_write, Host};
use crate::host_parallelism::{thread_cpu, TaskMeasure};
use beacon::cost::EncodedPoints;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::schedule::EventQueue;
use beacon::{Scheme, Time};
use consensus::disk::{persist, write_kind, EpochRecord};
use consensus::epoch::Directory;
use consensus::epoch::EpochView;
use consensus::replica::sync_response;
use consensus::{
    Behaviour, ConsensusError, Envelope, Event as ReplicaEvent, Member, MemberInput, MemberOutput,
    Message, ReplicaConfig,
};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

/// What one node did in one window.
pub(super) struct NodeEffects<S: Scheme> {
    pub(super) node: u32,
    pub(super) outputs: Vec<(Time, MemberOutput<S>)>,
    /// When the node's store thread starts each durable write of a finalized
    /// height (only where the host is modelled).
    pub(super) store_writes: Vec<Time>,
    pub(super) trace: Vec<u8>,
    pub(super) processed: u64,
    pub(super) panic: Option<(Time, String)>,
    /// The crashes that struck between two durable writes.
    pub(super) crashed: Vec<CrashHit>,
    /// What handling them took on the host (`crate::host_parallelism`).
    pub(super) host: TaskMeasure,
    /// Per output, what the merge needs of it if it is a send
    /// ([`encode_sends`]).
    pub(super) encoded: Vec<Option<Encoded>>,
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
            crashed: Vec::new(),
            host: TaskMeasure::default(),
            encoded: Vec::new(),
        }
    }
}

/// A window's effects, in node order, and the CPU time of the tasks the
/// calling thread ran.
pub(super) struct WindowEffects<S: Scheme> {
    pub(super) effects: Vec<NodeEffects<S>>,
    pub(super) on_caller: std::time::Duration,
}

impl<S: Scheme> WindowEffects<S> {
    /// Effects of tasks that all ran on the calling thread.
    fn here(effects: Vec<NodeEffects<S>>) -> Self {
        WindowEffects {
            on_caller: effects.iter().map(|fx| fx.host.own).sum(),
            effects,
        }
    }
}

/// One node's share of a window: its index and its state (with its pending
/// events).
type Work<'a, S> = (u32, &'a mut Slot<S>);

/// What every step of a run reads, fixed for the run (the workers of
/// [`super::pool`] hold it).
pub(super) struct Context {
    pub(super) costs: CostModel,
    pub(super) replica: ReplicaConfig,
    pub(super) memo: Arc<Memo>,
    pub(super) seed: u64,
    /// Every party's keys, and the DKG's timing: a restarted member's
    /// identity.
    pub(super) directory: Directory,
    pub(super) dkg_timing: beacon::dkg::DkgTiming,
    /// The genesis DKG, which a member down through it runs when back.
    pub(super) dkg_config: beacon::dkg::DkgConfig,
    /// Every party, joiners included: the receivers of a broadcast and its sender.
    pub(super) parties: u32,
}

/// Read-only context of a window.
pub(super) struct Shared<'a> {
    costs: &'a CostModel,
    replica: &'a ReplicaConfig,
    memo: &'a Arc<Memo>,
    seed: u64,
    /// Every party's keys, and the DKG's timing: a restarted member's
    /// identity.
    directory: &'a Directory,
    dkg_timing: beacon::dkg::DkgTiming,
    /// The genesis DKG, which a member down through it runs when back.
    dkg_config: &'a beacon::dkg::DkgConfig,
    /// Every party, joiners included: the receivers of a broadcast and its sender.
    parties: u32,
    /// Whether the merge drops what members do as replicas (before the cut
    /// of a run with a snapshot).
    before_cut: bool,
}

impl<'a> Shared<'a> {
    /// A window's context: the run's, and whether it is before the cut.
    pub(super) fn new(ctx: &'a Context, before_cut: bool) -> Self {
        Shared {
            costs: &ctx.costs,
            replica: &ctx.replica,
            memo: &ctx.memo,
            seed: ctx.seed,
            directory: &ctx.directory,
            dkg_timing: ctx.dkg_timing,
            dkg_config: &ctx.dkg_config,
            parties: ctx.parties,
            before_cut,
        }
    }
}

/// Runs one node's events of a window `[.., end)`, on a core of its own.
/// `started`: this thread's CPU clock when the task began. A thread that
/// runs tasks one after the other passes the clock the task before returned
/// (taking the next task and handing one back are then part of the tasks,
/// and the clock, a system call, is read once per task). Returns the
/// effects and the clock at their end.
pub(super) fn run_node<S: Scheme>(
    node: u32,
    slot: &mut Slot<S>,
    end: Time,
    shared: &Shared<'_>,
    started: Duration,
) -> (NodeEffects<S>, Duration) {
    beacon::host_work::take_task();
    let mut events = slot.pending.take_before(end);
    let first_event = events.first().map_or("none", |(_, e)| e.tag().1);
    let mut fx = NodeEffects::new(node);
    // Local queue, in the window's order; own timers below `end` join it.
    let mut local = EventQueue::new();
    for (t, e) in events.drain(..) {
        local.push(t, e);
    }
    while let Some((at, event)) = local.pop() {
        let timers = step(slot, Ready { at, event }, end, shared, &mut fx, None);
        if fx.panic.is_some() {
            break;
        }
        for (t, e) in timers {
            local.push(t, e);
        }
    }
    fx.encoded = encode_sends(&fx.outputs, shared.before_cut);
    let ended = thread_cpu();
    let own = ended.saturating_sub(started);
    fx.host = TaskMeasure::new(own, beacon::host_work::take_task(), first_event);
    (fx, ended)
}

/// Runs every node's events of a window `[.., end)` in time order on the host's
/// shared cores: an input starts when its node and a core are both free.
fn run_on_host<S: Scheme>(
    work: Vec<Work<'_, S>>,
    host: &mut Host,
    end: Time,
    shared: &Shared<'_>,
) -> Vec<NodeEffects<S>> {
    // One thread handles the whole window in time order: one task.
    let started = thread_cpu();
    beacon::host_work::take_task();
    let mut slots: Vec<(u32, &mut Slot<S>, NodeEffects<S>)> = Vec::with_capacity(work.len());
    let mut queue = EventQueue::new();
    for (k, (node, slot)) in work.into_iter().enumerate() {
        for (t, e) in slot.pending.take_before(end) {
            queue.push(t, (k, e));
        }
        slots.push((node, slot, NodeEffects::new(node)));
    }
    while let Some((at, (k, event))) = queue.pop() {
        let (_, slot, fx) = &mut slots[k];
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
        let ready = Ready {
            at: at.max(free),
            event,
        };
        let timers = step(slot, ready, end, shared, fx, Some(&mut host.disk));
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
    let mut effects: Vec<NodeEffects<S>> = slots.into_iter().map(|(_, _, fx)| fx).collect();
    for fx in &mut effects {
        fx.encoded = encode_sends(&fx.outputs, shared.before_cut);
    }
    if let Some(first) = effects.first_mut() {
        let own = thread_cpu().saturating_sub(started);
        first.host = TaskMeasure::new(own, beacon::host_work::take_task(), "host's cores");
    }
    effects
}

/// An event for a node, and when it can start there: its arrival, or later
/// when it waited for a core.
struct Ready<S: Scheme> {
    /// When the event can start (the node may still be busy then).
    at: Time,
    /// The event.
    event: Event<S>,
}

/// Handles one event at a node: it starts when it is `ready` or when the
/// node is free, whichever is later. Returns the node's own timers that fall
/// before `end`, to handle in this window. `disk`: when the host's shared disk
/// is next free, if modelled (else each node has a disk of its own).
fn step<S: Scheme>(
    slot: &mut Slot<S>,
    ready: Ready<S>,
    end: Time,
    shared: &Shared<'_>,
    fx: &mut NodeEffects<S>,
    mut disk: Option<&mut Time>,
) -> Vec<(Time, Event<S>)> {
    let Ready { at: ready, event } = ready;
    let start = ready.max(slot.busy_until);
    record(fx, start, &event);
    let (points, delivered) = match &event {
        Event::Deliver { points, .. } => (*points, true),
        _ => (EncodedPoints::default(), false),
    };
    let Some((input, bytes)) = member_input(slot, start, event, shared, fx) else {
        return Vec::new();
    };
    let Some(member) = slot.member.as_mut() else {
        return Vec::new();
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
            return Vec::new();
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
    let done = charge(
        slot,
        start,
        cpu,
        persisted,
        shared.costs,
        disk.as_deref_mut(),
    );
    let computed = start.plus_micros(cpu);
    keep_outputs(slot, fx, outputs, (computed, done), end, disk.is_some())
}

/// Adds one event to the node's trace: when it starts, its kind, its sender
/// and its height.
fn record<S: Scheme>(fx: &mut NodeEffects<S>, start: Time, event: &Event<S>) {
    let (kind, what, from, height) = event.tag();
    fx.trace.extend_from_slice(&start.0.to_be_bytes());
    fx.trace.extend_from_slice(&[kind]);
    fx.trace.extend_from_slice(what.as_bytes());
    fx.trace.extend_from_slice(&from.to_be_bytes());
    fx.trace.extend_from_slice(&height.to_be_bytes());
    fx.processed += 1;
}

/// The member's input for `event` and the bytes it reads, or `None` where
/// the event leaves the member nothing to handle: a crash (the member
/// stops), or a restart that finds it running, finds no keys on its disk, or
/// fails (recorded in `fx`). A restart that succeeds starts the member.
fn member_input<S: Scheme>(
    slot: &mut Slot<S>,
    start: Time,
    event: Event<S>,
    shared: &Shared<'_>,
    fx: &mut NodeEffects<S>,
) -> Option<(MemberInput<S>, usize)> {
    Some(match event {
        Event::Crash {
            point: Some(point), ..
        } => {
            // It strikes between two writes of a later step (`keep_outputs`).
            slot.armed = Some(point);
            return None;
        }
        Event::Crash { lose_votes, .. } => {
            slot.member = None;
            if lose_votes {
                slot.disk.votes.clear();
            }
            return None;
        }
        Event::Restart => {
            if slot.member.is_some() {
                return None;
            }
            match restore(slot, shared)? {
                Ok(m) => slot.member = Some(m),
                Err(e) => {
                    fx.panic = Some((start, format!("restore failed: {e}")));
                    return None;
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
        Event::Propose(change) => (MemberInput::ProposeEpoch(*change), 0),
    })
}

/// A restarted member, rebuilt from its disk (its keys, epoch, recent chain,
/// vote record and seed); a genesis member whose disk holds nothing but its
/// seed (it was down while the others dealt) runs the genesis DKG again from
/// that seed, as a node does; a member of its recorded epoch without keys
/// (it gave up keys it could not recombine) waits in it as a node does
/// (`Member::joining`); `None` for a member without keys that left and for
/// a joiner without keys.
fn restore<S: Scheme>(
    slot: &Slot<S>,
    shared: &Shared<'_>,
) -> Option<Result<Member<S>, ConsensusError>> {
    let Some(dkg) = slot.disk.dkg.clone() else {
        if let Some(record) = &slot.disk.epoch {
            let me = consensus::DirectoryIndex::new(slot.identity);
            if record.members.contains(&me) {
                let member = Member::joining(
                    record.view(),
                    super::setup::identity(shared.seed, slot.identity, shared.directory),
                    slot.disk.seed(),
                    shared.memo.clone(),
                    shared.dkg_timing,
                )
                .map(|m| slot.disk.restore_deals(m));
                return Some(member);
            }
        }
        let fresh = slot.disk.epoch.is_none() && slot.disk.chain.is_empty();
        return (fresh && slot.identity < shared.replica.n).then(|| {
            Member::new(
                shared.replica.clone(),
                shared.dkg_config.clone(),
                super::setup::identity(shared.seed, slot.identity, shared.directory),
                slot.disk.seed(),
                shared.memo.clone(),
                slot.behaviour.map(Behaviour::adversary),
            )
        });
    };
    let epoch = slot
        .disk
        .epoch
        .as_ref()
        .map(EpochRecord::view)
        .unwrap_or_else(|| EpochView::genesis(shared.replica.clone(), shared.directory));
    let seed = member_seed(shared.seed, slot.identity);
    let restored = Member::restore_in(
        epoch,
        consensus::RestoredParts {
            output: &dkg,
            consensus: consensus::consensus_key(&seed),
            chain: recent(&slot.disk.chain),
            votes: slot.disk.votes.clone(),
            seed: slot.disk.seed(),
            memo: shared.memo.clone(),
            adversary: slot.behaviour.map(Behaviour::adversary),
        },
    )
    .map(|m| {
        let m = m.with_identity(
            super::setup::identity(shared.seed, slot.identity, shared.directory),
            shared.dkg_timing,
        );
        let m = match (&slot.disk.epoch, slot.disk.dealing_seed) {
            (None, Some(mark)) => m.with_finished_dkg(shared.dkg_config.clone(), mark),
            _ => m,
        };
        slot.disk.restore_deals(m)
    });
    Some(restored)
}

/// Charges the node's CPU for a step that started at `start`, computed for
/// `cpu` microseconds and made `persisted` durable writes of its vote
/// record, and returns when the node is done: each write's CPU on the
/// node's core, then its time on the disk (`disk`, the host's shared one if
/// modelled).
fn charge<S: Scheme>(
    slot: &mut Slot<S>,
    start: Time,
    cpu: u64,
    persisted: usize,
    costs: &CostModel,
    mut disk: Option<&mut Time>,
) -> Time {
    let (write_cpu, write_disk) = costs.persist_split_us();
    slot.cpu_us += cpu + (write_cpu + write_disk) * persisted as u64;
    slot.cpu_until = start.plus_micros(cpu + write_cpu * persisted as u64);
    let mut done = slot.cpu_until;
    for _ in 0..persisted {
        done = durable_write(disk.as_deref_mut(), done, write_disk);
    }
    slot.busy_until = done;
    done
}

/// Keeps a step's outputs: the node's own timers before `end` are returned
/// (handled in this window), what goes to its disk is written there, a sync
/// request is answered from its disk, and the rest leaves through `fx`: at
/// `computed` (the step's CPU done) what comes before the first durable write
/// of the vote record, at `done` (the writes done too) what comes after it.
/// A crash armed between two writes strikes there: nothing after it leaves.
/// `host_disk`: the host's store thread writes finalized heights.
fn keep_outputs<S: Scheme>(
    slot: &mut Slot<S>,
    fx: &mut NodeEffects<S>,
    outputs: Vec<MemberOutput<S>>,
    (computed, written): (Time, Time),
    end: Time,
    host_disk: bool,
) -> Vec<(Time, Event<S>)> {
    // A step that sends to every member (a dealer's shares) hands back
    // thousands of outputs at once: room for exactly those. Doubling would
    // leave up to half of each buffer empty while the window waits for its
    // merge: at 4,096 members each of 379 dealers' 4,100 outputs (400 bytes
    // each) sat in a buffer of 8,192, 1.2 GB in all. Small steps still grow
    // the buffer by at least its length.
    let spare = fx.outputs.capacity() - fx.outputs.len();
    if outputs.len() > spare {
        fx.outputs
            .reserve_exact(outputs.len().max(fx.outputs.len()));
    }
    let mut local = Vec::new();
    let mut done = computed;
    let writes: Vec<&'static str> = outputs.iter().filter_map(write_kind).collect();
    let mut made = 0;
    for o in outputs {
        // The member's durable writes, in its order, each before anything
        // that follows leaves the node (`consensus::disk`).
        if let Some(member) = slot.member.as_mut() {
            match persist(member, &o, &mut slot.disk) {
                Ok(false) => {}
                Ok(true) => {
                    // The node waits for the writes of its vote record
                    // (`charge`).
                    if let MemberOutput::PersistVotes(_) = o {
                        done = written;
                    }
                    made += 1;
                    if let Some(point) = slot
                        .armed
                        .filter(|p| p.after_write as usize == made && writes.len() > made)
                    {
                        crash_between_writes(slot, fx, point, &writes, done, end, &mut local);
                        break;
                    }
                    continue;
                }
                Err(never) => match never {},
            }
        }
        match o {
            MemberOutput::Effect(Effect::SetTimer { at, timer }) if at < end => {
                local.push((at, Event::Timer(timer)))
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
                if host_disk {
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

impl<S: Scheme> Engine<S> {
    /// Runs the events before `end` of `nodes` (in slot order): on the
    /// modelled host's cores, on this thread, or on the run's workers
    /// ([`super::pool`]), started at the first window with two nodes.
    pub(super) fn process_window(
        &mut self,
        nodes: &[u32],
        end: Time,
        threads: usize,
    ) -> WindowEffects<S> {
        let before_cut = self.before_cut();
        let context = self.context();
        if threads > 1 && nodes.len() > 1 && self.host.is_none() {
            return self.process_on_pool(nodes, end, threads, before_cut, context);
        }
        let shared = Shared::new(&context, before_cut);
        // Pair each busy node with exclusive access to its slot.
        let mut work: Vec<Work<'_, S>> = Vec::with_capacity(nodes.len());
        let mut busy = nodes.iter().peekable();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if busy.next_if(|n| **n as usize == i).is_some() {
                work.push((i as u32, slot.as_mut()));
            }
        }
        if let Some(host) = self.host.as_mut() {
            return WindowEffects::here(run_on_host(work, host, end, &shared));
        }
        let mut clock = thread_cpu();
        let effects = work
            .into_iter()
            .map(|(n, slot)| {
                let (fx, ended) = run_node(n, slot, end, &shared, clock);
                clock = ended;
                fx
            })
            .collect();
        WindowEffects::here(effects)
    }

    /// The run's fixed context of a step (made at the first window).
    fn context(&mut self) -> Arc<Context> {
        if let Some(ctx) = &self.context {
            return ctx.clone();
        }
        let ctx = Arc::new(Context {
            costs: self.costs.clone(),
            replica: self.replica.clone(),
            memo: self.memo.clone(),
            seed: self.cfg.seed,
            directory: self.directory.clone(),
            dkg_timing: self.dkg_timing,
            dkg_config: self.dkg_config.clone(),
            parties: self.parties,
        });
        self.context = Some(ctx.clone());
        ctx
    }

    /// The window's nodes on the run's workers: each node's slot moves to
    /// the worker that takes it and back, and the effects come back in
    /// node order, so the trace is the same for any thread count.
    fn process_on_pool(
        &mut self,
        nodes: &[u32],
        end: Time,
        threads: usize,
        before_cut: bool,
        context: Arc<Context>,
    ) -> WindowEffects<S> {
        let pool = self
            .pool
            .get_or_insert_with(|| Pool::start(threads - 1, context));
        let mut tasks = Vec::with_capacity(nodes.len());
        for (index, &node) in nodes.iter().enumerate() {
            let empty = self
                .spare_slots
                .pop()
                // A stand-in while a worker holds the node's slot: never run.
                .unwrap_or_else(|| Box::new(Slot::new(node, None, [0; 32])));
            let slot = std::mem::replace(&mut self.slots[node as usize], empty);
            tasks.push(Task {
                index,
                node,
                slot,
                end,
                before_cut,
            });
        }
        let window = pool.run(tasks);
        let mut effects = Vec::with_capacity(nodes.len());
        for done in window.done.into_iter().flatten() {
            let empty = std::mem::replace(&mut self.slots[done.node as usize], done.slot);
            self.spare_slots.push(empty);
            match done.effects {
                Ok(fx) => effects.push(fx),
                Err(msg) => panic!("simulation worker panicked outside a member: {msg}"),
            }
        }
        WindowEffects {
            effects,
            on_caller: window.on_caller,
        }
    }
}

/// The armed crash `point` strikes at `at`, after the first `point.after_write`
/// of a step's `writes`: the member stops, the rest of the step is lost,
/// and its restart is scheduled (`local` before `end`, else by the merge).
fn crash_between_writes<S: Scheme>(
    slot: &mut Slot<S>,
    fx: &mut NodeEffects<S>,
    point: CrashPoint,
    writes: &[&'static str],
    at: Time,
    end: Time,
    local: &mut Vec<(Time, Event<S>)>,
) {
    slot.armed = None;
    slot.member = None;
    if point.lose_votes {
        slot.disk.votes.clear();
    }
    let (made, lost) = writes.split_at(point.after_write as usize);
    let back = point.down_us.map(|d| at.plus_micros(d));
    let mut merge_restarts = back;
    if let Some(back) = back.filter(|b| *b < end) {
        local.push((back, Event::Restart));
        merge_restarts = None;
    }
    fx.crashed.push(CrashHit {
        at,
        back,
        merge_restarts,
        written: made.to_vec(),
        lost: lost.to_vec(),
    });
}

/// Where an armed crash struck: when, when its member restarts (and whether
/// the merge schedules that restart: beyond the window), and the kinds of the
/// step's writes made and lost.
pub(super) struct CrashHit {
    pub(super) at: Time,
    pub(super) back: Option<Time>,
    pub(super) merge_restarts: Option<Time>,
    pub(super) written: Vec<&'static str>,
    pub(super) lost: Vec<&'static str>,
}
