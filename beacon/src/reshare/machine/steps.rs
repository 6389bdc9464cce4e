//! The ends of the phases: complaints, justifications, and the combination of
//! the qualified dealers' sub-polynomials (steps 2 to 4 of the
//! [protocol](crate::reshare)).

use super::*;
use crate::reshare::verify;

/// Shared points of the key group.
type Points<S> = Arc<Vec<<S as Scheme>::PublicKey>>;

impl<S: Scheme> Resharer<S> {
    /// Old dealers with a deal that are not (yet) disqualified.
    fn candidates(&self) -> Vec<NodeIndex> {
        self.deals
            .keys()
            .filter(|d| !self.disqualified.contains_key(d))
            .copied()
            .collect()
    }

    /// Step 2: disqualify silent dealers and constants off the old polynomial;
    /// as a new member, check the sub-shares and complain.
    pub(super) fn end_of_deal(&mut self, now: Time) -> Vec<ReshareAction<S>> {
        for d in 0..self.epoch.old_members.len() as u32 {
            if !self.deals.contains_key(&NodeIndex(d)) {
                self.disqualify(NodeIndex(d), "no deal before the deadline");
            }
        }
        for d in self.candidates() {
            if self.deals[&d].commitments.point(0, 0) != Some(self.old_keys.key(d)) {
                self.disqualify(d, "commitment inconsistent with the old verification key");
            }
        }
        self.phase = DkgPhase::Complaining;
        let mut out = Vec::new();
        self.announce(Kind::Deal, &mut out);
        if let Some(j) = self.roster.new_index(self.me) {
            // Every new member broadcasts its complaint, empty when every
            // sub-share checks out, so that the others know when all are in.
            let bad = self.bad_dealers(j);
            for d in &bad {
                self.complaints.entry(*d).or_default().insert(self.me);
            }
            self.complainers.insert(self.me);
            let complaint = Complaint {
                session: self.session,
                from: self.me,
                dealers: bad,
            };
            out.push(ReshareAction::Broadcast(DkgMessage::Complaint(complaint)));
        }
        out.push(self.timer(now, DkgTimer::EndOfComplaints));
        out
    }

    /// The candidate dealers whose sub-share to new member `j` is missing or wrong.
    fn bad_dealers(&mut self, j: NodeIndex) -> Vec<NodeIndex> {
        let Ok(x) = self.new_domain.point(j) else {
            return Vec::new();
        };
        let candidates = self.candidates();
        let (with, without): (Vec<NodeIndex>, Vec<NodeIndex>) = candidates
            .into_iter()
            .partition(|d| self.shares.contains_key(d));
        let received: Vec<(&Deal<S>, Scalar)> = with
            .iter()
            .map(|d| (&*self.deals[d], self.shares[d]))
            .collect();
        if verify::sub_shares_match::<S, _>(&received, x, &mut self.rng) {
            return without;
        }
        let mut bad = without;
        for (d, (deal, value)) in with.iter().zip(&received) {
            if !crate::dkg::share_matches::<S>(&self.new_domain, deal, j, &[*value]) {
                bad.push(*d);
            }
        }
        bad.sort_unstable();
        bad
    }

    /// Step 3: answer complaints against this dealer.
    pub(super) fn end_of_complaints(&mut self, now: Time) -> Vec<ReshareAction<S>> {
        self.phase = DkgPhase::Justifying;
        let mut out = Vec::new();
        self.announce(Kind::Complaint, &mut out);
        let complainers = self.complaints.get(&self.me).cloned().unwrap_or_default();
        if let (Some(dealt), false) = (&self.dealt, complainers.is_empty()) {
            if !self.disqualified.contains_key(&self.me) {
                let revealed = complainers
                    .iter()
                    .filter_map(|c| {
                        let j = self.roster.new_index(*c)?;
                        Some((*c, vec![dealt[j.0 as usize]]))
                    })
                    .collect();
                let justification = Arc::new(Justification {
                    session: self.session,
                    dealer: self.me,
                    revealed,
                });
                self.justifications.insert(self.me, justification.clone());
                out.push(ReshareAction::Broadcast(DkgMessage::Justification(
                    justification,
                )));
            }
        }
        out.push(self.timer(now, DkgTimer::EndOfJustifications));
        out
    }

    /// Step 4, first half: every complaint must be answered by a revealed
    /// sub-share that matches the dealer's commitments.
    fn judge_complaints(&mut self) {
        let verdicts = crate::dkg::complaints::judge(
            &self.complaints,
            &self.justifications,
            &self.deals,
            |d| self.disqualified.contains_key(&d),
            self.me,
            |deal, c, value| match self.roster.new_index(c) {
                Some(at) => {
                    value.len() == 1
                        && crate::dkg::share_matches::<S>(&self.new_domain, deal, at, value)
                }
                None => false,
            },
        );
        for (dealer, reason) in verdicts.disqualified {
            self.disqualify(dealer, reason);
        }
        for (dealer, value) in verdicts.revealed_to_me {
            self.shares.insert(dealer, value[0]);
        }
    }

