//! The resharing as a [`Sharing`] of the DKG's phase machine: old members
//! deal sub-shares of their shares to the new members, checked against the
//! old public polynomial, and the new shares combine the qualified dealers'
//! sub-shares (see the [module documentation](super)).
//!
//! - this file: the protocol's side of the phase machine and construction;
//! - `combine.rs`: step 4 (the combination by Lagrange interpolation) and
//!   the adoption of the dealers the chain names.

mod combine;

use super::verify::{self, OldKeys};
use crate::dkg::phases::{Board, DealerSet, DkgFailure, PhaseMachine, Rng, Sharing};
use crate::dkg::{Deal, DealtShares, Disqualification};
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::reshare::{MemberId, ReshareEpoch, ReshareOutput, Roster};
use crate::scheme::Scheme;
use crate::threshold::SecretShare;
use crate::{Error, NodeIndex, ReshareError};
use std::collections::BTreeMap;
use std::sync::Arc;

/// One participant of a resharing.
pub type Resharer<S> = PhaseMachine<S, Redistribution<S>>;

/// The resharing's side of the phase machine.
pub struct Redistribution<S: Scheme> {
    epoch: ReshareEpoch<S>,
    session: [u8; 32],
    roster: Roster,
    old_share: Option<SecretShare>,
    old_keys: OldKeys<S>,
    new_domain: Arc<SignerDomain>,
    /// `[t_new]`: one polynomial dealt, of the new threshold.
    thresholds: [u32; 1],
    memo: Arc<Memo>,
    /// As a dealer: the sub-share message of each recipient (participant
    /// index), kept to send again to a recipient that asks
    /// ([`Resharer::resend_to`]) until the driver erases them.
    sent: BTreeMap<NodeIndex, DealtShares>,
}

impl<S: Scheme> Sharing<S> for Redistribution<S> {
    type Output = ReshareOutput<S>;

    fn session(&self) -> [u8; 32] {
        self.session
    }

    fn participants(&self) -> u32 {
        self.roster.len()
    }

    fn is_dealer(&self, p: NodeIndex) -> bool {
        self.roster.old_index(p).is_some()
    }

    fn dealers(&self) -> Vec<NodeIndex> {
        (0..self.epoch.old_members.len() as u32)
            .map(NodeIndex)
            .collect()
    }

    fn dealer_count(&self) -> usize {
        self.epoch.old_members.len()
    }

    fn receiver(&self, p: NodeIndex) -> Option<NodeIndex> {
        self.roster.new_index(p)
    }

    fn receiver_count(&self) -> u32 {
        self.epoch.new_members.len() as u32
    }

    fn participant_of_receiver(&self, j: NodeIndex) -> Option<NodeIndex> {
        self.roster.participant_of_new(j)
    }

    fn domain(&self) -> &SignerDomain {
        &self.new_domain
    }

    fn thresholds(&self) -> &[u32] {
        &self.thresholds
    }

    fn phase_timeout_us(&self) -> u64 {
        self.epoch.phase_timeout_us
    }

    /// A sub-polynomial of degree `t_new - 1` whose constant term is the old
    /// share (if held).
    fn polynomials(&self, _me: NodeIndex, rng: &mut Rng) -> Option<Vec<Vec<Scalar>>> {
        let share = self.old_share.as_ref()?;
        let t_new = self.epoch.new_threshold as usize;
        let mut poly = Vec::with_capacity(t_new);
        poly.push(*share.value());
        poly.extend((1..t_new).map(|_| Scalar::random(&mut *rng)));
        Some(vec![poly])
    }

    fn deal_fault(&self, deal: &Deal<S>) -> Option<Disqualification> {
        let degree = deal.commitments.has_degrees(&self.thresholds);
        // Decoded on the curve only (see `Deal::commitments`); resharing is
        // rare and its deals few, so each point is checked here.
        let in_group = deal.commitments_in_group();
        if !degree {
            Some(Disqualification::WrongDegree)
        } else if !in_group {
            Some(Disqualification::CommitmentsOutsideGroup)
        } else {
            None
        }
    }

    fn keeps_late_deal(&self, _deal: &Deal<S>) -> bool {
        true
    }

    /// Constant terms off the old polynomial.
    fn check_deals(&self, board: &Board<S>) -> Vec<(NodeIndex, Disqualification)> {
        board
            .candidates()
            .into_iter()
            .filter(|d| board.deals[d].commitments.point(0, 0) != Some(self.old_keys.key(*d)))
            .map(|d| (d, Disqualification::InconsistentWithOldKey))
            .collect()
    }

