//! `sbft-beacon deploy compose`: a whole network written as files, ready for
//! Docker Compose on one machine or for N real hosts; and `sbft-beacon health`,
//! the probe the container image's `HEALTHCHECK` runs.
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

use anyhow::{bail, Context, Result};
use beacon::SchemeId;
use clap::{Args, Subcommand};
use node::config::NodeConfig;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The user (and group) ID of the image's non-root user (`scripts/Dockerfile`).
pub const IMAGE_UID: u32 = 10001;

/// Where the image expects a node's folder (config and identity).
const NODE_MOUNT: &str = "/node";

/// Options of `deploy`.
#[derive(Args)]
pub struct DeployArgs {
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
pub struct ComposeArgs {
    /// Number of nodes.
    #[arg(long)]
    nodes: u32,
    /// Protocol parameters: `--protocol FILE`, `--c`, `--period`.
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
    /// Host address that `--publish-http` binds.
    #[arg(long, default_value = "127.0.0.1", requires = "publish_http")]
    publish_address: IpAddr,
    /// Paced chains (`--period` > 0): seconds from now to the first round. Nodes
    /// started later catch up with the schedule.
    #[arg(long, default_value_t = 60)]
    genesis_delay: u32,
}

/// Where one node runs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Placement {
    /// Compose service name and folder name: `node-I`.
    name: String,
    /// The host (with `--hosts`), or `None` on the Compose network.
    host: Option<String>,
    /// libp2p port, inside the container and (with `--hosts`) on the host.
    p2p: u16,
    /// HTTP port, the same way.
    http: u16,
}

impl Placement {
    /// The address its peers dial.
    fn address(&self) -> String {
        match &self.host {
            None => format!("/dns4/{}/tcp/{}", self.name, self.p2p),
            Some(h) => match h.parse::<IpAddr>() {
                Ok(IpAddr::V4(ip)) => format!("/ip4/{ip}/tcp/{}", self.p2p),
                Ok(IpAddr::V6(ip)) => format!("/ip6/{ip}/tcp/{}", self.p2p),
                Err(_) => format!("/dns4/{h}/tcp/{}", self.p2p),
            },
        }
    }
}

/// Checks a `--hosts` entry: an IP address or a DNS name.
fn check_host(h: &str) -> Result<()> {
    if h.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if h.is_empty() || h.len() > 253 || !h.split('.').all(label_ok) {
        bail!("--hosts: {h:?} is neither an IP address nor a host name");
    }
    Ok(())
}

/// The folder of a host's files (IPv6 colons become underscores).
fn host_folder(h: &str) -> String {
    h.replace(':', "_")
}

/// Places `n` nodes: all on the Compose network, or round-robin over `hosts`.
fn place(n: u32, hosts: &[String], p2p_port: u16, http_port: u16) -> Result<Vec<Placement>> {
    let mut out = Vec::new();
    for i in 0..n {
        let (host, slot) = if hosts.is_empty() {
            (None, 0)
        } else {
            let h = hosts.len() as u32;
            (Some(hosts[(i % h) as usize].clone()), i / h)
        };
        let port = |base: u16, what: &str| {
            u16::try_from(slot)
                .ok()
                .and_then(|s| base.checked_add(s))
                .with_context(|| format!("--{what} {base} leaves no room for {n} nodes"))
        };
        out.push(Placement {
            name: format!("node-{i}"),
            host,
            p2p: port(p2p_port, "p2p-port")?,
            http: port(http_port, "http-port")?,
        });
    }
    Ok(out)
}

/// Quotes `s` for YAML (a JSON string is a YAML double-quoted scalar).
fn q(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// What a `compose.yml` holds.
struct ComposeSpec<'a> {
    image: &'a str,
    /// The nodes of this file.
    nodes: Vec<&'a Placement>,
    /// One machine: the internal network (and node 0's published API, if any).
    network: bool,
    publish: Option<(IpAddr, u16)>,
    /// Default `user:` (overridable with `SBFT_UID` / `SBFT_GID`).
    uid: u32,
    gid: u32,
    /// Comment lines at the top.
    header: Vec<String>,
}

