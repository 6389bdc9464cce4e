//! `sbft-beacon run`: one real node. It drives the same [`consensus::Member`]
//! (DKG, then replica) as the simulator, with the wall clock for time, libp2p
//! ([`crate::net`]) for messages, a timer queue (`beacon::schedule`) for the
//! timers the protocol asks for, redb ([`crate::store`]) for what must survive a
//! crash, the HTTP API ([`crate::http`]) for what it serves, and a
//! [`Recorder`] for its replica's events.
//!
//! Start-up: load the identity and check it against the config; if key material
//! is on disk, restore the replica from it and the stored chain (no DKG; missed
//! heights are fetched from peers, verified, then stored); otherwise wait for
//! every peer (at most `peer_wait_ms`), run the DKG and persist its result before
//! signing anything with it.
//!
//! Shutdown: SIGTERM or SIGINT, in any phase (waiting for peers, DKG, rounds),
//! ends the event loop at its next turn; the persistence thread writes what it
//! was given, the store closes and `run` returns `Ok` (exit status 0).

use crate::backfill::Backfill;
use crate::config::Validated;
use crate::http::{
    AdminRequest, ApiState, BlockJson, ChainView, EpochJson, ReshareAccepted, ReshareRequest,
};
use crate::metrics::{Metrics, Phase};
use crate::net::{NetLimits, Network};
use crate::recorder::Recorder;
use crate::store::{EpochRecord, Store};
use crate::{identity, NodeError};
use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::schedule::EventQueue;
use beacon::{Beacon, ChainInfo, NodeIndex, Point as _, Scheme, Time};
use consensus::epoch::{check_change, member_id, EpochChange, EpochView};
use consensus::observe::dispatch;
use consensus::replica::{sync_response, CHAIN_WINDOW};
use consensus::{
    Behaviour, CommittedEntry, Envelope, EpochEvent, Height, Member, MemberInput, MemberOutput,
    MemberTimer, Message,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{error, info, info_span, warn, Instrument as _};

/// Transactions submitted over HTTP and not yet handed to the replica (their
/// bytes are bounded by `[limits] submit_queue_bytes`).
const SUBMIT_QUEUE: usize = 10_000;

/// How often a joiner that backfills old heights asks another member.
const BACKFILL_EVERY: Duration = Duration::from_secs(1);

/// How often the node logs a status line.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// The wall clock as protocol time: microseconds since the Unix epoch.
pub fn now() -> Time {
    Time(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
    )
}

/// CPU time of the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock ids are constants.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The chain parameters of a DKG result (`ReplicaConfig::chain_info`, the
/// simulator's builder too).
pub fn chain_info<S: Scheme>(cfg: &Validated, output: &DkgOutput<S>) -> ChainInfo {
    cfg.replica
        .chain_info(output.keys[0].group_key().to_bytes(), S::ID)
}

/// Checks that stored key material belongs to this node of this network: the
/// genesis DKG's, or (after a change of members) that of the epoch `record`.
fn check_key_material<S: Scheme>(
    cfg: &Validated,
    output: &DkgOutput<S>,
    record: Option<&EpochRecord>,
) -> Result<(), NodeError> {
    let fits = match record {
        None => {
            output.session == cfg.dkg_session() && output.me == cfg.me && output.n == cfg.replica.n
        }
        Some(r) => {
            output.n as usize == r.members.len()
                && r.members.get(output.me.0 as usize) == Some(&cfg.me.0)
                && r.config.n == output.n
        }
    };
    if !fits {
        return Err(NodeError::Store(format!(
            "the key material in {} belongs to another network or node (session, index or n differ)",
            cfg.data_dir.display()
        )));
    }
    Ok(())
}

/// What travels between nodes: the members' messages (the DKG's signed
/// broadcasts, attestations and results included, see `beacon::dkg::session`).
pub type Frame<S> = Envelope<S>;

/// Writes finalized heights durably, then makes them visible to the API.
fn persistence_thread<S: Scheme>(
    store: Arc<Store>,
    state: Arc<ApiState>,
    rx: std::sync::mpsc::Receiver<Arc<CommittedEntry<S>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while let Ok(first) = rx.recv() {
            // Coalesce what is already queued into one transaction.
            let mut batch = vec![first];
            batch.extend(rx.try_iter());
            let t0 = now().0;
            let r = store.append(&batch);
            tracing::trace!(target: "timeline", at = t0, wall_us = now().0 - t0, "appended");
            if let Err(e) = r {
                error!(error = %e, "cannot persist finalized heights; stopping");
                std::process::exit(70);
            }
            let mut view = state.chain.write().unwrap_or_else(|e| e.into_inner());
            for entry in &batch {
                publish(&mut view, entry);
            }
            state.metrics.height.set(view.latest() as i64);
        }
    })
}

