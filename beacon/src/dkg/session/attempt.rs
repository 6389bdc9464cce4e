//! Step 1 of a session: an attempt of the DKG machine joined to the relay
//! ([`RelayedMachine`]), and what its events ask of the session.

use super::outbox::{Outbox, Step};
use super::{
    attempt_seed, attempt_session, DkgSession, SessionInput, SessionMessage, SessionOutput,
    SessionTimer, State,
};
use crate::dkg::relay::{
    BroadcastRelay, Kind, RelayMessage, RelayedInput, RelayedMachine, RelayedOutput, SigningKey,
    VerifyingKey,
};
use crate::dkg::{Dkg, DkgConfig, DkgFailure, DkgInput, DkgOutput, Genesis, ATTEMPT_PHASES};
use crate::effect::Effect;
use crate::memo::Memo;
use crate::{Error, NodeIndex, Scheme, Time};
use std::sync::Arc;

/// An attempt's DKG joined to its relay.
pub(super) type RelayedDkg<S> = RelayedMachine<S, Genesis<S>>;

impl<S: Scheme> DkgSession<S> {
    pub(super) fn attempt_parts(
        base: &DkgConfig,
        me: NodeIndex,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        key: &SigningKey,
        keys: &Arc<Vec<VerifyingKey>>,
        attempt: u32,
    ) -> Result<RelayedDkg<S>, Error> {
        let session = attempt_session(&base.session, attempt);
        let config = base.with(|c| {
            c.session = session;
            c.timing = base.timing.for_attempt(attempt);
        })?;
        let seed = attempt_seed(seed, &config);
        let dkg = Dkg::new(config, me, seed, memo.clone())?.with_relay();
        let mut relay = BroadcastRelay::new(me, session, key.clone(), keys.clone(), memo.clone());
        if dkg.has_hub() {
            relay = relay.with_hub(&base.dealers);
        }
        Ok(RelayedMachine::new(dkg, relay))
    }

    /// The attempt's DKG.
    pub(super) fn dkg(&self) -> &Dkg<S> {
        self.dkg.machine()
    }

    pub(super) fn phase_us(&self) -> u64 {
        self.dkg().config().timing.phase_us()
    }

    /// Starts the current attempt; the messages of it that came early go
    /// through the loopback.
    pub(super) fn begin(&mut self, now: Time, out: &mut Outbox<S>) {
        self.state = State::Running;
        out.push(SessionOutput::Effect(Effect::SetTimer {
            at: now.plus_micros(self.phase_us().saturating_mul(ATTEMPT_PHASES)),
            timer: SessionTimer::EndOfAttempt {
                attempt: self.attempt,
            },
        }));
        self.run_dkg(now, DkgInput::Start, out);
        for (from, message) in std::mem::take(&mut self.early) {
            out.loop_back(Step::Input(SessionInput::Message { from, message }));
        }
    }

    /// Hands `input` to the attempt's DKG and carries out what follows.
    pub(super) fn run_dkg(&mut self, now: Time, input: DkgInput<S>, out: &mut Outbox<S>) {
        let events = self.dkg.handle(now, RelayedInput::Machine(input));
        self.carry_out(events, out);
    }

    /// Hands a relay message from `from` to the attempt's relay and carries
    /// out what follows.
    pub(super) fn on_relay(
        &mut self,
        now: Time,
        from: NodeIndex,
        message: RelayMessage,
        out: &mut Outbox<S>,
    ) {
        let events = self.dkg.handle(now, RelayedInput::Relay { from, message });
        self.carry_out(events, out);
    }

    /// The dispatcher of the relayed DKG's outputs.
    fn carry_out(&mut self, outputs: Vec<RelayedOutput<DkgOutput<S>>>, out: &mut Outbox<S>) {
        let attempt = self.attempt;
        for output in outputs {
            match output {
                RelayedOutput::Effect(effect) => out.push(SessionOutput::Effect(effect.map(
                    |wire| SessionMessage::of_attempt(attempt, wire),
                    |timer| SessionTimer::Phase { attempt, timer },
                ))),
                RelayedOutput::Signed { kind, message } => self.on_signed(kind, message),
                RelayedOutput::Delivered { origin, kind } => self.on_delivered(origin, kind, out),
                RelayedOutput::Done(output) => self.on_result(output, out),
                RelayedOutput::Failed(failure) => self.on_failure(failure, out),
            }
        }
    }

    /// This member's own broadcast, signed: a deal is kept, to send again
    /// (its broadcast follows).
    fn on_signed(&mut self, kind: Kind, message: RelayMessage) {
        if kind == Kind::Deal {
            self.recovery.sent_deal(&SessionMessage::Relay {
                attempt: self.attempt,
                message,
            });
        }
    }

    /// The relay delivered a broadcast of `origin`: a deal may complete what
    /// an agreed result takes.
    fn on_delivered(&mut self, origin: NodeIndex, kind: Option<Kind>, out: &mut Outbox<S>) {
        if kind == Some(Kind::Deal) {
            self.recovery.deal_from(origin);
            self.check_material(out);
        }
    }

    /// The attempt's DKG failed: the agreement may still adopt a result.
    fn on_failure(&mut self, failure: DkgFailure, out: &mut Outbox<S>) {
        self.last_failure = Some(failure);
        self.check_quorum(out);
    }
}
