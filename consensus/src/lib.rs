//! The SBFT-style replica with chained threshold-BLS beacon rounds, as a pure
//! state machine: `Replica::handle(now, input) -> Vec<Output>`. No I/O, no clock,
//! no hidden randomness; the simulator and the real node drive the same code.
//!
//! - [`params`]: the `[protocol]` table of scenarios and `node.toml` (one set of
//!   defaults, milliseconds), and the one function that turns it into a replica config;
//! - [`config`]: replica parameters (`n = 3f + 2c + 1`, thresholds, timeouts, pacing),
//!   the DKG and chain info they imply, and keys;
//! - [`election`]: primary and collectors drawn from a past beacon;
//! - [`messages`]: blocks and messages (PRE-PREPARE, SIGN-SHARE, ...), wire encoding;
//! - [`replica`]: the honest replica (protocol steps in its module docs);
//! - [`participant`]: what drivers hold, the honest replica or a wrapper, and
//!   the [`Adversary`] a driver plugs into a member to build such wrappers;
//! - [`position`]: [`Height`] and [`View`], counters with checked arithmetic only;
//! - [`behaviour`], [`byzantine`]: the Byzantine kinds, and swappable Byzantine
//!   replicas for simulations and tests;
//! - [`byzantine_dkg`]: swappable Byzantine DKG sessions (the DKG-side behaviours);
//! - [`member`]: DKG then replica, the driver logic shared by simulator and node;
//! - [`latency`]: round latency from the events drivers stamp;
//! - [`observe`]: the one observer interface of the drivers for those events;
//! - [`corpus`]: genuine messages for fuzzing message sequences;
//! - [`error`]: the crate's one error type, [`ConsensusError`].
//!
//! The safety argument is in `SAFETY.md` next to this crate's manifest.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

pub mod behaviour;
pub mod byzantine;
pub mod byzantine_dkg;
pub mod config;
pub mod corpus;
pub mod disk;
pub mod election;
pub mod epoch;
pub mod error;
pub mod keys;
pub mod latency;
pub mod member;
pub mod messages;
pub mod observe;
pub mod params;
pub mod participant;
pub mod position;
pub mod replica;

pub use byzantine::{Behaviour, ByzantineReplica};
pub use config::{BeaconShares, ReplicaConfig, ReplicaSettings};
pub use election::Election;
pub use epoch::MemberIdentity;
pub use error::ConsensusError;
pub use keys::{EpochKeys, KeyShare, ReplicaKeys};
pub use member::{
    consensus_key, member_key, Envelope, EpochChangeFailure, EpochEvent, KeyGenerationFailure,
    Member, MemberInput, MemberOutput, MemberTimer, RestoredParts,
};
pub use messages::{Block, CommitCertificate, CommitPath, CommittedEntry, Digest, Message};
pub use observe::Observer;
pub use params::{DkgParams, ProtocolParams};
pub use participant::{Adversary, Participant};
pub use replica::{
    Event, Evidence, EvidenceKind, Input, Output, ProofKind, Refusal, Replica, ShareKind,
    SignedVotes, Timer,
};

pub use position::{DirectoryIndex, Epoch, Height, View};
