//! What can be wrong with a scenario or a file it names: the simulator's
//! config errors, one variant per check of `SimConfig::validate`, the region
//! table and the cost model. `SimError::Scenario` carries them.

use std::path::PathBuf;

/// A scenario, a region table or a cost model that the simulator refuses.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not TOML of the expected shape (a missing or unknown field,
    /// a value of the wrong type).
    #[error("{}{source}", what.as_ref().map(|w| format!("{w}: ")).unwrap_or_default())]
    Parse {
        /// What the file is, where not the scenario itself (a region table's
        /// name, `cost model`).
        what: Option<String>,
        /// What the parser found.
        source: toml::de::Error,
    },
    /// A file the scenario names is neither on disk nor built in.
    #[error("file {name:?} not found (relative to {base:?}) and not built in")]
    FileNotFound {
        /// The name in the scenario.
        name: String,
        /// The scenario's directory, if it came from a file.
        base: Option<PathBuf>,
    },
    /// Neither a scenario file nor a built-in scenario has that name.
    #[error("no scenario file {name:?} and no built-in scenario of that name (default, large, huge, byzantine, lossy, crash-restart, reshare)")]
    UnknownScenario {
        /// The name asked for.
        name: String,
    },
    /// `nodes = 0`.
    #[error("nodes must be at least 1")]
    NoNodes,
    /// `rounds = 0`.
    #[error("rounds must be at least 1")]
    NoRounds,
    /// `threads = 0`.
    #[error("threads must be at least 1")]
    NoThreads,
    /// More genesis members leave than there are.
    #[error("reshare.leave = {leave} exceeds the {nodes} nodes")]
    LeaveExceedsNodes {
        /// `reshare.leave`.
        leave: u32,
        /// Genesis members.
        nodes: u32,
    },
    /// No `c` gives the new epoch a valid size.
    #[error("no c makes {new_members} new members 3f + 2c + 1")]
    NoCollectorSlack {
        /// Members of the new epoch.
        new_members: u32,
    },
    /// The resharing is proposed outside the run's heights.
    #[error("reshare.at_height = {at_height} must lie in [1, rounds)")]
    ReshareHeightOutOfRange {
        /// `reshare.at_height`.
        at_height: u64,
    },
    /// A `[network]` rate outside `[0, 1]`.
    #[error("network.{key} = {value} is not a probability")]
    NotProbability {
        /// The key.
        key: &'static str,
        /// Its value.
        value: f64,
    },
    /// `network.loss = 1`: no message would ever arrive.
    #[error("network.loss must be below 1")]
    CertainLoss,
    /// Relays on the host without a host to run them on.
    #[error("network.relays_on_host needs network.host_cores: the relays run on the host's cores")]
    RelaysWithoutHostCores,
    /// A negative jitter, bandwidth or reordering delay.
    #[error("network delays and bandwidth must not be negative")]
    NegativeDelay,
    /// A negative constant latency.
    #[error("latency must not be negative")]
    NegativeLatency,
    /// A uniform latency with a negative or inverted range.
    #[error("uniform latency needs 0 <= min_ms <= max_ms")]
    BadUniformLatency,
    /// A log-normal latency with a non-positive median or a negative
    /// parameter.
    #[error("log-normal latency needs median_ms > 0, sigma >= 0, min_ms >= 0")]
    BadLogNormalLatency,
    /// A partition that heals before it starts.
    #[error("partition heals ({heal_ms}) before it starts ({start_ms})")]
    PartitionHealsBeforeStart {
        /// `start_ms`.
        start_ms: u64,
        /// `heal_ms`.
        heal_ms: u64,
    },
    /// A partition side with an inverted range or a node that does not exist.
    #[error("partition side {side:?} out of range for {nodes} nodes")]
    PartitionSideOutOfRange {
        /// The side's ranges.
        side: Vec<[u32; 2]>,
        /// Nodes of the scenario.
        nodes: u32,
    },
    /// A crash of a node that does not exist.
    #[error("crash of node {node} out of range")]
    CrashOutOfRange {
        /// The node.
        node: u32,
    },
    /// A node that restarts before (or when) it crashes.
    #[error("node {node} restarts before it crashes")]
    RestartBeforeCrash {
        /// The node.
        node: u32,
    },
    /// Byzantine replicas with no behaviour to run.
    #[error("faults.byzantine > 0 needs faults.byzantine_kinds")]
    ByzantineWithoutKinds,
    /// A negative transaction rate.
    #[error("load.tx_per_second must not be negative")]
    NegativeLoad,
    /// A region table that is not square over its regions.
    #[error("{name}: latency_ms must be a {regions} x {regions} table")]
    RegionTableShape {
        /// The table's file name.
        name: String,
        /// Regions it lists.
        regions: usize,
    },
    /// A region table with a negative or non-finite latency.
    #[error("{name}: latencies must be non-negative numbers")]
    RegionLatency {
        /// The table's file name.
        name: String,
    },
    /// A cost model with a negative or non-finite cost.
    #[error("cost model: every cost must be a finite non-negative number")]
    CostNotFinite,
    /// A cost model without MSM costs.
    #[error("cost model: MSM tables must not be empty")]
    EmptyMsmTable,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts name the key and the value, as the scenario's author wrote
    /// them, and a parse error says which file it is in.
    #[test]
    fn texts_name_what_is_wrong() {
        let e = ScenarioError::NotProbability {
            key: "loss",
            value: 1.5,
        };
        assert_eq!(e.to_string(), "network.loss = 1.5 is not a probability");
        let source = toml::from_str::<toml::Table>("x = ").unwrap_err();
        let e = ScenarioError::Parse {
            what: Some("wan.toml".into()),
            source,
        };
        assert!(e.to_string().starts_with("wan.toml: "), "{e}");
        let source = toml::from_str::<toml::Table>("x = ").unwrap_err();
        let text = source.to_string();
        let e = ScenarioError::Parse { what: None, source };
        assert_eq!(e.to_string(), text);
    }
}
