//! The transition's dispatcher of the resharing's outputs (joined to its
//! relay: [`RelayedMachine`](beacon::dkg::relay::RelayedMachine)), carried
//! out as effects addressed by directory index, its result kept.

use super::{Transition, TransitionOutbox, TransitionOutput, TransitionStep, TransitionTimer};
use crate::epoch::{EpochMessage, ReshareWire};
use crate::DirectoryIndex;
use beacon::dkg::relay::{RelayMessage, RelayedInput, RelayedOutput};
use beacon::dkg::DkgFailure;
use beacon::effect::Effect;
use beacon::reshare::ReshareOutput;
use beacon::{NodeIndex, Scheme, Time};
use std::sync::Arc;

impl<S: Scheme> Transition<S> {
    pub(super) fn effect(
        out: &mut TransitionOutbox<S>,
        effect: Effect<EpochMessage<S>, TransitionTimer>,
    ) {
        out.push(TransitionOutput::Effect(effect));
    }

    /// Hands `input` to the resharing (joined to its relay); its outputs are
    /// the next steps.
    pub(super) fn run_reshare(
        &mut self,
        now: Time,
        input: RelayedInput<S>,
        out: &mut TransitionOutbox<S>,
    ) {
        for output in self.reshare.handle(now, input) {
            out.loop_back(TransitionStep::Reshare(output));
        }
    }

    /// The dispatcher of the resharing's outputs.
    pub(super) fn on_reshare_output(
        &mut self,
        output: RelayedOutput<ReshareOutput<S>>,
        out: &mut TransitionOutbox<S>,
    ) {
        match output {
            RelayedOutput::Effect(effect) => {
                let epoch = self.epoch;
                let tagged = effect.filter_map(
                    |wire| {
                        let message = ReshareWire::of_relayed(wire)?;
                        Some(EpochMessage::Reshare { epoch, message })
                    },
                    TransitionTimer::Reshare,
                );
                // Participants are addressed by directory index (nothing to
                // one out of the roster).
                let addressed = match tagged {
                    Some(Effect::Send { to, message }) => {
                        self.roster.get(to.0 as usize).map(|d| Effect::Send {
                            to: d.address(),
                            message,
                        })
                    }
                    other => other,
                };
                if let Some(effect) = addressed {
                    Self::effect(out, effect);
                }
            }
            RelayedOutput::Signed { message, .. } => self.on_signed(message),
            RelayedOutput::Delivered { .. } => {}
            RelayedOutput::Done(output) => self.on_reshared(output, out),
            RelayedOutput::Failed(failure) => self.on_reshare_failed(failure),
        }
    }

    /// This member's own resharing broadcast, signed: kept (to send again
    /// with its sub-share; its broadcast follows).
    fn on_signed(&mut self, signed: RelayMessage) {
        if self.broadcasts.len() < 3 {
            self.broadcasts.push(signed);
        }
    }

    /// The resharing's result.
    fn on_reshared(&mut self, output: Arc<ReshareOutput<S>>, out: &mut TransitionOutbox<S>) {
        self.reshared = Some(output);
        self.finish(out);
    }

    /// A new member's resharing can end without enough dealers where others'
    /// did not (a complaint it took and the dealers never saw, deals it
    /// missed while down): it keeps what it holds and waits for the dealers
    /// the chain names (`adopt`), asking for what it lacks.
    fn on_reshare_failed(&mut self, failure: DkgFailure) {
        self.reshare_failed.get_or_insert(failure);
    }

    /// Sends a resharing message to directory member `to`.
    pub(super) fn send_reshare(
        &self,
        out: &mut TransitionOutbox<S>,
        to: DirectoryIndex,
        message: ReshareWire,
    ) {
        Self::effect(
            out,
            Effect::Send {
                to: to.address(),
                message: EpochMessage::Reshare {
                    epoch: self.epoch,
                    message,
                },
            },
        );
    }

    /// Sends a resharing message to participant `to` (nothing if out of the
    /// roster).
    pub(super) fn send_to_participant(
        &self,
        out: &mut TransitionOutbox<S>,
        to: NodeIndex,
        message: ReshareWire,
    ) {
        if let Some(d) = self.roster.get(to.0 as usize) {
            self.send_reshare(out, *d, message);
        }
    }
}
