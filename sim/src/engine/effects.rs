//! The merge: one node's outputs of a window carried out in node order
//! (sends and broadcasts through the network model, timers into the queue,
//! honest members' events to the checker and the statistics), and what the
//! engine does when a member finishes its DKG or steps through a change of
//! members.

use super::node::{member_seed, Event, InFlight};
use super::step::{CrashHit, NodeEffects};
use super::Engine;
use crate::invariants::FailureKind;
use crate::network::broadcast_receivers;
use crate::report::CrashPointHit;
use beacon::cost::EncodedPoints;
use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::{NodeIndex, Point, Scheme, Time};
use consensus::observe::dispatch;
use consensus::{Envelope, EpochEvent, Member, MemberOutput};
use sha2::Digest as _;
use std::sync::Arc;

impl<S: Scheme> Engine<S> {
    /// Applies one node's effects: network, timers, observations. Sequential, in
    /// node order: the only place that draws network randomness.
    pub(super) fn merge(&mut self, fx: NodeEffects<S>) {
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
        // The copy in flight of the last message sent: a member sends one
        // vote or empty complaint to each of a committee of hundreds, and
        // their recipients share one copy.
        let mut last: Option<InFlight<S>> = None;
        let mut encoded = fx.encoded.into_iter();
        for (at, output) in fx.outputs {
            let encoded = encoded.next().flatten();
            // Before the cut, a member that finished its DKG early only helps
            // the others': what its replica does is dropped.
            if before_cut && dropped_before_cut(&output) {
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
                    let encoded = encoded.unwrap_or_else(|| Encoded::of(&message, None));
                    self.send(node, at, &[to], message, encoded, &mut last)
                }
                MemberOutput::Effect(Effect::Broadcast(envelope)) => {
                    let me = self.slots[node as usize].identity;
                    let all: Vec<NodeIndex> = broadcast_receivers(me, self.parties).collect();
                    let encoded = encoded.unwrap_or_else(|| Encoded::of(&envelope, None));
                    self.send(node, at, &all, envelope, encoded, &mut last);
                }
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

    /// Sends `envelope` (`encoded`) from slot `from` to `to` through the
    /// network model. An envelope equal to the `last` one sent shares its
    /// copy in flight.
    fn send(
        &mut self,
        from: u32,
        at: Time,
        to: &[NodeIndex],
        envelope: Envelope<S>,
        encoded: Encoded,
        last: &mut Option<InFlight<S>>,
    ) {
        let Encoded {
            bytes,
            points,
            same_as_last,
        } = encoded;
        let consensus = matches!(envelope, Envelope::Consensus(_));
        let transmit = self.network.transmit_us(bytes);
        let envelope = match last {
            Some(copy) if same_as_last => copy.clone(),
            _ => {
                let copy = InFlight::new(envelope);
                *last = Some(copy.clone());
                copy
            }
        };
        let identity = self.slots[from as usize].identity;
        let mut sent = 0u64;
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
            sent += 1;
            let arrivals =
                self.network
                    .arrivals(&mut self.net_rng, identity, t.0, depart, !consensus);
            for arrival in arrivals {
                self.deliver(
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
        // Counted once per send: the messages and bytes of its copies.
        let (messages, total) = if consensus {
            (&mut self.consensus_messages, &mut self.consensus_bytes)
        } else {
            (&mut self.dkg_messages, &mut self.dkg_bytes)
        };
        if sent > 0 {
            *messages.entry(envelope.kind()).or_default() += sent;
        }
        *total += sent * bytes as u64;
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

impl Encoded {
    /// `envelope` encoded; `last`: the fingerprint of the last message sent
    /// before it, updated to this one's.
    fn of<S: Scheme>(envelope: &Envelope<S>, last: Option<&mut Vec<u8>>) -> Self {
        beacon::cost::take_encoded();
        let (bytes, fingerprint) =
            beacon::wire::encoded_len_and_fingerprint(envelope).unwrap_or_default();
        let points = beacon::cost::take_encoded();
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
