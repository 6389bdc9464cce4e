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

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The node crate's error type. The typed reasons of its parts
/// ([`config::ConfigError`], [`identity::IdentityError`],
/// [`store::StoreError`], [`net::NetworkError`]) say what failed, with the
/// file, field or address; each names its part first (`config: `,
/// `identity: `, `store: `, `network: `), and the error of the library
/// underneath is its source.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The configuration is invalid (boxed: it names peer IDs and paths,
    /// and every `Result` of the crate carries this type).
    #[error(transparent)]
    Config(Box<config::ConfigError>),
    /// An identity key file is missing or invalid.
    #[error(transparent)]
    Identity(#[from] identity::IdentityError),
    /// Creating, reading, writing or erasing a file failed.
    #[error("io: {op} {}: {source}", path.display())]
    Io {
        /// What the node was doing with the file.
        op: FileOp,
        /// The file (or directory).
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The handlers of SIGTERM and SIGINT could not be installed.
    #[error("io: installing a signal handler: {0}")]
    Signal(#[source] std::io::Error),
    /// The HTTP API could not bind its address or start its runtime.
    #[error("io: the HTTP API on {addr}: {source}")]
    HttpApi {
        /// The address it was to listen on.
        addr: SocketAddr,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The store failed or holds invalid data.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The transport failed.
    #[error(transparent)]
    Network(#[from] net::NetworkError),
    /// The DKG failed.
    #[error("DKG failed: {0}")]
    Dkg(#[from] consensus::KeyGenerationFailure),
    /// The protocol rejected its parameters or key material.
    #[error(transparent)]
    Consensus(#[from] consensus::ConsensusError),
}

impl From<config::ConfigError> for NodeError {
    fn from(e: config::ConfigError) -> Self {
        NodeError::Config(Box::new(e))
    }
}

impl NodeError {
    /// A failed `op` on the file at `path`.
    pub fn io(op: FileOp, path: &Path, source: std::io::Error) -> Self {
        NodeError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// What the node was doing with a file when it failed ([`NodeError::Io`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileOp {
    /// Creating a directory.
    Create,
    /// Reading a file.
    Read,
    /// Writing a file (atomically: a temporary file, then a rename).
    Write,
    /// Erasing a file.
    Erase,
}

impl std::fmt::Display for FileOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileOp::Create => "creating",
            FileOp::Read => "reading",
            FileOp::Write => "writing",
            FileOp::Erase => "erasing",
        })
    }
}
