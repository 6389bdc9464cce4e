//! The `sbft-beacon` binary: the deterministic simulator, benchmarks, and (as the
//! project grows) real nodes.

mod bench;
mod plot;
mod sim_cmd;
mod verify_cmd;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Byzantine-fault-tolerant consensus with a threshold BLS random beacon.
#[derive(Parser)]
#[command(name = "sbft-beacon", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Simulate a whole network deterministically (DKG, then beacon rounds).
    Sim(Box<sim_cmd::SimArgs>),
    /// Verify a beacon chain with drand's rules.
    Verify(verify_cmd::VerifyArgs),
    /// Measure the cryptographic building blocks.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim_cmd::run(*args),
        Command::Verify(args) => verify_cmd::run(args),
        Command::Bench { which } => bench::run(which),
    }
}
