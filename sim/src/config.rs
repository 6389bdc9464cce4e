//! Scenario configuration (TOML): network, faults, protocol parameters, cost model.
//!
//! The `[protocol]` table is [`consensus::ProtocolParams`], the same table a
//! node's `node.toml` has, turned into the replicas' config by the same
//! function ([`SimConfig::replica_config`] calls
//! `consensus::ReplicaConfig::from_params`). Its defaults suit real networks;
//! the scenarios of `configs/sim/` write their timeouts out.
//!
//! A scenario names files (region latency table, cost model) relative to its own
//! directory; the built-in scenarios of `configs/` are also compiled in, so that
//! the binary runs them from anywhere.

use crate::{ScenarioError, SimError};
use beacon::SchemeId;
use consensus::{ProtocolParams, ReplicaConfig};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The built-in scenario files, by name (the `configs/` tree at build time).
pub const BUILT_IN: &[(&str, &str)] = &[
    (
        "sim/default.toml",
        include_str!("../../configs/sim/default.toml"),
    ),
    (
        "sim/large.toml",
        include_str!("../../configs/sim/large.toml"),
    ),
    ("sim/huge.toml", include_str!("../../configs/sim/huge.toml")),
    (
        "sim/byzantine.toml",
        include_str!("../../configs/sim/byzantine.toml"),
    ),
    (
        "sim/lossy.toml",
        include_str!("../../configs/sim/lossy.toml"),
    ),
    (
        "sim/crash-restart.toml",
        include_str!("../../configs/sim/crash-restart.toml"),
    ),
    (
        "sim/reshare.toml",
        include_str!("../../configs/sim/reshare.toml"),
    ),
    (
        "regions/wan.toml",
        include_str!("../../configs/regions/wan.toml"),
    ),
    (
        "cost-model.toml",
        include_str!("../../configs/cost-model.toml"),
    ),
];

/// A whole scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Scenario name (for the report).
    pub name: String,
    /// Number of replicas.
    pub nodes: u32,
    /// Beacon rounds to produce after the DKG.
    pub rounds: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Signature scheme (`insecure-mock` runs the protocol on a stand-in group
    /// with no security, for protocol-only runs far beyond 4096 signers).
    pub scheme: SchemeId,
    /// Worker threads (results do not depend on it); default: the machine's
    /// available parallelism ([`available_threads`]).
    #[serde(default = "available_threads")]
    pub threads: usize,
    /// Protocol parameters: the `[protocol]` table a node's `node.toml` has
    /// too (one type, one set of defaults: `consensus::params`).
    #[serde(default)]
    pub protocol: ProtocolParams,
    /// DKG parameters: the `[dkg]` table of `node.toml` (one type,
    /// [`consensus::DkgParams`]).
    #[serde(default)]
    pub dkg: consensus::DkgParams,
    /// Network model.
    pub network: NetworkConfig,
    /// Network partitions.
    #[serde(default)]
    pub partitions: Vec<Partition>,
    /// Crashes and Byzantine replicas.
    #[serde(default)]
    pub faults: Faults,
    /// Client load.
    #[serde(default)]
    pub load: Load,
    /// Cost model file (relative to the scenario file).
    pub cost_model: String,
    /// Invariant checking.
    #[serde(default)]
    pub invariants: InvariantConfig,
    /// A change of members during the run (the `reshare` scenario).
    #[serde(default)]
    pub reshare: Option<ReshareSection>,
    /// Directory the scenario was loaded from (for relative paths); not in files.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    /// Save the end of the DKG to a file, or start from one (`sim
    /// --save-dkg` / `--load-dkg`); not in files.
    #[serde(skip)]
    pub dkg_snapshot: Option<crate::snapshot::SnapshotMode>,
}

