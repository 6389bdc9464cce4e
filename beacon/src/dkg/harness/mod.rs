//! The one in-memory harness of the phase machines (the DKG and the
//! resharing), and runs of whole DKG sessions: `n` participants, messages
//! delivered one at a time in an order drawn from a seeded RNG, timers fired when
//! no message is in flight (a synchronous network). Used by the tests, by
//! `sbft-beacon bench dkg`, and by the simulator's set-up; Byzantine dealers are
//! swappable [`Participant`] implementations wrapping an honest machine
//! (the resharing's are in [`crate::reshare::harness`]).
//!
//! - this file: the participant interface and one run of bare phase machines;
//! - `dealer.rs`: Byzantine dealers ([`DealerFault`], [`ByzantineDealer`]);
//! - `sessions.rs`: runs of whole DKG sessions (relay and agreement included).

mod dealer;
mod sessions;

pub use dealer::{ByzantineDealer, DealerFault};
pub use sessions::*;

use crate::dkg::{
    Complaint, Deal, DealtShares, Dkg, DkgConfig, DkgFailure, DkgInput, DkgMessage, DkgOutput,
    DkgPhase, DkgTimer, Justification, PhaseMachine, PhaseOutput, Sharing,
};
#[cfg(test)]
use crate::dkg::{Disqualification, Verdicts};
use crate::effect::Effect;
use crate::memo::Memo;
use crate::schedule::EventQueue;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, Time};
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use rand_core::SeedableRng;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Anything that can stand in a run of a phase machine with output `O`: the
/// honest [`PhaseMachine`] or a Byzantine wrapper.
pub trait Participant<S: Scheme, O>: Send {
    /// Handles one input (see [`PhaseMachine::handle`]).
    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<PhaseOutput<S, O>>;
    /// The phase of the honest machine inside, if any (for CPU accounting).
    fn phase(&self) -> Option<DkgPhase> {
        None
    }
}

impl<S: Scheme, P: Sharing<S>> Participant<S, P::Output> for PhaseMachine<S, P> {
    fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<PhaseOutput<S, P::Output>> {
        PhaseMachine::handle(self, now, input)
    }

    fn phase(&self) -> Option<DkgPhase> {
        Some(PhaseMachine::phase(self))
    }
}

/// A participant of a DKG: the honest [`Dkg`] or a Byzantine wrapper.
pub type DkgParticipant<S> = dyn Participant<S, DkgOutput<S>>;

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

impl Disturbances {
    /// Every disturbance at once.
    pub fn all() -> Self {
        Disturbances {
            duplicate_all: true,
            from_non_members: true,
            replay_other_session: true,
        }
    }
}

/// Asserts that `verdicts` are the ones a run of `dealers` dealers (`0..dealers`)
/// must reach with the Byzantine dealers of `byzantine`: each row a dealer, its
/// fault, and the reason it is excluded for (`None`: it stays qualified). The
/// rows are in ascending dealer order, as a run lists its exclusions; every
/// other dealer is qualified.
#[cfg(test)]
pub(crate) fn assert_verdicts<F>(
    verdicts: &Verdicts,
    dealers: u32,
    byzantine: &[(u32, F, Option<Disqualification>)],
) {
    let excluded: Vec<(NodeIndex, Disqualification)> = byzantine
        .iter()
        .filter_map(|(d, _, why)| Some((NodeIndex(*d), (*why)?)))
        .collect();
    let qual: Vec<NodeIndex> = (0..dealers)
        .map(NodeIndex)
        .filter(|d| excluded.iter().all(|(x, _)| x != d))
        .collect();
    assert_eq!(verdicts.disqualified, excluded, "excluded dealers");
    assert_eq!(verdicts.qual, qual, "qualified dealers");
}

