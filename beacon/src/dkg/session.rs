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
//!    member key and sends it to everyone ([`SignedResult`]). It outputs its result
//!    ([`SessionAction::Complete`]) only once `n - f` members signed the same
//!    `(QUAL, digest)` as its own.
//! 3. **Rerun.** At `4 * phase` after the attempt began, a member with no such
//!    quorum starts attempt `a + 1` (a deterministic schedule: every member reruns
//!    at the same local time), until `max_attempts`; then it fails. A member that
//!    sees `n - f` signatures on a result other than its own fails at once: the
//!    honest members that output a key all output the same one.
//!
//! Messages of the next attempt that arrive early are kept (bounded) and handled
//! when it begins; messages of any other attempt are dropped.

use super::relay::{BroadcastRelay, RelayAction, RelayMessage, SigningKey, VerifyingKey};
use super::*;
use ed25519_dalek::Signer as _;

/// Domain separation of the agreement signatures.
const RESULT_DOMAIN: &[u8] = b"sbft-beacon/dkg-result/1";

/// Most messages of the next attempt kept per member of the network.
const EARLY_PER_MEMBER: usize = 64;

/// A member's signed statement of its DKG result in one attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedResult {
    /// The attempt.
    pub attempt: u32,
    /// The signer.
    pub from: NodeIndex,
    /// Its qualified dealers.
    pub qual: Vec<NodeIndex>,
    /// SHA-256 of its group public polynomials ([`keys_digest`]).
    pub keys_digest: [u8; 32],
    /// ed25519 signature over `(attempt session, from, qual, keys_digest)`.
    #[serde(with = "crate::wire::hex_bytes")]
    pub signature: Vec<u8>,
}

/// What travels between the sessions of members.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SessionMessage {
    /// A relay message (signed broadcasts, attestations, pulls).
    Relay {
        /// The attempt.
        attempt: u32,
        /// The message.
        message: RelayMessage,
    },
    /// A dealer's private shares for the recipient.
    Shares {
        /// The attempt.
        attempt: u32,
        /// The shares.
        shares: DealtShares,
    },
    /// A member's signed result.
    Result(SignedResult),
}

impl SessionMessage {
    /// The attempt the message belongs to.
    pub fn attempt(&self) -> u32 {
        match self {
            SessionMessage::Relay { attempt, .. } | SessionMessage::Shares { attempt, .. } => {
                *attempt
            }
            SessionMessage::Result(r) => r.attempt,
        }
    }

    /// Short name of the message kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionMessage::Relay {
                message: RelayMessage::Broadcast { .. },
                ..
            } => "dkg-broadcast",
            SessionMessage::Relay {
                message: RelayMessage::Summary { .. },
                ..
            } => "dkg-summary",
            SessionMessage::Relay {
                message: RelayMessage::PullVersions { .. },
                ..
            } => "dkg-pull-versions",
            SessionMessage::Relay {
                message: RelayMessage::Versions { .. },
                ..
            } => "dkg-versions",
            SessionMessage::Relay {
                message: RelayMessage::Pull { .. },
                ..
            } => "dkg-pull",
            SessionMessage::Shares { .. } => "dkg-shares",
            SessionMessage::Result(_) => "dkg-result",
        }
    }
}

/// Timers of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SessionTimer {
    /// A phase of an attempt's DKG ended.
    Phase {
        /// The attempt.
        attempt: u32,
        /// The phase timer.
        timer: DkgTimer,
    },
    /// The time for an attempt (and its agreement) is over.
    EndOfAttempt {
        /// The attempt.
        attempt: u32,
    },
}

/// Inputs of a session.
#[derive(Clone, Debug)]
pub enum SessionInput {
    /// Begin attempt 0.
    Start,
    /// A message from an authenticated peer.
    Message {
        /// The sender (as authenticated by the transport).
        from: NodeIndex,
        /// The message.
        message: SessionMessage,
    },
    /// A timer fired.
    Timer(SessionTimer),
}

