//! The one adapter that joins a phase machine (the genesis DKG's attempt, a
//! resharing) to the relay: the machine's broadcasts are signed and relayed,
//! its announcements go to the relay, and the relay's deliveries, proofs of
//! equivocation and confirmations go back into the machine.
//!
//! [`RelayedMachine::handle`] takes one input and carries every consequence
//! out before it returns: each step the machine or the relay asks for goes
//! onto a work stack that one dispatcher drains (depth first, so that what a
//! step causes comes out before the next step's), never by one handler
//! calling another. What is left for the driver comes out as
//! [`RelayedEvent`]s, in that order.

use super::{BroadcastRelay, Kind, RelayAction, RelayMessage};
use crate::dkg::phases::{DkgFailure, PhaseAction, PhaseMachine, Sharing};
use crate::dkg::{DkgInput, DkgMessage, DkgTimer};
use crate::effect::Effect;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, Time};
use std::sync::Arc;

/// A message a relayed machine sends.
#[derive(Clone, Debug)]
pub enum RelayedMessage<S: Scheme> {
    /// A message of the machine sent point to point (shares, or a complaint
    /// naming nobody to the committee).
    Direct(DkgMessage<S>),
    /// A relay message (attestations, summaries, pulls, relayed broadcasts).
    Relay(RelayMessage),
}

/// An input of a relayed machine.
#[derive(Clone, Debug)]
pub enum RelayedInput<S: Scheme> {
    /// An input of the machine itself: start, a timer, or a point-to-point
    /// message.
    Machine(DkgInput<S>),
    /// A relay message from participant `from`.
    Relay {
        /// The sender (as authenticated by the transport).
        from: NodeIndex,
        /// The message.
        message: RelayMessage,
    },
}

/// What a relayed machine asks of its driver.
#[derive(Clone, Debug)]
pub enum RelayedEvent<S: Scheme, O> {
    /// Send, broadcast, or set a timer.
    Effect(Effect<RelayedMessage<S>, DkgTimer>),
    /// This participant's own broadcast, signed: the driver broadcasts it
    /// (and may keep it, to send again on request).
    Signed {
        /// What kind of broadcast it is.
        kind: Kind,
        /// The signed broadcast.
        message: RelayMessage,
    },
    /// The relay handed the machine a broadcast of `origin`.
    Delivered {
        /// The origin.
        origin: NodeIndex,
        /// What kind of broadcast it was.
        kind: Option<Kind>,
    },
    /// The machine finished.
    Done(Arc<O>),
    /// The machine failed.
    Failed(DkgFailure),
}

/// One step of the work a relayed input causes.
enum Step<S: Scheme, O> {
    /// Carry out an action of the machine.
    Machine(PhaseAction<S, O>),
    /// Carry out an action of the relay.
    Relay(RelayAction<S>),
    /// Report that the relay delivered a broadcast.
    Delivered {
        origin: NodeIndex,
        kind: Option<Kind>,
    },
}

/// A phase machine joined to its relay.
pub struct RelayedMachine<S: Scheme, P: Sharing<S>> {
    machine: PhaseMachine<S, P>,
    relay: BroadcastRelay,
}

impl<S: Scheme, P: Sharing<S>> RelayedMachine<S, P> {
    /// `machine` (built [`PhaseMachine::with_relay`]) over `relay`.
    pub fn new(machine: PhaseMachine<S, P>, relay: BroadcastRelay) -> Self {
        RelayedMachine { machine, relay }
    }

    /// The machine.
    pub fn machine(&self) -> &PhaseMachine<S, P> {
        &self.machine
    }

    /// The machine, to change it (adoption, erasure).
    pub fn machine_mut(&mut self) -> &mut PhaseMachine<S, P> {
        &mut self.machine
    }

    /// Signs a broadcast of this participant as the relay would (for Byzantine
    /// wrappers that send versions of their own).
    pub fn sign(&mut self, message: &DkgMessage<S>) -> Result<RelayMessage, Error> {
        self.relay.sign(message)
    }

