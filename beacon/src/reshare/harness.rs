//! An in-memory harness that runs a whole resharing: every participant, messages
//! delivered one at a time in an order drawn from a seeded RNG, timers fired when
//! no message is in flight (a synchronous network), with the DKG harness's
//! network disturbances. Byzantine dealers are swappable [`ReshareParticipant`]s
//! wrapping an honest [`Resharer`]; the honest code has no flags.

use super::*;
use crate::dkg::harness::{other_session, Disturbances};
use crate::field::Scalar;
use crate::memo::Memo;
use crate::schedule::EventQueue;
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use std::time::{Duration, Instant};

/// Anything that can stand in a resharing: the honest [`Resharer`] or a
/// Byzantine wrapper.
pub trait ReshareParticipant<S: Scheme>: Send {
    /// Handles one input (see [`Resharer::handle`]).
    fn handle(&mut self, now: Time, input: ReshareInput<S>) -> Vec<ReshareAction<S>>;
}

impl<S: Scheme> ReshareParticipant<S> for Resharer<S> {
    fn handle(&mut self, now: Time, input: ReshareInput<S>) -> Vec<ReshareAction<S>> {
        Resharer::handle(self, now, input)
    }
}

/// Ways a Byzantine old member deals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResharerFault {
    /// Wrong sub-shares to `victims` (participant indices), complaints unanswered.
    BadSubShares {
        /// Recipients of wrong sub-shares.
        victims: Vec<NodeIndex>,
    },
    /// Wrong sub-shares to `victims`, then the right ones revealed: stays qualified.
    BadSubSharesThenJustified {
        /// Recipients of wrong sub-shares.
        victims: Vec<NodeIndex>,
    },
    /// A sub-polynomial shifted by one: sub-shares consistent with the
    /// commitments, but the constant term is not the dealer's old share.
    WrongConstant,
    /// Commitments one coefficient short.
    WrongDegree,
    /// Sends nothing at all.
    Silent,
}

/// A Byzantine old member: an honest [`Resharer`] whose outputs are rewritten.
pub struct ByzantineResharer<S: Scheme> {
    inner: Resharer<S>,
    fault: ResharerFault,
}

impl<S: Scheme> ByzantineResharer<S> {
    /// Wraps `inner` with `fault`.
    pub fn new(inner: Resharer<S>, fault: ResharerFault) -> Self {
        ByzantineResharer { inner, fault }
    }

    fn corrupts(&self, to: NodeIndex) -> bool {
        match &self.fault {
            ResharerFault::BadSubShares { victims }
            | ResharerFault::BadSubSharesThenJustified { victims } => victims.contains(&to),
            ResharerFault::WrongConstant => true,
            _ => false,
        }
    }

    fn rewrite(&self, action: ReshareAction<S>) -> Option<ReshareAction<S>> {
        let one = Scalar::one();
        let shifted = |values: &[Scalar]| values.iter().map(|v| *v + one).collect::<Vec<_>>();
        match (&self.fault, action) {
            (ResharerFault::Silent, a @ ReshareAction::SetTimer { .. }) => Some(a),
            (ResharerFault::Silent, _) => None,
            (ResharerFault::WrongDegree, ReshareAction::Broadcast(DkgMessage::Deal(d))) => {
                let mut commitments = d.commitments.to_rows();
                commitments[0].pop();
                let commitments = crate::dkg::Commitments::new(&commitments);
                let bad = Deal::new(d.session, d.dealer, commitments, d.share_root);
                Some(ReshareAction::Broadcast(DkgMessage::Deal(Arc::new(bad))))
            }
            (ResharerFault::WrongConstant, ReshareAction::Broadcast(DkgMessage::Deal(d))) => {
                let mut commitments = d.commitments.to_rows();
                commitments[0][0] = commitments[0][0].add(&S::PublicKey::generator());
                let commitments = crate::dkg::Commitments::new(&commitments);
                let bad = Deal::new(d.session, d.dealer, commitments, d.share_root);
                Some(ReshareAction::Broadcast(DkgMessage::Deal(Arc::new(bad))))
            }
            (
                _,
                ReshareAction::Send {
                    to,
                    message: DkgMessage::Shares(mut s),
                },
            ) if self.corrupts(to) => {
                s.shares = shifted(&s.shares);
                Some(ReshareAction::Send {
                    to,
                    message: DkgMessage::Shares(s),
                })
            }
            (
                ResharerFault::BadSubShares { .. },
                ReshareAction::Broadcast(DkgMessage::Justification(_)),
            ) => None,
            (_, a) => Some(a),
        }
    }
}

