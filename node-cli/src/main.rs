//! `sbft-beacon-node`: the slim binary of the container image, the node's
//! commands alone (`run`, `keys`, `reshare`, `verify`, `health`; see
//! [`node_cli::NodeCommand`]). The lab's `sbft-beacon` has the same commands
//! and the measuring tools.

use anyhow::Result;
use clap::Parser;

/// One node of a Byzantine-fault-tolerant network with a threshold BLS random
/// beacon: run it, make its keys, propose a change of members, verify a chain,
/// probe its health.
#[derive(Parser)]
#[command(name = "sbft-beacon-node", version)]
struct Cli {
    #[command(subcommand)]
    command: node_cli::NodeCommand,
}

fn main() -> Result<()> {
    Cli::parse().command.run()
}
