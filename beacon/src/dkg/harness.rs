//! An in-memory harness that runs a whole DKG: `n` participants, messages
//! delivered one at a time in an order drawn from a seeded RNG, timers fired when
//! no message is in flight (a synchronous network). Used by the tests, by
//! `sbft-beacon bench dkg`, and by the simulator's set-up; Byzantine dealers are
//! swappable [`DkgParticipant`] implementations wrapping an honest [`Dkg`].

use super::relay::{SigningKey, VerifyingKey};
use super::session::{
    DkgSession, SessionAction, SessionInput, SessionMessage, SessionParticipant, SessionTimer,
};
use super::*;
use crate::schedule::EventQueue;
use rand_core::RngCore;
use std::time::{Duration, Instant};

/// Anything that can stand in a DKG: the honest [`Dkg`] or a Byzantine wrapper.
pub trait DkgParticipant<S: Scheme>: Send {
    /// Handles one input (see [`Dkg::handle`]).
    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>>;
    /// The phase of the honest machine inside, if any (for CPU accounting).
    fn phase(&self) -> Option<DkgPhase> {
        None
    }
}

impl<S: Scheme> DkgParticipant<S> for Dkg<S> {
    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>> {
        Dkg::handle(self, now, input)
    }

    fn phase(&self) -> Option<DkgPhase> {
        Some(Dkg::phase(self))
    }
}

