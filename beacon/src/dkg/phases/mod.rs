//! The Dealing → Complaining → Justifying phase machine that the genesis DKG
//! ([`crate::dkg::Dkg`]) and the resharing ([`crate::reshare::Resharer`]) both
//! instantiate.
//!
//! [`PhaseMachine`] owns what the two protocols share: the phases and their
//! ends, the intake of deals, shares, complaints and justifications
//! ([`Board`]), the judgement of complaints, and the relay's announcements and
//! confirmations. A [`Sharing`] says what differs: who deals and who receives,
//! what a dealer deals, what a deal is checked against, how a member finds its
//! bad shares, and how the output is finalized.
//!
//! - this file: the trait, the machine, its inputs' dispatch and the phase ends;
//! - `steps.rs`: the four steps (deal, intake, complain, justify, finalize);
//! - `failure.rs`: why a run ends without a result ([`DkgFailure`]).

mod failure;
mod steps;

pub use failure::DkgFailure;

use super::relay::Kind;
use super::{
    Deal, DealtShares, Disqualification, DkgInput, DkgMessage, DkgPhase, DkgTimer, Justification,
    Verdicts,
};
use crate::effect::Effect;
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::scheme::Scheme;
use crate::{NodeIndex, Time};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The machine's random source (seeded: a restarted dealer deals again what
/// it dealt).
pub type Rng = ChaCha20Rng;

/// A set of dealers, ascending.
pub type DealerSet = BTreeSet<NodeIndex>;

/// What differs between the protocols that run the phase machine: the genesis
/// DKG ([`crate::dkg::Genesis`]) and the resharing
/// ([`crate::reshare::Redistribution`]).
pub trait Sharing<S: Scheme>: Send {
    /// What a successful run yields.
    type Output;
    /// The session every message names.
    fn session(&self) -> [u8; 32];
    /// How many participants there are (indices `0..participants`).
    fn participants(&self) -> u32;
    /// Whether participant `p` deals.
    fn is_dealer(&self, p: NodeIndex) -> bool;
    /// Every dealer, ascending.
    fn dealers(&self) -> Vec<NodeIndex>;
    /// How many dealers there are.
    fn dealer_count(&self) -> usize;
    /// The evaluation point (receiver index) of participant `p`, if it
    /// receives shares.
    fn receiver(&self, p: NodeIndex) -> Option<NodeIndex>;
    /// How many participants receive shares.
    fn receiver_count(&self) -> u32;
    /// The participant at receiver index `j`.
    fn participant_of_receiver(&self, j: NodeIndex) -> Option<NodeIndex>;
    /// The receivers' evaluation points.
    fn domain(&self) -> &SignerDomain;
    /// The degree bound (threshold) of each dealt polynomial.
    fn thresholds(&self) -> &[u32];
    /// Length of each phase, in microseconds.
    fn phase_timeout_us(&self) -> u64;
    /// Whether the dealers are a committee of fewer than every participant
    /// (over the relay, their summaries then go through a hub).
    fn has_committee(&self) -> bool {
        false
    }
    /// The coefficients participant `me` deals, one polynomial per threshold
    /// (`None` if it does not deal).
    fn polynomials(&self, me: NodeIndex, rng: &mut Rng) -> Option<Vec<Vec<Scalar>>>;
    /// Why a deal received in the deal phase disqualifies its dealer, if it does.
    fn deal_fault(&self, deal: &Deal<S>) -> Option<Disqualification>;
    /// Whether a deal received after the deal phase is kept (for adoption).
    fn keeps_late_deal(&self, deal: &Deal<S>) -> bool;
    /// Dealers to disqualify at the end of the deal phase beyond the silent
    /// ones, with the reason.
    fn check_deals(&self, board: &Board<S>) -> Vec<(NodeIndex, Disqualification)>;
    /// The candidate dealers whose shares to receiver `me` are missing or wrong.
    fn bad_dealers(&mut self, board: &Board<S>, me: NodeIndex, rng: &mut Rng) -> DealerSet;
    /// The dealer sent `shares` to participant `to` (to send again on request).
    fn sent(&mut self, _to: NodeIndex, _shares: &DealtShares) {}
    /// Step 4 once complaints are judged: the output, or why there is none.
    fn finalize(&mut self, board: &mut Board<S>, me: NodeIndex)
        -> Result<Self::Output, DkgFailure>;
}

