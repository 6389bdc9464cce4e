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
//! relay ([`PhaseMachine::with_relay`]) a phase also waits for the relay's word that every
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
//!
//! # Files
//! `config.rs` (the parameters), `messages.rs` (what members send, inputs,
//! timers, actions), `phases/` (the phase machine the DKG and the resharing
//! share: dispatch, phase ends, steps 1-3 and the judgement of step 4),
//! `genesis/` (the DKG's side of it: dealing, the batched share check, QUAL's
//! keys), `exponent.rs` (Feldman checks
//! and the FFT in the exponent), `output.rs` (the result), `verdicts.rs` (its `QUAL` and
//! exclusions, which the resharing's result holds too), `batch.rs` (the batched
//! share check), `committee.rs`, and the consistent broadcast in `relay/` with
//! the agreement step in `session/`.

pub mod batch;
pub mod commitments;
pub mod committee;
// Named exception: the in-memory harness is a driver, not protocol code; it
// times real runs with the wall clock.
#[allow(clippy::disallowed_methods)]
pub mod harness;
pub mod relay;
pub mod session;

pub mod phases;

pub(crate) mod complaints;
mod config;
mod disqualification;
mod exponent;
mod genesis;
mod messages;
mod output;
mod timing;
mod verdicts;

pub use commitments::Commitments;
pub use config::{DkgConfig, DkgSettings};
pub use disqualification::Disqualification;
pub use exponent::{evaluate_in_exponent, share_matches};
pub use genesis::{Dkg, Genesis};
pub use messages::{
    Complaint, Deal, DealtShares, DkgAction, DkgInput, DkgMessage, DkgTimer, Justification,
};
pub use output::{DkgOutput, ThresholdKeyMaterial};
pub use phases::{DkgFailure, PhaseMachine, PhaseOutput, Sharing};
pub use timing::{DkgTiming, ATTEMPT_PHASES, MAX_ATTEMPTS};
pub use verdicts::Verdicts;

use crate::field::Scalar;
use crate::memo::Memo;
use crate::scheme::Scheme;
use crate::{Error, NodeIndex, Time};
use std::sync::Arc;

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

#[cfg(test)]
mod tests;
