//! `sbft-beacon deploy compose`: a whole network written as files, ready for
//! Docker Compose on one machine or for N real hosts, for the image of the slim
//! `sbft-beacon-node` (`scripts/Dockerfile`; its `HEALTHCHECK` runs
//! `sbft-beacon-node health`, `node_cli::health_cmd`).
//!
//! This module owns the deployment layout: which node runs where, its ports and
//! the addresses its peers dial, the `compose.yml` files, and who owns the files
//! (the image's user). Identities and `node.toml` files come from
//! [`crate::localnet::write_configs`] (one way to write a network's configs);
//! this module then rewrites the addresses and the network's name and start.
//!
//! Layout of `--out DIR`:
//! - one machine (`compose`, default): `DIR/compose.yml` (one service per node,
//!   one internal network `beacon`) and `DIR/node-I/` (identity, `node.toml`
//!   with `/dns4/node-J/tcp/P` peers and `0.0.0.0` listeners, `data/`);
//! - `--hosts h1,h2,...`: `DIR/hI/` per host with its own `compose.yml` and the
//!   folders of the nodes it runs (node `i` on host `i mod H`; the `k`-th node of
//!   a host listens on ports `P + k`), peers at `/dns4/hI/tcp/P` (or `/ip4`,
//!   `/ip6` where a host is given by address). An operator copies `DIR/hI` to
//!   host `hI`.
//!
//! In a container the node's folder is mounted read-only at `/node` and its
//! `data/` read-write at `/node/data` (the image's volume); the container runs as
//! the user that owns the folder: the image's user ([`IMAGE_UID`]) where the files
//! were written by root (they are handed to that user), else the user who wrote
//! them (`SBFT_UID` and `SBFT_GID` override both).
//!
//! - `mod.rs`: the arguments of `deploy compose`, and the deployment written
//!   (network name and start, each node's folder and config);
//! - `placement.rs`: where each node runs, its ports and its peers' addresses;
//! - `compose.rs`: the `compose.yml` files;
//! - `tls_proxy.rs`: with `--tls-proxy PORT` (one machine), a TLS-terminating
//!   proxy in front of the nodes' APIs, and its folder `DIR/tls-proxy/`;
//! - `files.rs`: who owns the files written, and the output folder.

mod compose;
mod files;
mod placement;
mod tls_proxy;

use anyhow::{bail, Context, Result};
use beacon::SchemeId;
use clap::{ArgGroup, Args, Subcommand};
use compose::{bracket, compose_yaml, ComposeSpec};
use files::{chown_tree, current_ids, fresh_dir};
use node::config::NodeConfig;
use placement::{check_host, host_folder, place, Placement};
use std::net::IpAddr;
use std::path::PathBuf;

/// The user (and group) ID of the image's non-root user (`scripts/Dockerfile`).
pub(crate) const IMAGE_UID: u32 = 10001;

/// Options of `deploy`.
#[derive(Args)]
pub(crate) struct DeployArgs {
    #[command(subcommand)]
    target: Target,
}

/// The deployment engines.
#[derive(Subcommand)]
enum Target {
    /// Write identities, configs and Docker Compose files for a network: one
    /// Compose project on this machine, or one per host with `--hosts`.
    Compose(ComposeArgs),
}

/// Options of `deploy compose`.
#[derive(Args)]
#[command(group(ArgGroup::new("published").args(["publish_http", "tls_proxy"]).multiple(true)))]
pub(crate) struct ComposeArgs {
    /// Number of nodes.
    #[arg(long)]
    nodes: u32,
    /// Protocol parameters: `--protocol FILE`, `--c`, `--period`, `--beacon-shares`.
    #[command(flatten)]
    protocol: crate::protocol_args::ProtocolArgs,
    /// Output directory (must not exist yet, or be empty).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Real hosts (names or IP addresses) to spread the nodes over: node i runs
    /// on host i mod H. Writes one folder per host.
    #[arg(long, value_delimiter = ',', value_name = "HOST,...")]
    hosts: Vec<String>,
    /// Signature scheme.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// Container image of the nodes.
    #[arg(long, default_value = "sbft-beacon:latest")]
    image: String,
    /// libp2p port (the k-th node of a host uses this + k).
    #[arg(long, default_value_t = 9000)]
    p2p_port: u16,
    /// HTTP API port (the k-th node of a host uses this + k).
    #[arg(long, default_value_t = 8000)]
    http_port: u16,
    /// One machine: publish node 0's HTTP API on this port of the host (on
    /// 127.0.0.1 unless `--publish-address` says otherwise).
    #[arg(long, value_name = "PORT")]
    publish_http: Option<u16>,
    /// Host address that `--publish-http` and `--tls-proxy` bind.
    #[arg(long, default_value = "127.0.0.1", requires = "published")]
    publish_address: IpAddr,
    /// One machine: put a TLS-terminating proxy (Debian's nginx, image
    /// `--tls-image`) in front of the nodes' HTTP APIs, serving https on this
    /// port of the host (on 127.0.0.1 unless `--publish-address` says
    /// otherwise); reads only. Needs `--tls-cert` and `--tls-key`.
    #[arg(long, value_name = "PORT", requires_all = ["tls_cert", "tls_key"])]
    tls_proxy: Option<u16>,
    /// The proxy's certificate (PEM, with its chain after it).
    #[arg(long, value_name = "FILE", requires = "tls_proxy")]
    tls_cert: Option<PathBuf>,
    /// The proxy's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_proxy")]
    tls_key: Option<PathBuf>,
    /// Container image of the TLS proxy (`scripts/Dockerfile.tls-proxy`).
    #[arg(long, default_value = "sbft-beacon-tls-proxy:latest")]
    tls_image: String,
    /// Paced chains (`--period` > 0): seconds from now to the first round. Nodes
    /// started later catch up with the schedule.
    #[arg(long, default_value_t = 60)]
    genesis_delay: u32,
}

