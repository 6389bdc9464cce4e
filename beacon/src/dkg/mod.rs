//! Distributed key generation: Joint-Feldman (Pedersen) with complaints, as a
//! sans-IO state machine.
//!
//! # Protocol
//! Members `0..n` hold the roots-of-unity evaluation points of
//! [`SignerDomain`]. A set of dealers (all members, or a committee of `K`) each
//! deal one random polynomial per requested threshold `t_k` (degree `t_k - 1`).
//! 1. **Deal.** Dealer `D` broadcasts a [`Deal`]: Feldman commitments `g^{a_{D,k,i}}`
//!    for every threshold; and sends member `j` its shares `f_{D,k}(w^j)` point to
//!    point ([`DealtShares`]).
//! 2. **Complaints** (when every dealer's deal and shares are in). A dealer with no
//!    deal or a commitment of the wrong degree is disqualified by everyone (the
//!    deal is a broadcast). Member `j` checks all its shares at once: one random
//!    linear combination of the Feldman equations `g^{s_{D,k}} = sum_i x_j^i
//!    C_{D,k,i}` of every dealer and threshold, with Fiat–Shamir weights drawn
//!    from the deals (which commit to the shares they deal: [`batch`]); only when
//!    it fails does it check dealings one by one.
//!    Every member broadcasts a [`Complaint`] naming every dealer whose share is
//!    missing or wrong — naming nobody when all are good, so that the others know
//!    it has nothing to say.
//! 3. **Justifications** (when every member's complaint is in). A dealer with
//!    complaints broadcasts a [`Justification`] revealing the complainers' shares.
//! 4. **Finalize** (when every justification that can still come is in: at once
//!    when nobody complained). `QUAL` = dealers with a well-formed deal whose
//!    every complaint is answered by a revealed share that matches their
//!    commitments. A complainer uses the revealed share. Per threshold: the group
//!    polynomial is the sum of the QUAL commitments, the group key its constant
//!    term, the own share the sum of the QUAL shares, and every member's
//!    verification key one FFT in the exponent away.
//!
//! # Model
//! As in Pedersen's and GJKR's protocols, broadcasts are assumed consistent: every
//! member receives the same broadcast message from a given sender. [`Dkg`] is one
//! attempt under that assumption (the in-memory [`harness`] delivers one message
//! to all); [`session::DkgSession`] provides it over point-to-point links with the
//! signed, attested relay ([`relay`]), checks agreement on the result, and reruns
//! the attempt when agreement fails. The simulator and the node both run the
//! session. Dealers are every member or a committee drawn from the genesis seed
//! ([`committee`]).
//! Point-to-point channels are authenticated and private. A phase ends as soon as
//! everything it can still receive is in; its timeout only bounds the wait for
//! silent (or slow) members, and then all honest members, seeing the same
//! broadcasts within it, compute the same `QUAL` (a synchronous DKG). Over the
//! relay ([`Dkg::with_relay`]) a phase also waits for the relay's word that every
//! member holds the same versions of its broadcasts ([`DkgInput::Confirmed`]), so
//! that ending early never outruns the detection of an equivocating member. A
//! dealer that deals bad shares and then reveals shares that match its
//! commitments stays qualified — the complainers take the revealed shares — as in
//! GJKR.
//!
//! # Phase transitions
//! | from            | input                                                  | to              |
//! |-----------------|--------------------------------------------------------|-----------------|
//! | `Idle`          | `Start`                                                | `Dealing`       |
//! | `Dealing`       | last deal or share in, or timer `EndOfDeal`            | `Complaining`   |
//! | `Complaining`   | last complaint in (and deals and complaints confirmed), or timer `EndOfComplaints` | `Justifying` |
//! | `Justifying`    | no justification due, last one in (and confirmed), or timer `EndOfJustifications` | `Done`/`Failed` |
//!
//! One input may cross several rows (a member that gets the last complaint and
//! owes no justification finalizes at once). Messages for a later phase are
//! accepted early (and kept until their phase); messages for a phase already
//! over, from non-members, for another session, or repeated, are ignored.

