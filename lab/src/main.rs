//! The `sbft-beacon` binary: one command line for the node and the lab.
//!
//! - The node's commands, on the `node` library: `run` (one node of a
//!   network), `reshare` (propose a change of members to it), `keys` (its
//!   identity) and `verify` (check a chain with drand's rules).
//! - The lab, the tools that start, deploy, simulate and measure networks:
//!   `localnet` (local node processes, over the emulated WAN of [`wan`] if
//!   asked), `chaos` (such a network under faults drawn from a seed), `deploy compose` (and `health` for container health checks),
//!   `sim` (the deterministic simulator), `compare` (the simulator against a
//!   real network), `bench` (the cryptographic building blocks; `bench
//!   calibrate` fits the simulator's cost model), with [`plot`] and
//!   [`protocol_args`] shared among them.
//! - `tle`: timelock encryption to a round, a client of any beacon's API.
//!
//! Every command that talks HTTP gets its client from [`http_client`] (http
//! and https, the platform's roots and `--cacert`).
//!
//! The `node` crate knows nothing of this one, nor of the simulator.

#![warn(unreachable_pub)]

/// Calls `$f::<S>($args)` with the BLS scheme `S` named by a [`beacon::SchemeId`].
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

mod bench;
mod calibrate;
mod chaos;
mod compare;
mod deploy;
mod http_client;
mod keys_cmd;
mod localnet;
mod plot;
mod protocol_args;
mod reshare_cmd;
mod run_cmd;
mod sim_cmd;
mod tle_cmd;
mod verify_cmd;
mod wan;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Byzantine-fault-tolerant consensus with a threshold BLS random beacon.
#[derive(Parser)]
#[command(name = "sbft-beacon", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one node of a network (libp2p, DKG, beacon rounds, HTTP API).
    Run(run_cmd::RunArgs),
    /// Propose a change of members to this machine's node (the chain decides
    /// it once n - f members propose it; the beacon key is reshared, the group
    /// key stays).
    Reshare(reshare_cmd::ReshareArgs),
    /// Create a node identity (libp2p key pair) and print its peer ID.
    Keys(keys_cmd::KeysArgs),
    /// Start a local network of N node processes and measure its rounds.
    Localnet(localnet::LocalnetArgs),
    /// Run a local network of real processes under faults drawn from a seed
    /// (kills, partitions, clock skew, slow links, a full disk, changes of
    /// members) and check safety and recovery along the way.
    Chaos(chaos::ChaosArgs),
    /// The simulator against a real network over the emulated WAN: same
    /// topology, parameters and seed, one report with the relative errors.
    Compare(compare::CompareArgs),
    /// Write a whole network as files for a deployment engine (Docker Compose,
    /// on one machine or on N hosts).
    Deploy(deploy::DeployArgs),
    /// Probe a node's `/health` (the container image's health check).
    Health(deploy::HealthArgs),
    /// Simulate a whole network deterministically (DKG, then beacon rounds).
    Sim(Box<sim_cmd::SimArgs>),
    /// Verify a beacon chain with drand's rules.
    Verify(verify_cmd::VerifyArgs),
    /// Timelock encryption to a future round (drand's `tle`, interoperable):
    /// `tle encrypt --round R | --duration D`, `tle decrypt`.
    Tle(tle_cmd::TleArgs),
    /// Measure the cryptographic building blocks.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Reshare(args) => reshare_cmd::run(args),
        Command::Keys(args) => keys_cmd::run(args),
        Command::Localnet(args) => localnet::run(args),
        Command::Chaos(args) => chaos::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Deploy(args) => deploy::run(args),
        Command::Health(args) => deploy::health(args),
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Verify(args) => verify_cmd::run(args),
        Command::Tle(args) => tle_cmd::run(args),
        Command::Bench { which } => bench::run(which),
    }
}
