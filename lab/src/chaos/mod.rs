//! `sbft-beacon chaos`: a local network of real node processes (over the
//! userspace WAN emulator) under faults drawn from a seed, for a set
//! duration: SIGKILLs and restarts from disk (during the DKG and during
//! changes of members too), partitions, clock skew, slow links and a full
//! disk. Every minute and at the end it checks that the nodes hold one chain
//! that verifies from round 1 under the group key, that no round has two
//! beacons or blocks on any node (killed ones read back from their stores),
//! and that no member signed two votes for one height and view (read back
//! from the votes they persisted); after the last fault heals, every node
//! must be back at the latest round within 10 s.
//!
//! Files: here the arguments and the run; `schedule.rs` the faults drawn
//! from the seed; `network.rs` the node processes and what they hold;
//! `checks.rs` the checks; `report.rs` the report. The network itself is
//! `localnet`'s: its configs, processes and WAN emulator.

mod checks;
mod network;
mod report;
mod schedule;

use crate::localnet::{fast_path_timeout_ms, view_change_timeout_ms, write_configs};
use crate::wan::{LinkEmulator, WanArgs, WanModel};
use anyhow::{bail, Context as _, Result};
use beacon::{ChainInfo, ChainInfoJson, Scheme, SchemeId};
use checks::{RoundLedger, VoteLedger};
use clap::Args;
use network::Node;
use report::{Recovery, Report};
use schedule::{Fault, FaultKind, ScheduleParams};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A node must be back at the latest round this soon after the last fault
/// heals.
const FINAL_RECOVERY: Duration = Duration::from_secs(10);
/// A change of members that has not completed after this long is a violation.
const CHANGE_DEADLINE: Duration = Duration::from_secs(120);
/// A node that left and still keeps what it dealt this long after is a
/// violation (it keeps it 32 phase lengths: under 3 minutes at 7 nodes).
const LEFT_SERVING_DEADLINE: Duration = Duration::from_secs(600);

/// Options of `chaos`.
#[derive(Args)]
pub(crate) struct ChaosArgs {
    /// Genesis members (two more nodes are the spares that changes of
    /// members add in turn).
    #[arg(long, default_value_t = 7)]
    nodes: u32,
    /// How long faults are injected (e.g. 120s, 60m, 1h).
    #[arg(long, value_parser = parse_duration)]
    duration: Duration,
    /// The seed the fault schedule is drawn from (same seed, same schedule).
    #[arg(long)]
    seed: u64,
    /// Region table of the emulated WAN (nodes placed round-robin).
    #[arg(long, value_name = "FILE", conflicts_with = "latency_ms")]
    regions: Option<PathBuf>,
    /// The same one-way latency on every emulated link (ms; the default
    /// without `--regions`: 20).
    #[arg(long, value_name = "MS")]
    latency_ms: Option<f64>,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
    /// Directory for identities, configs, data and logs (default: a
    /// temporary directory, kept when the run fails).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Mean seconds between two random faults.
    #[arg(long, default_value_t = 2.5)]
    fault_every_s: f64,
    /// Seconds between two changes of members (0: none).
    #[arg(long, default_value_t = 90)]
    change_every_s: u64,
    /// Beacon period (seconds; a paced chain, so that clock skew matters).
    #[arg(long, default_value_t = 1)]
    period: u32,
    /// Seconds between two checks of the chains along the way.
    #[arg(long, default_value_t = 60)]
    check_every_s: u64,
}

fn parse_duration(s: &str) -> Result<Duration> {
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    crate::tle_cmd::parse_duration(s, 0).map(Duration::from_secs)
}

/// Runs `chaos`; an error (after the report, the seed and the schedule)
/// when a check failed.
pub(crate) fn run(args: ChaosArgs) -> Result<()> {
    if args.nodes < 4 {
        bail!("--nodes must be at least 4 (f >= 1)");
    }
    if args.fault_every_s.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater)
        || args.period == 0
        || args.check_every_s == 0
    {
        bail!("--fault-every-s, --period and --check-every-s must be positive");
    }
    let scheme = SchemeId::PedersenBlsChained;
    with_bls_scheme!(scheme, run_scheme, args)
}

