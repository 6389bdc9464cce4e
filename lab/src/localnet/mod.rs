//! `sbft-beacon localnet`: a whole network of node processes on 127.0.0.1. It
//! creates identities and configs (in `--dir` or a temporary directory), starts
//! one `sbft-beacon run` per node, waits for `--rounds` beacons, checks that every
//! node serves the same chain (and that it verifies), reports round latency and
//! CPU per round from the nodes' `/stats/rounds`, and stops the nodes cleanly.
//!
//! Files: here the arguments and the run; `configs.rs` the nodes' files;
//! `procs.rs` the node processes; `observe.rs` what the network does;
//! `report.rs` the report of a run; `reshare.rs` a change of members.
//! `chaos` (the module beside this one) starts its networks with the same
//! configs, processes and WAN emulator.

mod configs;
pub(crate) mod observe;
pub(crate) mod procs;
mod report;
mod reshare;

pub(crate) use configs::{fast_path_timeout_ms, view_change_timeout_ms, write_configs};
pub(crate) use reshare::{epoch_at, retained_deals_at};

use anyhow::{bail, Context, Result};
use beacon::SchemeId;
use clap::Args;
use consensus::ProtocolParams;
use observe::observe;
use procs::{keep_or_stop, logged_dkg_s, spawn_all, stop};
use report::Report;
use reshare::reshare_run;
use sim::report::percentiles;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Options of `localnet`.
#[derive(Args)]
pub(crate) struct LocalnetArgs {
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
    /// Protocol parameters: `--protocol FILE`, `--c`, `--period`, `--beacon-shares`.
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
    wan: crate::wan::WanArgs,
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

/// Runs `localnet`: the nodes' files, then the network (or the change of
/// members of `--reshare-to`), its report, and the nodes stopped or kept.
pub(crate) fn run(args: LocalnetArgs) -> Result<()> {
    let protocol = protocol_params(&args)?;
    let period = protocol.period_s()?;
    let wall = Instant::now();
    let (dir, _temp) = network_dir(&args)?;
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
        return list_configs(&args, &configs);
    }
    if let Some(m) = args.reshare_to {
        if args.wan.enabled() || args.flood > 0 || m == 0 {
            bail!("--reshare-to M takes M >= 1 and no --regions, --latency-ms or --flood");
        }
        return reshare_run(&args, &dir, &configs, m, wall);
    }
    // Kept alive until the nodes are stopped (dropping it stops the relays).
    let _wan = emulate_wan(&args, &configs)?;
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
    Report {
        args: &args,
        outcome: &outcome,
        http: procs.iter().map(|p| &p.http).collect(),
        dir: &dir,
        period,
        wall,
        dkg: percentiles(&logged_dkg_s(&procs)),
    }
    .print();
    keep_or_stop(&args, &runtime, &mut procs);
    if !outcome.chain_identical || !outcome.chain_verified {
        bail!("the nodes do not serve one valid chain");
    }
    Ok(())
}

/// Checks `--nodes` and `--rounds`, and reads the protocol parameters: without
/// a protocol file, with the timeouts that suit `--nodes` processes on one
/// machine.
fn protocol_params(args: &LocalnetArgs) -> Result<ProtocolParams> {
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
    Ok(protocol)
}

/// The network's folder: `--dir` (created if missing), or a temporary one,
/// removed when the returned guard is dropped.
fn network_dir(args: &LocalnetArgs) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            Ok((d.clone(), None))
        }
        None => {
            let temp = tempfile::tempdir().context("creating a temporary directory")?;
            Ok((temp.path().to_path_buf(), Some(temp)))
        }
    }
}

/// `--configs-only`: prints each node's config and API address, and starts
/// nothing (refused with the WAN emulator, which runs only with the network).
fn list_configs(args: &LocalnetArgs, configs: &[(PathBuf, String)]) -> Result<()> {
    if args.wan.enabled() {
        bail!("--configs-only writes plain configs: the WAN emulator runs only with the network");
    }
    for (path, http) in configs {
        println!("{}  (API {http})", path.display());
    }
    Ok(())
}

/// The emulated WAN in front of the nodes (userspace relays per directed
/// link), where the WAN arguments ask for one.
fn emulate_wan(
    args: &LocalnetArgs,
    configs: &[(PathBuf, String)],
) -> Result<Option<crate::wan::LinkEmulator>> {
    let Some(model) = crate::wan::WanModel::from_args(&args.wan, args.nodes)? else {
        return Ok(None);
    };
    let paths: Vec<PathBuf> = configs.iter().map(|(p, _)| p.clone()).collect();
    let wan = crate::wan::LinkEmulator::in_front_of(model, &paths)?;
    if !args.json {
        eprintln!(
            "emulated WAN: {} relays in userspace",
            args.nodes * args.nodes.saturating_sub(1)
        );
    }
    Ok(Some(wan))
}
