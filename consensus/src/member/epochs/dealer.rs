//! An old member's bookkeeping after a switch ([`Dealer`]): what it serves
//! to new members that restarted or were cut off during the change, which
//! the others stopped sending them: the handoff of the chain up to the
//! switch, and per change still retained its invitation, and its deal and
//! sub-shares (kept in its retained transition until that change's erasure
//! timer: they determine its old share).

use super::Handoff;
use crate::epoch::{EpochMessage, Invitation, Transition, TransitionInput, TransitionOutput};
use crate::{DirectoryIndex, Epoch};
use beacon::{Scheme, Time};
use std::collections::BTreeMap;

/// Most changes whose deals an old member retains at once: changes come
/// faster than the retention only when operators propose them back to back,
/// and a stayer that missed a switch needs the deals of that change after
/// the next one went through (the oldest is erased early beyond this).
pub(in crate::member) const MAX_RETAINED_CHANGES: usize = 4;

/// What an old member serves to new members after the switch; carried from
/// epoch to epoch: the handoff of the latest switch, and the transitions of
/// the changes still retained (each until its erasure).
pub(in crate::member) struct Dealer<S: Scheme> {
    /// The handoff into this member's epoch (or, once it left, into the epoch
    /// it left to), served to new members that ask for it.
    served: Option<Handoff<S>>,
    /// The transitions of the changes this member went through, by the epoch
    /// each started, kept after the switch so that it can send its deal and
    /// sub-shares again to a new member that asks (a stayer that missed the
    /// switch may ask after a later change); each erased
    /// [`super::RETAIN_PHASES`] phase lengths after its switch.
    retained: BTreeMap<Epoch, Transition<S>>,
    /// The invitations of the changes this member went through as an old
    /// member, kept with their retained transitions: sent again to a new
    /// member that asks for its handoff (it may have restarted and lost the
    /// invitation, which old members send only until they hear from it).
    invitations: BTreeMap<Epoch, Invitation<S>>,
    /// The changes into which this member's disk holds what it dealt, and
    /// until when ([`crate::disk::RetainedDeal`]): erased there on each
    /// change's erasure timer.
    kept: BTreeMap<Epoch, Time>,
}

impl<S: Scheme> Dealer<S> {
    /// An old member that serves nothing yet.
    pub(in crate::member) fn new() -> Self {
        Dealer {
            served: None,
            retained: BTreeMap::new(),
            invitations: BTreeMap::new(),
            kept: BTreeMap::new(),
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
    /// with one.
    pub(in crate::member) fn keep_invitation(&mut self, invitation: Option<Invitation<S>>) {
        if let Some(invitation) = invitation {
            self.invitations.insert(invitation.change.epoch, invitation);
        }
    }

    /// Retains `transition`, the change this member just went through, to
    /// deal again until its erasure, beside the changes still retained (the
    /// oldest erased beyond [`MAX_RETAINED_CHANGES`]); `kept_until`: its
    /// disk holds what it dealt until then (it dealt in the change).
    pub(in crate::member) fn retain(
        &mut self,
        transition: Transition<S>,
        kept_until: Option<Time>,
    ) {
        let epoch = transition.epoch();
        if let Some(until) = kept_until {
            self.kept.insert(epoch, until);
        }
        self.retained.insert(epoch, transition);
        while self.retained.len() > MAX_RETAINED_CHANGES {
            if let Some((oldest, mut t)) = self.retained.pop_first() {
                t.erase_dealt();
                self.invitations.remove(&oldest);
            }
        }
    }

    /// Notes that this member's disk holds what it dealt in the change into
    /// `epoch` until `until`, with nothing retained for it (the member
    /// restarted before its switch was durable, and goes through it again).
    pub(in crate::member) fn kept_on_disk(&mut self, epoch: Epoch, until: Time) {
        self.kept.insert(epoch, until);
    }

    /// The changes into which this member's disk holds what it dealt, and
    /// until when.
    pub(in crate::member) fn kept(&self) -> impl Iterator<Item = (Epoch, Time)> + '_ {
        self.kept.iter().map(|(e, t)| (*e, *t))
    }

    /// The invitation into `epoch` and the retained transition it started,
    /// to send again to a new member that asks for the handoff it serves.
    pub(super) fn invitation_into(&self, epoch: Epoch) -> Option<(&Invitation<S>, &Transition<S>)> {
        self.handoff_into(epoch)?;
        Some((self.invitations.get(&epoch)?, self.retained.get(&epoch)?))
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
        let t = self.retained.get_mut(&epoch)?;
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
        if self.kept.get(&epoch).is_some_and(|until| now < *until) {
            return false;
        }
        if let Some(mut t) = self.retained.remove(&epoch) {
            t.erase_dealt();
        }
        self.invitations.remove(&epoch);
        self.kept.remove(&epoch).is_some()
    }
}