/// The machine's available parallelism (1 where it cannot be read): the
/// default of `threads`, and of a campaign's jobs.
pub fn available_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A change of members: at a height, every genesis member's operator proposes
/// the new member list; the old members reshare the beacon key to it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReshareSection {
    /// The operators propose once an honest member finalized this height.
    pub at_height: u64,
    /// Genesis members that leave (drawn by the seed).
    pub leave: u32,
    /// New parties that join (simulated nodes after the genesis members).
    pub join: u32,
    /// `c` of the new epoch (default: the smallest that makes its size valid).
    #[serde(default)]
    pub c: Option<u32>,
}

impl ReshareSection {
    /// Members of the new epoch, from `nodes` genesis members.
    pub fn new_size(&self, nodes: u32) -> Result<u32, SimError> {
        if self.leave > nodes {
            return Err(ScenarioError::LeaveExceedsNodes {
                leave: self.leave,
                nodes,
            }
            .into());
        }
        Ok(nodes - self.leave + self.join)
    }

    /// `c` of the new epoch: the configured one, or the smallest valid one.
    pub fn new_c(&self, nodes: u32) -> Result<u32, SimError> {
        let n = self.new_size(nodes)?;
        let c = match self.c {
            Some(c) => c,
            None => consensus::config::smallest_collector_slack(n)
                .ok_or(ScenarioError::NoCollectorSlack { new_members: n })?,
        };
        consensus::config::check_size(n, c).map_err(|source| SimError::Table {
            table: "reshare",
            source,
        })?;
        Ok(c)
    }
}

/// Per-link latency model.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Latency {
    /// The same one-way delay everywhere.
    Constant {
        /// Milliseconds.
        ms: f64,
    },
    /// Uniform in `[min_ms, max_ms]`.
    Uniform {
        /// Minimum.
        min_ms: f64,
        /// Maximum.
        max_ms: f64,
    },
    /// Log-normal with the given median, `sigma` of the underlying normal, and a floor.
    LogNormal {
        /// Median (ms).
        median_ms: f64,
        /// Shape.
        sigma: f64,
        /// Floor (ms).
        min_ms: f64,
    },
    /// Nodes placed round-robin in named regions, with a one-way latency table.
    Regions {
        /// Region table file (relative to the scenario file).
        file: String,
    },
}

/// A region table file.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegionTable {
    /// Region names.
    pub regions: Vec<String>,
    /// One-way latency in ms, `latency_ms[i][j]` from region i to region j.
    pub latency_ms: Vec<Vec<f64>>,
}

/// Network model.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkConfig {
    /// Latency model.
    pub latency: Latency,
    /// Extra uniform delay in `[0, jitter_ms]` per message.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Per-node uplink in Mbit/s (0: unlimited).
    #[serde(default)]
    pub bandwidth_mbps: f64,
    /// Probability a consensus message is lost (the DKG assumes a reliable
    /// broadcast layer: its messages are delayed, duplicated, never lost).
    #[serde(default)]
    pub loss: f64,
    /// Probability a message is delivered twice.
    #[serde(default)]
    pub duplication: f64,
    /// Probability a message is held back by `reorder_delay_ms` (reordering).
    #[serde(default)]
    pub reorder: f64,
    /// Hold-back delay for reordered messages (ms).
    #[serde(default)]
    pub reorder_delay_ms: f64,
    /// Cores of one host that runs every node (a local network on one
    /// machine): an input waits for a free core as well as for its node. 0:
    /// every node has a core of its own.
    #[serde(default)]
    pub host_cores: u32,
    /// The links are `localnet`'s userspace WAN emulator: relays on one thread
    /// of the host (needs `host_cores`). Each message then also takes
    /// `relay_us` of the cost model on the relay thread and a host core, half
    /// when the relay reads it from its sender (its link's latency starts
    /// then), half when it writes it to its receiver (which reads it only
    /// then). What `compare` simulates when it emulates a WAN.
    #[serde(default)]
    pub relays_on_host: bool,
}

