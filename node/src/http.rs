//! The node's HTTP API in drand's v1 JSON shape: `/info`, `/public/latest`,
//! `/public/{round}`, `/chains`, the same under `/{chainhash}/...`, `/health`,
//! `/metrics` (Prometheus text), `/stats/rounds` (this project's own: when
//! each beacon was learned here and what it cost), and the replica's client side:
//! `POST /tx` (submit a transaction), `GET /tx/{id}` (the height that committed
//! it), `GET /blocks/{height}`; `GET /epoch` (the member set this node is in)
//! and, for the node's operator only (from a loopback address),
//! `POST /admin/reshare` (propose a change of members, see `consensus::epoch`).
//!
//! Handlers read [`ChainView`], which holds only what the store has made durable.
//!
//! The API runs on its own thread and runtime, so that no client can delay the
//! protocol thread; every request has a time limit, a bounded number run at
//! once, `POST /tx` is rate-limited per client IP (governor) and may require a
//! token, transactions waiting for the event loop are bounded in bytes, and
//! `/stats/rounds` is paginated (`?from=ROUND&limit=N`).

use crate::metrics::Metrics;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::info;

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
    info: Option<(ChainInfo, ChainInfoJson)>,
    beacons: BTreeMap<u64, Beacon>,
    blocks: BTreeMap<u64, BlockJson>,
    rounds: BTreeMap<u64, RoundStat>,
    /// Most round statistics kept (0: the default).
    max_rounds: usize,
}

/// Blocks kept in memory (older ones are read from the store).
const RECENT_BLOCKS: usize = 64;

/// Beacons kept in memory (older ones are read from the store).
const RECENT_BEACONS: usize = 1024;

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
const ROUND_STATS: usize = 10_000;

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
        self.beacons.insert(beacon.round, beacon);
        while self.beacons.len() > RECENT_BEACONS {
            self.beacons.pop_first();
        }
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
    pub epoch: u64,
    /// Its members, as `[[peers]]` indices.
    pub members: Vec<u32>,
    /// `c` of the new epoch.
    pub c: u32,
    /// Hex of the change's digest (what proposals are counted by).
    pub change: String,
}

/// A proposal for the event loop, and where its answer goes.
pub type AdminRequest = (
    ReshareRequest,
    tokio::sync::oneshot::Sender<Result<ReshareAccepted, String>>,
);

/// The member set this node is in (`GET /epoch`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochJson {
    /// The epoch (0: the genesis members).
    pub epoch: u64,
    /// Its members, as `[[peers]]` indices, by epoch index.
    pub members: Vec<u32>,
    /// Its first height (1 for the genesis epoch).
    pub start: u64,
    /// Byzantine members it tolerates.
    pub f: u32,
    /// What this node is in it: `starting` (before it resumes), `dkg`,
    /// `member`, `joining`, `retired` or `failed`.
    pub status: String,
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
    submit_bytes: Arc<Semaphore>,
    /// `POST /tx` requests per client IP.
    per_client: DefaultKeyedRateLimiter<IpAddr>,
    /// Token `POST /tx` requires, if any.
    token: Option<String>,
    limits: crate::limits::LimitsSection,
    /// Where beacons and blocks older than the recent ones, and transactions,
    /// are read.
    pub archive: std::sync::OnceLock<Box<dyn ChainArchive>>,
    /// Where the operator's proposals go (the node's event loop).
    pub admin: std::sync::OnceLock<tokio::sync::mpsc::Sender<AdminRequest>>,
    /// The member set this node is in.
    pub epoch: RwLock<EpochJson>,
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
            per_client: RateLimiter::keyed(quota),
            token: limits.tx_token.clone(),
            limits: limits.clone(),
            archive: std::sync::OnceLock::new(),
            admin: std::sync::OnceLock::new(),
            epoch: RwLock::new(EpochJson::default()),
        }
    }
}

type Shared = State<Arc<ApiState>>;

fn unavailable(what: &str) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, format!("{what}\n")).into_response()
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, format!("{what}\n")).into_response()
}

async fn info(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    match &view.info {
        Some((_, json)) => Json(json.clone()).into_response(),
        None => unavailable("the DKG has not finished"),
    }
}

