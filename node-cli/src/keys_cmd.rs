//! `sbft-beacon keys`: creates a node's keys — its identity (an ed25519 libp2p
//! key pair) and its consensus key (a BLS key for its votes), each in a file
//! only its owner can read, the consensus key as `consensus.key` beside the
//! identity — and prints what `[[peers]]` lists for it: its peer ID, its
//! consensus public key and the proof of possession of that key under the
//! network's scheme. `--show` prints the same of existing files.

use anyhow::{bail, Context as _, Result};
use beacon::SchemeId;
use clap::Args;
use node::identity;
use std::path::PathBuf;

/// Options of `keys`.
#[derive(Args)]
pub struct KeysArgs {
    /// Where to write the new identity (the consensus key goes beside it,
    /// as `consensus.key`).
    #[arg(long, value_name = "FILE", required_unless_present = "show")]
    out: Option<PathBuf>,
    /// Print the peer ID and consensus key of an existing identity instead.
    #[arg(long, value_name = "FILE", conflicts_with = "out")]
    show: Option<PathBuf>,
    /// The network's signature scheme: it decides the group of the consensus
    /// public key and of its proof.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// Replace existing files.
    #[arg(long)]
    force: bool,
    /// Print `{"peer_id", "file", "consensus_key", "possession",
    /// "consensus_file", "scheme"}` as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `keys`.
pub fn run(args: KeysArgs) -> Result<()> {
    let (key, consensus, file) = match (args.out, args.show) {
        (Some(out), None) => {
            let consensus_file = identity::consensus_key_beside(&out);
            for path in [&out, &consensus_file] {
                if path.exists() && !args.force {
                    bail!("{} exists (use --force to replace it)", path.display());
                }
            }
            let key = identity::generate();
            identity::save(&key, &out)?;
            let consensus = identity::generate_consensus();
            identity::save_consensus(&consensus, &consensus_file)?;
            (key, consensus, out)
        }
        (None, Some(show)) => {
            let consensus_file = identity::consensus_key_beside(&show);
            let consensus = identity::load_consensus(&consensus_file)
                .with_context(|| format!("reading the consensus key beside {}", show.display()))?;
            (identity::load(&show)?, consensus, show)
        }
        _ => bail!("give --out FILE or --show FILE"),
    };
    let peer_id = identity::peer_id(&key);
    let listing = consensus.listing_for(args.scheme);
    let (public, possession) = (
        hex::encode(&listing.public_key),
        hex::encode(&listing.possession),
    );
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "peer_id": peer_id.to_string(),
                "file": file.display().to_string(),
                "consensus_key": public,
                "possession": possession,
                "consensus_file": identity::consensus_key_beside(&file).display().to_string(),
                "scheme": args.scheme.as_str(),
            })
        );
    } else {
        println!("{peer_id}");
        println!("consensus_key = \"{public}\"");
        println!("possession = \"{possession}\"");
    }
    Ok(())
}