/// A partition: between `start_ms` and `heal_ms`, nodes in `side` (inclusive index
/// ranges) and the others cannot reach each other.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// Start (ms of virtual time after the DKG).
    pub start_ms: u64,
    /// Heal time (ms after the DKG).
    pub heal_ms: u64,
    /// Inclusive ranges `[a, b]` of one side.
    pub side: Vec<[u32; 2]>,
}

/// Faults.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Faults {
    /// Number of Byzantine replicas (chosen by the seed), at most f.
    pub byzantine: u32,
    /// Behaviours they cycle through (names of `consensus::Behaviour`).
    pub byzantine_kinds: Vec<String>,
    /// Members that run as twins: two instances with the same keys, each
    /// talking to its own half of the network (chosen by the seed). They count
    /// against `f` together with `byzantine`, and find equivocation bugs nobody
    /// wrote an attack for.
    pub twins: u32,
    /// Crashes (and optional restarts).
    pub crash: Vec<Crash>,
}

/// A crash of one node at a time (ms after the DKG), restarted from its persisted
/// state at `restart_ms` if given.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Crash {
    /// Node index.
    pub node: u32,
    /// Crash time (ms after the DKG).
    pub at_ms: u64,
    /// Restart time (ms after the DKG).
    #[serde(default)]
    pub restart_ms: Option<u64>,
    /// The node restarts without its record of what it signed (a disk restored
    /// from an older backup, or the code before votes were persisted): it may
    /// then sign two values for one slot, which the checker reports as a
    /// safety violation of an honest member. Off by default.
    #[serde(default)]
    pub lose_votes: bool,
    /// A crash point: the node does not stop at `at_ms` but in the first
    /// step from then on that makes more than this many durable writes
    /// (`consensus::disk`: keys, epoch record, cleared votes, new seed, or
    /// the vote record), right after the `after_write`-th; the rest of that
    /// step is lost, and it restarts `restart_ms - at_ms` after it stopped.
    /// `1` at the end of the genesis DKG: keys saved, seed not replaced.
    #[serde(default)]
    pub after_write: Option<u32>,
    /// With `after_write`: armed from the start of the run instead of
    /// `at_ms` after the DKG, so that it strikes in the DKG's last step.
    /// Without: the node stops `at_ms` after the start of the run and
    /// restarts at `restart_ms` after it, in the DKG or after the others
    /// finished it (a genesis member without keys runs the DKG again).
    #[serde(default)]
    pub in_dkg: bool,
}

impl Crash {
    /// Whether it is a crash point armed from the start of the run.
    pub fn armed_in_dkg(&self) -> bool {
        self.in_dkg && self.after_write.is_some()
    }
}

/// Client load.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Load {
    /// Transactions per second submitted to random nodes.
    pub tx_per_second: f64,
    /// Size of each transaction.
    pub tx_bytes: usize,
}

/// Invariant checking.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InvariantConfig {
    /// Heights must advance within this long after the last fault heals (ms); never
    /// less than the timeouts of 2f + 6 consecutive failed views.
    pub liveness_bound_ms: u64,
    /// Give up (liveness failure) after this much virtual time (s).
    pub max_virtual_time_s: u64,
}

impl Default for InvariantConfig {
    fn default() -> Self {
        InvariantConfig {
            liveness_bound_ms: 60_000,
            max_virtual_time_s: 3_600,
        }
    }
}

/// Reads a file named in a scenario: relative to `base` (an absolute path as
/// it is) if it exists there, else one of the built-in files with the same
/// trailing path.
pub fn read_relative(base: Option<&Path>, name: &str) -> Result<String, SimError> {
    let path = match base {
        Some(b) => Some(b.join(name)),
        None => Path::new(name).is_absolute().then(|| PathBuf::from(name)),
    };
    if let Some(path) = path {
        if path.exists() {
            return std::fs::read_to_string(&path)
                .map_err(|source| ScenarioError::Read { path, source }.into());
        }
    }
    let normalized = name.trim_start_matches("./").trim_start_matches("../");
    BUILT_IN
        .iter()
        .find(|(n, _)| normalized.ends_with(n) || n.ends_with(normalized))
        .map(|(_, text)| text.to_string())
        .ok_or_else(|| {
            ScenarioError::FileNotFound {
                name: name.to_string(),
                base: base.map(Path::to_path_buf),
            }
            .into()
        })
}

