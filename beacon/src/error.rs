//! The beacon crate's one error type.

use crate::dkg::relay::Kind;
use crate::reshare::MemberId;
use crate::NodeIndex;
use std::fmt;

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
    InvalidSignature(SignatureError),
    /// A scheme identifier that this crate does not know. The `String` is the
    /// identifier as given (text from a file or a command line, reported back
    /// as it was), not a formatted reason.
    #[error("unknown scheme {0:?} (known: pedersen-bls-chained, bls-chained-g1-rfc9380, bls-unchained-g1-rfc9380, pedersen-bls-unchained)")]
    UnknownScheme(String),
    /// An interpolation method name that this crate does not know. The
    /// `String` is the name as given (reported back as it was).
    #[error("unknown interpolation method {0:?} (naive, fast, roots_of_unity)")]
    UnknownInterpolationMethod(String),
    /// Malformed hex.
    #[error("invalid hex in {what}: {reason}")]
    Hex {
        /// The field.
        what: &'static str,
        /// Why.
        reason: HexError,
    },
    /// Wire encoding or decoding failed.
    #[error("wire: {0}")]
    Wire(WireError),
    /// A chain of beacons is malformed (gap, wrong link, wrong genesis).
    #[error("chain broken at round {round}: {reason}")]
    BrokenChain {
        /// First bad round.
        round: u64,
        /// Why.
        reason: ChainBreak,
    },
    /// A DKG input or state is invalid.
    #[error("dkg: {0}")]
    Dkg(DkgError),
    /// A resharing input or state is invalid.
    #[error("reshare: {0}")]
    Reshare(ReshareError),
    /// A beacon period is not usable where it is asked for.
    #[error("period: {0}")]
    Period(PeriodError),
}

/// Why a beacon period ([`crate::time::Period`]) is refused ([`Error::Period`]).
/// Each message starts with the period, so that a caller can put the name of
/// its key before it (`period_ms = 1500ms: must be whole seconds ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// More milliseconds than `u64` microseconds hold.
    #[error("{ms} ms: too large (microseconds overflow 64 bits)")]
    TooLong {
        /// The milliseconds given.
        ms: u64,
    },
    /// Not whole milliseconds, where milliseconds are written.
    #[error("{period}: must be whole milliseconds")]
    NotWholeMillis {
        /// The period.
        period: crate::time::Period,
    },
    /// Not whole seconds, where chain info needs them.
    #[error("{period}: must be whole seconds (chain info counts the period in seconds)")]
    NotWholeSeconds {
        /// The period.
        period: crate::time::Period,
    },
    /// More seconds than chain info's `u32` holds.
    #[error("{period}: more seconds than chain info can hold (u32)")]
    TooManySeconds {
        /// The period.
        period: crate::time::Period,
    },
}

impl From<PeriodError> for Error {
    fn from(e: PeriodError) -> Self {
        Error::Period(e)
    }
}

/// Why a signature, a beacon or a chain's description is refused
/// ([`Error::InvalidSignature`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// A beacon for round 0, which is the genesis, not a beacon.
    #[error("round 0 is not a beacon")]
    RoundZero,
    /// A beacon's signature does not verify under the group key.
    #[error("round {round} does not verify")]
    DoesNotVerify {
        /// The beacon's round.
        round: u64,
    },
    /// A beacon's stated randomness is not the hash of its signature.
    #[error("round {round}: randomness is not SHA-256(signature)")]
    RandomnessMismatch {
        /// The beacon's round.
        round: u64,
    },
    /// A chain description's stated hash is not the hash of its fields.
    #[error("chain hash does not match the chain info")]
    ChainHashMismatch,
    /// A signature recovered from shares that each verified does not verify
    /// under the group key: the verification keys and the group key disagree.
    #[error("recovered signature from verified shares does not verify: inconsistent key")]
    InconsistentKey,
    /// A consensus public key's proof of possession does not verify.
    #[error("the proof of possession of the consensus key does not verify")]
    Possession,
}

/// Why a hex string does not decode ([`Error::Hex`]): the `hex` crate's
/// reasons, comparable and cloneable like the rest of [`Error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HexError {
    /// A character that is not a hex digit.
    #[error("Invalid character {character:?} at position {index}")]
    InvalidCharacter {
        /// The character.
        character: char,
        /// Its position in the string.
        index: usize,
    },
    /// An odd number of digits.
    #[error("Odd number of digits")]
    OddLength,
    /// A length that does not fit the destination.
    #[error("Invalid string length")]
    InvalidLength,
}