/// What the participants sent, as one participant collected it.
pub struct Board<S: Scheme> {
    pub(crate) deals: BTreeMap<NodeIndex, Arc<Deal<S>>>,
    /// Dealers excluded so far, with the reason (first reason wins).
    pub(crate) disqualified: BTreeMap<NodeIndex, Disqualification>,
    /// This receiver's shares, per dealer (one per threshold).
    pub(crate) shares: BTreeMap<NodeIndex, Vec<Scalar>>,
    /// The salt and share-tree path of each dealer's shares (see
    /// [`crate::dkg::batch`]), until the end of the deal phase.
    pub(crate) shares_committed: BTreeMap<NodeIndex, ([u8; 32], super::batch::SharePath)>,
    /// Deals and shares that came after the deal phase: they never count
    /// toward this participant's QUAL, only toward adopting one the others
    /// agreed on, for a participant that restarted or was cut off.
    pub(crate) late_deals: BTreeMap<NodeIndex, Arc<Deal<S>>>,
    pub(crate) late_shares: BTreeMap<NodeIndex, Vec<Scalar>>,
    /// dealer -> complainers.
    pub(crate) complaints: BTreeMap<NodeIndex, BTreeSet<NodeIndex>>,
    /// Participants proven to equivocate: their complaints do not count.
    pub(crate) faulty: BTreeSet<NodeIndex>,
    pub(crate) justifications: BTreeMap<NodeIndex, Arc<Justification>>,
    /// Receivers whose complaint (possibly naming nobody) was delivered.
    pub(crate) complainers: BTreeSet<NodeIndex>,
    /// Receivers whose complaint naming dealers was recorded (one each).
    pub(crate) complained: BTreeSet<NodeIndex>,
    /// As a dealer: its polynomials' evaluations at every receiver (secret).
    pub(crate) dealt: Option<Vec<Vec<Scalar>>>,
    /// As a dealer: the tree that commits to those evaluations and each
    /// receiver's salt, so that it can send a receiver its shares again
    /// ([`PhaseMachine::dealt_shares`]) without keeping every message.
    pub(crate) dealt_tree: Option<(Arc<super::batch::ShareTree>, Vec<[u8; 32]>)>,
}

impl<S: Scheme> Default for Board<S> {
    fn default() -> Self {
        Board {
            deals: BTreeMap::new(),
            disqualified: BTreeMap::new(),
            shares: BTreeMap::new(),
            shares_committed: BTreeMap::new(),
            late_deals: BTreeMap::new(),
            late_shares: BTreeMap::new(),
            complaints: BTreeMap::new(),
            faulty: BTreeSet::new(),
            justifications: BTreeMap::new(),
            complainers: BTreeSet::new(),
            complained: BTreeSet::new(),
            dealt: None,
            dealt_tree: None,
        }
    }
}

impl<S: Scheme> Board<S> {
    /// Excludes `dealer` (the first reason stays).
    pub(crate) fn disqualify(&mut self, dealer: NodeIndex, reason: Disqualification) {
        self.disqualified.entry(dealer).or_insert(reason);
    }

    /// Dealers with a deal that are not (yet) disqualified, ascending.
    pub(crate) fn candidates(&self) -> Vec<NodeIndex> {
        self.deals
            .keys()
            .filter(|d| !self.disqualified.contains_key(d))
            .copied()
            .collect()
    }

    /// The verdicts of a run that qualified `qual`: it, and every other dealer
    /// disqualified so far with the reason. A dealer this participant had
    /// disqualified and that is in `qual` anyway (an adopted result: the
    /// agreed QUAL of the genesis DKG, or the dealers the chain named for a
    /// resharing) is qualified, not both.
    pub(crate) fn verdicts(&self, qual: Vec<NodeIndex>) -> Verdicts {
        let combined: std::collections::BTreeSet<NodeIndex> = qual.iter().copied().collect();
        Verdicts {
            disqualified: self
                .disqualified
                .iter()
                .filter(|(d, _)| !combined.contains(d))
                .map(|(d, r)| (*d, *r))
                .collect(),
            qual,
        }
    }
}

