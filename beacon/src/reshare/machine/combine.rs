//! Step 4 of the resharing: the combination of the qualified dealers'
//! sub-polynomials by Lagrange interpolation at zero over their old points,
//! and the adoption of the dealers the chain names (steps 2 to 3 are the
//! phase machine's, [`crate::dkg::phases`]).

use super::{Redistribution, Resharer};
use crate::dkg::phases::{Board, DkgFailure};
use crate::dkg::{evaluate_in_exponent, Deal, DkgPhase};
use crate::field::Scalar;
use crate::lagrange::{InterpolationMethod, LagrangeCoefficients};
use crate::reshare::{verify, ReshareOutput};
use crate::scheme::Scheme;
use crate::threshold::SecretShare;
use crate::NodeIndex;
use std::sync::Arc;

/// Old groups of at least this many members interpolate with the roots-of-unity
/// coefficients (all methods give the same result; this one is O(N log N)).
const ROOTS_OF_UNITY_FROM: u32 = 32;

/// Shared points of the key group.
type Points<S> = Arc<Vec<<S as Scheme>::PublicKey>>;

impl<S: Scheme> Redistribution<S> {
    /// How the old group interpolates.
    fn method(&self) -> InterpolationMethod {
        if self.epoch.old_members.len() as u32 >= ROOTS_OF_UNITY_FROM {
            InterpolationMethod::RootsOfUnity
        } else {
            InterpolationMethod::Naive
        }
    }

    /// Combines the sub-polynomials of `combined` (from `qual`).
    pub(super) fn combine(
        &mut self,
        board: &Board<S>,
        me: NodeIndex,
        qual: Vec<NodeIndex>,
        combined: &[NodeIndex],
    ) -> Result<ReshareOutput<S>, DkgFailure> {
        let lambdas = self
            .old_keys
            .domain()
            .lagrange_at_zero(combined, self.method())
            .map_err(DkgFailure::Interpolation)?;
        let (public_polynomial, verification_keys) =
            self.public_material(board, combined, &lambdas);
        if Some(&public_polynomial[0]) != self.epoch.group_key() {
            return Err(DkgFailure::GroupKeyChanged);
        }
        let new_index = self.roster.new_index(me);
        let share = match new_index {
            None => None,
            Some(j) => {
                let values: Option<Vec<Scalar>> = combined
                    .iter()
                    .map(|d| board.shares.get(d).map(|s| s[0]))
                    .collect();
                let values = values.ok_or(DkgFailure::MissingShare)?;
                let value = lambdas
                    .interpolate(&values)
                    .map_err(DkgFailure::Interpolation)?;
                let share = SecretShare::new(j, value);
                if share.verification_key::<S>() != verification_keys[j.0 as usize] {
                    let threshold = self.epoch.new_threshold;
                    return Err(DkgFailure::ShareMismatch { threshold });
                }
                Some(share)
            }
        };
        Ok(ReshareOutput {
            session: self.session,
            epoch: self.epoch.epoch,
            n: self.epoch.new_members.len() as u32,
            me: new_index,
            verdicts: board.verdicts(qual),
            threshold: self.epoch.new_threshold,
            public_polynomial,
            verification_keys,
            share,
        })
    }

    /// The new public polynomial `sum_i lambda_i G_i` over `combined` and every new
    /// verification key (shared between simulated participants through the memo).
    fn public_material(
        &self,
        board: &Board<S>,
        combined: &[NodeIndex],
        lambdas: &LagrangeCoefficients,
    ) -> (Points<S>, Points<S>) {
        let deals: Vec<&Deal<S>> = combined.iter().map(|d| &*board.deals[d]).collect();
        let t_new = self.epoch.new_threshold as usize;
        let key = verify::memo_key("reshare-public-polynomial", &self.session, &deals);
        let polynomial = self.memo.get_or_compute(key, || {
            verify::combine_commitments::<S>(&deals, lambdas.coefficients(), t_new)
        });
        let key = verify::memo_key("reshare-verification-keys", &self.session, &deals);
        let keys = self
            .memo
            .get_or_compute(key, || evaluate_in_exponent(&polynomial, &self.new_domain));
        (polynomial, keys)
    }
}

impl<S: Scheme> Resharer<S> {
    /// The result under `combined`, the `t_old` dealers that other new members
    /// combined (read off the chain) when this participant combined others: it
    /// started late, and took a dealer the others had given up on. `None` when
    /// it lacks a deal of one of them, or (as a new member) a sub-share that
    /// matches it.
    pub fn adopt(&mut self, combined: &[NodeIndex]) -> Option<Arc<ReshareOutput<S>>> {
        let sharing = &self.sharing;
        let epoch = &sharing.epoch;
        let need = epoch.old_threshold() as usize;
        if combined.len() != need || combined.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        // Deals and sub-shares that came after the deal phase count here: the
        // chain named these dealers, and each is checked below against the
        // old polynomial and its commitments.
        let board = &mut self.board;
        let mut deals = Vec::with_capacity(combined.len());
        let mut values = Vec::with_capacity(combined.len());
        for d in combined {
            let deal = board.deals.get(d).or_else(|| board.late_deals.get(d))?;
            let well_formed = deal.commitments.has_degrees(&[epoch.new_threshold])
                && deal.commitments.point(0, 0) == Some(sharing.old_keys.key(*d))
                && deal.commitments_in_group();
            if !well_formed {
                return None;
            }
            if let Some(j) = sharing.roster.new_index(self.me) {
                let value = board.shares.get(d).or_else(|| board.late_shares.get(d))?;
                if !crate::dkg::share_matches::<S>(&sharing.new_domain, deal, j, value) {
                    return None;
                }
                values.push((*d, value.clone()));
            }
            deals.push((*d, deal.clone()));
        }
        board.deals.extend(deals);
        board.shares.extend(values);
        let output = self
            .sharing
            .combine(board, self.me, combined.to_vec(), combined)
            .ok()?;
        self.phase = DkgPhase::Done;
        Some(Arc::new(output))
    }
}
