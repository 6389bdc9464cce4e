//! The steps of the phase machine: deal (step 1), take in what the others
//! send, complain (step 2), justify (step 3), and judge the complaints before
//! the protocol finalizes (step 4).

use super::{DealerSet, PhaseMachine, PhaseOutput, Sharing};
use crate::curve::Point;
use crate::dkg::batch::{commit_shares, SharePath};
use crate::dkg::relay::Kind;
use crate::dkg::{
    complaints, share_matches, Commitments, Complaint, Deal, DealtShares, Disqualification,
    DkgMessage, DkgPhase, DkgTimer, Justification,
};
use crate::effect::Effect;
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::{NodeIndex, Time};
use std::sync::Arc;

impl<S: Scheme, P: Sharing<S>> PhaseMachine<S, P> {
    /// Step 1: deal (if a dealer) and arm the end of the deal phase.
    pub(super) fn start(&mut self, now: Time) -> Vec<PhaseOutput<S, P::Output>> {
        if self.phase != DkgPhase::Idle {
            return Vec::new();
        }
        self.phase = DkgPhase::Dealing;
        let mut out = Vec::new();
        if let Some(polynomials) = self.sharing.polynomials(self.me, &mut self.rng) {
            self.deal(&polynomials, &mut out);
        }
        out.push(self.timer(now, DkgTimer::EndOfDeal));
        out
    }

    /// Broadcasts the commitments to `polynomials` and sends each receiver
    /// its shares.
    fn deal(&mut self, polynomials: &[Vec<Scalar>], out: &mut Vec<PhaseOutput<S, P::Output>>) {
        let commitments: Vec<Vec<S::PublicKey>> = polynomials
            .iter()
            .map(|poly| poly.iter().map(S::PublicKey::mul_generator).collect())
            .collect();
        let evaluations: Vec<Vec<Scalar>> = polynomials
            .iter()
            .map(|poly| self.sharing.domain().evaluate_all(poly))
            .collect();
        let session = self.sharing.session();
        let receivers = self.sharing.receiver_count();
        let member_shares =
            |j: u32| -> Vec<Scalar> { evaluations.iter().map(|e| e[j as usize]).collect() };
        let (tree, salts) =
            commit_shares(&session, self.me, receivers, &mut self.rng, member_shares);
        let tree = Arc::new(tree);
        let commitments = Commitments::new(&commitments);
        let deal = Arc::new(Deal::new(session, self.me, commitments, tree.root()));
        self.board.deals.insert(self.me, deal.clone());
        out.push(PhaseOutput::Effect(Effect::Broadcast(DkgMessage::Deal(
            deal,
        ))));
        for j in 0..receivers {
            let Some(to) = self.sharing.participant_of_receiver(NodeIndex(j)) else {
                continue;
            };
            let shares = member_shares(j);
            let path = SharePath::shared(&tree, NodeIndex(j));
            if to == self.me {
                let salt = salts[j as usize];
                self.board.shares_committed.insert(self.me, (salt, path));
                self.board.shares.insert(self.me, shares);
            } else {
                let message = DealtShares {
                    session,
                    dealer: self.me,
                    recipient: to,
                    shares,
                    salt: salts[j as usize],
                    path,
                };
                self.sharing.sent(to, &message);
                out.push(PhaseOutput::Effect(Effect::Send {
                    to,
                    message: DkgMessage::Shares(message),
                }));
            }
        }
        self.board.dealt = Some(evaluations);
        self.board.dealt_tree = Some((tree, salts));
    }

    /// The shares this dealer sent participant `to`, rebuilt from what it
    /// dealt (the same message, byte for byte); `None` before it dealt, or
    /// once it erased what it dealt, or for a participant that receives none.
    pub fn dealt_shares(&self, to: NodeIndex) -> Option<DealtShares> {
        let (Some(evaluations), Some((tree, salts))) = (&self.board.dealt, &self.board.dealt_tree)
        else {
            return None;
        };
        let j = self.sharing.receiver(to)?;
        Some(DealtShares {
            session: self.sharing.session(),
            dealer: self.me,
            recipient: to,
            shares: evaluations
                .iter()
                .map(|e| e.get(j.0 as usize).copied())
                .collect::<Option<_>>()?,
            salt: *salts.get(j.0 as usize)?,
            path: SharePath::shared(tree, j),
        })
    }