/// What a harness run produced.
pub struct MachineRun<O> {
    /// Per participant: its output, or its failure, or `None` if it produced
    /// neither.
    pub results: Vec<Option<Result<Arc<O>, DkgFailure>>>,
    /// Virtual time of the last result (messages take no time: an honest run
    /// ends at zero, one that waits for silent members at its timeouts).
    pub finished_at: Time,
    /// Bytes each participant sent (wire encoding; a broadcast counts once per
    /// recipient).
    pub bytes_sent: Vec<u64>,
    /// CPU time each participant spent in `handle`, plus what shared
    /// computations would have cost it.
    pub cpu: Vec<Duration>,
    /// CPU time per phase (deal = start, verify = the input that ends the deal
    /// phase, finalize = the rest), summed over participants.
    pub phase_cpu: [Duration; 3],
    /// Messages delivered.
    pub messages: u64,
}

/// What a DKG run produced.
pub type DkgRun<S> = MachineRun<DkgOutput<S>>;

/// Runs `participants` (participant `p` at index `p`) to completion: a DKG's
/// ([`DkgRun`]) or a resharing's ([`crate::reshare::harness::ReshareRun`]).
pub fn run<S: Scheme, O>(
    mut participants: Vec<Box<dyn Participant<S, O>>>,
    seed: u64,
    disturbances: &Disturbances,
) -> MachineRun<O> {
    let n = participants.len();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut queue: Vec<(NodeIndex, NodeIndex, DkgMessage<S>)> = Vec::new();
    let mut timers: EventQueue<(NodeIndex, DkgTimer)> = EventQueue::new();
    let mut results: Vec<Option<Result<Arc<O>, DkgFailure>>> = (0..n).map(|_| None).collect();
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
                    PhaseOutput::Effect(Effect::Send { to, message }) => {
                        bytes_sent[who.0 as usize] += encoded_len(&message);
                        if (to.0 as usize) < n {
                            queue.push((who, to, message));
                        }
                    }
                    PhaseOutput::Effect(Effect::Broadcast(message)) => {
                        bytes_sent[who.0 as usize] += encoded_len(&message) * (n as u64 - 1);
                        for j in (0..n as u32).filter(|j| *j != who.0) {
                            queue.push((who, NodeIndex(j), message.clone()));
                        }
                    }
                    PhaseOutput::Effect(Effect::SetTimer { at, timer }) => {
                        timers.push(at, (who, timer))
                    }
                    PhaseOutput::Done(out) => {
                        results[who.0 as usize] = Some(Ok(out));
                        finished_at = now;
                    }
                    PhaseOutput::Failed(e) => {
                        results[who.0 as usize] = Some(Err(e));
                        finished_at = now;
                    }
                    // No relay here: broadcasts are consistent by construction.
                    PhaseOutput::Announce(_) => {}
                }
            }
        }
        if !queue.is_empty() {
            let i = (rng.next_u64() % queue.len() as u64) as usize;
            let (from, to, message) = queue.swap_remove(i);
            messages += 1;
            let copy = |from, message| (to, DkgInput::Message { from, message });
            if disturbances.from_non_members {
                pending.push(copy(NodeIndex(n as u32 + 7), message.clone()));
            }
            if disturbances.replay_other_session {
                pending.push(copy(from, other_session(&message)));
            }
            if disturbances.duplicate_all {
                pending.push(copy(from, message.clone()));
            }
            pending.push(copy(from, message));
            continue;
        }
        let Some((at, (who, timer))) = timers.pop() else {
            break;
        };
        now = now.max(at);
        pending.push((who, DkgInput::Timer(timer)));
    }
    MachineRun {
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
) -> Result<Vec<Box<DkgParticipant<S>>>, Error> {
    (0..config.n)
        .map(|i| {
            let dkg = Dkg::<S>::new(
                config.clone(),
                NodeIndex(i),
                member_seed(seed, i),
                memo.clone(),
            )?;
            Ok(Box::new(dkg) as Box<DkgParticipant<S>>)
        })
        .collect()
}

/// The RNG seed of member `i` in a run seeded with `seed`.
pub fn member_seed(seed: u64, i: u32) -> [u8; 32] {
    crate::schedule::index_seed(b"sbft-beacon dkg member seed", seed, i)
}