pub mod batch;
pub mod committee;
// Named exception: the in-memory harness is a driver, not protocol code; it
// times real runs with the wall clock.
#[allow(clippy::disallowed_methods)]
pub mod harness;
pub mod relay;
pub mod session;

use crate::curve::Point;
use crate::field::Scalar;
use crate::lagrange::SignerDomain;
use crate::memo::Memo;
use crate::poly::log2_ceil;
use crate::scheme::Scheme;
use crate::threshold::{SecretShare, ThresholdPublicKey};
use crate::{wire, Error, NodeIndex, Time};
use batch::{batch_check, in_share_tree, share_leaf, ShareTree};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore as _, SeedableRng};
use relay::Kind;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

/// Parameters every member of one DKG run agrees on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DkgConfig {
    /// Unique identifier of this run (replays from other runs are ignored).
    pub session: [u8; 32],
    /// Number of members.
    pub n: u32,
    /// The thresholds to generate one key for each (e.g. beacon, slow path, fast path).
    pub thresholds: Vec<u32>,
    /// The dealers (sorted, distinct); empty means every member deals.
    pub dealers: Vec<NodeIndex>,
    /// Length of each phase, in microseconds.
    pub phase_timeout_us: u64,
    /// Fewest qualified dealers for success (at least one must be honest for the
    /// secret to be unknown: f + 1 when every member deals; see
    /// [`committee::Committee`] for a drawn committee).
    pub min_qualified: u32,
    /// Fault bound `f`: the agreement step of [`session::DkgSession`] needs
    /// `n - f` members signing the same result.
    pub max_faulty: u32,
    /// Attempts of [`session::DkgSession`] before it fails (each with a fresh
    /// session nonce and twice the phase length of the one before).
    pub max_attempts: u32,
}

impl DkgConfig {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), Error> {
        if self.n == 0 {
            return Err(Error::Dkg("n must be at least 1".into()));
        }
        if self.thresholds.is_empty() {
            return Err(Error::Dkg("no thresholds requested".into()));
        }
        for &t in &self.thresholds {
            if t == 0 || t > self.n {
                return Err(Error::InvalidThreshold { t, n: self.n });
            }
        }
        for pair in self.dealers.windows(2) {
            if pair[0] >= pair[1] {
                return Err(Error::Dkg("dealers must be sorted and distinct".into()));
            }
        }
        if let Some(last) = self.dealers.last() {
            if last.0 >= self.n {
                return Err(Error::SignerOutOfRange {
                    signer: *last,
                    n: self.n,
                });
            }
        }
        if 3 * u64::from(self.max_faulty) >= u64::from(self.n) {
            return Err(Error::Dkg(format!(
                "fault bound f = {} needs n > 3f (n = {})",
                self.max_faulty, self.n
            )));
        }
        if self.max_attempts == 0 || self.max_attempts > 16 {
            return Err(Error::Dkg("max_attempts must be in 1..=16".into()));
        }
        let k = self.dealer_count();
        if self.min_qualified == 0 || self.min_qualified > k {
            return Err(Error::Dkg(format!(
                "min_qualified = {} must be in 1..={k}",
                self.min_qualified
            )));
        }
        Ok(())
    }

    /// The dealers (every member when none are configured).
    pub fn dealer_list(&self) -> Vec<NodeIndex> {
        if self.dealers.is_empty() {
            (0..self.n).map(NodeIndex).collect()
        } else {
            self.dealers.clone()
        }
    }

    /// How many dealers there are.
    pub fn dealer_count(&self) -> u32 {
        if self.dealers.is_empty() {
            self.n
        } else {
            self.dealers.len() as u32
        }
    }

    /// Whether `who` deals.
    pub fn is_dealer(&self, who: NodeIndex) -> bool {
        if self.dealers.is_empty() {
            who.0 < self.n
        } else {
            self.dealers.binary_search(&who).is_ok()
        }
    }
}

