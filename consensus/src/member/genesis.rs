//! A member's genesis DKG session ([`Member`]'s `Phase::Dkg`): the inputs
//! it takes while it runs, its outputs and its end (the keys persisted with
//! the mark of the seed that dealt them, then the replica started); after
//! it completed, the finished session ([`FinishedDkg`]) kept to answer a
//! genesis member that missed the DKG, its erasure, and the expiry of the
//! dealing seed's mark.

use super::outbox::{Outbox, SelfInput};
use super::{Envelope, KeyGenerationFailure, Member, MemberOutput, MemberTimer, Phase};
use crate::replica::Input;
use crate::Epoch;
use beacon::dkg::session::{SessionInput, SessionMessage, SessionOutput, SessionParticipant};
use beacon::effect::Effect;
use beacon::{Scheme, Time};
use std::sync::Arc;

/// The genesis DKG's session once it completed (or rebuilt from the seed
/// that dealt it, after a restart), kept until `until` to answer members
/// that ask for what they missed ([`SessionMessage::Request`]).
pub(super) struct FinishedDkg<S: Scheme> {
    pub(super) session: Box<dyn SessionParticipant<S>>,
    pub(super) until: Time,
}

impl<S: Scheme> Member<S> {
    /// An input for the DKG session, while it runs; once it completed, a
    /// member's request for what it missed, to the finished session.
    pub(super) fn on_session_input(&mut self, now: Time, input: SessionInput, out: &mut Outbox<S>) {
        match &mut self.phase {
            Phase::Dkg(dkg) => {
                let outputs = dkg.handle(now, input);
                for output in outputs {
                    out.loop_back(SelfInput::Session(output));
                }
            }
            _ => self.answer_request(now, input, out),
        }
    }

    /// A genesis member that missed the DKG (it was down while the others
    /// dealt) asks for its deals, its shares and the agreed certificate: the
    /// finished session sends them to it alone, as it would have during the
    /// DKG (bounded per asker, `beacon::dkg::session`). Nothing else reaches
    /// a finished session, and what it returns but sends is dropped.
    fn answer_request(&mut self, now: Time, input: SessionInput, out: &mut Outbox<S>) {
        let (
            Some(finished),
            SessionInput::Message {
                message: SessionMessage::Request { .. },
                ..
            },
        ) = (&mut self.finished_dkg, &input)
        else {
            return;
        };
        for output in finished.session.handle(now, input) {
            if let SessionOutput::Effect(e @ Effect::Send { .. }) = output {
                out.push(MemberOutput::Effect(e.map(Envelope::Dkg, MemberTimer::Dkg)));
            }
        }
    }

    /// Erases the finished DKG session once its time is over or this member
    /// left the genesis epoch: its dealing determines the sub-shares it gave.
    pub(super) fn erase_finished_dkg(&mut self, now: Time) {
        if self
            .finished_dkg
            .as_ref()
            .is_some_and(|f| now >= f.until || self.epoch.number != Epoch::ZERO)
        {
            self.finished_dkg = None;
        }
    }

    /// At the end of a step: once the time of the seed that dealt the genesis
    /// keys is over, asks for a new seed in its place, last (nothing of this
    /// step derived from the new one). Not while a change runs: its
    /// transition deals from the stored seed, and a restarted member must
    /// deal the same again; entering or leaving the next epoch replaces the
    /// seed anyway (and so ends the mark once in another epoch).
    pub(super) fn expire_dealing_seed(&mut self, now: Time, out: &mut Outbox<S>) {
        let Some(until) = self.dealing_seed_until else {
            return;
        };
        if self.epoch.number != Epoch::ZERO {
            self.dealing_seed_until = None;
        } else if now >= until && self.changing_to().is_none() {
            self.dealing_seed_until = None;
            for write in crate::disk::on_dealing_seed_expired() {
                out.push(MemberOutput::Persist(write));
            }
        }
    }

    /// One output of the DKG session: its effects, or its end.
    pub(super) fn on_session_output(
        &mut self,
        now: Time,
        action: SessionOutput<S>,
        out: &mut Outbox<S>,
    ) {
        match action {
            SessionOutput::Effect(effect) => out.push(MemberOutput::Effect(
                effect.map(Envelope::Dkg, MemberTimer::Dkg),
            )),
            SessionOutput::Failed(reason) => {
                self.phase = Phase::Failed;
                out.push(MemberOutput::DkgFailed(reason.into()));
            }
            SessionOutput::Complete(output) => {
                let attempt = match &self.phase {
                    Phase::Dkg(session) => session.attempt(),
                    _ => 0,
                };
                let bound = self.identity.as_ref().map_or(0, |i| i.timing.bound_us());
                let mark = crate::disk::DealingSeed {
                    attempt,
                    until: now.plus_micros(bound),
                };
                self.dealing_seed_until = Some(mark.until);
                for write in crate::disk::on_keys(output.clone(), mark) {
                    out.push(MemberOutput::Persist(write));
                }
                out.push(MemberOutput::DkgComplete(output.clone()));
                match Self::build_replica(
                    &self.epoch,
                    &output,
                    &self.consensus,
                    Vec::new(),
                    Vec::new(),
                    &self.seed,
                    &self.memo,
                    self.adversary.as_deref(),
                ) {
                    Ok(mut replica) => {
                        self.keys = Some(output);
                        let mut outputs = replica.handle(now, Input::Start);
                        for (from, message) in std::mem::take(&mut self.early) {
                            outputs.extend(replica.handle(now, Input::Message { from, message }));
                        }
                        let finished = std::mem::replace(&mut self.phase, Phase::Replica(replica));
                        if let (Phase::Dkg(session), Some(identity)) = (finished, &self.identity) {
                            self.finished_dkg = Some(FinishedDkg {
                                session,
                                until: now.plus_micros(identity.timing.bound_us()),
                            });
                        }
                        self.queue_replica(outputs, out);
                    }
                    Err(e) => {
                        self.phase = Phase::Failed;
                        out.push(MemberOutput::DkgFailed(KeyGenerationFailure::Keys(
                            Arc::new(e),
                        )));
                    }
                }
            }
        }
    }
}
