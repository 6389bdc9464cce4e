//! A real sbft-beacon node: configuration, identities, the libp2p transport, the
//! store, the HTTP API and metrics, and the event loop that drives the protocol's
//! state machines (`consensus::Member`) with them. The binary `sbft-beacon` (in
//! the `lab` crate) adds the command line and the measuring tools on top; this
//! crate does not depend on the simulator.
//!
//! - [`clock`]: the wall clock as protocol time, thread and process CPU time;
//! - [`config`]: `node.toml`, validated on load;
//! - [`identity`]: libp2p key pairs in owner-only files;
//! - [`limits`]: `[limits]` and the admission of frames by kind;
//! - [`net`]: TCP + noise + yamux, allow-listed peers, length-prefixed frames;
//! - [`store`]: key material file and the redb chain database;
//! - [`http`]: drand's v1 API, `/health`, `/metrics`, `/stats/rounds`;
//! - [`metrics`]: the Prometheus registry;
//! - [`recorder`]: what the node does with its replica's events (metrics,
//!   round statistics, logs, persistence);
//! - [`runtime`]: the event loop (`sbft-beacon run`).

#![warn(unreachable_pub)]

pub mod backfill;
pub mod clock;
pub mod config;
pub mod http;
pub mod identity;
pub mod limits;
pub mod logs;
pub mod metrics;
pub mod net;
pub mod recorder;
pub mod runtime;
pub mod store;

/// The node crate's error type.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration is invalid.
    #[error("config: {0}")]
    Config(String),
    /// An identity key file is missing or invalid.
    #[error("identity: {0}")]
    Identity(String),
    /// Reading or writing a file failed.
    #[error("io: {0}")]
    Io(String),
    /// The store failed or holds invalid data.
    #[error("store: {0}")]
    Store(String),
    /// The transport failed.
    #[error("network: {0}")]
    Network(String),
    /// The DKG failed.
    #[error("DKG failed: {0}")]
    Dkg(#[from] consensus::KeyGenerationFailure),
    /// The protocol rejected its parameters or key material.
    #[error(transparent)]
    Consensus(#[from] consensus::ConsensusError),
}
