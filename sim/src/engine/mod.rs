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
//! Their sends are then drawn through the network model, each sender from a
//! random stream and an uplink of its own (so the senders are drawn on the
//! threads, each in its own order, and each copy's delivery is built there
//! too), and the effects merged in node order: only the merge touches the
//! queue and the sequence numbers (one range of numbers per send, its copies
//! numbered in order within it; the copies join their receivers' pending
//! events on the threads afterwards). So the trace — and the beacon chain —
//! is the same whatever the thread count.
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
//!
//! # Files
//! - `mod.rs`: the `Engine`, the entry point [`run`] and the loop of windows;
//! - `setup.rs`: the engine built from a scenario, the members and rounds started;
//! - `node.rs`: what the engine keeps per node (events, member, disk);
//! - `pool.rs`: the run's worker threads;
//! - `step.rs`: a window's events handled at each node;
//! - `effects.rs`: each node's outputs carried out (network, timers, observers);
//! - `trace.rs`: the run's trace hash;
//! - `report.rs`: the report and the beacon chain.

mod effects;
mod node;
mod pool;
mod report;
mod setup;
mod step;
mod trace;

use crate::config::SimConfig;
use crate::cost_model::CostModel;
use crate::host::Host;
use crate::host_parallelism::{
    thread_cpu, HostMeter, PhaseMeter, TaskMeasure, WindowMeasure, WORKERS,
};
use crate::invariants::{Checker, FailureKind};
use crate::network::Network;
use crate::report::Report;
use crate::reshare::ReshareRun;
use crate::snapshot::{DkgSnapshot, DkgSummary, SnapshotKey};
use crate::stats::Stats;
use crate::SimError;
use beacon::dkg::Disqualification;
use beacon::memo::Memo;
use beacon::{Scheme, Time};
use consensus::epoch::Directory;
use consensus::{Height, ReplicaConfig};
use effects::{Carried, Delivery, PlannedWindow, Ranges};
use node::{Event, Slot};
use rand::Rng;
use rand_chacha::ChaCha20Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

/// A simulation in progress.
struct Engine<S: Scheme> {
    cfg: SimConfig,
    replica: ReplicaConfig,
    costs: CostModel,
    network: Network,
    memo: Arc<Memo>,
    /// Each slot boxed: a window moves its members' slots to the workers
    /// and back.
    slots: Vec<Box<Slot<S>>>,
    /// Empty slots that stand in for those out on the workers.
    spare_slots: Vec<Box<Slot<S>>>,
    /// The run's workers, from the first window with two members to run.
    pool: Option<pool::Pool<S>>,
    /// What every step reads, fixed for the run (from the first window).
    context: Option<Arc<step::Context>>,
    /// When each slot with pending events (in its `Slot::pending`) has its
    /// earliest: (time, slot).
    due: BTreeSet<(Time, u32)>,
    /// Events pushed so far (the last one's sequence number).
    pushed: u64,
    /// Per slot: its random stream of the network and its uplink.
    links: Vec<effects::SenderLink>,
    /// The host's cores and disk when every node runs on one host (`[network] host_cores`).
    host: Option<Host>,
    load_rng: ChaCha20Rng,
    next_tx: Option<Time>,
    /// Every node's events, hashed (hashed beside the window's sends).
    trace: trace::Trace,
    checker: Checker,
    processed: u64,
    // Statistics.
    dkg_done: Vec<Option<Time>>,
    /// Every party's member key and consensus key.
    directory: Directory,
    dkg_timing: beacon::dkg::DkgTiming,
    /// The genesis DKG: a member down through it restarts it from its disk.
    dkg_config: beacon::dkg::DkgConfig,
    dkg_dealers: u32,
    dkg_qualified: u32,
    dkg_disqualified: BTreeMap<u32, Disqualification>,
    dkg_end: Option<Time>,
    rounds_started_wall: Option<Instant>,
    /// Messages sent: consensus messages (from the first, which may come
    /// before the slowest member's DKG ends), and DKG and epoch messages.
    sent: effects::SentCounts,
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
    /// The crashes that struck between two durable writes, in order.
    crash_points: Vec<crate::report::CrashPointHit>,
    /// What identifies this run's DKG in a snapshot.
    snapshot_key: SnapshotKey,
    /// The snapshot this run starts from, until it starts.
    loaded: Option<DkgSnapshot<S>>,
    /// The DKG's figures from the snapshot this run started from.
    loaded_summary: Option<DkgSummary>,
    /// With a snapshot: the cut, once every honest member finished its DKG
    /// (taken after the window's effects are merged).
    cut_at: Option<Time>,
    /// Writing the snapshot failed.
    snapshot_error: Option<SimError>,
    /// When the run started (the DKG's wall time, for a snapshot).
    started_wall: Instant,
    /// The host's work, span and serial part, by phase
    /// (`crate::host_parallelism`).
    host_meter: HostMeter,
}