impl SimConfig {
    /// Parses a scenario from TOML text.
    pub fn from_toml(text: &str, base_dir: Option<PathBuf>) -> Result<Self, SimError> {
        let mut cfg: SimConfig =
            toml::from_str(text).map_err(|source| ScenarioError::Parse { what: None, source })?;
        cfg.base_dir = base_dir;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Loads a scenario by path, or by built-in name (`default`, `large`,
    /// `huge`, `byzantine`, `lossy`, `crash-restart`, `reshare`).
    pub fn load(path_or_name: &str) -> Result<Self, SimError> {
        let path = Path::new(path_or_name);
        if path.exists() {
            let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            return Self::from_toml(&text, path.parent().map(Path::to_path_buf));
        }
        let wanted = format!("sim/{}.toml", path_or_name.trim_end_matches(".toml"));
        let text = BUILT_IN
            .iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, t)| *t)
            .ok_or_else(|| ScenarioError::UnknownScenario {
                name: path_or_name.to_string(),
            })?;
        Self::from_toml(text, None)
    }

    /// Checks ranges and consistency.
    pub fn validate(&self) -> Result<(), SimError> {
        let err = |e: ScenarioError| Err(SimError::Scenario(e));
        if self.nodes < 1 {
            return err(ScenarioError::NoNodes);
        }
        self.replica_config()?
            .dkg_config([0; 32], &self.dkg)
            .map_err(|source| SimError::Table {
                table: "dkg",
                source,
            })?;
        if self.rounds == 0 {
            return err(ScenarioError::NoRounds);
        }
        if self.threads == 0 {
            return err(ScenarioError::NoThreads);
        }
        if let Some(r) = &self.reshare {
            r.new_c(self.nodes)?;
            if r.at_height == 0 || r.at_height >= self.rounds {
                return err(ScenarioError::ReshareHeightOutOfRange {
                    at_height: r.at_height,
                });
            }
        }
        let n = &self.network;
        for (name, p) in [
            ("loss", n.loss),
            ("duplication", n.duplication),
            ("reorder", n.reorder),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return err(ScenarioError::NotProbability {
                    key: name,
                    value: p,
                });
            }
        }
        if n.loss >= 1.0 {
            return err(ScenarioError::CertainLoss);
        }
        if n.relays_on_host && n.host_cores == 0 {
            return err(ScenarioError::RelaysWithoutHostCores);
        }
        if n.jitter_ms < 0.0 || n.bandwidth_mbps < 0.0 || n.reorder_delay_ms < 0.0 {
            return err(ScenarioError::NegativeDelay);
        }
        match &n.latency {
            Latency::Constant { ms } if *ms < 0.0 => return err(ScenarioError::NegativeLatency),
            Latency::Uniform { min_ms, max_ms } if *min_ms < 0.0 || max_ms < min_ms => {
                return err(ScenarioError::BadUniformLatency)
            }
            Latency::LogNormal {
                median_ms,
                sigma,
                min_ms,
            } if *median_ms <= 0.0 || *sigma < 0.0 || *min_ms < 0.0 => {
                return err(ScenarioError::BadLogNormalLatency)
            }
            _ => {}
        }
        for p in &self.partitions {
            if p.heal_ms <= p.start_ms {
                return err(ScenarioError::PartitionHealsBeforeStart {
                    start_ms: p.start_ms,
                    heal_ms: p.heal_ms,
                });
            }
            if p.side.iter().any(|[a, b]| a > b || *b >= self.nodes) {
                return err(ScenarioError::PartitionSideOutOfRange {
                    side: p.side.clone(),
                    nodes: self.nodes,
                });
            }
        }
        for c in &self.faults.crash {
            if c.node >= self.nodes {
                return err(ScenarioError::CrashOutOfRange { node: c.node });
            }
            if c.restart_ms.is_some_and(|r| r <= c.at_ms) {
                return err(ScenarioError::RestartBeforeCrash { node: c.node });
            }
        }
        for k in &self.faults.byzantine_kinds {
            k.parse::<consensus::Behaviour>()?;
        }
        if self.faults.byzantine > 0 && self.faults.byzantine_kinds.is_empty() {
            return err(ScenarioError::ByzantineWithoutKinds);
        }
        if self.load.tx_per_second < 0.0 {
            return err(ScenarioError::NegativeLoad);
        }
        Ok(())
    }

    /// The replicas' config: [`ReplicaConfig::from_params`] of `[protocol]`
    /// for `nodes` replicas, with a genesis seed derived from the seed.
    pub fn replica_config(&self) -> Result<ReplicaConfig, SimError> {
        let genesis_seed = Sha256::digest(format!("sbft-beacon genesis {}", self.seed)).into();
        ReplicaConfig::from_params(self.nodes, &self.protocol)
            .and_then(|replica| replica.with(|s| s.genesis_seed = genesis_seed))
            .map_err(|source| SimError::Table {
                table: "protocol",
                source,
            })
    }

    /// The region table, if the latency model uses one.
    pub fn region_table(&self) -> Result<Option<RegionTable>, SimError> {
        let Latency::Regions { file } = &self.network.latency else {
            return Ok(None);
        };
        let text = read_relative(self.base_dir.as_deref(), file)?;
        RegionTable::parse(&text, file).map(Some)
    }
}