/// Ways a Byzantine dealer misbehaves (each wraps an honest [`Dkg`] and rewrites
/// its outputs; the honest code has no flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DealerFault {
    /// Wrong shares to `victims`, and no answer to their complaints.
    BadShares {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Wrong shares to `victims`, then the correct shares revealed: stays qualified.
    BadSharesThenJustified {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Wrong shares to `victims`, then wrong shares revealed.
    InvalidJustification {
        /// Recipients of wrong shares.
        victims: Vec<NodeIndex>,
    },
    /// Commitments one coefficient short.
    WrongDegree,
    /// Shares of a second polynomial to every odd member, and a justification
    /// revealing that polynomial's shares.
    Equivocate,
    /// Sends nothing at all.
    Silent,
    /// Correct shares to `victims`, but not the ones its deal's share root
    /// commits to (a wrong salt): they complain, and it reveals the shares.
    UncommittedShares {
        /// Recipients of the uncommitted shares.
        victims: Vec<NodeIndex>,
    },
    /// Commitments of its largest threshold carry a component of small order
    /// `l` (outside the prime-order subgroup), chosen so that it vanishes at
    /// every other member's point: every share check passes, and only a
    /// subgroup check sees it. Needs a threshold of at least `n`.
    OffGroupCommitments,
}

/// `coefficients * points` mod `l` for small `l`: the integer of a scalar
/// (its canonical representative) reduced mod `l`.
fn residue(x: &Scalar, l: u32) -> u32 {
    x.to_bytes_be()
        .iter()
        .fold(0, |acc, b| (acc * 256 + u32::from(*b)) % l)
}

/// A non-zero `c` with `rows * c = 0` over GF(`l`) (`l` prime), if one exists.
fn null_vector(mut rows: Vec<Vec<u32>>, width: usize, l: u32) -> Option<Vec<u32>> {
    let inverse = |a: u32| (1..l).find(|b| a * b % l == 1).unwrap_or(0);
    let mut pivots = Vec::new();
    let mut r = 0;
    for col in 0..width {
        let Some(p) = (r..rows.len()).find(|&i| rows[i][col] % l != 0) else {
            continue;
        };
        rows.swap(r, p);
        let inv = inverse(rows[r][col]);
        for v in rows[r].iter_mut() {
            *v = *v * inv % l;
        }
        let pivot = rows[r].clone();
        for (i, row) in rows.iter_mut().enumerate() {
            let factor = row[col];
            if i != r && factor != 0 {
                for (v, p) in row.iter_mut().zip(&pivot) {
                    *v = (*v + (l - factor) * p) % l;
                }
            }
        }
        pivots.push(col);
        r += 1;
    }
    let free = (0..width).find(|c| !pivots.contains(c))?;
    let mut x = vec![0; width];
    x[free] = 1;
    for (row, &col) in pivots.iter().enumerate() {
        x[col] = (l - rows[row][free]) % l;
    }
    Some(x)
}

impl<S: Scheme> ByzantineDealer<S> {
    /// `deal` with a small-order component added to the commitments of its
    /// largest threshold that every other member's share check misses.
    fn hide_small_order_component(&self, deal: &Deal<S>) -> Option<Deal<S>> {
        let (torsion, l) = S::PublicKey::small_order_point()?;
        let (k, t) = self
            .inner
            .config
            .thresholds
            .iter()
            .enumerate()
            .max_by_key(|(_, t)| **t)?;
        let rows: Vec<Vec<u32>> = (0..self.inner.config.n)
            .filter(|j| *j != self.inner.me.0)
            .map(|j| {
                let x = self.inner.domain.point(NodeIndex(j)).ok()?;
                let mut power = Scalar::one();
                Some(
                    (0..*t)
                        .map(|_| {
                            let r = residue(&power, l);
                            power *= x;
                            r
                        })
                        .collect(),
                )
            })
            .collect::<Option<_>>()?;
        let c = null_vector(rows, *t as usize, l)?;
        let mut commitments = deal.commitments.clone();
        for (point, times) in commitments[k].iter_mut().zip(c) {
            for _ in 0..times {
                *point = point.add(&torsion);
            }
        }
        Some(Deal::new(
            deal.session,
            deal.dealer,
            commitments,
            deal.share_root,
        ))
    }
}

/// A Byzantine dealer: an honest [`Dkg`] whose outputs are rewritten.
pub struct ByzantineDealer<S: Scheme> {
    inner: Dkg<S>,
    fault: DealerFault,
}

impl<S: Scheme> ByzantineDealer<S> {
    /// Wraps `inner` with `fault`.
    pub fn new(inner: Dkg<S>, fault: DealerFault) -> Self {
        ByzantineDealer { inner, fault }
    }

    fn victims(&self) -> Option<&[NodeIndex]> {
        match &self.fault {
            DealerFault::BadShares { victims }
            | DealerFault::BadSharesThenJustified { victims }
            | DealerFault::InvalidJustification { victims }
            | DealerFault::UncommittedShares { victims } => Some(victims),
            _ => None,
        }
    }

    fn is_victim(&self, who: NodeIndex) -> bool {
        match &self.fault {
            DealerFault::Equivocate => who.0 % 2 == 1,
            _ => self.victims().is_some_and(|v| v.contains(&who)),
        }
    }

    fn corrupt(shares: &[Scalar]) -> Vec<Scalar> {
        shares.iter().map(|s| *s + Scalar::from_u64(1)).collect()
    }
}

impl<S: Scheme> DkgParticipant<S> for ByzantineDealer<S> {
    fn phase(&self) -> Option<DkgPhase> {
        Some(self.inner.phase())
    }

    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>> {
        let actions = self.inner.handle(now, input);
        let mut out = Vec::with_capacity(actions.len());
        for action in actions {
            match (&self.fault, action) {
                (DealerFault::Silent, a @ DkgAction::SetTimer { .. }) => out.push(a),
                (DealerFault::Silent, DkgAction::Complete(_) | DkgAction::Failed(_)) => {}
                (DealerFault::Silent, _) => {}
                (DealerFault::OffGroupCommitments, DkgAction::Broadcast(DkgMessage::Deal(d))) => {
                    let bad = self
                        .hide_small_order_component(&d)
                        .expect("a group with small-order points and a threshold of n");
                    out.push(DkgAction::Broadcast(DkgMessage::Deal(Arc::new(bad))));
                }
                (DealerFault::WrongDegree, DkgAction::Broadcast(DkgMessage::Deal(d))) => {
                    let mut commitments = d.commitments.clone();
                    for c in &mut commitments {
                        c.pop();
                    }
                    let bad = Deal::new(d.session, d.dealer, commitments, d.share_root);
                    out.push(DkgAction::Broadcast(DkgMessage::Deal(Arc::new(bad))));
                }
                (
                    DealerFault::UncommittedShares { .. },
                    DkgAction::Send {
                        to,
                        message: DkgMessage::Shares(mut s),
                    },
                ) if self.is_victim(to) => {
                    s.salt[0] ^= 1;
                    out.push(DkgAction::Send {
                        to,
                        message: DkgMessage::Shares(s),
                    });
                }
                (
                    _,
                    DkgAction::Send {
                        to,
                        message: DkgMessage::Shares(mut s),
                    },
                ) if self.is_victim(to) => {
                    s.shares = Self::corrupt(&s.shares);
                    out.push(DkgAction::Send {
                        to,
                        message: DkgMessage::Shares(s),
                    });
                }
                (
                    DealerFault::BadShares { .. },
                    DkgAction::Broadcast(DkgMessage::Justification(_)),
                ) => {}
                (
                    DealerFault::InvalidJustification { .. } | DealerFault::Equivocate,
                    DkgAction::Broadcast(DkgMessage::Justification(j)),
                ) => {
                    let revealed = j
                        .revealed
                        .iter()
                        .map(|(r, s)| (*r, Self::corrupt(s)))
                        .collect();
                    let bad = Justification {
                        session: j.session,
                        dealer: j.dealer,
                        revealed,
                    };
                    out.push(DkgAction::Broadcast(DkgMessage::Justification(Arc::new(
                        bad,
                    ))));
                }
                (_, a) => out.push(a),
            }
        }
        out
    }
}

/// Network-level misbehaviour injected by the harness itself.
#[derive(Clone, Debug, Default)]
pub struct Disturbances {
    /// Deliver every message twice.
    pub duplicate_all: bool,
    /// Also deliver, for every message, a copy claiming to come from a non-member.
    pub from_non_members: bool,
    /// Also deliver replays of every message under another session id.
    pub replay_other_session: bool,
}

/// What a harness run produced.
pub struct DkgRun<S: Scheme> {
    /// Per member: its output, or its failure, or `None` if it produced neither.
    pub results: Vec<Option<Result<Arc<DkgOutput<S>>, String>>>,
    /// Virtual time of the last result (messages take no time: an honest run
    /// ends at zero, one that waits for silent members at its timeouts).
    pub finished_at: Time,
    /// Bytes each member sent (wire encoding; a broadcast counts once per recipient).
    pub bytes_sent: Vec<u64>,
    /// CPU time each member spent in `handle`, plus what shared computations would
    /// have cost it.
    pub cpu: Vec<Duration>,
    /// CPU time per phase (deal = start, verify = the input that ends the deal
    /// phase, finalize = the rest), summed over members.
    pub phase_cpu: [Duration; 3],
    /// Messages delivered.
    pub messages: u64,
}

/// Runs `participants` (member `i` at index `i`) to completion.
pub fn run<S: Scheme>(
    mut participants: Vec<Box<dyn DkgParticipant<S>>>,
    seed: u64,
    disturbances: &Disturbances,
) -> DkgRun<S> {
    let n = participants.len();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut queue: Vec<(NodeIndex, NodeIndex, DkgMessage<S>)> = Vec::new();
    let mut timers: EventQueue<(NodeIndex, DkgTimer)> = EventQueue::new();
    let mut results: Vec<Option<Result<Arc<DkgOutput<S>>, String>>> = vec![None; n];
    let mut bytes_sent = vec![0u64; n];
    let mut cpu = vec![Duration::ZERO; n];
    let mut phase_cpu = [Duration::ZERO; 3];
    let mut messages = 0u64;
    let mut now = Time::ZERO;
    let mut finished_at = Time::ZERO;
    let _ = crate::memo::take_charged_time();

    let mut pending: Vec<(NodeIndex, DkgInput<S>)> = (0..n as u32)
        .map(|i| (NodeIndex(i), DkgInput::Start))
        .collect();
    loop {
        for (who, input) in pending.drain(..) {
            let participant = &mut participants[who.0 as usize];
            let before = participant.phase();
            let start_input = matches!(input, DkgInput::Start);
            let end_of_deal = matches!(input, DkgInput::Timer(DkgTimer::EndOfDeal));
            let start = Instant::now();
            let actions = participant.handle(now, input);
            let spent = start.elapsed() + crate::memo::take_charged_time();
            let after = participant.phase();
            let phase = match (before, after) {
                _ if start_input => 0,
                (Some(DkgPhase::Dealing), Some(p)) if p != DkgPhase::Dealing => 1,
                (None, None) if end_of_deal => 1,
                _ => 2,
            };
            cpu[who.0 as usize] += spent;
            phase_cpu[phase] += spent;
            for action in actions {
                match action {
                    DkgAction::Send { to, message } => {
                        bytes_sent[who.0 as usize] += encoded_len(&message);
                        queue.push((who, to, message));
                    }
                    DkgAction::Broadcast(message) => {
                        bytes_sent[who.0 as usize] += encoded_len(&message) * (n as u64 - 1);
                        for j in (0..n as u32).filter(|j| *j != who.0) {
                            queue.push((who, NodeIndex(j), message.clone()));
                        }
                    }
                    DkgAction::SetTimer { at, timer } => timers.push(at, (who, timer)),
                    DkgAction::Complete(out) => {
                        results[who.0 as usize] = Some(Ok(out));
                        finished_at = now;
                    }
                    DkgAction::Failed(e) => {
                        results[who.0 as usize] = Some(Err(e));
                        finished_at = now;
                    }
                    // No relay here: broadcasts are consistent by construction.
                    DkgAction::Announce(_) => {}
                }
            }
        }
        if !queue.is_empty() {
            let i = (rng.next_u64() % queue.len() as u64) as usize;
            let (from, to, message) = queue.swap_remove(i);
            messages += 1;
            if disturbances.from_non_members {
                pending.push((
                    to,
                    DkgInput::Message {
                        from: NodeIndex(n as u32 + 7),
                        message: message.clone(),
                    },
                ));
            }
            if disturbances.replay_other_session {
                pending.push((
                    to,
                    DkgInput::Message {
                        from,
                        message: other_session(&message),
                    },
                ));
            }
            if disturbances.duplicate_all {
                pending.push((
                    to,
                    DkgInput::Message {
                        from,
                        message: message.clone(),
                    },
                ));
            }
            pending.push((to, DkgInput::Message { from, message }));
            continue;
        }
        let Some((at, (who, timer))) = timers.pop() else {
            break;
        };
        now = now.max(at);
        pending.push((who, DkgInput::Timer(timer)));
    }
    DkgRun {
        results,
        finished_at,
        bytes_sent,
        cpu,
        phase_cpu,
        messages,
    }
}

/// Wire size of a message (broadcast deals are measured once, not per recipient).
fn encoded_len<S: Scheme>(message: &DkgMessage<S>) -> u64 {
    message.encode().map(|b| b.len() as u64).unwrap_or(0)
}

/// The same message under another session (a replay from another run).
pub(crate) fn other_session<S: Scheme>(message: &DkgMessage<S>) -> DkgMessage<S> {
    let flip = |s: [u8; 32]| {
        let mut s = s;
        s[0] ^= 0xff;
        s
    };
    match message {
        DkgMessage::Deal(d) => DkgMessage::Deal(Arc::new(Deal::new(
            flip(d.session),
            d.dealer,
            d.commitments.clone(),
            d.share_root,
        ))),
        DkgMessage::Shares(s) => DkgMessage::Shares(DealtShares {
            session: flip(s.session),
            ..s.clone()
        }),
        DkgMessage::Complaint(c) => DkgMessage::Complaint(Complaint {
            session: flip(c.session),
            ..c.clone()
        }),
        DkgMessage::Justification(j) => DkgMessage::Justification(Arc::new(Justification {
            session: flip(j.session),
            ..(**j).clone()
        })),
    }
}

/// Honest participants for `config`, seeds derived from `seed`.
pub fn honest<S: Scheme>(
    config: &DkgConfig,
    seed: u64,
    memo: &Arc<Memo>,
) -> Result<Vec<Box<dyn DkgParticipant<S>>>, Error> {
    (0..config.n)
        .map(|i| {
            let dkg = Dkg::<S>::new(
                config.clone(),
                NodeIndex(i),
                member_seed(seed, i),
                memo.clone(),
            )?;
            Ok(Box::new(dkg) as Box<dyn DkgParticipant<S>>)
        })
        .collect()
}

/// The RNG seed of member `i` in a run seeded with `seed`.
pub fn member_seed(seed: u64, i: u32) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"sbft-beacon dkg member seed");
    h.update(seed.to_be_bytes());
    h.update(i.to_be_bytes());
    h.finalize().into()
}

