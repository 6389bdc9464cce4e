//! The one adapter that joins a phase machine (the genesis DKG's attempt, a
//! resharing) to the relay: the machine's broadcasts are signed and relayed,
//! its announcements go to the relay, and the relay's deliveries, proofs of
//! equivocation and confirmations go back into the machine.
//!
//! [`RelayedMachine::handle`] takes one input and carries every consequence
//! out before it returns: each step the machine or the relay asks for is
//! looped back through the workspace's one [`Outbox`] and one dispatcher
//! takes them in its one order, never by one handler calling another. What
//! is left for the driver comes out as [`RelayedOutput`]s, in that order;
//! its messages are [`RelayedWire`]s, the adapter's legal point-to-point
//! and relay cases, which each user tags with [`Effect::map`].

use super::{BroadcastRelay, Kind, RelayMessage, RelayOutput};
use crate::dkg::phases::{DkgFailure, PhaseMachine, PhaseOutput, Sharing};
use crate::dkg::{DealtShares, DkgInput, DkgMessage, DkgTimer};
use crate::effect::{Effect, Outbox};
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, Time};
use std::sync::Arc;

/// What a relayed machine puts on the wire: the one mapping from a machine's
/// and a relay's messages to what travels.
#[derive(Clone, Debug)]
pub enum RelayedWire {
    /// A dealer's private shares for the recipient (point to point).
    Shares(DealtShares),
    /// A complaint naming nobody, sent to the committee alone (point to
    /// point): only a genesis DKG with a hub sends it
    /// ([`crate::dkg::Dkg::has_hub`]); the receiver reads it as that
    /// complaint from the sender.
    NoComplaint,
    /// A relay message (attestations, summaries, pulls, relayed broadcasts).
    Relay(RelayMessage),
}

impl RelayedWire {
    /// What a machine's point-to-point `message` travels as: `None` for what
    /// a relayed machine never sends point to point (its broadcasts are
    /// signed and relayed).
    fn direct<S: Scheme>(message: DkgMessage<S>) -> Option<Self> {
        match message {
            DkgMessage::Shares(shares) => Some(RelayedWire::Shares(shares)),
            DkgMessage::Complaint(c) if c.dealers.is_empty() => Some(RelayedWire::NoComplaint),
            DkgMessage::Complaint(_) | DkgMessage::Deal(_) | DkgMessage::Justification(_) => None,
        }
    }
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
pub enum RelayedOutput<O> {
    /// Send, broadcast, or set a timer.
    Effect(Effect<RelayedWire, DkgTimer>),
    /// This participant's own broadcast, signed, for the driver to keep (to
    /// send again on request); its broadcast follows as an
    /// [`RelayedOutput::Effect`].
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

/// One step of the work a relayed input causes (the adapter's self-input).
enum Step<S: Scheme, O> {
    /// Carry out an output of the machine.
    Machine(PhaseOutput<S, O>),
    /// Carry out an output of the relay.
    Relay(RelayOutput<S>),
    /// Report that the relay delivered a broadcast.
    Delivered {
        origin: NodeIndex,
        kind: Option<Kind>,
    },
}

/// The outbox of one relayed `handle` call.
type RelayedOutbox<S, O> = Outbox<RelayedOutput<O>, Step<S, O>>;

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
    pub fn handle(&mut self, now: Time, input: RelayedInput<S>) -> Vec<RelayedOutput<P::Output>> {
        let mut out = Outbox::new();
        match input {
            RelayedInput::Machine(input) => self.run_machine(now, input, &mut out),
            RelayedInput::Relay { from, message } => {
                if let Ok(outputs) = self.relay.receive::<S>(from, message) {
                    for output in outputs {
                        out.loop_back(Step::Relay(output));
                    }
                }
            }
        }
        while let Some(step) = out.next_input() {
            match step {
                Step::Machine(output) => self.on_machine(output, &mut out),
                Step::Relay(output) => self.on_relay(now, output, &mut out),
                Step::Delivered { origin, kind } => {
                    out.push(RelayedOutput::Delivered { origin, kind })
                }
            }
        }
        out.take()
    }

    /// Hands `input` to the machine; its outputs are the next steps.
    fn run_machine(
        &mut self,
        now: Time,
        input: DkgInput<S>,
        out: &mut RelayedOutbox<S, P::Output>,
    ) {
        for output in self.machine.handle(now, input) {
            out.loop_back(Step::Machine(output));
        }
    }

    /// One output of the machine: broadcasts are signed, announcements go to
    /// the relay, the rest to the driver.
    fn on_machine(
        &mut self,
        output: PhaseOutput<S, P::Output>,
        out: &mut RelayedOutbox<S, P::Output>,
    ) {
        match output {
            PhaseOutput::Effect(Effect::Broadcast(message)) => {
                if let (Ok(signed), Some(kind)) = (self.relay.sign(&message), Kind::of(&message)) {
                    out.push(RelayedOutput::Signed {
                        kind,
                        message: signed.clone(),
                    });
                    out.push(RelayedOutput::Effect(Effect::Broadcast(
                        RelayedWire::Relay(signed),
                    )));
                }
            }
            PhaseOutput::Effect(Effect::Send { to, message }) => {
                if let Some(message) = RelayedWire::direct(message) {
                    out.push(RelayedOutput::Effect(Effect::Send { to, message }));
                }
            }
            PhaseOutput::Effect(Effect::SetTimer { at, timer }) => {
                out.push(RelayedOutput::Effect(Effect::SetTimer { at, timer }))
            }
            PhaseOutput::Announce(kind) => {
                for output in self.relay.announce::<S>(kind) {
                    out.loop_back(Step::Relay(output));
                }
            }
            PhaseOutput::Done(output) => out.push(RelayedOutput::Done(output)),
            PhaseOutput::Failed(failure) => out.push(RelayedOutput::Failed(failure)),
        }
    }

    /// One output of the relay: deliveries, equivocations and confirmations
    /// go into the machine, messages to the driver.
    fn on_relay(
        &mut self,
        now: Time,
        output: RelayOutput<S>,
        out: &mut RelayedOutbox<S, P::Output>,
    ) {
        match output {
            RelayOutput::Deliver { origin, message } => {
                let kind = Kind::of(&message);
                let input = DkgInput::Message {
                    from: origin,
                    message,
                };
                self.run_machine(now, input, out);
                out.loop_back(Step::Delivered { origin, kind });
            }
            RelayOutput::Effect(effect) => {
                let effect = effect.map(RelayedWire::Relay, |never| match never {});
                out.push(RelayedOutput::Effect(effect));
            }
            RelayOutput::Equivocation(member) => {
                self.run_machine(now, DkgInput::Faulty { member }, out)
            }
            RelayOutput::Consistent(kind) => self.run_machine(now, DkgInput::Confirmed(kind), out),
        }
    }
}
