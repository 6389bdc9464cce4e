//! `sbft-beacon localnet`: a whole network of node processes on 127.0.0.1. It
//! creates identities and configs (in `--dir` or a temporary directory), starts
//! one `sbft-beacon run` per node, waits for `--rounds` beacons, checks that every
//! node serves the same chain (and that it verifies), reports round latency and
//! CPU per round from the nodes' `/stats/rounds`, and stops the nodes cleanly.

use anyhow::{bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfoJson, SchemeId};
use clap::Args;
use consensus::ProtocolParams;
use node::config::{NetworkSection, NodeConfig, NodeSection, PeerEntry};
use node::identity;
use serde_json::json;
use sim::report::{percentiles, Percentiles};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Options of `localnet`.
#[derive(Args)]
pub struct LocalnetArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 4)]
    nodes: u32,
    /// Beacons to wait for.
    #[arg(long, default_value_t = 10)]
    rounds: u64,
    /// Directory for identities, configs, data and logs (default: a temporary
    /// directory, removed afterwards).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Leave the network up (after reporting) until interrupted.
    #[arg(long)]
    keep_running: bool,
    /// Only write identities and configs into `--dir`, start nothing.
    #[arg(long, requires = "dir")]
    configs_only: bool,
    /// Signature scheme.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// Protocol parameters: `--protocol FILE`, `--c`, `--period`.
    #[command(flatten)]
    protocol: crate::protocol_args::ProtocolArgs,
    /// First TCP port (libp2p on P + i, HTTP on P + 1000 + i); 0 picks free ports.
    #[arg(long, default_value_t = 0)]
    base_port: u16,
    /// Give up after this many seconds without reaching `--rounds`.
    #[arg(long, default_value_t = 300)]
    timeout_s: u64,
    /// Post this many transactions of the largest size (64 KiB) to every node
    /// while the rounds run, and report `p99_under_flood_ms`.
    #[arg(long, default_value_t = 0)]
    flood: u32,
    /// Emulated WAN between the nodes (userspace relays per directed link).
    #[command(flatten)]
    wan: node::wan::WanArgs,
    /// Change the member set once round `--reshare-at` is out: to M members,
    /// nodes 0..M (nodes after `--nodes` join with `run`, nodes after M
    /// leave). Every genesis member proposes the change; the beacon key is
    /// reshared and the group key, and so the chain, stays the same.
    #[arg(long, value_name = "M")]
    reshare_to: Option<u32>,
    /// The round after which the members propose the change (`--reshare-to`).
    #[arg(long, default_value_t = 3, requires = "reshare_to")]
    reshare_at: u64,
}

/// A node process of the local network.
struct Proc {
    child: Child,
    http: String,
    log: PathBuf,
}

