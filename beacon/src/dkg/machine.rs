//! The state machine's shell: construction, dispatch of inputs, the events
//! that end a phase, and the relay's announcements.

use super::relay::Kind;
use super::*;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, Time};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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
        Ok(Dkg {
            config,
            me,
            domain,
            memo,
            rng: ChaCha20Rng::from_seed(seed),
            phase: DkgPhase::Idle,
            deals: BTreeMap::new(),
            disqualified: BTreeMap::new(),
            shares: BTreeMap::new(),
            shares_committed: BTreeMap::new(),
            late_deals: BTreeMap::new(),
            late_shares: BTreeMap::new(),
            my_complaints: BTreeSet::new(),
            complaints: BTreeMap::new(),
            faulty: BTreeSet::new(),
            justifications: BTreeMap::new(),
            complainers: BTreeSet::new(),
            complained: BTreeSet::new(),
            relayed: false,
            announced: BTreeSet::new(),
            confirmed: BTreeSet::new(),
            dealt: None,
            derived: BTreeMap::new(),
            polynomials: BTreeMap::new(),
        })
    }

    /// Runs over the relay: phases also wait for its confirmations (see
    /// [`DkgInput::Confirmed`] and [`DkgAction::Announce`]).
    pub fn with_relay(mut self) -> Self {
        self.relayed = true;
        self
    }

    /// The current phase.
    pub fn phase(&self) -> DkgPhase {
        self.phase
    }

    /// The configuration.
    pub fn config(&self) -> &DkgConfig {
        &self.config
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
        match self.phase {
            DkgPhase::Dealing => format!(
                "dealing: {}/{} deals (faulty {}), shares from {}",
                self.deals.len(),
                self.config.dealer_count(),
                self.faulty.len(),
                self.shares.len(),
            ),
            DkgPhase::Complaining => format!(
                "complaining: {}/{} complaints (faulty {}), deals {}, complaints {}",
                self.complainers.len(),
                self.config.n,
                self.faulty.len(),
                confirmed(Kind::Deal),
                confirmed(Kind::Complaint),
            ),
            DkgPhase::Justifying => {
                let due = self.expected_justifications();
                let have = due
                    .iter()
                    .filter(|d| self.justifications.contains_key(d))
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
        h.update(self.config.session);
        for t in &self.config.thresholds {
            h.update(t.to_be_bytes());
        }
        for d in qual {
            h.update(self.deals.get(d)?.digest());
        }
        Some(h.finalize().into())
    }

    /// Handles one input at time `now` and returns the resulting actions.
    pub fn handle(&mut self, now: Time, input: DkgInput<S>) -> Vec<DkgAction<S>> {
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
                if member.0 < self.config.n
                    && !matches!(self.phase, DkgPhase::Done | DkgPhase::Failed)
                {
                    self.faulty.insert(member);
                    for complainers in self.complaints.values_mut() {
                        complainers.remove(&member);
                    }
                    self.complaints.retain(|_, c| !c.is_empty());
                    if self.config.is_dealer(member) {
                        self.disqualify(member, "equivocating broadcasts");
                    }
                }
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

    /// Ends every phase whose messages are all in (several in a row when the
    /// next one has nothing left to wait for), and announces complete kinds.
    pub(super) fn advance(&mut self, now: Time, out: &mut Vec<DkgAction<S>>) {
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

    pub(super) fn is_confirmed(&self, kind: Kind) -> bool {
        !self.relayed || self.confirmed.contains(&kind)
    }

    pub(super) fn announce(&mut self, kind: Kind, out: &mut Vec<DkgAction<S>>) {
        if self.relayed && self.announced.insert(kind) {
            out.push(DkgAction::Announce(kind));
        }
    }

    /// Announces each kind of broadcast once this member holds all it waits for.
    pub(super) fn announce_complete(&mut self, out: &mut Vec<DkgAction<S>>) {
        if !self.relayed
            || matches!(
                self.phase,
                DkgPhase::Idle | DkgPhase::Done | DkgPhase::Failed
            )
        {
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

    /// Whether every dealer's deal is in (proven equivocators aside).
    pub(super) fn deals_in(&self) -> bool {
        let missing_faulty = self
            .faulty
            .iter()
            .filter(|m| self.config.is_dealer(**m) && !self.deals.contains_key(m))
            .count();
        self.deals.len() + missing_faulty >= self.config.dealer_count() as usize
    }

    /// Whether every dealer with a well-formed deal sent this member's shares.
    pub(super) fn shares_in(&self) -> bool {
        self.deals
            .keys()
            .all(|d| self.shares.contains_key(d) || self.disqualified.contains_key(d))
    }

    /// Whether the run has a hub ([`relay::BroadcastRelay::with_hub`]): a
    /// relayed run dealt by a committee of fewer than every member. Then the
    /// relay's summaries go to and from the committee, and a complaint naming
    /// nobody goes to the committee alone ([`DkgAction::Send`]).
    pub fn has_hub(&self) -> bool {
        self.relayed
            && !self.config.dealers.is_empty()
            && self.config.dealers.len() < self.config.n as usize
    }

    /// Whether every member's complaint is in (proven equivocators aside). With
    /// a hub, a member outside the committee hears only complaints naming
    /// dealers: it waits for the relay's confirmation instead (the committee
    /// settles only once it holds every member's complaint).
    pub(super) fn complaints_in(&self) -> bool {
        if self.has_hub() && !self.config.is_dealer(self.me) {
            return !matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
        }
        let missing_faulty = self
            .faulty
            .iter()
            .filter(|m| !self.complainers.contains(m))
            .count();
        self.complainers.len() + missing_faulty >= self.config.n as usize
    }

    /// Dealers that owe a justification: complained about, deal in, not
    /// disqualified.
    pub(super) fn expected_justifications(&self) -> Vec<NodeIndex> {
        self.complaints
            .keys()
            .filter(|d| self.deals.contains_key(d) && !self.disqualified.contains_key(d))
            .copied()
            .collect()
    }

    /// Whether every justification that is due is in (at once when none is).
    pub(super) fn justifications_in(&self) -> bool {
        self.expected_justifications()
            .iter()
            .all(|d| self.justifications.contains_key(d) || self.faulty.contains(d))
    }

    pub(super) fn timer(&self, now: Time, timer: DkgTimer) -> DkgAction<S> {
        DkgAction::SetTimer {
            at: now.plus_micros(self.config.phase_timeout_us),
            timer,
        }
    }
}
