//! A whole DKG run as members drive it: attempts of the Joint-Feldman machine
//! ([`Dkg`]) over the consistent-broadcast relay ([`BroadcastRelay`]), each
//! followed by an agreement step. Pure (no I/O): the simulator and the node run
//! this same code.
//!
//! # Steps
//! 1. **Attempt `a`.** The session of attempt `a` is
//!    `SHA-256("sbft-beacon/dkg-attempt/1" || base session || u32_be(a))`; every
//!    message names it (the relay's signatures cover it), so nothing of one attempt
//!    counts in another. Phases last `phase_timeout * 2^a`. The DKG's broadcasts go
//!    through the relay; its shares go point to point; a relay proof of
//!    equivocation makes the origin faulty ([`DkgInput::Faulty`]).
//! 2. **Agreement.** When the attempt's DKG finalizes, the member signs
//!    `(attempt session, QUAL, SHA-256 of every group public polynomial)` with its
//!    own consensus key ([`AgreementKeys`]) and sends it to everyone, or with a hub
//!    to the committee ([`SignedResult`]). It outputs its result
//!    ([`SessionOutput::Complete`]) only once `n - f` members signed the same
//!    `(QUAL, digest)` as its own: their votes add up into one multi-signature,
//!    the result's certificate ([`ResultCertificate`]), which a committee member
//!    sends everyone.
//! 3. **Rerun.** At `4 * phase` after the attempt began, a member with no such
//!    quorum starts attempt `a + 1` (a deterministic schedule: every member reruns
//!    at the same local time), until `max_attempts`; then it fails. A member that
//!    sees `n - f` signatures on a result other than its own fails at once: the
//!    honest members that output a key all output the same one.
//!
//! Messages of the next attempt that arrive early are kept (bounded) and handled
//! when it begins; messages of any other attempt are dropped.
//!
//! A member without its result that reaches the end of a phase lacking some
//! dealer's deal or shares (it restarted, was down while the others dealt,
//! or lost them) asks those dealers for them ([`DkgSession::request_missing`]);
//! a dealer answers, even once its own session is over, with its deal, the
//! asker's shares and the agreed certificate (`recovery`).
//!
//! [`Dkg`]: super::Dkg
//! [`BroadcastRelay`]: super::relay::BroadcastRelay

mod agreement;
mod attempt;
mod interface;
mod outbox;
mod recovery;

pub use agreement::AgreementKeys;
pub use interface::{
    ResultCertificate, SessionFailure, SessionInput, SessionMessage, SessionOutput,
    SessionParticipant, SessionTimer, SignedResult, Wants,
};

use outbox::{Outbox, Step};

use super::relay::{SigningKey, VerifyingKey};
use crate::curve::Point;
use crate::dkg::{Complaint, DealtShares, DkgConfig, DkgFailure, DkgInput, DkgMessage, DkgOutput};
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::{DkgError, Error, NodeIndex, Time};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most messages of the next attempt kept per member of the network.
const EARLY_PER_MEMBER: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Idle,
    Running,
    Over,
}

/// One member's DKG session.
pub struct DkgSession<S: Scheme> {
    base: DkgConfig,
    me: NodeIndex,
    seed: [u8; 32],
    memo: Arc<Memo>,
    key: SigningKey,
    keys: Arc<Vec<VerifyingKey>>,
    /// What result votes are signed and checked with.
    agreement: AgreementKeys<S>,
    state: State,
    attempt: u32,
    /// The current attempt's DKG, joined to its relay.
    dkg: attempt::RelayedDkg<S>,
    result: Option<Arc<DkgOutput<S>>>,
    /// [`result_id`] of `result`.
    result_id: Option<[u8; 32]>,
    last_failure: Option<DkgFailure>,
    /// Each member's first vote in this attempt whose signature is a point
    /// (a committee member holds `n`: kept small), not yet found invalid.
    votes: BTreeMap<NodeIndex, agreement::Vote<S>>,
    /// Members whose vote in this attempt was invalid: they vote no more.
    rejected: BTreeSet<NodeIndex>,
    /// The results ([`result_id`]) votes are for, as a vote names them (one
    /// in an honest attempt).
    voted: Vec<[u8; 32]>,
    /// What each result voted for or certified in this attempt is.
    claims: BTreeMap<[u8; 32], agreement::Claim>,
    /// Votes per result ([`result_id`]) in this attempt, and its quorum.
    tally: BTreeMap<[u8; 32], agreement::Tally>,
    early: Vec<(NodeIndex, SessionMessage)>,
    /// What this member sent in the current attempt and sends again on
    /// request, and what it received ([`recovery`]).
    recovery: recovery::Recovery,
}

