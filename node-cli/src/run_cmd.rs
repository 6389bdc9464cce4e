//! `sbft-beacon run --config node.toml`: loads and validates the config, sets up
//! logging and the tokio runtime, and runs the node until SIGINT or SIGTERM
//! (which end it with status 0 in any phase, see [`node::runtime`]).

use anyhow::{Context, Result};
use beacon::Scheme;
use clap::Args;
use node::config::{NodeConfig, Validated};
use std::path::PathBuf;

/// How long a stopping node waits for its runtime's blocking tasks.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_millis(200);

/// Options of `run`.
#[derive(Args)]
pub struct RunArgs {
    /// The node's config file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Make this node Byzantine, to test the others' defences (never in
    /// production): equivocating-primary, bad-shares, withhold-shares,
    /// silent-collector, conflicting-view-change, silent (its replica), or
    /// complaint-versions, replay-old-session, false-settled, bad-result-vote
    /// (its DKG).
    #[arg(long, value_name = "BEHAVIOUR")]
    byzantine: Option<consensus::Behaviour>,
    /// Worker threads of the runtime (1: everything on the main thread).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Join the running network: start without key material and wait for the
    /// members to reshare to a member list that includes this node (a node
    /// after the `[network] members` genesis members always joins; a genesis
    /// member that lost its keys rejoins this way).
    #[arg(long)]
    join: bool,
}

/// Installs the log subscriber: `RUST_LOG` or `info` (libp2p at `warn`), to
/// stderr; a line that cannot be written is dropped.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,libp2p=warn,libp2p_stream=warn")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A log line that cannot be written (a full disk) is lost, never a
        // panic: the subscriber would report it with `eprintln!`, which
        // panics when stderr fails too.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

fn node<S: Scheme>(args: (Validated, usize, Option<consensus::Behaviour>, bool)) -> Result<()> {
    let (cfg, threads, behaviour, join) = args;
    // One thread by default: a node's work is a sequence of short CPU bursts, and
    // several nodes often share a machine's cores (localnet).
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    // Frames are decoded on the blocking pool (never on the protocol thread); a
    // few threads are enough, and bound the CPU that decoding can take.
    let runtime = builder
        .max_blocking_threads(4)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let result = runtime.block_on(node::runtime::run::<S>(cfg, behaviour, join));
    // Dropping a runtime waits for its blocking tasks without a bound; a
    // stopping node gives them a moment (frames being decoded are not needed).
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    result?;
    Ok(())
}

/// Runs `run`.
pub fn run(args: RunArgs) -> Result<()> {
    init_logging();
    let cfg = NodeConfig::load(&args.config)?;
    with_bls_scheme!(
        cfg.scheme,
        node,
        (cfg, args.threads, args.byzantine, args.join)
    )
}
