//! Step 4 of the genesis DKG: QUAL's group polynomials, every member's
//! verification key and this member's shares (shared through the memo between
//! simulated members), and the adoption of a QUAL the others agreed on.

use super::{Derived, Dkg, Genesis, Points};
use crate::curve::Point;
use crate::dkg::phases::{Board, DkgFailure};
use crate::dkg::{
    evaluate_in_exponent, share_matches, Disqualification, DkgOutput, DkgPhase,
    ThresholdKeyMaterial,
};
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::threshold::SecretShare;
use crate::NodeIndex;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// Coefficients of a group polynomial summed per job (jobs that do not
/// depend on the threads: 32 at 1,024 members' largest threshold).
const COEFFICIENTS_PER_JOB: usize = 32;

impl<S: Scheme> Genesis<S> {
    /// This member's key material under `qual` (one per threshold): its share
    /// the sum of the dealers' shares, checked against the group polynomial.
    pub(super) fn keys_under(
        &mut self,
        board: &Board<S>,
        me: NodeIndex,
        qual: &[NodeIndex],
    ) -> Result<Vec<ThresholdKeyMaterial<S>>, DkgFailure> {
        let thresholds = self.config.thresholds.clone();
        let mut keys = Vec::with_capacity(thresholds.len());
        for (k, &t) in thresholds.iter().enumerate() {
            let value = qual
                .iter()
                .map(|d| board.shares.get(d).and_then(|s| s.get(k).copied()))
                .sum::<Option<Scalar>>()
                .ok_or(DkgFailure::MissingShare)?;
            let (public_polynomial, verification_keys) = self.derive(board, k, qual);
            let secret_share = SecretShare::new(me, value);
            if secret_share.verification_key::<S>() != verification_keys[me.0 as usize] {
                return Err(DkgFailure::ShareMismatch { threshold: t });
            }
            keys.push(ThresholdKeyMaterial {
                threshold: t,
                public_polynomial,
                secret_share,
                verification_keys,
            });
        }
        Ok(keys)
    }

    /// Deal commitments are decoded on the curve only (checking each point's
    /// subgroup was most of a member's DKG work), so step 4 checks the group
    /// polynomials, the only commitments the output keeps: they must lie in the
    /// prime-order subgroup. A small-order component that a Byzantine dealer hid
    /// from every share check shows in the sum; then each candidate deal is
    /// checked point by point, and the dealers with a point outside the subgroup
    /// are disqualified. Every honest member holds the same deals, so all
    /// exclude the same dealers. (Components that cancel between two dealers
    /// leave a sum, and so keys, in the subgroup: nothing to exclude.)
    ///
    /// Both checks are pure functions of public deals: simulated members share
    /// them through the memo (checking `n` points per member made the DKG of
    /// thousands of simulated members quadratic).
    pub(super) fn exclude_off_group(&mut self, board: &mut Board<S>) {
        let qual = board.candidates();
        let mut clean = true;
        for k in 0..self.config.thresholds.len() {
            let poly = self.group_polynomial(board, k, &qual);
            let key = self.memo_key(board, "group-polynomial-in-group", k, &qual);
            if !*self
                .memo
                .get_or_compute(key, || poly.iter().all(Point::in_group))
            {
                clean = false;
                break;
            }
        }
        if clean {
            return;
        }
        for d in qual {
            let key = self.memo_key(board, "deal-in-group", 0, &[d]);
            let deal = &board.deals[&d];
            if !*self
                .memo
                .get_or_compute(key, || deal.commitments_in_group())
            {
                board.disqualify(d, Disqualification::CommitmentsOutsideGroup);
            }
        }
    }

    fn memo_key(&self, board: &Board<S>, what: &str, k: usize, dealers: &[NodeIndex]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(what.as_bytes());
        h.update(self.config.session);
        h.update((k as u64).to_be_bytes());
        for d in dealers {
            h.update(board.deals[d].digest());
        }
        h.finalize().into()
    }

