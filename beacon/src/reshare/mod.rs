//! Resharing: the members of a running group deal their shares of the group key
//! to a new member set with a new threshold, as a sans-IO state machine
//! ([`Resharer`]). The group public key — and so the beacon chain — stays the
//! same; new shares do not combine with old ones.
//!
//! Desmedt–Jajodia redistribution with Feldman commitments, checked against the
//! old group's public polynomial, and the DKG's complaints and justifications.
//! The messages, timers and phases are the DKG's ([`DkgMessage`], [`DkgTimer`],
//! [`DkgPhase`]), so the DKG's consistent-broadcast relay ([`crate::dkg::relay`])
//! can carry them.
//!
//! # Protocol
//! The old group of `n_old` holds shares `f(w_old^i)` of a degree `t_old - 1`
//! polynomial `f` with public commitments `F_k = g^{f_k}` (the old public
//! polynomial; `F_0` is the group key). A [`ReshareEpoch`] names the old members,
//! `F`, the new members and the new threshold `t_new`; its session id is a hash of
//! all of them ([`ReshareSettings::session`]).
//! 1. **Deal.** Old member `i`, holding `s_i = f(w_old^i)`, draws a sub-polynomial
//!    `g_i` of degree `t_new - 1` with `g_i(0) = s_i`, broadcasts its commitments
//!    `G_{i,k} = g^{g_{i,k}}` ([`Deal`]) and sends each new member `j` its
//!    sub-share `g_i(w_new^j)` point to point ([`DealtShares`]).
//! 2. **Complaints** (end of the deal phase). Every participant disqualifies the
//!    old members with no deal, a deal of the wrong degree, or a constant term
//!    `G_{i,0}` other than the dealer's old verification key `F(w_old^i)` (all old
//!    keys from one FFT in the exponent). New member `j` checks all its sub-shares
//!    at once with secret random 128-bit weights `r_i`:
//!    `g^{sum_i r_i s_ij} == sum_{i,k} r_i (w_new^j)^k G_{i,k}` (one MSM), and one by
//!    one only when that fails; it broadcasts a [`Complaint`] naming every dealer
//!    whose sub-share is missing or wrong.
//! 3. **Justifications** (end of the complaint phase). A dealer with complaints
//!    broadcasts a [`Justification`] revealing the complainers' sub-shares.
//! 4. **Combine** (end of the justification phase). `QUAL` = the old dealers with
//!    a well-formed deal whose every complaint is answered by a revealed sub-share
//!    that matches its commitments (a complainer takes the revealed one). With
//!    `|QUAL| < t_old` the resharing fails ([`crate::dkg::DkgFailure::TooFewDealers`]). Otherwise
//!    the first `t_old` dealers of `QUAL` form `Q` (any `t_old` determine the
//!    secret, at least one of them is honest, and fewer dealers cost fewer
//!    multiplications); with `lambda_i` the Lagrange coefficients at zero of `Q`
//!    over the *old* points (the roots-of-unity method for large groups):
//!    - new share of `j`: `sum_{i in Q} lambda_i g_i(w_new^j)`;
//!    - new public polynomial: `H_k = sum_i lambda_i G_{i,k}` (one MSM per
//!      coefficient); every new verification key is `H` evaluated in the exponent
//!      at the new points (one FFT).
//!
//!    The combined polynomial `h = sum_i lambda_i g_i` has degree `t_new - 1` and
//!    `h(0) = sum_i lambda_i f(w_old^i) = f(0)`, since `f` has degree below
//!    `t_old = |Q|`: the same secret, so `H_0 = F_0`, the unchanged group key.
//!
//! # Participants
//! Messages name *participants* ([`Roster`]): the old members in old order, then
//! the new members that are not old members, in new order. An old member's
//! participant index is its old index. A member in both lists deals and receives;
//! [`MemberId`] ties one party across the two lists.
//!
//! # Model and caveats
//! As for [`crate::dkg::Dkg`]: broadcasts are consistent (the driver delivers one
//! version to all; over point-to-point links the DKG's relay provides that and
//! reports equivocation as [`crate::dkg::DkgInput::Faulty`]); channels are authenticated
//! and private; phases are bounded by timeouts, so every honest participant sees
//! the same broadcasts and computes the same `QUAL` and public polynomial.
//! Secrecy needs fewer than `t_old` corrupt old members and fewer than `t_new`
//! corrupt new members. Old shares still combine *among themselves* (any `t_old`
//! of them sign under the group key): old members must erase their shares once the
//! new group takes over, which the consensus decides. An old member that lost its
//! share does not deal (it counts as a dealer without a deal) and still receives:
//! with the same member list, that is how it gets a share back.
//!
//! # Phase transitions
//! The DKG's phase machine's ([`crate::dkg::phases`], with the table in
//! [`crate::dkg`]): this module only says who deals and receives, what a deal
//! is checked against, and how the qualified dealers' sub-shares combine
//! ([`Redistribution`]). A phase ends when everything it can still receive
//! is in (over the relay, once the relay confirmed it), or at its timer.
//!
//! Messages for a later phase are accepted early; messages for a phase already
//! over, from a participant in the wrong role, for another session, or repeated,
//! are ignored.
//!
//! # Example
//! A 4-member DKG, then a resharing to 5 members (two leave, three join) with
//! the in-memory [`harness`]:
//! ```
//! use beacon::dkg::{harness as dkg_harness, DkgSettings, DkgTiming};
//! use beacon::reshare::{harness, MemberId, ReshareSettings};
//! use beacon::{memo::Memo, MinSig};
//! let config = DkgSettings {
//!     session: [1; 32], n: 4, thresholds: vec![2], dealers: vec![],
//!     timing: DkgTiming::new(std::time::Duration::from_millis(1), 1),
//!     min_qualified: 2, max_faulty: 1,
//! }
//! .build()?;
//! let memo = Memo::shared();
//! let dkg = dkg_harness::run::<MinSig, _>(dkg_harness::honest(&config, 1, &memo)?, 1, &Default::default());
//! let old: Vec<_> = dkg.results.iter().map(|r| r.clone().unwrap().unwrap()).collect();
//! let id = |i: u8| MemberId([i; 32]);
//! let epoch = ReshareSettings::<MinSig> {
//!     epoch: 1,
//!     old_members: (0..4).map(id).collect(),
//!     old_public_polynomial: old[0].keys[0].public_polynomial.clone(),
//!     new_members: (2..7).map(id).collect(),
//!     new_threshold: 3,
//!     phase_timeout_us: 1_000,
//! }
//! .build()?;
//! let shares: Vec<_> = old.iter().map(|o| Some(o.keys[0].secret_share.clone())).collect();
//! let run = harness::run(harness::honest(&epoch, &shares, 2, &memo)?, 2, &Default::default());
//! // Participant 4 joins as new member 2; the group key is the DKG's.
//! let joined = run.results[4].clone().unwrap().expect("participant 4 reshared");
//! assert_eq!(joined.me, Some(beacon::NodeIndex(2)));
//! assert_eq!(joined.group_key(), old[0].keys[0].group_key());
//! # Ok::<(), beacon::Error>(())
//! ```