/// Ports that were free a moment ago (bound to port 0, then released).
fn free_ports(count: usize) -> Result<Vec<u16>> {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<_>>()
        .context("finding free ports")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// The base view-change timeout of a local network of `n` nodes: the default
/// (1 s), or n^2 / 2 ms where that is longer. All the processes share this
/// machine's cores, so the CPU of one round grows like n^2 here (at 128 nodes on
/// two cores a round takes seconds, and a 1 s timeout turned every height into
/// a run of view changes, each costing more CPU than the round). A `--protocol`
/// file's value is kept as it is.
pub fn view_change_timeout_ms(n: u32) -> u64 {
    (u64::from(n).pow(2) / 2).max(ProtocolParams::default().view_change_timeout_ms)
}

/// The fast-path timeout of a local network of `n` nodes: the default (50 ms),
/// or 4n ms where that is longer. The processes share this machine's cores, so
/// the `3f + c + 1` sigma shares a collector waits for trickle in over a time
/// that grows with n; with 50 ms at 32 nodes on two cores every round also ran
/// the slow path (a PREPARE every node verifies, then COMMIT shares), doubling
/// each node's CPU per round (8.1 ms against 4.3) and the round latency (p50
/// 187 ms against 101). A `--protocol` file's value is kept as it is.
pub fn fast_path_timeout_ms(n: u32) -> u64 {
    (4 * u64::from(n)).max(ProtocolParams::default().fast_path_timeout_ms)
}

/// Writes identities and `node-i/node.toml` for `n` nodes into `dir`, each with
/// the `[protocol]` table `protocol` (checked for the genesis members, see
/// [`crate::protocol_args::ProtocolArgs::params`]); the first `members` nodes
/// are the genesis members (`[network] members`; the others join later).
/// Returns the config paths and HTTP base URLs.
pub fn write_configs(
    dir: &Path,
    n: u32,
    members: u32,
    scheme: SchemeId,
    protocol: &ProtocolParams,
    base_port: u16,
) -> Result<Vec<(PathBuf, String)>> {
    let period = protocol.period_s()?;
    let ports: Vec<(u16, u16)> = if base_port == 0 {
        let p = free_ports(2 * n as usize)?;
        (0..n as usize).map(|i| (p[2 * i], p[2 * i + 1])).collect()
    } else {
        (0..n)
            .map(|i| -> Result<(u16, u16)> {
                let p2p = base_port.checked_add(i as u16);
                let http = base_port.checked_add(1000 + i as u16);
                match (p2p, http) {
                    (Some(a), Some(b)) => Ok((a, b)),
                    _ => bail!("--base-port {base_port} leaves no room for {n} nodes"),
                }
            })
            .collect::<Result<_>>()?
    };
    let mut peers = Vec::new();
    for i in 0..n {
        let node_dir = dir.join(format!("node-{i}"));
        std::fs::create_dir_all(&node_dir)
            .with_context(|| format!("creating {}", node_dir.display()))?;
        let key = identity::generate();
        identity::save(&key, &node_dir.join("identity.key"))?;
        peers.push(PeerEntry {
            index: i,
            peer_id: identity::peer_id(&key).to_string(),
            address: format!("/ip4/127.0.0.1/tcp/{}", ports[i as usize].0),
        });
    }
    let network = NetworkSection {
        id: format!("localnet-{n}-{}", std::process::id()),
        scheme: scheme.as_str().to_string(),
        // Paced chains start after the DKG (three phases) had time to finish.
        genesis_time: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64)
            + if period > 0 {
                5 + 3 * (1 + i64::from(n).pow(3) / 16_000)
            } else {
                0
            },
        genesis_seed: None,
        // Phases end as soon as everything they wait for is in; this is only
        // the bound on waiting for a silent member. It must outlast the slowest
        // honest member's work, though: all processes share this machine's
        // cores and decoding the deals' points costs each member ~n^2 work, so a
        // phase may take ~n^3 of wall time here. Generous, since an honest run
        // never waits for it (n = 4: 5 s, 16: 5.5 s, 32: 9 s, 64: 38 s).
        dkg_phase_ms: 5_000 + u64::from(n).pow(3) / 8,
        peer_wait_ms: 60_000,
        members: (members != n).then_some(members),
        dkg_dealers: 0,
        dkg_attempts: 3,
        c: None,
        period: None,
        fast_path_timeout_ms: None,
        view_change_timeout_ms: None,
    };
    let mut out = Vec::new();
    for i in 0..n {
        let cfg = NodeConfig {
            node: NodeSection {
                index: i,
                identity: PathBuf::from("identity.key"),
                listen: format!("/ip4/127.0.0.1/tcp/{}", ports[i as usize].0),
                http: format!("127.0.0.1:{}", ports[i as usize].1),
                data_dir: PathBuf::from("data"),
            },
            network: network.clone(),
            protocol: Some(protocol.clone()),
            peers: peers.clone(),
            limits: Default::default(),
            base_dir: PathBuf::new(),
        };
        let path = dir.join(format!("node-{i}")).join("node.toml");
        let text = toml::to_string(&cfg).context("writing the config")?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        // Validate what we wrote exactly as `run` will.
        NodeConfig::load(&path)?;
        out.push((path, format!("http://127.0.0.1:{}", ports[i as usize].1)));
    }
    Ok(out)
}

fn spawn(config: &Path) -> Result<(Child, PathBuf)> {
    let exe = std::env::current_exe().context("locating sbft-beacon")?;
    let log = config.with_file_name("node.log");
    let file =
        std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                // The node stops (SIGTERM) if localnet dies without stopping it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
    }
    let child = command.spawn().context("starting a node")?;
    Ok((child, log))
}

/// Starts a node for each config; on a failure, stops those started.
fn spawn_all(configs: &[(PathBuf, String)]) -> Result<Vec<Proc>> {
    let mut procs = Vec::new();
    for (path, http) in configs {
        match spawn(path) {
            Ok((child, log)) => procs.push(Proc {
                child,
                http: http.clone(),
                log,
            }),
            Err(e) => {
                stop(&mut procs);
                return Err(e);
            }
        }
    }
    Ok(procs)
}

/// After the report: with `--keep-running`, waits for Ctrl-C; then stops the
/// nodes.
fn keep_or_stop(args: &LocalnetArgs, runtime: &tokio::runtime::Runtime, procs: &mut [Proc]) {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    if args.keep_running {
        if !args.json {
            eprintln!("network up; Ctrl-C stops it");
        }
        runtime.block_on(node::runtime::shutdown_signal());
    }
    stop(procs);
}

/// Asks every node to stop (SIGTERM), then kills what is left after 5 s.
fn stop(procs: &mut [Proc]) {
    for p in procs.iter_mut() {
        #[cfg(unix)]
        // SAFETY: sending a signal to a child we started; no memory is involved.
        unsafe {
            libc::kill(p.child.id() as libc::pid_t, libc::SIGTERM);
        }
        #[cfg(not(unix))]
        let _ = p.child.kill();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    for p in procs.iter_mut() {
        loop {
            match p.child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    break;
                }
            }
        }
    }
}