/// Writes a `compose.yml` (compose-spec, no `version:`; Compose v1.29 and v2
/// read it).
fn compose_yaml(spec: &ComposeSpec) -> String {
    let mut y = String::new();
    for line in &spec.header {
        y += &format!("# {line}\n");
    }
    y += "services:\n";
    for p in &spec.nodes {
        let name = &p.name;
        y += &format!("  {name}:\n");
        y += &format!("    image: {}\n", q(spec.image));
        y += "    init: true\n";
        y += &format!(
            "    user: {}\n",
            q(&format!(
                "${{SBFT_UID:-{}}}:${{SBFT_GID:-{}}}",
                spec.uid, spec.gid
            ))
        );
        y += &format!(
            "    command: [\"run\", \"--config\", {}]\n",
            q(&format!("{NODE_MOUNT}/node.toml"))
        );
        y += "    volumes:\n";
        y += &format!("      - {}\n", q(&format!("./{name}:{NODE_MOUNT}:ro")));
        y += &format!(
            "      - {}\n",
            q(&format!("./{name}/data:{NODE_MOUNT}/data"))
        );
        y += "    stop_grace_period: 5s\n";
        y += "    restart: unless-stopped\n";
        let mut ports = Vec::new();
        let mut networks = Vec::new();
        if spec.network {
            networks.push("beacon");
            if let (Some((addr, port)), "node-0") = (spec.publish, name.as_str()) {
                networks.push("api");
                ports.push(format!("{}:{port}:{}", bracket(addr), p.http));
            }
        } else {
            ports.push(format!("{}:{}", p.p2p, p.p2p));
            ports.push(format!("{}:{}", p.http, p.http));
        }
        if !networks.is_empty() {
            let list: Vec<String> = networks.iter().map(|n| q(n)).collect();
            y += &format!("    networks: [{}]\n", list.join(", "));
        }
        if !ports.is_empty() {
            let list: Vec<String> = ports.iter().map(|p| q(p)).collect();
            y += &format!("    ports: [{}]\n", list.join(", "));
        }
    }
    if spec.network {
        y += "networks:\n";
        y += "  beacon:\n";
        y += "    internal: true\n";
        if spec.publish.is_some() {
            y += "  api: {}\n";
        }
    }
    y
}

