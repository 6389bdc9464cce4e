//! One participant's resharing state machine: message intake and the four steps
//! of the protocol (see the [module documentation](super)).

mod steps;

use super::verify::OldKeys;
use super::*;
use crate::dkg::batch::commit_shares;
use crate::dkg::evaluate_in_exponent;
use crate::dkg::relay::Kind;
use crate::field::Scalar;
use crate::lagrange::{InterpolationMethod, LagrangeCoefficients};
use crate::memo::Memo;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeSet;

/// Old groups of at least this many members interpolate with the roots-of-unity
/// coefficients (all methods give the same result; this one is O(N log N)).
const ROOTS_OF_UNITY_FROM: u32 = 32;

/// One participant of a resharing.
pub struct Resharer<S: Scheme> {
    epoch: ReshareEpoch<S>,
    session: [u8; 32],
    roster: Roster,
    me: NodeIndex,
    old_share: Option<SecretShare>,
    old_keys: OldKeys<S>,
    new_domain: Arc<SignerDomain>,
    memo: Arc<Memo>,
    rng: ChaCha20Rng,
    phase: DkgPhase,
    deals: BTreeMap<NodeIndex, Arc<Deal<S>>>,
    /// Dealers excluded so far, with the reason (first reason wins).
    disqualified: BTreeMap<NodeIndex, String>,
    /// As a new member: the sub-share of each dealer.
    shares: BTreeMap<NodeIndex, Scalar>,
    /// dealer -> complainers.
    complaints: BTreeMap<NodeIndex, BTreeSet<NodeIndex>>,
    /// Participants proven to equivocate: their complaints do not count.
    faulty: BTreeSet<NodeIndex>,
    justifications: BTreeMap<NodeIndex, Arc<Justification>>,
    /// As a dealer: its sub-polynomial at every new member (secret).
    dealt: Option<Vec<Scalar>>,
    /// As a dealer: the sub-share message of each recipient (participant
    /// index), kept to send again to a recipient that asks
    /// ([`Resharer::resend_to`]) until the driver erases them.
    sent: BTreeMap<NodeIndex, DealtShares>,
    /// Deals and sub-shares that came after the deal phase: they never count
    /// toward this participant's QUAL, only toward [`Resharer::adopt`] of
    /// the dealers the chain names.
    late_deals: BTreeMap<NodeIndex, Arc<Deal<S>>>,
    late_shares: BTreeMap<NodeIndex, Scalar>,
    /// New members whose complaint broadcast (possibly empty) is in.
    complainers: BTreeSet<NodeIndex>,
    /// Whether broadcasts go through the relay: a phase then ends early only
    /// once the relay confirmed its kinds ([`ReshareInput::Confirmed`]).
    relayed: bool,
    confirmed: BTreeSet<Kind>,
    announced: BTreeSet<Kind>,
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
            return Err(Error::Reshare(format!(
                "{me:?} is neither an old nor a new member"
            )));
        };
        let session = epoch.session();
        let old_keys = OldKeys::new(&epoch, &session, memo.clone())?;
        if let Some(share) = &old_share {
            if roster.old_index(p) != Some(share.index) {
                return Err(Error::Reshare(format!(
                    "{me:?} holds a share of old index {}, but is participant {p}",
                    share.index
                )));
            }
            if share.verification_key::<S>() != old_keys.key(share.index) {
                return Err(Error::Reshare(format!(
                    "the old share of {} does not match the old public polynomial",
                    share.index
                )));
            }
        }
        let new_domain = SignerDomain::shared(epoch.new_members.len() as u32)?;
        Ok(Resharer {
            session,
            roster,
            me: p,
            old_share,
            old_keys,
            new_domain,
            memo,
            rng: ChaCha20Rng::from_seed(seed),
            phase: DkgPhase::Idle,
            deals: BTreeMap::new(),
            disqualified: BTreeMap::new(),
            shares: BTreeMap::new(),
            complaints: BTreeMap::new(),
            faulty: BTreeSet::new(),
            justifications: BTreeMap::new(),
            dealt: None,
            sent: BTreeMap::new(),
            late_deals: BTreeMap::new(),
            late_shares: BTreeMap::new(),
            complainers: BTreeSet::new(),
            relayed: false,
            confirmed: BTreeSet::new(),
            announced: BTreeSet::new(),
            epoch,
        })
    }

    /// Broadcasts go through the DKG's relay ([`crate::dkg::relay`]): a phase
    /// ends before its timeout only once the relay reports that every
    /// participant holds the same versions of its broadcasts, and the machine
    /// asks for those reports with [`ReshareAction::Announce`].
    pub fn with_relay(mut self) -> Self {
        self.relayed = true;
        self
    }

    /// The current phase.
    pub fn phase(&self) -> DkgPhase {
        self.phase
    }

    /// The epoch.
    pub fn epoch(&self) -> &ReshareEpoch<S> {
        &self.epoch
    }

    /// The session id every message names.
    pub fn session(&self) -> [u8; 32] {
        self.session
    }

    /// The participants.
    pub fn roster(&self) -> &Roster {
        &self.roster
    }

    /// This participant's index.
    pub fn me(&self) -> NodeIndex {
        self.me
    }

    /// Handles one input at time `now` and returns the resulting actions.
    pub fn handle(&mut self, now: Time, input: ReshareInput<S>) -> Vec<ReshareAction<S>> {
        let mut out = match input {
            ReshareInput::Start => self.start(now),
            ReshareInput::Message { from, message } => {
                self.on_message(from, message);
                Vec::new()
            }
            ReshareInput::Timer(DkgTimer::EndOfDeal) if self.phase == DkgPhase::Dealing => {
                self.end_of_deal(now)
            }
            ReshareInput::Timer(DkgTimer::EndOfComplaints)
                if self.phase == DkgPhase::Complaining =>
            {
                self.end_of_complaints(now)
            }
            ReshareInput::Timer(DkgTimer::EndOfJustifications)
                if self.phase == DkgPhase::Justifying =>
            {
                self.finalize()
            }
            ReshareInput::Timer(_) => Vec::new(),
            ReshareInput::Faulty { member } => {
                if member.0 < self.roster.len() && !self.is_over() {
                    self.faulty.insert(member);
                    for complainers in self.complaints.values_mut() {
                        complainers.remove(&member);
                    }
                    self.complaints.retain(|_, c| !c.is_empty());
                    if self.roster.old_index(member).is_some() {
                        self.disqualify(member, "equivocating broadcasts");
                    }
                }
                Vec::new()
            }
            ReshareInput::Confirmed(kind) => {
                self.confirmed.insert(kind);
                Vec::new()
            }
        };
        if self.phase != DkgPhase::Idle {
            self.advance(now, &mut out);
        }
        out
    }

    /// Ends every phase whose messages are all in (several in a row when the
    /// next one has nothing left to wait for), and announces complete kinds;
    /// the timeouts only bound the wait for silent or slow participants.
    fn advance(&mut self, now: Time, out: &mut Vec<ReshareAction<S>>) {
        loop {
            self.announce_complete(out);
            let next = match self.phase {
                DkgPhase::Dealing if self.deals_in() && self.shares_in() => self.end_of_deal(now),
                DkgPhase::Complaining
                    if self.complaints_in()
                        && self.is_confirmed(Kind::Deal)
                        && self.is_confirmed(Kind::Complaint) =>
                {
                    self.end_of_complaints(now)
                }
                DkgPhase::Justifying
                    if self.expected_justifications().is_empty()
                        || (self.justifications_in() && self.is_confirmed(Kind::Justification)) =>
                {
                    self.finalize()
                }
                _ => return,
            };
            out.extend(next);
        }
    }

    fn is_confirmed(&self, kind: Kind) -> bool {
        !self.relayed || self.confirmed.contains(&kind)
    }

    fn announce(&mut self, kind: Kind, out: &mut Vec<ReshareAction<S>>) {
        if self.relayed && self.announced.insert(kind) {
            out.push(ReshareAction::Announce(kind));
        }
    }

    /// Announces each kind of broadcast once this participant holds all it
    /// waits for.
    fn announce_complete(&mut self, out: &mut Vec<ReshareAction<S>>) {
        if !self.relayed || self.is_over() || self.phase == DkgPhase::Idle {
            return;
        }
        if self.deals_in() {
            self.announce(Kind::Deal, out);
        }
        if self.complaints_in() {
            self.announce(Kind::Complaint, out);
        }
        if self.phase == DkgPhase::Justifying
            && !self.expected_justifications().is_empty()
            && self.justifications_in()
        {
            self.announce(Kind::Justification, out);
        }
    }

    /// Whether every old member's deal is in (proven equivocators aside).
    fn deals_in(&self) -> bool {
        (0..self.epoch.old_members.len() as u32)
            .map(NodeIndex)
            .all(|d| self.deals.contains_key(&d) || self.faulty.contains(&d))
    }

    /// Whether, as a new member, every dealer with a well-formed deal sent
    /// this participant's sub-share.
    fn shares_in(&self) -> bool {
        self.roster.new_index(self.me).is_none()
            || self
                .deals
                .keys()
                .all(|d| self.shares.contains_key(d) || self.disqualified.contains_key(d))
    }

    /// Whether every new member's complaint broadcast is in (proven
    /// equivocators aside).
    fn complaints_in(&self) -> bool {
        (0..self.roster.len())
            .map(NodeIndex)
            .filter(|p| self.roster.new_index(*p).is_some())
            .all(|p| self.complainers.contains(&p) || self.faulty.contains(&p))
    }

    /// Dealers that owe a justification: complained about, deal in, not
    /// disqualified.
    fn expected_justifications(&self) -> Vec<NodeIndex> {
        self.complaints
            .keys()
            .filter(|d| self.deals.contains_key(d) && !self.disqualified.contains_key(d))
            .copied()
            .collect()
    }

    /// Whether every justification that is due is in.
    fn justifications_in(&self) -> bool {
        self.expected_justifications()
            .iter()
            .all(|d| self.justifications.contains_key(d) || self.faulty.contains(d))
    }

    fn is_over(&self) -> bool {
        matches!(self.phase, DkgPhase::Done | DkgPhase::Failed)
    }

    fn timer(&self, now: Time, timer: DkgTimer) -> ReshareAction<S> {
        ReshareAction::SetTimer {
            at: now.plus_micros(self.epoch.phase_timeout_us),
            timer,
        }
    }

    fn disqualify(&mut self, dealer: NodeIndex, reason: &str) {
        self.disqualified
            .entry(dealer)
            .or_insert_with(|| reason.to_string());
    }

    /// Step 1: deal sub-shares of the old share (if held) and arm the deal phase.
    fn start(&mut self, now: Time) -> Vec<ReshareAction<S>> {
        if self.phase != DkgPhase::Idle {
            return Vec::new();
        }
        self.phase = DkgPhase::Dealing;
        let mut out = Vec::new();
        if let Some(share) = &self.old_share {
            let t_new = self.epoch.new_threshold as usize;
            let mut poly = Vec::with_capacity(t_new);
            poly.push(*share.value());
            poly.extend((1..t_new).map(|_| Scalar::random(&mut self.rng)));
            let g = S::PublicKey::generator();
            let commitments = poly.iter().map(|a| g.mul(a)).collect();
            let evaluations = self.new_domain.evaluate_all(&poly);
            // The deal commits to its sub-shares as a DKG deal does (salted
            // leaves under a Merkle root), so that both share one format.
            let (tree, salts) = commit_shares(
                &self.session,
                self.me,
                evaluations.len() as u32,
                &mut self.rng,
                |j| vec![evaluations[j as usize]],
            );
            let deal = Arc::new(Deal::new(
                self.session,
                self.me,
                crate::dkg::Commitments::new(&[commitments]),
                tree.root(),
            ));
            self.deals.insert(self.me, deal.clone());
            out.push(ReshareAction::Broadcast(DkgMessage::Deal(deal)));
            let mut sent = BTreeMap::new();
            for (j, value) in evaluations.iter().enumerate() {
                let Some(to) = self.roster.participant_of_new(NodeIndex(j as u32)) else {
                    continue;
                };
                if to == self.me {
                    self.shares.insert(self.me, *value);
                } else {
                    let message = DealtShares {
                        session: self.session,
                        dealer: self.me,
                        recipient: to,
                        shares: vec![*value],
                        salt: salts[j],
                        path: tree.path(NodeIndex(j as u32)).into(),
                    };
                    sent.insert(to, message.clone());
                    out.push(ReshareAction::Send {
                        to,
                        message: DkgMessage::Shares(message),
                    });
                }
            }
            self.dealt = Some(evaluations);
            self.sent = sent;
        }
        out.push(self.timer(now, DkgTimer::EndOfDeal));
        out
    }

    fn on_message(&mut self, from: NodeIndex, message: ReshareMessage<S>) {
        if from.0 >= self.roster.len() {
            return;
        }
        let from_old = self.roster.old_index(from).is_some();
        let dealing = matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
        let late = !dealing || self.is_over();
        let message = match message {
            DkgMessage::Deal(deal) if late => return self.late_deal(from, from_old, deal),
            DkgMessage::Shares(s) if late => return self.late_share(from, from_old, s),
            _ if self.is_over() => return,
            message => message,
        };
        match message {
            DkgMessage::Deal(deal) => {
                if deal.session != self.session || deal.dealer != from || !dealing || !from_old {
                    return;
                }
                if self.deals.contains_key(&from) {
                    return;
                }
                if !deal.commitments.has_degrees(&[self.epoch.new_threshold]) {
                    self.disqualify(from, "commitments of the wrong degree");
                }
                // Decoded on the curve only (see `Deal::commitments`); resharing
                // is rare and its deals few, so each point is checked here.
                if !deal.commitments_in_group() {
                    self.disqualify(from, "commitments outside the prime-order group");
                }
                self.deals.insert(from, deal);
            }
            DkgMessage::Shares(s) => {
                let to_me = s.recipient == self.me && self.roster.new_index(self.me).is_some();
                if s.session != self.session || s.dealer != from || !to_me || !dealing {
                    return;
                }
                if let ([value], true) = (s.shares.as_slice(), from_old) {
                    self.shares.entry(from).or_insert(*value);
                }
            }
            DkgMessage::Complaint(c) => {
                let open = dealing || self.phase == DkgPhase::Complaining;
                let from_new = self.roster.new_index(from).is_some();
                if c.session != self.session
                    || c.from != from
                    || !open
                    || !from_new
                    || self.faulty.contains(&from)
                    || !self.complainers.insert(from)
                {
                    return;
                }
                for d in c.dealers {
                    if self.roster.old_index(d).is_some() {
                        self.complaints.entry(d).or_default().insert(from);
                    }
                }
            }
            DkgMessage::Justification(j) => {
                if j.session != self.session
                    || j.dealer != from
                    || !from_old
                    || self.phase == DkgPhase::Idle
                {
                    return;
                }
                self.justifications.entry(from).or_insert(j);
            }
        }
    }

    /// A deal after the deal phase: kept apart (the first of each dealer),
    /// for [`Resharer::adopt`] alone; it never counts toward this
    /// participant's QUAL.
    fn late_deal(&mut self, from: NodeIndex, from_old: bool, deal: Arc<Deal<S>>) {
        if deal.session == self.session
            && deal.dealer == from
            && from_old
            && !self.deals.contains_key(&from)
        {
            self.late_deals.entry(from).or_insert(deal);
        }
    }

    /// A sub-share to this new member after the deal phase, kept as
    /// [`Resharer::late_deal`] keeps deals.
    fn late_share(&mut self, from: NodeIndex, from_old: bool, s: DealtShares) {
        let to_me = s.recipient == self.me && self.roster.new_index(self.me).is_some();
        if !(to_me && from_old && s.session == self.session && s.dealer == from)
            || self.shares.contains_key(&from)
        {
            return;
        }
        if let [value] = s.shares.as_slice() {
            self.late_shares.entry(from).or_insert(*value);
        }
    }

    /// As a dealer: the sub-share message for participant `to` (a new member
    /// that asks for it again: it restarted, or lost it); its deal goes with
    /// it as the driver signed it.
    pub fn resend_to(&self, to: NodeIndex) -> Option<DealtShares> {
        self.sent.get(&to).cloned()
    }

    /// As a new member: the old members (participant indices) whose deal or
    /// sub-share to this participant it lacks, itself aside.
    pub fn missing(&self) -> Vec<NodeIndex> {
        if self.roster.new_index(self.me).is_none() {
            return Vec::new();
        }
        (0..self.epoch.old_members.len() as u32)
            .map(NodeIndex)
            .filter(|d| *d != self.me)
            .filter(|d| {
                let deal = self.deals.contains_key(d) || self.late_deals.contains_key(d);
                let share = self.shares.contains_key(d) || self.late_shares.contains_key(d);
                !(deal && share)
            })
            .collect()
    }

    /// Erases what this dealer keeps to send again (its sub-shares determine
    /// its old share): once the new epoch no longer needs them.
    pub fn erase_dealt(&mut self) {
        self.sent.clear();
        self.dealt = None;
    }
}