impl From<hex::FromHexError> for HexError {
    fn from(e: hex::FromHexError) -> Self {
        match e {
            hex::FromHexError::InvalidHexCharacter { c, index } => HexError::InvalidCharacter {
                character: c,
                index,
            },
            hex::FromHexError::OddLength => HexError::OddLength,
            hex::FromHexError::InvalidStringLength => HexError::InvalidLength,
        }
    }
}

/// Why the wire codec refused a value or a message ([`Error::Wire`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message is longer than [`crate::wire::MAX_MESSAGE_BYTES`].
    #[error("message of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// The message's length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The message ends before the value does.
    #[error("message ends {missing} bytes early")]
    Truncated {
        /// How many more bytes the value needed (at least).
        missing: usize,
    },
    /// A length inside the message promises more than the size limit.
    #[error("a length in the message exceeds the limit of {limit} bytes")]
    LengthOverLimit {
        /// The limit.
        limit: usize,
    },
    /// Bytes left after the value.
    #[error("{count} trailing bytes")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// The message holds more group elements than its kind may hold (see
    /// [`crate::wire::decode_with_point_budget`]).
    #[error("more points than this message kind may hold")]
    TooManyPoints,
    /// A point or scalar in the message is refused by its own check (wrong
    /// length, not on the curve, identity, non-canonical).
    #[error("{0}")]
    InvalidValue(Box<Error>),
    /// Any other malformation, in the codec's own words. The codec's error
    /// type can be neither cloned nor compared, so its message is kept as
    /// text.
    #[error("{0}")]
    Malformed(String),
    /// Encoding failed, in the codec's own words (its error type can be
    /// neither cloned nor compared).
    #[error("{0}")]
    Encode(String),
}

/// Why a chain of beacons is broken ([`Error::BrokenChain`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainBreak {
    /// The round is not the one after the previous beacon's.
    #[error("follows round {previous}")]
    Gap {
        /// The previous beacon's round.
        previous: u64,
    },
    /// A chained beacon's `previous_signature` is not the previous beacon's
    /// signature.
    #[error("previous_signature is not the previous round's signature")]
    WrongLink,
    /// Round 1 of a chained scheme does not chain on the genesis seed.
    #[error("round 1 does not chain on the genesis seed")]
    NotOnGenesisSeed,
    /// The beacon itself does not verify.
    #[error("{0}")]
    Unverified(Box<Error>),
}

/// Why a DKG's parameters, inputs, key material or relayed broadcast are
/// refused ([`Error::Dkg`]). Members are named by index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DkgError {
    /// `n = 0`.
    #[error("n must be at least 1")]
    NoMembers,
    /// No threshold was asked for.
    #[error("no thresholds requested")]
    NoThresholds,
    /// The dealer list is not strictly increasing.
    #[error("dealers must be sorted and distinct")]
    DealersUnsorted,
    /// The fault bound does not satisfy `n > 3f`.
    #[error("fault bound f = {max_faulty} needs n > 3f (n = {n})")]
    TooManyFaulty {
        /// The fault bound `f`.
        max_faulty: u32,
        /// Number of members.
        n: u32,
    },
    /// The attempt limit is outside `1..=16`.
    #[error("max_attempts must be in 1..=16 (got {max_attempts})")]
    MaxAttempts {
        /// The configured limit.
        max_attempts: u32,
    },
    /// A finished session rebuilt for an attempt the run does not have.
    #[error("attempt {attempt} of a DKG of {max_attempts} attempts")]
    AttemptOutOfRange {
        /// The attempt asked for.
        attempt: u32,
        /// The run's attempts.
        max_attempts: u32,
    },
    /// The minimum number of qualified dealers is outside `1..=dealers`.
    #[error("min_qualified = {min_qualified} must be in 1..={dealers}")]
    MinQualified {
        /// The configured minimum.
        min_qualified: u32,
        /// Number of dealers.
        dealers: u32,
    },
    /// The member key list does not have one key per member.
    #[error("{keys} member keys for n = {n}")]
    KeyCount {
        /// Keys given.
        keys: usize,
        /// Number of members.
        n: u32,
    },
    /// A member's signing key, or its consensus key, is not the public key
    /// listed for it.
    #[error("member {member}: the signing key or the consensus key does not match the listed public key")]
    SigningKeyMismatch {
        /// The member.
        member: NodeIndex,
    },
    /// Key material whose sizes disagree with its threshold and `n`.
    #[error("key material has the wrong size")]
    KeyMaterialSize,
    /// A secret share that does not match its verification key.
    #[error("secret share does not match its verification key")]
    ShareKeyMismatch,
    /// Private shares are sent, never relayed as a broadcast.
    #[error("DKG shares are not broadcast")]
    SharesNotBroadcast,
    /// A relay message from this member itself or from an index not below `n`.
    #[error("relay message from {from} (not another member)")]
    NotAnotherMember {
        /// The claimed sender.
        from: u32,
    },
    /// A broadcast from an origin not below `n`.
    #[error("DKG broadcast from unknown origin {origin}")]
    UnknownOrigin {
        /// The claimed origin.
        origin: u32,
    },
    /// A broadcast whose origin signature does not verify (or covers another
    /// attempt's session).
    #[error("DKG broadcast of {origin} with an invalid signature (or of another attempt)")]
    BadAttestation {
        /// The claimed origin.
        origin: u32,
    },
    /// A broadcast whose payload is not the one its digest names.
    #[error("DKG broadcast of {origin}: payload does not match its digest")]
    DigestMismatch {
        /// The claimed origin.
        origin: u32,
    },
    /// A broadcast whose payload does not decode.
    #[error("DKG broadcast of {origin}: {reason}")]
    UndecodablePayload {
        /// The claimed origin.
        origin: u32,
        /// Why it does not decode.
        reason: Box<Error>,
    },
    /// A broadcast whose payload is of another kind than attested.
    #[error("DKG broadcast of {origin}: payload is not a {kind:?}")]
    WrongKind {
        /// The claimed origin.
        origin: u32,
        /// The attested kind.
        kind: Kind,
    },
    /// A broadcast whose payload belongs to another session.
    #[error("DKG broadcast of {origin}: payload of another session")]
    OtherSession {
        /// The claimed origin.
        origin: u32,
    },
    /// A stored reason for a dealer's disqualification that names none of
    /// [`crate::dkg::Disqualification`]'s (the text as stored).
    #[error("unknown reason for a dealer's disqualification {text:?}")]
    UnknownDisqualification {
        /// The stored text.
        text: String,
    },
    /// A list of attested versions longer than any honest member sends.
    #[error("a list of {listed} versions from {from} (at most {max} exist)")]
    TooManyVersions {
        /// The sender.
        from: u32,
        /// Versions listed.
        listed: usize,
        /// Versions that can exist.
        max: usize,
    },
}