/// What a phase machine asks of its driver.
#[derive(Clone, Debug)]
pub enum PhaseOutput<S: Scheme, O> {
    /// Send, broadcast, or set a timer.
    Effect(Effect<DkgMessage<S>, DkgTimer>),
    /// This participant holds every broadcast of this kind it waits for (or
    /// its phase is over): the relay should tell the others which versions it
    /// holds, and answer with [`DkgInput::Confirmed`] once they all hold the
    /// same. Only a machine built [`PhaseMachine::with_relay`] emits it.
    Announce(Kind),
    /// The run finished: persist the result.
    Done(Arc<O>),
    /// The run failed.
    Failed(DkgFailure),
}

/// One participant's phase machine for the protocol `P`.
pub struct PhaseMachine<S: Scheme, P: Sharing<S>> {
    pub(crate) me: NodeIndex,
    pub(crate) rng: ChaCha20Rng,
    pub(crate) phase: DkgPhase,
    pub(crate) board: Board<S>,
    pub(crate) sharing: P,
    /// Whether phases wait for the relay's confirmations ([`Self::with_relay`]).
    relayed: bool,
    /// Kinds announced to, and confirmed by, the relay.
    announced: BTreeSet<Kind>,
    confirmed: BTreeSet<Kind>,
}

impl<S: Scheme, P: Sharing<S>> PhaseMachine<S, P> {
    /// Participant `me` of `sharing`; `seed` feeds its polynomials and salts.
    pub(crate) fn from_parts(me: NodeIndex, seed: [u8; 32], sharing: P) -> Self {
        PhaseMachine {
            me,
            rng: ChaCha20Rng::from_seed(seed),
            phase: DkgPhase::Idle,
            board: Board::default(),
            sharing,
            relayed: false,
            announced: BTreeSet::new(),
            confirmed: BTreeSet::new(),
        }
    }

    /// Broadcasts go through the relay ([`crate::dkg::relay`]): a phase ends
    /// before its timeout only once the relay reports that every participant
    /// holds the same versions of its broadcasts, and the machine asks for
    /// those reports with [`PhaseOutput::Announce`].
    pub fn with_relay(mut self) -> Self {
        self.relayed = true;
        self
    }

    /// The current phase.
    pub fn phase(&self) -> DkgPhase {
        self.phase
    }

    /// This participant's index.
    pub fn me(&self) -> NodeIndex {
        self.me
    }

    /// The protocol's side of the machine.
    pub fn sharing(&self) -> &P {
        &self.sharing
    }

    /// Whether the run has a hub ([`crate::dkg::relay::BroadcastRelay::with_hub`]):
    /// a relayed run dealt by a committee of fewer than every participant.
    /// Then the relay's summaries go to and from the committee, and a
    /// complaint naming nobody goes to the committee alone.
    pub fn has_hub(&self) -> bool {
        self.relayed && self.sharing.has_committee()
    }

    /// Handles one input at time `now` and returns the resulting actions.
    pub fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<PhaseOutput<S, P::Output>> {
        let mut out = match input {
            DkgInput::Start => self.start(now),
            DkgInput::Message { from, message } => {
                self.on_message(from, message);
                Vec::new()
            }
            DkgInput::Timer(DkgTimer::EndOfDeal) if self.phase == DkgPhase::Dealing => {
                self.end_of_deal(now)
            }
            DkgInput::Timer(DkgTimer::EndOfComplaints) if self.phase == DkgPhase::Complaining => {
                self.end_of_complaints(now)
            }
            DkgInput::Timer(DkgTimer::EndOfJustifications)
                if self.phase == DkgPhase::Justifying =>
            {
                self.finalize()
            }
            DkgInput::Timer(_) => Vec::new(),
            DkgInput::Faulty { member } => {
                self.on_faulty(member);
                Vec::new()
            }
            DkgInput::Confirmed(kind) => {
                self.confirmed.insert(kind);
                Vec::new()
            }
        };
        self.advance(now, &mut out);
        out
    }