    /// A message from participant `from` (as the transport authenticated it).
    pub(super) fn on_message(&mut self, from: NodeIndex, message: DkgMessage<S>) {
        if from.0 >= self.sharing.participants() {
            return;
        }
        let late = !matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
        let message = match message {
            DkgMessage::Deal(deal) if late => return self.late_deal(from, deal),
            DkgMessage::Shares(s) if late => return self.late_shares(from, s),
            _ if self.is_over() => return,
            message => message,
        };
        let session = self.sharing.session();
        match message {
            DkgMessage::Deal(deal) => {
                if deal.session != session
                    || deal.dealer != from
                    || !self.sharing.is_dealer(from)
                    || self.board.deals.contains_key(&from)
                {
                    return;
                }
                if let Some(reason) = self.sharing.deal_fault(&deal) {
                    self.board.disqualify(from, reason);
                }
                self.board.deals.insert(from, deal);
            }
            DkgMessage::Shares(s) => {
                if !self.takes_shares(from, &s) {
                    return;
                }
                self.board.shares_committed.insert(from, (s.salt, s.path));
                self.board.shares.insert(from, s.shares);
            }
            DkgMessage::Complaint(c) => {
                let accepting = matches!(
                    self.phase,
                    DkgPhase::Idle | DkgPhase::Dealing | DkgPhase::Complaining
                );
                if c.session != session
                    || c.from != from
                    || !accepting
                    || self.sharing.receiver(from).is_none()
                    || self.board.faulty.contains(&from)
                {
                    return;
                }
                // A complaint naming nobody only says that its sender is done
                // (with a hub it comes point to point, not relayed): one naming
                // dealers still counts after it, the first such one only.
                self.board.complainers.insert(from);
                if c.dealers.is_empty() || !self.board.complained.insert(from) {
                    return;
                }
                for d in c.dealers {
                    if self.sharing.is_dealer(d) {
                        self.board.complaints.entry(d).or_default().insert(from);
                    }
                }
            }
            DkgMessage::Justification(j) => {
                if j.session != session
                    || j.dealer != from
                    || self.phase == DkgPhase::Idle
                    || !self.sharing.is_dealer(from)
                {
                    return;
                }
                self.board.justifications.entry(from).or_insert(j);
            }
        }
    }

    /// Whether `s` are this receiver's shares from dealer `from`, the first.
    fn takes_shares(&self, from: NodeIndex, s: &DealtShares) -> bool {
        s.session == self.sharing.session()
            && s.dealer == from
            && s.recipient == self.me
            && self.sharing.receiver(self.me).is_some()
            && self.sharing.is_dealer(from)
            && s.shares.len() == self.sharing.thresholds().len()
            && !self.board.shares.contains_key(&from)
    }

    /// A deal after the deal phase, kept apart (the first of each dealer) for
    /// adoption alone: it never counts toward this participant's QUAL.
    fn late_deal(&mut self, from: NodeIndex, deal: Arc<Deal<S>>) {
        if deal.session == self.sharing.session()
            && deal.dealer == from
            && self.sharing.is_dealer(from)
            && self.sharing.keeps_late_deal(&deal)
            && !self.board.deals.contains_key(&from)
        {
            self.board.late_deals.entry(from).or_insert(deal);
        }
    }

    /// Shares after the deal phase, kept as [`Self::late_deal`] keeps deals.
    fn late_shares(&mut self, from: NodeIndex, s: DealtShares) {
        if self.takes_shares(from, &s) {
            self.board.late_shares.entry(from).or_insert(s.shares);
        }
    }