/// Outputs of a session.
#[derive(Clone, Debug)]
pub enum SessionAction<S: Scheme> {
    /// Send to one member.
    Send {
        /// Recipient.
        to: NodeIndex,
        /// Message.
        message: SessionMessage,
    },
    /// Send to every other member.
    Broadcast(SessionMessage),
    /// Fire `timer` at `at`.
    SetTimer {
        /// When.
        at: Time,
        /// Which.
        timer: SessionTimer,
    },
    /// `n - f` members agree with this result: persist it and use it.
    Complete(Arc<DkgOutput<S>>),
    /// No agreement within the attempts (or a quorum agreed on another result).
    Failed(String),
}

/// Anything that can stand in a DKG session: the honest [`DkgSession`] or a
/// Byzantine wrapper around it.
pub trait SessionParticipant<S: Scheme>: Send {
    /// Handles one input at `now`.
    fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionAction<S>>;
    /// Whether this participant follows the protocol.
    fn is_honest(&self) -> bool {
        true
    }
    /// What it waits for, for logs (empty if it does not say).
    fn progress(&self) -> String {
        String::new()
    }
}

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
    state: State,
    attempt: u32,
    dkg: Dkg<S>,
    relay: BroadcastRelay,
    result: Option<Arc<DkgOutput<S>>>,
    /// [`result_id`] of `result`.
    result_id: Option<[u8; 32]>,
    last_failure: Option<String>,
    /// First valid signed result of each member in this attempt.
    votes: BTreeMap<NodeIndex, SignedResult>,
    /// Votes per result ([`result_id`]) in this attempt.
    tally: BTreeMap<[u8; 32], usize>,
    early: Vec<(NodeIndex, SessionMessage)>,
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