/// A dealer's broadcast: Feldman commitments, one vector per threshold.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Deal<S: Scheme> {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// `commitments[k][i] = g^{a_{k,i}}` for threshold `k`, coefficient `i`.
    pub commitments: Vec<Vec<S::PublicKey>>,
    /// Root of the dealer's [`ShareTree`]: commits to the shares it deals
    /// (see [`batch`]).
    pub share_root: [u8; 32],
    #[serde(skip)]
    digest: OnceLock<[u8; 32]>,
}

impl<S: Scheme> Deal<S> {
    /// A deal message.
    pub fn new(
        session: [u8; 32],
        dealer: NodeIndex,
        commitments: Vec<Vec<S::PublicKey>>,
        share_root: [u8; 32],
    ) -> Self {
        Deal {
            session,
            dealer,
            commitments,
            share_root,
            digest: OnceLock::new(),
        }
    }

    /// SHA-256 of the encoded deal (computed once, shared by every holder of the `Arc`).
    pub fn digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| {
            let mut h = Sha256::new();
            h.update(self.session);
            h.update(self.dealer.0.to_be_bytes());
            for c in &self.commitments {
                h.update((c.len() as u64).to_be_bytes());
                for p in c {
                    h.update(p.to_bytes());
                }
            }
            h.update(self.share_root);
            h.finalize().into()
        })
    }
}

/// A dealer's private message to one member: its shares, one per threshold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DealtShares {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// The recipient.
    pub recipient: NodeIndex,
    /// `f_{dealer,k}(w^recipient)` per threshold `k`.
    pub shares: Vec<Scalar>,
    /// The salt of the recipient's leaf in the dealer's [`ShareTree`].
    pub salt: [u8; 32],
    /// The leaf's authentication path up to the deal's `share_root`.
    pub path: Vec<[u8; 32]>,
}

/// A member's broadcast complaint against dealers whose shares were missing or bad.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Complaint {
    /// The run.
    pub session: [u8; 32],
    /// The complainer.
    pub from: NodeIndex,
    /// Dealers complained about.
    pub dealers: Vec<NodeIndex>,
}

/// A dealer's broadcast answer to complaints: the complainers' shares, revealed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Justification {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// `(complainer, shares per threshold)`.
    pub revealed: Vec<(NodeIndex, Vec<Scalar>)>,
}

/// Every DKG message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum DkgMessage<S: Scheme> {
    /// Broadcast commitments.
    Deal(Arc<Deal<S>>),
    /// Private shares.
    Shares(DealtShares),
    /// Broadcast complaint.
    Complaint(Complaint),
    /// Broadcast justification.
    Justification(Arc<Justification>),
}

impl<S: Scheme> DkgMessage<S> {
    /// Encodes with the wire codec.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        wire::encode(self)
    }

    /// Decodes with the wire codec (invalid points, wrong lengths, trailing bytes
    /// and oversized input are errors).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        wire::decode(bytes)
    }
}

/// The DKG's timers, one per phase end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DkgTimer {
    /// End of the deal phase.
    EndOfDeal,
    /// End of the complaint phase.
    EndOfComplaints,
    /// End of the justification phase.
    EndOfJustifications,
}

/// Inputs of the state machine.
#[derive(Clone, Debug)]
pub enum DkgInput<S: Scheme> {
    /// Begin (deal, if a dealer).
    Start,
    /// A message from an authenticated sender.
    Message {
        /// The sender (as authenticated by the transport).
        from: NodeIndex,
        /// The message.
        message: DkgMessage<S>,
    },
    /// A timer requested earlier fired.
    Timer(DkgTimer),
    /// The relay proved that `member` broadcast two different versions of one
    /// message (two signed deals, complaints or justifications): it is faulty,
    /// excluded as a dealer and its complaints ignored. Every honest member must
    /// learn this before the justification phase ends for QUAL to agree (the
    /// session's agreement step catches the runs where some did not).
    Faulty {
        /// The equivocating member.
        member: NodeIndex,
    },
    /// The relay confirms that every member (save proven equivocators) holds the
    /// same versions of the broadcasts of this kind as this member (only used
    /// by a DKG built [`Dkg::with_relay`]).
    Confirmed(Kind),
}