/// The last lines of a log, for error messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// What the network did, measured over HTTP.
struct Outcome {
    chain_identical: bool,
    chain_verified: bool,
    /// Round latency samples (rounds 2..=R on every node).
    samples: usize,
    latency: Percentiles,
    /// Per round 2..=R: the median of its latency over the nodes (ms), as the
    /// simulator's per-round figures.
    per_round_p50: Vec<f64>,
    /// Commit latency samples (rounds 2..=R on every node).
    commit_latency: Percentiles,
    /// Traffic and commit paths, from the nodes' metrics.
    traffic: Traffic,
    /// Delay after the scheduled time (paced chains).
    delay: Percentiles,
    protocol_cpu: Percentiles,
    process_cpu: Percentiles,
    /// Resident set size of each node (MB) once a quarter of the rounds are
    /// done (after warm-up) and at the end.
    rss_warm_mb: Vec<f64>,
    rss_end_mb: Vec<f64>,
    /// RSS of each node (MB) one minute into the rounds (at the end of a
    /// shorter run), and the largest sampled (every second).
    rss_first_mb: Vec<f64>,
    rss_max_mb: Vec<f64>,
    /// Seconds from launching the processes to every node serving round 1.
    startup_s: f64,
    /// CPU seconds the nodes spent until then, all together (on a shared
    /// machine the figure that does not depend on the others' load).
    startup_cpu_s: f64,
}

/// CPU seconds (user + system) process `pid` has used (0 where /proc is not there).
fn process_cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ") ".
    let Some(rest) = stat.rfind(") ").map(|i| &stat[i + 2..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|i| fields.get(*i).and_then(|v| v.parse::<f64>().ok()))
        .sum();
    #[cfg(unix)]
    // SAFETY: sysconf has no memory effects.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    #[cfg(not(unix))]
    let per_s = 100.0;
    ticks / per_s
}

/// The DKG durations the nodes logged (`dkg_ms=` on "DKG complete"), in seconds.
fn logged_dkg_s(procs: &[Proc]) -> Vec<f64> {
    procs
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p.log).ok()?;
            let line = text.lines().find(|l| l.contains("DKG complete"))?;
            let rest = &line[line.find("dkg_ms=")? + "dkg_ms=".len()..];
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<f64>().ok().map(|ms| ms / 1000.0)
        })
        .collect()
}

/// The latest round node `p` serves (0 while it serves none); an error, with
/// its log, if it exited.
async fn latest_round(client: &reqwest::Client, p: &mut Proc) -> Result<u64> {
    if let Ok(Some(status)) = p.child.try_wait() {
        bail!(
            "a node exited early ({status}); its log {}:\n{}",
            p.log.display(),
            tail(&p.log)
        );
    }
    Ok(
        node::http::get_json(client, &format!("{}/public/latest", p.http))
            .await
            .ok()
            .and_then(|v| v["round"].as_u64())
            .unwrap_or(0),
    )
}

