//! The transition's drivers: the resharer's, the relay's and the DKG
//! session's actions carried out as effects addressed by directory index,
//! and the relay's deliveries carried back into the resharer.

use super::*;

impl<S: Scheme> Transition<S> {
    pub(super) fn effect(
        out: &mut Vec<TransitionEvent<S>>,
        effect: Effect<EpochMessage<S>, TransitionTimer>,
    ) {
        out.push(TransitionEvent::Effect(effect));
    }

    pub(super) fn on_reshare(
        &mut self,
        now: Time,
        actions: Vec<ReshareAction<S>>,
        out: &mut Vec<TransitionEvent<S>>,
    ) {
        let epoch = self.epoch;
        for action in actions {
            match action {
                ReshareAction::Send {
                    to,
                    message: DkgMessage::Shares(shares),
                } => self.send_to_participant(out, to, ReshareWire::Shares(shares)),
                // The resharing sends nothing else point to point.
                ReshareAction::Send { .. } => {}
                ReshareAction::Broadcast(message) => {
                    if let Ok(signed) = self.relay.sign(&message) {
                        if self.broadcasts.len() < 3 {
                            self.broadcasts.push(signed.clone());
                        }
                        Self::effect(
                            out,
                            Effect::Broadcast(EpochMessage::Reshare {
                                epoch,
                                message: ReshareWire::Relay(signed),
                            }),
                        );
                    }
                }
                ReshareAction::SetTimer { at, timer } => Self::effect(
                    out,
                    Effect::SetTimer {
                        at,
                        timer: TransitionTimer::Reshare(timer),
                    },
                ),
                ReshareAction::Announce(kind) => {
                    let actions = self.relay.announce::<S>(kind);
                    self.on_relay(now, actions, out);
                }
                ReshareAction::Reshared(output) => {
                    self.reshared = Some(output);
                    self.finish(out);
                }
                // A new member's resharing can end without enough dealers
                // where others' did not (a complaint it took and the dealers
                // never saw, deals it missed while down): it keeps what it
                // holds and waits for the dealers the chain names
                // (`adopt`), asking for what it lacks.
                ReshareAction::Failed(e) => {
                    self.reshare_failed.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }

    pub(super) fn on_relay(
        &mut self,
        now: Time,
        actions: Vec<RelayAction<S>>,
        out: &mut Vec<TransitionEvent<S>>,
    ) {
        let epoch = self.epoch;
        for action in actions {
            match action {
                RelayAction::Deliver { origin, message } => {
                    let input = ReshareInput::Message {
                        from: origin,
                        message,
                    };
                    let actions = self.resharer.handle(now, input);
                    self.on_reshare(now, actions, out);
                }
                RelayAction::Send { to, message } => {
                    self.send_to_participant(out, to, ReshareWire::Relay(message))
                }
                RelayAction::SendAll(message) => Self::effect(
                    out,
                    Effect::Broadcast(EpochMessage::Reshare {
                        epoch,
                        message: ReshareWire::Relay(message),
                    }),
                ),
                RelayAction::Equivocation(member) => {
                    let actions = self.resharer.handle(now, ReshareInput::Faulty { member });
                    self.on_reshare(now, actions, out);
                }
                RelayAction::Consistent(kind) => {
                    let actions = self.resharer.handle(now, ReshareInput::Confirmed(kind));
                    self.on_reshare(now, actions, out);
                }
            }
        }
    }

    pub(super) fn on_dkg(
        &mut self,
        actions: Vec<SessionAction<S>>,
        out: &mut Vec<TransitionEvent<S>>,
    ) {
        let epoch = self.epoch;
        let wrap = |message: SessionMessage| EpochMessage::Dkg { epoch, message };
        for action in actions {
            match action {
                SessionAction::Send { to, message } => {
                    if let Some(d) = self.new.directory_of(to) {
                        Self::effect(
                            out,
                            Effect::Send {
                                to: NodeIndex(d),
                                message: wrap(message),
                            },
                        );
                    }
                }
                SessionAction::Broadcast(message) => {
                    Self::effect(out, Effect::Broadcast(wrap(message)))
                }
                SessionAction::SetTimer { at, timer } => Self::effect(
                    out,
                    Effect::SetTimer {
                        at,
                        timer: TransitionTimer::Dkg(timer),
                    },
                ),
                SessionAction::Complete(output) => {
                    self.consensus_keys = Some(output);
                    self.finish(out);
                }
                SessionAction::Failed(reason) => {
                    self.fail(format!("DKG of the consensus keys: {reason}"), out)
                }
            }
        }
    }

    /// Sends a resharing message to directory member `to`.
    pub(super) fn send_reshare(
        &self,
        out: &mut Vec<TransitionEvent<S>>,
        to: u32,
        message: ReshareWire,
    ) {
        Self::effect(
            out,
            Effect::Send {
                to: NodeIndex(to),
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