/// A committed block as the API shows it.
fn block_json<S: Scheme>(entry: &CommittedEntry<S>) -> BlockJson {
    let block = &entry.block;
    BlockJson {
        height: block.height.get(),
        digest: hex::encode(entry.certificate.digest),
        parent: hex::encode(block.parent),
        view: entry.certificate.view.get(),
        path: entry.certificate.path.as_str(),
        transactions: block.transactions.iter().map(hex::encode).collect(),
    }
}

/// Adds a durable entry's beacon and block to the API view.
fn publish<S: Scheme>(view: &mut ChainView, entry: &CommittedEntry<S>) {
    view.insert(beacon_of(entry), block_json(entry));
}

/// The beacon of a finalized entry: its block names the beacon it chains on
/// (the genesis seed for round 1), so no other height is needed.
fn beacon_of<S: Scheme>(entry: &CommittedEntry<S>) -> Beacon {
    Beacon::new(
        S::ID,
        entry.block.height.get(),
        entry.beacon.to_bytes(),
        &entry.block.previous_beacon,
    )
}

/// The store as the API's archive of older beacons, blocks and transactions.
struct StoreArchive<S> {
    store: std::sync::Weak<Store>,
    scheme: std::marker::PhantomData<fn() -> S>,
}

impl<S: Scheme> crate::http::ChainArchive for StoreArchive<S> {
    fn block(&self, height: u64) -> Option<BlockJson> {
        let entry = self.store.upgrade()?.get::<S>(height).ok().flatten()?;
        Some(block_json(&entry))
    }

    fn beacon(&self, round: u64) -> Option<Beacon> {
        let entry = self.store.upgrade()?.get::<S>(round).ok().flatten()?;
        Some(beacon_of(&entry))
    }

    fn transaction(&self, id: &[u8; 32]) -> Option<u64> {
        self.store.upgrade()?.transaction_height(id).ok().flatten()
    }
}

/// The node's event loop state.
struct Node<S: Scheme> {
    member: Member<S>,
    net: Network,
    timers: EventQueue<MemberTimer>,
    store: Arc<Store>,
    state: Arc<ApiState>,
    cfg: Validated,
    /// Metrics, round statistics and persistence of the replica's events.
    recorder: Recorder<S>,
    /// Set once the DKG is done (or restored): DKG frames are no longer wanted.
    dkg_done: Arc<AtomicBool>,
    /// When this node started its DKG (none when restored).
    dkg_started: Option<std::time::Instant>,
    /// Permits to read the store for peers' sync requests.
    store_readers: Arc<tokio::sync::Semaphore>,
    /// Where heights that are not the replica's events go to be stored (a
    /// joiner's handoff and backfill).
    persist: std::sync::mpsc::Sender<Arc<CommittedEntry<S>>>,
    /// A joiner's fetch of the heights below its handoff.
    backfill: Option<Backfill<S>>,
    /// The next member asked for backfill (rotates).
    backfill_turn: usize,
    /// The first height of the epoch this node is in (1 for the genesis).
    epoch_start: u64,
}

/// Sync requests answered from the store at once.
const STORE_READERS: usize = 2;

