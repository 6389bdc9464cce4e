//! What the handlers share ([`ApiState`]): the chain as far as it is durable
//! ([`ChainView`], and the store behind it as a [`ChainArchive`]), the
//! queues to the node's event loop, the member set, and the API's limits;
//! and the JSON shapes the node's own routes exchange.

use crate::metrics::Metrics;
use beacon::{Beacon, ChainInfo, ChainInfoJson};
use consensus::{DirectoryIndex, Epoch};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

/// When a beacon was learned here and what it cost.
#[derive(Clone, Debug, Serialize)]
pub struct RoundStat {
    /// Round.
    pub round: u64,
    /// Unix time in microseconds when this node learned the beacon.
    pub learned_at_us: u64,
    /// Time since the previous beacon was learned here (milliseconds).
    pub latency_ms: f64,
    /// On a paced chain (period > 0): time from the round's scheduled time
    /// (`genesis_time + (round - 1) * period`) until this node learned its beacon.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<f64>,
    /// CPU time of the protocol thread since the previous beacon (milliseconds).
    pub protocol_cpu_ms: f64,
    /// CPU time of the whole process since the previous beacon (milliseconds).
    pub process_cpu_ms: f64,
    /// Time from committing block `round - 1` to committing block `round`
    /// here (milliseconds), once block `round` committed live.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit_latency_ms: Option<f64>,
    /// How block `round` committed: `fast` or `slow` (once it committed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<&'static str>,
}

/// A committed block as the API shows it.
#[derive(Clone, Debug, Serialize)]
pub struct BlockJson {
    /// Height (= its beacon's round).
    pub height: u64,
    /// SHA-256 of the block, hex.
    pub digest: String,
    /// Digest of the parent block, hex.
    pub parent: String,
    /// View in which it committed.
    pub view: u64,
    /// `fast` or `slow`.
    pub path: &'static str,
    /// The transactions, hex.
    pub transactions: Vec<String>,
}

/// What the API serves from memory: chain info (once the DKG is done) and the
/// most recent durable beacons and blocks. Older ones, and where transactions
/// committed, are read from the store ([`ChainArchive`]), so the view does not
/// grow with the chain.
#[derive(Default)]
pub struct ChainView {
    pub(super) info: Option<(ChainInfo, ChainInfoJson)>,
    pub(super) beacons: BTreeMap<u64, Beacon>,
    pub(super) blocks: BTreeMap<u64, BlockJson>,
    pub(super) rounds: BTreeMap<u64, RoundStat>,
    /// Most round statistics kept (0: the default).
    pub(super) max_rounds: usize,
    /// The latest durable round, for requests waiting for a round.
    pub(super) announced: watch::Sender<u64>,
}

/// Blocks kept in memory (older ones are read from the store).
pub(super) const RECENT_BLOCKS: usize = 64;

/// Beacons kept in memory (older ones are read from the store).
pub(super) const RECENT_BEACONS: usize = 1024;

/// The durable chain beyond what [`ChainView`] keeps: the node's store.
pub trait ChainArchive: Send + Sync {
    /// The block of `height`, if stored.
    fn block(&self, height: u64) -> Option<BlockJson>;
    /// The beacon of `round`, if stored.
    fn beacon(&self, round: u64) -> Option<Beacon>;
    /// The height at which the transaction with SHA-256 `id` committed, if any.
    fn transaction(&self, id: &[u8; 32]) -> Option<u64>;
}

/// Round statistics kept when nothing else is set.
pub(super) const ROUND_STATS: usize = 10_000;

impl ChainView {
    /// Sets the chain parameters (after the DKG or on restart).
    pub fn set_info(&mut self, info: ChainInfo) {
        let json = ChainInfoJson::from(&info);
        self.info = Some((info, json));
    }

    /// The chain parameters, if known.
    pub fn info(&self) -> Option<&ChainInfo> {
        self.info.as_ref().map(|(i, _)| i)
    }

    /// Adds a durable beacon and its block, forgetting the oldest beyond the
    /// recent ones (the store keeps them).
    pub fn insert(&mut self, beacon: Beacon, block: BlockJson) {
        self.blocks.insert(block.height, block);
        while self.blocks.len() > RECENT_BLOCKS {
            self.blocks.pop_first();
        }
        let round = beacon.round;
        self.beacons.insert(round, beacon);
        while self.beacons.len() > RECENT_BEACONS {
            self.beacons.pop_first();
        }
        self.announced.send_if_modified(|latest| {
            let later = round > *latest;
            if later {
                *latest = round;
            }
            later
        });
    }

