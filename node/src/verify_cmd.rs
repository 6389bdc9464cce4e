//! `sbft-beacon verify`: checks a beacon chain with drand's rules — every
//! signature under the chain's public key, every link, the chain hash — and
//! prints the first bad round, if any.

use anyhow::{bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfoJson};
use clap::Args;
use std::path::PathBuf;

/// Options of `verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// A chain in drand's JSON shape: `{"info": {...}, "beacons": [...]}` (what
    /// `sim --chain` writes).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["info", "beacons"])]
    chain: Option<PathBuf>,
    /// drand chain info JSON (`/info`).
    #[arg(long, value_name = "FILE", requires = "beacons")]
    info: Option<PathBuf>,
    /// A JSON array of beacons (`/public/{round}` objects).
    #[arg(long, value_name = "FILE", requires = "info")]
    beacons: Option<PathBuf>,
    /// First round to check (default: the first given).
    #[arg(long)]
    from: Option<u64>,
    /// Last round to check (default: the last given).
    #[arg(long)]
    to: Option<u64>,
}

fn read_json(path: &PathBuf) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))
}

/// Runs `verify`; exits with status 1 at the first bad round.
pub fn run(args: VerifyArgs) -> Result<()> {
    let (info, beacons) = match (&args.chain, &args.info, &args.beacons) {
        (Some(chain), _, _) => {
            let v = read_json(chain)?;
            (v["info"].clone(), v["beacons"].clone())
        }
        (None, Some(info), Some(beacons)) => (read_json(info)?, read_json(beacons)?),
        _ => bail!("give --chain FILE, or --info FILE and --beacons FILE"),
    };
    let info: ChainInfoJson =
        serde_json::from_value(info).context("chain info is not drand's /info shape")?;
    let info = info.to_info().context("chain info")?;
    let beacons: Vec<BeaconJson> =
        serde_json::from_value(beacons).context("beacons are not drand's shape")?;
    let mut parsed: Vec<Beacon> = Vec::with_capacity(beacons.len());
    for b in &beacons {
        match b.to_beacon() {
            Ok(beacon) => parsed.push(beacon),
            Err(e) => {
                println!("first bad round: {} ({e})", b.round);
                std::process::exit(1);
            }
        }
    }
    parsed.sort_by_key(|b| b.round);
    let from = args
        .from
        .unwrap_or_else(|| parsed.first().map_or(1, |b| b.round));
    let to = args
        .to
        .unwrap_or_else(|| parsed.last().map_or(0, |b| b.round));
    let start = parsed.iter().position(|b| b.round == from);
    let Some(start) = start else {
        bail!("round {from} is not among the beacons given")
    };
    let Some(end) = parsed.iter().position(|b| b.round == to) else {
        bail!("round {to} is not among the beacons given")
    };
    if end < start {
        bail!("--to {to} is before --from {from}");
    }
    let previous = start
        .checked_sub(1)
        .map(|i| &parsed[i])
        .filter(|p| p.round + 1 == from);
    match info.verify_chain(previous, &parsed[start..=end]) {
        Ok(()) => {
            println!(
                "ok: rounds {from}..={to} ({} beacons) of chain {} ({}) verify",
                end - start + 1,
                hex::encode(info.hash()),
                info.scheme
            );
            Ok(())
        }
        Err(beacon::Error::BrokenChain { round, reason }) => {
            println!("first bad round: {round} ({reason})");
            std::process::exit(1);
        }
        Err(e) => Err(e.into()),
    }
}
