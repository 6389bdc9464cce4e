//! The genesis DKG as a [`Sharing`]: every member (or a committee) deals one
//! random polynomial per threshold to every member; shares are checked in one
//! batch against the deals' share trees and commitments; QUAL's polynomials
//! sum to the group keys.
//!
//! - this file: the protocol's side of the phase machine, construction, and
//!   what a [`Dkg`] tells its session (progress, QUAL digest);
//! - `keys.rs`: step 4 (QUAL, the group polynomials and this member's keys)
//!   and adoption of a QUAL the others agreed on.

mod keys;

use super::batch::{batch_check, in_share_tree, share_leaf};
use super::phases::{Board, DealerSet, DkgFailure, PhaseMachine, Rng, Sharing};
use super::relay::Kind;
use super::{share_matches, Deal, Disqualification, DkgConfig, DkgOutput, DkgPhase};
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A group polynomial (or the verification keys under one): a point per
/// coefficient (or per member).
type Points<S> = Arc<Vec<<S as Scheme>::PublicKey>>;

/// A group polynomial and the verification keys under it.
type Derived<S> = (Points<S>, Points<S>);

/// One member's DKG state machine.
pub type Dkg<S> = PhaseMachine<S, Genesis<S>>;

/// The genesis DKG's side of the phase machine.
pub struct Genesis<S: Scheme> {
    config: DkgConfig,
    domain: Arc<SignerDomain>,
    memo: Arc<Memo>,
    /// Group polynomials and verification keys already derived, per threshold, for
    /// one dealer set (reused at finalization when QUAL is that set).
    derived: BTreeMap<(usize, Vec<NodeIndex>), Derived<S>>,
    /// Group polynomials already summed, per threshold and dealer set: step 4's
    /// subgroup check and the keys' derivation use the same ones (a real node's
    /// memo caches nothing).
    polynomials: BTreeMap<(usize, Vec<NodeIndex>), Points<S>>,
}

impl<S: Scheme> Sharing<S> for Genesis<S> {
    type Output = DkgOutput<S>;

    fn session(&self) -> [u8; 32] {
        self.config.session
    }

    fn participants(&self) -> u32 {
        self.config.n
    }

    fn is_dealer(&self, p: NodeIndex) -> bool {
        self.config.is_dealer(p)
    }

    fn dealers(&self) -> Vec<NodeIndex> {
        self.config.dealer_list()
    }

    fn dealer_count(&self) -> usize {
        self.config.dealer_count() as usize
    }

    fn receiver(&self, p: NodeIndex) -> Option<NodeIndex> {
        (p.0 < self.config.n).then_some(p)
    }

    fn receiver_count(&self) -> u32 {
        self.config.n
    }

    fn participant_of_receiver(&self, j: NodeIndex) -> Option<NodeIndex> {
        self.receiver(j)
    }

    fn domain(&self) -> &SignerDomain {
        &self.domain
    }

    fn thresholds(&self) -> &[u32] {
        &self.config.thresholds
    }

    fn phase_timeout_us(&self) -> u64 {
        self.config.timing.phase_us()
    }

    fn has_committee(&self) -> bool {
        !self.config.dealers.is_empty() && self.config.dealers.len() < self.config.n as usize
    }

    fn polynomials(&self, me: NodeIndex, rng: &mut Rng) -> Option<Vec<Vec<Scalar>>> {
        if !self.config.is_dealer(me) {
            return None;
        }
        let thresholds = self.config.thresholds.iter();
        Some(
            thresholds
                .map(|&t| (0..t).map(|_| Scalar::random(&mut *rng)).collect())
                .collect(),
        )
    }

    fn deal_fault(&self, deal: &Deal<S>) -> Option<Disqualification> {
        (!deal.commitments.has_degrees(&self.config.thresholds))
            .then_some(Disqualification::WrongDegree)
    }

    fn keeps_late_deal(&self, deal: &Deal<S>) -> bool {
        deal.commitments.has_degrees(&self.config.thresholds)
    }

    fn check_deals(&self, _board: &Board<S>) -> Vec<(NodeIndex, Disqualification)> {
        Vec::new()
    }

