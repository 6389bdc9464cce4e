//! The merge: one node's outputs of a window carried out in node order
//! (sends and broadcasts to their receivers' pending events, timers into the
//! queue, honest members' events to the checker and the statistics), and
//! what the engine does when a member finishes its DKG or steps through a
//! change of members; before it, each sender's sends drawn through the
//! network model from the sender's own link, and their copies built as
//! deliveries, on the threads ([`plan_sends`]). The merge only numbers the
//! copies (one range of sequence numbers per send).

use super::node::{member_seed, Event, InFlight};
use super::step::{CrashHit, NodeEffects};
use super::trace::{NodeRecord, Trace};
use super::Engine;
use crate::invariants::FailureKind;
use crate::network::{broadcast_receivers, Network};
use crate::report::CrashPointHit;
use beacon::cost::EncodedPoints;
use beacon::dkg::relay::RelayMessage;
use beacon::dkg::session::SessionMessage;
use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::{NodeIndex, Point, Scheme, Time};
use consensus::observe::dispatch;
use consensus::{Envelope, EpochEvent, Member, MemberOutput};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use sha2::{Digest as _, Sha256};
use std::any::Any;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

impl<S: Scheme> Engine<S> {
    /// Applies one node's effects: network, timers, observations. Sequential, in
    /// node order: the only place that numbers events. Its outputs were
    /// taken by [`plan_sends`], which drew its sends through the network
    /// model and built their copies (`carried`: the outputs in order, what
    /// the merge drops before the cut left out). Returns the first sequence
    /// number of each send's copies, in order: copy `j` of a send is
    /// numbered its first plus `j`, as if pushed here one by one.
    pub(super) fn merge(
        &mut self,
        fx: NodeEffects<S>,
        carried: Vec<(Time, Carried<S>)>,
    ) -> Vec<u64> {
        self.processed += fx.processed;
        let node = fx.node;
        let honest = self.slots[node as usize].honest;
        let mut firsts = Vec::new();
        for (at, carried) in carried {
            let output = match carried {
                Carried::Send(send) => {
                    if let (true, InFlight::Consensus(m)) = (honest, &send.envelope) {
                        self.checker.on_signed(node, at, m);
                    }
                    firsts.push(self.pushed + 1);
                    self.pushed += u64::from(send.copies);
                    continue;
                }
                Carried::Other(output) => *output,
            };
            match output {
                // Drawn and built in `plan_sends`: a send is never `Other`.
                MemberOutput::Effect(Effect::Send { .. } | Effect::Broadcast(_)) => {}
                MemberOutput::Effect(Effect::SetTimer { at: when, timer }) => {
                    self.push(when, node, Event::Timer(timer))
                }
                // Answered from (and written to) the node's disk in `run_node`.
                MemberOutput::SyncFromStore { .. }
                | MemberOutput::PersistVotes(_)
                | MemberOutput::Persist(_) => {}
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
        for hit in fx.crashed {
            self.crash_times
                .push((node, hit.at, hit.back.unwrap_or(Time(u64::MAX))));
            if let Some(back) = hit.merge_restarts {
                self.push(back, node, Event::Restart);
            }
            self.on_crash_between_writes(node, &hit);
            self.crash_points.push(CrashPointHit {
                node,
                at_ms: hit.at.as_millis_f64(),
                written: hit.written,
                lost: hit.lost,
            });
        }
        if let Some((t, msg)) = fx.panic {
            self.checker.fail(
                FailureKind::Crash,
                Some(node),
                t,
                format!("member panicked: {msg}"),
            );
        }
        firsts
    }

    /// What a crash between two writes took with it: the event those writes
    /// came before. Keys saved: the member's DKG is over (it restarts from
    /// them). An epoch record saved (honest members): it is in, or left, the
    /// epoch it recorded.
    fn on_crash_between_writes(&mut self, node: u32, hit: &CrashHit) {
        let slot = &self.slots[node as usize];
        if hit.written.contains(&"keys") && self.dkg_done[node as usize].is_none() {
            if let Some(keys) = slot.disk.dkg.clone() {
                self.on_dkg_complete(node, hit.at, &keys);
            }
        }
        let slot = &self.slots[node as usize];
        if hit.written.contains(&"epoch") && slot.honest {
            if let (Some(r), Some(record)) = (self.reshare.as_mut(), slot.disk.epoch.as_ref()) {
                r.on_record(node, hit.at, record);
            }
        }
    }

    /// How consensus messages reach twins this window, if the run has any.
    pub(super) fn twin_routes(&self) -> Option<TwinRoutes> {
        if !self.slots.iter().any(|s| s.twinned) {
            return None;
        }
        Some(TwinRoutes {
            sides: self.slots.iter().map(|s| (s.twinned, s.side)).collect(),
            running_twin: self
                .twin_slot
                .iter()
                .map(|t| t.filter(|t| self.slots[*t as usize].member.is_some()))
                .collect(),
        })
    }

    fn on_dkg_complete(&mut self, node: u32, at: Time, out: &Arc<DkgOutput<S>>) {
        self.dkg_done[node as usize] = Some(at);
        self.stats.start(node, at);
        self.start_twin(node, at, out);
        if self.slots[node as usize].honest {
            let key = out.keys[0].group_key().to_bytes();
            self.checker.on_group_key(node, at, key);
            self.dkg_qualified = out.verdicts.qual.len() as u32;
            for (dealer, reason) in &out.verdicts.disqualified {
                self.dkg_disqualified.entry(dealer.0).or_insert(*reason);
            }
        }
        // Genesis members only: joiners have no DKG of their own; a member
        // down while the others deal completes its DKG when it is back.
        let all_done = self.slots.iter().enumerate().all(|(i, s)| {
            self.dkg_done[i].is_some()
                || !s.honest
                || i as u32 >= self.cfg.nodes
                || s.member.is_none()
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
    pub(super) fn start_twin(&mut self, node: u32, at: Time, out: &Arc<DkgOutput<S>>) {
        let Some(twin) = self.twin_slot.get(node as usize).copied().flatten() else {
            return;
        };
        let mut seed = member_seed(self.cfg.seed, node);
        seed[0] ^= 0x77;
        if let Ok(m) = Member::restore(
            self.replica.clone(),
            &self.directory,
            consensus::RestoredParts {
                output: out,
                consensus: consensus::consensus_key(&member_seed(self.cfg.seed, node)),
                chain: Vec::new(),
                votes: Vec::new(),
                seed,
                memo: self.memo.clone(),
                adversary: None,
            },
        ) {
            let slot = &mut self.slots[twin as usize];
            slot.member = Some(m);
            slot.disk.dkg = Some(out.clone());
            self.dkg_done[twin as usize] = Some(at);
            self.stats.start(twin, at);
            self.push(at, twin, Event::Start);
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
            EpochEvent::Started { output, .. } => {
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
            }
            _ => {}
        }
    }
}

/// What the network model keeps per sending slot: a random stream of its
/// own, so that each sender's sends are drawn in its own order on any
/// thread ([`plan_sends`]), and when its uplink is next free.
pub(super) struct SenderLink {
    /// The sender's identity (its index in the network).
    identity: u32,
    rng: ChaCha20Rng,
    uplink_free: Time,
}

impl SenderLink {
    /// Slot `slot`'s link (identity `identity`), its stream drawn from
    /// `seed`: stream `slot` of one ChaCha20 key.
    pub(super) fn new(seed: u64, slot: usize, identity: u32) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        rng.set_stream(slot as u64);
        SenderLink {
            identity,
            rng,
            uplink_free: Time::ZERO,
        }
    }
}

/// How consensus messages reach twins (a Byzantine member's two instances,
/// each talking to its own side), fixed for a window.
pub(super) struct TwinRoutes {
    /// Per slot: whether it is a twin's instance, and its side.
    sides: Vec<(bool, bool)>,
    /// Per member: its twin's second slot, if that instance runs.
    running_twin: Vec<Option<u32>>,
}

impl TwinRoutes {
    /// The slot that receives a consensus message from slot `from` to member
    /// `to`, if any: a twin's instances each talk to their own side only.
    fn route(&self, from: u32, to: u32) -> Option<u32> {
        let (twinned, side) = self.sides[from as usize];
        if let Some(twin) = self.running_twin.get(to as usize).copied().flatten() {
            return Some(if side { twin } else { to });
        }
        let (_, receiver_side) = self.sides[to as usize];
        (!twinned || side == receiver_side).then_some(to)
    }
}

/// One send as the network model carries it: its copy in flight, shared by
/// its receivers, and how many copies arrive (duplicates included).
pub(super) struct Planned<S: Scheme> {
    envelope: InFlight<S>,
    copies: u32,
}

/// Messages sent, by kind, and their bytes: every copy a send went out as,
/// lost ones included.
#[derive(Clone, Debug, Default)]
pub(super) struct SentTally {
    pub(super) messages: BTreeMap<&'static str, u64>,
    pub(super) bytes: u64,
}

impl SentTally {
    /// Adds `other`'s messages and bytes.
    fn add(&mut self, other: &SentTally) {
        for (kind, count) in &other.messages {
            *self.messages.entry(kind).or_default() += count;
        }
        self.bytes += other.bytes;
    }
}

/// Messages sent, consensus messages apart from the DKG's and the epochs'.
/// Each job of [`plan_sends`] counts its own sends; the window sums the
/// jobs' counts in job order.
#[derive(Clone, Debug, Default)]
pub(super) struct SentCounts {
    pub(super) consensus: SentTally,
    pub(super) dkg: SentTally,
}

impl SentCounts {
    /// Counts one send: `sent` copies (lost ones included) of `envelope`,
    /// `bytes` each.
    fn count<S: Scheme>(&mut self, envelope: &InFlight<S>, sent: u64, bytes: usize) {
        let tally = if matches!(envelope, InFlight::Consensus(_)) {
            &mut self.consensus
        } else {
            &mut self.dkg
        };
        if sent > 0 {
            *tally.messages.entry(envelope.kind()).or_default() += sent;
        }
        tally.bytes += sent * bytes as u64;
    }

    /// Adds `other`'s counts.
    pub(super) fn add(&mut self, other: &SentCounts) {
        self.consensus.add(&other.consensus);
        self.dkg.add(&other.dkg);
    }
}

/// A node's output as the merge carries it out: a send drawn through the
/// network model (its copies built as [`Delivery`]s), or any other output.
/// The other outputs are boxed: an output is 392 bytes inline (the largest
/// consensus message), a planned send 24, and a window's carried outputs
/// wait for the merge: at 4,096 members, 379 dealers' 4,100 each, 620 MB of
/// the DKG's peak heap when they were all as large as the largest.
pub(super) enum Carried<S: Scheme> {
    Send(Planned<S>),
    Other(Box<MemberOutput<S>>),
}

/// A copy of a send on its way to a receiving slot, built on the threads by
/// [`plan_sends`]: its sequence number is its send's first (which the merge
/// assigns) plus its place among the send's copies.
pub(super) struct Delivery<S: Scheme> {
    /// The receiving slot.
    pub(super) slot: u32,
    /// The copy's place among its send's copies.
    pub(super) copy: u32,
    /// The sending node's place among the window's effects, and the send's
    /// place among that node's sends.
    pub(super) send: (u32, u32),
    /// When it arrives.
    pub(super) at: Time,
    pub(super) event: Event<S>,
}

impl<S: Scheme> Delivery<S> {
    /// The copy's sequence number, from the first of each send (by node's
    /// place among the window's effects, then send) that the merge assigned.
    pub(super) fn seq(&self, firsts: &[Vec<u64>]) -> u64 {
        firsts[self.send.0 as usize][self.send.1 as usize] + u64::from(self.copy)
    }
}

/// One job's deliveries by range of receiving slots (`PlanContext::range_len`
/// slots each).
pub(super) type Ranges<S> = Vec<Vec<Delivery<S>>>;

/// What drawing a window's sends reads.
pub(super) struct PlanContext<'a> {
    pub(super) network: &'a Network,
    pub(super) parties: u32,
    pub(super) before_cut: bool,
    pub(super) twins: Option<TwinRoutes>,
    /// Receiving slots per range of deliveries.
    pub(super) range_len: usize,
}

/// Senders of one job of [`plan_sends`].
const SENDERS_PER_JOB: usize = 16;

/// What [`plan_sends`] hands the merge: per node (in the order of the
/// window's effects) its outputs to carry out, per job its deliveries by
/// range of receiving slots, and the messages the window sent.
pub(super) struct PlannedWindow<S: Scheme> {
    pub(super) carried: Vec<Vec<(Time, Carried<S>)>>,
    pub(super) deliveries: Vec<Ranges<S>>,
    pub(super) sent: SentCounts,
}

/// One job of [`plan_sends`]: some senders, or the window's trace.
enum SendsJob<'a, S: Scheme> {
    Senders(Vec<(u32, &'a mut NodeEffects<S>, &'a mut SenderLink)>),
    Trace(&'a mut Trace, Vec<NodeRecord>),
}

/// Takes the outputs of a window's `effects` (in node order) and draws their
/// sends through the network model: each sender's sends in its own order,
/// from its own link (`links`, by slot), so the senders are drawn in
/// parallel (`beacon::parallel`) and the copies do not depend on the
/// threads; builds each copy's delivery. Fills in an encoding a worker left
/// out, and leaves out what the merge drops before the cut. The window's
/// trace `records` are hashed into the run's `trace` meanwhile: one more
/// job, which the sends do not touch.
pub(super) fn plan_sends<S: Scheme>(
    effects: &mut [NodeEffects<S>],
    links: &mut [SenderLink],
    ctx: &PlanContext<'_>,
    split: bool,
    (trace, records): (&mut Trace, Vec<NodeRecord>),
) -> PlannedWindow<S> {
    let mut work: Vec<(u32, &mut NodeEffects<S>, &mut SenderLink)> =
        Vec::with_capacity(effects.len());
    let mut rest = links;
    let mut offset = 0usize;
    for (index, fx) in effects.iter_mut().enumerate() {
        let tail = std::mem::take(&mut rest);
        let (link, tail) = tail[fx.node as usize - offset..]
            .split_first_mut()
            .expect("one link per slot, the effects in node order");
        offset = fx.node as usize + 1;
        rest = tail;
        work.push((index as u32, fx, link));
    }
    let plan = |job: SendsJob<'_, S>| {
        let job = match job {
            SendsJob::Senders(senders) => senders,
            SendsJob::Trace(trace, records) => {
                trace.add(&records);
                return None;
            }
        };
        let mut ranges: Ranges<S> = Vec::new();
        let mut sent = SentCounts::default();
        let carried: Vec<_> = job
            .into_iter()
            .map(|(index, fx, link)| plan_node(index, fx, link, ctx, &mut ranges, &mut sent))
            .collect();
        Some((carried, ranges, sent))
    };
    // The trace first, so that a thread starts on it at once: one stream,
    // it does not split.
    let mut jobs = vec![SendsJob::Trace(trace, records)];
    if split {
        for chunk in chunks(work, SENDERS_PER_JOB) {
            jobs.push(SendsJob::Senders(chunk));
        }
    } else {
        jobs.push(SendsJob::Senders(work));
    }
    let done: Vec<_> = if split {
        beacon::parallel::map(jobs, plan)
            .into_iter()
            .filter_map(|(done, _)| done)
            .collect()
    } else {
        jobs.into_iter().filter_map(plan).collect()
    };
    let mut window = PlannedWindow {
        carried: Vec::with_capacity(effects.len()),
        deliveries: Vec::with_capacity(done.len()),
        sent: SentCounts::default(),
    };
    for (carried, ranges, sent) in done {
        window.carried.extend(carried);
        window.deliveries.push(ranges);
        window.sent.add(&sent);
    }
    window
}

/// `items` in chunks of `size` (the last may be shorter), in order.
fn chunks<T>(items: Vec<T>, size: usize) -> Vec<Vec<T>> {
    let mut chunks: Vec<Vec<T>> = Vec::new();
    for item in items {
        match chunks.last_mut() {
            Some(chunk) if chunk.len() < size => chunk.push(item),
            _ => chunks.push(vec![item]),
        }
    }
    chunks
}

/// Node `index`'s (of the window's effects) outputs taken, its sends drawn
/// from its link, their copies added to `ranges` and counted in `sent`, in
/// the order the merge carries them out (what it drops before the cut left
/// out).
fn plan_node<S: Scheme>(
    index: u32,
    fx: &mut NodeEffects<S>,
    link: &mut SenderLink,
    ctx: &PlanContext<'_>,
    ranges: &mut Ranges<S>,
    sent_by_kind: &mut SentCounts,
) -> Vec<(Time, Carried<S>)> {
    let outputs = std::mem::take(&mut fx.outputs);
    let mut encoded = std::mem::take(&mut fx.encoded).into_iter();
    let mut carried = Vec::with_capacity(outputs.len());
    // The copy in flight of the last message sent: a member sends one
    // vote or empty complaint to each of a committee of hundreds, and
    // their recipients share one copy.
    let mut last: Option<InFlight<S>> = None;
    let mut sends = 0u32;
    for (at, output) in outputs {
        let encoded = encoded.next().flatten();
        if ctx.before_cut && dropped_before_cut(&output) {
            continue;
        }
        let (envelope, to) = match output {
            MemberOutput::Effect(Effect::Send { to, message }) => (message, Some(to)),
            MemberOutput::Effect(Effect::Broadcast(message)) => (message, None),
            other => {
                carried.push((at, Carried::Other(Box::new(other))));
                continue;
            }
        };
        let Encoded {
            bytes,
            points,
            same_as_last,
        } = encoded.unwrap_or_else(|| Encoded::of(&envelope, None));
        let consensus = matches!(envelope, Envelope::Consensus(_));
        let envelope = match &last {
            Some(copy) if same_as_last => copy.clone(),
            _ => {
                let copy = InFlight::new(envelope);
                last = Some(copy.clone());
                copy
            }
        };
        let transmit = ctx.network.transmit_us(bytes);
        let receivers = to.into_iter().chain(
            to.is_none()
                .then(|| broadcast_receivers(link.identity, ctx.parties))
                .into_iter()
                .flatten(),
        );
        let send = (index, sends);
        sends += 1;
        let mut copies = 0u32;
        let mut sent = 0u64;
        for t in receivers {
            let slot = match (&ctx.twins, consensus) {
                (Some(twins), true) => match twins.route(fx.node, t.0) {
                    Some(s) => s,
                    None => continue,
                },
                _ => t.0,
            };
            let depart = at.max(link.uplink_free).plus_micros(transmit);
            link.uplink_free = depart;
            sent += 1;
            let arrivals =
                ctx.network
                    .arrivals(&mut link.rng, link.identity, t.0, depart, !consensus);
            let range = slot as usize / ctx.range_len;
            if ranges.len() <= range {
                ranges.resize_with(range + 1, Vec::new);
            }
            for arrival in arrivals {
                ranges[range].push(Delivery {
                    slot,
                    copy: copies,
                    send,
                    at: arrival,
                    event: Event::Deliver {
                        from: NodeIndex(link.identity),
                        envelope: envelope.clone(),
                        bytes,
                        points,
                    },
                });
                copies += 1;
            }
        }
        sent_by_kind.count(&envelope, sent, bytes);
        carried.push((at, Carried::Send(Planned { envelope, copies })));
    }
    carried
}

/// Whether the merge drops `output` before the cut of a run with a
/// snapshot: what a member that finished its DKG early does as a replica.
pub(super) fn dropped_before_cut<S: Scheme>(output: &MemberOutput<S>) -> bool {
    matches!(
        output,
        MemberOutput::Effect(
            Effect::Send {
                message: Envelope::Consensus(_),
                ..
            } | Effect::Broadcast(Envelope::Consensus(_))
        ) | MemberOutput::Event(_)
            | MemberOutput::Epoch(_)
            | MemberOutput::SyncFromStore { .. }
    )
}

/// What the network model needs of a message sent: its encoded length, the
/// points its receivers decode, and whether it is the same message as the
/// last one its sender sent in the window (then they share one copy in
/// flight). A worker computes it for its node's sends ([`encode_sends`]), so
/// the one-threaded merge does not encode.
pub(super) struct Encoded {
    bytes: usize,
    points: EncodedPoints,
    same_as_last: bool,
}

/// What a message whose bulk many sends share encodes to, by the address
/// of that shared part ([`shared_part`]). A member that finished answers
/// every member that asks with the one certificate it keeps (10,923
/// signatures, 830 KB, at 16,384 members), and a dealer answers pulls with
/// its deal (5,460 points): encoding them again for each send took nearly
/// all of `huge`'s DKG once thousands asked. Each entry holds its part
/// weakly: the address stays its own while the entry lives, and the part is
/// freed with its last holder.
struct EncodedShared {
    part: Weak<dyn Any + Send + Sync>,
    bytes: usize,
    points: EncodedPoints,
    digest: Vec<u8>,
}

/// Entries of freed parts are dropped once this many are kept.
const PRUNE_SHARED_AT: usize = 1 << 12;

/// The encodings of shared parts, by (address, attempt).
static SHARED: Mutex<BTreeMap<(usize, u32), EncodedShared>> = Mutex::new(BTreeMap::new());

/// The part of `envelope` that many sends share and that decides its
/// encoding, with the DKG attempt it is sent in: a result certificate, or a
/// relayed broadcast (its attestation binds its payload's digest).
fn shared_part<S: Scheme>(
    envelope: &Envelope<S>,
) -> Option<((usize, u32), Weak<dyn Any + Send + Sync>)> {
    match envelope {
        Envelope::Dkg(SessionMessage::Certificate(certificate)) => {
            let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(certificate) as _;
            Some((
                (Arc::as_ptr(certificate) as usize, certificate.attempt),
                weak,
            ))
        }
        Envelope::Dkg(SessionMessage::Relay {
            attempt,
            message: RelayMessage::Broadcast { attestation, .. },
        }) => {
            let weak: Weak<dyn Any + Send + Sync> = Arc::downgrade(attestation) as _;
            Some(((Arc::as_ptr(attestation) as usize, *attempt), weak))
        }
        _ => None,
    }
}

impl Encoded {
    /// `envelope` encoded; `last`: the fingerprint of the last message sent
    /// before it, updated to this one's. A result certificate's fingerprint
    /// is the SHA-256 of its encoding (equal for equal certificates, as the
    /// encoding is), computed once per certificate a worker holds.
    fn of<S: Scheme>(envelope: &Envelope<S>, last: Option<&mut Vec<u8>>) -> Self {
        let (bytes, points, fingerprint) = match shared_part(envelope) {
            Some((key, part)) => Self::shared(envelope, key, part),
            None => Self::encode(envelope),
        };
        let mut same_as_last = false;
        if let Some(last) = last {
            same_as_last = !fingerprint.is_empty() && *last == fingerprint;
            *last = fingerprint;
        }
        Encoded {
            bytes,
            points,
            same_as_last,
        }
    }

    /// The length, points and fingerprint of `envelope`, encoded.
    fn encode<S: Scheme>(envelope: &Envelope<S>) -> (usize, EncodedPoints, Vec<u8>) {
        beacon::cost::take_encoded();
        let (bytes, fingerprint) =
            beacon::wire::encoded_len_and_fingerprint(envelope).unwrap_or_default();
        (bytes, beacon::cost::take_encoded(), fingerprint)
    }

    /// [`Encoded::encode`] of `envelope`, whose shared part is `part` at
    /// `key`, once per part: its fingerprint is the SHA-256 of the encoding
    /// (equal for equal messages, as the encoding is).
    fn shared<S: Scheme>(
        envelope: &Envelope<S>,
        key: (usize, u32),
        part: Weak<dyn Any + Send + Sync>,
    ) -> (usize, EncodedPoints, Vec<u8>) {
        let lock = || SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = lock().get(&key) {
            if kept.part.strong_count() > 0 {
                return (kept.bytes, kept.points, kept.digest.clone());
            }
        }
        let (bytes, points, fingerprint) = Self::encode(envelope);
        if fingerprint.is_empty() {
            return (bytes, points, fingerprint);
        }
        let digest = Sha256::digest(&fingerprint).to_vec();
        let mut kept = lock();
        if kept.len() >= PRUNE_SHARED_AT {
            kept.retain(|_, c| c.part.strong_count() > 0);
        }
        let entry = EncodedShared {
            part,
            bytes,
            points,
            digest: digest.clone(),
        };
        kept.insert(key, entry);
        (bytes, points, digest)
    }
}

/// Encodes the sends among `outputs` in the order the merge carries them
/// out, leaving out what it drops (`before_cut`): one entry per output.
pub(super) fn encode_sends<S: Scheme>(
    outputs: &[(Time, MemberOutput<S>)],
    before_cut: bool,
) -> Vec<Option<Encoded>> {
    let mut last = Vec::new();
    outputs
        .iter()
        .map(|(_, output)| {
            if before_cut && dropped_before_cut(output) {
                return None;
            }
            match output {
                MemberOutput::Effect(Effect::Send { message, .. })
                | MemberOutput::Effect(Effect::Broadcast(message)) => {
                    Some(Encoded::of(message, Some(&mut last)))
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window holds every carried output of its nodes until the merge (a
    /// dealer's 4,100 at 4,096 members): a planned send, the most common,
    /// must not take the room of the largest output.
    #[test]
    fn a_carried_send_is_small() {
        assert!(std::mem::size_of::<(Time, Carried<beacon::MinSig>)>() <= 48);
        assert!(std::mem::size_of::<(Time, Carried<beacon::MinPk>)>() <= 48);
    }
}