impl<S: Scheme> Node<S> {
    fn handle(&mut self, input: MemberInput<S>) -> Result<(), NodeError> {
        let phase = match &input {
            MemberInput::Message {
                envelope: Envelope::Consensus(Message::PrePrepare { .. }),
                ..
            } => Some(Phase::Sign),
            MemberInput::Message {
                envelope:
                    Envelope::Consensus(
                        Message::SignShare { .. }
                        | Message::CommitShare { .. }
                        | Message::Prepare { .. },
                    ),
                ..
            } => Some(Phase::Collect),
            _ => None,
        };
        beacon::cost::take_timings();
        let kind = match &input {
            MemberInput::Message { from, envelope } => Some((from.0, envelope.kind())),
            MemberInput::Timer(_) => Some((self.cfg.me.0, "timer")),
            _ => None,
        };
        let cpu = thread_cpu_ns();
        let at = now();
        let start = matches!(input, MemberInput::Start);
        let outputs = self.member.handle(at, input);
        if start && self.member.has_keys() {
            // A restored replica starts now (a new one when its DKG completes).
            self.recorder.start(at);
        }
        let spent = thread_cpu_ns().saturating_sub(cpu);
        if let Some((from, kind)) = kind {
            tracing::trace!(target: "timeline", at = at.0, from, kind, cpu_us = spent / 1000, wall_us = now().0 - at.0, outputs = outputs.len(), "handled");
        }
        self.recorder.spent(spent);
        let timings = beacon::cost::take_timings();
        let metrics = &self.state.metrics;
        if let Some(p) = phase {
            metrics.observe_phase(p, spent as f64 * 1e-9);
        }
        if timings.msm_ns > 0 {
            metrics.observe_phase(Phase::Aggregate, timings.msm_ns as f64 * 1e-9);
        }
        if timings.pairing_ns > 0 {
            metrics.observe_phase(Phase::Verify, timings.pairing_ns as f64 * 1e-9);
        }
        let result = self.apply(at, outputs);
        // `GET /epoch` shows a change this node takes part in from when it
        // starts (a decision, an invitation) until it is over.
        let changing = self.member.changing_to();
        let shown = self.state.epoch.read().map_or(None, |e| e.changing_to);
        if shown != changing {
            self.publish_epoch();
        }
        result
    }

    /// Handles a frame from member `from`.
    fn receive(&mut self, from: NodeIndex, frame: Frame<S>) -> Result<(), NodeError> {
        if let (Some(_), Envelope::Consensus(Message::SyncResponse { entries })) =
            (&self.backfill, &frame)
        {
            self.on_backfill(from, entries);
        }
        self.handle(MemberInput::Message {
            from,
            envelope: frame,
        })
    }

    /// Carries out the outputs of a `handle` call made at `at`.
    fn apply(&mut self, at: Time, outputs: Vec<MemberOutput<S>>) -> Result<(), NodeError> {
        for o in outputs {
            match o {
                MemberOutput::Effect(Effect::Send { to, message }) => {
                    tracing::trace!(target: "timeline", at = now().0, to = to.0, kind = message.kind(), "send");
                    if to != self.cfg.me {
                        if let Envelope::Consensus(m) = &message {
                            self.state.metrics.sent(m.kind(), 1);
                        }
                        self.net.send(to, Arc::new(encode(&message)?));
                    }
                }
                MemberOutput::Effect(Effect::Broadcast(envelope)) => {
                    tracing::trace!(target: "timeline", at = now().0, kind = envelope.kind(), "broadcast");
                    if let Envelope::Consensus(m) = &envelope {
                        self.state.metrics.sent(m.kind(), self.net.peers() as u64);
                    }
                    self.net.broadcast(Arc::new(encode(&envelope)?));
                }
                MemberOutput::Effect(Effect::SetTimer { at, timer }) => self.timers.push(at, timer),
                MemberOutput::SyncFromStore { to, from_height } => {
                    self.serve_from_store(to, from_height)
                }
                MemberOutput::PersistVotes(record) => {
                    // Durable before the votes that follow leave this node: after
                    // a crash the replica resumes from it and never signs a
                    // different value for the same slot.
                    let t0 = now().0;
                    self.store.save_votes(&record)?;
                    tracing::trace!(target: "timeline", at = t0, wall_us = now().0 - t0, "persisted");
                    self.state.metrics.votes_persisted.inc();
                }
                MemberOutput::DkgComplete(output) => {
                    self.recorder.start(at);
                    // Durable before the replica's first signature leaves this node:
                    // the outputs that follow are only sent after this returns.
                    self.store.save_dkg(&output)?;
                    self.member.replace_seed(self.store.replace_seed()?);
                    self.dkg_done.store(true, Ordering::Relaxed);
                    let info = chain_info(&self.cfg, &output);
                    let dkg_ms = self
                        .dkg_started
                        .map_or(0, |t| t.elapsed().as_millis() as u64);
                    info!(
                        chain = hex::encode(info.hash()),
                        qualified = output.qual.len(),
                        dkg_ms,
                        "DKG complete; key material saved"
                    );
                    for (dealer, reason) in &output.disqualified {
                        warn!(dealer = dealer.0, reason, "DKG: dealer disqualified");
                    }
                    self.state
                        .chain
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .set_info(info);
                    self.publish_epoch();
                }
                MemberOutput::DkgFailed(reason) => {
                    return Err(NodeError::Dkg(reason));
                }
                MemberOutput::Event(event) => dispatch(&mut self.recorder, self.cfg.me, at, &event),
                MemberOutput::Epoch(event) => {
                    log_epoch_event(&event);
                    self.on_epoch_event(at, event)?;
                }
            }
        }
        Ok(())
    }