/// Outputs of the state machine.
#[derive(Clone, Debug)]
pub enum DkgAction<S: Scheme> {
    /// Send to one member.
    Send {
        /// Recipient.
        to: NodeIndex,
        /// Message.
        message: DkgMessage<S>,
    },
    /// Send the same message to every other member.
    Broadcast(DkgMessage<S>),
    /// Fire `timer` at `at`.
    SetTimer {
        /// When.
        at: Time,
        /// Which.
        timer: DkgTimer,
    },
    /// The DKG finished; the result should be persisted.
    Complete(Arc<DkgOutput<S>>),
    /// The DKG failed (too few qualified dealers, inconsistent result).
    Failed(String),
    /// This member holds every broadcast of this kind it waits for (or its phase
    /// is over): the relay should tell the others which versions it holds, and
    /// answer with [`DkgInput::Confirmed`] once they all hold the same. Only a DKG
    /// built [`Dkg::with_relay`] emits it.
    Announce(Kind),
}

/// Key material for one threshold.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ThresholdKeyMaterial<S: Scheme> {
    /// The threshold `t`.
    pub threshold: u32,
    /// Group polynomial commitments (`t` points; the first is the group key).
    pub public_polynomial: Arc<Vec<S::PublicKey>>,
    /// This member's share.
    pub secret_share: SecretShare,
    /// Every member's verification key.
    pub verification_keys: Arc<Vec<S::PublicKey>>,
}

impl<S: Scheme> ThresholdKeyMaterial<S> {
    /// The group public key.
    pub fn group_key(&self) -> &S::PublicKey {
        &self.public_polynomial[0]
    }

    /// The public side, ready for collectors and verifiers.
    pub fn public_key(&self, domain: Arc<SignerDomain>) -> Result<ThresholdPublicKey<S>, Error> {
        ThresholdPublicKey::new(
            self.threshold,
            domain,
            *self.group_key(),
            self.verification_keys.clone(),
        )
    }
}

/// The result of a DKG run at one member: persist it, and a restarted member
/// needs no new DKG. The secret shares never appear in `Debug` output.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct DkgOutput<S: Scheme> {
    /// The run.
    pub session: [u8; 32],
    /// Number of members.
    pub n: u32,
    /// This member.
    pub me: NodeIndex,
    /// Qualified dealers.
    pub qual: Vec<NodeIndex>,
    /// Dealers excluded, with the reason.
    pub disqualified: Vec<(NodeIndex, String)>,
    /// One entry per requested threshold, in the order requested.
    pub keys: Vec<ThresholdKeyMaterial<S>>,
}

impl<S: Scheme> DkgOutput<S> {
    /// Encodes for persistence (wire codec).
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        wire::encode(self)
    }

    /// Decodes a persisted output and checks its consistency: every share matches
    /// its verification key, every key vector has `n` entries.
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let out: DkgOutput<S> = wire::decode(bytes)?;
        out.check()?;
        Ok(out)
    }

    /// Checks internal consistency.
    pub fn check(&self) -> Result<(), Error> {
        if self.me.0 >= self.n {
            return Err(Error::SignerOutOfRange {
                signer: self.me,
                n: self.n,
            });
        }
        for k in &self.keys {
            if k.threshold == 0
                || k.threshold > self.n
                || k.verification_keys.len() != self.n as usize
                || k.public_polynomial.len() != k.threshold as usize
            {
                return Err(Error::Dkg("key material has the wrong size".into()));
            }
            if k.secret_share.index != self.me
                || k.secret_share.verification_key::<S>() != k.verification_keys[self.me.0 as usize]
            {
                return Err(Error::Dkg(
                    "secret share does not match its verification key".into(),
                ));
            }
        }
        Ok(())
    }
}