async fn chains(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let hashes: Vec<String> = view.info.iter().map(|(_, j)| j.hash.clone()).collect();
    Json(hashes).into_response()
}

fn beacon(s: &ApiState, round: u64) -> Response {
    let (recent, round, latest) = {
        let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
        let latest = view.latest();
        let round = if round == 0 { latest } else { round };
        (view.beacons.get(&round).cloned(), round, latest)
    };
    let beacon = match recent {
        Some(b) => Some(b),
        None if round != 0 && round <= latest => s.archive.get().and_then(|a| a.beacon(round)),
        None => None,
    };
    match beacon {
        Some(b) => Json(BeaconJson::from(&b)).into_response(),
        None if round == 0 => not_found("no beacon yet".into()),
        None => not_found(format!("round {round} is not known here")),
    }
}

async fn latest(State(s): Shared) -> Response {
    beacon(&s, 0)
}

async fn round(State(s): Shared, Path(round): Path<String>) -> Response {
    match round.parse::<u64>() {
        Ok(r) => beacon(&s, r),
        Err(_) => (StatusCode::BAD_REQUEST, format!("bad round {round:?}\n")).into_response(),
    }
}

/// Whether `hash` names this node's chain.
fn chain_matches(s: &ApiState, hash: &str) -> bool {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    matches!(&view.info, Some((_, j)) if j.hash == hash)
}

fn unknown_chain(hash: &str) -> Response {
    not_found(format!("unknown chain {hash}"))
}

async fn info_of(State(s): Shared, Path(hash): Path<String>) -> Response {
    if !chain_matches(&s, &hash) {
        return unknown_chain(&hash);
    }
    info(State(s)).await
}

async fn latest_of(State(s): Shared, Path(hash): Path<String>) -> Response {
    if !chain_matches(&s, &hash) {
        return unknown_chain(&hash);
    }
    beacon(&s, 0)
}

async fn round_of(State(s): Shared, Path((hash, r)): Path<(String, String)>) -> Response {
    if !chain_matches(&s, &hash) {
        return unknown_chain(&hash);
    }
    round(State(s), Path(r)).await
}

#[derive(Serialize)]
struct Health {
    current: u64,
    expected: u64,
}

async fn health(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let Some(info) = view.info() else {
        return unavailable("the DKG has not finished");
    };
    let current = view.latest();
    // Back-to-back chains have no schedule: expect what we have.
    let expected = if info.period == 0 {
        current
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if now < info.genesis_time {
            0
        } else {
            ((now - info.genesis_time) / i64::from(info.period) + 1) as u64
        }
    };
    let status = if current + 1 >= expected {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(Health { current, expected })).into_response()
}

async fn metrics(State(s): Shared) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.render(),
    )
        .into_response()
}

/// `/stats/rounds` query: the first round wanted and how many.
#[derive(serde::Deserialize)]
struct Page {
    #[serde(default)]
    from: u64,
    limit: Option<usize>,
}

async fn rounds(State(s): Shared, Query(page): Query<Page>) -> Response {
    let limit = page
        .limit
        .unwrap_or(s.limits.stats_page)
        .min(s.limits.stats_page);
    // Copy the page under the lock; serialize after releasing it.
    let list: Vec<RoundStat> = {
        let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
        view.rounds
            .range(page.from..)
            .take(limit)
            .map(|(_, r)| r.clone())
            .collect()
    };
    Json(list).into_response()
}

#[derive(Serialize)]
struct Accepted {
    id: String,
}

fn refused(s: &ApiState, status: StatusCode, reason: &str, what: &str) -> Response {
    s.metrics.refused(reason);
    (status, format!("{what}\n")).into_response()
}