// Named exception: the in-memory harness is a driver, not protocol code; it
// times real runs with the wall clock.
#[allow(clippy::disallowed_methods)]
pub mod harness;
mod machine;
mod output;
mod verify;

pub use crate::dkg::{Complaint, Deal, DealtShares, DkgMessage, DkgPhase, DkgTimer, Justification};
pub use machine::{Redistribution, Resharer};
pub use output::ReshareOutput;

use crate::curve::Point;
use crate::dkg::PhaseOutput;
use crate::scheme::Scheme;
use crate::{Error, MemberSet, NodeIndex, ReshareError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Largest old or new group a resharing accepts.
pub const MAX_GROUP: u32 = 1 << 20;

/// The messages of a resharing: the DKG's, naming participants ([`Roster`]).
pub type ReshareMessage<S> = DkgMessage<S>;

/// A party's identity across epochs (for example its ed25519 member key); the
/// same party has the same id in the old and the new member list.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MemberId(pub [u8; 32]);

impl fmt::Debug for MemberId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MemberId({})", hex::encode(&self.0[..6]))
    }
}

/// What every participant of one resharing agrees on (decided by the
/// consensus), validated: a resharing runs only with one of these, and one
/// decoded from the wire is checked before it exists. Read its fields through
/// [`ReshareSettings`] (`epoch.new_threshold`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    bound = "",
    try_from = "ReshareSettings<S>",
    into = "ReshareSettings<S>"
)]
pub struct ReshareEpoch<S: Scheme>(ReshareSettings<S>);