    fn fail(&mut self, error: Error) -> Vec<ReshareAction<S>> {
        self.phase = DkgPhase::Failed;
        vec![ReshareAction::Failed(error)]
    }

    /// Step 4: decide QUAL, combine the sub-polynomials of its first `t_old`
    /// dealers by Lagrange interpolation at zero over their old points.
    pub(super) fn finalize(&mut self) -> Vec<ReshareAction<S>> {
        self.judge_complaints();
        let qual = self.candidates();
        let need = self.epoch.old_threshold();
        if (qual.len() as u64) < u64::from(need) {
            let qualified = qual.len() as u32;
            return self.fail(Error::TooFewDealers { qualified, need });
        }
        let method = if self.epoch.old_members.len() as u32 >= ROOTS_OF_UNITY_FROM {
            InterpolationMethod::RootsOfUnity
        } else {
            InterpolationMethod::Naive
        };
        // Any t_old qualified dealers determine the secret; the first t_old of
        // QUAL are combined (at least one of them is honest).
        let combined = qual[..need as usize].to_vec();
        match self.combine(qual, &combined, method) {
            Ok(output) => {
                self.phase = DkgPhase::Done;
                vec![ReshareAction::Reshared(Arc::new(output))]
            }
            Err(e) => self.fail(e),
        }
    }

    /// The result under `combined`, the `t_old` dealers that other new members
    /// combined (read off the chain) when this participant combined others: it
    /// started late, and took a dealer the others had given up on. `None` when
    /// it lacks a deal of one of them, or (as a new member) a sub-share that
    /// matches it.
    pub fn adopt(&mut self, combined: &[NodeIndex]) -> Option<Arc<ReshareOutput<S>>> {
        let need = self.epoch.old_threshold() as usize;
        if combined.len() != need || combined.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        // Deals and sub-shares that came after the deal phase count here: the
        // chain named these dealers, and each is checked below against the
        // old polynomial and its commitments.
        let mut deals = Vec::with_capacity(combined.len());
        let mut values = Vec::with_capacity(combined.len());
        for d in combined {
            let deal = self.deals.get(d).or_else(|| self.late_deals.get(d))?;
            let well_formed = deal.commitments.has_degrees(&[self.epoch.new_threshold])
                && deal.commitments.point(0, 0) == Some(self.old_keys.key(*d))
                && deal.commitments_in_group();
            if !well_formed {
                return None;
            }
            if let Some(j) = self.roster.new_index(self.me) {
                let value = self.shares.get(d).or_else(|| self.late_shares.get(d))?;
                if !crate::dkg::share_matches::<S>(&self.new_domain, deal, j, &[*value]) {
                    return None;
                }
                values.push((*d, *value));
            }
            deals.push((*d, deal.clone()));
        }
        self.deals.extend(deals);
        self.shares.extend(values);
        let method = if self.epoch.old_members.len() as u32 >= ROOTS_OF_UNITY_FROM {
            InterpolationMethod::RootsOfUnity
        } else {
            InterpolationMethod::Naive
        };
        let output = self.combine(combined.to_vec(), combined, method).ok()?;
        self.phase = DkgPhase::Done;
        Some(Arc::new(output))
    }

    /// Combines the sub-polynomials of `combined` (from `qual`).
    fn combine(
        &mut self,
        qual: Vec<NodeIndex>,
        combined: &[NodeIndex],
        method: InterpolationMethod,
    ) -> Result<ReshareOutput<S>, Error> {
        let lambdas = self.old_keys.domain().lagrange_at_zero(combined, method)?;
        let (public_polynomial, verification_keys) = self.public_material(combined, &lambdas);
        if Some(&public_polynomial[0]) != self.epoch.group_key() {
            return Err(Error::Reshare(
                "the combined polynomial does not keep the group key".into(),
            ));
        }
        let me = self.roster.new_index(self.me);
        let share = match me {
            None => None,
            Some(j) => {
                let values: Option<Vec<Scalar>> = combined
                    .iter()
                    .map(|d| self.shares.get(d).copied())
                    .collect();
                let Some(values) = values else {
                    return Err(Error::Reshare(
                        "a qualified dealer's sub-share is missing".into(),
                    ));
                };
                let share = SecretShare::new(j, lambdas.interpolate(&values)?);
                if share.verification_key::<S>() != verification_keys[j.0 as usize] {
                    return Err(Error::Reshare(
                        "own new share does not match the new public polynomial".into(),
                    ));
                }
                Some(share)
            }
        };
        Ok(ReshareOutput {
            session: self.session,
            epoch: self.epoch.epoch,
            n: self.epoch.new_members.len() as u32,
            me,
            qual,
            disqualified: self
                .disqualified
                .iter()
                .map(|(d, r)| (*d, r.clone()))
                .collect(),
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
        combined: &[NodeIndex],
        lambdas: &LagrangeCoefficients,
    ) -> (Points<S>, Points<S>) {
        let deals: Vec<&Deal<S>> = combined.iter().map(|d| &*self.deals[d]).collect();
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