    /// Missing shares, shares the dealer did not commit to, and shares that
    /// fail the Feldman check: one batched check of every dealing, single
    /// ones only if it fails.
    fn bad_dealers(&mut self, board: &Board<S>, me: NodeIndex, _: &mut Rng) -> DealerSet {
        let candidates = board.candidates();
        let session = self.config.session;
        let size = self.domain.size();
        let mut bad: DealerSet = candidates
            .iter()
            .filter(|d| {
                let (Some(shares), Some((salt, path))) =
                    (board.shares.get(d), board.shares_committed.get(d))
                else {
                    return true;
                };
                let leaf = share_leaf(&session, **d, me, salt, shares);
                !in_share_tree(&board.deals[d].share_root, leaf, me, &path.hashes(), size)
            })
            .copied()
            .collect();
        let dealings: Vec<(&Deal<S>, &[Scalar])> = candidates
            .iter()
            .filter(|d| !bad.contains(d))
            .map(|d| (board.deals[d].as_ref(), board.shares[d].as_slice()))
            .collect();
        if !batch_check::<S>(&self.domain, &self.memo, &session, me, &dealings) {
            for (deal, shares) in &dealings {
                if !share_matches::<S>(&self.domain, deal, me, shares) {
                    bad.insert(deal.dealer);
                }
            }
        }
        bad
    }

    fn finalize(
        &mut self,
        board: &mut Board<S>,
        me: NodeIndex,
    ) -> Result<DkgOutput<S>, DkgFailure> {
        self.exclude_off_group(board);
        let qual = board.candidates();
        if (qual.len() as u32) < self.config.min_qualified {
            return Err(DkgFailure::TooFewDealers {
                qualified: qual.len() as u32,
                need: self.config.min_qualified,
            });
        }
        let keys = self.keys_under(board, me, &qual)?;
        Ok(DkgOutput {
            session: self.config.session,
            n: self.config.n,
            me,
            verdicts: board.verdicts(qual),
            keys,
        })
    }
}

impl<S: Scheme> Dkg<S> {
    /// Member `me` of a run. `seed` feeds the dealer's polynomials (derive it from
    /// real entropy in production, from the scenario seed in simulation). `memo`
    /// shares pure public computations between simulated members.
    pub fn new(
        config: DkgConfig,
        me: NodeIndex,
        seed: [u8; 32],
        memo: Arc<Memo>,
    ) -> Result<Self, Error> {
        if me.0 >= config.n {
            return Err(Error::SignerOutOfRange {
                signer: me,
                n: config.n,
            });
        }
        let domain = SignerDomain::shared(config.n)?;
        let genesis = Genesis {
            config,
            domain,
            memo,
            derived: BTreeMap::new(),
            polynomials: BTreeMap::new(),
        };
        Ok(PhaseMachine::from_parts(me, seed, genesis))
    }

    /// The configuration.
    pub fn config(&self) -> &DkgConfig {
        &self.sharing.config
    }

    /// What this member waits for, for logs: its phase and how many of the
    /// messages it expects are in.
    pub fn progress(&self) -> String {
        let confirmed = |k: Kind| {
            if self.is_confirmed(k) {
                "confirmed"
            } else {
                "unconfirmed"
            }
        };
        let board = &self.board;
        match self.phase {
            DkgPhase::Dealing => format!(
                "dealing: {}/{} deals (faulty {}), shares from {}",
                board.deals.len(),
                self.sharing.config.dealer_count(),
                board.faulty.len(),
                board.shares.len(),
            ),
            DkgPhase::Complaining => format!(
                "complaining: {}/{} complaints (faulty {}), deals {}, complaints {}",
                board.complainers.len(),
                self.sharing.config.n,
                board.faulty.len(),
                confirmed(Kind::Deal),
                confirmed(Kind::Complaint),
            ),
            DkgPhase::Justifying => {
                let due = self.expected_justifications();
                let have = due
                    .iter()
                    .filter(|d| board.justifications.contains_key(d))
                    .count();
                format!(
                    "justifying: {have}/{} justifications, {}",
                    due.len(),
                    confirmed(Kind::Justification)
                )
            }
            other => format!("{other:?}").to_lowercase(),
        }
    }

    /// A digest of everything the group polynomials of `qual` depend on (the
    /// session, the thresholds and those dealers' deals): a key for sharing
    /// computations on them ([`Memo`]); `None` if a deal of `qual` is missing.
    pub fn qual_digest(&self, qual: &[NodeIndex]) -> Option<[u8; 32]> {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/dkg-qual/1");
        h.update(self.sharing.config.session);
        for t in &self.sharing.config.thresholds {
            h.update(t.to_be_bytes());
        }
        for d in qual {
            h.update(self.board.deals.get(d)?.digest());
        }
        Some(h.finalize().into())
    }
}
