//! `sbft-beacon keys`: creates a node identity (an ed25519 libp2p key pair in a
//! file only its owner can read) and prints its peer ID, or prints the peer ID of
//! an existing one.

use anyhow::{bail, Result};
use clap::Args;
use node::identity;
use std::path::PathBuf;

/// Options of `keys`.
#[derive(Args)]
pub(crate) struct KeysArgs {
    /// Where to write the new identity.
    #[arg(long, value_name = "FILE", required_unless_present = "show")]
    out: Option<PathBuf>,
    /// Print the peer ID of an existing identity instead.
    #[arg(long, value_name = "FILE", conflicts_with = "out")]
    show: Option<PathBuf>,
    /// Replace an existing file.
    #[arg(long)]
    force: bool,
    /// Print `{"peer_id", "file"}` as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `keys`.
pub(crate) fn run(args: KeysArgs) -> Result<()> {
    let (key, file) = match (args.out, args.show) {
        (Some(out), None) => {
            if out.exists() && !args.force {
                bail!("{} exists (use --force to replace it)", out.display());
            }
            let key = identity::generate();
            identity::save(&key, &out)?;
            (key, out)
        }
        (None, Some(show)) => (identity::load(&show)?, show),
        _ => bail!("give --out FILE or --show FILE"),
    };
    let peer_id = identity::peer_id(&key);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"peer_id": peer_id.to_string(), "file": file.display().to_string()})
        );
    } else {
        println!("{peer_id}");
    }
    Ok(())
}