/// An address as it appears before a port (`[::1]` for IPv6).
fn bracket(addr: IpAddr) -> String {
    match addr {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
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

/// The effective user and group of this process.
#[cfg(unix)]
fn current_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Elsewhere: the image's user (files are not handed over).
#[cfg(not(unix))]
fn current_ids() -> (u32, u32) {
    (IMAGE_UID, IMAGE_UID)
}

/// Gives `path` and everything under it to `uid:gid`.
fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<()> {
    #[cfg(unix)]
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .with_context(|| format!("handing {} to {uid}:{gid}", path.display()))?;
    if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Checks that `out` is absent or an empty directory, and creates it.
fn fresh_dir(out: &Path) -> Result<()> {
    if out.exists() {
        let mut entries = std::fs::read_dir(out)
            .with_context(|| format!("--out {} is not a directory", out.display()))?;
        if entries.next().is_some() {
            bail!(
                "--out {} is not empty: a deployment holds identities and chains; choose a new directory",
                out.display()
            );
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}

/// What `deploy compose` wrote: the node folders and compose files.
#[derive(Debug)]
pub struct Written {
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
        std::fs::rename(staged.join("identity.key"), dir.join("identity.key"))
            .with_context(|| format!("moving the identity of {}", p.name))?;
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
        let spec = ComposeSpec {
            image: &args.image,
            nodes: places.iter().collect(),
            network: true,
            publish: args.publish_http.map(|p| (args.publish_address, p)),
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
pub fn run(args: DeployArgs) -> Result<()> {
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

/// Options of `health`.
#[derive(Args)]
pub struct HealthArgs {
    /// The node's config: its `http` address is probed (on loopback where it
    /// listens on every address).
    #[arg(long, value_name = "FILE", default_value = "/node/node.toml")]
    config: PathBuf,
    /// Probe this API instead, e.g. `http://127.0.0.1:8000`.
    #[arg(long, conflicts_with = "config")]
    url: Option<String>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 3)]
    timeout_s: u64,
}

/// The API base URL of the node configured in `path`.
fn api_of(path: &Path) -> Result<String> {
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
pub fn health(args: HealthArgs) -> Result<()> {
    let base = match &args.url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => api_of(&args.config)?,
    };
    let url = format!("{base}/health");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(args.timeout_s.max(1)))
            .build()?;
        let response = client
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        println!("{status} {}", body.trim());
        if !status.is_success() {
            bail!("{url}: {status}");
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_norway::Value;

    fn args(out: &Path, nodes: u32, hosts: &[&str]) -> ComposeArgs {
        ComposeArgs {
            nodes,
            protocol: Default::default(),
            out: out.to_path_buf(),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            scheme: SchemeId::PedersenBlsChained,
            image: "sbft-beacon:test".into(),
            p2p_port: 9000,
            http_port: 8000,
            publish_http: None,
            publish_address: IpAddr::from([127, 0, 0, 1]),
            genesis_delay: 60,
        }
    }

    fn yaml(path: &Path) -> Value {
        let text = std::fs::read_to_string(path).unwrap();
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}\n{text}", path.display()))
    }

    fn strings(v: &Value) -> Vec<String> {
        v.as_sequence()
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn one_machine_compose_file_and_configs_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("net");
        let mut a = args(&out, 4, &[]);
        a.publish_http = Some(18000);
        a.protocol.period = Some(3);
        let written = write(&a).unwrap();
        assert_eq!(written.compose_files.len(), 1);
        let compose = yaml(&out.join("compose.yml"));
        let services = compose["services"].as_mapping().unwrap();
        assert_eq!(services.len(), 4);
        assert_eq!(compose["networks"]["beacon"]["internal"], Value::Bool(true));
        let mut ids = Vec::new();
        for i in 0..4 {
            let s = &compose["services"][format!("node-{i}").as_str()];
            assert_eq!(s["image"].as_str(), Some("sbft-beacon:test"));
            assert_eq!(s["init"], Value::Bool(true));
            assert_eq!(
                strings(&s["command"]),
                ["run", "--config", "/node/node.toml"]
            );
            let volumes = strings(&s["volumes"]);
            assert!(
                volumes.contains(&format!("./node-{i}:/node:ro")),
                "{volumes:?}"
            );
            assert!(
                volumes.contains(&format!("./node-{i}/data:/node/data")),
                "{volumes:?}"
            );
            assert!(strings(&s["networks"]).contains(&"beacon".to_string()));
            let ports = strings(&s["ports"]);
            if i == 0 {
                assert_eq!(ports, ["127.0.0.1:18000:8000"]);
            } else {
                assert!(ports.is_empty(), "only node 0 is published: {ports:?}");
            }
            assert!(s["user"].as_str().unwrap().starts_with("${SBFT_UID:-"));
            // The node's folder: identity and config, parsed back as `run` does.
            let cfg = NodeConfig::load(&out.join(format!("node-{i}/node.toml"))).unwrap();
            assert_eq!(cfg.listen.to_string(), "/ip4/0.0.0.0/tcp/9000");
            assert_eq!(cfg.http.to_string(), "0.0.0.0:8000");
            assert_eq!(cfg.raw.node.data_dir, PathBuf::from("data"));
            assert!(out.join(format!("node-{i}/data")).is_dir());
            for (j, p) in cfg.peers.iter().enumerate() {
                assert_eq!(p.address.to_string(), format!("/dns4/node-{j}/tcp/9000"));
            }
            let key = node::identity::load(&cfg.identity).unwrap();
            assert_eq!(node::identity::peer_id(&key), cfg.me().id);
            assert!(cfg.raw.network.id.starts_with("deploy-4-"));
            assert!(cfg.raw.network.genesis_time > unix_now() + 30);
            assert_eq!(cfg.replica.period_us, 3_000_000);
            // The protocol parameters in their own table, none left in [network].
            let protocol = cfg.raw.protocol.clone().expect("a [protocol] table");
            assert_eq!(protocol.period_ms, 3_000);
            assert_eq!(protocol.c, Some(0));
            assert!(cfg.raw.network.period.is_none() && cfg.raw.network.c.is_none());
            ids.push((cfg.raw.network.id.clone(), cfg.dkg_session()));
        }
        assert!(ids.iter().all(|x| *x == ids[0]), "one network: {ids:?}");
        // Nothing else is left in the folder (no staging).
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["compose.yml", "node-0", "node-1", "node-2", "node-3"]
        );
        // A second deployment into the same folder is refused.
        let e = write(&a).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
    }

    #[test]
    fn hosts_mode_writes_one_folder_per_host_with_its_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("hosts");
        let hosts = ["alpha.example.org", "10.0.0.2", "fd00::3"];
        let written = write(&args(&out, 7, &hosts)).unwrap();
        assert_eq!(written.compose_files.len(), 3);
        let expect_addr = |i: usize| {
            let port = 9000 + i / 3;
            match i % 3 {
                0 => format!("/dns4/alpha.example.org/tcp/{port}"),
                1 => format!("/ip4/10.0.0.2/tcp/{port}"),
                _ => format!("/ip6/fd00::3/tcp/{port}"),
            }
        };
        for (h, host) in hosts.iter().enumerate() {
            let folder = out.join(host_folder(host));
            let compose = yaml(&folder.join("compose.yml"));
            let services = compose["services"].as_mapping().unwrap();
            let mine: Vec<usize> = (0..7).filter(|i| i % 3 == h).collect();
            assert_eq!(services.len(), mine.len(), "{host}");
            assert!(compose.get("networks").is_none());
            for (k, &i) in mine.iter().enumerate() {
                let s = &compose["services"][format!("node-{i}").as_str()];
                let ports = strings(&s["ports"]);
                assert_eq!(
                    ports,
                    [format!("{0}:{0}", 9000 + k), format!("{0}:{0}", 8000 + k)]
                );
                let cfg = NodeConfig::load(&folder.join(format!("node-{i}/node.toml"))).unwrap();
                assert_eq!(cfg.me.0 as usize, i);
                assert_eq!(
                    cfg.listen.to_string(),
                    format!("/ip4/0.0.0.0/tcp/{}", 9000 + k)
                );
                assert_eq!(cfg.http.to_string(), format!("0.0.0.0:{}", 8000 + k));
                assert_eq!(cfg.me().address.to_string(), expect_addr(i));
                for (j, p) in cfg.peers.iter().enumerate() {
                    assert_eq!(p.address.to_string(), expect_addr(j));
                }
            }
            // Only this host's nodes are in its folder.
            let mut names: Vec<String> = std::fs::read_dir(&folder)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            let mut expected: Vec<String> = mine.iter().map(|i| format!("node-{i}")).collect();
            expected.push("compose.yml".into());
            expected.sort();
            assert_eq!(names, expected);
        }
    }

    #[test]
    fn bad_deployments_are_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let err = |a: ComposeArgs| write(&a).unwrap_err().to_string();
        let mut a = args(&dir.path().join("a"), 5, &[]);
        a.protocol.c = Some(0);
        let e = err(a);
        assert!(e.contains("3f + 2c + 1"), "{e}");
        let e = err(args(
            &dir.path().join("a2"),
            4,
            &["h1", "h2", "h3", "h4", "h5"],
        ));
        assert!(e.contains("every host runs at least one node"), "{e}");
        let e = err(args(&dir.path().join("b"), 4, &["good", "bad_host!"]));
        assert!(e.contains("neither an IP address nor a host name"), "{e}");
        let e = err(args(&dir.path().join("c"), 4, &["h1", "H1"]));
        assert!(e.contains("twice"), "{e}");
        let mut a = args(&dir.path().join("d"), 4, &["h1"]);
        a.publish_http = Some(8000);
        assert!(err(a).contains("--publish-http"));
        let mut a = args(&dir.path().join("e"), 4, &["h1"]);
        a.p2p_port = 65535;
        assert!(err(a).contains("no room"));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(err(args(&file, 4, &[])).contains("not a directory"));
    }

    #[test]
    fn health_probes_the_configured_api_on_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("net");
        write(&args(&out, 4, &[])).unwrap();
        let api = api_of(&out.join("node-2/node.toml")).unwrap();
        assert_eq!(api, "http://127.0.0.1:8000");
        assert!(api_of(&dir.path().join("missing.toml")).is_err());
    }
}
