//! What a session takes and gives: its wire messages ([`SessionMessage`]:
//! relayed broadcasts, shares, votes, certificates, requests), timers,
//! inputs, outputs and failures, and the trait of anything that stands in a
//! session ([`SessionParticipant`]).

use crate::dkg::relay::{RelayMessage, RelayedWire};
use crate::dkg::{DealtShares, DkgFailure, DkgOutput, DkgTimer};
use crate::effect::Effect;
use crate::multisig::SignerBitmap;
use crate::scheme::Scheme;
use crate::{NodeIndex, Time};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A member's signed statement of its DKG result in one attempt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedResult {
    /// The attempt.
    pub attempt: u32,
    /// The signer.
    pub from: NodeIndex,
    /// Its qualified dealers (shared by every copy: a simulator hands one vote
    /// to thousands of members).
    pub qual: Arc<Vec<NodeIndex>>,
    /// SHA-256 of its group public polynomials ([`keys_digest`]).
    pub keys_digest: [u8; 32],
    /// The signer's BLS signature under its own consensus key (listed with a
    /// proof of possession, [`AgreementKeys`]) on `(members' keys, attempt
    /// session, result id)`, the result id being SHA-256 of `(qual,
    /// keys_digest)`: every voter for one result signs the same message, so
    /// the votes add up into one multi-signature ([`ResultCertificate`]).
    /// Compressed.
    ///
    /// [`AgreementKeys`]: super::AgreementKeys
    #[serde(with = "crate::wire::hex_bytes")]
    pub signature: Vec<u8>,
}

/// `n - f` or more members' votes for one result `(QUAL, keys digest)` in one
/// attempt, as one BLS multi-signature and the bitmap of its signers: what a
/// committee member sends everyone once its own result has a quorum (with a
/// hub, votes go to the committee only). About `n / 8` bytes and one point,
/// where signatures one by one took 68 bytes per signer (830 KB at 16,384
/// members).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultCertificate {
    /// The attempt.
    pub attempt: u32,
    /// The qualified dealers.
    pub qual: Arc<Vec<NodeIndex>>,
    /// SHA-256 of the group public polynomials ([`keys_digest`]).
    pub keys_digest: [u8; 32],
    /// Who signed.
    pub signers: SignerBitmap,
    /// The sum of their signatures ([`SignedResult::signature`]), compressed.
    #[serde(with = "crate::wire::hex_bytes")]
    pub signature: Vec<u8>,
}

/// What travels between the sessions of members.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum SessionMessage {
    /// A relay message (signed broadcasts, attestations, pulls).
    Relay {
        /// The attempt.
        attempt: u32,
        /// The message.
        message: RelayMessage,
    },
    /// A dealer's private shares for the recipient.
    Shares {
        /// The attempt.
        attempt: u32,
        /// The shares.
        shares: DealtShares,
    },
    /// A member's signed result.
    Result(SignedResult),
    /// `n - f` members' signatures on one result: with a hub, a committee
    /// member sends it to everyone once its own result has them, instead of
    /// every member sending its vote to every member.
    Certificate(Arc<ResultCertificate>),
    /// "I checked every deal and complain about none": with a hub, sent to the
    /// committee alone instead of a relayed complaint naming nobody (see
    /// [`crate::dkg::Dkg::has_hub`]). Authenticated by the transport, like
    /// shares; it decides nothing but when a phase may end early.
    NoComplaint {
        /// The attempt.
        attempt: u32,
    },
    /// A member asks a dealer for what it lacks of the dealer's: its deal,
    /// its shares for the asker, and, once the asker's own attempt is over
    /// without a quorum, the certificate of the agreed result: the asker
    /// restarted, or lost them (see [`DkgSession::request_missing`](super::DkgSession::request_missing)).
    Request {
        /// The attempt.
        attempt: u32,
        /// What the asker lacks.
        wants: Wants,
    },
}

/// What a member asks a dealer for ([`SessionMessage::Request`]). A member
/// that holds every deal and share and only waits for agreement asks for the
/// certificate alone: at 16,384 members, answering it with a deal (5,460
/// points) and shares too cost every dealer about 10,000 needless answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wants {
    /// The dealer's deal.
    pub deal: bool,
    /// The dealer's shares for the asker.
    pub shares: bool,
    /// The certificate of the result the dealer agreed on.
    pub certificate: bool,
}

