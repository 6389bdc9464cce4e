//! The SBFT-style replica with chained threshold-BLS beacon rounds, as a pure
//! state machine: `Replica::handle(now, input) -> Vec<Output>`. No I/O, no clock,
//! no hidden randomness; the simulator and the real node drive the same code.
//!
//! - [`config`]: parameters (`n = 3f + 2c + 1`, thresholds, timeouts, pacing) and keys;
//! - [`election`]: primary and collectors drawn from a past beacon;
//! - [`messages`]: blocks and messages (PRE-PREPARE, SIGN-SHARE, ...), wire encoding;
//! - [`replica`]: the honest replica (protocol steps in its module docs);
//! - [`view_change`]: the view-change rule (the only safe block of a new view);
//! - [`byzantine`]: swappable Byzantine replicas for simulations and tests;
//! - [`byzantine_dkg`]: swappable Byzantine DKG sessions (the DKG-side behaviours);
//! - [`member`]: DKG then replica, the driver logic shared by simulator and node;
//! - [`corpus`]: genuine messages for fuzzing message sequences.
//!
//! The safety argument is in `SAFETY.md` next to this crate's manifest.

pub mod byzantine;
pub mod byzantine_dkg;
pub mod config;
pub mod corpus;
pub mod election;
pub mod member;
pub mod messages;
pub mod replica;
pub mod view_change;

pub use byzantine::{Behaviour, ByzantineReplica, Participant};
pub use config::{KeyShare, ReplicaConfig, ReplicaKeys};
pub use election::Election;
pub use member::{member_key, Envelope, Member, MemberInput, MemberOutput, MemberTimer};
pub use messages::{Block, CommitCertificate, CommitPath, CommittedEntry, Digest, Message};
pub use replica::{Evidence, EvidenceKind, Input, Output, Replica, Timer};

/// A height of the chain (= the beacon round decided with it).
pub type Height = u64;
/// A view within a height.
pub type View = u64;

/// The consensus crate's error type.
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    /// A configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A cryptographic or encoding error from the beacon crate.
    #[error(transparent)]
    Beacon(#[from] beacon::Error),
}
