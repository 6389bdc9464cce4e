//! `sbft-beacon compare`: the simulator and a real network over the emulated WAN
//! (`localnet` with the same `--regions`/`--latency-ms` options), on the same
//! topology, placement, protocol parameters and seed, in one report with the
//! relative error of each figure, `(sim - real) / real`.
//!
//! The real network runs first; the simulator then gets the `[protocol]` table
//! its nodes loaded (read back from `node-0/node.toml`), so both build their
//! replica config with `ReplicaConfig::from_params` from the same parameters.

use anyhow::{bail, Context as _, Result};
use clap::Args;
use consensus::ProtocolParams;
use node::config::NodeConfig;
use serde_json::{json, Value};
use sim::config::Latency;
use sim::SimConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Options of `compare`.
#[derive(Args)]
pub(crate) struct CompareArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 4)]
    nodes: u32,
    /// Beacon rounds.
    #[arg(long, default_value_t = 50)]
    rounds: u64,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Protocol parameters of both runs: the `[protocol]` table of this file (a
    /// simulator scenario, a `node.toml`); default: the nodes' defaults.
    #[arg(long, value_name = "FILE")]
    protocol: Option<PathBuf>,
    /// Where beacon shares go in both runs (`collectors` or `everyone`), over
    /// the `--protocol` file's.
    #[arg(long, value_name = "TO")]
    beacon_shares: Option<consensus::BeaconShares>,
    /// The WAN: the same options as `localnet`.
    #[command(flatten)]
    wan: crate::wan::WanArgs,
    /// Cores the simulated nodes share, as the real ones share this machine's
    /// (default: this machine's; 0: a core per node).
    #[arg(long, value_name = "N")]
    host_cores: Option<u32>,
    /// The simulator's cost model: a file written by `bench calibrate`
    /// (default: `configs/cost-model.toml`, built in).
    #[arg(long, value_name = "FILE", conflicts_with = "calibrate")]
    cost_model: Option<PathBuf>,
    /// Fit the cost model to this machine first, as `bench calibrate` does,
    /// and simulate with it (the real nodes run on this machine's CPU).
    #[arg(long)]
    calibrate: bool,
    /// Print one JSON object `{"sim", "real", "error"}` instead of the table.
    #[arg(long)]
    json: bool,
    /// Draw the two CDFs of per-round median beacon latency, overlaid, into
    /// this file (.svg or .png).
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

/// MSM sizes `compare --calibrate` measures up to (log2): enough for the
/// aggregations of a local network.
const CALIBRATE_MAX_LOG_MSM: u32 = 8;

/// The simulator's scenario for what `args` ran on real nodes: the nodes'
/// `[protocol]` table, no client load, the same latency model and placement.
fn scenario(args: &CompareArgs, protocol: ProtocolParams) -> Result<SimConfig> {
    let mut cfg = SimConfig::load("default")?;
    cfg.name = "compare".into();
    cfg.nodes = args.nodes;
    cfg.rounds = args.rounds;
    cfg.seed = args.seed;
    cfg.scheme = beacon::SchemeId::PedersenBlsChained;
    cfg.protocol = protocol;
    cfg.load.tx_per_second = 0.0;
    let wan = &args.wan;
    cfg.network.latency = match &wan.regions {
        Some(path) => {
            let path = path
                .canonicalize()
                .with_context(|| format!("reading {}", path.display()))?;
            cfg.base_dir = path.parent().map(|d| d.to_path_buf());
            let file = path
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .context("a region table file")?;
            Latency::Regions { file }
        }
        None => Latency::Constant {
            ms: wan.latency_ms.unwrap_or(0.0),
        },
    };
    cfg.network.jitter_ms = wan.jitter_ms;
    cfg.network.bandwidth_mbps = wan.bandwidth_mbps;
    // The real nodes all run on this machine and share its cores.
    cfg.network.host_cores = args.host_cores.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
    });
    // Its links are the emulator's relays, which run on those cores too.
    cfg.network.relays_on_host = wan.enabled() && cfg.network.host_cores > 0;
    cfg.validate()?;
    Ok(cfg)
}

