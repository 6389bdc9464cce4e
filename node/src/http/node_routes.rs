//! The node's own routes (beside drand's): `/metrics`, `/stats/rounds`, the
//! replica's client side (`POST /tx`, `GET /tx/{id}`, `GET /blocks/{height}`),
//! `GET /epoch` and the operator's `POST /admin/reshare`.

use super::{not_found, unavailable, ApiState, ProposalRefused, ReshareRequest, RoundStat, Shared};
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use sha2::Digest as _;
use std::net::{IpAddr, SocketAddr};

pub(super) async fn metrics(State(s): Shared) -> Response {
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
pub(super) struct Page {
    #[serde(default)]
    from: u64,
    limit: Option<usize>,
}

pub(super) async fn rounds(State(s): Shared, Query(page): Query<Page>) -> Response {
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

pub(super) async fn submit(State(s): Shared, request: Request) -> Response {
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

pub(super) async fn transaction(State(s): Shared, Path(id): Path<String>) -> Response {
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

pub(super) async fn block(State(s): Shared, Path(height): Path<String>) -> Response {
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

pub(super) async fn epoch(State(s): Shared) -> Response {
    let view = s.epoch.read().unwrap_or_else(|e| e.into_inner()).clone();
    Json(view).into_response()
}

/// `POST /admin/reshare`: only from a loopback address (the operator on the
/// node's own machine); the event loop checks the change and signs it.
pub(super) async fn reshare(
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
        Ok(Err(reason @ ProposalRefused::Disk(_))) => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{reason}\n")).into_response()
        }
        Ok(Err(reason)) => (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response(),
        Err(_) => unavailable("the node stopped"),
    }
}
