//! Proposing a change, reading decisions off the finalized chain, sending
//! again what a change still waits for, and running this member's
//! [`Transition`] until it holds the new epoch's keys.

use super::{EpochChangeFailure, EpochEvent};
use crate::epoch::{
    check_change, check_consensus_keys, Control, EpochChange, EpochMessage, EpochView, Invitation,
    ReshareWire, Transition, TransitionInput, TransitionOutput, TransitionTimer,
};
use crate::member::outbox::{Outbox, SelfInput};
use crate::member::{derive, Envelope, Member, MemberOutput, MemberTimer, Phase};
use crate::messages::CommittedEntry;
use crate::replica::Input;
use crate::{DirectoryIndex, Epoch, Height};
use beacon::effect::Effect;
use beacon::reshare::ReshareSettings;
use beacon::{Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

impl<S: Scheme> Member<S> {
    /// The epoch of the change this member is taking part in, from the
    /// decision on its chain (an old member) or the invitation (a joiner)
    /// until it runs that epoch's replica or leaves; `None` when it takes
    /// part in none. A driver shows it (the node's `GET /epoch`).
    pub fn changing_to(&self) -> Option<Epoch> {
        self.change.changing_to()
    }

    /// The changes (by the epoch each started) whose deal this member still
    /// keeps to deal again to a member that missed it, until each one's
    /// erasure: an operator keeps a node that left running until none is
    /// left (a stayer that missed the switch needs every named dealer's
    /// sub-share). A driver shows it (the node's `GET /epoch`).
    pub fn retained_deals(&self) -> impl Iterator<Item = Epoch> + '_ {
        self.dealer.kept().map(|(epoch, _)| epoch)
    }

    /// The operator's proposal: signed, into this replica's mempool and to
    /// every member's.
    pub(in crate::member) fn on_propose_epoch(
        &mut self,
        now: Time,
        change: EpochChange,
        out: &mut Outbox<S>,
    ) {
        let Some(identity) = &self.identity else {
            out.push(MemberOutput::Epoch(EpochEvent::Failed {
                epoch: change.epoch,
                reason: EpochChangeFailure::NoMemberKey,
            }));
            return;
        };
        let checked = check_change(self.epoch.number, &change)
            .and_then(|_| check_consensus_keys::<S>(&change));
        if let Err(refused) = checked {
            out.push(MemberOutput::Epoch(EpochEvent::Failed {
                epoch: change.epoch,
                reason: refused.into(),
            }));
            return;
        }
        let control = Control::propose(change, &identity.who.key);
        self.submit(now, control, out);
    }

    /// A signed control transaction: to this replica and to every member.
    pub(in crate::member) fn submit(&mut self, now: Time, control: Control, out: &mut Outbox<S>) {
        if let (Phase::Replica(r), Ok(tx)) = (&mut self.phase, control.to_transaction()) {
            let outputs = r.handle(now, Input::ControlTransaction(tx));
            self.queue_replica(outputs, out);
        }
        self.change.keep_pending(&control);
        self.arm_resend(now, out);
        self.send_control(&control, out);
    }

    /// Sends `control` to every member of the current epoch but this one.
    pub(in crate::member) fn send_control(&self, control: &Control, out: &mut Outbox<S>) {
        for d in self.epoch.members.clone() {
            if Some(d) != self.identity.as_ref().map(|i| i.who.me) {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: d.address(),
                    message: Envelope::Epoch(EpochMessage::Control(control.clone())),
                }));
            }
        }
    }

    /// A control transaction from party `from`: to the replica's mempool if
    /// a party of the directory (a current or a new member) signed it, and a
    /// bounded number per signer and epoch.
    pub(super) fn on_control(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        control: Control,
        out: &mut Outbox<S>,
    ) {
        self.heard(from);
        let signer = control.signer();
        let known = self
            .identity
            .as_ref()
            .is_some_and(|i| i.who.directory.index_of(&signer).is_some());
        let Ok(tx) = control.to_transaction() else {
            return;
        };
        let id: [u8; 32] = Sha256::digest(&tx).into();
        if !known || !self.change.admits_control(&signer, &id) {
            return;
        }
        let Phase::Replica(r) = &mut self.phase else {
            return;
        };
        if !control.verify() {
            return;
        }
        self.change.forwarded_control(signer, id);
        let outputs = r.handle(now, Input::ControlTransaction(tx));
        self.queue_replica(outputs, out);
    }

    /// A resharing or DKG message of a change from party `from`: to the
    /// running transition; a request for a change this member went through
    /// to the dealer; one of the next change, before its transition starts,
    /// kept to replay then.
    pub(super) fn on_reshare(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        out: &mut Outbox<S>,
    ) {
        self.heard(from);
        let EpochMessage::Reshare {
            epoch,
            message: wire,
        } = &message
        else {
            return;
        };
        let epoch = *epoch;
        if matches!(wire, ReshareWire::Request) && self.change.changing_to() != Some(epoch) {
            // A new member asks a dealer of a change this member already
            // went through.
            if let Some(events) = self.dealer.deal_again(now, from, epoch, message) {
                self.queue_transition(epoch, events, out);
            }
        } else if let Some(t) = self.change.transition_mut() {
            let running = t.epoch();
            let events = t.handle(now, TransitionInput::Message { from, message });
            self.queue_transition(running, events, out);
            // Once the events were read.
            out.loop_back(SelfInput::RetryJoin);
        } else if Some(epoch) == self.epoch.number.checked_add(1) {
            let parties = self.identity.as_ref().map_or(0, |i| i.who.directory.len());
            self.change.keep_early(from, message, parties);
        }
    }

    /// Arms the resend timer unless it is armed.
    pub(in crate::member) fn arm_resend(&mut self, now: Time, out: &mut Outbox<S>) {
        let Some(identity) = &self.identity else {
            return;
        };
        if !self.change.arm_resend() {
            return;
        }
        out.push(MemberOutput::Effect(Effect::SetTimer {
            at: now.plus_micros(identity.timing.phase_us().max(1)),
            timer: MemberTimer::EpochResend,
        }));
    }

    /// Sends again what the change still waits for: this member's control
    /// transactions not yet finalized, its invitations (an old member, until
    /// the switch), or its request for a handoff (a new member with its keys).
    pub(in crate::member) fn on_resend(&mut self, now: Time, out: &mut Outbox<S>) {
        self.change.resend_fired();
        let mut waiting = false;
        for control in self.change.pending().to_vec() {
            self.send_control(&control, out);
            waiting = true;
        }
        if let (Phase::Replica(_), Some((invitation, t))) =
            (&self.phase, self.change.invited_transition())
        {
            let me = self.identity.as_ref().map(|i| i.who.me);
            for d in &t.new_epoch().members {
                // New members heard from in the change have their invitation
                // (or keys of the old epoch: they need none).
                if Some(*d) != me && !self.change.has_heard(*d) {
                    out.push(MemberOutput::Effect(Effect::Send {
                        to: d.address(),
                        message: Envelope::Epoch(EpochMessage::Invite(Box::new(
                            invitation.clone(),
                        ))),
                    }));
                }
            }
            waiting = true;
        }
        // A new member asks for the handoff once it holds its keys, or while
        // it waits to recombine them from the dealers the chain names. A
        // joiner not yet in a change asks too: it may have restarted during
        // one and lost its invitation, which the old members send again to a
        // new member that asks (and stop sending once they heard from it).
        if let Phase::Joining = &self.phase {
            if self.change.waited_a_phase() > super::GIVE_UP_PHASES {
                self.give_up_keys(out);
            }
            let asked = match self.change.transition() {
                Some(t) => (!self.change.has_own_chain()).then(|| t.epoch()),
                None if self.is_late_member() => Some(self.epoch.number),
                None => self.epoch.number.checked_add(1),
            };
            if let Some(epoch) = asked {
                for d in &self.epoch.members {
                    out.push(MemberOutput::Effect(Effect::Send {
                        to: d.address(),
                        message: Envelope::Epoch(EpochMessage::HandoffRequest { epoch }),
                    }));
                }
            }
            waiting = true;
        }
        // The joiners learn the keys the chain named from the old members.
        self.send_named(out);
        if waiting {
            self.arm_resend(now, out);
        }
    }

    /// Reads a finalized entry's control transactions: its decisions are
    /// queued, to be read in order (a switch ends the epoch, and what its
    /// replica queued after it is dropped).
    pub(in crate::member) fn on_finalized(
        &mut self,
        entry: &Arc<CommittedEntry<S>>,
        out: &mut Outbox<S>,
    ) {
        for decision in self.change.decisions_in(&entry.block) {
            out.loop_back(SelfInput::Decision {
                generation: self.generation,
                decision,
            });
        }
    }

    pub(in crate::member) fn fail_epoch(
        &mut self,
        epoch: Epoch,
        reason: EpochChangeFailure,
        out: &mut Outbox<S>,
    ) {
        out.push(MemberOutput::Epoch(EpochEvent::Failed { epoch, reason }));
    }

    /// The members and configuration of `change` as this member sees them.
    pub(in crate::member) fn next_epoch(
        &self,
        change: &EpochChange,
    ) -> Result<EpochView, EpochChangeFailure> {
        let identity = self
            .identity
            .as_ref()
            .ok_or(EpochChangeFailure::NoIdentity)?;
        let members = change
            .members
            .iter()
            .map(|m| identity.who.directory.index_of(m))
            .collect::<Option<Vec<DirectoryIndex>>>()
            .ok_or(EpochChangeFailure::NewMemberNotInDirectory)?;
        let config = self
            .epoch
            .config
            .resized(
                change.members.len() as u32,
                change.c,
                change.beacon_threshold,
            )
            .map_err(|e| EpochChangeFailure::Config(Arc::new(e)))?;
        let consensus = Arc::new(change.consensus_keys.clone());
        Ok(EpochView::new(change.epoch, members, config, consensus))
    }

    /// Step 2 at an old member: invite the joiners and start the transition.
    pub(in crate::member) fn on_decided(
        &mut self,
        now: Time,
        change: EpochChange,
        height: Height,
        out: &mut Outbox<S>,
    ) {
        let epoch = change.epoch;
        out.push(MemberOutput::Epoch(EpochEvent::Decided { epoch, height }));
        let (Some(identity), Some(keys)) = (&self.identity, &self.keys) else {
            return;
        };
        let Some(beacon_key) = keys.keys.first() else {
            return;
        };
        let new = match self.next_epoch(&change) {
            Ok(v) => v,
            Err(reason) => return self.fail_epoch(epoch, reason, out),
        };
        let reshare = ReshareSettings {
            epoch: epoch.get(),
            old_members: self.epoch.ids(&identity.who.directory),
            old_public_polynomial: beacon_key.public_polynomial.clone(),
            new_members: change.members.clone(),
            new_threshold: new.config.beacon_threshold,
            phase_timeout_us: identity.timing.phase_us(),
        }
        .build();
        let reshare = match reshare {
            Ok(r) => r,
            Err(e) => return self.fail_epoch(epoch, EpochChangeFailure::Resharing(e), out),
        };
        let share = beacon_key.secret_share.clone();
        let invitation = Invitation {
            change,
            decided_at: height,
            reshare,
        };
        // Every new member is invited: the joiners, and the old members that
        // stay, one of which may have lost its key material and wait as a
        // joiner (the others, running the old epoch, ignore it).
        for d in &new.members {
            if *d != identity.who.me {
                out.push(MemberOutput::Effect(Effect::Send {
                    to: d.address(),
                    message: Envelope::Epoch(EpochMessage::Invite(Box::new(invitation.clone()))),
                }));
            }
        }
        self.start_transition(now, invitation, new, Some(share), out);
        // Once what the transition did at its start was read.
        out.loop_back(SelfInput::ArmResend);
    }

    pub(in crate::member) fn start_transition(
        &mut self,
        now: Time,
        invitation: Invitation<S>,
        new: EpochView,
        old_share: Option<beacon::threshold::SecretShare>,
        out: &mut Outbox<S>,
    ) {
        let Some(identity) = &self.identity else {
            return;
        };
        let epoch = new.number;
        let mut label = b"epoch".to_vec();
        label.extend_from_slice(&epoch.get().to_be_bytes());
        let transition = Transition::new(
            invitation.reshare.clone(),
            new,
            &identity.who,
            old_share,
            derive(&self.seed, &label),
            self.memo.clone(),
        );
        match transition {
            Ok(mut t) => {
                let events = t.handle(now, TransitionInput::Start);
                let running = t.epoch();
                let early = self.change.run(t, invitation);
                self.queue_transition(running, events, out);
                for (from, messages) in early {
                    for message in messages {
                        out.loop_back(SelfInput::Early {
                            epoch,
                            from,
                            message,
                        });
                    }
                }
            }
            Err(e) => self.fail_epoch(epoch, EpochChangeFailure::TransitionSetup(Arc::new(e)), out),
        }
    }

    pub(in crate::member) fn on_transition_timer(
        &mut self,
        now: Time,
        epoch: Epoch,
        timer: TransitionTimer,
        out: &mut Outbox<S>,
    ) {
        if let Some(t) = self.change.transition_into(epoch) {
            let events = t.handle(now, TransitionInput::Timer(timer));
            self.queue_transition(epoch, events, out);
            return;
        }
        if timer == TransitionTimer::Erase && self.dealer.erase(epoch, now) {
            for write in crate::disk::on_deal_erased(epoch) {
                out.push(MemberOutput::Persist(write));
            }
        }
    }

    /// A message of the change into `epoch` that came before the transition
    /// started ([`SelfInput::Early`]): to the transition, if it still runs.
    pub(in crate::member) fn on_early_message(
        &mut self,
        now: Time,
        epoch: Epoch,
        from: DirectoryIndex,
        message: EpochMessage<S>,
        out: &mut Outbox<S>,
    ) {
        if let Some(t) = self.change.transition_into(epoch) {
            let events = t.handle(now, TransitionInput::Message { from, message });
            self.queue_transition(epoch, events, out);
        }
    }

    /// Queues what the transition into `epoch` returned (the running one, or
    /// the one a dealer retains), one event at a time.
    pub(in crate::member) fn queue_transition(
        &self,
        epoch: Epoch,
        events: Vec<TransitionOutput<S>>,
        out: &mut Outbox<S>,
    ) {
        for event in events {
            out.loop_back(SelfInput::Transition { epoch, event });
        }
    }

    /// One event of the transition into `epoch`.
    pub(in crate::member) fn on_transition(
        &mut self,
        now: Time,
        epoch: Epoch,
        event: TransitionOutput<S>,
        out: &mut Outbox<S>,
    ) {
        match event {
            TransitionOutput::Effect(e) => {
                out.push(MemberOutput::Effect(e.map(Envelope::Epoch, |timer| {
                    MemberTimer::Epoch { epoch, timer }
                })))
            }
            TransitionOutput::Complete {
                output,
                digest,
                dealers,
            } => {
                self.change.hold_keys(digest, output);
                out.push(MemberOutput::Epoch(EpochEvent::Ready { epoch, digest }));
                match self.change.named().cloned() {
                    // The chain named other keys already: those are its ready.
                    Some(named) if named.digest != digest => self.ready_with_named(now, out),
                    _ => self.sign_ready(now, epoch, digest, dealers, out),
                }
                self.try_join(now, out);
            }
            // The keys the chain named or switched to, recombined once the
            // deals of the dealers it named came in (`keys_for` waited).
            TransitionOutput::Adopted { output, digest } => {
                self.change.hold_keys(digest, output);
                if let Some(named) = self.change.named().cloned() {
                    if named.digest == digest && !self.change.readied(&digest) {
                        self.sign_ready(now, epoch, digest, named.dealers, out);
                    }
                }
                self.try_join(now, out);
            }
            TransitionOutput::Failed(reason) => self.fail_epoch(epoch, reason.into(), out),
        }
    }
}