    /// `member` equivocated: its complaints no longer count, and it deals no more.
    fn on_faulty(&mut self, member: NodeIndex) {
        if member.0 >= self.sharing.participants() || self.is_over() {
            return;
        }
        let board = &mut self.board;
        board.faulty.insert(member);
        for complainers in board.complaints.values_mut() {
            complainers.remove(&member);
        }
        board.complaints.retain(|_, c| !c.is_empty());
        if self.sharing.is_dealer(member) {
            board.disqualify(member, Disqualification::Equivocation);
        }
    }

    /// Ends every phase whose messages are all in (several in a row when the
    /// next one has nothing left to wait for), and announces complete kinds;
    /// the timeouts only bound the wait for silent or slow participants.
    fn advance(&mut self, now: Time, out: &mut Vec<PhaseOutput<S, P::Output>>) {
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

    /// Whether the relay confirmed `kind` (always, without the relay).
    pub(crate) fn is_confirmed(&self, kind: Kind) -> bool {
        !self.relayed || self.confirmed.contains(&kind)
    }

    fn announce(&mut self, kind: Kind, out: &mut Vec<PhaseOutput<S, P::Output>>) {
        if self.relayed && self.announced.insert(kind) {
            out.push(PhaseOutput::Announce(kind));
        }
    }

    /// Announces each kind of broadcast once this participant holds all it
    /// waits for.
    fn announce_complete(&mut self, out: &mut Vec<PhaseOutput<S, P::Output>>) {
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

    /// Whether the run is over (done or failed).
    pub(crate) fn is_over(&self) -> bool {
        matches!(self.phase, DkgPhase::Done | DkgPhase::Failed)
    }

    /// Whether every dealer's deal is in (proven equivocators aside).
    pub(crate) fn deals_in(&self) -> bool {
        let board = &self.board;
        let missing_faulty = board
            .faulty
            .iter()
            .filter(|m| self.sharing.is_dealer(**m) && !board.deals.contains_key(m))
            .count();
        board.deals.len() + missing_faulty >= self.sharing.dealer_count()
    }

    /// Whether, as a receiver, every dealer with a well-formed deal sent this
    /// participant's shares.
    fn shares_in(&self) -> bool {
        let board = &self.board;
        self.sharing.receiver(self.me).is_none()
            || board
                .deals
                .keys()
                .all(|d| board.shares.contains_key(d) || board.disqualified.contains_key(d))
    }

    /// Whether every receiver's complaint is in (proven equivocators aside).
    /// With a hub, a participant outside the committee hears only complaints
    /// naming dealers: it waits for the relay's confirmation instead (the
    /// committee settles only once it holds every complaint).
    pub(crate) fn complaints_in(&self) -> bool {
        if self.has_hub() && !self.sharing.is_dealer(self.me) {
            return !matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
        }
        let board = &self.board;
        let missing_faulty = board
            .faulty
            .iter()
            .filter(|m| self.sharing.receiver(**m).is_some() && !board.complainers.contains(m))
            .count();
        board.complainers.len() + missing_faulty >= self.sharing.receiver_count() as usize
    }

    /// Dealers that owe a justification: complained about, deal in, not
    /// disqualified.
    pub(crate) fn expected_justifications(&self) -> Vec<NodeIndex> {
        let board = &self.board;
        board
            .complaints
            .keys()
            .filter(|d| board.deals.contains_key(d) && !board.disqualified.contains_key(d))
            .copied()
            .collect()
    }

    /// Whether every justification that is due is in (at once when none is).
    fn justifications_in(&self) -> bool {
        self.expected_justifications()
            .iter()
            .all(|d| self.board.justifications.contains_key(d) || self.board.faulty.contains(d))
    }

    fn timer(&self, now: Time, timer: DkgTimer) -> PhaseOutput<S, P::Output> {
        PhaseOutput::Effect(Effect::SetTimer {
            at: now.plus_micros(self.sharing.phase_timeout_us()),
            timer,
        })
    }
}