    /// The group polynomial (sum of the commitments of `dealers`) for threshold `k`
    /// and every member's verification key under it; derived once per dealer set.
    fn derive(&mut self, board: &Board<S>, k: usize, dealers: &[NodeIndex]) -> Derived<S> {
        let id = (k, dealers.to_vec());
        if let Some(found) = self.derived.get(&id) {
            return found.clone();
        }
        let poly = self.group_polynomial(board, k, dealers);
        let key = self.memo_key(board, "verification-keys", k, dealers);
        let keys = self
            .memo
            .get_or_compute(key, || evaluate_in_exponent(&poly, &self.domain));
        self.derived.insert(id, (poly.clone(), keys.clone()));
        (poly, keys)
    }

    /// Sum of the commitments of `dealers` for threshold `k` (summed once per
    /// dealer set).
    fn group_polynomial(&mut self, board: &Board<S>, k: usize, dealers: &[NodeIndex]) -> Points<S> {
        let id = (k, dealers.to_vec());
        if let Some(found) = self.polynomials.get(&id) {
            return found.clone();
        }
        let key = self.memo_key(board, "group-polynomial", k, dealers);
        let poly = self.memo.get_or_compute(key, || {
            let t = self.config.thresholds[k] as usize;
            // Coefficient by coefficient, in parts over threads (each sum
            // is the same whichever thread adds it).
            let ranges: Vec<std::ops::Range<usize>> = (0..t)
                .step_by(COEFFICIENTS_PER_JOB)
                .map(|i| i..(i + COEFFICIENTS_PER_JOB).min(t))
                .collect();
            let parts = crate::parallel::map(ranges, |range| {
                let mut sum = vec![S::PublicKey::identity(); range.len()];
                for d in dealers {
                    let row = board.deals[d].commitments.row(k).unwrap_or_default();
                    let part = row.get(range.start..range.end.min(row.len()));
                    for (acc, c) in sum.iter_mut().zip(part.unwrap_or_default()) {
                        *acc = acc.add_affine(c);
                    }
                }
                sum
            });
            let mut sum = Vec::with_capacity(t);
            for (part, counts) in parts {
                crate::cost::charge(&counts);
                sum.extend(part);
            }
            sum
        });
        self.polynomials.insert(id, poly.clone());
        poly
    }
}

impl<S: Scheme> Dkg<S> {
    /// Whether this member holds a deal and its shares from every dealer of
    /// `qual` (in the deal phase or after it), so that [`Dkg::adopt`] can
    /// decide.
    pub(crate) fn holds(&self, qual: &[NodeIndex]) -> bool {
        let board = &self.board;
        qual.iter().all(|d| {
            (board.deals.contains_key(d) || board.late_deals.contains_key(d))
                && (board.shares.contains_key(d) || board.late_shares.contains_key(d))
        })
    }

    /// The keys under `qual`, a QUAL that `n - f` members signed in the
    /// session's agreement step when this member computed another one (it saw
    /// a deal the others did not wait for, or missed the end of a phase): it
    /// adopts that QUAL if it holds a deal and a matching share of every dealer
    /// in it. `None` when it cannot (then it has no share under that QUAL).
    pub(crate) fn adopt(&mut self, qual: &[NodeIndex]) -> Option<Arc<DkgOutput<S>>> {
        let config = &self.sharing.config;
        if (qual.len() as u32) < config.min_qualified || qual.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        // Deals and shares that came after the deal phase count here, for
        // the QUAL `n - f` members signed; each is checked below.
        let thresholds = config.thresholds.len();
        let board = &mut self.board;
        let mut held = Vec::with_capacity(qual.len());
        for d in qual {
            let deal = board.deals.get(d).or_else(|| board.late_deals.get(d))?;
            let shares = board.shares.get(d).or_else(|| board.late_shares.get(d))?;
            if shares.len() != thresholds
                || !share_matches::<S>(&self.sharing.domain, deal, self.me, shares)
            {
                return None;
            }
            held.push((*d, deal.clone(), shares.clone()));
        }
        for (d, deal, shares) in held {
            board.deals.entry(d).or_insert(deal);
            board.shares.entry(d).or_insert(shares);
        }
        let keys = self.sharing.keys_under(board, self.me, qual).ok()?;
        if keys
            .iter()
            .any(|k| !k.public_polynomial.iter().all(Point::in_group))
        {
            return None;
        }
        self.phase = DkgPhase::Done;
        let config = &self.sharing.config;
        Some(Arc::new(DkgOutput {
            session: config.session,
            n: config.n,
            me: self.me,
            verdicts: board.verdicts(qual.to_vec()),
            keys,
        }))
    }
}