/// What a run of whole sessions ([`run_sessions`]) produced.
pub struct SessionRun<S: Scheme> {
    /// Per member: its output, its failure, or `None`.
    pub results: Vec<Option<Result<Arc<DkgOutput<S>>, String>>>,
    /// Virtual time of the last result.
    pub finished_at: Time,
    /// Messages and wire bytes sent, by kind ([`SessionMessage::kind`]); a
    /// broadcast counts once per recipient.
    pub traffic: BTreeMap<&'static str, (u64, u64)>,
    /// CPU time each member spent, shared computations included.
    pub cpu: Vec<Duration>,
}

/// The member keys of `n` members, member `i`'s from the 32 bytes `seed_of(i)`,
/// and the verifying keys everyone holds.
pub fn member_keys(
    n: u32,
    seed_of: impl Fn(u32) -> [u8; 32],
) -> (Vec<SigningKey>, Arc<Vec<VerifyingKey>>) {
    let secrets: Vec<SigningKey> = (0..n)
        .map(|i| SigningKey::from_bytes(&seed_of(i)))
        .collect();
    let keys = secrets.iter().map(SigningKey::verifying_key).collect();
    (secrets, Arc::new(keys))
}

/// Honest sessions for `config`, member keys and seeds derived from `seed`.
pub fn honest_sessions<S: Scheme>(
    config: &DkgConfig,
    seed: u64,
    memo: &Arc<Memo>,
) -> Result<Vec<Box<dyn SessionParticipant<S>>>, Error> {
    let (secrets, keys) = member_keys(config.n, |i| member_seed(seed ^ 0x6b65_7973, i));
    secrets
        .into_iter()
        .enumerate()
        .map(|(i, key)| {
            let s = DkgSession::<S>::new(
                config.clone(),
                NodeIndex(i as u32),
                member_seed(seed, i as u32),
                memo.clone(),
                key,
                keys.clone(),
            )?;
            Ok(Box::new(s) as Box<dyn SessionParticipant<S>>)
        })
        .collect()
}

