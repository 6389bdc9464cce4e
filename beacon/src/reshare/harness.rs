//! Resharing runs in the phase machines' one in-memory harness
//! ([`crate::dkg::harness::run_machines`]): honest participants, and
//! Byzantine dealers as swappable [`ReshareParticipant`]s wrapping an honest
//! [`Resharer`] (the honest code has no flags).

use crate::curve::Point as _;
pub use crate::dkg::harness::run;
use crate::dkg::harness::{MachineRun, Participant};
use crate::dkg::{Deal, DkgMessage, PhaseOutput};
use crate::effect::Effect;
use crate::field::Scalar;
use crate::memo::Memo;
use crate::reshare::{ReshareEpoch, ReshareInput, ReshareOutput, ResharePhaseOutput, Resharer};
use crate::scheme::Scheme;
use crate::threshold::SecretShare;
use crate::{Error, NodeIndex, Time};
use std::sync::Arc;

/// A participant of a resharing: the honest [`Resharer`] or a Byzantine wrapper.
pub type ReshareParticipant<S> = dyn Participant<S, ReshareOutput<S>>;

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

    fn rewrite(&self, action: ResharePhaseOutput<S>) -> Option<ResharePhaseOutput<S>> {
        let one = Scalar::one();
        let shifted = |values: &[Scalar]| values.iter().map(|v| *v + one).collect::<Vec<_>>();
        let effect = match (&self.fault, action) {
            (ResharerFault::Silent, a @ PhaseOutput::Effect(Effect::SetTimer { .. })) => {
                return Some(a)
            }
            (ResharerFault::Silent, _) => return None,
            (_, PhaseOutput::Effect(effect)) => effect,
            (_, a) => return Some(a),
        };
        let effect = match (&self.fault, effect) {
            (ResharerFault::WrongDegree, Effect::Broadcast(DkgMessage::Deal(d))) => {
                let mut commitments = d.commitments.to_rows();
                commitments[0].pop();
                Effect::Broadcast(DkgMessage::Deal(Arc::new(with_commitments(
                    &d,
                    commitments,
                ))))
            }
            (ResharerFault::WrongConstant, Effect::Broadcast(DkgMessage::Deal(d))) => {
                let mut commitments = d.commitments.to_rows();
                commitments[0][0] = commitments[0][0].add(&S::PublicKey::generator());
                Effect::Broadcast(DkgMessage::Deal(Arc::new(with_commitments(
                    &d,
                    commitments,
                ))))
            }
            (
                _,
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(mut s),
                },
            ) if self.corrupts(to) => {
                s.shares = shifted(&s.shares);
                Effect::Send {
                    to,
                    message: DkgMessage::Shares(s),
                }
            }
            (
                ResharerFault::BadSubShares { .. },
                Effect::Broadcast(DkgMessage::Justification(_)),
            ) => return None,
            (_, e) => e,
        };
        Some(PhaseOutput::Effect(effect))
    }
}

/// `deal` with other commitments.
fn with_commitments<S: Scheme>(deal: &Deal<S>, rows: Vec<Vec<S::PublicKey>>) -> Deal<S> {
    let commitments = crate::dkg::Commitments::new(&rows);
    Deal::new(deal.session, deal.dealer, commitments, deal.share_root)
}

impl<S: Scheme> Participant<S, ReshareOutput<S>> for ByzantineResharer<S> {
    fn handle(&mut self, now: Time, input: ReshareInput<S>) -> Vec<ResharePhaseOutput<S>> {
        let actions = self.inner.handle(now, input);
        actions
            .into_iter()
            .filter_map(|a| self.rewrite(a))
            .collect()
    }
}

/// What a resharing run produced.
pub type ReshareRun<S> = MachineRun<ReshareOutput<S>>;

/// Honest participants of `epoch`, by participant index; `old_shares[i]` is old
/// member `i`'s share (`None`: lost). Seeds derive from `seed`.
pub fn honest<S: Scheme>(
    epoch: &ReshareEpoch<S>,
    old_shares: &[Option<SecretShare>],
    seed: u64,
    memo: &Arc<Memo>,
) -> Result<Vec<Box<ReshareParticipant<S>>>, Error> {
    let roster = epoch.roster();
    let mut participants: Vec<Box<ReshareParticipant<S>>> = Vec::new();
    for (p, id) in (0u32..).zip(roster.participants()) {
        let share = old_shares.get(p as usize).cloned().flatten();
        let seed = participant_seed(seed, p);
        let resharer = Resharer::<S>::new(epoch.clone(), *id, share, seed, memo.clone())?;
        participants.push(Box::new(resharer));
    }
    Ok(participants)
}

/// The RNG seed of participant `p` in a run seeded with `seed`.
pub fn participant_seed(seed: u64, p: u32) -> [u8; 32] {
    crate::schedule::index_seed(b"sbft-beacon reshare participant seed", seed, p)
}