impl RegionTable {
    /// Parses and checks a region table (`name` names it in errors).
    pub fn parse(text: &str, name: &str) -> Result<Self, SimError> {
        let table: RegionTable = toml::from_str(text).map_err(|source| ScenarioError::Parse {
            what: Some(name.to_string()),
            source,
        })?;
        let k = table.regions.len();
        if k == 0 || table.latency_ms.len() != k || table.latency_ms.iter().any(|r| r.len() != k) {
            return Err(ScenarioError::RegionTableShape {
                name: name.to_string(),
                regions: k,
            }
            .into());
        }
        if table
            .latency_ms
            .iter()
            .flatten()
            .any(|v| !v.is_finite() || *v < 0.0)
        {
            return Err(ScenarioError::RegionLatency {
                name: name.to_string(),
            }
            .into());
        }
        Ok(table)
    }

    /// The region of each of `nodes` nodes: round-robin, node `i` in region
    /// `i mod k` (the one placement rule of the simulator and emulated networks).
    pub fn placement(&self, nodes: u32) -> Vec<usize> {
        (0..nodes as usize)
            .map(|i| i % self.regions.len())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bad value in a table is an error naming the table and the key.
    #[test]
    fn bad_tables_are_named() {
        let mut cfg = SimConfig::load("default").unwrap();
        cfg.dkg.phase_timeout_ms = 0;
        let e = cfg.validate().unwrap_err();
        assert!(matches!(e, SimError::Table { table: "dkg", .. }), "{e}");
        assert!(
            e.to_string()
                .contains("[dkg] phase_timeout_ms must be positive"),
            "{e}"
        );
        let mut cfg = SimConfig::load("default").unwrap();
        cfg.protocol.fast_path_timeout_ms = 0;
        let e = cfg.validate().unwrap_err();
        assert!(
            matches!(
                e,
                SimError::Table {
                    table: "protocol",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("[protocol] fast_path_timeout_ms"),
            "{e}"
        );
    }
}
