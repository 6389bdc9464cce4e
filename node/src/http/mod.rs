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
//!
//! Files: `state.rs` what the handlers share, `drand.rs` drand's routes,
//! `node_routes.rs` the node's own; here the router, the server thread, the
//! answers every route gives, and the client calls other commands make.

mod drand;
mod node_routes;
mod state;
#[cfg(test)]
mod tests;

pub use state::{
    AdminRequest, ApiState, BlockJson, ChainArchive, ChainView, EpochJson, ProposalRefused,
    ReshareAccepted, ReshareRequest, RoundStat, Submitted,
};

use crate::net::NetworkError;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use drand::{common_headers, drand_routes, fallback};
use node_routes::{block, epoch, metrics, reshare, rounds, submit, transaction};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tracing::info;

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
    let post = client.post(&url).json(request);
    Ok(exchange(post, reqwest::Method::POST, url).await?)
}

/// Fetches `url` from a node's API as JSON; a failed request, a non-success
/// status or a body that is not JSON is an error naming the URL.
pub async fn get_json(
    client: &reqwest::Client,
    url: &str,
) -> Result<serde_json::Value, crate::NodeError> {
    let get = client.get(url);
    Ok(exchange(get, reqwest::Method::GET, url.to_string()).await?)
}

/// Sends `request` (`method` to `url`, named in errors) and decodes the
/// answer's JSON: a failed request, a status other than success (with the
/// answer's text) or an answer that does not decode as `T` is an error.
async fn exchange<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
    method: reqwest::Method,
    url: String,
) -> Result<T, NetworkError> {
    let response = match request.send().await {
        Ok(response) => response,
        Err(source) => {
            return Err(NetworkError::Request {
                method,
                url,
                source,
            })
        }
    };
    let status = response.status();
    if !status.is_success() {
        let body = response.text().await.unwrap_or_default().trim().to_string();
        return Err(NetworkError::Status {
            method,
            url,
            status,
            body,
        });
    }
    response.json().await.map_err(|source| NetworkError::Json {
        method,
        url,
        source,
    })
}

/// Binds `addr` and serves the API on a thread of its own (with its own
/// single-threaded runtime), apart from the protocol thread.
pub fn serve(
    addr: SocketAddr,
    state: Arc<ApiState>,
) -> Result<std::thread::JoinHandle<()>, crate::NodeError> {
    let io = |source: std::io::Error| crate::NodeError::HttpApi { addr, source };
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