/// The current phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DkgPhase {
    /// Not started.
    Idle,
    /// Collecting deals.
    Dealing,
    /// Collecting complaints.
    Complaining,
    /// Collecting justifications.
    Justifying,
    /// Finished successfully.
    Done,
    /// Finished with a failure.
    Failed,
}

/// A group polynomial and the verification keys under it.
type Derived<S> = (
    Arc<Vec<<S as Scheme>::PublicKey>>,
    Arc<Vec<<S as Scheme>::PublicKey>>,
);

/// One member's DKG state machine.
pub struct Dkg<S: Scheme> {
    config: DkgConfig,
    me: NodeIndex,
    domain: Arc<SignerDomain>,
    memo: Arc<Memo>,
    rng: ChaCha20Rng,
    phase: DkgPhase,
    deals: BTreeMap<NodeIndex, Arc<Deal<S>>>,
    /// Dealers excluded so far, with the reason (first reason wins).
    disqualified: BTreeMap<NodeIndex, String>,
    shares: BTreeMap<NodeIndex, Vec<Scalar>>,
    /// Whether each dealer's shares are in its share tree (see [`batch`]).
    shares_committed: BTreeMap<NodeIndex, ([u8; 32], Vec<[u8; 32]>)>,
    my_complaints: BTreeSet<NodeIndex>,
    /// dealer -> complainers.
    complaints: BTreeMap<NodeIndex, BTreeSet<NodeIndex>>,
    /// Members proven to equivocate: their complaints do not count.
    faulty: BTreeSet<NodeIndex>,
    justifications: BTreeMap<NodeIndex, Arc<Justification>>,
    /// Members whose complaint (possibly naming nobody) was delivered.
    complainers: BTreeSet<NodeIndex>,
    /// Whether phases wait for the relay's confirmations ([`Dkg::with_relay`]).
    relayed: bool,
    /// Kinds announced to, and confirmed by, the relay.
    announced: BTreeSet<Kind>,
    confirmed: BTreeSet<Kind>,
    /// As a dealer: the evaluations of its own polynomials at every member (secret).
    dealt: Option<Vec<Vec<Scalar>>>,
    /// Group polynomials and verification keys already derived, per threshold, for
    /// one dealer set (reused at finalization when QUAL is that set).
    derived: BTreeMap<(usize, Vec<NodeIndex>), Derived<S>>,
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
        config.validate()?;
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
            my_complaints: BTreeSet::new(),
            complaints: BTreeMap::new(),
            faulty: BTreeSet::new(),
            justifications: BTreeMap::new(),
            complainers: BTreeSet::new(),
            relayed: false,
            announced: BTreeSet::new(),
            confirmed: BTreeSet::new(),
            dealt: None,
            derived: BTreeMap::new(),
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
    fn advance(&mut self, now: Time, out: &mut Vec<DkgAction<S>>) {
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

    fn announce(&mut self, kind: Kind, out: &mut Vec<DkgAction<S>>) {
        if self.relayed && self.announced.insert(kind) {
            out.push(DkgAction::Announce(kind));
        }
    }

    /// Announces each kind of broadcast once this member holds all it waits for.
    fn announce_complete(&mut self, out: &mut Vec<DkgAction<S>>) {
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
    fn deals_in(&self) -> bool {
        let missing_faulty = self
            .faulty
            .iter()
            .filter(|m| self.config.is_dealer(**m) && !self.deals.contains_key(m))
            .count();
        self.deals.len() + missing_faulty >= self.config.dealer_count() as usize
    }

    /// Whether every dealer with a well-formed deal sent this member's shares.
    fn shares_in(&self) -> bool {
        self.deals
            .keys()
            .all(|d| self.shares.contains_key(d) || self.disqualified.contains_key(d))
    }

    /// Whether every member's complaint is in (proven equivocators aside).
    fn complaints_in(&self) -> bool {
        let missing_faulty = self
            .faulty
            .iter()
            .filter(|m| !self.complainers.contains(m))
            .count();
        self.complainers.len() + missing_faulty >= self.config.n as usize
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

    /// Whether every justification that is due is in (at once when none is).
    fn justifications_in(&self) -> bool {
        self.expected_justifications()
            .iter()
            .all(|d| self.justifications.contains_key(d) || self.faulty.contains(d))
    }

    fn timer(&self, now: Time, timer: DkgTimer) -> DkgAction<S> {
        DkgAction::SetTimer {
            at: now.plus_micros(self.config.phase_timeout_us),
            timer,
        }
    }

    /// Step 1: deal (if a dealer) and arm the end of the deal phase.
    fn start(&mut self, now: Time) -> Vec<DkgAction<S>> {
        if self.phase != DkgPhase::Idle {
            return Vec::new();
        }
        self.phase = DkgPhase::Dealing;
        let mut out = Vec::new();
        if self.config.is_dealer(self.me) {
            let g = S::PublicKey::generator();
            let mut commitments = Vec::with_capacity(self.config.thresholds.len());
            let mut evaluations = Vec::with_capacity(self.config.thresholds.len());
            for &t in &self.config.thresholds {
                let poly: Vec<Scalar> = (0..t).map(|_| Scalar::random(&mut self.rng)).collect();
                commitments.push(poly.iter().map(|a| g.mul(a)).collect());
                evaluations.push(self.domain.evaluate_all(&poly));
            }
            let session = self.config.session;
            let member_shares =
                |j: u32| -> Vec<Scalar> { evaluations.iter().map(|e| e[j as usize]).collect() };
            let salts: Vec<[u8; 32]> = (0..self.config.n)
                .map(|_| {
                    let mut salt = [0u8; 32];
                    self.rng.fill_bytes(&mut salt);
                    salt
                })
                .collect();
            let leaves = (0..self.config.n)
                .map(|j| {
                    share_leaf(
                        &session,
                        self.me,
                        NodeIndex(j),
                        &salts[j as usize],
                        &member_shares(j),
                    )
                })
                .collect();
            let tree = ShareTree::new(leaves);
            let deal = Arc::new(Deal::new(session, self.me, commitments, tree.root()));
            self.deals.insert(self.me, deal.clone());
            out.push(DkgAction::Broadcast(DkgMessage::Deal(deal)));
            for j in 0..self.config.n {
                let shares = member_shares(j);
                if j == self.me.0 {
                    self.shares_committed
                        .insert(self.me, (salts[j as usize], tree.path(NodeIndex(j))));
                    self.shares.insert(self.me, shares);
                } else {
                    let message = DealtShares {
                        session,
                        dealer: self.me,
                        recipient: NodeIndex(j),
                        shares,
                        salt: salts[j as usize],
                        path: tree.path(NodeIndex(j)),
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

    fn on_message(&mut self, from: NodeIndex, message: DkgMessage<S>) {
        if from.0 >= self.config.n || matches!(self.phase, DkgPhase::Done | DkgPhase::Failed) {
            return;
        }
        let thresholds = self.config.thresholds.len();
        match message {
            DkgMessage::Deal(deal) => {
                let accepting = matches!(self.phase, DkgPhase::Idle | DkgPhase::Dealing);
                if deal.session != self.config.session || deal.dealer != from || !accepting {
                    return;
                }
                if !self.config.is_dealer(from) || self.deals.contains_key(&from) {
                    return;
                }
                let well_formed = deal.commitments.len() == thresholds
                    && deal
                        .commitments
                        .iter()
                        .zip(&self.config.thresholds)
                        .all(|(c, t)| c.len() == *t as usize);
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
                    || !self.complainers.insert(from)
                {
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

    fn disqualify(&mut self, dealer: NodeIndex, reason: &str) {
        self.disqualified
            .entry(dealer)
            .or_insert_with(|| reason.to_string());
    }

    /// Dealers whose deal arrived well formed and who are not (yet) disqualified.
    fn candidates(&self) -> Vec<NodeIndex> {
        self.config
            .dealer_list()
            .into_iter()
            .filter(|d| self.deals.contains_key(d) && !self.disqualified.contains_key(d))
            .collect()
    }

    /// Step 2: disqualify silent dealers, check own shares, complain (naming
    /// nobody when every share is good).
    fn end_of_deal(&mut self, now: Time) -> Vec<DkgAction<S>> {
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
                !in_share_tree(&self.deals[d].share_root, leaf, self.me, path, size)
            })
            .copied()
            .collect();
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
        let complaint = Complaint {
            session: self.config.session,
            from: self.me,
            dealers: bad.into_iter().collect(),
        };
        out.push(DkgAction::Broadcast(DkgMessage::Complaint(complaint)));
        out.push(self.timer(now, DkgTimer::EndOfComplaints));
        out
    }

    /// Step 3: answer complaints against this dealer.
    fn end_of_complaints(&mut self, now: Time) -> Vec<DkgAction<S>> {
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

    /// Step 4: decide QUAL and derive the keys.
    fn finalize(&mut self) -> Vec<DkgAction<S>> {
        let complained: Vec<(NodeIndex, BTreeSet<NodeIndex>)> = self
            .complaints
            .iter()
            .map(|(d, c)| (*d, c.clone()))
            .collect();
        for (dealer, complainers) in complained {
            if self.disqualified.contains_key(&dealer) || !self.deals.contains_key(&dealer) {
                continue;
            }
            let Some(j) = self.justifications.get(&dealer).cloned() else {
                self.disqualify(dealer, "complaints left unanswered");
                continue;
            };
            let deal = self.deals[&dealer].clone();
            for c in complainers {
                match j.revealed.iter().find(|(r, _)| *r == c) {
                    Some((_, shares))
                        if shares.len() == self.config.thresholds.len()
                            && share_matches::<S>(&self.domain, &deal, c, shares) =>
                    {
                        if c == self.me {
                            self.shares.insert(dealer, shares.clone());
                        }
                    }
                    _ => {
                        self.disqualify(dealer, "invalid or missing justification");
                        break;
                    }
                }
            }
        }
        let qual = self.candidates();
        if (qual.len() as u32) < self.config.min_qualified {
            self.phase = DkgPhase::Failed;
            return vec![DkgAction::Failed(format!(
                "only {} qualified dealers, need {}",
                qual.len(),
                self.config.min_qualified
            ))];
        }
        let mut keys = Vec::with_capacity(self.config.thresholds.len());
        let thresholds = self.config.thresholds.clone();
        for (k, &t) in thresholds.iter().enumerate() {
            let Some(value) = qual
                .iter()
                .map(|d| self.shares.get(d).map(|s| s[k]))
                .sum::<Option<Scalar>>()
            else {
                self.phase = DkgPhase::Failed;
                return vec![DkgAction::Failed(
                    "a qualified dealer's share is missing".into(),
                )];
            };
            let (public_polynomial, verification_keys) = self.derive(k, &qual);
            let secret_share = SecretShare::new(self.me, value);
            if secret_share.verification_key::<S>() != verification_keys[self.me.0 as usize] {
                self.phase = DkgPhase::Failed;
                return vec![DkgAction::Failed(format!(
                    "threshold {t}: own share does not match the group polynomial"
                ))];
            }
            keys.push(ThresholdKeyMaterial {
                threshold: t,
                public_polynomial,
                secret_share,
                verification_keys,
            });
        }
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

    fn memo_key(&self, what: &str, k: usize, dealers: &[NodeIndex]) -> [u8; 32] {
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
    fn derive(&mut self, k: usize, dealers: &[NodeIndex]) -> Derived<S> {
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

    /// Sum of the commitments of `dealers` for threshold `k`.
    fn group_polynomial(&self, k: usize, dealers: &[NodeIndex]) -> Arc<Vec<S::PublicKey>> {
        let key = self.memo_key("group-polynomial", k, dealers);
        self.memo.get_or_compute(key, || {
            let t = self.config.thresholds[k] as usize;
            let mut sum = vec![S::PublicKey::identity(); t];
            for d in dealers {
                for (acc, c) in sum.iter_mut().zip(&self.deals[d].commitments[k]) {
                    *acc = acc.add(c);
                }
            }
            sum
        })
    }
}

/// Whether `shares` (one per threshold) of member `j` match the dealer's commitments:
/// `g^{s_k} == sum_i C_{k,i} x_j^i` (one MSM per threshold).
pub fn share_matches<S: Scheme>(
    domain: &SignerDomain,
    deal: &Deal<S>,
    j: NodeIndex,
    shares: &[Scalar],
) -> bool {
    let Ok(x) = domain.point(j) else { return false };
    deal.commitments.iter().zip(shares).all(|(c, s)| {
        let mut powers = Vec::with_capacity(c.len());
        let mut acc = Scalar::one();
        for _ in 0..c.len() {
            powers.push(acc);
            acc *= x;
        }
        S::PublicKey::msm(c, &powers) == S::PublicKey::generator().mul(s)
    })
}

/// Evaluates the polynomial with coefficients `g^{a_i}` "in the exponent" at every
/// member's point: an FFT over the group (`(N/2) log N` scalar multiplications, on
/// two threads for large `N`), instead of `n` separate evaluations.
pub fn evaluate_in_exponent<P: Point>(coefficients: &[P], domain: &SignerDomain) -> Vec<P> {
    let size = domain.size();
    let mut values = vec![P::identity(); size];
    for (i, c) in coefficients.iter().enumerate() {
        values[i % size] = values[i % size].add(c);
    }
    let log = log2_ceil(size);
    let fft = domain.fft();
    let omega = fft.omega();
    // Twiddles w^j for j < N/2.
    let mut twiddles = Vec::with_capacity(size / 2);
    let mut acc = Scalar::one();
    for _ in 0..size / 2 {
        twiddles.push(acc);
        acc *= omega;
    }
    bit_reverse_points(&mut values, log);
    let mut half = 1;
    while half < size {
        let stride = size / (2 * half);
        let stage = |chunk: &mut [P]| {
            let (lo, hi) = chunk.split_at_mut(half);
            for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                if b.is_identity() {
                    *b = *a;
                    continue;
                }
                let wb = if j == 0 {
                    *b
                } else {
                    b.mul(&twiddles[j * stride])
                };
                let (x, y) = (a.add(&wb), a.add(&wb.neg()));
                *a = x;
                *b = y;
            }
        };
        let chunks = size / (2 * half);
        if size >= 64 && chunks >= 2 {
            let (left, right) = values.split_at_mut(size / 2);
            std::thread::scope(|s| {
                s.spawn(|| left.chunks_exact_mut(2 * half).for_each(stage));
                right.chunks_exact_mut(2 * half).for_each(stage);
            });
        } else if size >= 64 {
            // Last stage: one chunk; split its butterflies between two threads.
            let (lo, hi) = values.split_at_mut(half);
            let (lo_a, lo_b) = lo.split_at_mut(half / 2);
            let (hi_a, hi_b) = hi.split_at_mut(half / 2);
            let part = |lo: &mut [P], hi: &mut [P], offset: usize| {
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let wb = b.mul(&twiddles[(j + offset) * stride]);
                    let (x, y) = (a.add(&wb), a.add(&wb.neg()));
                    *a = x;
                    *b = y;
                }
            };
            std::thread::scope(|s| {
                s.spawn(|| part(lo_b, hi_b, half / 2));
                part(lo_a, hi_a, 0);
            });
        } else {
            values.chunks_exact_mut(2 * half).for_each(stage);
        }
        half *= 2;
    }
    values.truncate(domain.n() as usize);
    values
}

fn bit_reverse_points<P: Copy>(values: &mut [P], log: u32) {
    if log == 0 {
        return;
    }
    for i in 0..values.len() {
        let j = i.reverse_bits() >> (usize::BITS - log);
        if i < j {
            values.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests;