impl<S: Scheme> std::ops::Deref for ReshareEpoch<S> {
    type Target = ReshareSettings<S>;
    fn deref(&self) -> &ReshareSettings<S> {
        &self.0
    }
}

impl<S: Scheme> TryFrom<ReshareSettings<S>> for ReshareEpoch<S> {
    type Error = Error;
    /// Checks `settings` ([`ReshareSettings::validate`]).
    fn try_from(settings: ReshareSettings<S>) -> Result<Self, Error> {
        settings.validate()?;
        Ok(ReshareEpoch(settings))
    }
}

impl<S: Scheme> From<ReshareEpoch<S>> for ReshareSettings<S> {
    fn from(epoch: ReshareEpoch<S>) -> Self {
        epoch.0
    }
}

impl<S: Scheme> ReshareEpoch<S> {
    /// A copy of the settings, to edit and [`ReshareSettings::build`] again.
    pub fn settings(&self) -> ReshareSettings<S> {
        self.0.clone()
    }

    /// A copy with `edit` applied to its settings, checked again.
    pub fn with(&self, edit: impl FnOnce(&mut ReshareSettings<S>)) -> Result<Self, Error> {
        let mut settings = self.0.clone();
        edit(&mut settings);
        settings.build()
    }
}

/// The fields of a [`ReshareEpoch`], unchecked: they become one only through
/// [`ReshareSettings::build`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct ReshareSettings<S: Scheme> {
    /// The epoch this resharing starts (never reused for one chain: it keys the
    /// session).
    pub epoch: u64,
    /// The old members, by old index.
    pub old_members: Vec<MemberId>,
    /// The old group's public polynomial (`t_old` commitments; the first is the
    /// group key).
    pub old_public_polynomial: Arc<Vec<S::PublicKey>>,
    /// The new members, by new index.
    pub new_members: Vec<MemberId>,
    /// The new threshold `t_new`.
    pub new_threshold: u32,
    /// Length of each phase, in microseconds.
    pub phase_timeout_us: u64,
}

fn check_members(set: MemberSet, members: &[MemberId]) -> Result<u32, Error> {
    let n = u32::try_from(members.len()).unwrap_or(u32::MAX);
    if n == 0 || n > MAX_GROUP {
        return Err(Error::Reshare(ReshareError::GroupSize {
            set,
            n,
            max: MAX_GROUP,
        }));
    }
    let mut sorted = members.to_vec();
    sorted.sort_unstable();
    if let Some(pair) = sorted.windows(2).find(|p| p[0] == p[1]) {
        return Err(Error::Reshare(ReshareError::DuplicateMember {
            member: pair[0],
            set,
        }));
    }
    Ok(n)
}

impl<S: Scheme> ReshareSettings<S> {
    /// These settings as a resharing, if they are valid ([`Self::validate`]).
    pub fn build(self) -> Result<ReshareEpoch<S>, Error> {
        ReshareEpoch::try_from(self)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), Error> {
        let n_old = check_members(MemberSet::Old, &self.old_members)?;
        let n_new = check_members(MemberSet::New, &self.new_members)?;
        let t_old = self.old_threshold();
        if t_old == 0 || t_old > n_old {
            return Err(Error::InvalidThreshold { t: t_old, n: n_old });
        }
        if self.new_threshold == 0 || self.new_threshold > n_new {
            return Err(Error::InvalidThreshold {
                t: self.new_threshold,
                n: n_new,
            });
        }
        if self.phase_timeout_us == 0 {
            return Err(Error::Reshare(ReshareError::ZeroPhaseTimeout));
        }
        Ok(())
    }