fn result_bytes(
    session: &[u8; 32],
    from: NodeIndex,
    qual: &[NodeIndex],
    digest: &[u8; 32],
) -> Vec<u8> {
    let mut m = RESULT_DOMAIN.to_vec();
    m.extend_from_slice(session);
    m.extend_from_slice(&from.0.to_be_bytes());
    m.extend_from_slice(&(qual.len() as u32).to_be_bytes());
    for d in qual {
        m.extend_from_slice(&d.0.to_be_bytes());
    }
    m.extend_from_slice(digest);
    m
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

/// The RNG seed of attempt `attempt` from a member's DKG seed.
fn attempt_seed(seed: &[u8; 32], attempt: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon/dkg-attempt-seed/1");
    h.update(seed);
    h.update(attempt.to_be_bytes());
    h.finalize().into()
}

impl<S: Scheme> DkgSession<S> {
    /// Member `me` of the run `config`; `key` signs its broadcasts and results,
    /// `keys` are every member's public keys by index. `seed` feeds the dealings.
    pub fn new(
        config: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
        key: SigningKey,
        keys: Arc<Vec<VerifyingKey>>,
    ) -> Result<Self, Error> {
        config.validate()?;
        if keys.len() != config.n as usize {
            return Err(Error::Dkg(format!(
                "{} member keys for n = {}",
                keys.len(),
                config.n
            )));
        }
        if keys.get(me.0 as usize) != Some(&key.verifying_key()) {
            return Err(Error::Dkg(format!(
                "member {}: the signing key does not match the listed public key",
                me.0
            )));
        }
        let (dkg, relay) = Self::attempt_parts(&config, me, &seed, &memo, &key, &keys, 0)?;
        Ok(DkgSession {
            base: config,
            me,
            seed,
            memo,
            key,
            keys,
            state: State::Idle,
            attempt: 0,
            dkg,
            relay,
            result: None,
            result_id: None,
            last_failure: None,
            votes: BTreeMap::new(),
            tally: BTreeMap::new(),
            early: Vec::new(),
        })
    }

    fn attempt_parts(
        base: &DkgConfig,
        me: NodeIndex,
        seed: &[u8; 32],
        memo: &Arc<Memo>,
        key: &SigningKey,
        keys: &Arc<Vec<VerifyingKey>>,
        attempt: u32,
    ) -> Result<(Dkg<S>, BroadcastRelay), Error> {
        let session = attempt_session(&base.session, attempt);
        let config = DkgConfig {
            session,
            phase_timeout_us: base.phase_timeout_us.saturating_mul(1 << attempt.min(16)),
            ..base.clone()
        };
        let dkg = Dkg::new(config, me, attempt_seed(seed, attempt), memo.clone())?.with_relay();
        let relay = BroadcastRelay::new(me, session, key.clone(), keys.clone(), memo.clone());
        Ok((dkg, relay))
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
                self.tally.get(id).copied().unwrap_or(0),
                self.votes.len()
            ),
            _ => format!("attempt {}: {}", self.attempt, self.dkg.progress()),
        }
    }

    /// The session of the current attempt.
    pub fn session(&self) -> [u8; 32] {
        self.dkg.config().session
    }

    /// Signs a broadcast of this member for the current attempt (as the relay
    /// would); for Byzantine wrappers that send versions of their own.
    pub fn sign_broadcast(&mut self, message: &DkgMessage<S>) -> Result<SessionMessage, Error> {
        Ok(SessionMessage::Relay {
            attempt: self.attempt,
            message: self.relay.sign(message)?,
        })
    }

    fn phase_us(&self) -> u64 {
        self.dkg.config().phase_timeout_us
    }

    fn begin(&mut self, now: Time, out: &mut Vec<SessionAction<S>>) {
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

    fn on_dkg(&mut self, now: Time, actions: Vec<DkgAction<S>>, out: &mut Vec<SessionAction<S>>) {
        let attempt = self.attempt;
        for action in actions {
            match action {
                DkgAction::Send {
                    to,
                    message: DkgMessage::Shares(shares),
                } => out.push(SessionAction::Send {
                    to,
                    message: SessionMessage::Shares { attempt, shares },
                }),
                // The DKG sends nothing else point to point.
                DkgAction::Send { .. } => {}
                DkgAction::Broadcast(message) => {
                    if let Ok(signed) = self.sign_broadcast(&message) {
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

    fn on_relay(
        &mut self,
        now: Time,
        actions: Vec<RelayAction<S>>,
        out: &mut Vec<SessionAction<S>>,
    ) {
        let attempt = self.attempt;
        for action in actions {
            match action {
                RelayAction::Deliver { origin, message } => {
                    let actions = self.dkg.handle(
                        now,
                        DkgInput::Message {
                            from: origin,
                            message,
                        },
                    );
                    self.on_dkg(now, actions, out);
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

    /// Step 2: sign and send this attempt's result.
    fn on_result(
        &mut self,
        _now: Time,
        output: Arc<DkgOutput<S>>,
        out: &mut Vec<SessionAction<S>>,
    ) {
        // Every member with this QUAL digests the same polynomials: once, when
        // the memo is shared (compressing thousands of points each time is not
        // free).
        let digest = match self.dkg.qual_digest(&output.qual) {
            Some(qual) => {
                let mut key = Sha256::new();
                key.update(b"sbft-beacon/dkg-keys-digest/1");
                key.update(qual);
                *self
                    .memo
                    .get_or_compute(key.finalize().into(), || keys_digest(&output))
            }
            None => keys_digest(&output),
        };
        let session = self.session();
        let signature = self
            .key
            .sign(&result_bytes(&session, self.me, &output.qual, &digest))
            .to_bytes()
            .to_vec();
        let vote = SignedResult {
            attempt: self.attempt,
            from: self.me,
            qual: output.qual.clone(),
            keys_digest: digest,
            signature,
        };
        self.result_id = Some(result_id(&output.qual, &digest));
        self.result = Some(output);
        self.record(vote.clone());
        out.push(SessionAction::Broadcast(SessionMessage::Result(vote)));
        self.check_quorum(out);
    }

    fn on_vote(&mut self, from: NodeIndex, vote: SignedResult, out: &mut Vec<SessionAction<S>>) {
        if vote.from != from || from.0 >= self.base.n || self.votes.contains_key(&from) {
            return;
        }
        let bytes = result_bytes(&self.session(), from, &vote.qual, &vote.keys_digest);
        if !super::relay::verify(
            &self.memo,
            &self.keys[from.0 as usize],
            &bytes,
            &vote.signature,
        ) {
            return;
        }
        self.record(vote);
        self.check_quorum(out);
    }

    fn record(&mut self, vote: SignedResult) {
        *self
            .tally
            .entry(result_id(&vote.qual, &vote.keys_digest))
            .or_default() += 1;
        self.votes.insert(vote.from, vote);
    }

    fn check_quorum(&mut self, out: &mut Vec<SessionAction<S>>) {
        let quorum = (self.base.n - self.base.max_faulty) as usize;
        if let (Some(mine), Some(id)) = (&self.result, &self.result_id) {
            if self.tally.get(id).copied().unwrap_or(0) >= quorum {
                let output = DkgOutput {
                    session: self.base.session,
                    ..(**mine).clone()
                };
                self.state = State::Over;
                out.push(SessionAction::Complete(Arc::new(output)));
                return;
            }
        }
        // Only a member whose own attempt is over (with another result, or none)
        // gives up; one that has not finalized yet may still match the quorum.
        let finished = self.result.is_some() || self.last_failure.is_some();
        let other = self.tally.values().any(|c| *c >= quorum);
        if finished && other {
            self.state = State::Over;
            out.push(SessionAction::Failed(format!(
                "attempt {}: n - f members agreed on a result this member does not hold",
                self.attempt
            )));
        }
    }

    /// Step 3: rerun, or give up.
    fn end_of_attempt(&mut self, now: Time, out: &mut Vec<SessionAction<S>>) {
        let next = self.attempt + 1;
        if next >= self.base.max_attempts {
            self.state = State::Over;
            let why = self
                .last_failure
                .clone()
                .unwrap_or_else(|| "no n - f members signed the same result".into());
            out.push(SessionAction::Failed(format!(
                "no agreement after {next} attempts (last: {why})"
            )));
            return;
        }
        let parts = Self::attempt_parts(
            &self.base, self.me, &self.seed, &self.memo, &self.key, &self.keys, next,
        );
        let Ok((dkg, relay)) = parts else {
            self.state = State::Over;
            out.push(SessionAction::Failed(
                "cannot start the next attempt".into(),
            ));
            return;
        };
        self.attempt = next;
        self.dkg = dkg;
        self.relay = relay;
        self.result = None;
        self.result_id = None;
        self.last_failure = None;
        self.votes.clear();
        self.tally.clear();
        self.begin(now, out);
    }

    fn on_message(
        &mut self,
        now: Time,
        from: NodeIndex,
        message: SessionMessage,
        out: &mut Vec<SessionAction<S>>,
    ) {
        if from.0 >= self.base.n || from == self.me {
            return;
        }
        let attempt = message.attempt();
        if attempt != self.attempt || self.state == State::Idle {
            let next = if self.state == State::Idle {
                self.attempt
            } else {
                self.attempt.saturating_add(1)
            };
            let room = EARLY_PER_MEMBER.saturating_mul(self.base.n as usize);
            if attempt == next && attempt < self.base.max_attempts && self.early.len() < room {
                self.early.push((from, message));
            }
            return;
        }
        match message {
            SessionMessage::Relay { message, .. } => {
                if let Ok(actions) = self.relay.receive::<S>(from, message) {
                    self.on_relay(now, actions, out);
                }
            }
            SessionMessage::Shares { shares, .. } => {
                let actions = self.dkg.handle(
                    now,
                    DkgInput::Message {
                        from,
                        message: DkgMessage::Shares(shares),
                    },
                );
                self.on_dkg(now, actions, out);
            }
            SessionMessage::Result(vote) => self.on_vote(from, vote, out),
        }
    }

    /// Handles one input at `now`.
    pub fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionAction<S>> {
        let mut out = Vec::new();
        if self.state == State::Over {
            return out;
        }
        match input {
            SessionInput::Start if self.state == State::Idle => self.begin(now, &mut out),
            SessionInput::Start => {}
            SessionInput::Message { from, message } => {
                self.on_message(now, from, message, &mut out)
            }
            SessionInput::Timer(SessionTimer::Phase { attempt, timer })
                if attempt == self.attempt && self.state == State::Running =>
            {
                let actions = self.dkg.handle(now, DkgInput::Timer(timer));
                self.on_dkg(now, actions, &mut out);
            }
            SessionInput::Timer(SessionTimer::EndOfAttempt { attempt })
                if attempt == self.attempt && self.state == State::Running =>
            {
                self.end_of_attempt(now, &mut out)
            }
            SessionInput::Timer(_) => {}
        }
        out
    }
}

impl<S: Scheme> SessionParticipant<S> for DkgSession<S> {
    fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionAction<S>> {
        DkgSession::handle(self, now, input)
    }

    fn progress(&self) -> String {
        DkgSession::progress(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheme::MinSig;

    /// Runs `n` honest sessions with zero latency; member `i` starts at
    /// `starts[i]`. Returns each member's last terminal action.
    fn run(n: u32, starts: &[u64]) -> Vec<Option<Result<Arc<DkgOutput<MinSig>>, String>>> {
        let f = (n - 1) / 3;
        let config = DkgConfig {
            session: [9; 32],
            n,
            thresholds: vec![f + 1],
            dealers: Vec::new(),
            phase_timeout_us: 1_000,
            min_qualified: f + 1,
            max_faulty: f,
            max_attempts: 2,
        };
        let secrets: Vec<SigningKey> = (0..n)
            .map(|i| SigningKey::from_bytes(&[i as u8 + 1; 32]))
            .collect();
        let keys = Arc::new(
            secrets
                .iter()
                .map(|k| k.verifying_key())
                .collect::<Vec<_>>(),
        );
        let memo = Memo::disabled();
        let mut members: Vec<DkgSession<MinSig>> = (0..n)
            .map(|i| {
                DkgSession::new(
                    config.clone(),
                    NodeIndex(i),
                    [i as u8; 32],
                    memo.clone(),
                    secrets[i as usize].clone(),
                    keys.clone(),
                )
                .unwrap()
            })
            .collect();
        let mut results = vec![None; n as usize];
        let mut timers: BTreeMap<(Time, u64), (u32, SessionInput)> = BTreeMap::new();
        let mut seq = 0;
        for (i, at) in starts.iter().enumerate() {
            seq += 1;
            timers.insert((Time(*at), seq), (i as u32, SessionInput::Start));
        }
        let mut now = Time::ZERO;
        let mut queue: std::collections::VecDeque<(u32, SessionInput)> = Default::default();
        loop {
            while let Some((who, input)) = queue.pop_front() {
                for action in members[who as usize].handle(now, input) {
                    match action {
                        SessionAction::Send { to, message } => queue.push_back((
                            to.0,
                            SessionInput::Message {
                                from: NodeIndex(who),
                                message,
                            },
                        )),
                        SessionAction::Broadcast(message) => {
                            for j in (0..n).filter(|j| *j != who) {
                                queue.push_back((
                                    j,
                                    SessionInput::Message {
                                        from: NodeIndex(who),
                                        message: message.clone(),
                                    },
                                ));
                            }
                        }
                        SessionAction::SetTimer { at, timer } => {
                            seq += 1;
                            timers.insert((at, seq), (who, SessionInput::Timer(timer)));
                        }
                        SessionAction::Complete(out) => results[who as usize] = Some(Ok(out)),
                        SessionAction::Failed(e) => results[who as usize] = Some(Err(e)),
                    }
                }
            }
            let Some(((at, _), (who, input))) = timers.pop_first() else {
                break;
            };
            now = at;
            queue.push_back((who, input));
        }
        results
    }

    #[test]
    fn honest_sessions_agree() {
        let results = run(4, &[0, 0, 0, 0]);
        let keys: Vec<_> = results
            .iter()
            .map(|r| r.clone().unwrap().unwrap().keys[0].group_key().to_bytes())
            .collect();
        assert!(keys.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(results[0].clone().unwrap().unwrap().session, [9; 32]);
    }

    /// A member that starts late sees the quorum form before it finalizes: it
    /// must wait for its own result, not give up.
    #[test]
    fn a_late_member_still_completes_with_the_quorum() {
        let results = run(4, &[0, 0, 0, 400]);
        for (i, r) in results.iter().enumerate() {
            assert!(matches!(r, Some(Ok(_))), "member {i}: {r:?}");
        }
    }

    #[test]
    fn attempts_have_distinct_sessions() {
        assert_ne!(attempt_session(&[1; 32], 0), attempt_session(&[1; 32], 1));
        assert_ne!(attempt_session(&[1; 32], 0), [1; 32]);
    }
}
