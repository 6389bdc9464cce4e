//! The messages of a change (control transactions, invitations, handoffs,
//! resharing and DKG messages), a joiner's belief in `f + 1` invitations and
//! handoffs, and the switch of replicas at the decided height.

use super::{
    early_per_sender, handoff_len, EpochChangeFailure, EpochEvent, Handoff,
    MAX_CONTROLS_PER_SIGNER, RETAIN_PHASES,
};
use crate::disk::EpochRecord;
use crate::epoch::NamedKeys;
use crate::epoch::{
    CurrentEpoch, EpochMessage, EpochView, Invitation, ReshareWire, Transition, TransitionInput,
    TransitionOutput, TransitionTimer,
};
use crate::member::outbox::{Outbox, SelfInput};
use crate::member::{Envelope, Member, MemberOutput, MemberTimer, Phase};
use crate::messages::CommittedEntry;
use crate::replica::Input;
use crate::{DirectoryIndex, Epoch, Height};
use beacon::effect::Effect;
use beacon::{Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

impl<S: Scheme> Member<S> {
    /// A message of an epoch change from directory member `from`.
    pub(in crate::member) fn on_epoch_message(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        out: &mut Outbox<S>,
    ) {
        if matches!(
            message,
            EpochMessage::Control(_)
                | EpochMessage::Reshare { .. }
                | EpochMessage::HandoffRequest { .. }
        ) && self.epochs.heard_from.len()
            < self
                .identity
                .as_ref()
                .map_or(0, |i| i.who.directory.len() as usize)
        {
            self.epochs.heard_from.insert(from);
        }
        match message {
            EpochMessage::Control(control) => {
                // Signed by a party of the directory (a current or a new
                // member), and a bounded number per signer and epoch.
                let signer = control.signer();
                let known = self
                    .identity
                    .as_ref()
                    .is_some_and(|i| i.who.directory.index_of(&signer).is_some());
                let Ok(tx) = control.to_transaction() else {
                    return;
                };
                let id: [u8; 32] = Sha256::digest(&tx).into();
                let seen = self.epochs.controls_from.entry(signer).or_default();
                if !known || (!seen.contains(&id) && seen.len() >= MAX_CONTROLS_PER_SIGNER) {
                    return;
                }
                let Phase::Replica(r) = &mut self.phase else {
                    return;
                };
                if !control.verify() {
                    return;
                }
                seen.insert(id);
                let outputs = r.handle(now, Input::ControlTransaction(tx));
                self.queue_replica(outputs, out);
            }
            EpochMessage::Invite(invitation) => self.on_invite(now, from, *invitation, out),
            EpochMessage::Named {
                epoch,
                digest,
                dealers,
            } => self.on_named_notice(from, epoch, NamedKeys { digest, dealers }, out),
            EpochMessage::Handoff {
                epoch,
                digest,
                dealers,
                entries,
            } => {
                if matches!(self.phase, Phase::Joining) && self.epoch.index_of(from).is_some() {
                    self.epochs.handoffs.entry(from).or_insert(Handoff {
                        epoch,
                        digest,
                        dealers,
                        entries,
                    });
                    self.try_join(now, out);
                }
            }
            EpochMessage::HandoffRequest { epoch } => {
                let asked_by_new = self.epoch.number == epoch
                    && self.epoch.index_of(from).is_some()
                    || self.epochs.transition.as_ref().is_some_and(|t| {
                        t.epoch() == epoch && t.new_epoch().index_of(from).is_some()
                    });
                if let (Some(h), true) = (&self.epochs.served, asked_by_new) {
                    if h.epoch == epoch {
                        out.push(MemberOutput::Effect(Effect::Send {
                            to: from.address(),
                            message: Envelope::Epoch(EpochMessage::Handoff {
                                epoch,
                                digest: h.digest,
                                dealers: h.dealers.clone(),
                                entries: h.entries.clone(),
                            }),
                        }));
                    }
                }
                self.invite_again(from, epoch, out);
                self.tell_current(from, epoch, out);
            }
            EpochMessage::Current(current) => self.on_current(from, *current),
            request @ EpochMessage::Reshare {
                epoch,
                message: ReshareWire::Request,
            } if self
                .epochs
                .transition
                .as_ref()
                .is_none_or(|t| t.epoch() != epoch) =>
            {
                // A new member asks a dealer of a change this member already
                // went through.
                if let Some(t) = self.epochs.retained.as_mut().filter(|t| t.epoch() == epoch) {
                    let input = TransitionInput::Message {
                        from,
                        message: request,
                    };
                    for event in t.handle(now, input) {
                        if let TransitionOutput::Effect(e) = event {
                            out.push(MemberOutput::Effect(e.map(Envelope::Epoch, |timer| {
                                MemberTimer::Epoch { epoch, timer }
                            })));
                        }
                    }
                }
            }
            message @ EpochMessage::Reshare { epoch, .. } => {
                if let Some(t) = self.epochs.transition.as_mut() {
                    let events = t.handle(now, TransitionInput::Message { from, message });
                    self.queue_transition(events, out);
                    // Once the events were read.
                    out.loop_back(SelfInput::RetryJoin);
                } else if Some(epoch) == self.epoch.number.checked_add(1) {
                    let parties = self.identity.as_ref().map_or(0, |i| i.who.directory.len());
                    if from.get() < parties {
                        let limit = early_per_sender(parties as usize);
                        let kept = self.epochs.early.entry(from).or_default();
                        if kept.len() < limit {
                            kept.push(message);
                        }
                    }
                }
            }
        }
    }

    /// An old member of the change into `epoch` sends its invitation again to
    /// new member `from` that asks for its handoff: a joiner that restarted
    /// during the change lost its invitation, and old members send it
    /// unasked only to new members they have not heard from. It does so while
    /// it runs the old epoch with the change's transition, and after the
    /// switch while it retains its transition (its deal and sub-shares, which
    /// the restarted member then asks for). A new member that holds its
    /// transition ignores the invitation; one without counts it with the
    /// others (`f + 1` identical ones start its transition).
    fn invite_again(&self, from: DirectoryIndex, epoch: Epoch, out: &mut Outbox<S>) {
        let me = self.identity.as_ref().map(|i| i.who.me);
        let running = match (
            &self.phase,
            &self.epochs.invitation,
            &self.epochs.transition,
        ) {
            (Phase::Replica(_), Some(invitation), Some(t)) if t.epoch() == epoch => {
                Some((invitation, t))
            }
            _ => None,
        };
        // After the switch: only an old member serves the handoff into `epoch`.
        let served = self
            .epochs
            .served
            .as_ref()
            .is_some_and(|h| h.epoch == epoch);
        let retained = match (&self.epochs.retained_invitation, &self.epochs.retained) {
            (Some(invitation), Some(t)) if served && t.epoch() == epoch => Some((invitation, t)),
            _ => None,
        };
        let Some((invitation, t)) = running.or(retained) else {
            return;
        };
        if Some(from) == me
            || invitation.change.epoch != epoch
            || t.new_epoch().index_of(from).is_none()
        {
            return;
        }
        out.push(MemberOutput::Effect(Effect::Send {
            to: from.address(),
            message: Envelope::Epoch(EpochMessage::Invite(Box::new(invitation.clone()))),
        }));
    }

    /// Party `from` asked for the handoff into `epoch`, which began here
    /// without it: it knows an earlier epoch only (the genesis, or one it
    /// left before more changes), and is told the one this member runs or
    /// left to ([`EpochMessage::Current`]). A new member of this epoch that
    /// asks is served its handoff instead (above).
    fn tell_current(&self, from: DirectoryIndex, epoch: Epoch, out: &mut Outbox<S>) {
        let party = self
            .identity
            .as_ref()
            .is_some_and(|i| from.get() < i.who.directory.len() && from != i.who.me);
        if !party
            || epoch > self.epoch.number
            || self.epoch.index_of(from).is_some()
            || !matches!(self.phase, Phase::Replica(_) | Phase::Retired)
        {
            return;
        }
        out.push(MemberOutput::Effect(Effect::Send {
            to: from.address(),
            message: Envelope::Epoch(EpochMessage::Current(Box::new(CurrentEpoch {
                number: self.epoch.number,
                members: self.epoch.members.clone(),
                config: self.epoch.config.clone(),
                consensus: self.epoch.consensus.as_ref().clone(),
            }))),
        }));
    }

    /// A joiner that knows an earlier epoch than the members run (it knows
    /// the genesis, or the epoch it left, and more changes came since)
    /// believes the epoch that `f + 1` members of the epoch it knows tell it
    /// the same of (at most `f` of them are Byzantine), and waits there to
    /// be invited: its next requests go to that epoch's members, whose
    /// invitations it then takes. One statement per member counts.
    fn on_current(&mut self, from: DirectoryIndex, current: CurrentEpoch) {
        let Some(identity) = &self.identity else {
            return;
        };
        let directory = identity.who.directory.clone();
        let distinct: BTreeSet<DirectoryIndex> = current.members.iter().copied().collect();
        let well_formed = current.members.len() == current.config.n as usize
            && current.consensus.len() == current.members.len()
            && distinct.len() == current.members.len()
            && current.members.iter().all(|m| m.get() < directory.len());
        if !matches!(self.phase, Phase::Joining)
            || self.epochs.transition.is_some()
            || current.number <= self.epoch.number
            || self.epoch.index_of(from).is_none()
            || !well_formed
            || !self.epochs.current_from.insert(from)
        {
            return;
        }
        let digest = current.digest();
        let (_, senders) = self
            .epochs
            .currents
            .entry(digest)
            .or_insert_with(|| (current, BTreeSet::new()));
        senders.insert(from);
        if senders.len() <= self.epoch.config.f as usize {
            return;
        }
        let Some((current, _)) = self.epochs.currents.remove(&digest) else {
            return;
        };
        let view = EpochView::new(
            current.number,
            current.members,
            current.config,
            Arc::new(current.consensus),
        );
        self.epochs = self.epochs.next(&view, Some(&directory), &self.memo);
        self.epoch = view;
    }

    /// A joiner counts identical invitations from old members; `f + 1` of them
    /// include an honest one.
    pub(in crate::member) fn on_invite(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        invitation: Invitation<S>,
        out: &mut Outbox<S>,
    ) {
        let Some(identity) = &self.identity else {
            return;
        };
        if !matches!(self.phase, Phase::Joining)
            || self.epochs.transition.is_some()
            || self.epoch.index_of(from).is_none()
            || !self.epochs.invited_by.insert(from)
            || invitation.reshare.old_members != self.epoch.ids(&identity.who.directory)
            || invitation.change.epoch != self.epoch.number.saturating_add(1)
        {
            return;
        }
        let digest = invitation.digest();
        let (_, senders) = self
            .epochs
            .invites
            .entry(digest)
            .or_insert_with(|| (invitation, BTreeSet::new()));
        senders.insert(from);
        if senders.len() <= self.epoch.config.f as usize {
            return;
        }
        let Some((invitation, _)) = self.epochs.invites.remove(&digest) else {
            return;
        };
        self.epochs.invites.clear();
        let new = match self.next_epoch(&invitation.change) {
            Ok(v) => v,
            Err(reason) => return self.fail_epoch(invitation.change.epoch, reason, out),
        };
        self.start_transition(now, invitation, new, None, out);
    }

    /// A joiner with its keys starts the new replica once `f + 1` old members
    /// handed over the same chain with its keys' digest.
    pub(in crate::member) fn try_join(&mut self, now: Time, out: &mut Outbox<S>) {
        if !matches!(self.phase, Phase::Joining) {
            return;
        }
        let Some(t) = &self.epochs.transition else {
            return;
        };
        let epoch = t.epoch();
        let waiting = self.epochs.ready.is_none();
        if let Some(own) = self.epochs.own_handoff.take() {
            // A stayer that was late: its own chain says where the epoch began.
            let holds = self.keys_for(now, own.digest, &own.dealers, out);
            if !holds && (waiting || self.awaits_keys()) {
                // No keys of its own yet: it may still recombine them from
                // the dealers its chain names, once their deals are in.
                self.epochs.own_handoff = Some(own);
                return;
            }
            if !holds {
                self.phase = Phase::Failed;
                return self.fail_epoch(epoch, EpochChangeFailure::SwitchedToOtherKeys, out);
            }
            return self.enter_epoch(now, own.entries, out);
        }
        let mut counts: BTreeMap<_, (usize, DirectoryIndex)> = BTreeMap::new();
        for (from, h) in &self.epochs.handoffs {
            if let Some(id) = h.identity().filter(|id| id.epoch == epoch) {
                counts.entry(id).or_insert((0, *from)).0 += 1;
            }
        }
        let need = self.epoch.config.f as usize + 1;
        let Some((id, (_, from))) = counts.into_iter().find(|(_, (c, _))| *c >= need) else {
            return;
        };
        let holds = self.keys_for(now, id.keys.digest, &id.keys.dealers, out);
        if !holds && (waiting || self.awaits_keys()) {
            return;
        }
        if !holds {
            self.phase = Phase::Failed;
            return self.fail_epoch(epoch, EpochChangeFailure::HandedOverOtherKeys, out);
        }
        let Some(handoff) = self.epochs.handoffs.remove(&from) else {
            return;
        };
        self.enter_epoch(now, handoff.entries, out);
    }

    /// Whether this member holds the new keys of digest `digest`: its own, or
    /// recombined from the resharing `dealers` the chain recorded (it took part
    /// late and combined others). When it lacks some of those dealers' deals
    /// or sub-shares, it asks them ([`Member::awaits_keys`]).
    pub(in crate::member) fn keys_for(
        &mut self,
        now: Time,
        digest: [u8; 32],
        dealers: &[u32],
        out: &mut Outbox<S>,
    ) -> bool {
        if let Some((mine, _)) = &self.epochs.ready {
            if *mine == digest {
                return true;
            }
        }
        let Some(t) = self.epochs.transition.as_mut() else {
            return false;
        };
        if let Some(output) = t.adopt(digest, dealers) {
            self.epochs.ready = Some((digest, output));
            return true;
        }
        let events = t.handle(now, TransitionInput::AskAwaited);
        self.queue_transition(events, out);
        false
    }

    /// Whether this member waits for the deals and sub-shares of the dealers
    /// its chain named, to recombine the keys the epoch switched to
    /// ([`Transition::adopt`]).
    pub(in crate::member) fn awaits_keys(&self) -> bool {
        self.epochs.transition.as_ref().is_some_and(|t| t.awaits())
    }

    /// A member waiting for the keys the chain switched to read a message of
    /// the change ([`SelfInput::RetryJoin`]): what came may complete them.
    pub(in crate::member) fn on_retry_join(&mut self, now: Time, out: &mut Outbox<S>) {
        if self.epochs.ready.is_none() {
            self.try_join(now, out);
        }
    }

    /// Step 5 at an old member: the epoch ends after `height`. What its
    /// replica queued after the block that ended it is dropped (it was the
    /// old epoch's next height, which never happens).
    pub(in crate::member) fn on_switch(
        &mut self,
        now: Time,
        height: Height,
        digest: [u8; 32],
        dealers: Vec<u32>,
        out: &mut Outbox<S>,
    ) {
        self.generation = self.generation.wrapping_add(1);
        let Phase::Replica(replica) = &self.phase else {
            return;
        };
        let entries: Vec<_> = replica.finalized().iter().cloned().collect();
        let new = match (&self.epochs.transition, &self.epochs.invitation) {
            (Some(t), _) => Some(t.new_epoch().clone()),
            (None, Some(inv)) => self.next_epoch(&inv.change).ok(),
            (None, None) => None,
        };
        let Some(new) = new else {
            // This member never learned the change (no identity): it cannot
            // follow, and stops rather than run an epoch that is over.
            self.phase = Phase::Failed;
            self.keys = None;
            return self.fail_epoch(
                self.epoch.number.saturating_add(1),
                EpochChangeFailure::NextEpochUnknown,
                out,
            );
        };
        let tail = entries.len().saturating_sub(handoff_len(&new.config));
        let handoff = Handoff {
            epoch: new.number,
            digest,
            dealers: dealers.clone(),
            entries: entries[tail..].to_vec(),
        };
        for d in &new.members {
            if self.epoch.index_of(*d).is_none() {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: d.address(),
                    message: Envelope::Epoch(EpochMessage::Handoff {
                        epoch: new.number,
                        digest,
                        dealers: dealers.clone(),
                        entries: handoff.entries.clone(),
                    }),
                }));
            }
        }
        let me = self
            .identity
            .as_ref()
            .map(|i| i.who.me)
            .unwrap_or(DirectoryIndex::of_address(self.me));
        let running = self.epochs.transition.is_some() && self.epochs.ready.is_none();
        let holds = self.keys_for(now, digest, &dealers, out);
        let running = running || self.awaits_keys();
        match new.index_of(me) {
            Some(_) if holds => self.enter_epoch(now, entries, out),
            Some(_) if running => {
                // Its keys are still on their way: it starts the new epoch
                // from its own chain once they are ready (and catches up).
                self.epochs.own_handoff = Some(Handoff {
                    epoch: new.number,
                    digest,
                    dealers,
                    entries,
                });
                self.phase = Phase::Joining;
            }
            Some(_) => {
                self.phase = Phase::Failed;
                self.keys = None;
                self.fail_epoch(new.number, EpochChangeFailure::SwitchedToOtherKeys, out);
            }
            None => {
                self.phase = Phase::Retired;
                self.keys = None;
                let transition = self.epochs.transition.take();
                self.epochs = self.epochs.next(&new, None, &self.memo);
                self.retain(now, transition, out);
                self.epoch = new;
                self.me = me.address();
                let record = EpochRecord::of(&self.epoch, height.saturating_add(1), true);
                for write in crate::disk::on_epoch(record, None) {
                    out.push(MemberOutput::Persist(write));
                }
                out.push(MemberOutput::Epoch(EpochEvent::Retired {
                    epoch: self.epoch.number,
                    height,
                }));
            }
        }
        self.epochs.served = Some(handoff);
    }

    /// Runs the new epoch's replica from `entries` (ending at the last height of
    /// the old epoch) with this member's new keys, and replays what came ahead.
    pub(in crate::member) fn enter_epoch(
        &mut self,
        now: Time,
        entries: Vec<Arc<CommittedEntry<S>>>,
        out: &mut Outbox<S>,
    ) {
        let (Some((_, output)), Some(t)) =
            (self.epochs.ready.take(), self.epochs.transition.take())
        else {
            return;
        };
        let new = t.new_epoch().clone();
        let last = entries.last().map_or(Height::ZERO, |e| e.block.height);
        let replica = Self::build_replica(
            &new,
            &output,
            &self.consensus,
            entries,
            Vec::new(),
            &self.seed,
            &self.memo,
            self.adversary.as_deref(),
        );
        let mut replica = match replica {
            Ok(r) => r,
            Err(e) => {
                self.phase = Phase::Failed;
                return self.fail_epoch(new.number, EpochChangeFailure::Replica(Arc::new(e)), out);
            }
        };
        let ahead = std::mem::take(&mut self.epochs.ahead);
        let directory = self.identity.as_ref().map(|i| i.who.directory.clone());
        self.epochs = self.epochs.next(&new, directory.as_ref(), &self.memo);
        self.retain(now, Some(t), out);
        self.me = output.me;
        self.keys = Some(output.clone());
        self.epoch = new;
        let record = EpochRecord::of(&self.epoch, last.saturating_add(1), false);
        for write in crate::disk::on_epoch(record, Some(output.clone())) {
            out.push(MemberOutput::Persist(write));
        }
        out.push(MemberOutput::Epoch(EpochEvent::Started {
            epoch: self.epoch.number,
            start: last.saturating_add(1),
            members: self.epoch.members.clone(),
            config: self.epoch.config.clone(),
            consensus: self.epoch.consensus.clone(),
            output,
        }));
        let mut outputs = replica.handle(now, Input::Start);
        for (from, message) in ahead {
            if message.height().is_some_and(|h| h <= last) {
                continue;
            }
            if let Some(i) = self.epoch.index_of(from) {
                outputs.extend(replica.handle(now, Input::Message { from: i, message }));
            }
        }
        self.phase = Phase::Replica(replica);
        self.queue_replica(outputs, out);
    }

    /// Keeps the transition of the change just made, to send its deal again
    /// to new members that ask, and arms its erasure.
    fn retain(&mut self, now: Time, transition: Option<Transition<S>>, out: &mut Outbox<S>) {
        let (Some(t), Some(identity)) = (transition, &self.identity) else {
            return;
        };
        let epoch = t.epoch();
        let after = identity.timing.phase_us().saturating_mul(RETAIN_PHASES);
        out.push(MemberOutput::Effect(Effect::SetTimer {
            at: now.plus_micros(after.max(1)),
            timer: MemberTimer::Epoch {
                epoch,
                timer: TransitionTimer::Erase,
            },
        }));
        self.epochs.retained = Some(t);
    }
}
