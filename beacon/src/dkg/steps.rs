//! Steps 1-3 of the DKG: deal, receive, complain and justify, and the ends of
//! the dealing and complaint phases.

use super::batch::{batch_check, commit_shares, in_share_tree, share_leaf, SharePath};
use super::relay::Kind;
use super::*;
use crate::curve::Point;
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::{NodeIndex, Time};
use std::collections::BTreeSet;
use std::sync::Arc;

impl<S: Scheme> Dkg<S> {
    /// Step 1: deal (if a dealer) and arm the end of the deal phase.
    pub(super) fn start(&mut self, now: Time) -> Vec<DkgAction<S>> {
        if self.phase != DkgPhase::Idle {
            return Vec::new();
        }
        self.phase = DkgPhase::Dealing;
        let mut out = Vec::new();
        if self.config.is_dealer(self.me) {
            let mut commitments = Vec::with_capacity(self.config.thresholds.len());
            let mut evaluations = Vec::with_capacity(self.config.thresholds.len());
            for &t in &self.config.thresholds {
                let poly: Vec<Scalar> = (0..t).map(|_| Scalar::random(&mut self.rng)).collect();
                commitments.push(poly.iter().map(S::PublicKey::mul_generator).collect());
                evaluations.push(self.domain.evaluate_all(&poly));
            }
            let session = self.config.session;
            let member_shares =
                |j: u32| -> Vec<Scalar> { evaluations.iter().map(|e| e[j as usize]).collect() };
            let (tree, salts) = commit_shares(
                &session,
                self.me,
                self.config.n,
                &mut self.rng,
                member_shares,
            );
            let tree = Arc::new(tree);
            let commitments = Commitments::new(&commitments);
            let deal = Arc::new(Deal::new(session, self.me, commitments, tree.root()));
            self.deals.insert(self.me, deal.clone());
            out.push(DkgAction::Broadcast(DkgMessage::Deal(deal)));
            for j in 0..self.config.n {
                let shares = member_shares(j);
                if j == self.me.0 {
                    self.shares_committed.insert(
                        self.me,
                        (salts[j as usize], SharePath::shared(&tree, NodeIndex(j))),
                    );
                    self.shares.insert(self.me, shares);
                } else {
                    let message = DealtShares {
                        session,
                        dealer: self.me,
                        recipient: NodeIndex(j),
                        shares,
                        salt: salts[j as usize],
                        path: SharePath::shared(&tree, NodeIndex(j)),
                    };
                    out.push(DkgAction::Send {
                        to: NodeIndex(j),
                        message: DkgMessage::Shares(message),
                    });
                }
            }
            self.dealt = Some(evaluations);
        }
        out.push(self.timer(now, DkgTimer::EndOfDeal));
        out
    }

    /// A deal after the deal phase, kept apart (the first of each dealer)
    /// for [`Dkg::adopt`] alone.
    fn late_deal(&mut self, from: NodeIndex, deal: Arc<Deal<S>>) {
        let well_formed = deal.commitments.has_degrees(&self.config.thresholds);
        if deal.session == self.config.session
            && deal.dealer == from
            && well_formed
            && self.config.is_dealer(from)
            && !self.deals.contains_key(&from)
        {
            self.late_deals.entry(from).or_insert(deal);
        }
    }

    /// Shares after the deal phase, kept as [`Dkg::late_deal`] keeps deals.
    fn late_shares(&mut self, from: NodeIndex, s: DealtShares) {
        if s.session == self.config.session
            && s.dealer == from
            && s.recipient == self.me
            && self.config.is_dealer(from)
            && s.shares.len() == self.config.thresholds.len()
            && !self.shares.contains_key(&from)
        {
            self.late_shares.entry(from).or_insert(s.shares);
        }
    }

    pub(super) fn on_message(&mut self, from: NodeIndex, message: DkgMessage<S>) {
        if from.0 >= self.config.n {
            return;
        }
        let thresholds = self.config.thresholds.len();
        let late = !matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
        let message = match message {
            DkgMessage::Deal(deal) if late => return self.late_deal(from, deal),
            DkgMessage::Shares(s) if late => return self.late_shares(from, s),
            _ if matches!(self.phase, DkgPhase::Done | DkgPhase::Failed) => return,
            message => message,
        };
        match message {
            DkgMessage::Deal(deal) => {
                let accepting = matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
                if deal.session != self.config.session || deal.dealer != from || !accepting {
                    return;
                }
                if !self.config.is_dealer(from) || self.deals.contains_key(&from) {
                    return;
                }
                let well_formed = deal.commitments.has_degrees(&self.config.thresholds);
                if !well_formed {
                    self.disqualify(from, "commitments of the wrong degree");
                }
                self.deals.insert(from, deal);
            }
            DkgMessage::Shares(s) => {
                let accepting = matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
                if s.session != self.config.session
                    || s.dealer != from
                    || s.recipient != self.me
                    || !accepting
                {
                    return;
                }
                if self.config.is_dealer(from)
                    && s.shares.len() == thresholds
                    && !self.shares.contains_key(&from)
                {
                    self.shares_committed.insert(from, (s.salt, s.path));
                    self.shares.insert(from, s.shares);
                }
            }
            DkgMessage::Complaint(c) => {
                let accepting = matches!(
                    self.phase,
                    DkgPhase::Idle | DkgPhase::Dealing | DkgPhase::Complaining
                );
                if c.session != self.config.session
                    || c.from != from
                    || !accepting
                    || self.faulty.contains(&from)
                {
                    return;
                }
                // A complaint naming nobody only says that its sender is done
                // (with a hub it comes point to point, not relayed): one naming
                // dealers still counts after it, the first such one only.
                self.complainers.insert(from);
                if c.dealers.is_empty() || !self.complained.insert(from) {
                    return;
                }
                for d in c.dealers {
                    if self.config.is_dealer(d) {
                        self.complaints.entry(d).or_default().insert(from);
                    }
                }
            }
            DkgMessage::Justification(j) => {
                if j.session != self.config.session
                    || j.dealer != from
                    || self.phase == DkgPhase::Idle
                {
                    return;
                }
                if self.config.is_dealer(from) {
                    self.justifications.entry(from).or_insert(j);
                }
            }
        }
    }