/// Ranges of receiving slots whose deliveries are added on the threads.
const DELIVERY_RANGES: usize = 64;

/// Outputs of one window from which their sends are drawn on the threads.
const SENDS_TO_SPLIT: usize = 256;

/// Deliveries of one window from which they are added on the threads.
const DELIVERIES_TO_SPLIT: usize = 4096;

/// One range's deliveries (from each job of the sends), its slots, and the
/// first slot's index.
type RangeJob<'a, S> = (Vec<Vec<Delivery<S>>>, &'a mut [Box<Slot<S>>], usize);

/// A slot whose earliest pending event changed: from, to.
type Moved = (u32, Option<Time>, Option<Time>);

/// This thread's CPU time since `*since`, which moves to now.
fn lap(since: &mut std::time::Duration) -> std::time::Duration {
    let now = thread_cpu();
    let lap = now.saturating_sub(*since);
    *since = now;
    lap
}

/// Where a run stands: what a progress line shows (the DKG of thousands of
/// members runs minutes before the first round).
#[derive(Clone, Debug)]
pub struct RunProgress {
    /// Rounds finalized by every honest node.
    pub rounds_done: u64,
    /// The target rounds.
    pub rounds_target: u64,
    /// Members that finished the DKG (hold their keys).
    pub members_with_keys: usize,
    /// Members in the run.
    pub members: usize,
    /// The simulated clock (seconds).
    pub virtual_time_s: f64,
    /// Events waiting in the members' queues (messages in flight, timers).
    pub pending_events: usize,
}

/// Progress callback: called when a round is finalized, and about once a
/// second of wall time.
pub type Progress<'a> = &'a (dyn Fn(&RunProgress) + Sync);

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
    // The host's measure: every thread's CPU clock; the run's threads for
    // the computations that split (`beacon::parallel`), and none of blst's
    // (its pool's CPU would go unmeasured, and one thread would not be one).
    beacon::host_work::install_clock(thread_cpu);
    beacon::parallel::set_threads(cfg.threads.max(1));
    beacon::curve::set_msm_pool(false);
    // The setup is one task of its own, its parts split over the threads.
    let setup = thread_cpu();
    beacon::host_work::take_task();
    let result = Engine::<S>::new(cfg).and_then(|mut engine| {
        engine.start()?;
        let own = thread_cpu().saturating_sub(setup);
        let extra = beacon::host_work::take_task();
        let mut measure = WindowMeasure::default();
        measure.add(&TaskMeasure::new(own, extra, "setup"));
        engine.host_meter.dkg.window(measure);
        engine.run(progress);
        Ok(engine)
    });
    beacon::curve::set_msm_pool(true);
    let mut engine = result?;
    if let Some(e) = engine.snapshot_error.take() {
        return Err(e);
    }
    let chain = engine.chain_json();
    Ok((engine.report(wall.elapsed().as_secs_f64()), chain))
}

impl<S: Scheme> Engine<S> {
    /// Adds `event` at `at` to slot `node`'s pending events. Each slot's
    /// events come out in the order of one queue of every event: by time,
    /// then in the order pushed.
    fn push(&mut self, at: Time, node: u32, event: Event<S>) {
        self.pushed += 1;
        let pending = &mut self.slots[node as usize].pending;
        let before = pending.next_time();
        pending.push(at, self.pushed, event);
        if before.is_none_or(|b| at < b) {
            if let Some(b) = before {
                self.due.remove(&(b, node));
            }
            self.due.insert((at, node));
        }
    }

