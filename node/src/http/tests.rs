use super::drand::{next_round, unix_now};
use super::state::{RECENT_BEACONS, RECENT_BLOCKS, ROUND_STATS};
use super::{router, ApiState, BlockJson, ChainView, RoundStat, IMMUTABLE, NO_CACHE};
use crate::metrics::Metrics;
use axum::extract::Request;
use axum::http::{header, StatusCode};
use beacon::chain::{BeaconV2Json, ChainInfoV2Json};
use beacon::{Beacon, ChainInfo, ChainInfoJson};
use std::sync::Arc;
use std::time::Duration;

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
    let due = |info: &ChainInfo, now: i64| info.schedule().rounds_due(i128::from(now));
    assert_eq!(due(&info, i64::MAX), u64::MAX);
    assert_eq!(next_round(&info, u64::MAX, 1), u64::MAX);
    let info = chain_info(SchemeId::BlsUnchainedG1Rfc9380, 3, i64::MAX, "default");
    assert_eq!(due(&info, 0), 0);
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
fn serving(info: &ChainInfo, latest: u64, limits: crate::limits::LimitsSection) -> Arc<ApiState> {
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

/// The admin API's refusals read as the text it answered before they had a
/// type.
#[test]
fn proposal_refusals_read_as_before() {
    use super::ProposalRefused;
    use consensus::epoch::ChangeRefused;
    let peer = ProposalRefused::NotAPeer {
        peer: "12D3KooW".into(),
    };
    assert_eq!(
        peer.to_string(),
        "12D3KooW is not in this node's [[peers]]: add it to every member's config first"
    );
    assert_eq!(
        ProposalRefused::NoCollectorSlack { n: 6 }.to_string(),
        "6 members fit no n = 3f + 2c + 1 with c <= 2"
    );
    assert_eq!(
        ProposalRefused::NotRunning.to_string(),
        "this node is not a running member of the current epoch"
    );
    let refused = ProposalRefused::from(ChangeRefused::NotNextEpoch {
        proposed: consensus::Epoch::new(3),
        current: consensus::Epoch::new(1),
    });
    assert_eq!(refused.to_string(), "epoch 3 does not follow epoch 1");
}
