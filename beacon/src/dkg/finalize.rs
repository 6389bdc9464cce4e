//! Step 4 of the DKG: QUAL, and the keys derived from it (group polynomials and
//! verification keys, shared through the memo between simulated members).

use super::*;
use crate::curve::Point;
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::threshold::SecretShare;
use crate::NodeIndex;
use sha2::{Digest, Sha256};
use std::sync::Arc;

impl<S: Scheme> Dkg<S> {
    /// Step 4: decide QUAL and derive the keys.
    pub(super) fn finalize(&mut self) -> Vec<DkgAction<S>> {
        let thresholds = self.config.thresholds.len();
        let verdicts = super::complaints::judge(
            &self.complaints,
            &self.justifications,
            &self.deals,
            |d| self.disqualified.contains_key(&d),
            self.me,
            |deal, c, shares| {
                shares.len() == thresholds && share_matches::<S>(&self.domain, deal, c, shares)
            },
        );
        for (dealer, reason) in verdicts.disqualified {
            self.disqualify(dealer, reason);
        }
        self.shares.extend(verdicts.revealed_to_me);
        self.exclude_off_group();
        let qual = self.candidates();
        if (qual.len() as u32) < self.config.min_qualified {
            self.phase = DkgPhase::Failed;
            return vec![DkgAction::Failed(format!(
                "only {} qualified dealers, need {}",
                qual.len(),
                self.config.min_qualified
            ))];
        }
        let keys = match self.keys_under(&qual) {
            Ok(keys) => keys,
            Err(reason) => {
                self.phase = DkgPhase::Failed;
                return vec![DkgAction::Failed(reason)];
            }
        };
        self.phase = DkgPhase::Done;
        let output = DkgOutput {
            session: self.config.session,
            n: self.config.n,
            me: self.me,
            qual,
            disqualified: self
                .disqualified
                .iter()
                .map(|(d, r)| (*d, r.clone()))
                .collect(),
            keys,
        };
        vec![DkgAction::Complete(Arc::new(output))]
    }

    /// The keys under `qual`, a QUAL that `n - f` members signed in the
    /// session's agreement step when this member computed another one (it saw
    /// a deal the others did not wait for, or missed the end of a phase): it
    /// adopts that QUAL if it holds a deal and a matching share of every dealer
    /// in it. `None` when it cannot (then it has no share under that QUAL).
    /// Whether this member holds a deal and its shares from every dealer of
    /// `qual` (in the deal phase or after it), so that [`Dkg::adopt`] can
    /// decide.
    pub(crate) fn holds(&self, qual: &[NodeIndex]) -> bool {
        qual.iter().all(|d| {
            (self.deals.contains_key(d) || self.late_deals.contains_key(d))
                && (self.shares.contains_key(d) || self.late_shares.contains_key(d))
        })
    }

    pub(crate) fn adopt(&mut self, qual: &[NodeIndex]) -> Option<Arc<DkgOutput<S>>> {
        if (qual.len() as u32) < self.config.min_qualified || qual.windows(2).any(|w| w[0] >= w[1])
        {
            return None;
        }
        // Deals and shares that came after the deal phase count here, for
        // the QUAL `n - f` members signed; each is checked below.
        let thresholds = self.config.thresholds.clone();
        let mut held = Vec::with_capacity(qual.len());
        for d in qual {
            let deal = self.deals.get(d).or_else(|| self.late_deals.get(d))?;
            let shares = self.shares.get(d).or_else(|| self.late_shares.get(d))?;
            if shares.len() != thresholds.len()
                || !share_matches::<S>(&self.domain, deal, self.me, shares)
            {
                return None;
            }
            held.push((*d, deal.clone(), shares.clone()));
        }
        for (d, deal, shares) in held {
            self.deals.entry(d).or_insert(deal);
            self.shares.entry(d).or_insert(shares);
        }
        let keys = self.keys_under(qual).ok()?;
        if keys
            .iter()
            .any(|k| !k.public_polynomial.iter().all(Point::in_group))
        {
            return None;
        }
        self.phase = DkgPhase::Done;
        Some(Arc::new(DkgOutput {
            session: self.config.session,
            n: self.config.n,
            me: self.me,
            qual: qual.to_vec(),
            disqualified: self
                .disqualified
                .iter()
                .filter(|(d, _)| !qual.contains(d))
                .map(|(d, r)| (*d, r.clone()))
                .collect(),
            keys,
        }))
    }

