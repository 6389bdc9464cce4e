//! An old member's bookkeeping after a switch ([`Dealer`]): what it serves
//! to new members that restarted or were cut off during the change, which
//! the others stopped sending them: the handoff of the chain up to the
//! switch, its invitation, and its deal and sub-shares (kept in its retained
//! transition until the erasure timer: they determine its old share).

use super::Handoff;
use crate::epoch::{EpochMessage, Invitation, Transition, TransitionInput, TransitionOutput};
use crate::{DirectoryIndex, Epoch};
use beacon::{Scheme, Time};

/// What an old member serves to new members after the switch; carried from
/// epoch to epoch, each switch replacing it.
pub(in crate::member) struct Dealer<S: Scheme> {
    /// The handoff into this member's epoch (or, once it left, into the epoch
    /// it left to), served to new members that ask for it.
    served: Option<Handoff<S>>,
    /// The transition of the change this member went through, kept after the
    /// switch so that it can send its deal and sub-share again to a new
    /// member that asks; erased [`super::RETAIN_PHASES`] phase lengths after
    /// the switch.
    retained: Option<Transition<S>>,
    /// The invitation of the change this member went through as an old
    /// member, kept with the retained transition: sent again to a new member
    /// that asks for its handoff (it may have restarted and lost the
    /// invitation, which old members send only until they hear from it).
    invitation: Option<Invitation<S>>,
    /// The change into which this member's disk holds what it dealt, and
    /// until when ([`crate::disk::RetainedDeal`]): erased there on the
    /// change's erasure timer.
    kept: Option<(Epoch, Time)>,
}

impl<S: Scheme> Dealer<S> {
    /// An old member that serves nothing yet.
    pub(in crate::member) fn new() -> Self {
        Dealer {
            served: None,
            retained: None,
            invitation: None,
            kept: None,
        }
    }

    /// Serves `handoff` (the chain up to the latest switch) from now on.
    pub(super) fn serve(&mut self, handoff: Handoff<S>) {
        self.served = Some(handoff);
    }

    /// The handoff into `epoch`, if this member serves it.
    pub(super) fn handoff_into(&self, epoch: Epoch) -> Option<&Handoff<S>> {
        self.served.as_ref().filter(|h| h.epoch == epoch)
    }

    /// Keeps the invitation of the change just made, if this member took part
    /// with one; else the one it kept stays.
    pub(in crate::member) fn keep_invitation(&mut self, invitation: Option<Invitation<S>>) {
        if invitation.is_some() {
            self.invitation = invitation;
        }
    }

    /// Retains `transition`, the change this member just went through, to
    /// deal again until its erasure; `kept_until`: its disk holds what it
    /// dealt until then (it dealt in the change).
    pub(in crate::member) fn retain(
        &mut self,
        transition: Transition<S>,
        kept_until: Option<Time>,
    ) {
        self.kept = kept_until.map(|until| (transition.epoch(), until));
        self.retained = Some(transition);
    }

    /// Notes that this member's disk holds what it dealt in the change into
    /// `epoch` until `until`, with nothing retained for it (the member
    /// restarted before its switch was durable, and goes through it again).
    pub(in crate::member) fn kept_on_disk(&mut self, epoch: Epoch, until: Time) {
        self.kept = Some((epoch, until));
    }

    /// The change into which this member's disk holds what it dealt, and
    /// until when, if it does.
    pub(in crate::member) fn kept(&self) -> Option<(Epoch, Time)> {
        self.kept
    }

    /// The invitation into `epoch` and the retained transition it started,
    /// to send again to a new member that asks for the handoff it serves.
    pub(super) fn invitation_into(&self, epoch: Epoch) -> Option<(&Invitation<S>, &Transition<S>)> {
        match (&self.invitation, &self.retained) {
            (Some(invitation), Some(t))
                if self.handoff_into(epoch).is_some() && t.epoch() == epoch =>
            {
                Some((invitation, t))
            }
            _ => None,
        }
    }

    /// New member `from` asks for what this member dealt in the change into
    /// `epoch` (`request`, a resharing request): what the retained
    /// transition sends it again; none once erased.
    pub(super) fn deal_again(
        &mut self,
        now: Time,
        from: DirectoryIndex,
        epoch: Epoch,
        request: EpochMessage<S>,
    ) -> Option<Vec<TransitionOutput<S>>> {
        let t = self.retained.as_mut().filter(|t| t.epoch() == epoch)?;
        let input = TransitionInput::Message {
            from,
            message: request,
        };
        Some(t.handle(now, input))
    }

    /// The erasure timer of the change into `epoch` at `now`: what this
    /// member dealt in it, and its invitation, are erased. Returns whether
    /// its disk holds what it dealt, to erase there too. A timer armed for
    /// an earlier retention of the same change (a deal on the disk of a
    /// switch the member went through again after a restart) erases nothing
    /// before the later retention's time.
    pub(super) fn erase(&mut self, epoch: Epoch, now: Time) -> bool {
        if self
            .kept
            .is_some_and(|(e, until)| e == epoch && now < until)
        {
            return false;
        }
        if let Some(mut t) = self.retained.take_if(|t| t.epoch() == epoch) {
            t.erase_dealt();
            self.invitation = None;
        }
        self.kept.take_if(|(e, _)| *e == epoch).is_some()
    }
}
