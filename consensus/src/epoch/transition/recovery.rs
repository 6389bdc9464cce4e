//! Catching a new member up: it asks the old members for the deals and
//! sub-shares it lacks; a dealer answers the asker alone, point to point
//! (`consensus/SAFETY.md`, "A member's part of a change survives its crash").

use super::{Transition, TransitionInput, TransitionOutbox, TransitionTimer};
use crate::epoch::{EpochView, MemberIdentity, ReshareWire};
use crate::{ConsensusError, DirectoryIndex};
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::reshare::ReshareEpoch;
use beacon::threshold::SecretShare;
use beacon::{Scheme, Time};
use std::sync::Arc;

/// Most times a dealer sends its deal and sub-share again to one new member
/// in one change (a restarted member asks once per phase length until it
/// holds them).
const MAX_RESENDS: u32 = 8;

impl<S: Scheme> Transition<S> {
    pub(super) fn phase_us(&self) -> u64 {
        self.reshare.machine().epoch().phase_timeout_us
    }

    /// As a new member still without the resharing's result: asks each old
    /// member whose deal or sub-share it lacks to send them again; returns
    /// whether it asked.
    pub(super) fn request_missing(&mut self, out: &mut TransitionOutbox<S>) -> bool {
        if self.new_index.is_none() {
            return false;
        }
        let mut missing = self.reshare.machine().missing();
        match (&self.reshared, &self.awaited) {
            (None, _) => {}
            // Done, but the chain switched to keys from other dealers.
            (Some(_), Some(awaited)) => missing.retain(|d| awaited.dealers.contains(d)),
            (Some(_), None) => return false,
        }
        for d in &missing {
            self.send_to_participant(out, *d, ReshareWire::Request);
        }
        !missing.is_empty()
    }

    /// Directory member `from` asked for this dealer's deal and sub-share
    /// again: sent (its signed broadcasts, then the sub-share), at most
    /// [`MAX_RESENDS`] times per new member.
    pub(super) fn resend(&mut self, from: DirectoryIndex, out: &mut TransitionOutbox<S>) {
        let Some(p) = self.participant.get(&from).copied() else {
            return;
        };
        let Some(shares) = self.reshare.machine().resend_to(p) else {
            return;
        };
        let count = self.resent.entry(p).or_insert(0);
        if *count >= MAX_RESENDS {
            return;
        }
        *count += 1;
        for signed in &self.broadcasts {
            self.send_reshare(out, from, ReshareWire::Relay(signed.clone()));
        }
        self.send_reshare(out, from, ReshareWire::Shares(shares));
    }

    /// A dealer's retained transition, rebuilt after a restart from what its
    /// disk kept ([`crate::disk::RetainedDeal`]): it deals again from
    /// `old_share` (the very same deal and sub-shares: they derive from the
    /// share and the session alone), drops what the start would send (the
    /// others had it before the switch) and is over, answering only new
    /// members that ask for their sub-shares, until its erasure.
    pub fn retained(
        reshare: ReshareEpoch<S>,
        new: EpochView,
        identity: &MemberIdentity,
        old_share: SecretShare,
        memo: Arc<Memo>,
    ) -> Result<Self, ConsensusError> {
        // The seed only deals for a member without an old share.
        let mut t = Self::new(reshare, new, identity, Some(old_share), [0; 32], memo)?;
        t.handle(Time(0), TransitionInput::Start);
        t.over = true;
        Ok(t)
    }

    /// Erases what this member kept to send again as a dealer (its
    /// sub-shares determine its old share).
    pub fn erase_dealt(&mut self) {
        self.reshare.machine_mut().erase_dealt();
        self.broadcasts.clear();
    }

    /// [`super::TransitionInput::AskAwaited`]: asks the dealers the chain
    /// named for what this new member lacks, once per awaited switch.
    pub(super) fn ask_awaited(&mut self, now: Time, out: &mut TransitionOutbox<S>) {
        match self.awaited.as_mut() {
            Some(awaited) if !awaited.asked => awaited.asked = true,
            _ => return,
        }
        // Without the result the timer that asks is running already.
        if self.reshared.is_none() {
            self.request_missing(out);
        } else {
            self.recover(now, out);
        }
    }

    /// The [`TransitionTimer::Recover`] timer: asks for what this new member
    /// still lacks, and is armed again until it holds the result (what it
    /// lacks may only show later).
    pub(super) fn recover(&mut self, now: Time, out: &mut TransitionOutbox<S>) {
        self.request_missing(out);
        if self.reshared.is_none() || self.awaited.is_some() {
            Self::effect(
                out,
                Effect::SetTimer {
                    at: now.plus_micros(self.phase_us().max(1)),
                    timer: TransitionTimer::Recover,
                },
            );
        }
    }
}
