//! The beacon crate's one error type.

use crate::NodeIndex;

/// Everything that can go wrong in the beacon crate: bad encodings, bad share
/// sets, bad parameters, failed verification. Provable misbehaviour of a signer is
/// reported as data (the list of invalid signers), not as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A byte string has the wrong length.
    #[error("{what}: expected {expected} bytes, got {got}")]
    WrongLength {
        /// What was being decoded.
        what: &'static str,
        /// Required length.
        expected: usize,
        /// Actual length.
        got: usize,
    },
    /// The bytes are not a canonical compressed point encoding.
    #[error("{what}: invalid point encoding")]
    BadEncoding {
        /// The group.
        what: &'static str,
    },
    /// The encoded point is not on the curve.
    #[error("{what}: point not on the curve")]
    NotOnCurve {
        /// The group.
        what: &'static str,
    },
    /// The encoded point is outside the prime-order subgroup.
    #[error("{what}: point not in the prime-order subgroup")]
    NotInSubgroup {
        /// The group.
        what: &'static str,
    },
    /// The encoded point is the identity, which is never a valid key or signature.
    #[error("{what}: identity point")]
    IdentityPoint {
        /// The group.
        what: &'static str,
    },
    /// A scalar encoding is not reduced modulo r.
    #[error("scalar encoding is not canonical (>= r)")]
    NonCanonicalScalar,
    /// Fewer shares than the threshold.
    #[error("not enough shares: have {have}, need {need}")]
    NotEnoughShares {
        /// Distinct valid shares available.
        have: usize,
        /// The threshold.
        need: usize,
    },
    /// Two shares from one signer.
    #[error("duplicate share from signer {signer}")]
    DuplicateSigner {
        /// The repeated signer.
        signer: NodeIndex,
    },
    /// A signer index is not below n.
    #[error("signer {signer} out of range (n = {n})")]
    SignerOutOfRange {
        /// The offending index.
        signer: NodeIndex,
        /// Number of signers.
        n: u32,
    },
    /// A share was offered for another message than the one being aggregated.
    #[error("share from signer {signer} is for a different message")]
    MessageMismatch {
        /// The signer of the mismatched share.
        signer: NodeIndex,
    },
    /// Threshold parameters out of range.
    #[error("invalid threshold: t = {t}, n = {n} (need 1 <= t <= n <= 2^32 - 1)")]
    InvalidThreshold {
        /// Threshold.
        t: u32,
        /// Number of signers.
        n: u32,
    },
    /// Interpolation points are repeated or zero.
    #[error("interpolation points must be distinct and non-zero")]
    InvalidPoints,
    /// Two inputs that must have the same length do not.
    #[error("length mismatch: {what} ({left} vs {right})")]
    LengthMismatch {
        /// What was compared.
        what: &'static str,
        /// One length.
        left: usize,
        /// The other length.
        right: usize,
    },
    /// A signature or beacon does not verify.
    #[error("invalid signature: {0}")]
    InvalidSignature(String),
    /// A scheme identifier that this crate does not know.
    #[error("unknown scheme {0:?} (known: pedersen-bls-chained, bls-chained-g1-rfc9380, bls-unchained-g1-rfc9380, pedersen-bls-unchained)")]
    UnknownScheme(String),
    /// Malformed hex.
    #[error("invalid hex in {what}: {reason}")]
    Hex {
        /// The field.
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// Wire encoding or decoding failed.
    #[error("wire: {0}")]
    Wire(String),
    /// A chain of beacons is malformed (gap, wrong link, wrong genesis).
    #[error("chain broken at round {round}: {reason}")]
    BrokenChain {
        /// First bad round.
        round: u64,
        /// Why.
        reason: String,
    },
    /// A DKG input or state is invalid.
    #[error("dkg: {0}")]
    Dkg(String),
    /// A resharing input or state is invalid.
    #[error("reshare: {0}")]
    Reshare(String),
}