    /// This member's key material under `qual` (one per threshold): its share
    /// the sum of the dealers' shares, checked against the group polynomial.
    fn keys_under(&mut self, qual: &[NodeIndex]) -> Result<Vec<ThresholdKeyMaterial<S>>, String> {
        let thresholds = self.config.thresholds.clone();
        let mut keys = Vec::with_capacity(thresholds.len());
        for (k, &t) in thresholds.iter().enumerate() {
            let value = qual
                .iter()
                .map(|d| self.shares.get(d).and_then(|s| s.get(k).copied()))
                .sum::<Option<Scalar>>()
                .ok_or("a qualified dealer's share is missing")?;
            let (public_polynomial, verification_keys) = self.derive(k, qual);
            let secret_share = SecretShare::new(self.me, value);
            if secret_share.verification_key::<S>() != verification_keys[self.me.0 as usize] {
                return Err(format!(
                    "threshold {t}: own share does not match the group polynomial"
                ));
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
    fn exclude_off_group(&mut self) {
        let qual = self.candidates();
        let mut clean = true;
        for k in 0..self.config.thresholds.len() {
            let poly = self.group_polynomial(k, &qual);
            let key = self.memo_key("group-polynomial-in-group", k, &qual);
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
            let key = self.memo_key("deal-in-group", 0, &[d]);
            let deal = &self.deals[&d];
            if !*self
                .memo
                .get_or_compute(key, || deal.commitments_in_group())
            {
                self.disqualify(d, "commitments outside the prime-order group");
            }
        }
    }

    pub(super) fn memo_key(&self, what: &str, k: usize, dealers: &[NodeIndex]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(what.as_bytes());
        h.update(self.config.session);
        h.update((k as u64).to_be_bytes());
        for d in dealers {
            h.update(self.deals[d].digest());
        }
        h.finalize().into()
    }

    /// The group polynomial (sum of the commitments of `dealers`) for threshold `k`
    /// and every member's verification key under it; derived once per dealer set.
    pub(super) fn derive(&mut self, k: usize, dealers: &[NodeIndex]) -> Derived<S> {
        let id = (k, dealers.to_vec());
        if let Some(found) = self.derived.get(&id) {
            return found.clone();
        }
        let poly = self.group_polynomial(k, dealers);
        let key = self.memo_key("verification-keys", k, dealers);
        let keys = self
            .memo
            .get_or_compute(key, || evaluate_in_exponent(&poly, &self.domain));
        self.derived.insert(id, (poly.clone(), keys.clone()));
        (poly, keys)
    }

    /// Sum of the commitments of `dealers` for threshold `k` (summed once per
    /// dealer set).
    pub(super) fn group_polynomial(
        &mut self,
        k: usize,
        dealers: &[NodeIndex],
    ) -> Arc<Vec<S::PublicKey>> {
        let id = (k, dealers.to_vec());
        if let Some(found) = self.polynomials.get(&id) {
            return found.clone();
        }
        let key = self.memo_key("group-polynomial", k, dealers);
        let poly = self.memo.get_or_compute(key, || {
            let t = self.config.thresholds[k] as usize;
            let mut sum = vec![S::PublicKey::identity(); t];
            for d in dealers {
                let row = self.deals[d].commitments.row(k).unwrap_or_default();
                for (acc, c) in sum.iter_mut().zip(row) {
                    *acc = acc.add_affine(c);
                }
            }
            sum
        });
        self.polynomials.insert(id, poly.clone());
        poly
    }
}