    /// Persists what a change of members gave this node, durably before the
    /// new epoch's first message leaves it (the outputs after this one are
    /// carried out only once it returns).
    fn on_epoch_event(&mut self, at: Time, event: EpochEvent<S>) -> Result<(), NodeError> {
        match event {
            EpochEvent::Started {
                epoch,
                start,
                members,
                config,
                output,
            } => {
                // A member that joined has no chain info yet; a stayer keeps its own.
                let joined = self.state.chain.read().map_or(true, |v| v.info().is_none());
                let record = EpochRecord {
                    number: epoch,
                    members,
                    config,
                    start: start.get(),
                    retired: false,
                };
                self.store.save_epoch(&record, Some(output.as_ref()))?;
                self.member.replace_seed(self.store.replace_seed()?);
                self.epoch_start = record.start;
                // The old epoch's votes are of no use in the new one.
                self.store.save_votes::<S>(&[])?;
                self.dkg_done.store(true, Ordering::Relaxed);
                if joined {
                    self.recorder.start(at);
                    self.state
                        .chain
                        .write()
                        .unwrap_or_else(|e| e.into_inner())
                        .set_info(chain_info(&self.cfg, &output));
                }
                // The heights the replica starts from (a joiner's handoff) are
                // stored too, then every earlier one is fetched.
                let window: Vec<_> = self
                    .member
                    .replica()
                    .map(|r| r.finalized().iter().cloned().collect())
                    .unwrap_or_default();
                for entry in window.iter().filter(|e| e.block.height < start) {
                    if self.store.get::<S>(entry.block.height.get())?.is_none() {
                        let _ = self.persist.send(entry.clone());
                    }
                }
                if let Some(lowest) = window.first() {
                    if self
                        .store
                        .get::<S>(lowest.block.height.get().saturating_sub(1))?
                        .is_none()
                    {
                        self.backfill =
                            Backfill::below(lowest.clone(), &self.cfg.replica.genesis_seed);
                        self.request_backfill();
                    }
                }
                self.publish_epoch();
            }
            EpochEvent::Retired { epoch, height } => {
                let view = self.member.epoch();
                let record = EpochRecord {
                    number: epoch,
                    members: view.members.clone(),
                    config: view.config.clone(),
                    start: height.get().saturating_add(1),
                    retired: true,
                };
                self.store.save_epoch::<S>(&record, None)?;
                self.member.replace_seed(self.store.replace_seed()?);
                self.epoch_start = record.start;
                self.publish_epoch();
            }
            EpochEvent::Decided { .. } | EpochEvent::Ready { .. } | EpochEvent::Failed { .. } => {}
        }
        Ok(())
    }

    /// Shows the member set this node is in on `GET /epoch`.
    fn publish_epoch(&self) {
        let epoch = self.member.epoch();
        let status = if self.member.has_keys() {
            "member"
        } else if self.member.is_retired() {
            "retired"
        } else if self.member.is_outside() {
            "joining"
        } else if self.member.dkg_progress().is_some() {
            "dkg"
        } else {
            "failed"
        };
        let json = EpochJson {
            epoch: epoch.number,
            members: epoch.members.clone(),
            start: self.epoch_start,
            f: epoch.config.f,
            status: status.into(),
            changing_to: self.member.changing_to(),
        };
        *self.state.epoch.write().unwrap_or_else(|e| e.into_inner()) = json;
    }