    /// Handles one input at `now` and carries out all it causes.
    pub fn handle(&mut self, now: Time, input: RelayedInput<S>) -> Vec<RelayedEvent<S, P::Output>> {
        let first: Vec<Step<S, P::Output>> = match input {
            RelayedInput::Machine(input) => self.steps_of_machine(now, input, None),
            RelayedInput::Relay { from, message } => match self.relay.receive::<S>(from, message) {
                Ok(actions) => actions.into_iter().map(Step::Relay).collect(),
                Err(_) => Vec::new(),
            },
        };
        let mut out = Vec::new();
        let mut stack: Vec<Step<S, P::Output>> = first.into_iter().rev().collect();
        while let Some(step) = stack.pop() {
            let next = match step {
                Step::Machine(action) => self.on_machine(action, &mut out),
                Step::Relay(action) => self.on_relay(now, action, &mut out),
                Step::Delivered { origin, kind } => {
                    out.push(RelayedEvent::Delivered { origin, kind });
                    Vec::new()
                }
            };
            stack.extend(next.into_iter().rev());
        }
        out
    }

    /// The machine's actions on `input`, then `after`.
    fn steps_of_machine(
        &mut self,
        now: Time,
        input: DkgInput<S>,
        after: Option<Step<S, P::Output>>,
    ) -> Vec<Step<S, P::Output>> {
        let actions = self.machine.handle(now, input);
        actions
            .into_iter()
            .map(Step::Machine)
            .chain(after)
            .collect()
    }

    /// One action of the machine: broadcasts are signed, announcements go to
    /// the relay, the rest to the driver.
    fn on_machine(
        &mut self,
        action: PhaseAction<S, P::Output>,
        out: &mut Vec<RelayedEvent<S, P::Output>>,
    ) -> Vec<Step<S, P::Output>> {
        match action {
            PhaseAction::Effect(Effect::Broadcast(message)) => {
                if let (Ok(signed), Some(kind)) = (self.relay.sign(&message), Kind::of(&message)) {
                    out.push(RelayedEvent::Signed {
                        kind,
                        message: signed,
                    });
                }
            }
            PhaseAction::Effect(effect) => out.push(RelayedEvent::Effect(
                effect.map(RelayedMessage::Direct, |t| t),
            )),
            PhaseAction::Announce(kind) => {
                return self
                    .relay
                    .announce::<S>(kind)
                    .into_iter()
                    .map(Step::Relay)
                    .collect();
            }
            PhaseAction::Done(output) => out.push(RelayedEvent::Done(output)),
            PhaseAction::Failed(failure) => out.push(RelayedEvent::Failed(failure)),
        }
        Vec::new()
    }

    /// One action of the relay: deliveries, equivocations and confirmations
    /// go into the machine, messages to the driver.
    fn on_relay(
        &mut self,
        now: Time,
        action: RelayAction<S>,
        out: &mut Vec<RelayedEvent<S, P::Output>>,
    ) -> Vec<Step<S, P::Output>> {
        match action {
            RelayAction::Deliver { origin, message } => {
                let kind = Kind::of(&message);
                let input = DkgInput::Message {
                    from: origin,
                    message,
                };
                let delivered = Step::Delivered { origin, kind };
                self.steps_of_machine(now, input, Some(delivered))
            }
            RelayAction::Effect(effect) => {
                let effect = effect.map(RelayedMessage::Relay, |never| match never {});
                out.push(RelayedEvent::Effect(effect));
                Vec::new()
            }
            RelayAction::Equivocation(member) => {
                self.steps_of_machine(now, DkgInput::Faulty { member }, None)
            }
            RelayAction::Consistent(kind) => {
                self.steps_of_machine(now, DkgInput::Confirmed(kind), None)
            }
        }
    }
}