/// The session of attempt `attempt` of the run with session `base`.
pub fn attempt_session(base: &[u8; 32], attempt: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/dkg-attempt/1");
    h.update(base);
    h.update(attempt.to_be_bytes());
    h.finalize().into()
}

/// SHA-256 of every group public polynomial of `output`, in threshold order.
pub fn keys_digest<S: Scheme>(output: &DkgOutput<S>) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/dkg-keys/1");
    for k in &output.keys {
        h.update(k.threshold.to_be_bytes());
        for p in k.public_polynomial.iter() {
            h.update(p.to_bytes());
        }
    }
    h.finalize().into()
}

/// Identifies a result `(QUAL, keys digest)` for counting votes.
fn result_id(qual: &[NodeIndex], digest: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update((qual.len() as u64).to_be_bytes());
    for d in qual {
        h.update(d.0.to_be_bytes());
    }
    h.update(digest);
    h.finalize().into()
}

/// The RNG seed of an attempt from a member's DKG seed and everything that
/// shapes the attempt's polynomials (its session, which names the run and
/// the attempt, the member count, the thresholds and the dealers): a member
/// that restarts with the same seed deals the same deal again, never a second
/// version, and no two runs share a coefficient.
fn attempt_seed(seed: &[u8; 32], config: &DkgConfig) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/dkg-attempt-seed/2");
    h.update(seed);
    h.update(config.session);
    h.update(config.n.to_be_bytes());
    h.update((config.thresholds.len() as u64).to_be_bytes());
    for t in &config.thresholds {
        h.update(t.to_be_bytes());
    }
    h.update((config.dealers.len() as u64).to_be_bytes());
    for d in &config.dealers {
        h.update(d.0.to_be_bytes());
    }
    h.finalize().into()
}

impl<S: Scheme> DkgSession<S> {
    /// Member `me` of the run `config`; `key` signs its broadcasts, `keys`
    /// are every member's public keys by index, `agreement` signs and checks
    /// the result votes. `seed` feeds the dealings.
    pub fn new(
        config: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
        agreement: AgreementKeys<S>,
    ) -> Result<Self, Error> {
        for listed in [keys.len(), agreement.members().n() as usize] {
            if listed != config.n as usize {
                return Err(Error::Dkg(DkgError::KeyCount {
                    keys: listed,
                    n: config.n,
                }));
            }
        }
        if keys.get(me.0 as usize) != Some(&key.verifying_key()) || !agreement.lists(me) {
            return Err(Error::Dkg(DkgError::SigningKeyMismatch { member: me }));
        }
        let dkg = Self::attempt_parts(&config, me, &seed, &memo, &key, &keys, 0)?;
        Ok(DkgSession {
            base: config,
            me,
            seed,
            memo,
            key,
            keys,
            agreement,
            state: State::Idle,
            attempt: 0,
            dkg,
            result: None,
            result_id: None,
            last_failure: None,
            votes: BTreeMap::new(),
            rejected: BTreeSet::new(),
            voted: Vec::new(),
            claims: BTreeMap::new(),
            tally: BTreeMap::new(),
            early: Vec::new(),
            recovery: recovery::Recovery::default(),
        })
    }

    /// The current attempt (0-based).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The run's configuration (the base session, not an attempt's).
    pub fn config(&self) -> &DkgConfig {
        &self.base
    }

    /// This member.
    pub fn me(&self) -> NodeIndex {
        self.me
    }

    /// What this member waits for, for logs: the attempt, the DKG's phase and
    /// what is in, or the agreement votes.
    pub fn progress(&self) -> String {
        let quorum = self.base.n - self.base.max_faulty;
        match (&self.result, &self.result_id) {
            (Some(_), Some(id)) => format!(
                "attempt {}: agreement, {}/{quorum} votes for this result ({} votes in)",
                self.attempt,
                self.tally.get(id).map_or(0, |t| t.count),
                self.votes.len()
            ),
            _ => format!("attempt {}: {}", self.attempt, self.dkg().progress()),
        }
    }

    /// The session of the current attempt.
    pub fn session(&self) -> [u8; 32] {
        self.dkg().config().session
    }

