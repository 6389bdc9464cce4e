//! The messages of a change (control transactions, invitations, handoffs,
//! resharing and DKG messages), routed to the roles that take them; the
//! handoffs old members serve; and the switch of replicas at the decided
//! height.

use super::{handoff_len, EpochChangeFailure, EpochEvent, Handoff, RETAIN_PHASES};
use crate::disk::{EpochRecord, RetainedDeal};
use crate::epoch::{EpochMessage, NamedKeys, Transition, TransitionTimer};
use crate::member::outbox::Outbox;
use crate::member::{Envelope, Member, MemberOutput, MemberTimer, Phase};
use crate::messages::CommittedEntry;
use crate::replica::Input;
use crate::{DirectoryIndex, Epoch, Height};
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme, Time};
use std::sync::Arc;

impl<S: Scheme> Member<S> {
    /// A message of an epoch change from directory member `from`, routed to
    /// the role that takes it.
    pub(in crate::member) fn on_epoch_message(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        out: &mut Outbox<S>,
    ) {
        match message {
            EpochMessage::Control(control) => self.on_control(now, from, control, out),
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
                let handoff = Handoff {
                    epoch,
                    digest,
                    dealers,
                    entries,
                };
                self.on_handoff(now, from, handoff, out)
            }
            EpochMessage::HandoffRequest { epoch } => self.on_handoff_request(from, epoch, out),
            EpochMessage::Current(current) => self.on_current(from, *current),
            message @ EpochMessage::Reshare { .. } => self.on_reshare(now, from, message, out),
        }
    }

    /// Notes that party `from` sent a message of the change (its control
    /// transactions, resharing messages and handoff requests).
    pub(super) fn heard(&mut self, from: DirectoryIndex) {
        let parties = self
            .identity
            .as_ref()
            .map_or(0, |i| i.who.directory.len() as usize);
        self.change.heard(from, parties);
    }

    /// Party `from` asks for the handoff into `epoch`: a new member of it is
    /// served the handoff this member serves, and its invitation again; a
    /// party that knows only an earlier epoch is told the current one.
    fn on_handoff_request(&mut self, from: DirectoryIndex, epoch: Epoch, out: &mut Outbox<S>) {
        self.heard(from);
        let asked_by_new = self.epoch.number == epoch && self.epoch.index_of(from).is_some()
            || self
                .change
                .transition()
                .is_some_and(|t| t.epoch() == epoch && t.new_epoch().index_of(from).is_some());
        if let (Some(h), true) = (self.dealer.handoff_into(epoch), asked_by_new) {
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
        self.invite_again(from, epoch, out);
        self.tell_current(from, epoch, out);
    }

    /// Step 5 at an old member: the epoch ends after `height`. What its
    /// replica queued after the block that ended it is dropped (it was the
    /// old epoch's next height, which never happens).
    pub(in crate::member) fn on_switch(
        &mut self,
        now: Time,
        height: Height,
        digest: [u8; 32],
        dealers: Vec<NodeIndex>,
        out: &mut Outbox<S>,
    ) {
        self.generation = self.generation.wrapping_add(1);
        let Phase::Replica(replica) = &self.phase else {
            return;
        };
        let entries: Vec<_> = replica.finalized().iter().cloned().collect();
        let new = match (self.change.transition(), self.change.invitation()) {
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
        let running = self.change.transition().is_some() && !self.change.is_ready();
        let holds = self.keys_for(now, digest, &dealers, out);
        let running = running || self.awaits_keys();
        match new.index_of(me) {
            Some(_) if holds => self.enter_epoch(now, entries, out),
            Some(_) if running => {
                // Its keys are still on their way: it starts the new epoch
                // from its own chain once they are ready (and catches up).
                self.change.wait_with_own_chain(Handoff {
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
                let transition = self.change.take_transition();
                let dealt = transition.as_ref().and_then(|_| self.deal_to_keep(now));
                self.phase = Phase::Retired;
                self.keys = None;
                self.move_roles_to(&new, None);
                self.retain(now, transition, dealt.as_ref(), out);
                self.epoch = new;
                self.me = me.address();
                let record = EpochRecord::of(&self.epoch, height.saturating_add(1), true);
                for write in crate::disk::on_epoch(dealt, record, None) {
                    out.push(MemberOutput::Persist(write));
                }
                out.push(MemberOutput::Epoch(EpochEvent::Retired {
                    epoch: self.epoch.number,
                    height,
                }));
            }
        }
        self.dealer.serve(handoff);
    }

    /// Runs the new epoch's replica from `entries` (ending at the last height of
    /// the old epoch) with this member's new keys, and replays what came ahead.
    pub(in crate::member) fn enter_epoch(
        &mut self,
        now: Time,
        entries: Vec<Arc<CommittedEntry<S>>>,
        out: &mut Outbox<S>,
    ) {
        let Some((output, t)) = self.change.take_keys_and_transition() else {
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
        let ahead = self.change.take_ahead();
        let dealt = self.deal_to_keep(now);
        let directory = self.identity.as_ref().map(|i| i.who.directory.clone());
        self.move_roles_to(&new, directory.as_ref());
        self.retain(now, Some(t), dealt.as_ref(), out);
        self.me = output.me;
        self.keys = Some(output.clone());
        self.epoch = new;
        let record = EpochRecord::of(&self.epoch, last.saturating_add(1), false);
        for write in crate::disk::on_epoch(dealt, record, Some(output.clone())) {
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
    /// to new members that ask, and arms its erasure (at the time of `dealt`,
    /// what the disk keeps of it, when this member dealt).
    fn retain(
        &mut self,
        now: Time,
        transition: Option<Transition<S>>,
        dealt: Option<&RetainedDeal<S>>,
        out: &mut Outbox<S>,
    ) {
        let (Some(t), Some(identity)) = (transition, &self.identity) else {
            return;
        };
        let epoch = t.epoch();
        let at = match dealt {
            Some(d) => d.until,
            None => retained_until(now, identity.timing.phase_us()),
        };
        out.push(MemberOutput::Effect(Effect::SetTimer {
            at,
            timer: MemberTimer::Epoch {
                epoch,
                timer: TransitionTimer::Erase,
            },
        }));
        self.dealer.retain(t, dealt.map(|d| d.until));
    }

    /// A member restored with what it dealt in changes still on its disk
    /// ([`Member::with_retained_deal`]) arms each change's erasure timer, at
    /// the time the disk keeps it until (at once if it is over).
    pub(in crate::member) fn arm_kept_deal_erasure(&self, out: &mut Outbox<S>) {
        for (epoch, until) in self.dealer.kept() {
            out.push(MemberOutput::Effect(Effect::SetTimer {
                at: until,
                timer: MemberTimer::Epoch {
                    epoch,
                    timer: crate::epoch::TransitionTimer::Erase,
                },
            }));
        }
    }

    /// What the disk keeps of the change this member switches out of (its
    /// transition taken, to retain), if it dealt in it (it held a beacon
    /// share of the ending epoch): the invitation and that share, until the
    /// retention after the switch ends.
    fn deal_to_keep(&self, now: Time) -> Option<RetainedDeal<S>> {
        let identity = self.identity.as_ref()?;
        let invitation = self.change.invitation()?;
        let share = self.keys.as_ref()?.keys.first()?.secret_share.clone();
        Some(RetainedDeal {
            invitation: invitation.clone(),
            old_share: share,
            until: retained_until(now, identity.timing.phase_us()),
        })
    }
}

/// When what a member retained at a switch at `now` is erased:
/// [`RETAIN_PHASES`] phase lengths (`phase_us`) later.
fn retained_until(now: Time, phase_us: u64) -> Time {
    now.plus_micros(phase_us.saturating_mul(RETAIN_PHASES).max(1))
}