    pub(super) fn disqualify(&mut self, dealer: NodeIndex, reason: &str) {
        self.disqualified
            .entry(dealer)
            .or_insert_with(|| reason.to_string());
    }

    /// Dealers whose deal arrived well formed and who are not (yet) disqualified.
    pub(super) fn candidates(&self) -> Vec<NodeIndex> {
        self.config
            .dealer_list()
            .into_iter()
            .filter(|d| self.deals.contains_key(d) && !self.disqualified.contains_key(d))
            .collect()
    }

    /// Step 2: disqualify silent dealers, check own shares, complain (naming
    /// nobody when every share is good).
    pub(super) fn end_of_deal(&mut self, now: Time) -> Vec<DkgAction<S>> {
        let mut out = Vec::new();
        // The deals this member holds are final: let the relay compare them.
        self.announce(Kind::Deal, &mut out);
        for d in self.config.dealer_list() {
            if !self.deals.contains_key(&d) {
                self.disqualify(d, "no deal before the deadline");
            }
        }
        let candidates = self.candidates();
        // Missing shares, or shares the dealer did not commit to, are bad.
        let size = self.domain.size();
        let mut bad: BTreeSet<NodeIndex> = candidates
            .iter()
            .filter(|d| {
                let (Some(shares), Some((salt, path))) =
                    (self.shares.get(d), self.shares_committed.get(d))
                else {
                    return true;
                };
                let leaf = share_leaf(&self.config.session, **d, self.me, salt, shares);
                !in_share_tree(
                    &self.deals[d].share_root,
                    leaf,
                    self.me,
                    &path.hashes(),
                    size,
                )
            })
            .copied()
            .collect();
        // The authentication paths served their check: 12 hashes per dealer at
        // 4,096 members, kept by every member until the end otherwise.
        self.shares_committed.clear();
        let dealings: Vec<(&Deal<S>, &[Scalar])> = candidates
            .iter()
            .filter(|d| !bad.contains(d))
            .map(|d| (self.deals[d].as_ref(), self.shares[d].as_slice()))
            .collect();
        // One batched check of every dealing; single ones only if it fails.
        let session = self.config.session;
        if !batch_check::<S>(&self.domain, &self.memo, &session, self.me, &dealings) {
            for (deal, shares) in &dealings {
                if !share_matches::<S>(&self.domain, deal, self.me, shares) {
                    bad.insert(deal.dealer);
                }
            }
        }
        self.phase = DkgPhase::Complaining;
        self.my_complaints = bad.clone();
        for d in &bad {
            self.complaints.entry(*d).or_default().insert(self.me);
        }
        self.complainers.insert(self.me);
        if !bad.is_empty() {
            self.complained.insert(self.me);
        }
        let complaint = Complaint {
            session: self.config.session,
            from: self.me,
            dealers: bad.into_iter().collect(),
        };
        if self.has_hub() && complaint.dealers.is_empty() {
            // Nothing to complain about: only the committee waits for it.
            for d in self.config.dealer_list() {
                if d != self.me {
                    out.push(DkgAction::Send {
                        to: d,
                        message: DkgMessage::Complaint(complaint.clone()),
                    });
                }
            }
        } else {
            out.push(DkgAction::Broadcast(DkgMessage::Complaint(complaint)));
        }
        out.push(self.timer(now, DkgTimer::EndOfComplaints));
        out
    }

    /// Step 3: answer complaints against this dealer.
    pub(super) fn end_of_complaints(&mut self, now: Time) -> Vec<DkgAction<S>> {
        self.phase = DkgPhase::Justifying;
        let mut out = Vec::new();
        self.announce(Kind::Complaint, &mut out);
        let complainers = self.complaints.get(&self.me).cloned().unwrap_or_default();
        if self.config.is_dealer(self.me)
            && !complainers.is_empty()
            && !self.disqualified.contains_key(&self.me)
        {
            if let Some(dealt) = &self.dealt {
                let revealed: Vec<(NodeIndex, Vec<Scalar>)> = complainers
                    .iter()
                    .map(|j| (*j, dealt.iter().map(|e| e[j.0 as usize]).collect()))
                    .collect();
                let justification = Arc::new(Justification {
                    session: self.config.session,
                    dealer: self.me,
                    revealed,
                });
                self.justifications.insert(self.me, justification.clone());
                out.push(DkgAction::Broadcast(DkgMessage::Justification(
                    justification,
                )));
            }
        }
        out.push(self.timer(now, DkgTimer::EndOfJustifications));
        out
    }
}