/// Seconds since the Unix epoch.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// A short random name for the network (it also separates DKG sessions).
fn network_id(n: u32) -> String {
    use rand::RngCore as _;
    let mut tag = [0u8; 4];
    rand::rngs::OsRng.fill_bytes(&mut tag);
    format!("deploy-{n}-{}", hex::encode(tag))
}

/// What `deploy compose` wrote: the node folders and compose files.
#[derive(Debug)]
pub(crate) struct Written {
    /// Every `compose.yml`, with the host it is for (`None`: this machine).
    pub compose_files: Vec<(Option<String>, PathBuf)>,
    /// Every node's `node.toml`, by index.
    pub configs: Vec<PathBuf>,
}

/// Writes the deployment of `args`.
fn write(args: &ComposeArgs) -> Result<Written> {
    if args.nodes < 1 {
        bail!("--nodes must be at least 1");
    }
    let protocol = args.protocol.params(args.nodes)?;
    let period = protocol.period_s()?;
    for h in &args.hosts {
        check_host(h)?;
    }
    let mut seen = std::collections::BTreeSet::new();
    for h in &args.hosts {
        if !seen.insert(h.to_ascii_lowercase()) {
            bail!("--hosts lists {h} twice");
        }
    }
    if args.hosts.len() > args.nodes as usize {
        bail!(
            "--hosts names {} hosts for {} nodes: every host runs at least one node",
            args.hosts.len(),
            args.nodes
        );
    }
    if !args.hosts.is_empty() && args.publish_http.is_some() {
        bail!("--publish-http is for one machine; with --hosts every node's API is published on its host");
    }
    if !args.hosts.is_empty() && args.tls_proxy.is_some() {
        bail!("--tls-proxy is for one machine; with --hosts put a TLS proxy in front of each host's published APIs");
    }
    let tls_proxy = match (args.tls_proxy, &args.tls_cert, &args.tls_key) {
        (Some(port), Some(cert), Some(key)) => Some(tls_proxy::TlsProxy::load(port, cert, key)?),
        (Some(_), _, _) => bail!("--tls-proxy needs --tls-cert FILE and --tls-key FILE"),
        (None, None, None) => None,
        (None, _, _) => bail!("--tls-cert and --tls-key go with --tls-proxy PORT"),
    };
    let places = place(args.nodes, &args.hosts, args.p2p_port, args.http_port)?;
    fresh_dir(&args.out)?;
    // Identities and configs as localnet writes them, in a staging folder.
    let staging = tempfile::Builder::new()
        .prefix(".staging")
        .tempdir_in(&args.out)
        .context("creating a staging folder")?;
    crate::localnet::write_configs(
        staging.path(),
        args.nodes,
        args.nodes,
        args.scheme,
        &protocol,
        1,
    )?;
    let id = network_id(args.nodes);
    let genesis_time = unix_now()
        + if period > 0 {
            i64::from(args.genesis_delay)
        } else {
            0
        };
    let (euid, egid) = current_ids();
    let (uid, gid) = if euid == 0 {
        (IMAGE_UID, IMAGE_UID)
    } else {
        (euid, egid)
    };
    let folder_of = |p: &Placement| -> PathBuf {
        match &p.host {
            None => args.out.clone(),
            Some(h) => args.out.join(host_folder(h)),
        }
    };
    let mut configs = Vec::new();
    for p in &places {
        let staged = staging.path().join(&p.name);
        let text = std::fs::read_to_string(staged.join("node.toml"))
            .with_context(|| format!("reading the staged config of {}", p.name))?;
        let mut cfg: NodeConfig = toml::from_str(&text).context("parsing a staged config")?;
        cfg.node.listen = format!("/ip4/0.0.0.0/tcp/{}", p.p2p);
        cfg.node.http = format!("0.0.0.0:{}", p.http);
        cfg.network.id = id.clone();
        cfg.network.genesis_time = genesis_time;
        for peer in cfg.peers.iter_mut() {
            let at = places
                .get(peer.index as usize)
                .with_context(|| format!("peer {} is not placed", peer.index))?;
            peer.address = at.address();
        }
        let dir = folder_of(p).join(&p.name);
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("creating {}", dir.display()))?;
        for key in ["identity.key", "consensus.key"] {
            std::fs::rename(staged.join(key), dir.join(key))
                .with_context(|| format!("moving {key} of {}", p.name))?;
        }
        let path = dir.join("node.toml");
        let text = toml::to_string(&cfg).context("writing a config")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        NodeConfig::load(&path)?;
        if euid == 0 {
            chown_tree(&dir, uid, gid)?;
        }
        configs.push(path);
    }
    drop(staging);
    if let Some(proxy) = &tls_proxy {
        let dir = tls_proxy::write_folder(&args.out, proxy, &places)?;
        if euid == 0 {
            chown_tree(&dir, uid, gid)?;
        }
    }
    let mut compose_files = Vec::new();
    let how_to = |where_: &str| {
        vec![
            format!("Generated by `sbft-beacon deploy compose`: network {id}, {} nodes{where_}.", args.nodes),
            "Start: docker compose up -d (or docker-compose up -d); stop: docker compose down.".into(),
            format!(
                "The containers run as {uid}:{gid}, the owner of the node folders; SBFT_UID and SBFT_GID override it."
            ),
        ]
    };
    if args.hosts.is_empty() {
        let mut header = how_to(" on one Docker network");
        if let Some(port) = args.publish_http {
            header.push(format!(
                "Node 0's API: http://{}:{port}/public/latest",
                bracket(args.publish_address)
            ));
        }
        if let Some(proxy) = &tls_proxy {
            header.push(format!(
                "The nodes' APIs over https (reads only): https://{}:{}/public/latest",
                bracket(args.publish_address),
                proxy.port
            ));
        }
        let spec = ComposeSpec {
            image: &args.image,
            nodes: places.iter().collect(),
            network: true,
            publish: args.publish_http.map(|p| (args.publish_address, p)),
            tls_proxy: tls_proxy
                .as_ref()
                .map(|p| (args.tls_image.as_str(), (args.publish_address, p.port))),
            uid,
            gid,
            header,
        };
        let path = args.out.join("compose.yml");
        std::fs::write(&path, compose_yaml(&spec))
            .with_context(|| format!("writing {}", path.display()))?;
        compose_files.push((None, path));
    } else {
        for h in &args.hosts {
            let mine: Vec<&Placement> = places
                .iter()
                .filter(|p| p.host.as_deref() == Some(h.as_str()))
                .collect();
            let names: Vec<&str> = mine.iter().map(|p| p.name.as_str()).collect();
            let mut header = how_to(&format!(
                "; this file runs {} on host {h}",
                names.join(", ")
            ));
            header.push(
                "Copy this folder to that host; its ports below must be reachable from the other hosts."
                    .into(),
            );
            let spec = ComposeSpec {
                image: &args.image,
                nodes: mine,
                network: false,
                publish: None,
                tls_proxy: None,
                uid,
                gid,
                header,
            };
            let dir = args.out.join(host_folder(h));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            let path = dir.join("compose.yml");
            std::fs::write(&path, compose_yaml(&spec))
                .with_context(|| format!("writing {}", path.display()))?;
            compose_files.push((Some(h.clone()), path));
        }
    }
    Ok(Written {
        compose_files,
        configs,
    })
}

/// Runs `deploy`.
pub(crate) fn run(args: DeployArgs) -> Result<()> {
    match args.target {
        Target::Compose(args) => {
            let written = write(&args)?;
            let n = written.configs.len();
            for (host, path) in &written.compose_files {
                match host {
                    None => println!("{}  ({n} nodes)", path.display()),
                    Some(h) => println!("{}  (host {h})", path.display()),
                }
            }
            if args.hosts.is_empty() {
                eprintln!(
                    "start: cd {} && docker compose up -d   (image {}; see docs/operating.md, \"Across hosts\")",
                    args.out.display(),
                    args.image
                );
                if let Some(port) = args.tls_proxy {
                    eprintln!(
                        "https: https://{}:{port} through the TLS proxy (image {}, built with scripts/Dockerfile.tls-proxy)",
                        compose::bracket(args.publish_address),
                        args.tls_image
                    );
                }
            } else {
                eprintln!(
                    "copy each {}/HOST folder to its host, then there: docker compose up -d",
                    args.out.display()
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