fn run_scheme<S: Scheme>(args: ChaosArgs) -> Result<()> {
    let (dir, temp) = match &args.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            (d.clone(), None)
        }
        None => {
            let t = tempfile::tempdir().context("creating a temporary directory")?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let mut protocol = consensus::ProtocolParams {
        period: beacon::Period::from_secs(args.period),
        ..Default::default()
    };
    let parties = args.nodes + schedule::SPARES;
    protocol.view_change_timeout_ms = view_change_timeout_ms(parties);
    protocol.fast_path_timeout_ms = fast_path_timeout_ms(parties);
    let max_skew_ms = consensus::config::DEFAULT_CLOCK_SKEW_US / 1000;
    let faults = schedule::draw(&ScheduleParams {
        seed: args.seed,
        members: args.nodes,
        duration_ms: args.duration.as_millis() as u64,
        mean_gap_ms: (args.fault_every_s * 1000.0) as u64,
        change_every_ms: args.change_every_s * 1000,
        max_skew_ms,
    });
    std::fs::write(
        dir.join("schedule.json"),
        serde_json::to_string_pretty(&faults)?,
    )?;
    let configs = write_configs(&dir, parties, args.nodes, S::ID, &protocol, 0)?;
    let wan_args = WanArgs {
        regions: args.regions.clone(),
        latency_ms: args.latency_ms.or(args.regions.is_none().then_some(20.0)),
        ..WanArgs::default()
    };
    let model = WanModel::from_args(&wan_args, parties)?.context("no WAN model")?;
    let paths: Vec<PathBuf> = configs.iter().map(|(p, _)| p.clone()).collect();
    let wan = LinkEmulator::in_front_of(model, &paths)?;
    let nodes: Vec<Node> = configs
        .iter()
        .enumerate()
        .map(|(i, (p, h))| Node::new(i as u32, p.clone(), h.clone()))
        .collect();
    if !args.json {
        eprintln!(
            "chaos: {} members and {} spares in {}, seed {}, {} faults over {} s",
            args.nodes,
            schedule::SPARES,
            dir.display(),
            args.seed,
            faults.len(),
            args.duration.as_secs()
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut run = Run {
        nodes,
        wan,
        faults,
        members: (0..args.nodes).collect(),
        violations: Vec::new(),
        applied: BTreeMap::new(),
        injected: BTreeSet::new(),
        skipped: BTreeMap::new(),
        recoveries: Vec::new(),
        pending_recoveries: Vec::new(),
        change: None,
        deferred_change: None,
        changes_done: 0,
        rounds: None,
        votes: VoteLedger::default(),
        client: node_cli::http_client::local_client(Duration::from_secs(5))?,
        started: Instant::now(),
        json: args.json,
        rounds_lost: 0,
    };
    let outcome = runtime.block_on(run.drive::<S>(&args));
    for node in &mut run.nodes {
        node.stop();
    }
    let final_recovery_s = outcome?;
    run.read_every_store::<S>();
    let report = run.report(&args, final_recovery_s, &dir);
    report.print(args.json);
    if !report.violations.is_empty() {
        let kept = temp.map(|t| t.keep()).unwrap_or(dir);
        eprintln!(
            "chaos FAILED with seed {} ({} violations); files in {}; the schedule (replayed by the same seed):",
            args.seed,
            report.violations.len(),
            kept.display()
        );
        for f in &run.faults {
            eprintln!("  {}", report::describe(f));
        }
        bail!("chaos run with seed {} found violations", args.seed);
    }
    Ok(())
}

/// A change of members under way.
struct Change {
    leaver: u32,
    joiner: u32,
    new_members: Vec<u32>,
    /// The epoch before it.
    epoch_before: u64,
    proposed: Instant,
    /// Old members whose operators proposed it (a node keeps an accepted
    /// proposal across restarts, so each is asked until it accepts once).
    accepted: BTreeSet<u32>,
    last_try: Instant,
    switched: bool,
    late: bool,
}

/// A chaos run in progress.
struct Run {
    nodes: Vec<Node>,
    wan: LinkEmulator,
    faults: Vec<Fault>,
    /// The members, as of the last change proposed.
    members: BTreeSet<u32>,
    /// A change of members that waits for its joiner, a node that left
    /// before, to stop serving what it dealt then.
    deferred_change: Option<usize>,
    violations: Vec<String>,
    applied: BTreeMap<FaultKind, u64>,
    /// Faults injected and not healed yet.
    injected: BTreeSet<usize>,
    skipped: BTreeMap<FaultKind, u64>,
    /// Seconds from each heal to the node being back at the latest round.
    recoveries: Vec<f64>,
    pending_recoveries: Vec<Recovery>,
    change: Option<Change>,
    changes_done: u64,
    rounds: Option<RoundLedger>,
    votes: VoteLedger,
    client: reqwest::Client,
    started: Instant,
    json: bool,
    /// Rounds due by the end but not produced.
    rounds_lost: u64,
}

/// A step of the schedule: a fault starts or heals.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Heal(usize),
    Start(usize),
}

impl Run {
    /// Starts the genesis members, carries out the schedule with the checks
    /// along the way, then waits for the last recoveries; returns the
    /// seconds from the last heal to every node back at the latest round.
    async fn drive<S: Scheme>(&mut self, args: &ChaosArgs) -> Result<f64> {
        for i in 0..args.nodes as usize {
            self.nodes[i].start()?;
        }
        let mut steps: Vec<(u64, Step)> = Vec::new();
        for (i, f) in self.faults.iter().enumerate() {
            steps.push((f.at_ms, Step::Start(i)));
            if f.kind != FaultKind::MemberChange {
                steps.push((f.heal_ms, Step::Heal(i)));
            }
        }
        steps.sort();
        let mut next = 0;
        let duration = args.duration;
        let check_every = Duration::from_secs(args.check_every_s);
        let mut last_check = Instant::now();
        let mut last_poll = Instant::now();
        let mut last_heal: Option<(Instant, u64)> = None;
        let mut final_s: Option<f64> = None;
        while self.started.elapsed() < duration {
            let now_ms = self.started.elapsed().as_millis() as u64;
            while next < steps.len() && steps[next].0 <= now_ms {
                let step = steps[next].1;
                next += 1;
                match step {
                    Step::Start(i) => self.start_fault::<S>(i).await,
                    Step::Heal(i) => {
                        self.heal_fault::<S>(i).await;
                        let target = self.highest_latest();
                        last_heal = Some((Instant::now(), target));
                    }
                }
            }
            if last_poll.elapsed() >= Duration::from_secs(1) {
                last_poll = Instant::now();
                self.poll::<S>().await;
            }
            if last_check.elapsed() >= check_every {
                last_check = Instant::now();
                self.check().await;
            }
            // Every fault healed: how soon is every node back?
            if let (true, None, Some((healed, target))) = (next == steps.len(), final_s, last_heal)
            {
                if self.all_back(target).await.is_empty() {
                    final_s = Some(healed.elapsed().as_secs_f64());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The last change completes, then every node must be back.
        let wait_change = Instant::now();
        while self.change.is_some() && wait_change.elapsed() < CHANGE_DEADLINE {
            self.poll::<S>().await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let (healed, target) = last_heal.unwrap_or((self.started, 1));
        let final_s = loop {
            if let Some(s) = final_s {
                break s;
            }
            let behind = self.all_back(target).await;
            if behind.is_empty() {
                break healed.elapsed().as_secs_f64();
            }
            if healed.elapsed() > 3 * FINAL_RECOVERY {
                self.violations.push(format!(
                    "nodes {behind:?} are not back at round {target} {} s after the last fault healed",
                    healed.elapsed().as_secs()
                ));
                break healed.elapsed().as_secs_f64();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if final_s > FINAL_RECOVERY.as_secs_f64() {
            self.violations.push(format!(
                "the nodes were back at the latest round {final_s:.1} s after the last fault healed (more than {} s)",
                FINAL_RECOVERY.as_secs()
            ));
        }
        self.check().await;
        if let Some(rounds) = &self.rounds {
            let info = rounds.info();
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            let due = info.schedule().rounds_due(i128::from(now));
            self.rounds_lost = due.saturating_sub(self.highest_latest());
        }
        let age = self.started.elapsed();
        for n in &mut self.nodes {
            n.sample_rss(age, true);
        }
        Ok(final_s)
    }

    /// The running members that do not serve round `target` yet (asked now).
    async fn all_back(&mut self, target: u64) -> Vec<usize> {
        let mut behind = Vec::new();
        for i in self.running_members() {
            if self.nodes[i].poll_latest(&self.client).await < target {
                behind.push(i);
            }
        }
        behind
    }

    /// The running nodes that are members (by the last change proposed).
    fn running_members(&self) -> Vec<usize> {
        self.members
            .iter()
            .map(|&m| m as usize)
            .filter(|&m| self.nodes[m].running())
            .collect()
    }

    /// The highest round a node served when last asked.
    fn highest_latest(&self) -> u64 {
        self.nodes.iter().map(|n| n.latest).max().unwrap_or(0)
    }

    /// Counts fault `i` as applied, or skipped (a target not running).
    fn count(&mut self, i: usize, applied: bool) {
        let kind = self.faults[i].kind;
        *if applied {
            self.applied.entry(kind).or_default()
        } else {
            self.skipped.entry(kind).or_default()
        } += 1;
    }

    fn record(&mut self, found: Vec<String>) {
        for v in found {
            if !self.json {
                eprintln!("violation: {v}");
            }
            self.violations.push(v);
        }
    }

    /// Reads back node `i`'s store (it is down) into the checks.
    fn read_store<S: Scheme>(&mut self, i: usize) {
        let Some(rounds) = self.rounds.as_mut() else {
            return;
        };
        let info = rounds.info().clone();
        match self.nodes[i].read_store::<S>(&info, rounds, &mut self.votes) {
            Ok(found) => self.record(found),
            Err(e) => self.record(vec![format!("node {i}'s store cannot be read back: {e:#}")]),
        }
    }

    /// Kills node `i` and reads back its store.
    fn kill<S: Scheme>(&mut self, i: usize) {
        self.nodes[i].kill();
        self.pending_recoveries.retain(|r| r.node != i);
        self.read_store::<S>(i);
    }

    /// Restarts node `i` and expects it back at the latest round.
    fn restart(&mut self, i: usize) {
        if let Err(e) = self.nodes[i].start() {
            self.violations
                .push(format!("node {i} cannot restart: {e:#}"));
        }
    }

    /// Expects the nodes of fault `i` back at the latest round from now on.
    fn expect_recovery(&mut self, i: usize) {
        let target = self.highest_latest();
        for &n in &self.faults[i].nodes.clone() {
            let n = n as usize;
            self.pending_recoveries.retain(|r| r.node != n);
            if self.members.contains(&(n as u32)) {
                self.pending_recoveries.push(Recovery {
                    node: n,
                    healed: Instant::now(),
                    target,
                });
            }
        }
    }

    async fn start_fault<S: Scheme>(&mut self, i: usize) {
        let fault = self.faults[i].clone();
        let targets: Vec<usize> = fault.nodes.iter().map(|&n| n as usize).collect();
        if fault.kind == FaultKind::MemberChange {
            self.propose_change(i).await;
            return;
        }
        if targets.iter().any(|&n| !self.nodes[n].running()) {
            self.count(i, false);
            return;
        }
        self.count(i, true);
        self.injected.insert(i);
        match fault.kind {
            FaultKind::Kill => {
                for n in targets {
                    self.kill::<S>(n);
                }
            }
            FaultKind::Partition => self.cut(&targets, true),
            FaultKind::ClockSkew => {
                for n in targets {
                    self.kill::<S>(n);
                    self.nodes[n].clock_offset_ms = fault.amount_ms;
                    self.restart(n);
                }
            }
            FaultKind::SlowLink => {
                for n in targets {
                    self.slow(n, Duration::from_millis(fault.amount_ms.unsigned_abs()));
                }
            }
            FaultKind::DiskFull => {
                for n in targets {
                    if let Err(e) = self.nodes[n].fill_disk(true) {
                        self.violations.push(format!("{e:#}"));
                    }
                }
            }
            FaultKind::MemberChange => {}
        }
    }

    async fn heal_fault<S: Scheme>(&mut self, i: usize) {
        if !self.injected.remove(&i) {
            return;
        }
        let fault = self.faults[i].clone();
        let targets: Vec<usize> = fault.nodes.iter().map(|&n| n as usize).collect();
        match fault.kind {
            FaultKind::Kill => {
                for &n in &targets {
                    if self.nodes[n].killed {
                        self.restart(n);
                    }
                }
            }
            FaultKind::Partition => self.cut(&targets, false),
            FaultKind::ClockSkew => {
                for &n in &targets {
                    if self.nodes[n].clock_offset_ms != 0 && self.nodes[n].running() {
                        self.kill::<S>(n);
                        self.nodes[n].clock_offset_ms = 0;
                        self.restart(n);
                    }
                }
            }
            FaultKind::SlowLink => {
                for &n in &targets {
                    self.slow(n, Duration::ZERO);
                }
            }
            FaultKind::DiskFull => {
                for &n in &targets {
                    if self.nodes[n].running() {
                        if let Err(e) = self.nodes[n].fill_disk(false) {
                            self.violations.push(format!("{e:#}"));
                        }
                    }
                }
            }
            FaultKind::MemberChange => return,
        }
        if fault.kind.takes_nodes_out() {
            self.expect_recovery(i);
        }
    }

    /// Cuts (or heals) every link between `group` and the other nodes.
    fn cut(&self, group: &[usize], cut: bool) {
        for &a in group {
            for b in (0..self.nodes.len()).filter(|b| !group.contains(b)) {
                self.wan.set_cut(a, b, cut);
                self.wan.set_cut(b, a, cut);
            }
        }
    }

    /// Sets the extra delay of every link from and to node `n`.
    fn slow(&self, n: usize, extra: Duration) {
        for other in (0..self.nodes.len()).filter(|&o| o != n) {
            self.wan.set_extra_delay(n, other, extra);
            self.wan.set_extra_delay(other, n, extra);
        }
    }

    /// Fault `i`, a change of members: the joiner starts (`run --join`,
    /// afresh), and the old members' operators propose the new member list.
    async fn propose_change(&mut self, i: usize) {
        if let Some(earlier) = self.deferred_change.take() {
            self.count(earlier, false);
            self.violations.push(format!(
                "the change of members at {} s still waited for node {} to stop serving its deals at the next change",
                self.faults[earlier].at_ms / 1000,
                self.faults[earlier].nodes[1]
            ));
        }
        if self.nodes[self.faults[i].nodes[1] as usize]
            .left_at
            .is_some()
        {
            // Its joiner left before and still keeps what it dealt then: it
            // is wiped only once that is erased.
            self.deferred_change = Some(i);
            return;
        }
        if self.change.is_some() {
            self.count(i, false);
            self.violations.push(format!(
                "the change of members before the one at {} s has not completed",
                self.faults[i].at_ms / 1000
            ));
            return;
        }
        let (leaver, joiner) = (self.faults[i].nodes[0], self.faults[i].nodes[1]);
        let mut epoch_before = 0;
        for &m in &self.members {
            if let Some(e) = epoch_of(&self.client, &self.nodes[m as usize]).await {
                epoch_before = epoch_before.max(e.0);
            }
        }
        let node = &mut self.nodes[joiner as usize];
        if let Err(e) = node.wipe().and_then(|()| {
            node.join = true;
            node.clock_offset_ms = 0;
            node.start()
        }) {
            self.violations
                .push(format!("joiner {joiner} cannot start: {e:#}"));
            return;
        }
        let mut new_members: Vec<u32> = self
            .members
            .iter()
            .copied()
            .filter(|&m| m != leaver)
            .collect();
        new_members.push(joiner);
        new_members.sort_unstable();
        self.count(i, true);
        self.change = Some(Change {
            leaver,
            joiner,
            new_members,
            epoch_before,
            proposed: Instant::now(),
            accepted: BTreeSet::new(),
            last_try: Instant::now() - Duration::from_secs(10),
            switched: false,
            late: false,
        });
        self.advance_change().await;
    }

    /// Moves the change under way on: proposals to the old members that have
    /// not taken it yet, the switch, the leaver's retirement.
    async fn advance_change(&mut self) {
        let Some(mut change) = self.change.take() else {
            return;
        };
        if !change.switched && change.last_try.elapsed() >= Duration::from_secs(2) {
            change.last_try = Instant::now();
            let members: Result<Vec<String>> = change
                .new_members
                .iter()
                .map(|&m| {
                    let cfg = node::config::NodeConfig::load(&self.nodes[m as usize].config)?;
                    Ok(cfg.me().id.to_string())
                })
                .collect();
            let request = node::http::ReshareRequest {
                members: members.unwrap_or_default(),
                c: None,
                beacon_threshold: 0,
            };
            for &m in self.members.iter() {
                let n = &self.nodes[m as usize];
                if change.accepted.contains(&m) || !n.running() {
                    continue;
                }
                if node::http::post_reshare(&self.client, &n.http, &request)
                    .await
                    .is_ok()
                {
                    change.accepted.insert(m);
                }
            }
        }
        if !change.switched {
            let joiner = &self.nodes[change.joiner as usize];
            if let Some((epoch, status, _)) = epoch_of(&self.client, joiner).await {
                if epoch > change.epoch_before && status == "member" {
                    change.switched = true;
                    self.members = change.new_members.iter().copied().collect();
                }
            }
        }
        if change.switched {
            let leaver = change.leaver as usize;
            let retired = match epoch_of(&self.client, &self.nodes[leaver]).await {
                Some((epoch, status, _)) => epoch > change.epoch_before && status == "retired",
                None => !self.nodes[leaver].running() && !self.nodes[leaver].killed,
            };
            if retired {
                // It runs on while it keeps what it dealt: a member that
                // missed the switch needs every dealer the chain named.
                self.nodes[leaver].left_at = Some(Instant::now());
                self.changes_done += 1;
                return;
            }
        }
        if !change.late && change.proposed.elapsed() > CHANGE_DEADLINE {
            change.late = true;
            self.violations.push(format!(
                "the change of members (node {} leaves, node {} joins) has not completed {} s after the proposals",
                change.leaver,
                change.joiner,
                CHANGE_DEADLINE.as_secs()
            ));
        }
        self.change = Some(change);
    }

    /// Once a second: the nodes' latest rounds, exits nobody asked for,
    /// recoveries, the change under way, memory.
    async fn poll<S: Scheme>(&mut self) {
        if self.rounds.is_none() {
            self.rounds = self.chain_info().await.map(RoundLedger::new);
        }
        for i in 0..self.nodes.len() {
            if let Some(status) = self.nodes[i].exited() {
                // A full disk included: a node holds what a failed write
                // must precede and goes on once the disk takes writes.
                let disk_full = if self.nodes[i].disk_full {
                    ", its disk full"
                } else {
                    ""
                };
                self.read_store::<S>(i);
                self.violations.push(format!(
                    "node {i} exited on its own ({status}{disk_full}) {:.0} s into the run; its log: {}",
                    self.started.elapsed().as_secs_f64(),
                    self.nodes[i].config.with_file_name("node.log").display()
                ));
                self.restart(i);
            }
            self.nodes[i].poll_latest(&self.client).await;
            let age = self.started.elapsed();
            self.nodes[i].sample_rss(age, false);
        }
        let nodes = &self.nodes;
        let mut done = Vec::new();
        self.pending_recoveries.retain(|r| {
            if nodes[r.node].latest >= r.target {
                done.push(r.healed.elapsed().as_secs_f64());
                false
            } else {
                true
            }
        });
        self.recoveries.extend(done);
        self.advance_change().await;
        self.stop_those_done_serving::<S>().await;
        if let Some(i) = self.deferred_change {
            if self.nodes[self.faults[i].nodes[1] as usize]
                .left_at
                .is_none()
            {
                self.deferred_change = None;
                self.propose_change(i).await;
            }
        }
    }

    /// Stops each node that left once it keeps nothing it dealt
    /// (`GET /epoch`'s `retained_deals` empty), as its operator would; one
    /// that keeps it too long is a violation, and stopped.
    async fn stop_those_done_serving<S: Scheme>(&mut self) {
        for i in 0..self.nodes.len() {
            let Some(left_at) = self.nodes[i].left_at else {
                continue;
            };
            let done =
                match crate::localnet::retained_deals_at(&self.client, &self.nodes[i].http).await {
                    Some(deals) => deals.is_empty(),
                    // Down (a restart): it keeps its deals on disk.
                    None => !self.nodes[i].running() && !self.nodes[i].killed,
                };
            let late = left_at.elapsed() > LEFT_SERVING_DEADLINE;
            if late {
                self.violations.push(format!(
                    "node {i} still keeps what it dealt {} s after it left",
                    left_at.elapsed().as_secs()
                ));
            }
            if done || late {
                self.nodes[i].stop();
                self.read_store::<S>(i);
                self.nodes[i].killed = false;
                self.nodes[i].join = false;
                self.nodes[i].left_at = None;
            }
        }
    }

    /// The chain's `/info`, from the first member that answers.
    async fn chain_info(&self) -> Option<ChainInfo> {
        for n in self.nodes.iter().filter(|n| n.running() && n.latest >= 1) {
            if let Ok(v) = node::http::get_json(&self.client, &format!("{}/info", n.http)).await {
                if let Ok(info) = serde_json::from_value::<ChainInfoJson>(v) {
                    return info.to_info().ok();
                }
            }
        }
        None
    }

    /// The check along the way: every running node's new rounds into the
    /// ledger, and the chain verified as far as it is contiguous.
    async fn check(&mut self) {
        let Some(mut rounds) = self.rounds.take() else {
            return;
        };
        let mut found = Vec::new();
        for n in &mut self.nodes {
            found.extend(n.check_served(&self.client, &mut rounds).await);
        }
        found.extend(rounds.verify());
        self.rounds = Some(rounds);
        self.record(found);
    }

    /// Every node's store, read back after the nodes stopped.
    fn read_every_store<S: Scheme>(&mut self) {
        for i in 0..self.nodes.len() {
            self.read_store::<S>(i);
        }
        if let Some(rounds) = self.rounds.as_mut() {
            let found: Vec<String> = rounds.verify().into_iter().collect();
            self.record(found);
        }
    }

    fn report(&self, args: &ChaosArgs, final_recovery_s: f64, dir: &std::path::Path) -> Report {
        Report::new(self, args, final_recovery_s, dir)
    }
}

/// `GET /epoch` of a node: epoch, status, first height (none while it cannot
/// answer).
async fn epoch_of(client: &reqwest::Client, node: &Node) -> Option<(u64, String, u64)> {
    if !node.running() {
        return None;
    }
    crate::localnet::epoch_at(client, &node.http).await
}