/// The order in which [`run_sessions`] delivers messages in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// In the order sent: every link has the same latency.
    Fifo,
    /// In an order drawn from the seed: any message may overtake any other.
    Random,
}

/// Runs whole sessions (relay, attempts, agreement) to completion over a
/// network that delivers one message at a time, in `delivery` order, and fires
/// timers only when nothing is in flight. Counts the traffic by kind.
pub fn run_sessions<S: Scheme>(
    mut members: Vec<Box<dyn SessionParticipant<S>>>,
    seed: u64,
    delivery: Delivery,
) -> SessionRun<S> {
    let n = members.len();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut queue: std::collections::VecDeque<(u32, u32, SessionMessage)> = Default::default();
    let mut timers: EventQueue<(u32, SessionTimer)> = EventQueue::new();
    let mut results = vec![None; n];
    let mut traffic: BTreeMap<&'static str, (u64, u64)> = BTreeMap::new();
    let mut cpu = vec![Duration::ZERO; n];
    let mut now = Time::ZERO;
    let mut finished_at = Time::ZERO;
    let _ = crate::memo::take_charged_time();
    let mut pending: Vec<(u32, SessionInput)> =
        (0..n as u32).map(|i| (i, SessionInput::Start)).collect();
    loop {
        for (who, input) in pending.drain(..) {
            let start = Instant::now();
            let actions = members[who as usize].handle(now, input);
            cpu[who as usize] += start.elapsed() + crate::memo::take_charged_time();
            for action in actions {
                let mut count = |m: &SessionMessage, copies: u64| {
                    let bytes = wire::encode(m).map_or(0, |b| b.len() as u64);
                    let t = traffic.entry(m.kind()).or_default();
                    t.0 += copies;
                    t.1 += bytes * copies;
                };
                match action {
                    SessionAction::Send { to, message } => {
                        count(&message, 1);
                        queue.push_back((who, to.0, message));
                    }
                    SessionAction::Broadcast(message) => {
                        count(&message, n as u64 - 1);
                        for j in (0..n as u32).filter(|j| *j != who) {
                            queue.push_back((who, j, message.clone()));
                        }
                    }
                    SessionAction::SetTimer { at, timer } => timers.push(at, (who, timer)),
                    SessionAction::Complete(out) => {
                        results[who as usize] = Some(Ok(out));
                        finished_at = now;
                    }
                    SessionAction::Failed(e) => {
                        results[who as usize] = Some(Err(e));
                        finished_at = now;
                    }
                }
            }
        }
        let next = match delivery {
            Delivery::Fifo => queue.pop_front(),
            Delivery::Random if !queue.is_empty() => {
                let i = (rng.next_u64() % queue.len() as u64) as usize;
                queue.swap_remove_back(i)
            }
            Delivery::Random => None,
        };
        if let Some((from, to, message)) = next {
            pending.push((
                to,
                SessionInput::Message {
                    from: NodeIndex(from),
                    message,
                },
            ));
            continue;
        }
        let Some((at, (who, timer))) = timers.pop() else {
            break;
        };
        now = now.max(at);
        pending.push((who, SessionInput::Timer(timer)));
    }
    SessionRun {
        results,
        finished_at,
        traffic,
        cpu,
    }
}
