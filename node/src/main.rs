//! The `sbft-beacon` binary: benchmarks of the threshold core (and, as the
//! project grows, the simulator and real nodes).

mod bench;

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
    /// Measure the cryptographic building blocks.
    Bench {
        #[command(subcommand)]
        which: bench::BenchCommand,
    },
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Bench { which } => bench::run(which),
    }
}
