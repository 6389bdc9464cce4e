//! Runs of whole DKG sessions (relay and agreement step included) over an
//! in-memory network, with member keys and delivery orders.

use super::member_seed;
use crate::dkg::relay::{SigningKey, VerifyingKey};
use crate::dkg::session::{
    AgreementKeys, DkgSession, SessionFailure, SessionInput, SessionMessage, SessionOutput,
    SessionParticipant, SessionTimer,
};
use crate::dkg::*;
use crate::effect::Effect;
use crate::multisig::ConsensusSecretKey;
use crate::schedule::EventQueue;
use crate::wire;
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;
use rand_core::SeedableRng;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// What a run of whole sessions ([`run_sessions`]) produced.
pub struct SessionRun<S: Scheme> {
    /// Per member: its output, its failure, or `None`.
    pub results: Vec<Option<Result<Arc<DkgOutput<S>>, SessionFailure>>>,
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

/// The agreement keys of `n` members ([`AgreementKeys`]), member `i`'s
/// consensus secret drawn from the 32 bytes `seed_of(i)`.
pub fn agreement_keys<S: Scheme>(
    n: u32,
    seed_of: impl Fn(u32) -> [u8; 32],
) -> Vec<AgreementKeys<S>> {
    let secrets: Vec<ConsensusSecretKey> = (0..n)
        .map(|i| ConsensusSecretKey::random(&mut ChaCha20Rng::from_seed(seed_of(i))))
        .collect();
    AgreementKeys::of_secrets(&secrets)
}

/// Honest sessions for `config`, member keys and seeds derived from `seed`.
pub fn honest_sessions<S: Scheme>(
    config: &DkgConfig,
    seed: u64,
    memo: &Arc<Memo>,
) -> Result<Vec<Box<dyn SessionParticipant<S>>>, Error> {
    let (secrets, keys) = member_keys(config.n, |i| member_seed(seed ^ 0x6b65_7973, i));
    let agreement = agreement_keys::<S>(config.n, |i| member_seed(seed ^ 0x636f_6e73, i));
    secrets
        .into_iter()
        .zip(agreement)
        .enumerate()
        .map(|(i, (key, agreement))| {
            let s = DkgSession::<S>::new(
                config.clone(),
                NodeIndex(i as u32),
                member_seed(seed, i as u32),
                memo.clone(),
                key,
                keys.clone(),
                agreement,
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
                    SessionOutput::Effect(Effect::Send { to, message }) => {
                        count(&message, 1);
                        queue.push_back((who, to.0, message));
                    }
                    SessionOutput::Effect(Effect::Broadcast(message)) => {
                        count(&message, n as u64 - 1);
                        for j in (0..n as u32).filter(|j| *j != who) {
                            queue.push_back((who, j, message.clone()));
                        }
                    }
                    SessionOutput::Effect(Effect::SetTimer { at, timer }) => {
                        timers.push(at, (who, timer))
                    }
                    SessionOutput::Complete(out) => {
                        results[who as usize] = Some(Ok(out));
                        finished_at = now;
                    }
                    SessionOutput::Failed(e) => {
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