/// Which member set of a resharing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberSet {
    /// The members that hold the key now.
    Old,
    /// The members that will hold it.
    New,
}

impl fmt::Display for MemberSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemberSet::Old => "old",
            MemberSet::New => "new",
        })
    }
}

/// Why a resharing's parameters, inputs or key material are refused
/// ([`Error::Reshare`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReshareError {
    /// A member set that is empty or larger than [`crate::reshare::MAX_GROUP`].
    #[error("{n} {set} members (need 1..={max})")]
    GroupSize {
        /// Which set.
        set: MemberSet,
        /// Its size.
        n: u32,
        /// The largest allowed.
        max: u32,
    },
    /// A member listed twice in one set.
    #[error("{member:?} listed twice among the {set} members")]
    DuplicateMember {
        /// The member.
        member: MemberId,
        /// Which set.
        set: MemberSet,
    },
    /// A zero phase length.
    #[error("phase timeout must be positive")]
    ZeroPhaseTimeout,
    /// Key material whose sizes disagree with its threshold and `n`.
    #[error("key material has the wrong size")]
    KeyMaterialSize,
    /// A share that does not match its verification key.
    #[error("share does not match its verification key")]
    ShareKeyMismatch,
    /// A share without an index, an index without a share, or an index other
    /// than the share's.
    #[error("share and index disagree")]
    ShareIndexMismatch,
    /// A member that is in neither set.
    #[error("{member:?} is neither an old nor a new member")]
    NotAParticipant {
        /// The member.
        member: MemberId,
    },
    /// An old share of another old index than the member's.
    #[error("{member:?} holds a share of old index {old_index}, but is participant {participant}")]
    ShareOfAnotherIndex {
        /// The member.
        member: MemberId,
        /// The share's old index.
        old_index: NodeIndex,
        /// The member's participant index.
        participant: NodeIndex,
    },
    /// An old share that does not match the old public polynomial.
    #[error("the old share of {old_index} does not match the old public polynomial")]
    OldShareMismatch {
        /// The share's old index.
        old_index: NodeIndex,
    },
    /// A member's signing key is not the one its directory lists.
    #[error("party {party}: the member key does not match the directory")]
    MemberKeyMismatch {
        /// The member's directory index.
        party: u32,
    },
    /// A participant of the change that this member's directory does not list.
    #[error("{member:?} is not in this member's directory")]
    NotInDirectory {
        /// The participant.
        member: MemberId,
    },
    /// This member is neither an old nor a new member of the change.
    #[error("this member takes no part in the change")]
    NotInRoster,
}
