//! The consensus crate's one error type, [`ConsensusError`]: a parameter
//! or key the protocol cannot use, with structured fields.

use crate::{behaviour, config};

/// The consensus crate's error type.
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    /// `n` is not `3f + 2c + 1` for the configured `c`: quorums derived from `f`
    /// would not be safe.
    #[error("n = {n} is not 3f + 2c + 1 for c = {c}{}", config::size_hint(*.n, *.c, .nearest, *.other_c))]
    NetworkSize {
        /// Replicas.
        n: u32,
        /// Extra collectors' slack.
        c: u32,
        /// The nearest valid sizes for this `c`.
        nearest: Vec<u32>,
        /// The smallest `c` that makes `n` valid, if any.
        other_c: Option<u32>,
    },
    /// `n`, `f` and `c` disagree.
    #[error("n = {n} but 3f + 2c + 1 = {expected} (f = {f}, c = {c}): the quorums are only safe at n = 3f + 2c + 1")]
    QuorumMismatch {
        /// Replicas.
        n: u32,
        /// Byzantine replicas tolerated.
        f: u32,
        /// Extra collectors' slack.
        c: u32,
        /// `3f + 2c + 1`.
        expected: u64,
    },
    /// A NEW-VIEW whose aggregated view changes are not a well-formed quorum
    /// (checked before any signature).
    #[error("malformed NEW-VIEW: {reason}")]
    MalformedNewView {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A parameter outside its bounds.
    #[error("{name} = {value} outside [{min}, {max}]")]
    OutOfRange {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: u64,
        /// Smallest accepted.
        min: u64,
        /// Largest accepted.
        max: u64,
    },
    /// A parameter that must be positive is zero.
    #[error("{name} must be positive")]
    NotPositive {
        /// The parameter.
        name: &'static str,
    },
    /// The largest block does not fit a NEW-VIEW in one wire message.
    #[error("max_block_bytes = {max_block_bytes} does not fit a NEW-VIEW of {view_changes} view changes in a {message_bytes} byte message (at most {fits})")]
    BlockTooLarge {
        /// Configured largest block.
        max_block_bytes: usize,
        /// View changes in a NEW-VIEW.
        view_changes: u32,
        /// The wire limit.
        message_bytes: usize,
        /// The largest block that fits.
        fits: usize,
    },
    /// The network is too large for a NEW-VIEW to fit one wire message
    /// even with the smallest block: its aggregated view changes alone (about
    /// 4 bytes per sender and a claim group each, at worst) outgrow the limit.
    #[error("n = {n}: a NEW-VIEW of {view_changes} aggregated view changes (up to {proof_bytes} bytes) and a block of at least 1024 bytes does not fit a {message_bytes} byte message")]
    NewViewTooLarge {
        /// Replicas.
        n: u32,
        /// View changes in a NEW-VIEW.
        view_changes: u32,
        /// The bound of their aggregated encoding.
        proof_bytes: usize,
        /// The wire limit.
        message_bytes: usize,
    },
    /// A parameter the protocol cannot use, for the reason given.
    #[error("{name} = {value}: {reason}")]
    Unusable {
        /// The parameter (its name in the `[protocol]` table).
        name: &'static str,
        /// Its value.
        value: u64,
        /// Why it cannot be used.
        reason: &'static str,
    },
    /// A beacon period the protocol cannot use (not whole seconds, too
    /// long), named by its key.
    #[error("{name} = {source}")]
    Period {
        /// The parameter (`period_ms` in a `[protocol]` table, `period_us` in
        /// a replica's settings).
        name: &'static str,
        /// Why it cannot be used (its message starts with the period).
        source: beacon::PeriodError,
    },
    /// Key material from a DKG with other parameters than the replica's.
    #[error("DKG (n = {dkg_n}, thresholds {dkg_thresholds:?}) does not match the replica config (n = {n}, thresholds {thresholds:?})")]
    DkgMismatch {
        /// The DKG's `n`.
        dkg_n: u32,
        /// The DKG's thresholds.
        dkg_thresholds: Vec<u32>,
        /// The replica's `n`.
        n: u32,
        /// The thresholds the replica needs.
        thresholds: Vec<u32>,
    },
    /// A member's listed consensus key is not a valid key with a valid proof
    /// of possession.
    #[error("consensus key of member {member}: {source}")]
    ConsensusKey {
        /// The member (its index in the list).
        member: u32,
        /// Why the key or its proof was refused.
        source: beacon::Error,
    },
    /// An epoch lists another number of consensus keys than it has members.
    #[error("{listed} consensus keys listed for {n} members")]
    ConsensusKeyCount {
        /// Keys listed.
        listed: u32,
        /// Members.
        n: u32,
    },
    /// The epoch's list holds another consensus key than this member's own.
    #[error("member {member}'s listed consensus key is not its own")]
    NotMyConsensusKey {
        /// This member's index.
        member: u32,
    },
    /// A restored chain whose heights are not consecutive.
    #[error("the stored chain's heights are not consecutive")]
    ChainGap,
    /// A Byzantine behaviour name ([`Behaviour`](crate::Behaviour)) that names none.
    #[error("unknown behaviour {name:?}; known: {}", behaviour::known_names())]
    UnknownBehaviour {
        /// The name as given.
        name: String,
    },
    /// A beacon-share route ([`BeaconShares`](crate::BeaconShares)) that names none.
    #[error("{name:?} is not a beacon-share route: collectors or everyone")]
    UnknownBeaconShares {
        /// The name as given.
        name: String,
    },
    /// A cryptographic or encoding error from the beacon crate.
    #[error(transparent)]
    Beacon(#[from] beacon::Error),
}
