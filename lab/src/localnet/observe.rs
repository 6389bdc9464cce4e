//! What the network does, measured over HTTP: the wait for round one, the
//! rounds (latency, traffic, CPU, memory), the chain every node serves and
//! whether it verifies, and a client load.

use super::procs::{process_cpu_s, rss_mb, tail, Proc};
use anyhow::{bail, Context, Result};
use beacon::{Beacon, BeaconJson, ChainInfoJson};
use sim::report::{percentiles, Percentiles};
use std::time::{Duration, Instant};

/// What the network did, measured over HTTP.
pub(super) struct Outcome {
    pub(super) chain_identical: bool,
    pub(super) chain_verified: bool,
    /// Round latency samples (rounds 2..=R on every node).
    pub(super) samples: usize,
    pub(super) latency: Percentiles,
    /// Per round 2..=R: the median of its latency over the nodes (ms), as the
    /// simulator's per-round figures.
    pub(super) per_round_p50: Vec<f64>,
    /// Commit latency samples (rounds 2..=R on every node).
    pub(super) commit_latency: Percentiles,
    /// Traffic and commit paths, from the nodes' metrics.
    pub(super) traffic: Traffic,
    /// Delay after the scheduled time (paced chains).
    pub(super) delay: Percentiles,
    pub(super) protocol_cpu: Percentiles,
    pub(super) process_cpu: Percentiles,
    /// Resident set size of each node (MB) once a quarter of the rounds are
    /// done (after warm-up) and at the end.
    pub(super) rss_warm_mb: Vec<f64>,
    pub(super) rss_end_mb: Vec<f64>,
    /// RSS of each node (MB) one minute into the rounds (at the end of a
    /// shorter run), and the largest sampled (every second).
    pub(super) rss_first_mb: Vec<f64>,
    pub(super) rss_max_mb: Vec<f64>,
    /// Seconds from launching the processes to every node serving round 1.
    pub(super) startup_s: f64,
    /// CPU seconds the nodes spent until then, all together (on a shared
    /// machine the figure that does not depend on the others' load).
    pub(super) startup_cpu_s: f64,
}

/// The latest round node `p` serves (0 while it serves none); an error, with
/// its log, if it exited.
pub(super) async fn latest_round(client: &reqwest::Client, p: &mut Proc) -> Result<u64> {
    if let Ok(Some(status)) = p.child.try_wait() {
        bail!(
            "a node exited early ({status}); its log {}:\n{}",
            p.log.display(),
            tail(&p.log)
        );
    }
    Ok(
        node::http::get_json(client, &format!("{}/public/latest", p.http))
            .await
            .ok()
            .and_then(|v| v["round"].as_u64())
            .unwrap_or(0),
    )
}

