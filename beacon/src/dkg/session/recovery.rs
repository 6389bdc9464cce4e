//! A member that restarted during a session, or lost messages, gets them
//! again: it asks each dealer whose deal or shares it lacks
//! ([`DkgSession::request_missing`]); a dealer answers with its signed deal
//! and the asker's shares, as it sent them (a deal is one version: sending it
//! again proves nothing against its dealer), and, once it holds the agreed
//! result, with the certificate of that result. Shares travel point to point
//! only, to the member they belong to: nothing secret becomes public, unlike
//! a complaint answered by a justification.
//!
//! Bounded: a dealer answers each member at most once per half phase length
//! (a member asks once per phase length; an asker that floods gets no more),
//! and keeps one signed deal; the certificate it sends is its quorum's, and
//! the shares it sends again are rebuilt from what it dealt.

use super::outbox::{Outbox, Step};
use super::{
    attempt_session, AgreementKeys, DkgSession, ResultCertificate, SessionMessage, SessionOutput,
    State, Wants,
};
use crate::dkg::relay::{RelayMessage, SigningKey, VerifyingKey};
use crate::dkg::{DkgConfig, DkgInput};
use crate::effect::Effect;
use crate::memo::Memo;
use crate::{DkgError, Error, NodeIndex, Scheme, Time};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most times a member whose attempt reached a quorum without it waits
/// another attempt's length for the deals and shares it asked for.
const MAX_WAITS: u32 = 4;

/// What a session sent in its current attempt (to send again) and which
/// dealers' deals and shares it received.
#[derive(Default)]
pub(super) struct Recovery {
    deal: Option<RelayMessage>,
    answered: BTreeMap<NodeIndex, Time>,
    deals_in: BTreeSet<NodeIndex>,
    shares_in: BTreeSet<NodeIndex>,
    waits: u32,
}

impl Recovery {
    /// This member's signed deal.
    pub(super) fn sent_deal(&mut self, signed: &SessionMessage) {
        if let SessionMessage::Relay { message, .. } = signed {
            self.deal.get_or_insert_with(|| message.clone());
        }
    }

    /// A deal of `dealer` was delivered.
    pub(super) fn deal_from(&mut self, dealer: NodeIndex) {
        self.deals_in.insert(dealer);
    }

    /// Shares from `dealer` came in.
    pub(super) fn shares_from(&mut self, dealer: NodeIndex) {
        self.shares_in.insert(dealer);
    }

    /// Whether to wait once more for what was asked (bounded).
    pub(super) fn wait(&mut self) -> bool {
        self.waits += 1;
        self.waits <= MAX_WAITS
    }
}

impl<S: Scheme> DkgSession<S> {
    /// The session of member `me` whose DKG completed in attempt `attempt`,
    /// rebuilt after a restart from the seed that dealt it (the arguments of
    /// [`DkgSession::new`]): it holds the same deal again (the same signed
    /// broadcast: ed25519 is deterministic) and only answers members that
    /// ask for their deals and shares ([`SessionMessage::Request`]). It holds
    /// no votes, so it sends no certificate: the asker gets that from the
    /// members that did not restart. What the attempt's start sends is
    /// dropped (it was sent before the restart).
    #[allow(clippy::too_many_arguments)]
    pub fn finished(
        config: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        agreement: AgreementKeys<S>,
        attempt: u32,
    ) -> Result<Self, Error> {
        if attempt >= config.timing.max_attempts {
            return Err(Error::Dkg(DkgError::AttemptOutOfRange {
                attempt,
                max_attempts: config.timing.max_attempts,
            }));
        }
        let max_attempts = config.timing.max_attempts;
        let mut session = Self::new(config, me, seed, memo, key, keys, agreement)?;
        // Its parts are built as attempt 0's were: this fails only for an
        // attempt the run does not have.
        if attempt != 0 && !session.enter_attempt(attempt) {
            return Err(Error::Dkg(DkgError::AttemptOutOfRange {
                attempt,
                max_attempts,
            }));
        }
        session.state = State::Running;
        let mut dropped = Outbox::new();
        session.run_dkg(Time(0), DkgInput::Start, &mut dropped);
        session.state = State::Over;
        Ok(session)
    }