    /// The candidate dealers whose sub-share to this new member is missing or
    /// wrong: one check of all with secret random weights, single ones only
    /// if it fails.
    fn bad_dealers(&mut self, board: &Board<S>, me: NodeIndex, rng: &mut Rng) -> DealerSet {
        let (Some(j), Some(x)) = (self.roster.new_index(me), self.new_point(me)) else {
            return DealerSet::new();
        };
        let (with, without): (Vec<NodeIndex>, Vec<NodeIndex>) = board
            .candidates()
            .into_iter()
            .partition(|d| board.shares.contains_key(d));
        let received: Vec<(&Deal<S>, Scalar)> = with
            .iter()
            .map(|d| (&*board.deals[d], board.shares[d][0]))
            .collect();
        let mut bad: DealerSet = without.into_iter().collect();
        if verify::sub_shares_match::<S, _>(&received, x, rng) {
            return bad;
        }
        for (d, (deal, value)) in with.iter().zip(&received) {
            if !crate::dkg::share_matches::<S>(&self.new_domain, deal, j, &[*value]) {
                bad.insert(*d);
            }
        }
        bad
    }

    fn sent(&mut self, to: NodeIndex, shares: &DealtShares) {
        self.sent.insert(to, shares.clone());
    }

    /// Decides QUAL and combines the sub-polynomials of its first `t_old`
    /// dealers by Lagrange interpolation at zero over their old points.
    fn finalize(
        &mut self,
        board: &mut Board<S>,
        me: NodeIndex,
    ) -> Result<ReshareOutput<S>, DkgFailure> {
        let qual = board.candidates();
        let need = self.epoch.old_threshold();
        if (qual.len() as u64) < u64::from(need) {
            let qualified = qual.len() as u32;
            return Err(DkgFailure::TooFewDealers { qualified, need });
        }
        // Any t_old qualified dealers determine the secret; the first t_old of
        // QUAL are combined (at least one of them is honest).
        let combined = qual[..need as usize].to_vec();
        self.combine(board, me, qual, &combined)
    }
}

impl<S: Scheme> Redistribution<S> {
    /// The evaluation point of participant `p`, if it is a new member.
    fn new_point(&self, p: NodeIndex) -> Option<Scalar> {
        let j = self.roster.new_index(p)?;
        self.new_domain.point(j).ok()
    }
}

impl<S: Scheme> Resharer<S> {
    /// Participant `me` of the resharing `epoch`. An old member passes its current
    /// share (`None` if it lost it: it then only receives). `seed` feeds the
    /// sub-polynomial and the verification weights (real entropy in production,
    /// the scenario seed in simulation); `memo` shares pure public computations
    /// between simulated participants.
    pub fn new(
        epoch: ReshareEpoch<S>,
        me: MemberId,
        old_share: Option<SecretShare>,
        seed: [u8; 32],
        memo: Arc<Memo>,
    ) -> Result<Self, Error> {
        let roster = epoch.roster();
        let Some(p) = roster.index_of(&me) else {
            return Err(Error::Reshare(ReshareError::NotAParticipant { member: me }));
        };
        let session = epoch.session();
        let old_keys = OldKeys::new(&epoch, &session, memo.clone())?;
        if let Some(share) = &old_share {
            if roster.old_index(p) != Some(share.index) {
                return Err(Error::Reshare(ReshareError::ShareOfAnotherIndex {
                    member: me,
                    old_index: share.index,
                    participant: p,
                }));
            }
            if share.verification_key::<S>() != old_keys.key(share.index) {
                return Err(Error::Reshare(ReshareError::OldShareMismatch {
                    old_index: share.index,
                }));
            }
        }
        let new_domain = SignerDomain::shared(epoch.new_members.len() as u32)?;
        let redistribution = Redistribution {
            session,
            roster,
            old_share,
            old_keys,
            new_domain,
            thresholds: [epoch.new_threshold],
            memo,
            sent: BTreeMap::new(),
            epoch,
        };
        Ok(PhaseMachine::from_parts(p, seed, redistribution))
    }

    /// The epoch.
    pub fn epoch(&self) -> &ReshareEpoch<S> {
        &self.sharing.epoch
    }

    /// The session id every message names.
    pub fn session(&self) -> [u8; 32] {
        self.sharing.session
    }

    /// The participants.
    pub fn roster(&self) -> &Roster {
        &self.sharing.roster
    }

    /// As a dealer: the sub-share message for participant `to` (a new member
    /// that asks for it again: it restarted, or lost it); its deal goes with
    /// it as the driver signed it.
    pub fn resend_to(&self, to: NodeIndex) -> Option<DealtShares> {
        self.sharing.sent.get(&to).cloned()
    }

    /// As a new member: the old members (participant indices) whose deal or
    /// sub-share to this participant it lacks, itself aside.
    pub fn missing(&self) -> Vec<NodeIndex> {
        if self.sharing.roster.new_index(self.me).is_none() {
            return Vec::new();
        }
        let board = &self.board;
        (0..self.sharing.epoch.old_members.len() as u32)
            .map(NodeIndex)
            .filter(|d| *d != self.me)
            .filter(|d| {
                let deal = board.deals.contains_key(d) || board.late_deals.contains_key(d);
                let share = board.shares.contains_key(d) || board.late_shares.contains_key(d);
                !(deal && share)
            })
            .collect()
    }

    /// Erases what this dealer keeps to send again (its sub-shares determine
    /// its old share): once the new epoch no longer needs them.
    pub fn erase_dealt(&mut self) {
        self.sharing.sent.clear();
        self.board.dealt = None;
        self.board.dealt_tree = None;
    }
}