async fn submit(State(s): Shared, request: Request) -> Response {
    if let Some(token) = &s.token {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            return refused(
                &s,
                StatusCode::UNAUTHORIZED,
                "token",
                "a valid token is required",
            );
        }
    }
    let client = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |c| c.0.ip());
    if s.per_client.check_key(&client).is_err() {
        return refused(
            &s,
            StatusCode::TOO_MANY_REQUESTS,
            "rate",
            "too many transactions from this client; retry later",
        );
    }
    let body = match axum::body::to_bytes(request.into_body(), s.max_transaction_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "a transaction is at most {} bytes\n",
                    s.max_transaction_bytes
                ),
            )
                .into_response()
        }
    };
    if body.is_empty() {
        return (StatusCode::BAD_REQUEST, "empty transaction\n").into_response();
    }
    let Ok(held) = s
        .submit_bytes
        .clone()
        .try_acquire_many_owned(body.len() as u32)
    else {
        return refused(
            &s,
            StatusCode::SERVICE_UNAVAILABLE,
            "queue-full",
            "the node is not accepting transactions now",
        );
    };
    let id: [u8; 32] = sha2::Sha256::digest(&body).into();
    match s.submit.try_send((body.to_vec(), held)) {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(Accepted {
                id: hex::encode(id),
            }),
        )
            .into_response(),
        Err(_) => refused(
            &s,
            StatusCode::SERVICE_UNAVAILABLE,
            "queue-full",
            "the node is not accepting transactions now",
        ),
    }
}

#[derive(Serialize)]
struct Committed {
    id: String,
    height: u64,
}

async fn transaction(State(s): Shared, Path(id): Path<String>) -> Response {
    let Some(key) = hex::decode(&id)
        .ok()
        .and_then(|b| <[u8; 32]>::try_from(b).ok())
    else {
        return (
            StatusCode::BAD_REQUEST,
            "a transaction id is 64 hex digits\n",
        )
            .into_response();
    };
    match s.archive.get().and_then(|a| a.transaction(&key)) {
        Some(height) => Json(Committed { id, height }).into_response(),
        None => not_found(format!("transaction {id} is not committed (yet)")),
    }
}

async fn block(State(s): Shared, Path(height): Path<String>) -> Response {
    let Ok(height) = height.parse::<u64>() else {
        return (StatusCode::BAD_REQUEST, format!("bad height {height:?}\n")).into_response();
    };
    let (recent, latest) = {
        let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
        (view.blocks.get(&height).cloned(), view.latest())
    };
    let block = match recent {
        Some(b) => Some(b),
        None if height <= latest => s.archive.get().and_then(|a| a.block(height)),
        None => None,
    };
    match block {
        Some(b) => Json(b).into_response(),
        None => not_found(format!("height {height} is not known here")),
    }
}

async fn epoch(State(s): Shared) -> Response {
    let view = s.epoch.read().unwrap_or_else(|e| e.into_inner()).clone();
    Json(view).into_response()
}

/// `POST /admin/reshare`: only from a loopback address (the operator on the
/// node's own machine); the event loop checks the change and signs it.
async fn reshare(
    State(s): Shared,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    body: axum::body::Bytes,
) -> Response {
    if !client.ip().is_loopback() {
        return refused(
            &s,
            StatusCode::FORBIDDEN,
            "admin",
            "the admin API answers only on the node's own machine",
        );
    }
    let request: ReshareRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad request: {e}\n")).into_response(),
    };
    let Some(admin) = s.admin.get() else {
        return unavailable("the node is starting");
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    if admin.try_send((request, tx)).is_err() {
        return unavailable("the node is busy; retry");
    }
    match rx.await {
        Ok(Ok(accepted)) => (StatusCode::ACCEPTED, Json(accepted)).into_response(),
        Ok(Err(reason)) => (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response(),
        Err(_) => unavailable("the node stopped"),
    }
}

/// The API's routes, with a time limit per request and a bound on the requests
/// handled at once (waiting for a slot counts toward the time limit).
pub fn router(state: Arc<ApiState>) -> Router {
    let timeout = Duration::from_millis(state.limits.http_timeout_ms);
    let concurrency = state.limits.http_concurrency;
    Router::new()
        .route("/tx", post(submit))
        .route("/tx/{id}", get(transaction))
        .route("/blocks/{height}", get(block))
        .route("/info", get(info))
        .route("/chains", get(chains))
        .route("/public/latest", get(latest))
        .route("/public/{round}", get(round))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/stats/rounds", get(rounds))
        .route("/epoch", get(epoch))
        .route("/admin/reshare", post(reshare))
        .route("/{hash}/info", get(info_of))
        .route("/{hash}/public/latest", get(latest_of))
        .route("/{hash}/public/{round}", get(round_of))
        .with_state(state)
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(concurrency))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ))
}