    /// Step 2: disqualify silent dealers (and those the protocol rejects); as
    /// a receiver, check the shares and complain (naming nobody when every
    /// share is good).
    pub(super) fn end_of_deal(&mut self, now: Time) -> Vec<PhaseOutput<S, P::Output>> {
        let mut out = Vec::new();
        // The deals this participant holds are final: let the relay compare them.
        self.announce(Kind::Deal, &mut out);
        for d in self.sharing.dealers() {
            if !self.board.deals.contains_key(&d) {
                self.board.disqualify(d, Disqualification::NoDeal);
            }
        }
        for (d, reason) in self.sharing.check_deals(&self.board) {
            self.board.disqualify(d, reason);
        }
        self.phase = DkgPhase::Complaining;
        if self.sharing.receiver(self.me).is_some() {
            let bad = self
                .sharing
                .bad_dealers(&self.board, self.me, &mut self.rng);
            // The authentication paths served their check: 12 hashes per
            // dealer at 4,096 members, kept by every member until the end
            // otherwise.
            self.board.shares_committed.clear();
            self.complain(bad, &mut out);
        }
        out.push(self.timer(now, DkgTimer::EndOfComplaints));
        out
    }

    /// Records and sends this receiver's complaint against `bad`.
    fn complain(&mut self, bad: DealerSet, out: &mut Vec<PhaseOutput<S, P::Output>>) {
        for d in &bad {
            self.board.complaints.entry(*d).or_default().insert(self.me);
        }
        self.board.complainers.insert(self.me);
        if !bad.is_empty() {
            self.board.complained.insert(self.me);
        }
        let complaint = Complaint {
            session: self.sharing.session(),
            from: self.me,
            dealers: bad.into_iter().collect(),
        };
        if self.has_hub() && complaint.dealers.is_empty() {
            // Nothing to complain about: only the committee waits for it.
            for d in self.sharing.dealers() {
                if d != self.me {
                    out.push(PhaseOutput::Effect(Effect::Send {
                        to: d,
                        message: DkgMessage::Complaint(complaint.clone()),
                    }));
                }
            }
        } else {
            out.push(PhaseOutput::Effect(Effect::Broadcast(
                DkgMessage::Complaint(complaint),
            )));
        }
    }

    /// Step 3: answer complaints against this dealer.
    pub(super) fn end_of_complaints(&mut self, now: Time) -> Vec<PhaseOutput<S, P::Output>> {
        self.phase = DkgPhase::Justifying;
        let mut out = Vec::new();
        self.announce(Kind::Complaint, &mut out);
        let board = &self.board;
        let complainers = board.complaints.get(&self.me).cloned().unwrap_or_default();
        if let (Some(dealt), false) = (&board.dealt, complainers.is_empty()) {
            if !board.disqualified.contains_key(&self.me) {
                let revealed = complainers
                    .iter()
                    .filter_map(|c| {
                        let j = self.sharing.receiver(*c)?.0 as usize;
                        Some((*c, dealt.iter().map(|e| e[j]).collect()))
                    })
                    .collect();
                let justification = Arc::new(Justification {
                    session: self.sharing.session(),
                    dealer: self.me,
                    revealed,
                });
                self.board
                    .justifications
                    .insert(self.me, justification.clone());
                out.push(PhaseOutput::Effect(Effect::Broadcast(
                    DkgMessage::Justification(justification),
                )));
            }
        }
        out.push(self.timer(now, DkgTimer::EndOfJustifications));
        out
    }

    /// Step 4: every complaint must be answered by a revealed share that
    /// matches the dealer's commitments (a complainer takes the revealed
    /// one); then the protocol decides QUAL and the output.
    pub(crate) fn finalize(&mut self) -> Vec<PhaseOutput<S, P::Output>> {
        let board = &self.board;
        let sharing = &self.sharing;
        let count = sharing.thresholds().len();
        let judgement = complaints::judge(
            &board.complaints,
            &board.justifications,
            &board.deals,
            |d| board.disqualified.contains_key(&d),
            self.me,
            |deal, c, shares| match sharing.receiver(c) {
                Some(at) => {
                    shares.len() == count && share_matches::<S>(sharing.domain(), deal, at, shares)
                }
                None => false,
            },
        );
        for (dealer, reason) in judgement.disqualified {
            self.board.disqualify(dealer, reason);
        }
        self.board.shares.extend(judgement.revealed_to_me);
        match self.sharing.finalize(&mut self.board, self.me) {
            Ok(output) => {
                self.phase = DkgPhase::Done;
                vec![PhaseOutput::Done(Arc::new(output))]
            }
            Err(failure) => {
                self.phase = DkgPhase::Failed;
                vec![PhaseOutput::Failed(failure)]
            }
        }
    }
}