    /// The old threshold `t_old` (the length of the old public polynomial).
    pub fn old_threshold(&self) -> u32 {
        u32::try_from(self.old_public_polynomial.len()).unwrap_or(u32::MAX)
    }

    /// The group key, which the resharing keeps.
    pub fn group_key(&self) -> Option<&S::PublicKey> {
        self.old_public_polynomial.first()
    }

    /// The deterministic session id: SHA-256 over the epoch, both member lists,
    /// the old public polynomial and the new threshold. Every message names it.
    pub fn session(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/reshare/1");
        h.update(self.epoch.to_be_bytes());
        for list in [&self.old_members, &self.new_members] {
            h.update((list.len() as u64).to_be_bytes());
            for m in list {
                h.update(m.0);
            }
        }
        h.update((self.old_public_polynomial.len() as u64).to_be_bytes());
        for p in self.old_public_polynomial.iter() {
            h.update(p.to_bytes());
        }
        h.update(self.new_threshold.to_be_bytes());
        h.finalize().into()
    }

    /// The participants and their roles (the epoch must be valid).
    pub fn roster(&self) -> Roster {
        let n_old = self.old_members.len() as u32;
        let mut participants = self.old_members.clone();
        let mut index: BTreeMap<MemberId, NodeIndex> = participants
            .iter()
            .enumerate()
            .map(|(i, m)| (*m, NodeIndex(i as u32)))
            .collect();
        let mut of_new = Vec::with_capacity(self.new_members.len());
        for m in &self.new_members {
            let p = *index.entry(*m).or_insert_with(|| {
                participants.push(*m);
                NodeIndex(participants.len() as u32 - 1)
            });
            of_new.push(p);
        }
        let mut new_index = vec![None; participants.len()];
        for (j, p) in of_new.iter().enumerate() {
            new_index[p.0 as usize] = Some(NodeIndex(j as u32));
        }
        Roster {
            participants,
            n_old,
            index,
            new_index,
            of_new,
        }
    }
}

/// Who takes part in a resharing: participant `p` is old member `p` for
/// `p < n_old`; the new members that are not old members follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roster {
    participants: Vec<MemberId>,
    n_old: u32,
    index: BTreeMap<MemberId, NodeIndex>,
    new_index: Vec<Option<NodeIndex>>,
    of_new: Vec<NodeIndex>,
}

impl Roster {
    /// Every participant's identity, by participant index (for the driver's
    /// addressing).
    pub fn participants(&self) -> &[MemberId] {
        &self.participants
    }

    /// Number of participants.
    pub fn len(&self) -> u32 {
        self.participants.len() as u32
    }

    /// Whether there is no participant (never, for a valid epoch).
    pub fn is_empty(&self) -> bool {
        self.participants.is_empty()
    }

    /// The participant index of `member`.
    pub fn index_of(&self, member: &MemberId) -> Option<NodeIndex> {
        self.index.get(member).copied()
    }

    /// The old index of participant `p`, if it is an old member.
    pub fn old_index(&self, p: NodeIndex) -> Option<NodeIndex> {
        (p.0 < self.n_old).then_some(p)
    }

    /// The new index of participant `p`, if it is a new member.
    pub fn new_index(&self, p: NodeIndex) -> Option<NodeIndex> {
        self.new_index.get(p.0 as usize).copied().flatten()
    }

    /// The participant index of new member `j`.
    pub fn participant_of_new(&self, j: NodeIndex) -> Option<NodeIndex> {
        self.of_new.get(j.0 as usize).copied()
    }
}

/// Inputs of a [`Resharer`]: the DKG's (participant indices for members).
pub type ReshareInput<S> = crate::dkg::DkgInput<S>;

/// Outputs of a [`Resharer`]: effects, announcements to the relay, and the
/// result ([`PhaseOutput::Done`]: persist it; the new group uses it from the
/// switch the consensus decides) or why there is none.
pub type ResharePhaseOutput<S> = PhaseOutput<S, ReshareOutput<S>>;

#[cfg(test)]
mod tests;
