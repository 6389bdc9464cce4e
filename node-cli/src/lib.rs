//! The node's command line, a library for two binaries: the slim
//! `sbft-beacon-node` of the container image (`src/main.rs`: these commands
//! and nothing else) and the lab's `sbft-beacon` (the same commands, with the
//! simulator, the plotters and the benches beside them).
//!
//! - [`NodeCommand`]: `run` (one node of a network), `keys` (its identity and
//!   consensus key), `reshare` (propose a change of members to it), `verify`
//!   (check a chain with drand's rules) and `health` (the image's health
//!   check), each in its `*_cmd` module;
//! - [`http_client`]: the one HTTP client of every command that talks to an
//!   API (these and the lab's);
//! - [`with_bls_scheme!`]: calls a function generic over the BLS scheme a
//!   [`beacon::SchemeId`] names.
//!
//! It depends on the `node` library and never on the simulator.

#![warn(unreachable_pub)]

/// Calls `$f::<S>($args)` with the BLS scheme `S` named by a [`beacon::SchemeId`]
/// (the caller depends on `beacon` and `anyhow`).
#[macro_export]
macro_rules! with_bls_scheme {
    ($scheme:expr, $f:ident, $args:expr) => {
        match $scheme {
            beacon::SchemeId::PedersenBlsChained => $f::<beacon::MinPk>($args),
            beacon::SchemeId::BlsChainedG1Rfc9380 => $f::<beacon::MinSig>($args),
            beacon::SchemeId::BlsUnchainedG1Rfc9380 => $f::<beacon::MinSigUnchained>($args),
            beacon::SchemeId::PedersenBlsUnchained => $f::<beacon::MinPkUnchained>($args),
            other => anyhow::bail!(
                "{other} is not a BLS scheme that signs (pedersen-bls-chained, bls-chained-g1-rfc9380, bls-unchained-g1-rfc9380, pedersen-bls-unchained)"
            ),
        }
    };
}

pub mod health_cmd;
pub mod http_client;
pub mod keys_cmd;
pub mod reshare_cmd;
pub mod run_cmd;
pub mod verify_cmd;

use anyhow::Result;
use clap::Subcommand;

/// The node's commands: the slim binary's whole command line, and part of
/// the lab's.
#[derive(Subcommand)]
pub enum NodeCommand {
    /// Run one node of a network (libp2p, DKG, beacon rounds, HTTP API).
    Run(run_cmd::RunArgs),
    /// Propose a change of members to this machine's node (the chain decides
    /// it once n - f members propose it; the beacon key is reshared, the group
    /// key stays).
    Reshare(reshare_cmd::ReshareArgs),
    /// Create a node identity (libp2p key pair) and print its peer ID.
    Keys(keys_cmd::KeysArgs),
    /// Verify a beacon chain with drand's rules.
    Verify(verify_cmd::VerifyArgs),
    /// Probe a node's `/health` (the container image's health check).
    Health(health_cmd::HealthArgs),
}

impl NodeCommand {
    /// Runs the command.
    pub fn run(self) -> Result<()> {
        match self {
            NodeCommand::Run(args) => run_cmd::run(args),
            NodeCommand::Reshare(args) => reshare_cmd::run(args),
            NodeCommand::Keys(args) => keys_cmd::run(args),
            NodeCommand::Verify(args) => verify_cmd::run(args),
            NodeCommand::Health(args) => health_cmd::run(args),
        }
    }
}