/// Runs `localnet` over the emulated WAN in `dir` and returns its `--json`
/// report and the protocol parameters its nodes ran with.
fn real(args: &CompareArgs, dir: &Path) -> Result<(Value, ProtocolParams)> {
    let exe = std::env::current_exe().context("locating sbft-beacon")?;
    let mut command = Command::new(exe);
    command
        .arg("localnet")
        .arg("--dir")
        .arg(dir)
        .args(["--json", "--nodes"])
        .arg(args.nodes.to_string())
        .arg("--rounds")
        .arg(args.rounds.to_string());
    if let Some(file) = &args.protocol {
        command.arg("--protocol").arg(file);
    }
    if let Some(shares) = args.beacon_shares {
        command.arg("--beacon-shares").arg(shares.name());
    }
    let wan = &args.wan;
    if let Some(r) = &wan.regions {
        command.arg("--regions").arg(r);
    }
    if let Some(ms) = wan.latency_ms {
        command.arg("--latency-ms").arg(ms.to_string());
    }
    command
        .arg("--jitter-ms")
        .arg(wan.jitter_ms.to_string())
        .arg("--bandwidth-mbps")
        .arg(wan.bandwidth_mbps.to_string());
    let out = command.output().context("running localnet")?;
    if !out.status.success() {
        bail!(
            "localnet failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("localnet printed no JSON report")?;
    let report = serde_json::from_str(line).context("parsing localnet's report")?;
    let node = NodeConfig::load(&dir.join("node-0").join("node.toml"))?;
    Ok((report, node.protocol))
}

/// `(sim - real) / real`, or null where `real` is zero or missing.
fn error(sim: Option<f64>, real: Option<f64>) -> Value {
    match (sim, real) {
        (Some(s), Some(r)) if r != 0.0 => json!((s - r) / r),
        _ => Value::Null,
    }
}

/// One figure both reports have.
struct Figure {
    /// Its line in the table.
    label: String,
    /// Its key in `error`.
    key: String,
    /// Where it is in each report (a JSON pointer).
    pointer: String,
}

/// The figures compared: beacon and commit latency percentiles, messages per
/// round, the fast-path ratio.
fn figures() -> Vec<Figure> {
    let mut out = Vec::new();
    for (what, field) in [
        ("beacon", "beacon_latency_ms"),
        ("commit", "commit_latency_ms"),
    ] {
        for q in ["p50", "p90", "p99", "max"] {
            out.push(Figure {
                label: format!("{what} latency {q} (ms)"),
                key: format!("{what}_{q}"),
                pointer: format!("/{field}/{q}"),
            });
        }
    }
    for field in ["messages_per_round", "fast_path_ratio"] {
        out.push(Figure {
            label: field.replace('_', " "),
            key: field.into(),
            pointer: format!("/{field}"),
        });
    }
    out
}

/// Runs `compare`.
pub(crate) fn run(args: CompareArgs) -> Result<()> {
    if !args.wan.enabled() {
        bail!("compare needs a WAN: --regions FILE or --latency-ms X");
    }
    let dir = tempfile::tempdir().context("creating a temporary directory")?;
    let cost_model = if args.calibrate {
        let path = dir.path().join("cost-model.toml");
        let model = crate::calibrate::fit_cost_model(CALIBRATE_MAX_LOG_MSM)?;
        std::fs::write(&path, crate::calibrate::cost_model_file(&model))
            .with_context(|| format!("writing {}", path.display()))?;
        Some(path)
    } else {
        args.cost_model
            .as_ref()
            .map(|p| {
                p.canonicalize()
                    .with_context(|| format!("reading {}", p.display()))
            })
            .transpose()?
    };
    // A model that does not parse is an error before the real network runs.
    if let Some(path) = &cost_model {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        sim::cost_model::CostModel::from_toml(&text)
            .with_context(|| format!("{} is not a cost model", path.display()))?;
    }
    let (real, protocol) = real(&args, &dir.path().join("net"))?;
    let mut cfg = scenario(&args, protocol)?;
    if let Some(path) = &cost_model {
        cfg.cost_model = path.display().to_string();
        cfg.validate()?;
    }
    let (report, _) = sim::run(&cfg, None)?;
    let sim = serde_json::to_value(&report)?;
    let figures = figures();
    let value = |report: &Value, pointer: &str| report.pointer(pointer).and_then(Value::as_f64);
    let mut errors = serde_json::Map::new();
    for f in &figures {
        errors.insert(
            f.key.clone(),
            error(value(&sim, &f.pointer), value(&real, &f.pointer)),
        );
    }
    let model = match (&cost_model, args.calibrate) {
        (_, true) => "calibrated now".to_string(),
        (Some(p), _) => p.display().to_string(),
        (None, _) => "configs/cost-model.toml".to_string(),
    };
    let out = json!({ "sim": sim, "real": real, "error": errors, "cost_model": model });
    if let Some(path) = &args.plot {
        let sim_rounds = crate::plot::beacon_medians(&report.per_round);
        let real_rounds: Vec<f64> = real["per_round_beacon_p50_ms"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let title = format!(
            "{} nodes, {} rounds: simulated vs real",
            args.nodes, args.rounds
        );
        crate::plot::draw_cdfs(
            &title,
            &[
                ("simulated", sim_rounds),
                ("emulated real network", real_rounds),
            ],
            path,
        )?;
    }
    if args.json {
        println!("{out}");
        return Ok(());
    }
    println!(
        "{} nodes, {} rounds; simulated (cost model: {model}) vs emulated real network:",
        args.nodes, args.rounds
    );
    println!("{:>22} {:>10} {:>10} {:>8}", "", "sim", "real", "error");
    for f in &figures {
        let e = out["error"][f.key.as_str()]
            .as_f64()
            .map_or("-".to_string(), |e| format!("{:+.1}%", e * 100.0));
        let (s, r) = (value(&sim, &f.pointer), value(&real, &f.pointer));
        println!(
            "{:>22} {:>10.2} {:>10.2} {e:>8}",
            f.label,
            s.unwrap_or(f64::NAN),
            r.unwrap_or(f64::NAN)
        );
    }
    Ok(())
}