/// Waits until every node serves round 1; returns the seconds since `launched`.
/// Asks one node at a time (every 50 ms until it serves, then the next), so
/// that polling costs the nodes next to nothing while they start.
async fn wait_for_round_one(
    client: &reqwest::Client,
    procs: &mut [Proc],
    launched: Instant,
    timeout: Duration,
) -> Result<f64> {
    let count = procs.len();
    for (i, p) in procs.iter_mut().enumerate() {
        loop {
            let latest = latest_round(client, p).await?;
            if latest >= 1 {
                break;
            }
            if launched.elapsed() > timeout {
                bail!(
                    "{} of {count} nodes serve no beacon after {} s",
                    count - i,
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(launched.elapsed().as_secs_f64())
}

/// Resident set size of process `pid` in MB (0 where /proc is not there).
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Posts `count` transactions of 64 KiB to `api` (retrying while it starts).
async fn flood(client: reqwest::Client, api: String, node: usize, count: u32) {
    for k in 0..count {
        let mut tx = vec![node as u8; 64 * 1024];
        tx[..4].copy_from_slice(&k.to_be_bytes());
        for _ in 0..100 {
            let r = client
                .post(format!("{api}/tx"))
                .body(tx.clone())
                .send()
                .await;
            if r.is_ok_and(|r| r.status() != reqwest::StatusCode::TOO_MANY_REQUESTS) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn observe(
    procs: &mut [Proc],
    launched: Instant,
    rounds: u64,
    timeout: Duration,
    flood_count: u32,
) -> Result<Outcome> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let startup_s = wait_for_round_one(&client, procs, launched, timeout).await?;
    let startup_cpu_s = procs.iter().map(|p| process_cpu_s(p.child.id())).sum();
    let start = Instant::now();
    let floods: Vec<_> = procs
        .iter()
        .enumerate()
        .filter(|_| flood_count > 0)
        .map(|(i, p)| tokio::spawn(flood(client.clone(), p.http.clone(), i, flood_count)))
        .collect();
    let mut rss_warm_mb = Vec::new();
    let procs_pids: Vec<u32> = procs.iter().map(|p| p.child.id()).collect();
    let procs_rss = |pids: &[u32]| pids.iter().map(|&p| rss_mb(p)).collect::<Vec<f64>>();
    let mut rss_first_mb: Vec<f64> = Vec::new();
    let mut rss_max_mb = vec![0.0f64; procs_pids.len()];
    let mut rss_sampled = Instant::now();
    // Wait for every node to serve round `rounds`.
    for p in procs.iter_mut() {
        loop {
            let latest = latest_round(&client, p).await?;
            if rss_warm_mb.is_empty() && latest >= (rounds / 4).max(2) {
                rss_warm_mb = procs_rss(procs_pids.as_slice());
            }
            if rss_sampled.elapsed() >= Duration::from_secs(1) {
                rss_sampled = Instant::now();
                let now = procs_rss(&procs_pids);
                for (m, r) in rss_max_mb.iter_mut().zip(&now) {
                    *m = m.max(*r);
                }
                if rss_first_mb.is_empty() && start.elapsed() >= Duration::from_secs(60) {
                    rss_first_mb = now;
                }
            }
            if latest >= rounds {
                break;
            }
            if start.elapsed() > timeout {
                bail!(
                    "no beacon {rounds} after {} s (node at {} has {latest}); its log {}:\n{}",
                    timeout.as_secs(),
                    p.http,
                    p.log.display(),
                    tail(&p.log)
                );
            }
            // Seldom enough not to weigh on the node polled (20 polls a second
            // took 3.5% of its CPU, on its HTTP thread).
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let rss_end_mb = procs_rss(&procs_pids);
    for (m, r) in rss_max_mb.iter_mut().zip(&rss_end_mb) {
        *m = m.max(*r);
    }
    if rss_first_mb.is_empty() {
        rss_first_mb = rss_end_mb.clone();
    }
    for f in floods {
        f.abort();
    }
    // Every node's rounds 1..=rounds.
    let mut chains: Vec<Vec<serde_json::Value>> = Vec::new();
    for p in procs.iter() {
        let mut chain = Vec::new();
        for r in 1..=rounds {
            chain.push(node::http::get_json(&client, &format!("{}/public/{r}", p.http)).await?);
        }
        chains.push(chain);
    }
    let chain_identical = chains.iter().all(|c| *c == chains[0]);
    let info = node::http::get_json(&client, &format!("{}/info", procs[0].http)).await?;
    let chain_verified = verifies(info, &chains[0])?;
    // Latency and CPU of rounds 2..=rounds (round 1 waits for the DKG's stragglers).
    let (mut latencies, mut protocol_cpu, mut process_cpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut delays = Vec::new();
    let mut by_round: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    let mut commit_latencies = Vec::new();
    for p in procs.iter() {
        for s in stats_rounds(&client, &p.http, 2, rounds).await? {
            let round = s["round"].as_u64().unwrap_or(0);
            if (2..=rounds).contains(&round) {
                let latency = s["latency_ms"].as_f64().unwrap_or(0.0);
                latencies.push(latency);
                if let Some(c) = s["commit_latency_ms"].as_f64() {
                    commit_latencies.push(c);
                }
                by_round.entry(round).or_default().push(latency);
                if let Some(d) = s["delay_ms"].as_f64() {
                    delays.push(d);
                }
                protocol_cpu.push(s["protocol_cpu_ms"].as_f64().unwrap_or(0.0));
                process_cpu.push(s["process_cpu_ms"].as_f64().unwrap_or(0.0));
            }
        }
    }
    Ok(Outcome {
        chain_identical,
        chain_verified,
        samples: latencies.len(),
        latency: percentiles(&latencies),
        per_round_p50: by_round.values().map(|v| percentiles(v).p50).collect(),
        commit_latency: percentiles(&commit_latencies),
        traffic: traffic(&client, procs).await?,
        delay: percentiles(&delays),
        protocol_cpu: percentiles(&protocol_cpu),
        process_cpu: percentiles(&process_cpu),
        rss_warm_mb,
        rss_end_mb,
        rss_first_mb,
        rss_max_mb,
        startup_s,
        startup_cpu_s,
    })
}

/// Consensus traffic and commit paths of a network, from its nodes' metrics.
#[derive(Debug, Default, PartialEq, serde::Serialize)]
struct Traffic {
    /// Consensus messages per finalized height, all nodes together (one per
    /// receiver: the simulator's `messages_per_round`).
    messages_per_round: f64,
    /// The same by kind.
    messages_by_kind: std::collections::BTreeMap<String, f64>,
    /// Share of the heights committed by the fast path (the mean of the nodes').
    fast_path_ratio: f64,
}

/// Reads each node's `/metrics` once: messages sent and commits by path,
/// over its finalized height in the same answer (the nodes keep running).
async fn traffic(client: &reqwest::Client, procs: &[Proc]) -> Result<Traffic> {
    let mut out = Traffic::default();
    let mut ratios = Vec::new();
    for p in procs {
        let text = client
            .get(format!("{}/metrics", p.http))
            .send()
            .await?
            .text()
            .await?;
        let metrics = node::metrics::TrafficSample::parse(&text);
        if metrics.height == 0 {
            continue;
        }
        for (kind, count) in &metrics.sent {
            let per_round = count / metrics.height as f64;
            *out.messages_by_kind.entry(kind.clone()).or_default() += per_round;
            out.messages_per_round += per_round;
        }
        if metrics.fast + metrics.slow > 0.0 {
            ratios.push(metrics.fast / (metrics.fast + metrics.slow));
        }
    }
    if !ratios.is_empty() {
        out.fast_path_ratio = ratios.iter().sum::<f64>() / ratios.len() as f64;
    }
    Ok(out)
}

/// Whether `chain` (`/public/{r}` answers from round 1 on) verifies under
/// `info` (a node's `/info`) with drand's rules.
fn verifies(info: serde_json::Value, chain: &[serde_json::Value]) -> Result<bool> {
    let info: ChainInfoJson = serde_json::from_value(info).context("/info is not drand's shape")?;
    let info = info.to_info()?;
    let beacons: Vec<Beacon> = chain
        .iter()
        .map(|v| {
            serde_json::from_value::<BeaconJson>(v.clone())
                .map_err(anyhow::Error::from)
                .and_then(|b| b.to_beacon().map_err(anyhow::Error::from))
        })
        .collect::<Result<_>>()?;
    Ok(info.verify_chain(None, &beacons).is_ok())
}

/// The round statistics of rounds `from..=to` of the node at `api`, page by page.
async fn stats_rounds(
    client: &reqwest::Client,
    api: &str,
    from: u64,
    to: u64,
) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    let mut next = from;
    while next <= to {
        let url = format!("{api}/stats/rounds?from={next}");
        let page = node::http::get_json(client, &url).await?;
        let page = page.as_array().cloned().unwrap_or_default();
        let Some(last) = page.last().and_then(|s| s["round"].as_u64()) else {
            break;
        };
        out.extend(page);
        next = last + 1;
    }
    Ok(out)
}

/// Runs `localnet`.
pub fn run(args: LocalnetArgs) -> Result<()> {
    if args.nodes < 1 {
        bail!("--nodes must be at least 1");
    }
    if args.rounds < 2 {
        bail!("--rounds must be at least 2 (round 1 waits for the DKG)");
    }
    let mut protocol = args.protocol.params(args.nodes)?;
    if args.protocol.protocol.is_none() {
        protocol.view_change_timeout_ms = view_change_timeout_ms(args.nodes);
        protocol.fast_path_timeout_ms = fast_path_timeout_ms(args.nodes);
    }
    let period = protocol.period_s()?;
    let wall = Instant::now();
    let temp;
    let dir = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            d.clone()
        }
        None => {
            temp = tempfile::tempdir().context("creating a temporary directory")?;
            temp.path().to_path_buf()
        }
    };
    let parties = args.nodes.max(args.reshare_to.unwrap_or(0));
    let configs = write_configs(
        &dir,
        parties,
        args.nodes,
        args.scheme,
        &protocol,
        args.base_port,
    )?;
    if args.configs_only {
        if args.wan.enabled() {
            bail!(
                "--configs-only writes plain configs: the WAN emulator runs only with the network"
            );
        }
        for (path, http) in &configs {
            println!("{}  (API {http})", path.display());
        }
        return Ok(());
    }
    if let Some(m) = args.reshare_to {
        if args.wan.enabled() || args.flood > 0 || m == 0 {
            bail!("--reshare-to M takes M >= 1 and no --regions, --latency-ms or --flood");
        }
        return reshare_run(&args, &dir, &configs, m, wall);
    }
    // Kept alive until the nodes are stopped (dropping it stops the relays).
    let _wan = match node::wan::WanModel::from_args(&args.wan, args.nodes)? {
        Some(model) => {
            let paths: Vec<PathBuf> = configs.iter().map(|(p, _)| p.clone()).collect();
            let wan = node::wan::LinkEmulator::in_front_of(model, &paths)?;
            if !args.json {
                eprintln!(
                    "emulated WAN: {} relays in userspace",
                    args.nodes * args.nodes.saturating_sub(1)
                );
            }
            Some(wan)
        }
        None => None,
    };
    let launched = Instant::now();
    let mut procs = spawn_all(&configs)?;
    if !args.json {
        eprintln!(
            "started {} nodes in {} (logs: node-*/node.log); waiting for {} beacons",
            args.nodes,
            dir.display(),
            args.rounds
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(observe(
        &mut procs,
        launched,
        args.rounds,
        Duration::from_secs(args.timeout_s),
        args.flood,
    ));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            stop(&mut procs);
            return Err(e);
        }
    };
    let http: Vec<&String> = procs.iter().map(|p| &p.http).collect();
    let (lat, delay) = (&outcome.latency, &outcome.delay);
    let dkg = percentiles(&logged_dkg_s(&procs));
    let mut report = json!({
        "nodes": args.nodes,
        "rounds": args.rounds,
        "scheme": args.scheme.as_str(),
        "chain_identical": outcome.chain_identical,
        "chain_verified": outcome.chain_verified,
        "beacon_latency_ms": lat,
        "commit_latency_ms": outcome.commit_latency,
        "messages_per_round": outcome.traffic.messages_per_round,
        "messages_by_kind": outcome.traffic.messages_by_kind,
        "fast_path_ratio": outcome.traffic.fast_path_ratio,
        "cpu_ms_per_round": {
            "protocol_p50": outcome.protocol_cpu.p50,
            "process_p50": outcome.process_cpu.p50,
        },
        "samples": outcome.samples,
        "per_round_beacon_p50_ms": outcome.per_round_p50,
        "http": http,
        "dir": dir.display().to_string(),
        "wall_s": wall.elapsed().as_secs_f64(),
        "startup_s": outcome.startup_s,
        "startup_cpu_s": outcome.startup_cpu_s,
        "dkg_s": dkg.p50,
    });
    if period > 0 {
        report["beacon_delay_ms"] = json!(delay);
    }
    if args.wan.enabled() {
        report["wan"] = json!({
            "regions": args.wan.regions.as_ref().map(|p| p.display().to_string()),
            "latency_ms": args.wan.latency_ms,
            "jitter_ms": args.wan.jitter_ms,
            "bandwidth_mbps": args.wan.bandwidth_mbps,
            "backend": "userspace",
        });
    }
    let growth = outcome
        .rss_end_mb
        .iter()
        .zip(&outcome.rss_warm_mb)
        .map(|(e, w)| e - w)
        .fold(0.0, f64::max);
    report["rss_mb"] = json!({
        "first": outcome.rss_first_mb,
        "last": outcome.rss_end_mb,
        "max": outcome.rss_max_mb,
    });
    report["soak_rss_mb"] = json!({
        "warm": outcome.rss_warm_mb,
        "end": outcome.rss_end_mb,
        "growth_max": growth,
    });
    if args.flood > 0 {
        report["p99_under_flood_ms"] = json!(lat.p99);
    }
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{} nodes, {} rounds: chain identical on every node: {}, verifies: {}",
            args.nodes, args.rounds, outcome.chain_identical, outcome.chain_verified
        );
        println!(
            "round latency (ms, rounds 2..={} on every node, {} samples): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
            args.rounds, outcome.samples, lat.p50, lat.p90, lat.p99, lat.max
        );
        let commit = &outcome.commit_latency;
        println!(
            "commit latency (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}; messages per round {:.1}, fast path {:.0}%",
            commit.p50,
            commit.p90,
            commit.p99,
            commit.max,
            outcome.traffic.messages_per_round,
            outcome.traffic.fast_path_ratio * 100.0
        );
        if period > 0 {
            println!(
                "beacon delay after its scheduled time (ms): p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}",
                delay.p50, delay.p90, delay.p99, delay.max
            );
        }
        println!(
            "start-up: every node served round 1 {:.2} s after launch ({:.1} CPU s in all); DKG {:.2} s (median of the nodes' logs, max {:.2})",
            outcome.startup_s, outcome.startup_cpu_s, dkg.p50, dkg.max
        );
        println!(
            "CPU per round and node (ms, median): protocol {:.2}, whole process {:.2}",
            outcome.protocol_cpu.p50, outcome.process_cpu.p50
        );
        println!(
            "APIs: {}",
            http.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        );
        println!(
            "RSS per node (MB): after warm-up {:?}, at the end {:?} (growth at most {growth:.1})",
            outcome.rss_warm_mb, outcome.rss_end_mb
        );
        if args.flood > 0 {
            println!(
                "round latency p99 under a flood of {} transactions of 64 KiB per node: {:.2} ms",
                args.flood, lat.p99
            );
        }
        println!("wall {:.1} s", wall.elapsed().as_secs_f64());
    }
    keep_or_stop(&args, &runtime, &mut procs);
    if !outcome.chain_identical || !outcome.chain_verified {
        bail!("the nodes do not serve one valid chain");
    }
    Ok(())
}

/// How a change of members went on a local network.
struct ReshareOutcome {
    /// Group key (hex) served before the change and by every member after it.
    group_key_before: String,
    group_key_unchanged: bool,
    /// The round after which the members proposed.
    proposed_after: u64,
    /// The first height of the new epoch.
    epoch_start: u64,
    /// Seconds from the proposals to every new member running the new epoch
    /// (and every leaver retired).
    switch_s: f64,
    /// Seconds from the switch to every joiner serving round 1 (backfill).
    backfill_s: f64,
    /// The last round checked on every new member.
    checked_to: u64,
    chain_identical: bool,
    chain_verified: bool,
    latency: Percentiles,
    samples: usize,
}

/// `GET /epoch` of a node (status and epoch), or none while it cannot answer.
async fn epoch_of(client: &reqwest::Client, p: &mut Proc) -> Result<Option<(u64, String, u64)>> {
    if let Ok(Some(status)) = p.child.try_wait() {
        bail!(
            "a node exited early ({status}); its log {}:\n{}",
            p.log.display(),
            tail(&p.log)
        );
    }
    Ok(node::http::get_json(client, &format!("{}/epoch", p.http))
        .await
        .ok()
        .map(|v| {
            (
                v["epoch"].as_u64().unwrap_or(0),
                v["status"].as_str().unwrap_or("").to_string(),
                v["start"].as_u64().unwrap_or(0),
            )
        }))
}

/// What a node of a change of members shows over HTTP.
#[derive(Debug)]
struct Seen {
    /// `GET /epoch`: epoch, status, first height (none while it cannot answer).
    epoch: Option<(u64, String, u64)>,
    /// The latest round it serves.
    latest: u64,
    /// Whether it serves round 1 (a joiner, once its backfill is over).
    first_round: bool,
}

/// Polls the nodes `which` of `procs` until `check` holds for each, or fails
/// at `deadline` naming `what`.
async fn wait_all<F>(
    client: &reqwest::Client,
    procs: &mut [Proc],
    which: &[usize],
    deadline: Instant,
    what: &str,
    mut check: F,
) -> Result<()>
where
    F: FnMut(&Seen) -> bool,
{
    for &i in which {
        loop {
            let seen = Seen {
                epoch: epoch_of(client, &mut procs[i]).await?,
                latest: latest_round(client, &mut procs[i]).await?,
                first_round: node::http::get_json(client, &format!("{}/public/1", procs[i].http))
                    .await
                    .is_ok(),
            };
            if check(&seen) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "node {i} {what} in time ({seen:?}); its log {}:\n{}",
                    procs[i].log.display(),
                    tail(&procs[i].log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

async fn observe_reshare(
    procs: &mut [Proc],
    configs: &[(PathBuf, String)],
    genesis: u32,
    to: u32,
    rounds: u64,
    propose_after: u64,
    timeout: Duration,
) -> Result<ReshareOutcome> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()?;
    let deadline = Instant::now() + timeout;
    let old: Vec<usize> = (0..genesis as usize).collect();
    let new: Vec<usize> = (0..to as usize).collect();
    let leavers: Vec<usize> = (to as usize..genesis as usize).collect();
    let joiners: Vec<usize> = (genesis as usize..to as usize).collect();
    wait_all(
        &client,
        procs,
        &old,
        deadline,
        "served no round after the proposal round",
        |s| s.latest >= propose_after,
    )
    .await?;
    let info = node::http::get_json(&client, &format!("{}/info", procs[0].http)).await?;
    let group_key_before = info["public_key"].as_str().unwrap_or("").to_string();
    let proposed_after = latest_round(&client, &mut procs[0]).await?;
    // Every genesis member's operator proposes the same change.
    let members: Vec<String> = (0..to as usize)
        .map(|i| -> Result<String> {
            let cfg = NodeConfig::load(&configs[i].0)?;
            Ok(cfg.me().id.to_string())
        })
        .collect::<Result<_>>()?;
    let request = node::http::ReshareRequest {
        members,
        c: None,
        beacon_threshold: 0,
    };
    let proposed = Instant::now();
    for p in procs.iter().take(genesis as usize) {
        node::http::post_reshare(&client, &p.http, &request).await?;
    }
    wait_all(
        &client,
        procs,
        &new,
        deadline,
        "did not run the new epoch",
        |s| matches!(&s.epoch, Some((1, status, _)) if status == "member"),
    )
    .await?;
    wait_all(
        &client,
        procs,
        &leavers,
        deadline,
        "did not retire",
        |s| matches!(&s.epoch, Some((1, status, _)) if status == "retired"),
    )
    .await?;
    let switch_s = proposed.elapsed().as_secs_f64();
    let epoch_start = epoch_of(&client, &mut procs[0])
        .await?
        .map_or(0, |(_, _, start)| start);
    let switched = Instant::now();
    // Joiners serve the whole chain once their backfill is over.
    wait_all(
        &client,
        procs,
        &joiners,
        deadline,
        "does not serve round 1 (backfill)",
        |s| s.first_round,
    )
    .await?;
    let backfill_s = switched.elapsed().as_secs_f64();
    let checked_to = rounds.max(epoch_start + 4);
    wait_all(
        &client,
        procs,
        &new,
        deadline,
        "did not reach the last round",
        |s| s.latest >= checked_to,
    )
    .await?;
    let mut chains: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut keys_same = true;
    for &i in &new {
        let info = node::http::get_json(&client, &format!("{}/info", procs[i].http)).await?;
        keys_same &= info["public_key"].as_str() == Some(group_key_before.as_str());
        let mut chain = Vec::new();
        for r in 1..=checked_to {
            chain.push(
                node::http::get_json(&client, &format!("{}/public/{r}", procs[i].http)).await?,
            );
        }
        chains.push(chain);
    }
    let chain_identical = chains.iter().all(|c| *c == chains[0]);
    let chain_verified = verifies(info, &chains[0])?;
    let mut latencies = Vec::new();
    for &i in &new {
        for s in stats_rounds(&client, &procs[i].http, 2, checked_to).await? {
            if let Some(l) = s["latency_ms"].as_f64() {
                latencies.push(l);
            }
        }
    }
    Ok(ReshareOutcome {
        group_key_before,
        group_key_unchanged: keys_same,
        proposed_after,
        epoch_start,
        switch_s,
        backfill_s,
        checked_to,
        chain_identical,
        chain_verified,
        samples: latencies.len(),
        latency: percentiles(&latencies),
    })
}

/// `localnet --reshare-to M`: starts the genesis members and the parties that
/// join, has every genesis member propose the change after round
/// `--reshare-at`, and checks that the new members serve one chain, valid
/// from round 1 under the unchanged group key.
fn reshare_run(
    args: &LocalnetArgs,
    dir: &Path,
    configs: &[(PathBuf, String)],
    to: u32,
    wall: Instant,
) -> Result<()> {
    let mut procs = spawn_all(configs)?;
    if !args.json {
        eprintln!(
            "started {} nodes in {} ({} genesis members); the members reshare to nodes 0..{to} after round {}",
            configs.len(),
            dir.display(),
            args.nodes,
            args.reshare_at
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(observe_reshare(
        &mut procs,
        configs,
        args.nodes,
        to,
        args.rounds,
        args.reshare_at,
        Duration::from_secs(args.timeout_s),
    ));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            stop(&mut procs);
            return Err(e);
        }
    };
    let joined: Vec<u32> = (args.nodes..to).collect();
    let left: Vec<u32> = (to..args.nodes).collect();
    let http: Vec<&String> = procs.iter().take(to as usize).map(|p| &p.http).collect();
    let report = json!({
        "nodes": to,
        "rounds": outcome.checked_to,
        "scheme": args.scheme.as_str(),
        "chain_identical": outcome.chain_identical,
        "chain_verified": outcome.chain_verified,
        "beacon_latency_ms": outcome.latency,
        "samples": outcome.samples,
        "http": http,
        "dir": dir.display().to_string(),
        "wall_s": wall.elapsed().as_secs_f64(),
        "reshare": {
            "from": args.nodes,
            "to": to,
            "joined": joined,
            "left": left,
            "proposed_after_round": outcome.proposed_after,
            "epoch_start": outcome.epoch_start,
            "switch_s": outcome.switch_s,
            "backfill_s": outcome.backfill_s,
            "group_key": outcome.group_key_before,
            "group_key_unchanged": outcome.group_key_unchanged,
        },
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{} -> {to} members (joined {joined:?}, left {left:?}): proposed after round {}, the new epoch runs from round {} ({:.2} s after the proposals); joiners backfilled in {:.2} s",
            args.nodes, outcome.proposed_after, outcome.epoch_start, outcome.switch_s, outcome.backfill_s
        );
        println!(
            "rounds 1..={} on the {to} members: chain identical: {}, verifies: {}, group key unchanged: {}",
            outcome.checked_to, outcome.chain_identical, outcome.chain_verified, outcome.group_key_unchanged
        );
        let lat = &outcome.latency;
        println!(
            "round latency (ms, {} samples): p50 {:.2}  p90 {:.2}  max {:.2}; wall {:.1} s",
            outcome.samples,
            lat.p50,
            lat.p90,
            lat.max,
            wall.elapsed().as_secs_f64()
        );
    }
    keep_or_stop(args, &runtime, &mut procs);
    if !outcome.chain_identical || !outcome.chain_verified || !outcome.group_key_unchanged {
        bail!("the new members do not serve one valid chain under the genesis group key");
    }
    Ok(())
}
