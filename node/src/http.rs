//! The node's HTTP API in drand's v1 JSON shape: `/info`, `/public/latest`,
//! `/public/{round}`, `/chains`, the same under `/{chainhash}/...`, `/health`,
//! `/metrics` (Prometheus text), `/stats/rounds` (this project's own: when
//! each beacon was learned here and what it cost), and the replica's client side:
//! `POST /tx` (submit a transaction), `GET /tx/{id}` (the height that committed
//! it), `GET /blocks/{height}`.
//!
//! Handlers read [`ChainView`], which holds only what the store has made durable.

use crate::metrics::Metrics;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
use serde::Serialize;
use sha2::Digest as _;
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
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

/// What the API serves: chain info (once the DKG is done), durable beacons and
/// blocks, and where each transaction committed.
#[derive(Default)]
pub struct ChainView {
    info: Option<(ChainInfo, ChainInfoJson)>,
    beacons: BTreeMap<u64, Beacon>,
    blocks: BTreeMap<u64, BlockJson>,
    transactions: HashMap<[u8; 32], u64>,
    rounds: BTreeMap<u64, RoundStat>,
}

/// Most round statistics kept.
const ROUND_STATS: usize = 100_000;

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

    /// Adds a durable beacon and its block (whose transactions' SHA-256 are `ids`).
    pub fn insert(&mut self, beacon: Beacon, block: BlockJson, ids: Vec<[u8; 32]>) {
        for id in ids {
            self.transactions.insert(id, block.height);
        }
        self.blocks.insert(block.height, block);
        self.beacons.insert(beacon.round, beacon);
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

    /// Records the statistics of a beacon learned live.
    pub fn record(&mut self, stat: RoundStat) {
        self.rounds.insert(stat.round, stat);
        while self.rounds.len() > ROUND_STATS {
            self.rounds.pop_first();
        }
    }
}

/// Shared state of the handlers.
pub struct ApiState {
    /// The chain.
    pub chain: RwLock<ChainView>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Where submitted transactions go (the node's event loop).
    pub submit: tokio::sync::mpsc::Sender<Vec<u8>>,
    /// Largest transaction accepted (bytes).
    pub max_transaction_bytes: usize,
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
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let round = if round == 0 { view.latest() } else { round };
    match view.beacons.get(&round) {
        Some(b) => Json(BeaconJson::from(b)).into_response(),
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

async fn rounds(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let list: Vec<&RoundStat> = view.rounds.values().collect();
    Json(list).into_response()
}

#[derive(Serialize)]
struct Submitted {
    id: String,
}

async fn submit(State(s): Shared, body: Bytes) -> Response {
    if body.is_empty() {
        return (StatusCode::BAD_REQUEST, "empty transaction\n").into_response();
    }
    let id: [u8; 32] = sha2::Sha256::digest(&body).into();
    match s.submit.try_send(body.to_vec()) {
        Ok(()) => (
            StatusCode::ACCEPTED,
            Json(Submitted {
                id: hex::encode(id),
            }),
        )
            .into_response(),
        Err(_) => unavailable("the node is not accepting transactions now"),
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
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    match view.transactions.get(&key) {
        Some(height) => Json(Committed {
            id,
            height: *height,
        })
        .into_response(),
        None => not_found(format!("transaction {id} is not committed (yet)")),
    }
}

async fn block(State(s): Shared, Path(height): Path<String>) -> Response {
    let Ok(height) = height.parse::<u64>() else {
        return (StatusCode::BAD_REQUEST, format!("bad height {height:?}\n")).into_response();
    };
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    match view.blocks.get(&height) {
        Some(b) => Json(b.clone()).into_response(),
        None => not_found(format!("height {height} is not known here")),
    }
}

/// The API's routes.
pub fn router(state: Arc<ApiState>) -> Router {
    let limit = state.max_transaction_bytes;
    Router::new()
        .route("/tx", post(submit).layer(DefaultBodyLimit::max(limit)))
        .route("/tx/{id}", get(transaction))
        .route("/blocks/{height}", get(block))
        .route("/info", get(info))
        .route("/chains", get(chains))
        .route("/public/latest", get(latest))
        .route("/public/{round}", get(round))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/stats/rounds", get(rounds))
        .route("/{hash}/info", get(info_of))
        .route("/{hash}/public/latest", get(latest_of))
        .route("/{hash}/public/{round}", get(round_of))
        .with_state(state)
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

/// Binds `addr` and serves the API in the background.
pub async fn serve(addr: SocketAddr, state: Arc<ApiState>) -> Result<(), crate::NodeError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| crate::NodeError::Io(format!("cannot bind the HTTP API to {addr}: {e}")))?;
    info!(%addr, "HTTP API listening");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router(state)).await {
            tracing::error!(error = %e, "HTTP API stopped");
        }
    });
    Ok(())
}
