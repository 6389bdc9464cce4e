//! The transition's dispatcher of the resharing's events (joined to its
//! relay: [`RelayedMachine`]), carried out as effects addressed by directory
//! index, its result kept.

use super::{Transition, TransitionEvent, TransitionTimer};
use crate::epoch::{EpochMessage, ReshareWire};
use crate::DirectoryIndex;
use beacon::dkg::relay::{RelayMessage, RelayedEvent, RelayedInput, RelayedMessage};
use beacon::dkg::{DkgFailure, DkgMessage, DkgTimer};
use beacon::effect::Effect;
use beacon::reshare::ReshareOutput;
use beacon::{NodeIndex, Scheme, Time};
use std::sync::Arc;

impl<S: Scheme> Transition<S> {
    pub(super) fn effect(
        out: &mut Vec<TransitionEvent<S>>,
        effect: Effect<EpochMessage<S>, TransitionTimer>,
    ) {
        out.push(TransitionEvent::Effect(effect));
    }

    /// Hands `input` to the resharing (joined to its relay) and carries out
    /// what follows.
    pub(super) fn run_reshare(
        &mut self,
        now: Time,
        input: RelayedInput<S>,
        out: &mut Vec<TransitionEvent<S>>,
    ) {
        let events = self.reshare.handle(now, input);
        for event in events {
            match event {
                RelayedEvent::Effect(effect) => self.send_reshare_effect(effect, out),
                RelayedEvent::Signed { message, .. } => self.on_signed(message, out),
                RelayedEvent::Delivered { .. } => {}
                RelayedEvent::Done(output) => self.on_reshared(output, out),
                RelayedEvent::Failed(failure) => self.on_reshare_failed(failure),
            }
        }
    }

    /// A message or timer of the resharing, as the transition's.
    fn send_reshare_effect(
        &mut self,
        effect: Effect<RelayedMessage<S>, DkgTimer>,
        out: &mut Vec<TransitionEvent<S>>,
    ) {
        match effect {
            Effect::Send {
                to,
                message: RelayedMessage::Direct(DkgMessage::Shares(shares)),
            } => self.send_to_participant(out, to, ReshareWire::Shares(shares)),
            // The resharing sends nothing else point to point.
            Effect::Send {
                message: RelayedMessage::Direct(_),
                ..
            }
            | Effect::Broadcast(RelayedMessage::Direct(_)) => {}
            Effect::Send {
                to,
                message: RelayedMessage::Relay(message),
            } => self.send_to_participant(out, to, ReshareWire::Relay(message)),
            Effect::Broadcast(RelayedMessage::Relay(message)) => Self::effect(
                out,
                Effect::Broadcast(EpochMessage::Reshare {
                    epoch: self.epoch,
                    message: ReshareWire::Relay(message),
                }),
            ),
            Effect::SetTimer { at, timer } => Self::effect(
                out,
                Effect::SetTimer {
                    at,
                    timer: TransitionTimer::Reshare(timer),
                },
            ),
        }
    }

    /// This member's own resharing broadcast, signed: kept (to send again
    /// with its sub-share) and broadcast.
    fn on_signed(&mut self, signed: RelayMessage, out: &mut Vec<TransitionEvent<S>>) {
        if self.broadcasts.len() < 3 {
            self.broadcasts.push(signed.clone());
        }
        Self::effect(
            out,
            Effect::Broadcast(EpochMessage::Reshare {
                epoch: self.epoch,
                message: ReshareWire::Relay(signed),
            }),
        );
    }

    /// The resharing's result.
    fn on_reshared(&mut self, output: Arc<ReshareOutput<S>>, out: &mut Vec<TransitionEvent<S>>) {
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
        out: &mut Vec<TransitionEvent<S>>,
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
        out: &mut Vec<TransitionEvent<S>>,
        to: NodeIndex,
        message: ReshareWire,
    ) {
        if let Some(d) = self.roster.get(to.0 as usize) {
            self.send_reshare(out, *d, message);
        }
    }
}
