//! `sbft-beacon reshare --config node.toml --new-members FILE`: the operator of
//! a member proposes a change of members to its own node (through the node's
//! admin API, which answers on the loopback address only). The chain decides
//! the change once `n - f` members' operators proposed the same one; the old
//! members then reshare the beacon key to the new ones (`consensus::epoch`).
//!
//! `FILE` (TOML) lists the new members by peer ID or by `[[peers]]` index, in
//! their new order, with optional `c` and `beacon_threshold`:
//!
//! ```toml
//! members = [0, 1, 2, 3, "12D3KooW...", 5, 6]
//! c = 0                 # default: the smallest valid for the new size
//! beacon_threshold = 0  # default (0): f + 1
//! ```

use anyhow::{bail, Context, Result};
use clap::Args;
use node::config::{NodeConfig, Validated};
use node::http::ReshareRequest;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;

/// Options of `reshare`.
#[derive(Args)]
pub struct ReshareArgs {
    /// The config of the node to propose through (its HTTP address and peers).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The new member list (TOML: `members`, optional `c`, `beacon_threshold`).
    #[arg(long, value_name = "FILE")]
    new_members: PathBuf,
    /// Print the node's answer as JSON.
    #[arg(long)]
    json: bool,
}

/// A member named by peer ID or by `[[peers]]` index.
#[derive(Deserialize)]
#[serde(untagged)]
enum MemberName {
    Index(u32),
    PeerId(String),
}

/// The `--new-members` file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMembersFile {
    members: Vec<MemberName>,
    #[serde(default)]
    c: Option<u32>,
    #[serde(default)]
    beacon_threshold: u32,
}

/// Reads `path` into a request, naming members by peer ID.
fn request(cfg: &Validated, path: &PathBuf) -> Result<ReshareRequest> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: NewMembersFile = toml::from_str(&text)
        .with_context(|| format!("{} is not a member list", path.display()))?;
    if file.members.is_empty() {
        bail!("{}: the member list is empty", path.display());
    }
    let mut members = Vec::with_capacity(file.members.len());
    for m in file.members {
        members.push(match m {
            MemberName::Index(i) => match cfg.peers.get(i as usize) {
                Some(p) => p.id.to_string(),
                None => bail!(
                    "member {i} is not a [[peers]] index of {} (0..{})",
                    "the config",
                    cfg.peers.len()
                ),
            },
            MemberName::PeerId(id) => id,
        });
    }
    Ok(ReshareRequest {
        members,
        c: file.c,
        beacon_threshold: file.beacon_threshold,
    })
}

/// The node's API on this machine (an unspecified listen address is reached
/// on loopback).
fn local_api(http: SocketAddr) -> String {
    let ip = if http.ip().is_unspecified() {
        match http {
            SocketAddr::V4(_) => std::net::IpAddr::from([127, 0, 0, 1]),
            SocketAddr::V6(_) => std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        }
    } else {
        http.ip()
    };
    format!("http://{}", SocketAddr::new(ip, http.port()))
}

/// Runs `reshare`.
pub fn run(args: ReshareArgs) -> Result<()> {
    let cfg = NodeConfig::load(&args.config)?;
    let request = request(&cfg, &args.new_members)?;
    let base = local_api(cfg.http);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let accepted = runtime.block_on(async {
        let client = crate::http_client::local_client(std::time::Duration::from_secs(30))?;
        anyhow::Ok(node::http::post_reshare(&client, &base, &request).await?)
    })?;
    if args.json {
        println!("{}", serde_json::to_string(&accepted)?);
    } else {
        println!(
            "proposed epoch {} with {} members (c = {}), change {}: it is decided once n - f members propose it",
            accepted.epoch,
            accepted.members.len(),
            accepted.c,
            accepted.change
        );
    }
    Ok(())
}
