//! A joiner's side of a change: old members send an invitation again to a
//! new member that asks, tell a party that knows only an earlier epoch which
//! one they run, and a joiner believes `f + 1` identical invitations,
//! statements of the current epoch and handoffs before it starts.

use super::{EpochChangeFailure, Handoff};
use crate::disk::EpochRecord;
use crate::epoch::{CurrentEpoch, EpochMessage, EpochView, Invitation, TransitionInput};
use crate::member::outbox::Outbox;
use crate::member::{Envelope, Member, MemberOutput, Phase};
use crate::{DirectoryIndex, Epoch, Height};
use beacon::effect::Effect;
use beacon::{NodeIndex, Scheme, Time};
use std::collections::BTreeSet;
use std::sync::Arc;

impl<S: Scheme> Member<S> {
    /// An old member of the change into `epoch` sends its invitation again to
    /// new member `from` that asks for its handoff: a joiner that restarted
    /// during the change lost its invitation, and old members send it
    /// unasked only to new members they have not heard from. It does so while
    /// it runs the old epoch with the change's transition, and after the
    /// switch while it retains its transition (its deal and sub-shares, which
    /// the restarted member then asks for). A new member that holds its
    /// transition ignores the invitation; one without counts it with the
    /// others (`f + 1` identical ones start its transition).
    pub(super) fn invite_again(&self, from: DirectoryIndex, epoch: Epoch, out: &mut Outbox<S>) {
        let me = self.identity.as_ref().map(|i| i.who.me);
        let running = match (&self.phase, self.change.invited_transition()) {
            (Phase::Replica(_), Some((invitation, t))) if t.epoch() == epoch => {
                Some((invitation, t))
            }
            _ => None,
        };
        // After the switch: only an old member serves the handoff into `epoch`.
        let retained = self.dealer.invitation_into(epoch);
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
    /// left to ([`EpochMessage::Current`]); so is a member of this epoch
    /// that asks for an earlier one (it was added while it knew an earlier
    /// epoch, and lost what it had learnt). A new member of this epoch that
    /// asks for it is served its handoff instead (above).
    pub(super) fn tell_current(&self, from: DirectoryIndex, epoch: Epoch, out: &mut Outbox<S>) {
        let party = self
            .identity
            .as_ref()
            .is_some_and(|i| from.get() < i.who.directory.len() && from != i.who.me);
        if !party
            || epoch > self.epoch.number
            || (epoch == self.epoch.number && self.epoch.index_of(from).is_some())
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
    pub(super) fn on_current(&mut self, from: DirectoryIndex, current: CurrentEpoch) {
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
            || self.change.transition().is_some()
            || current.number <= self.epoch.number
            || self.epoch.index_of(from).is_none()
            || !well_formed
            || !self.joiner.first_current_from(from)
        {
            return;
        }
        let f = self.epoch.config.f;
        let Some(current) = self.joiner.believe_current(from, current, f) else {
            return;
        };
        let view = EpochView::new(
            current.number,
            current.members,
            current.config,
            Arc::new(current.consensus),
        );
        self.move_roles_to(&view, Some(&directory));
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
        let late = self.is_late_member();
        let next = !late
            && invitation.reshare.old_members == self.epoch.ids(&identity.who.directory)
            && invitation.change.epoch == self.epoch.number.saturating_add(1);
        // A late member takes the invitation into the epoch it learnt it is
        // a member of, from that epoch's members (old members that stayed
        // keep it after the switch), if its change made exactly that epoch.
        let into_learnt = late
            && invitation.change.epoch == self.epoch.number
            && self.next_epoch(&invitation.change).is_ok_and(|v| {
                v.members == self.epoch.members && v.consensus == self.epoch.consensus
            });
        if !matches!(self.phase, Phase::Joining)
            || self.change.transition().is_some()
            || self.epoch.index_of(from).is_none()
            || !(next || into_learnt)
            || !self.joiner.first_invitation_from(from)
        {
            return;
        }
        let f = self.epoch.config.f;
        let Some(invitation) = self.joiner.believe_invitation(from, invitation, f) else {
            return;
        };
        let new = if into_learnt {
            Ok(self.epoch.clone())
        } else {
            self.next_epoch(&invitation.change)
        };
        let new = match new {
            Ok(v) => v,
            Err(reason) => return self.fail_epoch(invitation.change.epoch, reason, out),
        };
        self.start_transition(now, invitation, new, None, out);
    }

    /// Whether this member joins the epoch it knows, of which it is a member
    /// without keys: it learnt the epoch from its members
    /// ([`EpochMessage::Current`]) after a change had added it while it
    /// knew an earlier one (it came back with an empty disk). It asks that
    /// epoch's members for the handoff into it, and takes the invitation
    /// into it from them (the old members of that change keep it, with what
    /// they dealt, after the switch).
    pub(in crate::member) fn is_late_member(&self) -> bool {
        let me = self.identity.as_ref().map(|i| i.who.me);
        matches!(self.phase, Phase::Joining)
            && self.keys.is_none()
            && me.is_some_and(|me| self.epoch.index_of(me).is_some())
    }

    /// A stayer that waited with its own chain longer than any dealer keeps
    /// what it dealt ([`super::GIVE_UP_PHASES`] phase lengths) can no
    /// longer recombine the keys the chain switched to: a dealer it needs
    /// erased its deal, or is gone (it left and was stopped, or lost its
    /// disk). Rather than wait for good, it gives the change up: it erases
    /// its keys of the old epoch (their time is over too) and what it dealt,
    /// records the new epoch without keys (as a leaver's record), and waits
    /// in it as a member without keys ([`Member::is_late_member`]): the
    /// members of a later epoch tell it theirs, and it joins the change
    /// into it from them.
    pub(in crate::member) fn give_up_keys(&mut self, out: &mut Outbox<S>) {
        let (Some(own), Some(t)) = (self.change.take_own_chain(), self.change.take_transition())
        else {
            return;
        };
        let new = t.new_epoch().clone();
        let directory = self.identity.as_ref().map(|i| i.who.directory.clone());
        self.keys = None;
        self.move_roles_to(&new, directory.as_ref());
        self.epoch = new;
        let last = own.entries.last().map_or(Height::ZERO, |e| e.block.height);
        let record = EpochRecord::of(&self.epoch, last.saturating_add(1), true);
        for write in crate::disk::on_epoch(None, record, None) {
            out.push(MemberOutput::Persist(write));
        }
        self.fail_epoch(
            self.epoch.number,
            EpochChangeFailure::KeysNotRecombined,
            out,
        );
    }

    /// A joiner's handoff from old member `from` (its first counts): it may
    /// be the `f + 1`-th identical one.
    pub(super) fn on_handoff(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        handoff: Handoff<S>,
        out: &mut Outbox<S>,
    ) {
        if matches!(self.phase, Phase::Joining) && self.epoch.index_of(from).is_some() {
            self.joiner.keep_handoff(from, handoff);
            self.try_join(now, out);
        }
    }

    /// A joiner with its keys starts the new replica once `f + 1` old members
    /// handed over the same chain with its keys' digest.
    pub(in crate::member) fn try_join(&mut self, now: Time, out: &mut Outbox<S>) {
        if !matches!(self.phase, Phase::Joining) {
            return;
        }
        let Some(epoch) = self.change.changing_to() else {
            return;
        };
        let waiting = !self.change.is_ready();
        if let Some(own) = self.change.take_own_chain() {
            // A stayer that was late: its own chain says where the epoch began.
            let holds = self.keys_for(now, own.digest, &own.dealers, out);
            if !holds && (waiting || self.awaits_keys()) {
                // No keys of its own yet: it may still recombine them from
                // the dealers its chain names, once their deals are in.
                self.change.wait_with_own_chain(own);
                return;
            }
            if !holds {
                self.phase = Phase::Failed;
                return self.fail_epoch(epoch, EpochChangeFailure::SwitchedToOtherKeys, out);
            }
            return self.enter_epoch(now, own.entries, out);
        }
        let Some((keys, from)) = self.joiner.agreed_handoff(epoch, self.epoch.config.f) else {
            return;
        };
        let holds = self.keys_for(now, keys.digest, &keys.dealers, out);
        if !holds && (waiting || self.awaits_keys()) {
            return;
        }
        if !holds {
            self.phase = Phase::Failed;
            return self.fail_epoch(epoch, EpochChangeFailure::HandedOverOtherKeys, out);
        }
        let Some(handoff) = self.joiner.take_handoff(from) else {
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
        dealers: &[NodeIndex],
        out: &mut Outbox<S>,
    ) -> bool {
        if self.change.is_ready_with(&digest) {
            return true;
        }
        let Some(t) = self.change.transition_mut() else {
            return false;
        };
        if let Some(output) = t.adopt(digest, dealers) {
            self.change.hold_keys(digest, output);
            return true;
        }
        let epoch = t.epoch();
        let events = t.handle(now, TransitionInput::AskAwaited);
        self.queue_transition(epoch, events, out);
        false
    }

    /// Whether this member waits for the deals and sub-shares of the dealers
    /// its chain named, to recombine the keys the epoch switched to
    /// ([`Transition::adopt`]).
    pub(in crate::member) fn awaits_keys(&self) -> bool {
        self.change.transition().is_some_and(|t| t.awaits())
    }

    /// A member waiting for the keys the chain switched to read a message of
    /// the change ([`SelfInput::RetryJoin`]): what came may complete them.
    pub(in crate::member) fn on_retry_join(&mut self, now: Time, out: &mut Outbox<S>) {
        if !self.change.is_ready() {
            self.try_join(now, out);
        }
    }
}