/// Waits until every node serves round 1; returns the seconds since `launched`.
/// Asks one node at a time (every 50 ms until it serves, then the next), so
/// that polling costs the nodes next to nothing while they start.
pub(super) async fn wait_for_round_one(
    client: &reqwest::Client,
    procs: &mut [Proc],
    launched: Instant,
    timeout: Duration,
) -> Result<f64> {
    let count = procs.len();
    for (i, p) in procs.iter_mut().enumerate() {
        loop {
            let latest = latest_round(client, p).await?;
            if latest >= 1 {
                break;
            }
            if launched.elapsed() > timeout {
                bail!(
                    "{} of {count} nodes serve no beacon after {} s",
                    count - i,
                    timeout.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(launched.elapsed().as_secs_f64())
}

/// Posts `count` transactions of 64 KiB to `api` (retrying while it starts).
pub(super) async fn flood(client: reqwest::Client, api: String, node: usize, count: u32) {
    for k in 0..count {
        let mut tx = vec![node as u8; 64 * 1024];
        tx[..4].copy_from_slice(&k.to_be_bytes());
        for _ in 0..100 {
            let r = client
                .post(format!("{api}/tx"))
                .body(tx.clone())
                .send()
                .await;
            if r.is_ok_and(|r| r.status() != reqwest::StatusCode::TOO_MANY_REQUESTS) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

pub(super) async fn observe(
    procs: &mut [Proc],
    launched: Instant,
    rounds: u64,
    timeout: Duration,
    flood_count: u32,
) -> Result<Outcome> {
    let client = node_cli::http_client::local_client(Duration::from_secs(5))?;
    let startup_s = wait_for_round_one(&client, procs, launched, timeout).await?;
    let startup_cpu_s = procs.iter().map(|p| process_cpu_s(p.child.id())).sum();
    let start = Instant::now();
    let floods: Vec<_> = procs
        .iter()
        .enumerate()
        .filter(|_| flood_count > 0)
        .map(|(i, p)| tokio::spawn(flood(client.clone(), p.http.clone(), i, flood_count)))
        .collect();
    let mut rss_warm_mb = Vec::new();
    let procs_pids: Vec<u32> = procs.iter().map(|p| p.child.id()).collect();
    let procs_rss = |pids: &[u32]| pids.iter().map(|&p| rss_mb(p)).collect::<Vec<f64>>();
    let mut rss_first_mb: Vec<f64> = Vec::new();
    let mut rss_max_mb = vec![0.0f64; procs_pids.len()];
    let mut rss_sampled = Instant::now();
    // Wait for every node to serve round `rounds`.
    for p in procs.iter_mut() {
        loop {
            let latest = latest_round(&client, p).await?;
            if rss_warm_mb.is_empty() && latest >= (rounds / 4).max(2) {
                rss_warm_mb = procs_rss(procs_pids.as_slice());
            }
            if rss_sampled.elapsed() >= Duration::from_secs(1) {
                rss_sampled = Instant::now();
                let now = procs_rss(&procs_pids);
                for (m, r) in rss_max_mb.iter_mut().zip(&now) {
                    *m = m.max(*r);
                }
                if rss_first_mb.is_empty() && start.elapsed() >= Duration::from_secs(60) {
                    rss_first_mb = now;
                }
            }
            if latest >= rounds {
                break;
            }
            if start.elapsed() > timeout {
                bail!(
                    "no beacon {rounds} after {} s (node at {} has {latest}); its log {}:\n{}",
                    timeout.as_secs(),
                    p.http,
                    p.log.display(),
                    tail(&p.log)
                );
            }
            // Seldom enough not to weigh on the node polled (20 polls a second
            // took 3.5% of its CPU, on its HTTP thread).
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let rss_end_mb = procs_rss(&procs_pids);
    for (m, r) in rss_max_mb.iter_mut().zip(&rss_end_mb) {
        *m = m.max(*r);
    }
    if rss_first_mb.is_empty() {
        rss_first_mb = rss_end_mb.clone();
    }
    for f in floods {
        f.abort();
    }
    // Every node's rounds 1..=rounds.
    let mut chains: Vec<Vec<serde_json::Value>> = Vec::new();
    for p in procs.iter() {
        let mut chain = Vec::new();
        for r in 1..=rounds {
            chain.push(node::http::get_json(&client, &format!("{}/public/{r}", p.http)).await?);
        }
        chains.push(chain);
    }
    let chain_identical = chains.iter().all(|c| *c == chains[0]);
    let info = node::http::get_json(&client, &format!("{}/info", procs[0].http)).await?;
    let chain_verified = verifies(info, &chains[0])?;
    // Latency and CPU of rounds 2..=rounds (round 1 waits for the DKG's stragglers).
    let (mut latencies, mut protocol_cpu, mut process_cpu) = (Vec::new(), Vec::new(), Vec::new());
    let mut delays = Vec::new();
    let mut by_round: std::collections::BTreeMap<u64, Vec<f64>> = Default::default();
    let mut commit_latencies = Vec::new();
    for p in procs.iter() {
        for s in stats_rounds(&client, &p.http, 2, rounds).await? {
            let round = s["round"].as_u64().unwrap_or(0);
            if (2..=rounds).contains(&round) {
                let latency = s["latency_ms"].as_f64().unwrap_or(0.0);
                latencies.push(latency);
                if let Some(c) = s["commit_latency_ms"].as_f64() {
                    commit_latencies.push(c);
                }
                by_round.entry(round).or_default().push(latency);
                if let Some(d) = s["delay_ms"].as_f64() {
                    delays.push(d);
                }
                protocol_cpu.push(s["protocol_cpu_ms"].as_f64().unwrap_or(0.0));
                process_cpu.push(s["process_cpu_ms"].as_f64().unwrap_or(0.0));
            }
        }
    }
    Ok(Outcome {
        chain_identical,
        chain_verified,
        samples: latencies.len(),
        latency: percentiles(&latencies),
        per_round_p50: by_round.values().map(|v| percentiles(v).p50).collect(),
        commit_latency: percentiles(&commit_latencies),
        traffic: traffic(&client, procs).await?,
        delay: percentiles(&delays),
        protocol_cpu: percentiles(&protocol_cpu),
        process_cpu: percentiles(&process_cpu),
        rss_warm_mb,
        rss_end_mb,
        rss_first_mb,
        rss_max_mb,
        startup_s,
        startup_cpu_s,
    })
}

/// Consensus traffic and commit paths of a network, from its nodes' metrics.
#[derive(Debug, Default, PartialEq, serde::Serialize)]
pub(super) struct Traffic {
    /// Consensus messages per finalized height, all nodes together (one per
    /// receiver: the simulator's `messages_per_round`).
    pub(super) messages_per_round: f64,
    /// The same by kind.
    pub(super) messages_by_kind: std::collections::BTreeMap<String, f64>,
    /// Share of the heights committed by the fast path (the mean of the nodes').
    pub(super) fast_path_ratio: f64,
}

/// Reads each node's `/metrics` once: messages sent and commits by path,
/// over its finalized height in the same answer (the nodes keep running).
pub(super) async fn traffic(client: &reqwest::Client, procs: &[Proc]) -> Result<Traffic> {
    let mut out = Traffic::default();
    let mut ratios = Vec::new();
    for p in procs {
        let text = client
            .get(format!("{}/metrics", p.http))
            .send()
            .await?
            .text()
            .await?;
        let metrics = node::metrics::TrafficSample::parse(&text);
        if metrics.height == 0 {
            continue;
        }
        for (kind, count) in &metrics.sent {
            let per_round = count / metrics.height as f64;
            *out.messages_by_kind.entry(kind.clone()).or_default() += per_round;
            out.messages_per_round += per_round;
        }
        if metrics.fast + metrics.slow > 0.0 {
            ratios.push(metrics.fast / (metrics.fast + metrics.slow));
        }
    }
    if !ratios.is_empty() {
        out.fast_path_ratio = ratios.iter().sum::<f64>() / ratios.len() as f64;
    }
    Ok(out)
}

/// Whether `chain` (`/public/{r}` answers from round 1 on) verifies under
/// `info` (a node's `/info`) with drand's rules.
pub(crate) fn verifies(info: serde_json::Value, chain: &[serde_json::Value]) -> Result<bool> {
    let info: ChainInfoJson = serde_json::from_value(info).context("/info is not drand's shape")?;
    let info = info.to_info()?;
    let beacons: Vec<Beacon> = chain
        .iter()
        .map(|v| {
            serde_json::from_value::<BeaconJson>(v.clone())
                .map_err(anyhow::Error::from)
                .and_then(|b| b.to_beacon().map_err(anyhow::Error::from))
        })
        .collect::<Result<_>>()?;
    Ok(info.verify_chain(None, &beacons).is_ok())
}

/// The round statistics of rounds `from..=to` of the node at `api`, page by page.
pub(super) async fn stats_rounds(
    client: &reqwest::Client,
    api: &str,
    from: u64,
    to: u64,
) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::new();
    let mut next = from;
    while next <= to {
        let url = format!("{api}/stats/rounds?from={next}");
        let page = node::http::get_json(client, &url).await?;
        let page = page.as_array().cloned().unwrap_or_default();
        let Some(last) = page.last().and_then(|s| s["round"].as_u64()) else {
            break;
        };
        out.extend(page);
        next = last + 1;
    }
    Ok(out)
}