    /// Entries in memory: (beacons, blocks, round statistics).
    pub fn sizes(&self) -> (usize, usize, usize) {
        (self.beacons.len(), self.blocks.len(), self.rounds.len())
    }

    /// The previous signature round `round` chains on: the beacon of `round - 1`,
    /// or the genesis seed for round 1.
    pub fn previous_signature(&self, round: u64) -> Option<Vec<u8>> {
        if round == 1 {
            return self.info().map(|i| i.genesis_seed.clone());
        }
        self.beacons.get(&(round - 1)).map(|b| b.signature.clone())
    }

    /// Latest durable round (0 if none).
    pub fn latest(&self) -> u64 {
        self.beacons.last_key_value().map_or(0, |(r, _)| *r)
    }

    /// Adds the commit of block `round` to that round's statistics; false if
    /// there are none (yet).
    pub fn record_commit(
        &mut self,
        round: u64,
        latency_ms: Option<f64>,
        path: &'static str,
    ) -> bool {
        let Some(stat) = self.rounds.get_mut(&round) else {
            return false;
        };
        stat.commit_latency_ms = latency_ms;
        stat.path = Some(path);
        true
    }

    /// Records the statistics of a beacon learned live.
    pub fn record(&mut self, stat: RoundStat) {
        self.rounds.insert(stat.round, stat);
        let max = if self.max_rounds == 0 {
            ROUND_STATS
        } else {
            self.max_rounds
        };
        while self.rounds.len() > max {
            self.rounds.pop_first();
        }
    }
}

/// A submitted transaction and the share of the submit queue's bytes it holds.
pub type Submitted = (Vec<u8>, OwnedSemaphorePermit);

/// The operator's proposal of a change of members (`POST /admin/reshare`, and
/// what `sbft-beacon reshare` sends).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReshareRequest {
    /// The new members' peer IDs, in their new order (each one in the
    /// config's `[[peers]]`).
    pub members: Vec<String>,
    /// Extra collectors' slack of the new epoch (absent: the smallest valid).
    #[serde(default)]
    pub c: Option<u32>,
    /// Beacon threshold of the new epoch (0: `f + 1`).
    #[serde(default)]
    pub beacon_threshold: u32,
}

/// A proposal the node signed and handed to the members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReshareAccepted {
    /// The epoch it proposes.
    pub epoch: Epoch,
    /// Its members, as `[[peers]]` indices.
    pub members: Vec<DirectoryIndex>,
    /// `c` of the new epoch.
    pub c: u32,
    /// Hex of the change's digest (what proposals are counted by).
    pub change: String,
}

/// Why the node refused an operator's proposal of a change of members: the
/// text of `POST /admin/reshare`'s `400 Bad Request` answer.
#[derive(Debug, thiserror::Error)]
pub enum ProposalRefused {
    /// A new member that is not among the config's `[[peers]]`.
    #[error("{peer} is not in this node's [[peers]]: add it to every member's config first")]
    NotAPeer {
        /// The peer ID as the request gave it.
        peer: String,
    },
    /// A new member's peer ID embeds no member key.
    #[error(transparent)]
    PeerKey(crate::NodeError),
    /// No `c <= 2` makes the new member count a safe `n = 3f + 2c + 1` (and
    /// the request named none).
    #[error("{n} members fit no n = 3f + 2c + 1 with c <= 2")]
    NoCollectorSlack {
        /// The new member count.
        n: u32,
    },
    /// The change cannot follow the current epoch.
    #[error(transparent)]
    Refused(#[from] consensus::epoch::ChangeRefused),
    /// This node runs no replica of the current epoch (it is in a DKG,
    /// joining, retired or failed).
    #[error("this node is not a running member of the current epoch")]
    NotRunning,
    /// The member did not take the proposal.
    #[error(transparent)]
    Member(crate::NodeError),
    /// The node cannot write to its disk now (it keeps a proposal durably
    /// before taking it): retry once the disk takes writes.
    #[error("this node cannot write to its disk now: {0}")]
    Disk(String),
}

/// A proposal for the event loop, and where its answer goes.
pub type AdminRequest = (
    ReshareRequest,
    tokio::sync::oneshot::Sender<Result<ReshareAccepted, ProposalRefused>>,
);

/// The member set this node is in (`GET /epoch`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochJson {
    /// The epoch (0: the genesis members).
    pub epoch: Epoch,
    /// Its members, as `[[peers]]` indices, by epoch index.
    pub members: Vec<DirectoryIndex>,
    /// Its first height (1 for the genesis epoch).
    pub start: u64,
    /// Byzantine members it tolerates.
    pub f: u32,
    /// What this node is in it: `starting` (before it resumes), `dkg`,
    /// `member`, `joining`, `retired` or `failed`.
    pub status: String,
    /// The epoch of the change of members this node is taking part in (the
    /// chain decided it, or old members invited this joiner): the resharing
    /// and the new members' DKG are under way here. Absent when none is, and
    /// again once the node runs that epoch (or left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changing_to: Option<Epoch>,
    /// The changes (by the epoch each started) whose deal this node still
    /// keeps, to deal again to a member that missed the switch, until each
    /// one's erasure (32 phase lengths after it). A node that left keeps
    /// running until this is empty: a member that missed the switch needs
    /// every dealer the chain named.
    #[serde(default)]
    pub retained_deals: Vec<Epoch>,
}

