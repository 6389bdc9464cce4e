//! The node's HTTP API. drand's routes, as drand's http-relay serves them
//! (github.com/drand/http-relay, `routes.go` and `routes_handler.go`): v1
//! (`/info`, `/chains`, `/health`, `/public/latest`, `/public/{round}`, the
//! same under `/{chainhash}/...`) and v2 (`/v2/chains`, `/v2/beacons`, and
//! under `/v2/chains/{chainhash}/` and `/v2/beacons/{beacon_id}/`: `info`,
//! `health`, `rounds/{round}`, `rounds/latest`, `rounds/next`; v2 beacons carry
//! no `randomness`). Past rounds are cacheable for a week (`immutable`), the
//! latest until the next round is due; a round due within about one period is
//! awaited (bounded), a later one is `425 Too Early`. Then `/metrics`
//! (Prometheus text), `/stats/rounds` (this project's own: when each beacon
//! was learned here and what it cost), and the replica's client side:
//! `POST /tx` (submit a transaction), `GET /tx/{id}` (the height that committed
//! it), `GET /blocks/{height}`; `GET /epoch` (the member set this node is in)
//! and, for the node's operator only (from a loopback address),
//! `POST /admin/reshare` (propose a change of members, see `consensus::epoch`).
//!
//! Handlers read [`ChainView`], which holds only what the store has made durable.
//!
//! The API runs on its own thread and runtime, so that no client can delay the
//! protocol thread; every request has a time limit, a bounded number run at
//! once (at most half of them waiting for a round), `POST /tx` is
//! rate-limited per client IP (governor) and may require a token, transactions
//! waiting for the event loop are bounded in bytes, and `/stats/rounds` is
//! paginated (`?from=ROUND&limit=N`).

use crate::metrics::Metrics;
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, RawPathParams, Request, State};
use axum::http::{header, request::Parts, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, MethodRouter};
use axum::{Json, Router};
use beacon::chain::{canonical_id, BeaconV2Json, ChainInfoV2Json};
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
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
    /// The latest durable round, for requests waiting for a round.
    announced: watch::Sender<u64>,
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
    /// The epoch of the change of members this node is taking part in (the
    /// chain decided it, or old members invited this joiner): the resharing
    /// and the new members' DKG are under way here. Absent when none is, and
    /// again once the node runs that epoch (or left).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changing_to: Option<u64>,
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
    /// Requests that may wait for a round at once (half the concurrency
    /// limit, so that waiting requests never hold every slot).
    waiting: Semaphore,
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
            waiting: Semaphore::new((limits.http_concurrency / 2).max(1)),
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
    with_cache(
        NO_CACHE,
        (StatusCode::SERVICE_UNAVAILABLE, format!("{what}\n")),
    )
}

fn not_found(what: String) -> Response {
    (StatusCode::NOT_FOUND, format!("{what}\n")).into_response()
}

/// `Cache-Control` of what never changes: past rounds, and requests that can
/// never be served (the relay's header for both).
const IMMUTABLE: &str = "public, max-age=604800, immutable";

/// `Cache-Control` of answers that may change at any time (the relay's).
const NO_CACHE: &str = "must-revalidate, no-cache, max-age=0";

/// `response` with `Cache-Control: cache`.
fn with_cache(cache: &str, response: impl IntoResponse) -> Response {
    let mut response = response.into_response();
    if let Ok(value) = HeaderValue::from_str(cache) {
        response.headers_mut().insert(header::CACHE_CONTROL, value);
    }
    response
}

/// The relay's headers on every drand route: who answers, and that pages of
/// any origin may read the answer.
async fn common_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::SERVER,
        HeaderValue::from_static(concat!("sbft-beacon/", env!("CARGO_PKG_VERSION"))),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    response
}

/// Which version of drand's API a route speaks: v1 beacons carry `randomness`,
/// v2 beacons do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    V1,
    V2,
}

/// The chain a drand route names: this node's (`/info`, `/public/...`), or
/// one by chain hash (`/{chainhash}/...`, `/v2/chains/{chainhash}/...`) or by
/// beacon id (`/v2/beacons/{beacon_id}/...`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Chain {
    This,
    Hash(String),
    Id(String),
}

