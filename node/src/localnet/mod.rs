//! `sbft-beacon localnet`: a whole network of node processes on 127.0.0.1. It
//! creates identities and configs (in `--dir` or a temporary directory), starts
//! one `sbft-beacon run` per node, waits for `--rounds` beacons, checks that every
//! node serves the same chain (and that it verifies), reports round latency and
//! CPU per round from the nodes' `/stats/rounds`, and stops the nodes cleanly.
//!
//! Files: here the arguments and the run; `configs.rs` the nodes' files;
//! `procs.rs` the node processes; `observe.rs` what the network does;
//! `reshare.rs` a change of members.

mod configs;
mod observe;
mod procs;
mod reshare;

pub use configs::{fast_path_timeout_ms, view_change_timeout_ms, write_configs};

use anyhow::{bail, Context, Result};
use beacon::SchemeId;
use clap::Args;
use observe::observe;
use procs::{keep_or_stop, logged_dkg_s, spawn_all, stop};
use reshare::reshare_run;
use serde_json::json;
use sim::report::percentiles;
use std::path::PathBuf;
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
