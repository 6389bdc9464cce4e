//! `sbft-beacon sim`: run a scenario (or a campaign) and print the report.

use crate::plot;
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use sim::{Report, SimConfig};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Options of `sim`.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct SimArgs {
    #[command(subcommand)]
    command: Option<SimCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum SimCommand {
    /// Run many seeds with random fault mixes; print failing seeds.
    Campaign(CampaignArgs),
}

/// Options of one simulation run.
#[derive(Args)]
pub(crate) struct RunArgs {
    /// Scenario file, or a built-in scenario name (default, large, huge, byzantine, lossy, crash-restart, reshare).
    #[arg(long, default_value = "configs/sim/default.toml")]
    config: String,
    /// Override the number of replicas.
    #[arg(long)]
    nodes: Option<u32>,
    /// Override the number of beacon rounds.
    #[arg(long)]
    rounds: Option<u64>,
    /// Override the seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the scheme.
    #[arg(long)]
    scheme: Option<beacon::SchemeId>,
    /// Worker threads (the results do not depend on it); default: the
    /// scenario's `threads`, else the machine's available parallelism.
    #[arg(long)]
    threads: Option<usize>,
    /// Override the number of Byzantine replicas (at most f).
    #[arg(long)]
    byzantine: Option<u32>,
    /// Write the report as one JSON object to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Draw a latency CDF and a per-round timeline (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
    /// Export the beacon chain in drand's JSON shape.
    #[arg(long, value_name = "FILE")]
    chain: Option<PathBuf>,
    /// Write every member's key material at the end of the DKG to FILE; the
    /// rounds then start afresh at that cut (docs/simulator.md).
    #[arg(long, value_name = "FILE", conflicts_with = "load_dkg")]
    save_dkg: Option<PathBuf>,
    /// Start from a DKG saved by --save-dkg with the same scenario, seed and
    /// members, instead of running it: the rounds are those of the run that
    /// saved it (the same rounds trace hash).
    #[arg(long, value_name = "FILE")]
    load_dkg: Option<PathBuf>,
}

#[derive(Args)]
struct CampaignArgs {
    /// Number of seeds.
    #[arg(long, default_value_t = 20)]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Base scenario (file or built-in name).
    #[arg(long, default_value = "byzantine")]
    scenario: String,
    /// Override the number of replicas.
    #[arg(long)]
    nodes: Option<u32>,
    /// Override the number of rounds.
    #[arg(long)]
    rounds: Option<u64>,
    /// Write all runs as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Seeds run at once (each on one thread; results are the same for any
    /// value); default: the machine's available parallelism.
    #[arg(long, default_value_t = sim::config::available_threads())]
    jobs: usize,
}

/// Loads a scenario and applies the `--nodes` / `--rounds` overrides.
fn load(config: &str, nodes: Option<u32>, rounds: Option<u64>) -> Result<SimConfig> {
    // The default path works from the repository root; elsewhere fall back to the
    // built-in scenario of the same name.
    let mut cfg = match SimConfig::load(config) {
        Ok(c) => c,
        Err(e) if config == "configs/sim/default.toml" => {
            SimConfig::load("default").context(e.to_string())?
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(n) = nodes {
        cfg.nodes = n;
    }
    if let Some(r) = rounds {
        cfg.rounds = r;
    }
    Ok(cfg)
}

/// Runs `sim`.
pub(crate) fn run(args: SimArgs) -> Result<()> {
    match args.command {
        Some(SimCommand::Campaign(c)) => campaign(c),
        None => single(args.run),
    }
}

fn single(args: RunArgs) -> Result<()> {
    let mut cfg = load(&args.config, args.nodes, args.rounds)?;
    if let Some(s) = args.seed {
        cfg.seed = s;
    }
    if let Some(s) = args.scheme {
        cfg.scheme = s;
    }
    if let Some(t) = args.threads {
        cfg.threads = t;
    }
    if let Some(b) = args.byzantine {
        cfg.faults.byzantine = b;
    }
    cfg.dkg_snapshot = match (args.save_dkg, args.load_dkg) {
        (Some(path), _) => Some(sim::snapshot::SnapshotMode::Save(path)),
        (None, Some(path)) => Some(sim::snapshot::SnapshotMode::Load(path)),
        (None, None) => None,
    };
    cfg.validate()?;
    eprintln!(
        "scenario {} — {} nodes, {} rounds, {}, seed {}, {} thread(s)",
        cfg.name, cfg.nodes, cfg.rounds, cfg.scheme, cfg.seed, cfg.threads
    );
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = ProgressBar::new(cfg.rounds);
        bar.set_style(
            ProgressStyle::with_template("{spinner} rounds {pos}/{len} [{bar:30}] {elapsed} {msg}")
                .expect("valid template"),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar
    });
    // Without a terminal (CI logs), a plain line at most every 10 s.
    let started = std::time::Instant::now();
    let last_line = std::sync::Mutex::new(started);
    let on_progress = |p: &sim::RunProgress| {
        let status = progress_status(p);
        if let Some(b) = &bar {
            b.set_position(p.rounds_done);
            b.set_message(status);
        } else if let Ok(mut last) = last_line.lock() {
            if last.elapsed() >= std::time::Duration::from_secs(10) {
                *last = std::time::Instant::now();
                eprintln!(
                    "rounds {}/{} after {:.0} s: {status}",
                    p.rounds_done,
                    p.rounds_target,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    };
    let (report, chain) = sim::run(&cfg, Some(&on_progress))?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    print_table(&report);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.chain {
        let Some(chain) = chain else {
            bail!("no beacon chain to export (the DKG did not finish)")
        };
        std::fs::write(path, serde_json::to_string_pretty(&chain)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        plot::draw(&report, path)?;
    }
    if let Some(v) = report.violations.first() {
        eprintln!(
            "FAILED ({:?}) at {:.3} ms{}: {} — replay with --seed {}",
            v.kind,
            v.time_ms,
            v.node.map(|n| format!(" on node {n}")).unwrap_or_default(),
            v.detail,
            v.seed
        );
        std::process::exit(match v.kind {
            sim::FailureKind::Safety => 2,
            sim::FailureKind::Liveness => 3,
            sim::FailureKind::Crash => 4,
        });
    }
    Ok(())
}

fn print_table(r: &Report) {
    let p = |x: &sim::report::Percentiles| {
        format!(
            "p50 {:>8.1}  p90 {:>8.1}  p99 {:>8.1}  max {:>8.1}",
            x.p50, x.p90, x.p99, x.max
        )
    };
    println!(
        "scenario            {} (seed {}, {} nodes, f = {}, c = {}, {}, {} Byzantine)",
        r.scenario, r.seed, r.nodes, r.f, r.c, r.scheme, r.byzantine
    );
    println!(
        "DKG                 {:.1} ms virtual, {:.2} s wall, {:.0} messages and {:.0} KiB per member",
        r.dkg_virtual_ms,
        r.dkg_wall_s,
        r.dkg_messages_per_member,
        r.dkg_bytes_per_member / 1024.0
    );
    if let Some(s) = &r.dkg_snapshot {
        match s.action.as_str() {
            "loaded" => println!(
                "DKG snapshot        loaded from {} (its DKG took {:.2} s wall)",
                s.file, s.dkg_wall_s
            ),
            _ => println!("DKG snapshot        saved to {}", s.file),
        }
    }
    if !r.dkg_messages_by_kind.is_empty() {
        let kinds: Vec<String> = r
            .dkg_messages_by_kind
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("DKG messages        {}", kinds.join(", "));
    }
    println!(
        "rounds              {} beacons, {} heights committed",
        r.rounds, r.heights_committed
    );
    println!(
        "fast path           {:.1}% of heights, {} view changes",
        100.0 * r.fast_path_ratio,
        r.view_changes
    );
    println!("beacon latency ms   {}", p(&r.beacon_latency_ms));
    if let Some(delay) = &r.beacon_delay_ms {
        println!("beacon delay ms     {} (after the round's time)", p(delay));
    }
    println!("commit latency ms   {}", p(&r.commit_latency_ms));
    println!(
        "traffic             {:.1} messages and {:.0} bytes per node per round ({:.0} messages per round)",
        r.messages_per_node_per_round, r.bytes_per_node_per_round, r.messages_per_round
    );
    let kinds: Vec<String> = r
        .messages_by_kind
        .iter()
        .map(|(kind, count)| format!("{kind} {count}"))
        .collect();
    println!("messages by kind    {}", kinds.join(", "));
    println!(
        "virtual CPU         {:.2} ms per node per round",
        r.cpu_ms_per_node_per_round
    );
    println!(
        "wall                {:.2} s ({:.2} s rounds), {} events, {:.0} events/s, {:.1} s virtual",
        r.wall_s, r.rounds_wall_s, r.events, r.events_per_s, r.virtual_s
    );
    if let Some(b) = &r.final_beacon {
        println!(
            "final beacon        round {} randomness {}",
            b.round, b.randomness
        );
    }
    print_host_parallelism(&r.host_parallelism);
    println!("trace hash          {}", r.trace_hash);
    if let Some(h) = &r.rounds_trace_hash {
        println!("rounds trace hash   {h}");
    }
    println!(
        "violations          {}",
        if r.violations.is_empty() {
            "none".to_string()
        } else {
            r.violations.len().to_string()
        }
    );
}

/// The host's work, span and projected wall time per phase, and the largest
/// serial contributors (`sim::host_parallelism`).
fn print_host_parallelism(h: &sim::host_parallelism::HostParallelism) {
    for (name, phase) in [("DKG", &h.dkg), ("rounds", &h.rounds)] {
        if phase.windows == 0 && phase.serial_s == 0.0 {
            continue;
        }
        let projected: Vec<String> = phase
            .projected
            .iter()
            .filter(|p| p.threads > 1)
            .map(|p| {
                format!(
                    "{} threads {:.1} s ({:.2}x)",
                    p.threads, p.wall_s, p.speedup
                )
            })
            .collect();
        println!(
            "host {:<14} work {:.1} s, span {:.1} s, serial {:.1} s ({} windows); projected {}",
            format!("{name}"),
            phase.work_s,
            phase.span_s,
            phase.serial_s,
            phase.windows,
            projected.join(", ")
        );
    }
    let top: Vec<String> = h
        .serial_top
        .iter()
        .map(|c| format!("{} {:.1} s ({:.0}%)", c.name, c.s, 100.0 * c.share))
        .collect();
    println!("host serial top     {}", top.join("; "));
}

fn campaign(args: CampaignArgs) -> Result<()> {
    let mut base = load(&args.scenario, args.nodes, args.rounds)?;
    // Each seed draws its own partition, crash and Byzantine count.
    base.partitions.clear();
    base.faults.crash.clear();
    base.faults.byzantine = 0;
    base.validate()?;
    println!(
        "campaign: {} seeds from {} on scenario {} ({} nodes, {} rounds)",
        args.seeds, args.first_seed, base.name, base.nodes, base.rounds
    );
    let runs = sim::campaign::run(&base, args.first_seed, args.seeds, args.jobs, &|run| {
        let verdict = match run.violations.first() {
            None => "ok".to_string(),
            Some(v) => format!("FAILED {:?}: {}", v.kind, v.detail),
        };
        println!(
            "seed {:>6}  byzantine {:>2}  twins {}  partition {:>5}  crash-restart {:>5}  loss {:.3}  rounds {:>3}  {}",
            run.seed,
            run.byzantine.len(),
            run.twins,
            run.partition,
            run.crash_restart,
            run.loss,
            run.rounds,
            verdict
        );
    })?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&runs)?)?;
    }
    println!(
        "\n{:<24} {:>6} {:>6} {:>7} {:>9} {:>6}",
        "fault", "runs", "ok", "safety", "liveness", "crash"
    );
    for row in sim::campaign::outcomes(&runs) {
        println!(
            "{:<24} {:>6} {:>6} {:>7} {:>9} {:>6}",
            row.kind, row.runs, row.ok, row.safety, row.liveness, row.crash
        );
    }
    let failed: Vec<u64> = runs
        .iter()
        .filter(|r| !r.violations.is_empty())
        .map(|r| r.seed)
        .collect();
    println!(
        "{} of {} seeds passed",
        runs.len() - failed.len(),
        runs.len()
    );
    if !failed.is_empty() {
        println!("failing seeds: {failed:?} (replay: sbft-beacon sim campaign --first-seed SEED --seeds 1 --scenario {})", args.scenario);
        std::process::exit(2);
    }
    Ok(())
}

/// What a progress line says besides the rounds: the DKG's members with
/// keys while it runs, the simulated clock, the events in flight, and the
/// process's resident memory (Linux).
fn progress_status(p: &sim::RunProgress) -> String {
    let dkg = if p.members_with_keys < p.members {
        format!(
            "DKG {}/{} members with keys, ",
            p.members_with_keys, p.members
        )
    } else {
        String::new()
    };
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
            line.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(|kb| format!(", RSS {:.2} GB", kb / 1e6))
        .unwrap_or_default();
    format!(
        "{dkg}virtual {:.1} s, {} events pending{rss}",
        p.virtual_time_s, p.pending_events
    )
}