    /// Adds the window's deliveries (per job of the sends, by range of
    /// receiving slots: [`effects::plan_sends`]) to their slots' pending
    /// events, each numbered from the first sequence number of its send
    /// (`firsts`: per node of the window's effects, per send, from the
    /// merge), each range of slots on one of the run's threads
    /// (`beacon::parallel`), and indexes the slots whose earliest event
    /// moved; returns how many it added. A slot's events come out by (time,
    /// sequence number), so the order they are added in changes nothing.
    fn deliver_all(&mut self, deliveries: Vec<Ranges<S>>, firsts: &[Vec<u64>]) -> usize {
        let count: usize = deliveries.iter().flatten().map(Vec::len).sum();
        if count == 0 {
            return 0;
        }
        let len = self.range_len();
        // By range: every job's deliveries to that range's slots.
        let mut by_range: Vec<Vec<Vec<Delivery<S>>>> = Vec::new();
        for ranges in deliveries {
            for (range, d) in ranges.into_iter().enumerate() {
                if d.is_empty() {
                    continue;
                }
                if by_range.len() <= range {
                    by_range.resize_with(range + 1, Vec::new);
                }
                by_range[range].push(d);
            }
        }
        let jobs: Vec<RangeJob<'_, S>> = by_range
            .into_iter()
            .zip(self.slots.chunks_mut(len))
            .enumerate()
            .filter(|(_, (d, _))| !d.is_empty())
            .map(|(k, (d, slots))| (d, slots, k * len))
            .collect();
        let add = |(deliveries, slots, first): RangeJob<'_, S>| {
            let mut before: Vec<Option<Option<Time>>> = vec![None; slots.len()];
            for d in deliveries.into_iter().flatten() {
                let seq = d.seq(firsts);
                let i = d.slot as usize - first;
                let pending = &mut slots[i].pending;
                before[i].get_or_insert_with(|| pending.next_time());
                pending.push(d.at, seq, d.event);
            }
            before
                .into_iter()
                .enumerate()
                .filter_map(|(i, b)| {
                    let b = b?;
                    let a = slots[i].pending.next_time();
                    (a != b).then_some(((first + i) as u32, b, a))
                })
                .collect::<Vec<Moved>>()
        };
        // A few deliveries are not worth starting threads for.
        let moved: Vec<Vec<Moved>> = if count < DELIVERIES_TO_SPLIT {
            jobs.into_iter().map(add).collect()
        } else {
            beacon::parallel::map(jobs, add)
                .into_iter()
                .map(|(m, _)| m)
                .collect()
        };
        for (node, before, after) in moved.into_iter().flatten() {
            if let Some(b) = before {
                self.due.remove(&(b, node));
            }
            if let Some(a) = after {
                self.due.insert((a, node));
            }
        }
        count
    }

    /// Receiving slots per range of deliveries ([`DELIVERY_RANGES`] ranges).
    fn range_len(&self) -> usize {
        self.slots.len().div_ceil(DELIVERY_RANGES).max(1)
    }

    /// The window's sends drawn through the network model and their copies
    /// built ([`effects::plan_sends`]), split over the threads where there
    /// are enough of them.
    fn plan_sends(
        &mut self,
        effects: &mut [step::NodeEffects<S>],
        threads: usize,
    ) -> PlannedWindow<S> {
        let records: Vec<trace::NodeRecord> = effects
            .iter_mut()
            .map(|fx| (fx.node, std::mem::take(&mut fx.trace)))
            .collect();
        let ctx = effects::PlanContext {
            network: &self.network,
            parties: self.parties,
            before_cut: self.before_cut(),
            twins: self.twin_routes(),
            range_len: self.range_len(),
        };
        let outputs: usize = effects.iter().map(|fx| fx.outputs.len()).sum();
        let split = threads > 1 && outputs >= SENDS_TO_SPLIT;
        effects::plan_sends(
            effects,
            &mut self.links,
            &ctx,
            split,
            (&mut self.trace, records),
        )
    }

    /// When the earliest pending event is due.
    fn next_time(&self) -> Option<Time> {
        self.due.first().map(|(t, _)| *t)
    }

    /// The slots with events due before `end`, in slot order, out of the
    /// index until [`Engine::index_again`].
    fn due_before(&mut self, end: Time) -> Vec<u32> {
        let mut nodes = Vec::new();
        while let Some(&(t, node)) = self.due.first() {
            if t >= end {
                break;
            }
            self.due.pop_first();
            nodes.push(node);
        }
        nodes.sort_unstable();
        nodes
    }

    /// Indexes `nodes` again by their earliest pending event, after a window
    /// took theirs.
    fn index_again(&mut self, nodes: &[u32]) {
        for &node in nodes {
            if let Some(t) = self.slots[node as usize].pending.next_time() {
                self.due.insert((t, node));
            }
        }
    }

    /// Whether the run waits for its cut: it has a snapshot, and its rounds
    /// have not started (members that finished their DKG early only help
    /// the others').
    fn before_cut(&self) -> bool {
        self.cfg.dkg_snapshot.is_some() && !self.trace.rounds_started()
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
        let Some(next) = self.next_time() else {
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
        let mut last_progress_at = Instant::now();
        let threads = self.cfg.threads.max(1);
        // At least the time to sit out 2f + 6 failed views: primaries and collectors
        // are elected at random, so Byzantine ones can follow each other for a few
        // views (with a third of them Byzantine, ten in a row happen well under
        // once in a thousand heights).
        let views = (2 * u64::from(self.replica.f) + 6).min(30);
        let liveness_bound = (self.cfg.invariants.liveness_bound_ms * 1000)
            .max(self.replica.recovery_bound_us(views));
        let mut clock = thread_cpu();
        loop {
            if self.checker.failed() || self.honest_alive_done() {
                break;
            }
            self.schedule_load();
            let Some(t0) = self.next_time() else {
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
            let rounds = self.rounds_started_wall.is_some();
            self.phase_meter(rounds)
                .serial("bookkeeping", lap(&mut clock));
            let end = t0.plus_micros(lookahead);
            let nodes = self.due_before(end);
            self.phase_meter(rounds).serial("queue", lap(&mut clock));
            beacon::host_work::begin_window();
            let window = self.process_window(&nodes, end, threads);
            // What the tasks this thread ran did not take is the driver's.
            let dispatch = lap(&mut clock).saturating_sub(window.on_caller);
            self.index_again(&nodes);
            let mut measure = WindowMeasure::default();
            for fx in &window.effects {
                measure.add(&fx.host);
            }
            let meter = self.phase_meter(rounds);
            meter.window(measure);
            meter.serial(WORKERS, dispatch);
            // The sends, drawn per sender: a parallel part of their own.
            beacon::host_work::take_task();
            let mut effects = window.effects;
            let planned = self.plan_sends(&mut effects, threads);
            self.sent.add(&planned.sent);
            let own = lap(&mut clock);
            let sends = planned
                .carried
                .iter()
                .flatten()
                .any(|(_, c)| matches!(c, Carried::Send(_)));
            if sends {
                let mut sends = WindowMeasure::default();
                sends.add(&TaskMeasure::new(
                    own,
                    beacon::host_work::take_task(),
                    "the merge's sends",
                ));
                self.phase_meter(rounds).window(sends);
            } else {
                self.phase_meter(rounds).serial("merge", own);
            }
            let firsts: Vec<Vec<u64>> = effects
                .into_iter()
                .zip(planned.carried)
                .map(|(fx, carried)| self.merge(fx, carried))
                .collect();
            self.phase_meter(rounds).serial("merge", lap(&mut clock));
            // The deliveries: a parallel part of their own.
            beacon::host_work::take_task();
            if self.deliver_all(planned.deliveries, &firsts) > 0 {
                let own = lap(&mut clock);
                let mut deliveries = WindowMeasure::default();
                deliveries.add(&TaskMeasure::new(
                    own,
                    beacon::host_work::take_task(),
                    "the merge's deliveries",
                ));
                self.phase_meter(rounds).window(deliveries);
            }
            if let Some(at) = self.cut_at.take() {
                self.cut(at);
                self.phase_meter(rounds)
                    .serial("snapshot cut", lap(&mut clock));
            }
            self.schedule_reshare(end);
            if let Some(p) = progress {
                let done = self.min_honest_finalized();
                if done != last_progress_report || last_progress_at.elapsed().as_secs() >= 1 {
                    last_progress_report = done;
                    last_progress_at = Instant::now();
                    p(&RunProgress {
                        rounds_done: done,
                        rounds_target: self.cfg.rounds,
                        members_with_keys: self.dkg_done.iter().flatten().count(),
                        members: self.dkg_done.len(),
                        virtual_time_s: end.0 as f64 / 1e6,
                        pending_events: self.slots.iter().map(|s| s.pending.len()).sum(),
                    });
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

    /// The meter of the rounds, or of the DKG.
    fn phase_meter(&mut self, rounds: bool) -> &mut PhaseMeter {
        if rounds {
            &mut self.host_meter.rounds
        } else {
            &mut self.host_meter.dkg
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
            self.push(now, i, Event::Propose(Box::new(change.clone())));
        }
    }

    fn last_fault_heal(&self) -> Option<Time> {
        let origin = self.dkg_end?;
        // Each crash that struck (one between two writes strikes when a
        // step makes them): when it restarted, or when it struck.
        let crashes = self.crash_times.iter().map(|(_, down, back)| {
            if *back == Time(u64::MAX) {
                *down
            } else {
                *back
            }
        });
        crashes
            .chain(self.network.last_heal())
            .max()
            .or(Some(origin))
    }

    fn schedule_load(&mut self) {
        let rate = self.cfg.load.tx_per_second;
        let Some(origin) = self.dkg_end else { return };
        if rate <= 0.0 {
            return;
        }
        let horizon = self.next_time().map_or(origin, |t| t.plus_micros(1));
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
}