/// Proposes a change of members to the node whose API is at `base` (it must
/// be on this machine: the admin API answers loopback clients only).
pub async fn post_reshare(
    client: &reqwest::Client,
    base: &str,
    request: &ReshareRequest,
) -> Result<ReshareAccepted, crate::NodeError> {
    let url = format!("{}/admin/reshare", base.trim_end_matches('/'));
    let err = |e: String| crate::NodeError::Network(format!("POST {url}: {e}"));
    let response = client
        .post(&url)
        .json(request)
        .send()
        .await
        .map_err(|e| err(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().await.unwrap_or_default();
        return Err(err(format!("{status}: {}", text.trim())));
    }
    response
        .json()
        .await
        .map_err(|e| err(format!("not the expected JSON: {e}")))
}

/// Fetches `url` from a node's API as JSON; a failed request, a non-success
/// status or a body that is not JSON is an error naming the URL.
pub async fn get_json(
    client: &reqwest::Client,
    url: &str,
) -> Result<serde_json::Value, crate::NodeError> {
    let err = |e: String| crate::NodeError::Network(format!("GET {url}: {e}"));
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| err(e.to_string()))?;
    if !response.status().is_success() {
        return Err(err(response.status().to_string()));
    }
    response
        .json()
        .await
        .map_err(|e| err(format!("not JSON: {e}")))
}

/// Binds `addr` and serves the API on a thread of its own (with its own
/// single-threaded runtime), apart from the protocol thread.
pub fn serve(
    addr: SocketAddr,
    state: Arc<ApiState>,
) -> Result<std::thread::JoinHandle<()>, crate::NodeError> {
    let io = |e: std::io::Error| crate::NodeError::Io(format!("the HTTP API on {addr}: {e}"));
    let listener = std::net::TcpListener::bind(addr).map_err(io)?;
    listener.set_nonblocking(true).map_err(io)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io)?;
    info!(%addr, "HTTP API listening");
    let span = tracing::Span::current();
    std::thread::Builder::new()
        .name("http".into())
        .spawn(move || {
            let _span = span.enter();
            runtime.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => l,
                    Err(e) => return tracing::error!(error = %e, "HTTP API stopped"),
                };
                // Forget idle clients of the per-client rate limit now and then.
                let forget = state.clone();
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(Duration::from_secs(60));
                    loop {
                        tick.tick().await;
                        forget.per_client.retain_recent();
                        forget.per_client.shrink_to_fit();
                    }
                });
                let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
                if let Err(e) = axum::serve(listener, app).await {
                    tracing::error!(error = %e, "HTTP API stopped");
                }
            })
        })
        .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(height: u64) -> BlockJson {
        BlockJson {
            height,
            digest: String::new(),
            parent: String::new(),
            view: 0,
            path: "fast",
            transactions: Vec::new(),
        }
    }

    #[test]
    fn the_view_keeps_only_recent_heights() {
        let mut view = ChainView::default();
        for round in 1..=(RECENT_BEACONS as u64 + 500) {
            let beacon = Beacon {
                round,
                signature: vec![round as u8; 96],
                previous_signature: vec![0; 96],
            };
            view.insert(beacon, block(round));
            view.record(RoundStat {
                round,
                learned_at_us: 0,
                latency_ms: 1.0,
                delay_ms: None,
                protocol_cpu_ms: 0.0,
                process_cpu_ms: 0.0,
                commit_latency_ms: None,
                path: None,
            });
        }
        assert_eq!(view.latest(), RECENT_BEACONS as u64 + 500);
        let (beacons, blocks, rounds) = view.sizes();
        assert_eq!((beacons, blocks), (RECENT_BEACONS, RECENT_BLOCKS));
        assert!(rounds <= ROUND_STATS);
        assert!(view.previous_signature(view.latest() + 1).is_some());
    }
}
