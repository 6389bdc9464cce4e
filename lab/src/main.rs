//! The `sbft-beacon` binary: one command line for the node and the lab.
//!
//! - The node's commands, from the `node-cli` crate ([`node_cli::NodeCommand`],
//!   the whole of the container image's slim `sbft-beacon-node`): `run` (one
//!   node of a network), `reshare` (propose a change of members to it), `keys`
//!   (its identity), `verify` (check a chain with drand's rules) and `health`
//!   (the container health check).
//! - The lab, the tools that start, deploy, simulate and measure networks:
//!   `localnet` (local node processes, over the emulated WAN of [`wan`] if
//!   asked), `chaos` (such a network under faults drawn from a seed),
//!   `deploy compose`, `sim` (the deterministic simulator), `compare` (the
//!   simulator against a real network), `bench` (the cryptographic building
//!   blocks; `bench calibrate` fits the simulator's cost model), with
//!   [`plot`] and [`protocol_args`] shared among them.
//! - `tle`: timelock encryption to a round, a client of any beacon's API.
//!
//! Every command that talks HTTP gets its client from
//! [`node_cli::http_client`] (http and https, the platform's roots and
//! `--cacert`).
//!
//! The `node` crate knows nothing of this one, nor of the simulator.

#![warn(unreachable_pub)]

#[macro_use]
extern crate node_cli;

mod bench;
mod calibrate;
mod chaos;
mod compare;
mod deploy;
mod localnet;
mod plot;
mod protocol_args;
mod sim_cmd;
mod tle_cmd;
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
    /// The node's commands: `run`, `reshare`, `keys`, `verify`, `health`.
    #[command(flatten)]
    Node(node_cli::NodeCommand),
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
    /// Simulate a whole network deterministically (DKG, then beacon rounds).
    Sim(Box<sim_cmd::SimArgs>),
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
        Command::Node(command) => command.run(),
        Command::Localnet(args) => localnet::run(args),
        Command::Chaos(args) => chaos::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Deploy(args) => deploy::run(args),
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Tle(args) => tle_cmd::run(args),
        Command::Bench { which } => bench::run(which),
    }
}