    /// The operator's proposal of a change of members: checked, signed by the
    /// member and handed to every member.
    fn propose(&mut self, request: ReshareRequest) -> Result<ReshareAccepted, String> {
        let mut indices = Vec::with_capacity(request.members.len());
        let mut ids = Vec::with_capacity(request.members.len());
        for text in &request.members {
            let peer = self
                .cfg
                .peers
                .iter()
                .find(|p| p.id.to_string() == *text)
                .ok_or_else(|| {
                    format!("{text} is not in this node's [[peers]]: add it to every member's config first")
                })?;
            let key = identity::member_public_key(&peer.id).map_err(|e| e.to_string())?;
            indices.push(peer.index.0);
            ids.push(member_id(&key));
        }
        let n = ids.len() as u32;
        let c = match request.c {
            Some(c) => c,
            None => consensus::config::smallest_collector_slack(n)
                .ok_or_else(|| format!("{n} members fit no n = 3f + 2c + 1 with c <= 2"))?,
        };
        let current = self.member.epoch().number;
        let change = EpochChange {
            epoch: current.saturating_add(1),
            members: ids,
            c,
            beacon_threshold: request.beacon_threshold,
        };
        check_change(current, &change)?;
        if self.member.replica().is_none() {
            return Err("this node is not a running member of the current epoch".into());
        }
        let digest = hex::encode(change.digest());
        let epoch = change.epoch;
        self.handle(MemberInput::ProposeEpoch(change))
            .map_err(|e| e.to_string())?;
        info!(
            epoch,
            members = n,
            c,
            change = &digest[..16],
            "proposed a change of members"
        );
        Ok(ReshareAccepted {
            epoch,
            members: indices,
            c,
            change: digest,
        })
    }

    /// Asks the next member of the current epoch for the heights below the
    /// backfill's anchor.
    fn request_backfill(&mut self) {
        let Some(b) = &self.backfill else { return };
        let me = self.cfg.me.0;
        let others: Vec<u32> = self
            .member
            .epoch()
            .members
            .iter()
            .copied()
            .filter(|d| *d != me)
            .collect();
        if others.is_empty() {
            return;
        }
        let to = others[self.backfill_turn % others.len()];
        self.backfill_turn = self.backfill_turn.wrapping_add(1);
        let frame: Frame<S> = Envelope::Consensus(Message::SyncRequest {
            from_height: Height::new(b.request_from()),
        });
        if let Ok(bytes) = encode(&frame) {
            self.net.send(NodeIndex(to), Arc::new(bytes));
        }
    }

    /// Takes what a sync response adds below the backfill's anchor.
    fn on_backfill(&mut self, from: NodeIndex, entries: &[Arc<CommittedEntry<S>>]) {
        let Some(b) = &mut self.backfill else { return };
        match b.extend(entries) {
            Ok(taken) if taken.is_empty() => {}
            Ok(taken) => {
                for entry in taken {
                    let _ = self.persist.send(entry);
                }
                // A member that had stored the older heights itself (it
                // lost its keys, not its chain) stops at them.
                let below = b.anchor_height().saturating_sub(1);
                if b.is_complete() || self.store.get::<S>(below).ok().flatten().is_some() {
                    info!("backfill complete: the chain is stored from round 1");
                    self.backfill = None;
                } else {
                    self.backfill_turn = self.backfill_turn.wrapping_sub(1);
                    self.request_backfill();
                }
            }
            Err(e) => warn!(
                peer = from.0,
                error = e,
                "backfill: a sync response does not link; ignored"
            ),
        }
    }

    /// Answers a sync request for heights the replica no longer keeps from the
    /// store, on a blocking thread: at most [`STORE_READERS`] at once, and a
    /// request beyond that is dropped (the peer asks again).
    fn serve_from_store(&self, to: NodeIndex, from_height: Height) {
        let Ok(permit) = self.store_readers.clone().try_acquire_owned() else {
            self.state.metrics.frames_dropped("store-readers-busy");
            return;
        };
        let store = self.store.clone();
        let net = self.net.clone();
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let entries = sync_response::<S>(from_height, |h| {
                store.get::<S>(h.get()).ok().flatten().map(Arc::new)
            });
            if entries.is_empty() {
                return;
            }
            let frame: Frame<S> = Envelope::Consensus(Message::SyncResponse { entries });
            match encode(&frame) {
                Ok(bytes) => net.send(to, Arc::new(bytes)),
                Err(e) => warn!(error = %e, "cannot answer a sync request"),
            }
        });
    }

    /// Fires every timer that is due.
    fn fire_timers(&mut self) -> Result<(), NodeError> {
        loop {
            let Some((_, timer)) = self.timers.pop_before(now().plus_micros(1)) else {
                return Ok(());
            };
            if let (MemberTimer::Dkg(t), Some(progress)) = (&timer, self.member.dkg_progress()) {
                // A DKG deadline passed before the DKG was over: say what it lacked.
                info!(timer = ?t, progress, "DKG deadline");
            }
            self.handle(MemberInput::Timer(timer))?;
        }
    }

    fn next_deadline(&self) -> Duration {
        match self.timers.next_time() {
            Some(at) => Duration::from_micros(at.micros_since(now())),
            None => Duration::from_secs(3600),
        }
    }
}