/// A drand route's path parameters. Like the relay's route patterns, a chain
/// hash is 64 hex digits and a round decimal digits: anything else is no
/// route (404).
struct Target {
    chain: Chain,
    /// The round's digits (it may still be more than a `u64`).
    round: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for Target {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let mut target = Target {
            chain: Chain::This,
            round: None,
        };
        let params = match RawPathParams::from_request_parts(parts, state).await {
            Ok(params) => params,
            Err(RawPathParamsRejection::MissingPathParams(_)) => return Ok(target),
            Err(_) => return Err(no_route(parts.uri.path())),
        };
        for (key, value) in &params {
            let fits = match key {
                "chainhash" => {
                    target.chain = Chain::Hash(value.to_string());
                    value.len() == 64 && value.bytes().all(|b| b.is_ascii_hexdigit())
                }
                "beacon_id" => {
                    target.chain = Chain::Id(value.to_string());
                    true
                }
                "round" => {
                    target.round = Some(value.to_string());
                    !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit())
                }
                _ => true,
            };
            if !fits {
                return Err(no_route(parts.uri.path()));
            }
        }
        Ok(target)
    }
}

/// The relay's answer to a path it has no route for: 404 and the list of
/// drand routes, cacheable as immutable.
fn no_route(path: &str) -> Response {
    static LIST: OnceLock<String> = OnceLock::new();
    let list = LIST.get_or_init(|| {
        drand_routes()
            .iter()
            .map(|(route, _)| format!("GET {route}\n"))
            .collect()
    });
    with_cache(
        IMMUTABLE,
        (
            StatusCode::NOT_FOUND,
            format!("no route {path:?}; drand's routes here are:\n{list}"),
        ),
    )
}

async fn fallback(uri: Uri) -> Response {
    no_route(uri.path())
}

/// This node's chain as one request sees it.
struct Known {
    info: ChainInfo,
    json: ChainInfoJson,
    /// Latest durable round (0 if none).
    latest: u64,
}

/// This node's chain if `chain` names it; else 503 before the DKG and, as the
/// relay answers an unknown chain hash, 400 for another chain hash or beacon id.
fn resolve(s: &ApiState, chain: &Chain) -> Result<Known, Box<Response>> {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let Some((info, json)) = &view.info else {
        return Err(Box::new(unavailable("the DKG has not finished")));
    };
    let unknown = |what: String| Box::new(with_cache(NO_CACHE, (StatusCode::BAD_REQUEST, what)));
    match chain {
        Chain::This => {}
        Chain::Hash(hash) if hash.eq_ignore_ascii_case(&json.hash) => {}
        Chain::Hash(hash) => {
            return Err(unknown(format!(
                "unknown chain hash {hash}; this node serves {}\n",
                json.hash
            )))
        }
        Chain::Id(id) if canonical_id(id) == canonical_id(&info.beacon_id) => {}
        Chain::Id(id) => {
            return Err(unknown(format!(
                "unknown beacon id {id:?}; this node serves {:?}\n",
                canonical_id(&info.beacon_id)
            )))
        }
    }
    Ok(Known {
        info: info.clone(),
        json: json.clone(),
        latest: view.latest(),
    })
}

/// Time since the Unix epoch.
fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Rounds due by Unix time `now` (seconds) on a paced chain: 0 before genesis
/// and on back-to-back chains.
fn rounds_due(info: &ChainInfo, now: i64) -> u64 {
    if info.period == 0 || now < info.genesis_time {
        0
    } else {
        // `now >= genesis_time`, so the saturated difference is the true one
        // up to i64::MAX (a genesis far in the past is a config, not a panic).
        (now.saturating_sub(info.genesis_time) / i64::from(info.period)) as u64 + 1
    }
}

/// The first round not due yet at `now` (the one after `latest` on a
/// back-to-back chain, or if this node is ahead of the clock).
fn next_round(info: &ChainInfo, latest: u64, now: i64) -> u64 {
    rounds_due(info, now).max(latest).saturating_add(1)
}

/// Round `round`'s beacon if it is durable here: from memory, else the store.
fn stored(s: &ApiState, round: u64) -> Option<Beacon> {
    let (recent, latest) = {
        let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
        (view.beacons.get(&round).cloned(), view.latest())
    };
    match recent {
        Some(b) => Some(b),
        None if round != 0 && round <= latest => s.archive.get().and_then(|a| a.beacon(round)),
        None => None,
    }
}

/// `b` in `api`'s JSON shape, with `Cache-Control: cache` if any.
fn beacon_response(b: &Beacon, api: Api, cache: Option<&str>) -> Response {
    let body = match api {
        Api::V1 => Json(BeaconJson::from(b)).into_response(),
        Api::V2 => Json(BeaconV2Json::from(b)).into_response(),
    };
    match cache {
        Some(cache) => with_cache(cache, body),
        None => body,
    }
}

/// 425 Too Early (the relay's answer to a future round), not cacheable.
fn too_early(what: String) -> Response {
    with_cache(
        NO_CACHE,
        (
            StatusCode::TOO_EARLY,
            format!("requested future beacon: {what}\n"),
        ),
    )
}

