//! A deterministic discrete-event simulator of sbft-beacon networks, with the real
//! cryptography and the same `consensus::Member` state machines the real node
//! runs: DKG first, then beacon rounds.
//!
//! - [`config`]: scenarios (TOML);
//! - [`network`]: latency, bandwidth, loss, duplication, reordering, partitions;
//! - [`cost_model`]: virtual CPU time per cryptographic operation;
//! - [`engine`]: the event loop (deterministic whatever the thread count);
//! - [`invariants`]: agreement, beacon validity and uniqueness, liveness;
//! - [`stats`]: the statistics of honest members' events (an observer);
//! - [`report`]: the figures of a run;
//! - [`host_parallelism`]: how the simulator's own work would spread over
//!   more threads;
//! - [`campaign`]: many seeds with random fault mixes;
//! - [`snapshot`]: the end of a DKG saved, to start runs from.
//!
//! The seed decides everything; the same seed and scenario give the same trace
//! hash and beacon chain.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod campaign;
pub mod config;
pub mod cost_model;
pub mod disk;
pub mod engine;
mod host;
pub mod host_parallelism;
pub mod invariants;
pub mod network;
pub mod report;
pub mod reshare;
mod scenario_error;
pub mod snapshot;
pub mod stats;

pub use config::SimConfig;
pub use engine::{run, RunProgress};
pub use invariants::{FailureKind, Violation};
pub use report::Report;
pub use scenario_error::ScenarioError;

/// `f` on every item with its index, on `threads` threads, in order.
pub(crate) fn parallel_map<T: Sync, U: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(usize, &T) -> U + Sync,
) -> Vec<U> {
    let per = items.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .enumerate()
            .map(|(c, part)| {
                let f = &f;
                s.spawn(move || {
                    part.iter()
                        .enumerate()
                        .map(|(k, item)| f(c * per + k, item))
                        .collect::<Vec<U>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a parallel worker panicked"))
            .collect()
    })
}

/// The simulator's error type (bad scenarios; protocol failures are violations
/// in the report, not errors).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario or a file it names is invalid.
    #[error("invalid scenario: {0}")]
    Scenario(#[from] ScenarioError),
    /// The scenario's protocol parameters make no valid replica or member,
    /// or it names a Byzantine behaviour that does not exist.
    #[error("invalid scenario: {0}")]
    Protocol(#[from] consensus::ConsensusError),
    /// A table of the scenario (`[protocol]`, `[dkg]`, `[reshare]`) holds
    /// values that make no valid replica or DKG.
    #[error("invalid scenario: [{table}] {source}")]
    Table {
        /// The table's name.
        table: &'static str,
        /// What is wrong with it.
        source: consensus::ConsensusError,
    },
    /// The scenario's DKG parameters are invalid.
    #[error("invalid scenario: DKG: {0}")]
    Dkg(#[source] beacon::Error),
    /// A DKG snapshot cannot be written, read or used.
    #[error("DKG snapshot {}: {reason}", path.display())]
    Snapshot {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        reason: snapshot::SnapshotError,
    },
    /// More faulty members than the network tolerates.
    #[error("invalid scenario: {byzantine} Byzantine replicas and {twins} twins exceed f = {f} for n = {n}, c = {c}")]
    TooManyFaulty {
        /// Byzantine replicas asked for.
        byzantine: u32,
        /// Twinned members asked for.
        twins: u32,
        /// Byzantine replicas tolerated.
        f: u32,
        /// Replicas.
        n: u32,
        /// Extra collectors' slack.
        c: u32,
    },
}