fn encode<S: Scheme>(frame: &Frame<S>) -> Result<Vec<u8>, NodeError> {
    beacon::wire::encode(frame).map_err(|e| NodeError::Network(format!("encoding a frame: {e}")))
}

/// The process's stop request: SIGTERM or SIGINT. The handlers are installed
/// when this is created (not when it is first awaited), so that a signal that
/// arrives at any point after start-up, in any phase, is a request to stop
/// rather than the default action (death, or nothing at all for PID 1 in a
/// container).
pub struct StopSignal {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
}

impl StopSignal {
    /// Installs the handlers (inside a tokio runtime).
    pub fn new() -> Result<Self, NodeError> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let install = |kind: SignalKind| {
                signal(kind).map_err(|e| NodeError::Io(format!("installing a signal handler: {e}")))
            };
            Ok(StopSignal {
                term: install(SignalKind::terminate())?,
                interrupt: install(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignal {})
    }

    /// Resolves at the first SIGTERM or SIGINT since [`StopSignal::new`].
    pub async fn wait(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Resolves when the process is asked to stop (SIGINT or SIGTERM).
pub async fn shutdown_signal() {
    match StopSignal::new() {
        Ok(mut stop) => stop.wait().await,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Runs a node until it is interrupted. `behaviour` makes its replica Byzantine
/// (for tests of the others' defences; never in production).
/// `join` starts a node without key material as a party that joins the
/// running network (it waits to be invited by a change of members); a node
/// that is not a genesis member always does.
pub async fn run<S: Scheme>(
    cfg: Validated,
    behaviour: Option<Behaviour>,
    join: bool,
) -> Result<(), NodeError> {
    let me = cfg.me;
    let span = info_span!("node", index = me.0);
    run_inner::<S>(cfg, behaviour, join).instrument(span).await
}

async fn run_inner<S: Scheme>(
    cfg: Validated,
    behaviour: Option<Behaviour>,
    join: bool,
) -> Result<(), NodeError> {
    // First of all: from here on SIGTERM and SIGINT stop the node cleanly,
    // whatever phase it is in (waiting for peers, DKG, rounds).
    let mut stop = StopSignal::new()?;
    if let Some(b) = behaviour {
        warn!(
            behaviour = b.as_str(),
            "this node is Byzantine (testing only)"
        );
    }
    let me = cfg.me;
    let key = identity::load(&cfg.identity)?;
    if identity::peer_id(&key) != cfg.me().id {
        return Err(NodeError::Config(format!(
            "identity {} has peer ID {}, but peers[{}] lists {}",
            cfg.identity.display(),
            identity::peer_id(&key),
            me.0,
            cfg.me().id
        )));
    }
    let store = Arc::new(Store::open(
        &cfg.data_dir,
        cfg.raw.limits.store_cache_bytes,
    )?);
    // After a change of members the epoch record holds this node's key
    // material (none once it left); before, the genesis DKG's file does.
    let epoch_record = store.load_epoch::<S>()?;
    let stored = match &epoch_record {
        Some((_, output)) => output.clone(),
        None => store.load_dkg::<S>()?,
    };
    if let Some(output) = &stored {
        check_key_material(&cfg, output, epoch_record.as_ref().map(|(r, _)| r))?;
    }
    // A node that joined a running network may still lack old heights (it
    // fetches them from the members): it resumes from the run above the gap.
    let chain = match &epoch_record {
        Some(_) => store.load_tail::<S>(CHAIN_WINDOW)?,
        None => store.load_recent::<S>(CHAIN_WINDOW)?,
    };
    let joins = stored.is_none() && (join || epoch_record.is_some() || !cfg.is_genesis_member());
    if stored.is_none() && !joins && !chain.is_empty() {
        return Err(NodeError::Config(format!(
            "{} holds a chain but no key material: this member lost its keys. Start it with \
             `run --join`, and have the members reshare to a member list that includes it",
            cfg.data_dir.display()
        )));
    }
    let metrics = Arc::new(Metrics::new());
    let (submit, mut submitted) = tokio::sync::mpsc::channel(SUBMIT_QUEUE);
    let limits = &cfg.raw.limits;
    let state = Arc::new(ApiState::new(
        metrics.clone(),
        submit,
        cfg.replica.max_transaction_bytes,
        limits,
    ));
    // The API thread outlives the event loop: it holds the store weakly, so
    // that the store closes cleanly when the node stops.
    let _ = state.archive.set(Box::new(StoreArchive::<S> {
        store: Arc::downgrade(&store),
        scheme: std::marker::PhantomData,
    }));
    if let Some(output) = &stored {
        let mut view = state.chain.write().unwrap_or_else(|e| e.into_inner());
        view.set_info(chain_info(&cfg, output));
        for entry in &chain {
            publish(&mut view, entry);
        }
        metrics.height.set(view.latest() as i64);
    }
    // Until the member runs, /epoch says what the disk holds.
    *state.epoch.write().unwrap_or_else(|e| e.into_inner()) = match &epoch_record {
        Some((r, _)) => EpochJson {
            epoch: r.number,
            members: r.members.clone(),
            start: r.start,
            f: r.config.f,
            status: "starting".into(),
            changing_to: None,
        },
        None => EpochJson {
            epoch: 0,
            members: (0..cfg.genesis_members).collect(),
            start: 1,
            f: cfg.replica.f,
            status: "starting".into(),
            changing_to: None,
        },
    };
    let _api = crate::http::serve(cfg.http, state.clone())?;
    let member_key = identity::member_key(&key)?;
    let member_keys = Arc::new(
        cfg.peers
            .iter()
            .map(|p| identity::member_public_key(&p.id))
            .collect::<Result<Vec<_>, _>>()?,
    );
    let dkg_done = Arc::new(AtomicBool::new(stored.is_some() || joins));
    let net_limits = NetLimits::of(&cfg, dkg_done.clone());
    let (mut net, mut inbound) =
        Network::start::<Frame<S>>(key, &cfg, net_limits, metrics.clone())?;
    // Stored before anything dealt from it leaves: a node that restarts in the
    // middle of a DKG or a change deals the same deals again, never a second
    // version (`consensus/SAFETY.md`, "A member's part of a change survives
    // its crash"); replaced once the keys it dealt are stored.
    let seed = store.member_seed()?;
    // The memo shares results between replicas of one process (the simulator);
    // a node has one replica, and an unbounded cache there would only grow.
    let memo = Memo::disabled();
    let phase_us = cfg.raw.network.dkg_phase_ms.saturating_mul(1_000);
    let attempts = cfg.raw.network.dkg_attempts;
    let recorded_epoch = epoch_record
        .as_ref()
        .map(|(r, _)| EpochView::new(r.number, r.members.clone(), r.config.clone()));
    let member =
        match &stored {
            Some(output) => {
                info!(
                    height = chain.last().map_or(0, |e| e.block.height.get()),
                    epoch = recorded_epoch.as_ref().map_or(0, |e| e.number),
                    "key material found: skipping the DKG, resuming from the stored chain"
                );
                let votes = store.load_votes()?;
                let epoch = recorded_epoch
                    .clone()
                    .unwrap_or_else(|| EpochView::genesis(cfg.replica.clone()));
                Member::restore_in(epoch, output, chain, votes, seed, memo, behaviour)?
                    .with_identity(me.0, member_key, member_keys, phase_us, attempts)
            }
            None if joins => {
                // The members it trusts to invite it: those of the epoch it
                // left, or the genesis members.
                let epoch = recorded_epoch
                    .clone()
                    .unwrap_or_else(|| EpochView::genesis(cfg.replica.clone()));
                info!(
                    epoch = epoch.number,
                    members = epoch.members.len(),
                    "joining: waiting for the members to reshare to a member list with this node"
                );
                Member::joining(
                    epoch,
                    me.0,
                    seed,
                    memo,
                    member_key,
                    member_keys,
                    phase_us,
                    attempts,
                )?
            }
            None => {
                let others = cfg.genesis_members as usize - 1;
                info!(peers = others, "waiting for peers before the DKG");
                let wait = Duration::from_millis(cfg.raw.network.peer_wait_ms);
                let all = net.connected_genesis.wait_for(|c| *c >= others);
                let in_time = tokio::select! {
                    biased;
                    _ = stop.wait() => {
                        info!("stopping while waiting for peers");
                        return Ok(());
                    }
                    r = tokio::time::timeout(wait, all) => r.is_ok(),
                };
                if in_time {
                    info!("all peers connected; starting the DKG");
                } else {
                    warn!(
                        connected = *net.connected_genesis.borrow(),
                        "not every peer connected in time; starting the DKG with those present"
                    );
                }
                let network = &cfg.raw.network;
                let dkg = cfg.replica.dkg_config(
                    cfg.dkg_session(),
                    network.dkg_dealers,
                    network.dkg_phase_ms,
                    network.dkg_attempts,
                )?;
                Member::new(
                    cfg.replica.clone(),
                    dkg,
                    me,
                    seed,
                    memo,
                    member_key,
                    member_keys,
                    behaviour,
                )?
            }
        };
    let (persist_tx, persist_rx) = std::sync::mpsc::channel();
    let persister = persistence_thread::<S>(store.clone(), state.clone(), persist_rx);
    let recorder = Recorder::new(state.clone(), persist_tx.clone(), cfg.replica.clone());
    let (admin_tx, mut admin) = tokio::sync::mpsc::channel::<AdminRequest>(4);
    let _ = state.admin.set(admin_tx);
    // A joiner that stopped before its backfill was over goes on with it.
    let backfill = match &epoch_record {
        Some(_) => store
            .lowest_of_tail::<S>()?
            .and_then(|e| Backfill::below(Arc::new(e), &cfg.replica.genesis_seed)),
        None => None,
    };
    let mut node = Node {
        member,
        net,
        timers: EventQueue::new(),
        store,
        state,
        cfg,
        recorder,
        dkg_started: stored.is_none().then(std::time::Instant::now),
        dkg_done,
        store_readers: Arc::new(tokio::sync::Semaphore::new(STORE_READERS)),
        persist: persist_tx,
        backfill,
        backfill_turn: 0,
        epoch_start: epoch_record.as_ref().map_or(1, |(r, _)| r.start),
    };
    node.handle(MemberInput::Start)?;
    node.publish_epoch();
    let mut backfill_tick = tokio::time::interval(BACKFILL_EVERY);
    let mut status = tokio::time::interval(STATUS_EVERY);
    let mut last_status = (0u64, std::time::Instant::now());
    let result = loop {
        let deadline = node.next_deadline();
        tokio::select! {
            biased;
            _ = stop.wait() => {
                let phase = if node.dkg_done.load(Ordering::Relaxed) { "rounds" } else { "the DKG" };
                info!("stopping during {phase}");
                break Ok(());
            }
            Some((tx, _held)) = submitted.recv() => {
                if let Err(e) = node.handle(MemberInput::ClientTransaction(tx)) {
                    break Err(e);
                }
            }
            Some((request, reply)) = admin.recv() => {
                let _ = reply.send(node.propose(request));
            }
            _ = backfill_tick.tick(), if node.backfill.is_some() => node.request_backfill(),
            _ = status.tick() => {
                let height = node
                    .member
                    .replica()
                    .map_or(0, |r| r.finalized().height().get());
                let elapsed = last_status.1.elapsed().as_secs_f64();
                let rate = height.saturating_sub(last_status.0) as f64 / elapsed.max(1e-3);
                if height > 0 {
                    info!(
                        height,
                        beacons_per_s = format!("{rate:.1}"),
                        peers = *node.net.connected.borrow(),
                        "status"
                    );
                }
                last_status = (height, std::time::Instant::now());
            }
            message = inbound.recv() => {
                let Some(m) = message else { break Err(NodeError::Network("transport stopped".into())) };
                if let Err(e) = node.receive(m.from, m.message) {
                    break Err(e);
                }
            }
            _ = tokio::time::sleep(deadline) => {}
        }
        if let Err(e) = node.fire_timers() {
            break Err(e);
        }
    };
    // Let the persistence thread write what it was given (each batch is one
    // durable transaction); the store closes with its last holder.
    drop(node);
    let _ = tokio::task::spawn_blocking(move || persister.join()).await;
    if result.is_ok() {
        info!("store flushed; stopped");
    }
    result
}

/// Logs a step of an epoch change.
fn log_epoch_event<S: Scheme>(event: &EpochEvent<S>) {
    match event {
        EpochEvent::Decided { epoch, height } => {
            info!(epoch, height = height.get(), "epoch change decided")
        }
        EpochEvent::Ready { epoch, digest } => {
            info!(
                epoch,
                keys = hex::encode(&digest[..8]),
                "holding the new epoch's keys"
            )
        }
        EpochEvent::Started {
            epoch,
            start,
            members,
            ..
        } => info!(
            epoch,
            start = start.get(),
            members = members.len(),
            "running the new epoch; its key material saved"
        ),
        EpochEvent::Retired { epoch, height } => {
            warn!(
                epoch,
                height = height.get(),
                "left the group: shares erased"
            )
        }
        EpochEvent::Failed { epoch, reason } => warn!(epoch, reason, "epoch change failed"),
    }
}