/// A round that is due but not durable here (yet), not cacheable.
fn not_here(s: &ApiState, round: u64) -> Response {
    let latest = s.chain.read().unwrap_or_else(|e| e.into_inner()).latest();
    with_cache(
        NO_CACHE,
        not_found(format!(
            "round {round} is not known here (yet); the latest is {latest}"
        )),
    )
}

/// Waits for `round` to become durable here: until a period and a second
/// after its time at most (the relay sleeps until the round's time, then
/// drand's node waits that long for it), within 80% of the request's time
/// limit. The answer instead of waiting: 425 when the round is due after that
/// limit, 503 when half the concurrency limit waits already.
async fn await_round(
    s: &ApiState,
    info: &ChainInfo,
    round: u64,
) -> Result<Option<Beacon>, Response> {
    let budget = Duration::from_millis(s.limits.http_timeout_ms) * 4 / 5;
    let due = Duration::from_secs(u64::try_from(info.time_of_round(round)).unwrap_or(0));
    let until_due = due.saturating_sub(unix_now());
    if until_due > budget {
        return Err(too_early(format!(
            "round {round} is due in {:.1} s; this node waits at most {:.1} s for a round",
            until_due.as_secs_f64(),
            budget.as_secs_f64()
        )));
    }
    let wait = (until_due + Duration::from_secs(u64::from(info.period) + 1)).min(budget);
    let Ok(_permit) = s.waiting.try_acquire() else {
        return Err(unavailable(
            "too many requests are waiting for a round; retry",
        ));
    };
    let mut announced = {
        let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
        view.announced.subscribe()
    };
    let arrived = tokio::time::timeout(wait, announced.wait_for(|&latest| latest >= round));
    if !matches!(arrived.await, Ok(Ok(_))) {
        return Ok(None);
    }
    Ok(stored(s, round))
}

/// `/public/{round}` and its siblings: a past round (cacheable as immutable),
/// round 0 as the latest (as the relay answers it), a round due within about
/// one period once it exists ([`await_round`]), 425 for a later one; a round
/// beyond `u64` is 400 (cacheable: it never becomes valid).
async fn beacon_at(s: &ApiState, target: Target, api: Api) -> Response {
    let digits = target.round.unwrap_or_default();
    let Ok(round) = digits.parse::<u64>() else {
        return with_cache(
            IMMUTABLE,
            (
                StatusCode::BAD_REQUEST,
                format!("bad round {digits}: rounds are at most {}\n", u64::MAX),
            ),
        );
    };
    if round == 0 {
        return latest_beacon(s, &target.chain, api);
    }
    let known = match resolve(s, &target.chain) {
        Ok(k) => k,
        Err(r) => return *r,
    };
    if let Some(b) = stored(s, round) {
        return beacon_response(&b, api, Some(IMMUTABLE));
    }
    let now = unix_now().as_secs() as i64;
    let next = next_round(&known.info, known.latest, now);
    if round > next {
        return too_early(format!(
            "round {round} is due at Unix time {}; the next round is {next}",
            known.info.time_of_round(round)
        ));
    }
    match await_round(s, &known.info, round).await {
        Ok(Some(b)) => beacon_response(&b, api, Some(IMMUTABLE)),
        Ok(None) => not_here(s, round),
        Err(r) => r,
    }
}

/// The latest round, cacheable until the next round is due (not at all while
/// the round due now is not here yet, nor on back-to-back chains).
fn latest_beacon(s: &ApiState, chain: &Chain, api: Api) -> Response {
    let known = match resolve(s, chain) {
        Ok(k) => k,
        Err(r) => return *r,
    };
    let Some(b) = stored(s, known.latest) else {
        return with_cache(NO_CACHE, not_found("no beacon yet".into()));
    };
    let now = unix_now().as_secs() as i64;
    let max_age = if b.round < rounds_due(&known.info, now) || known.info.period == 0 {
        0
    } else {
        let next = next_round(&known.info, b.round, now);
        (known.info.time_of_round(next) - now).max(0)
    };
    let cache = format!("public, must-revalidate, max-age={max_age}");
    beacon_response(&b, api, Some(&cache))
}

async fn round_v1(State(s): Shared, target: Target) -> Response {
    beacon_at(&s, target, Api::V1).await
}

async fn round_v2(State(s): Shared, target: Target) -> Response {
    beacon_at(&s, target, Api::V2).await
}

async fn latest_v1(State(s): Shared, target: Target) -> Response {
    latest_beacon(&s, &target.chain, Api::V1)
}

