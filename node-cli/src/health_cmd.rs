//! `sbft-beacon health`: the probe the container image's `HEALTHCHECK` runs,
//! `GET /health` on the API of the node a config names (or of a URL, http or
//! https: the client is [`crate::http_client`]'s).

use crate::http_client::{base_url, runtime, ApiClient, TlsArgs};
use anyhow::{bail, Context, Result};
use clap::Args;
use node::config::NodeConfig;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options of `health`.
#[derive(Args)]
pub struct HealthArgs {
    /// The node's config: its `http` address is probed (on loopback where it
    /// listens on every address).
    #[arg(long, value_name = "FILE", default_value = "/node/node.toml")]
    config: PathBuf,
    /// Probe this API instead, e.g. `http://127.0.0.1:8000` or
    /// `https://beacon.example.org`.
    #[arg(long, conflicts_with = "config")]
    url: Option<String>,
    /// `--cacert FILE`, for an https `--url`.
    #[command(flatten)]
    tls: TlsArgs,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3)]
    timeout_s: u64,
}

/// The API base URL of the node configured in `path`.
pub fn api_of(path: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let cfg: NodeConfig = toml::from_str(&text)
        .with_context(|| format!("{} is not a node config", path.display()))?;
    let addr: SocketAddr = cfg
        .node
        .http
        .parse()
        .with_context(|| format!("{}: bad http address {:?}", path.display(), cfg.node.http))?;
    let ip = match addr.ip() {
        IpAddr::V4(a) if a.is_unspecified() => IpAddr::from([127, 0, 0, 1]),
        IpAddr::V6(a) if a.is_unspecified() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    Ok(format!("http://{}", SocketAddr::new(ip, addr.port())))
}

/// Runs `health`: `GET /health`; succeeds on 200 (the node has its key material
/// and is on schedule), fails otherwise, printing what the node said.
pub fn run(args: HealthArgs) -> Result<()> {
    let base = match &args.url {
        Some(u) => base_url(u)?,
        None if args.tls.cacert.is_some() => bail!("--cacert is for an https --url"),
        None => api_of(&args.config)?,
    };
    let url = format!("{base}/health");
    let client = ApiClient::new(&args.tls, Duration::from_secs(args.timeout_s.max(1)))?;
    runtime()?.block_on(async {
        let response = client.get(&url).await?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        println!("{status} {}", body.trim());
        if !status.is_success() {
            bail!("{url}: {status}");
        }
        Ok(())
    })
}