impl<S: Scheme> ReshareParticipant<S> for ByzantineResharer<S> {
    fn handle(&mut self, now: Time, input: ReshareInput<S>) -> Vec<ReshareAction<S>> {
        let actions = self.inner.handle(now, input);
        actions
            .into_iter()
            .filter_map(|a| self.rewrite(a))
            .collect()
    }
}

/// What a harness run produced.
pub struct ReshareRun<S: Scheme> {
    /// Per participant: its output, or its failure, or `None` if it produced neither.
    pub results: Vec<Option<Result<Arc<ReshareOutput<S>>, Error>>>,
    /// Virtual time at the end.
    pub finished_at: Time,
    /// Bytes each participant sent (wire encoding; a broadcast counts once per
    /// recipient).
    pub bytes_sent: Vec<u64>,
    /// CPU time each participant spent in `handle`, plus what shared computations
    /// would have cost it.
    pub cpu: Vec<Duration>,
    /// Messages delivered.
    pub messages: u64,
}

/// Runs `participants` (participant `p` at index `p`) to completion.
pub fn run<S: Scheme>(
    mut participants: Vec<Box<dyn ReshareParticipant<S>>>,
    seed: u64,
    disturbances: &Disturbances,
) -> ReshareRun<S> {
    let n = participants.len();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut queue: Vec<(NodeIndex, NodeIndex, DkgMessage<S>)> = Vec::new();
    let mut timers: EventQueue<(NodeIndex, DkgTimer)> = EventQueue::new();
    let mut results = vec![None; n];
    let mut bytes_sent = vec![0u64; n];
    let mut cpu = vec![Duration::ZERO; n];
    let mut messages = 0u64;
    let mut now = Time::ZERO;
    let _ = crate::memo::take_charged_time();
    let size = |m: &DkgMessage<S>| m.encode().map(|b| b.len() as u64).unwrap_or(0);

    let mut pending: Vec<(NodeIndex, ReshareInput<S>)> = (0..n as u32)
        .map(|i| (NodeIndex(i), ReshareInput::Start))
        .collect();
    loop {
        for (who, input) in pending.drain(..) {
            let start = Instant::now();
            let actions = participants[who.0 as usize].handle(now, input);
            cpu[who.0 as usize] += start.elapsed() + crate::memo::take_charged_time();
            for action in actions {
                match action {
                    ReshareAction::Send { to, message } => {
                        bytes_sent[who.0 as usize] += size(&message);
                        if (to.0 as usize) < n {
                            queue.push((who, to, message));
                        }
                    }
                    ReshareAction::Broadcast(message) => {
                        bytes_sent[who.0 as usize] += size(&message) * (n as u64 - 1);
                        for j in (0..n as u32).filter(|j| *j != who.0) {
                            queue.push((who, NodeIndex(j), message.clone()));
                        }
                    }
                    ReshareAction::SetTimer { at, timer } => timers.push(at, (who, timer)),
                    // Not relayed: every broadcast reaches all as sent.
                    ReshareAction::Announce(_) => {}
                    ReshareAction::Reshared(out) => results[who.0 as usize] = Some(Ok(out)),
                    ReshareAction::Failed(e) => results[who.0 as usize] = Some(Err(e)),
                }
            }
        }
        if !queue.is_empty() {
            let i = (rng.next_u64() % queue.len() as u64) as usize;
            let (from, to, message) = queue.swap_remove(i);
            messages += 1;
            let copy = |from, message| (to, ReshareInput::Message { from, message });
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
        pending.push((who, ReshareInput::Timer(timer)));
    }
    ReshareRun {
        results,
        finished_at: now,
        bytes_sent,
        cpu,
        messages,
    }
}

/// Honest participants of `epoch`, by participant index; `old_shares[i]` is old
/// member `i`'s share (`None`: lost). Seeds derive from `seed`.
pub fn honest<S: Scheme>(
    epoch: &ReshareEpoch<S>,
    old_shares: &[Option<SecretShare>],
    seed: u64,
    memo: &Arc<Memo>,
) -> Result<Vec<Box<dyn ReshareParticipant<S>>>, Error> {
    let roster = epoch.roster();
    roster
        .participants()
        .iter()
        .enumerate()
        .map(|(p, id)| {
            let share = old_shares.get(p).cloned().flatten();
            let resharer = Resharer::<S>::new(
                epoch.clone(),
                *id,
                share,
                participant_seed(seed, p as u32),
                memo.clone(),
            )?;
            Ok(Box::new(resharer) as Box<dyn ReshareParticipant<S>>)
        })
        .collect()
}

/// The RNG seed of participant `p` in a run seeded with `seed`.
pub fn participant_seed(seed: u64, p: u32) -> [u8; 32] {
    crate::schedule::index_seed(b"sbft-beacon reshare participant seed", seed, p)
}