async fn latest_v2(State(s): Shared, target: Target) -> Response {
    latest_beacon(&s, &target.chain, Api::V2)
}

/// `/v2/.../rounds/next`: the round after the latest, once it exists
/// ([`await_round`]); not cacheable (the relay sets no header).
async fn next_v2(State(s): Shared, target: Target) -> Response {
    let known = match resolve(&s, &target.chain) {
        Ok(k) => k,
        Err(r) => return *r,
    };
    let round = known.latest.saturating_add(1);
    match await_round(&s, &known.info, round).await {
        Ok(Some(b)) => beacon_response(&b, Api::V2, None),
        Ok(None) => not_here(&s, round),
        Err(r) => r,
    }
}

async fn info_v1(State(s): Shared, target: Target) -> Response {
    match resolve(&s, &target.chain) {
        Ok(known) => Json(known.json).into_response(),
        Err(r) => *r,
    }
}

async fn info_v2(State(s): Shared, target: Target) -> Response {
    match resolve(&s, &target.chain) {
        Ok(known) => Json(ChainInfoV2Json::from(&known.json)).into_response(),
        Err(r) => *r,
    }
}

/// `/chains`, `/v2/chains`: the chain hashes served here.
async fn chains(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let hashes: Vec<String> = view.info.iter().map(|(_, j)| j.hash.clone()).collect();
    Json(hashes).into_response()
}

/// `/v2/beacons`: the beacon ids served here.
async fn beacon_ids(State(s): Shared) -> Response {
    let view = s.chain.read().unwrap_or_else(|e| e.into_inner());
    let ids: Vec<&str> = view
        .info
        .iter()
        .map(|(i, _)| canonical_id(&i.beacon_id))
        .collect();
    Json(ids).into_response()
}

#[derive(Serialize)]
struct Health {
    current: u64,
    expected: u64,
}