    /// Asks each dealer whose deal or shares this member still lacks in the
    /// current attempt to send them again, and, once this member's own attempt
    /// is over without a quorum, every dealer for the agreed result. Nothing
    /// before the session starts or after it ended.
    pub fn request_missing(&self) -> Vec<SessionOutput<S>> {
        if self.state != State::Running {
            return Vec::new();
        }
        let finished = self.result.is_some() || self.last_failure.is_some();
        let attempt = self.attempt;
        (0..self.base.n)
            .map(NodeIndex)
            .filter(|d| *d != self.me && self.base.is_dealer(*d))
            .filter_map(|to| {
                let wants = Wants {
                    deal: !self.recovery.deals_in.contains(&to),
                    shares: !self.recovery.shares_in.contains(&to),
                    certificate: finished,
                };
                (wants.deal || wants.shares || wants.certificate).then_some(SessionOutput::Effect(
                    Effect::Send {
                        to,
                        message: SessionMessage::Request { attempt, wants },
                    },
                ))
            })
            .collect()
    }

    /// At the end of a phase of the current attempt: a member still without
    /// its result asks the dealers whose deal or shares it lacks (nothing
    /// when all are in, so a run without faults sends no request).
    pub(super) fn ask_at_phase_end(&self) -> Vec<SessionOutput<S>> {
        if self.result.is_some() || self.last_failure.is_some() {
            return Vec::new();
        }
        self.request_missing()
    }

    /// A deal or shares came in: once this member's own attempt is over and
    /// `n - f` members agreed on a result, it may now hold everything that
    /// result takes (it asked for it), and adopts it.
    pub(super) fn check_material(&mut self, out: &mut Outbox<S>) {
        let finished = self.result.is_some() || self.last_failure.is_some();
        if self.state == State::Running && finished && self.agreed().is_some() {
            self.check_quorum(out);
        }
    }

    /// Member `from` asked for what it `wants` of this member's in
    /// `attempt`: its deal, its shares, the agreed result's certificate.
    pub(super) fn on_request(
        &mut self,
        now: Time,
        from: NodeIndex,
        attempt: u32,
        wants: Wants,
        out: &mut Outbox<S>,
    ) {
        if from.0 >= self.base.n || from == self.me || self.state == State::Idle {
            return;
        }
        let later = attempt > self.attempt && self.state == State::Over;
        if attempt != self.attempt && !later {
            return;
        }
        let gap = self.phase_us() / 2;
        if let Some(last) = self.recovery.answered.get(&from) {
            if now.0 < last.0.saturating_add(gap) {
                return;
            }
        }
        self.recovery.answered.insert(from, now);
        if later {
            // The asker went on to a later attempt alone (it was cut off):
            // the certificate of this one takes it back
            // ([`DkgSession::roll_back`]).
            if let Some(certificate) = self.agreed_certificate() {
                out.push(SessionOutput::Effect(Effect::Send {
                    to: from,
                    message: SessionMessage::Certificate(certificate),
                }));
            }
            return;
        }
        if let Some(deal) = self.recovery.deal.as_ref().filter(|_| wants.deal) {
            out.push(SessionOutput::Effect(Effect::Send {
                to: from,
                message: SessionMessage::Relay {
                    attempt,
                    message: deal.clone(),
                },
            }));
        }
        // Its shares for the asker, rebuilt from what it dealt (keeping every
        // message it sent cost a committee dealer `n` of them). The asker is
        // not this member (checked above).
        if let Some(shares) = self.dkg().dealt_shares(from).filter(|_| wants.shares) {
            out.push(SessionOutput::Effect(Effect::Send {
                to: from,
                message: SessionMessage::Shares { attempt, shares },
            }));
        }
        if let Some(certificate) = self.agreed_certificate().filter(|_| wants.certificate) {
            out.push(SessionOutput::Effect(Effect::Send {
                to: from,
                message: SessionMessage::Certificate(certificate),
            }));
        }
    }

    /// The certificate of the result this member output, once its session
    /// is over: the one it accepted, or the sum of the votes it checked.
    /// Every answer shares it.
    fn agreed_certificate(&self) -> Option<Arc<ResultCertificate>> {
        if self.state != State::Over {
            return None;
        }
        self.agreed().map(|(_, c)| c.clone())
    }

    /// A valid certificate of an earlier attempt than this member's: `n - f`
    /// members agreed there while this member was cut off and went on alone.
    /// It returns to that attempt (rebuilt from its seed: the same deal
    /// again), holding the certificate, and asks for the deals and shares it
    /// lacks; no later attempt could gather a quorum, those members are done.
    pub(super) fn roll_back(
        &mut self,
        now: Time,
        certificate: Arc<ResultCertificate>,
        out: &mut Outbox<S>,
    ) {
        let attempt = certificate.attempt;
        if self.state != State::Running
            || attempt >= self.attempt
            || !self.certifies(&certificate, &attempt_session(&self.base.session, attempt))
        {
            return;
        }
        if !self.enter_attempt(attempt) {
            return;
        }
        self.early.clear();
        self.begin(now, out);
        out.loop_back(Step::Certificate(certificate));
        out.loop_back(Step::AskMissing);
    }
}