    /// Signs a broadcast of this member for the current attempt (as the relay
    /// would); for Byzantine wrappers that send versions of their own.
    pub fn sign_broadcast(&mut self, message: &DkgMessage<S>) -> Result<SessionMessage, Error> {
        Ok(SessionMessage::Relay {
            attempt: self.attempt,
            message: self.dkg.sign(message)?,
        })
    }

    /// A message from `from`: kept when it is early, else dispatched by kind.
    fn on_message(
        &mut self,
        now: Time,
        from: NodeIndex,
        message: SessionMessage,
        out: &mut Outbox<S>,
    ) {
        if from.0 >= self.base.n || from == self.me {
            return;
        }
        let attempt = message.attempt();
        if let SessionMessage::Certificate(c) = &message {
            if attempt < self.attempt {
                return self.roll_back(now, c.clone(), out);
            }
        }
        if attempt != self.attempt || self.state == State::Idle {
            let next = if self.state == State::Idle {
                self.attempt
            } else {
                self.attempt.saturating_add(1)
            };
            let room = EARLY_PER_MEMBER.saturating_mul(self.base.n as usize);
            if attempt == next && attempt < self.base.timing.max_attempts && self.early.len() < room
            {
                self.early.push((from, message));
            }
            return;
        }
        match message {
            SessionMessage::Relay { message, .. } => self.on_relay(now, from, message, out),
            SessionMessage::Shares { shares, .. } => self.on_shares(now, from, shares, out),
            SessionMessage::Request { .. } => {}
            SessionMessage::NoComplaint { .. } => self.on_no_complaint(now, from, out),
            SessionMessage::Result(vote) => self.on_vote(from, vote, out),
            SessionMessage::Certificate(c) => self.on_certificate(&c, out),
        }
    }

    /// Shares from dealer `from`, for the attempt's DKG; they may complete
    /// what an agreed result takes.
    fn on_shares(&mut self, now: Time, from: NodeIndex, shares: DealtShares, out: &mut Outbox<S>) {
        self.recovery.shares_from(from);
        self.run_dkg(
            now,
            DkgInput::Message {
                from,
                message: DkgMessage::Shares(shares),
            },
            out,
        );
        self.check_material(out);
    }

    /// `from` complains about no dealer (sent point to point, with a hub).
    fn on_no_complaint(&mut self, now: Time, from: NodeIndex, out: &mut Outbox<S>) {
        let complaint = Complaint {
            session: self.session(),
            from,
            dealers: Vec::new(),
        };
        let message = DkgMessage::Complaint(complaint);
        self.run_dkg(now, DkgInput::Message { from, message }, out);
    }

    /// Handles one input at `now`: dispatches it, then drains the loopback
    /// (early messages of an attempt that begins, a certificate this member
    /// rolled back to) through the same dispatcher.
    pub fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionOutput<S>> {
        let mut out = Outbox::new();
        out.loop_back(Step::Input(input));
        while let Some(step) = out.next_input() {
            match step {
                Step::Input(input) => self.dispatch(now, input, &mut out),
                Step::Certificate(c) => self.on_certificate(&c, &mut out),
                Step::AskMissing => {
                    let asks = self.request_missing();
                    out.extend(asks);
                }
            }
        }
        out.take()
    }

    /// The dispatcher of a session's inputs.
    fn dispatch(&mut self, now: Time, input: SessionInput, out: &mut Outbox<S>) {
        match input {
            SessionInput::Message {
                from,
                message: SessionMessage::Request { attempt, wants },
            } => self.on_request(now, from, attempt, wants, out),
            _ if self.state == State::Over => {}
            SessionInput::Start if self.state == State::Idle => self.begin(now, out),
            SessionInput::Start => {}
            SessionInput::Message { from, message } => self.on_message(now, from, message, out),
            SessionInput::Timer(SessionTimer::Phase { attempt, timer })
                if attempt == self.attempt && self.state == State::Running =>
            {
                out.extend(self.ask_at_phase_end());
                self.run_dkg(now, DkgInput::Timer(timer), out)
            }
            SessionInput::Timer(SessionTimer::EndOfAttempt { attempt })
                if attempt == self.attempt && self.state == State::Running =>
            {
                self.end_of_attempt(now, out)
            }
            SessionInput::Timer(_) => {}
        }
    }
}

impl<S: Scheme> SessionParticipant<S> for DkgSession<S> {
    fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionOutput<S>> {
        DkgSession::handle(self, now, input)
    }

    fn progress(&self) -> String {
        DkgSession::progress(self)
    }

    fn attempt(&self) -> u32 {
        self.attempt
    }
}

#[cfg(test)]
mod tests;
