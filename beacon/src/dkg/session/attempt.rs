//! Step 1 of a session: an attempt of the DKG machine, its actions carried
//! out through the relay, and the relay's actions carried back into the DKG.

use super::*;
use crate::dkg::relay::RelayAction;
use crate::dkg::{DkgAction, DkgInput};
use crate::{NodeIndex, Scheme, Time};
use std::sync::Arc;

impl<S: Scheme> DkgSession<S> {
    pub(super) fn attempt_parts(
        base: &DkgConfig,
        me: NodeIndex,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        key: &SigningKey,
        keys: &Arc<Vec<VerifyingKey>>,
        attempt: u32,
    ) -> Result<(Dkg<S>, BroadcastRelay), Error> {
        let session = attempt_session(&base.session, attempt);
        let config = base.with(|c| {
            c.session = session;
            c.phase_timeout_us = base.phase_timeout_us.saturating_mul(1 << attempt.min(16));
        })?;
        let seed = attempt_seed(seed, &config);
        let dkg = Dkg::new(config, me, seed, memo.clone())?.with_relay();
        let mut relay = BroadcastRelay::new(me, session, key.clone(), keys.clone(), memo.clone());
        if dkg.has_hub() {
            relay = relay.with_hub(&base.dealers);
        }
        Ok((dkg, relay))
    }

    pub(super) fn phase_us(&self) -> u64 {
        self.dkg.config().phase_timeout_us
    }

    pub(super) fn begin(&mut self, now: Time, out: &mut Vec<SessionAction<S>>) {
        self.state = State::Running;
        out.push(SessionAction::SetTimer {
            at: now.plus_micros(self.phase_us().saturating_mul(4)),
            timer: SessionTimer::EndOfAttempt {
                attempt: self.attempt,
            },
        });
        let actions = self.dkg.handle(now, DkgInput::Start);
        self.on_dkg(now, actions, out);
        for (from, message) in std::mem::take(&mut self.early) {
            if self.state == State::Running {
                self.on_message(now, from, message, out);
            }
        }
    }

    pub(super) fn on_dkg(
        &mut self,
        now: Time,
        actions: Vec<DkgAction<S>>,
        out: &mut Vec<SessionAction<S>>,
    ) {
        let attempt = self.attempt;
        for action in actions {
            match action {
                DkgAction::Send {
                    to,
                    message: DkgMessage::Shares(shares),
                } => {
                    self.recovery.sent_shares(to, &shares);
                    out.push(SessionAction::Send {
                        to,
                        message: SessionMessage::Shares { attempt, shares },
                    })
                }
                DkgAction::Send {
                    to,
                    message: DkgMessage::Complaint(c),
                } if c.dealers.is_empty() => out.push(SessionAction::Send {
                    to,
                    message: SessionMessage::NoComplaint { attempt },
                }),
                // The DKG sends nothing else point to point.
                DkgAction::Send { .. } => {}
                DkgAction::Broadcast(message) => {
                    let deal = matches!(message, DkgMessage::Deal(_));
                    if let Ok(signed) = self.sign_broadcast(&message) {
                        if deal {
                            self.recovery.sent_deal(&signed);
                        }
                        out.push(SessionAction::Broadcast(signed));
                    }
                }
                DkgAction::SetTimer { at, timer } => out.push(SessionAction::SetTimer {
                    at,
                    timer: SessionTimer::Phase { attempt, timer },
                }),
                DkgAction::Announce(kind) => {
                    let actions = self.relay.announce::<S>(kind);
                    self.on_relay(now, actions, out);
                }
                DkgAction::Complete(output) => self.on_result(now, output, out),
                DkgAction::Failed(reason) => {
                    self.last_failure = Some(reason);
                    self.check_quorum(out);
                }
            }
        }
    }

    pub(super) fn on_relay(
        &mut self,
        now: Time,
        actions: Vec<RelayAction<S>>,
        out: &mut Vec<SessionAction<S>>,
    ) {
        let attempt = self.attempt;
        for action in actions {
            match action {
                RelayAction::Deliver { origin, message } => {
                    let deal = matches!(message, DkgMessage::Deal(_));
                    if deal {
                        self.recovery.deal_from(origin);
                    }
                    let actions = self.dkg.handle(
                        now,
                        DkgInput::Message {
                            from: origin,
                            message,
                        },
                    );
                    self.on_dkg(now, actions, out);
                    if deal {
                        self.on_material(out);
                    }
                }
                RelayAction::Send { to, message } => out.push(SessionAction::Send {
                    to,
                    message: SessionMessage::Relay { attempt, message },
                }),
                RelayAction::SendAll(message) => {
                    out.push(SessionAction::Broadcast(SessionMessage::Relay {
                        attempt,
                        message,
                    }))
                }
                RelayAction::Equivocation(member) => {
                    let actions = self.dkg.handle(now, DkgInput::Faulty { member });
                    self.on_dkg(now, actions, out);
                }
                RelayAction::Consistent(kind) => {
                    let actions = self.dkg.handle(now, DkgInput::Confirmed(kind));
                    self.on_dkg(now, actions, out);
                }
            }
        }
    }
}