/// `/health` and its siblings: 200 when the latest round is at most one
/// behind the clock, else 503; never cached (the relay's `no-cache`).
async fn health(State(s): Shared, target: Target) -> Response {
    let known = match resolve(&s, &target.chain) {
        Ok(k) => k,
        Err(r) => return with_cache("no-cache", *r),
    };
    let current = known.latest;
    // Back-to-back chains have no schedule: expect what we have.
    let expected = if known.info.period == 0 {
        current
    } else {
        rounds_due(&known.info, unix_now().as_secs() as i64)
    };
    let status = if current + 1 >= expected {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    with_cache("no-cache", (status, Json(Health { current, expected })))
}

/// drand's routes, v1 then v2 (the relay's `SetupRoutes`).
fn drand_routes() -> Vec<(&'static str, MethodRouter<Arc<ApiState>>)> {
    vec![
        ("/chains", get(chains)),
        ("/info", get(info_v1)),
        ("/health", get(health)),
        ("/public/latest", get(latest_v1)),
        ("/public/{round}", get(round_v1)),
        ("/{chainhash}/info", get(info_v1)),
        ("/{chainhash}/health", get(health)),
        ("/{chainhash}/public/latest", get(latest_v1)),
        ("/{chainhash}/public/{round}", get(round_v1)),
        ("/v2/chains", get(chains)),
        ("/v2/chains/{chainhash}/info", get(info_v2)),
        ("/v2/chains/{chainhash}/health", get(health)),
        ("/v2/chains/{chainhash}/rounds/latest", get(latest_v2)),
        ("/v2/chains/{chainhash}/rounds/next", get(next_v2)),
        ("/v2/chains/{chainhash}/rounds/{round}", get(round_v2)),
        ("/v2/beacons", get(beacon_ids)),
        ("/v2/beacons/{beacon_id}/info", get(info_v2)),
        ("/v2/beacons/{beacon_id}/health", get(health)),
        ("/v2/beacons/{beacon_id}/rounds/latest", get(latest_v2)),
        ("/v2/beacons/{beacon_id}/rounds/next", get(next_v2)),
        ("/v2/beacons/{beacon_id}/rounds/{round}", get(round_v2)),
    ]
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
    let drand = drand_routes()
        .into_iter()
        .fold(Router::new(), |r, (route, handler)| r.route(route, handler))
        .layer(axum::middleware::map_response(common_headers));
    Router::new()
        .route("/tx", post(submit))
        .route("/tx/{id}", get(transaction))
        .route("/blocks/{height}", get(block))
        .route("/metrics", get(metrics))
        .route("/stats/rounds", get(rounds))
        .route("/epoch", get(epoch))
        .route("/admin/reshare", post(reshare))
        .merge(drand)
        .fallback(fallback)
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

    // drand's routes (v1 and v2), as drand's http-relay serves them.

    use axum::body::Body;
    use axum::http::HeaderMap;
    use beacon::SchemeId;
    use tower::ServiceExt as _;

    fn api(limits: crate::limits::LimitsSection) -> Arc<ApiState> {
        let (submit, _) = tokio::sync::mpsc::channel(1);
        Arc::new(ApiState::new(
            Arc::new(Metrics::new()),
            submit,
            1024,
            &limits,
        ))
    }

    fn chain_info(scheme: SchemeId, period: u32, genesis_time: i64, id: &str) -> ChainInfo {
        ChainInfo {
            public_key: vec![0xa1; 48],
            period,
            genesis_time,
            genesis_seed: vec![0x5e; 32],
            scheme,
            beacon_id: id.into(),
        }
    }

    /// A chain whose genesis lies at the far end of i64 (a config, not the
    /// network, but still no overflow): the rounds due saturate.
    #[test]
    fn rounds_due_does_not_overflow_on_extreme_genesis_times() {
        let info = chain_info(SchemeId::BlsUnchainedG1Rfc9380, 1, i64::MIN, "default");
        assert_eq!(rounds_due(&info, i64::MAX), i64::MAX as u64 + 1);
        assert_eq!(next_round(&info, u64::MAX, 1), u64::MAX);
        let info = chain_info(SchemeId::BlsUnchainedG1Rfc9380, 3, i64::MAX, "default");
        assert_eq!(rounds_due(&info, 0), 0);
    }

    fn beacon_of(info: &ChainInfo, round: u64) -> Beacon {
        let previous = if round == 1 {
            info.genesis_seed.clone()
        } else {
            vec![round as u8 - 1; 96]
        };
        Beacon::new(info.scheme, round, vec![round as u8; 96], &previous)
    }

    fn add(state: &ApiState, info: &ChainInfo, rounds: std::ops::RangeInclusive<u64>) {
        let mut view = state.chain.write().unwrap();
        for round in rounds {
            view.insert(beacon_of(info, round), block(round));
        }
    }

    /// An API serving `info` with rounds `1..=latest`.
    fn serving(
        info: &ChainInfo,
        latest: u64,
        limits: crate::limits::LimitsSection,
    ) -> Arc<ApiState> {
        let state = api(limits);
        state.chain.write().unwrap().set_info(info.clone());
        add(&state, info, 1..=latest);
        state
    }

    async fn get(state: &Arc<ApiState>, path: &str) -> (StatusCode, HeaderMap, String) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let response = router(state.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, headers, String::from_utf8(body.to_vec()).unwrap())
    }

    fn cache(headers: &HeaderMap) -> &str {
        headers
            .get(header::CACHE_CONTROL)
            .map_or("", |v| v.to_str().unwrap())
    }

    fn now_s() -> i64 {
        unix_now().as_secs() as i64
    }

    /// A paced chain (period 4 s) at 1 s into round 6: rounds 1..=6 are due,
    /// round 7 is due in 2 to 3 s.
    fn paced(scheme: SchemeId) -> ChainInfo {
        chain_info(scheme, 4, now_s() - 4 * 5 - 1, "default")
    }

    #[tokio::test]
    async fn v2_beacons_are_v1_beacons_without_randomness() {
        let info = paced(SchemeId::PedersenBlsChained);
        let state = serving(&info, 6, Default::default());
        let hash = hex::encode(info.hash());
        let sig = hex::encode([3u8; 96]);
        let prev = hex::encode([2u8; 96]);
        let v2 = format!(r#"{{"round":3,"signature":"{sig}","previous_signature":"{prev}"}}"#);
        for path in [
            "/v2/beacons/default/rounds/3".to_string(),
            format!("/v2/chains/{hash}/rounds/3"),
            format!("/v2/chains/{}/rounds/3", hash.to_uppercase()),
        ] {
            let (status, headers, body) = get(&state, &path).await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, v2.as_str()),
                "{path}"
            );
            assert_eq!(cache(&headers), IMMUTABLE, "{path}");
            assert_eq!(headers[header::CONTENT_TYPE], "application/json");
            assert_eq!(headers[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        }
        let random = hex::encode(beacon_of(&info, 3).randomness());
        let v1 = format!(
            r#"{{"round":3,"randomness":"{random}","signature":"{sig}","previous_signature":"{prev}"}}"#
        );
        for path in ["/public/3".to_string(), format!("/{hash}/public/3")] {
            let (status, headers, body) = get(&state, &path).await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, v1.as_str()),
                "{path}"
            );
            assert_eq!(cache(&headers), IMMUTABLE, "{path}");
        }
        // Round 1 chains on the genesis seed.
        let (_, _, body) = get(&state, "/v2/beacons/default/rounds/1").await;
        let one: BeaconV2Json = serde_json::from_str(&body).unwrap();
        assert_eq!(one.previous_signature, hex::encode(&info.genesis_seed));

        // Unchained schemes have no previous signature: the field is absent.
        for scheme in [
            SchemeId::BlsUnchainedG1Rfc9380,
            SchemeId::PedersenBlsUnchained,
        ] {
            let info = paced(scheme);
            let state = serving(&info, 6, Default::default());
            let (_, _, body) = get(&state, "/v2/beacons/default/rounds/3").await;
            assert_eq!(body, format!(r#"{{"round":3,"signature":"{sig}"}}"#));
            let (_, _, body) = get(&state, "/public/3").await;
            assert_eq!(
                body,
                format!(r#"{{"round":3,"randomness":"{random}","signature":"{sig}"}}"#)
            );
        }
    }

    #[tokio::test]
    async fn v2_info_chains_and_beacon_ids() {
        let info = paced(SchemeId::PedersenBlsChained);
        let state = serving(&info, 6, Default::default());
        let hash = hex::encode(info.hash());
        let v2 = format!(
            r#"{{"public_key":"{}","period":4,"genesis_time":{},"genesis_seed":"{}","chain_hash":"{hash}","scheme":"pedersen-bls-chained","beacon_id":"default"}}"#,
            hex::encode(&info.public_key),
            info.genesis_time,
            hex::encode(&info.genesis_seed),
        );
        for path in [
            "/v2/beacons/default/info".to_string(),
            format!("/v2/chains/{hash}/info"),
        ] {
            let (status, headers, body) = get(&state, &path).await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, v2.as_str()),
                "{path}"
            );
            assert_eq!(
                cache(&headers),
                "",
                "the relay sets no Cache-Control on info"
            );
        }
        // v1 info is unchanged: drand's v1 field names.
        let (_, _, body) = get(&state, &format!("/{hash}/info")).await;
        let v1: ChainInfoJson = serde_json::from_str(&body).unwrap();
        assert_eq!(v1, ChainInfoJson::from(&info));
        assert_eq!(get(&state, "/v2/chains").await.2, format!(r#"["{hash}"]"#));
        assert_eq!(get(&state, "/chains").await.2, format!(r#"["{hash}"]"#));
        assert_eq!(get(&state, "/v2/beacons").await.2, r#"["default"]"#);

        // A named beacon is served under its id only.
        let named = chain_info(SchemeId::BlsUnchainedG1Rfc9380, 3, now_s(), "quicknet");
        let state = serving(&named, 0, Default::default());
        assert_eq!(get(&state, "/v2/beacons").await.2, r#"["quicknet"]"#);
        let (status, _, body) = get(&state, "/v2/beacons/quicknet/info").await;
        assert_eq!(status, StatusCode::OK);
        let v2: ChainInfoV2Json = serde_json::from_str(&body).unwrap();
        assert_eq!(
            (v2.beacon_id.as_str(), v2.scheme.as_str(), v2.chain_hash),
            (
                "quicknet",
                "bls-unchained-g1-rfc9380",
                hex::encode(named.hash())
            )
        );
        let (status, headers, body) = get(&state, "/v2/beacons/default/info").await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(body.contains("unknown beacon id"), "{body}");
        assert_eq!(cache(&headers), NO_CACHE);

        // Before the DKG: no chains, and 503 where a chain is needed.
        let state = api(Default::default());
        assert_eq!(get(&state, "/v2/chains").await.2, "[]");
        assert_eq!(get(&state, "/v2/beacons").await.2, "[]");
        for path in [
            "/v2/beacons/default/info",
            "/v2/beacons/default/rounds/1",
            "/v2/beacons/default/rounds/latest",
            "/public/1",
            "/info",
        ] {
            let (status, headers, _) = get(&state, path).await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(cache(&headers), NO_CACHE, "{path}");
        }
    }

    #[tokio::test]
    async fn bad_input_gets_the_relays_status() {
        let info = paced(SchemeId::PedersenBlsChained);
        let state = serving(&info, 6, Default::default());
        let hash = hex::encode(info.hash());
        let other = "ab".repeat(32);
        let too_early = StatusCode::TOO_EARLY;
        for (path, status, cache_control) in [
            // Not a route (the relay's patterns: decimal rounds, 64-hex hashes).
            ("/public/abc".to_string(), StatusCode::NOT_FOUND, IMMUTABLE),
            ("/public/-1".into(), StatusCode::NOT_FOUND, IMMUTABLE),
            ("/public/+5".into(), StatusCode::NOT_FOUND, IMMUTABLE),
            ("/public/1e3".into(), StatusCode::NOT_FOUND, IMMUTABLE),
            (
                "/v2/beacons/default/rounds/abc".into(),
                StatusCode::NOT_FOUND,
                IMMUTABLE,
            ),
            (
                "/v2/beacons/default/rounds/".into(),
                StatusCode::NOT_FOUND,
                IMMUTABLE,
            ),
            (
                "/v2/chains/abcd/info".into(),
                StatusCode::NOT_FOUND,
                IMMUTABLE,
            ),
            (
                format!("/v2/chains/{}/info", &hash[1..]),
                StatusCode::NOT_FOUND,
                IMMUTABLE,
            ),
            (
                format!("/{}z/info", &hash[1..]),
                StatusCode::NOT_FOUND,
                IMMUTABLE,
            ),
            ("/v3/beacons".into(), StatusCode::NOT_FOUND, IMMUTABLE),
            // Digits beyond u64.
            (
                "/public/18446744073709551616".into(),
                StatusCode::BAD_REQUEST,
                IMMUTABLE,
            ),
            (
                "/v2/beacons/default/rounds/99999999999999999999999".into(),
                StatusCode::BAD_REQUEST,
                IMMUTABLE,
            ),
            // Another chain.
            (
                format!("/{other}/public/1"),
                StatusCode::BAD_REQUEST,
                NO_CACHE,
            ),
            (format!("/{other}/info"), StatusCode::BAD_REQUEST, NO_CACHE),
            (
                format!("/v2/chains/{other}/rounds/1"),
                StatusCode::BAD_REQUEST,
                NO_CACHE,
            ),
            (
                format!("/v2/chains/{other}/rounds/latest"),
                StatusCode::BAD_REQUEST,
                NO_CACHE,
            ),
            (
                "/v2/beacons/evmnet/rounds/1".into(),
                StatusCode::BAD_REQUEST,
                NO_CACHE,
            ),
            (
                "/v2/beacons/evmnet/info".into(),
                StatusCode::BAD_REQUEST,
                NO_CACHE,
            ),
            // Rounds after the next one (due within one period): too early.
            ("/public/8".into(), too_early, NO_CACHE),
            (
                "/v2/beacons/default/rounds/1000".into(),
                too_early,
                NO_CACHE,
            ),
            ("/public/18446744073709551615".into(), too_early, NO_CACHE),
            (
                format!("/v2/chains/{hash}/rounds/18446744073709551615"),
                too_early,
                NO_CACHE,
            ),
        ] {
            let (got, headers, body) = get(&state, &path).await;
            assert_eq!(got, status, "{path}: {body}");
            assert_eq!(cache(&headers), cache_control, "{path}");
            assert!(body.ends_with('\n') && body.len() > 10, "{path}: {body:?}");
        }
        let (_, _, body) = get(&state, "/public/abc").await;
        assert!(
            body.contains("GET /v2/beacons/{beacon_id}/rounds/{round}"),
            "{body}"
        );
    }

    #[tokio::test]
    async fn latest_is_cacheable_until_the_next_round_is_due() {
        let info = paced(SchemeId::PedersenBlsChained);
        let state = serving(&info, 6, Default::default());
        for path in [
            "/public/latest",
            "/public/0",
            "/v2/beacons/default/rounds/latest",
            "/v2/beacons/default/rounds/0",
        ] {
            let (status, headers, body) = get(&state, path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(
                serde_json::from_str::<BeaconV2Json>(&body).unwrap().round,
                6
            );
            let age: i64 = cache(&headers)
                .strip_prefix("public, must-revalidate, max-age=")
                .and_then(|a| a.parse().ok())
                .unwrap_or_else(|| panic!("{path}: {:?}", cache(&headers)));
            // Round 7 is due 2 to 3 s from now.
            assert!((1..=4).contains(&age), "{path}: max-age={age}");
        }
        let (_, _, body) = get(&state, "/v2/beacons/default/rounds/latest").await;
        assert!(!body.contains("randomness"), "{body}");
        let (_, _, body) = get(&state, "/public/latest").await;
        assert!(body.contains("randomness"), "{body}");

        // While the round due now is not here yet, the latest is not cached.
        let state = serving(&info, 5, Default::default());
        let (_, headers, _) = get(&state, "/public/latest").await;
        assert_eq!(cache(&headers), "public, must-revalidate, max-age=0");
        // Nor before the first beacon.
        let state = serving(&info, 0, Default::default());
        let (status, headers, _) = get(&state, "/v2/beacons/default/rounds/latest").await;
        assert_eq!((status, cache(&headers)), (StatusCode::NOT_FOUND, NO_CACHE));

        // Health is never cached, on every route.
        let state = serving(&info, 6, Default::default());
        let hash = hex::encode(info.hash());
        for path in [
            "/health".to_string(),
            format!("/{hash}/health"),
            format!("/v2/chains/{hash}/health"),
            "/v2/beacons/default/health".into(),
        ] {
            let (status, headers, body) = get(&state, &path).await;
            assert_eq!(status, StatusCode::OK, "{path}");
            assert_eq!(body, r#"{"current":6,"expected":6}"#, "{path}");
            assert_eq!(cache(&headers), "no-cache", "{path}");
        }
        let state = serving(&info, 4, Default::default());
        let (status, headers, _) = get(&state, "/v2/beacons/default/health").await;
        assert_eq!(
            (status, cache(&headers)),
            (StatusCode::SERVICE_UNAVAILABLE, "no-cache")
        );
    }

    #[tokio::test]
    async fn a_round_due_within_one_period_is_awaited() {
        let info = paced(SchemeId::PedersenBlsChained);
        let state = serving(&info, 6, Default::default());
        let started = std::time::Instant::now();
        let produce = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            add(&state, &info, 7..=7);
        };
        let ((status, headers, body), ()) =
            tokio::join!(get(&state, "/v2/beacons/default/rounds/7"), produce);
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            serde_json::from_str::<BeaconV2Json>(&body).unwrap().round,
            7
        );
        assert_eq!(cache(&headers), IMMUTABLE);
        assert!(started.elapsed() >= Duration::from_millis(300));

        // `next`: the round after the latest, when it comes; not cached.
        let state = serving(&info, 6, Default::default());
        let started = std::time::Instant::now();
        let produce = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            add(&state, &info, 7..=7);
        };
        let ((status, headers, body), ()) =
            tokio::join!(get(&state, "/v2/beacons/default/rounds/next"), produce);
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(
            body,
            serde_json::to_string(&BeaconV2Json::from(&beacon_of(&info, 7))).unwrap()
        );
        assert_eq!(cache(&headers), "");
        assert!(started.elapsed() >= Duration::from_millis(200));
    }

    #[tokio::test]
    async fn waiting_for_a_round_is_bounded() {
        // The next round is due in 2 to 3 s, after this API's time limit
        // (0.8 s of 1 s): too early, at once.
        let info = paced(SchemeId::PedersenBlsChained);
        let limits = crate::limits::LimitsSection {
            http_timeout_ms: 1_000,
            ..Default::default()
        };
        let state = serving(&info, 6, limits);
        let started = std::time::Instant::now();
        let (status, headers, body) = get(&state, "/v2/beacons/default/rounds/7").await;
        assert_eq!(status, StatusCode::TOO_EARLY, "{body}");
        assert_eq!(cache(&headers), NO_CACHE);
        let (status, _, _) = get(&state, "/v2/beacons/default/rounds/next").await;
        assert_eq!(status, StatusCode::TOO_EARLY);
        assert!(started.elapsed() < Duration::from_millis(500));

        // A back-to-back chain: the round after the latest is awaited, for
        // 0.4 s here (of 0.5 s); one that never comes is 404, not cached.
        let info = chain_info(SchemeId::BlsChainedG1Rfc9380, 0, now_s() - 60, "default");
        let limits = crate::limits::LimitsSection {
            http_timeout_ms: 500,
            ..Default::default()
        };
        let state = serving(&info, 3, limits);
        let started = std::time::Instant::now();
        let (status, headers, body) = get(&state, "/public/4").await;
        let waited = started.elapsed();
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_eq!(cache(&headers), NO_CACHE);
        assert!(body.contains("latest is 3"), "{body}");
        assert!(
            waited >= Duration::from_millis(350) && waited < Duration::from_millis(500),
            "{waited:?}"
        );
        let (status, _, _) = get(&state, "/public/5").await;
        assert_eq!(status, StatusCode::TOO_EARLY);

        // At most half the concurrency limit waits; the others are told to retry.
        let limits = crate::limits::LimitsSection {
            http_timeout_ms: 500,
            http_concurrency: 4,
            ..Default::default()
        };
        let state = serving(&info, 3, limits);
        let answers = futures::future::join_all((0..3).map(|_| get(&state, "/public/4"))).await;
        let mut statuses: Vec<u16> = answers.iter().map(|(s, _, _)| s.as_u16()).collect();
        statuses.sort();
        assert_eq!(statuses, [404, 404, 503]);
    }
}