/// Shared state of the handlers.
pub struct ApiState {
    /// The chain.
    pub chain: RwLock<ChainView>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Where submitted transactions go (the node's event loop).
    pub submit: tokio::sync::mpsc::Sender<Submitted>,
    /// Largest transaction accepted (bytes).
    pub max_transaction_bytes: usize,
    /// Bytes of transactions waiting for the event loop.
    pub(super) submit_bytes: Arc<Semaphore>,
    /// Requests that may wait for a round at once (half the concurrency
    /// limit, so that waiting requests never hold every slot).
    pub(super) waiting: Semaphore,
    /// `POST /tx` requests per client IP.
    pub(super) per_client: DefaultKeyedRateLimiter<IpAddr>,
    /// Token `POST /tx` requires, if any.
    pub(super) token: Option<String>,
    pub(super) limits: crate::limits::LimitsSection,
    /// Where beacons and blocks older than the recent ones, and transactions,
    /// are read.
    pub archive: std::sync::OnceLock<Box<dyn ChainArchive>>,
    /// Where the operator's proposals go (the node's event loop).
    pub admin: std::sync::OnceLock<tokio::sync::mpsc::Sender<AdminRequest>>,
    /// The member set this node is in.
    pub epoch: RwLock<EpochJson>,
    /// Which of the store's writers fail (`/health` answers 503 while one does).
    pub disk: crate::store::DiskHealth,
}

impl ApiState {
    /// State for an API with `limits`, handing transactions to `submit`.
    pub fn new(
        metrics: Arc<Metrics>,
        submit: tokio::sync::mpsc::Sender<Submitted>,
        max_transaction_bytes: usize,
        limits: &crate::limits::LimitsSection,
    ) -> Self {
        let one = NonZeroU32::MIN;
        let quota = Quota::per_second(NonZeroU32::new(limits.tx_per_s_per_client).unwrap_or(one))
            .allow_burst(NonZeroU32::new(limits.tx_burst_per_client).unwrap_or(one));
        let chain = ChainView {
            max_rounds: limits.stats_rounds,
            ..ChainView::default()
        };
        ApiState {
            chain: RwLock::new(chain),
            metrics,
            submit,
            max_transaction_bytes,
            submit_bytes: Arc::new(Semaphore::new(limits.submit_queue_bytes)),
            waiting: Semaphore::new((limits.http_concurrency / 2).max(1)),
            per_client: RateLimiter::keyed(quota),
            token: limits.tx_token.clone(),
            limits: limits.clone(),
            archive: std::sync::OnceLock::new(),
            admin: std::sync::OnceLock::new(),
            epoch: RwLock::new(EpochJson::default()),
            disk: crate::store::DiskHealth::default(),
        }
    }

    /// Records that `writer`'s durable write failed with `error` (its log
    /// line, the metrics, `/health`).
    pub fn disk_failed(&self, writer: crate::store::DiskWriter, error: &crate::NodeError) {
        self.metrics.disk_write_failures.inc();
        let failing = self.disk.failed(writer, error.to_string());
        self.metrics.disk_failing.set(failing as i64);
    }

    /// Records that `writer`'s durable writes succeed again.
    pub fn disk_recovered(&self, writer: crate::store::DiskWriter) {
        let failing = self.disk.recovered(writer);
        self.metrics.disk_failing.set(failing as i64);
    }
}
