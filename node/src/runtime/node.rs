//! The event loop's state ([`Node`]): one input handed to the member with
//! its CPU measured, the member's outputs carried out (frames sent, timers
//! set, the member's durable writes made through `consensus::disk` before
//! anything after them leaves), and the chain's heights served from the store or fetched below a
//! joiner's handoff.
//!
//! A durable write that fails (a full disk) never ends the process: the
//! write and every output after it are held, in order, and nothing after
//! it is carried out (persist before send, `consensus/SAFETY.md`); the node
//! takes no input meanwhile (frames are dropped, timers wait), tries the
//! write again with backoff (`store::WriteRetry`), shows the failure on
//! `/health` and the metrics, and goes on from the held outputs once the
//! disk takes writes again.

use super::chain_info;
use crate::backfill::Backfill;
use crate::clock::{now, thread_cpu_ns};
use crate::config::Validated;
use crate::http::ApiState;
use crate::logs::log_epoch_event;
use crate::metrics::Phase;
use crate::net::{Network, NetworkError};
use crate::recorder::Recorder;
use crate::store::{DiskWriter, Store, WriteRetry};
use crate::NodeError;
use beacon::effect::Effect;
use beacon::schedule::EventQueue;
use beacon::{NodeIndex, Scheme, Time};
use consensus::observe::dispatch;
use consensus::replica::sync_response;
use consensus::{
    CommittedEntry, DirectoryIndex, Envelope, Height, Member, MemberInput, MemberOutput,
    MemberTimer, Message,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, error, info, warn};

/// The node's event loop state.
pub(super) struct Node<S: Scheme> {
    pub(super) member: Member<S>,
    pub(super) net: Network,
    pub(super) timers: EventQueue<MemberTimer>,
    pub(super) store: Arc<Store>,
    pub(super) state: Arc<ApiState>,
    pub(super) cfg: Validated,
    /// Metrics, round statistics and persistence of the replica's events.
    pub(super) recorder: Recorder<S>,
    /// Set once the DKG is done (or restored): DKG frames are no longer wanted.
    pub(super) dkg_done: Arc<AtomicBool>,
    /// When this node started its DKG (none when restored).
    pub(super) dkg_started: Option<std::time::Instant>,
    /// Permits to read the store for peers' sync requests.
    pub(super) store_readers: Arc<tokio::sync::Semaphore>,
    /// Where heights that are not the replica's events go to be stored (a
    /// joiner's handoff and backfill).
    pub(super) persist: std::sync::mpsc::Sender<Arc<CommittedEntry<S>>>,
    /// A joiner's fetch of the heights below its handoff.
    pub(super) backfill: Option<Backfill<S>>,
    /// The next member asked for backfill (rotates).
    pub(super) backfill_turn: usize,
    /// The first height of the epoch this node is in (1 for the genesis).
    pub(super) epoch_start: u64,
    /// Outputs not carried out yet, each with the time of the call that
    /// produced it: a durable write that failed first, then what followed it.
    pub(super) held: VecDeque<(Time, MemberOutput<S>)>,
    /// The failed durable write's retry (none while the disk takes writes).
    pub(super) disk_retry: Option<WriteRetry>,
}

/// Sync requests answered from the store at once.
pub(super) const STORE_READERS: usize = 2;

impl<S: Scheme> Node<S> {
    pub(super) fn handle(&mut self, input: MemberInput<S>) -> Result<(), NodeError> {
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
        let timings = beacon::cost::take_timings();
        if let Some((from, kind)) = kind {
            // The handling's CPU split by the cryptography in it: signing (hash
            // to the curve and scalar multiplication), verifying (pairings),
            // combining (multi-scalar multiplications).
            tracing::trace!(
                target: "timeline", at = at.0, from, kind, cpu_us = spent / 1000,
                wall_us = now().0 - at.0, outputs = outputs.len(),
                sign_us = (timings.hash_ns + timings.mul_ns) / 1000,
                verify_us = timings.pairing_ns / 1000, combine_us = timings.msm_ns / 1000,
                "handled"
            );
        }
        self.recorder.spent(spent);
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
        // starts (a decision, an invitation) until it is over, and the deals
        // it keeps until their erasure.
        let changing = self.member.changing_to();
        let shown = self.state.epoch.read().map_or(true, |e| {
            e.changing_to == changing
                && e.retained_deals
                    .iter()
                    .copied()
                    .eq(self.member.retained_deals())
        });
        if !shown {
            self.publish_epoch();
        }
        result
    }