impl SessionMessage {
    /// What an attempt's relayed DKG puts on the wire, tagged with the
    /// attempt.
    pub fn of_attempt(attempt: u32, wire: RelayedWire) -> Self {
        match wire {
            RelayedWire::Shares(shares) => SessionMessage::Shares { attempt, shares },
            RelayedWire::NoComplaint => SessionMessage::NoComplaint { attempt },
            RelayedWire::Relay(message) => SessionMessage::Relay { attempt, message },
        }
    }

    /// The attempt the message belongs to.
    pub fn attempt(&self) -> u32 {
        match self {
            SessionMessage::Relay { attempt, .. }
            | SessionMessage::Shares { attempt, .. }
            | SessionMessage::NoComplaint { attempt }
            | SessionMessage::Request { attempt, .. } => *attempt,
            SessionMessage::Result(r) => r.attempt,
            SessionMessage::Certificate(c) => c.attempt,
        }
    }

    /// Short name of the message kind.
    pub fn kind(&self) -> &'static str {
        match self {
            SessionMessage::Relay {
                message: RelayMessage::Broadcast { .. },
                ..
            } => "dkg-broadcast",
            SessionMessage::Relay {
                message: RelayMessage::Summary { .. },
                ..
            } => "dkg-summary",
            SessionMessage::Relay {
                message: RelayMessage::PullVersions { .. },
                ..
            } => "dkg-pull-versions",
            SessionMessage::Relay {
                message: RelayMessage::Versions { .. },
                ..
            } => "dkg-versions",
            SessionMessage::Relay {
                message: RelayMessage::Pull { .. },
                ..
            } => "dkg-pull",
            SessionMessage::Shares { .. } => "dkg-shares",
            SessionMessage::NoComplaint { .. } => "dkg-no-complaint",
            SessionMessage::Result(_) => "dkg-result",
            SessionMessage::Certificate(_) => "dkg-certificate",
            SessionMessage::Request { .. } => "dkg-request",
        }
    }
}

/// Timers of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SessionTimer {
    /// A phase of an attempt's DKG ended.
    Phase {
        /// The attempt.
        attempt: u32,
        /// The phase timer.
        timer: DkgTimer,
    },
    /// The time for an attempt (and its agreement) is over.
    EndOfAttempt {
        /// The attempt.
        attempt: u32,
    },
}

/// Inputs of a session.
#[derive(Clone, Debug)]
pub enum SessionInput {
    /// Begin attempt 0.
    Start,
    /// A message from an authenticated peer.
    Message {
        /// The sender (as authenticated by the transport).
        from: NodeIndex,
        /// The message.
        message: SessionMessage,
    },
    /// A timer fired.
    Timer(SessionTimer),
}

/// Outputs of a session.
#[derive(Clone, Debug)]
pub enum SessionOutput<S: Scheme> {
    /// Send, broadcast, or set a timer.
    Effect(Effect<SessionMessage, SessionTimer>),
    /// `n - f` members agree with this result: persist it and use it.
    Complete(Arc<DkgOutput<S>>),
    /// No agreement within the attempts (or a quorum agreed on another result).
    Failed(SessionFailure),
}

/// Why a session ended without a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionFailure {
    /// No `n - f` members signed this member's result within the attempts.
    NoAgreement {
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt's DKG failed at this member, if it did.
        last: Option<DkgFailure>,
    },
    /// `n - f` members agreed on a result this member does not hold.
    OtherResult {
        /// The attempt.
        attempt: u32,
    },
    /// The next attempt's parts could not be built.
    CannotStartAttempt,
}

impl fmt::Display for SessionFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionFailure::NoAgreement { attempts, last } => {
                write!(f, "no agreement after {attempts} attempts (last: ")?;
                match last {
                    Some(why) => write!(f, "{why})"),
                    None => write!(f, "no n - f members signed the same result)"),
                }
            }
            SessionFailure::OtherResult { attempt } => write!(
                f,
                "attempt {attempt}: n - f members agreed on a result this member does not hold"
            ),
            SessionFailure::CannotStartAttempt => write!(f, "cannot start the next attempt"),
        }
    }
}

impl std::error::Error for SessionFailure {}

/// Anything that can stand in a DKG session: the honest [`DkgSession`](super::DkgSession) or a
/// Byzantine wrapper around it.
pub trait SessionParticipant<S: Scheme>: Send {
    /// Handles one input at `now`.
    fn handle(&mut self, now: Time, input: SessionInput) -> Vec<SessionOutput<S>>;
    /// Whether this participant follows the protocol.
    fn is_honest(&self) -> bool {
        true
    }
    /// What it waits for, for logs (empty if it does not say).
    fn progress(&self) -> String {
        String::new()
    }
    /// The current attempt (0-based): once complete, the agreed one.
    fn attempt(&self) -> u32;
}
