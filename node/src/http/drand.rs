//! drand's routes, v1 and v2, as drand's http-relay serves them: which chain
//! and round a path names, the beacons (from memory, the store, or awaited
//! when due soon), the chain info, `/health`, and the relay's answers to
//! paths it has no route for.

use super::{not_found, unavailable, with_cache, ApiState, Shared, IMMUTABLE, NO_CACHE};
use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{FromRequestParts, RawPathParams, State};
use axum::http::{header, request::Parts, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use axum::Json;
use beacon::chain::{canonical_id, BeaconV2Json, ChainInfoV2Json};
use beacon::{Beacon, BeaconJson, ChainInfo, ChainInfoJson};
use serde::Serialize;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The relay's headers on every drand route: who answers, and that pages of
/// any origin may read the answer.
pub(super) async fn common_headers(mut response: Response) -> Response {
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

pub(super) async fn fallback(uri: Uri) -> Response {
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
pub(super) fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The first round not due yet at Unix time `now` (seconds), or the one
/// after `latest` on a back-to-back chain or if this node is ahead of the
/// clock ([`beacon::time::RoundSchedule::rounds_due`]).
pub(super) fn next_round(info: &ChainInfo, latest: u64, now: i64) -> u64 {
    info.schedule()
        .rounds_due(i128::from(now))
        .max(latest)
        .saturating_add(1)
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
    let wait = (until_due + info.round_period().as_duration() + Duration::from_secs(1)).min(budget);
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
    let due = known.info.schedule().rounds_due(i128::from(now));
    let max_age = if b.round < due || known.info.period == 0 {
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
    /// What fails to be written, while the disk refuses writes.
    #[serde(skip_serializing_if = "Option::is_none")]
    disk: Option<String>,
}

/// `/health` and its siblings: 200 when the latest round is at most one
/// behind the clock and the disk takes writes, else 503 (with `disk`: what
/// fails to be written); never cached (the relay's `no-cache`).
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
        known
            .info
            .schedule()
            .rounds_due(i128::from(unix_now().as_secs()))
    };
    let disk = s.disk.failing();
    let status = if current + 1 >= expected && disk.is_none() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let health = Health {
        current,
        expected,
        disk,
    };
    with_cache("no-cache", (status, Json(health)))
}

/// drand's routes, v1 then v2 (the relay's `SetupRoutes`).
pub(super) fn drand_routes() -> Vec<(&'static str, MethodRouter<Arc<ApiState>>)> {
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