    /// Handles a frame from member `from`.
    pub(super) fn receive(&mut self, from: NodeIndex, frame: Envelope<S>) -> Result<(), NodeError> {
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

    /// Whether a durable write failed and is waiting to be tried again (the
    /// node takes no input meanwhile).
    pub(super) fn disk_stalled(&self) -> bool {
        self.disk_retry.is_some()
    }

    /// Carries out the outputs of a `handle` call made at `at`, after any
    /// held ones.
    fn apply(&mut self, at: Time, outputs: Vec<MemberOutput<S>>) -> Result<(), NodeError> {
        self.held.extend(outputs.into_iter().map(|o| (at, o)));
        self.carry_out_held()
    }

    /// Carries out the held outputs in order until they are done or a
    /// durable write fails (it stays first, the rest behind it). Nothing is
    /// done while a failed write waits for its next try.
    fn carry_out_held(&mut self) -> Result<(), NodeError> {
        if self.disk_stalled() {
            return Ok(());
        }
        while let Some((at, o)) = self.held.pop_front() {
            // The member's durable writes, in its order, each durable before
            // the outputs after it are carried out (`consensus::disk`).
            let t0 = now().0;
            let mut disk: &Store = &self.store;
            match consensus::disk::persist(&mut self.member, &o, &mut disk) {
                Ok(true) => {
                    if let MemberOutput::PersistVotes(_) = o {
                        tracing::trace!(target: "timeline", at = t0, wall_us = now().0 - t0, "persisted");
                        self.state.metrics.votes_persisted.inc();
                    }
                }
                Ok(false) => self.carry_out(at, o)?,
                Err(e) => {
                    let kind = consensus::disk::write_kind(&o).unwrap_or("write");
                    self.held.push_front((at, o));
                    self.state.disk_failed(DiskWriter::Member, &e);
                    error!(
                        write = kind, error = %e, held = self.held.len(),
                        "a durable write failed: holding it and what follows it (nothing is \
                         signed or sent past it), trying again with backoff"
                    );
                    self.disk_retry = Some(WriteRetry::new(e.to_string()));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// Tries the failed durable write again if its try is due, and carries
    /// out what it held if it succeeds.
    pub(super) fn retry_disk(&mut self) -> Result<(), NodeError> {
        let Some(retry) = &mut self.disk_retry else {
            return Ok(());
        };
        if std::time::Instant::now() < retry.due() {
            return Ok(());
        }
        let Some((_, write)) = self.held.front() else {
            self.disk_retry = None;
            return Ok(());
        };
        let mut disk: &Store = &self.store;
        match consensus::disk::persist(&mut self.member, write, &mut disk) {
            Ok(written) => {
                let kind = consensus::disk::write_kind(write).unwrap_or("write");
                if let MemberOutput::PersistVotes(_) = write {
                    self.state.metrics.votes_persisted.inc();
                }
                // (The front is always the failed write; anything else is
                // left for `carry_out_held` to carry out.)
                if written {
                    self.held.pop_front();
                }
                warn!(
                    write = kind,
                    failed_s = format!("{:.1}", retry.elapsed().as_secs_f64()),
                    tries = retry.failures(),
                    first_error = retry.first_error(),
                    held = self.held.len(),
                    "the disk takes writes again: going on with what the failed write held"
                );
                self.disk_retry = None;
                self.state.disk_recovered(DiskWriter::Member);
                self.carry_out_held()
            }
            Err(e) => {
                retry.failed_again();
                self.state.disk_failed(DiskWriter::Member, &e);
                debug!(error = %e, tries = retry.failures(), "a durable write failed again");
                Ok(())
            }
        }
    }

    /// Carries out one output that is not a durable write, of a `handle`
    /// call made at `at`.
    fn carry_out(&mut self, at: Time, o: MemberOutput<S>) -> Result<(), NodeError> {
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
            // Carried out by `consensus::disk::persist` above.
            MemberOutput::PersistVotes(_) | MemberOutput::Persist(_) => {}
            MemberOutput::SyncFromStore { to, from_height } => {
                self.serve_from_store(to, from_height)
            }
            MemberOutput::DkgComplete(output) => {
                // Its keys and the new seed are durable (the writes
                // before it), so before the replica's first signature.
                self.recorder.start(at);
                self.dkg_done.store(true, Ordering::Relaxed);
                let info = chain_info(&self.cfg, &output);
                let dkg_ms = self
                    .dkg_started
                    .map_or(0, |t| t.elapsed().as_millis() as u64);
                info!(
                    chain = hex::encode(info.hash()),
                    qualified = output.verdicts.qual.len(),
                    dkg_ms,
                    "DKG complete; key material saved"
                );
                for (dealer, reason) in &output.verdicts.disqualified {
                    warn!(
                        dealer = dealer.0,
                        reason = reason.as_str(),
                        "DKG: dealer disqualified"
                    );
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
        Ok(())
    }

    /// Asks the next member of the current epoch for the heights below the
    /// backfill's anchor.
    pub(super) fn request_backfill(&mut self) {
        let Some(b) = &self.backfill else { return };
        let me = DirectoryIndex::new(self.cfg.me.0);
        let others: Vec<DirectoryIndex> = self
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
        let frame: Envelope<S> = Envelope::Consensus(Message::SyncRequest {
            from_height: Height::new(b.request_from()),
        });
        if let Ok(bytes) = encode(&frame) {
            self.net.send(to.address(), Arc::new(bytes));
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
                error = %e,
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
            let frame: Envelope<S> = Envelope::Consensus(Message::SyncResponse { entries });
            match encode(&frame) {
                Ok(bytes) => net.send(to, Arc::new(bytes)),
                Err(e) => warn!(error = %e, "cannot answer a sync request"),
            }
        });
    }

    /// Fires every timer that is due (none while a failed durable write
    /// waits: they fire once it is done).
    pub(super) fn fire_timers(&mut self) -> Result<(), NodeError> {
        loop {
            if self.disk_stalled() {
                return Ok(());
            }
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

    /// How long the event loop may wait: until the next timer, or the next
    /// try of a failed durable write.
    pub(super) fn next_deadline(&self) -> Duration {
        if let Some(retry) = &self.disk_retry {
            return retry
                .due()
                .saturating_duration_since(std::time::Instant::now());
        }
        match self.timers.next_time() {
            Some(at) => Duration::from_micros(at.micros_since(now())),
            None => Duration::from_secs(3600),
        }
    }
}

fn encode<S: Scheme>(frame: &Envelope<S>) -> Result<Vec<u8>, NodeError> {
    beacon::wire::encode(frame).map_err(|e| NetworkError::EncodeFrame(e).into())
}
