//! `sbft-beacon verify`: checks a beacon chain with drand's rules — every
//! signature under the chain's public key, every link, the chain hash — and
//! prints the first bad round, if any. The chain comes from files or from a
//! node's or a relay's HTTP API (`--url`, http or https: the client is
//! [`crate::http_client`]'s).

use crate::http_client::{base_url, runtime, ApiClient, TlsArgs};
use anyhow::{bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfoJson};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// How long one HTTP request may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of `verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// A chain in drand's JSON shape: `{"info": {...}, "beacons": [...]}` (what
    /// `sim --chain` writes).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["info", "beacons", "url"])]
    chain: Option<PathBuf>,
    /// A node's or a relay's HTTP API (drand's v1 shape), e.g.
    /// `http://127.0.0.1:8000` or `https://relay.example.org`.
    #[arg(long, conflicts_with_all = ["info", "beacons"])]
    url: Option<String>,
    /// `--cacert FILE`, for an https `--url`.
    #[command(flatten)]
    tls: TlsArgs,
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

/// Fetches `/info` and rounds `from - 1 ..= to` (`to` defaults to the latest).
async fn fetch(
    client: &ApiClient,
    base: &str,
    from: Option<u64>,
    to: Option<u64>,
) -> Result<(serde_json::Value, serde_json::Value)> {
    use futures::StreamExt as _;
    let get = |path: String| {
        let url = format!("{base}{path}");
        async move { client.get_json(&url).await }
    };
    let info = get("/info".into()).await?;
    let to = match to {
        Some(t) => t,
        None => get("/public/latest".into()).await?["round"]
            .as_u64()
            .context("/public/latest has no round")?,
    };
    let first = from.unwrap_or(1).saturating_sub(1).max(1);
    let beacons: Vec<serde_json::Value> = futures::stream::iter(first..=to)
        .map(|r| get(format!("/public/{r}")))
        .buffered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    Ok((info, serde_json::Value::Array(beacons)))
}

/// Runs `verify`; exits with status 1 at the first bad round.
pub fn run(args: VerifyArgs) -> Result<()> {
    if args.tls.cacert.is_some() && args.url.is_none() {
        bail!("--cacert is for an https --url");
    }
    let (info, beacons) = match (&args.chain, &args.url, &args.info, &args.beacons) {
        (Some(chain), _, _, _) => {
            let v = read_json(chain)?;
            (v["info"].clone(), v["beacons"].clone())
        }
        (None, Some(url), _, _) => {
            let base = base_url(url)?;
            let client = ApiClient::new(&args.tls, HTTP_TIMEOUT)?;
            runtime()?.block_on(fetch(&client, &base, args.from, args.to))?
        }
        (None, None, Some(info), Some(beacons)) => (read_json(info)?, read_json(beacons)?),
        _ => bail!("give --chain FILE, --url URL, or --info FILE and --beacons FILE"),
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
