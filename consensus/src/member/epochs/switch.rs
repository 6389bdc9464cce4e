//! The messages of a change (control transactions, invitations, handoffs,
//! resharing and DKG messages), routed to their roles, and the switch of
//! replicas at the decided height.

use super::{
    early_per_sender, handoff_len, EpochChangeFailure, EpochEvent, Handoff,
    MAX_CONTROLS_PER_SIGNER, RETAIN_PHASES,
};
use crate::disk::EpochRecord;
use crate::epoch::NamedKeys;
use crate::epoch::{
    EpochMessage, ReshareWire, Transition, TransitionInput, TransitionOutput, TransitionTimer,
};
use crate::member::outbox::{Outbox, SelfInput};
use crate::member::{Envelope, Member, MemberOutput, MemberTimer, Phase};
use crate::messages::CommittedEntry;
use crate::replica::Input;
use crate::{DirectoryIndex, Height};
use beacon::effect::Effect;
use beacon::{Scheme, Time};
use sha2::{Digest as _, Sha256};
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
