//! `localnet --reshare-to`: a change of members on the running network,
//! observed until every member of the new epoch runs it with the same group
//! key.

use super::observe::{latest_round, stats_rounds, verifies};
use super::procs::{keep_or_stop, spawn_all, stop, tail, Proc};
use super::LocalnetArgs;
use anyhow::{bail, Result};
use node::config::NodeConfig;
use serde_json::json;
use sim::report::{percentiles, Percentiles};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a change of members went on a local network.
pub(super) struct ReshareOutcome {
    /// Group key (hex) served before the change and by every member after it.
    pub(super) group_key_before: String,
    pub(super) group_key_unchanged: bool,
    /// The round after which the members proposed.
    pub(super) proposed_after: u64,
    /// The first height of the new epoch.
    pub(super) epoch_start: u64,
    /// Seconds from the proposals to every new member running the new epoch
    /// (and every leaver retired).
    pub(super) switch_s: f64,
    /// Seconds from the switch to every joiner serving round 1 (backfill).
    pub(super) backfill_s: f64,
    /// The last round checked on every new member.
    pub(super) checked_to: u64,
    pub(super) chain_identical: bool,
    pub(super) chain_verified: bool,
    pub(super) latency: Percentiles,
    pub(super) samples: usize,
}

/// `GET /epoch` of a node (status and epoch), or none while it cannot answer.
pub(super) async fn epoch_of(
    client: &reqwest::Client,
    p: &mut Proc,
) -> Result<Option<(u64, String, u64)>> {
    if let Ok(Some(status)) = p.child.try_wait() {
        bail!(
            "a node exited early ({status}); its log {}:\n{}",
            p.log.display(),
            tail(&p.log)
        );
    }
    Ok(epoch_at(client, &p.http).await)
}

/// `GET /epoch` of the node serving HTTP at `http`: epoch, status, first
/// height (none while it cannot answer).
pub(crate) async fn epoch_at(client: &reqwest::Client, http: &str) -> Option<(u64, String, u64)> {
    let v = node::http::get_json(client, &format!("{http}/epoch"))
        .await
        .ok()?;
    Some((
        v["epoch"].as_u64().unwrap_or(0),
        v["status"].as_str().unwrap_or("").to_string(),
        v["start"].as_u64().unwrap_or(0),
    ))
}

/// The changes whose deal the node at `http` still keeps (`GET /epoch`'s
/// `retained_deals`); `None` while it cannot answer.
pub(crate) async fn retained_deals_at(client: &reqwest::Client, http: &str) -> Option<Vec<u64>> {
    let v = node::http::get_json(client, &format!("{http}/epoch"))
        .await
        .ok()?;
    Some(
        v["retained_deals"]
            .as_array()?
            .iter()
            .filter_map(serde_json::Value::as_u64)
            .collect(),
    )
}

/// What a node of a change of members shows over HTTP.
#[derive(Debug)]
pub(super) struct Seen {
    /// `GET /epoch`: epoch, status, first height (none while it cannot answer).
    pub(super) epoch: Option<(u64, String, u64)>,
    /// The latest round it serves.
    pub(super) latest: u64,
    /// Whether it serves round 1 (a joiner, once its backfill is over).
    pub(super) first_round: bool,
}

/// Polls the nodes `which` of `procs` until `check` holds for each, or fails
/// at `deadline` naming `what`.
pub(super) async fn wait_all<F>(
    client: &reqwest::Client,
    procs: &mut [Proc],
    which: &[usize],
    deadline: Instant,
    what: &str,
    mut check: F,
) -> Result<()>
where
    F: FnMut(&Seen) -> bool,
{
    for &i in which {
        loop {
            let seen = Seen {
                epoch: epoch_of(client, &mut procs[i]).await?,
                latest: latest_round(client, &mut procs[i]).await?,
                first_round: node::http::get_json(client, &format!("{}/public/1", procs[i].http))
                    .await
                    .is_ok(),
            };
            if check(&seen) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "node {i} {what} in time ({seen:?}); its log {}:\n{}",
                    procs[i].log.display(),
                    tail(&procs[i].log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

pub(super) async fn observe_reshare(
    procs: &mut [Proc],
    configs: &[(PathBuf, String)],
    genesis: u32,
    to: u32,
    rounds: u64,
    propose_after: u64,
    timeout: Duration,
) -> Result<ReshareOutcome> {
    let client = node_cli::http_client::local_client(Duration::from_secs(5))?;
    let deadline = Instant::now() + timeout;
    let old: Vec<usize> = (0..genesis as usize).collect();
    let new: Vec<usize> = (0..to as usize).collect();
    let leavers: Vec<usize> = (to as usize..genesis as usize).collect();
    let joiners: Vec<usize> = (genesis as usize..to as usize).collect();
    wait_all(
        &client,
        procs,
        &old,
        deadline,
        "served no round after the proposal round",
        |s| s.latest >= propose_after,
    )
    .await?;
    let info = node::http::get_json(&client, &format!("{}/info", procs[0].http)).await?;
    let group_key_before = info["public_key"].as_str().unwrap_or("").to_string();
    let proposed_after = latest_round(&client, &mut procs[0]).await?;
    // Every genesis member's operator proposes the same change.
    let members: Vec<String> = (0..to as usize)
        .map(|i| -> Result<String> {
            let cfg = NodeConfig::load(&configs[i].0)?;
            Ok(cfg.me().id.to_string())
        })
        .collect::<Result<_>>()?;
    let request = node::http::ReshareRequest {
        members,
        c: None,
        beacon_threshold: 0,
    };
    let proposed = Instant::now();
    for p in procs.iter().take(genesis as usize) {
        node::http::post_reshare(&client, &p.http, &request).await?;
    }
    wait_all(
        &client,
        procs,
        &new,
        deadline,
        "did not run the new epoch",
        |s| matches!(&s.epoch, Some((1, status, _)) if status == "member"),
    )
    .await?;
    wait_all(
        &client,
        procs,
        &leavers,
        deadline,
        "did not retire",
        |s| matches!(&s.epoch, Some((1, status, _)) if status == "retired"),
    )
    .await?;
    let switch_s = proposed.elapsed().as_secs_f64();
    let epoch_start = epoch_of(&client, &mut procs[0])
        .await?
        .map_or(0, |(_, _, start)| start);
    let switched = Instant::now();
    // Joiners serve the whole chain once their backfill is over.
    wait_all(
        &client,
        procs,
        &joiners,
        deadline,
        "does not serve round 1 (backfill)",
        |s| s.first_round,
    )
    .await?;
    let backfill_s = switched.elapsed().as_secs_f64();
    let checked_to = rounds.max(epoch_start + 4);
    wait_all(
        &client,
        procs,
        &new,
        deadline,
        "did not reach the last round",
        |s| s.latest >= checked_to,
    )
    .await?;
    let mut chains: Vec<Vec<serde_json::Value>> = Vec::new();
    let mut keys_same = true;
    for &i in &new {
        let info = node::http::get_json(&client, &format!("{}/info", procs[i].http)).await?;
        keys_same &= info["public_key"].as_str() == Some(group_key_before.as_str());
        let mut chain = Vec::new();
        for r in 1..=checked_to {
            chain.push(
                node::http::get_json(&client, &format!("{}/public/{r}", procs[i].http)).await?,
            );
        }
        chains.push(chain);
    }
    let chain_identical = chains.iter().all(|c| *c == chains[0]);
    let chain_verified = verifies(info, &chains[0])?;
    let mut latencies = Vec::new();
    for &i in &new {
        for s in stats_rounds(&client, &procs[i].http, 2, checked_to).await? {
            if let Some(l) = s["latency_ms"].as_f64() {
                latencies.push(l);
            }
        }
    }
    Ok(ReshareOutcome {
        group_key_before,
        group_key_unchanged: keys_same,
        proposed_after,
        epoch_start,
        switch_s,
        backfill_s,
        checked_to,
        chain_identical,
        chain_verified,
        samples: latencies.len(),
        latency: percentiles(&latencies),
    })
}

/// `localnet --reshare-to M`: starts the genesis members and the parties that
/// join, has every genesis member propose the change after round
/// `--reshare-at`, and checks that the new members serve one chain, valid
/// from round 1 under the unchanged group key.
pub(super) fn reshare_run(
    args: &LocalnetArgs,
    dir: &Path,
    configs: &[(PathBuf, String)],
    to: u32,
    wall: Instant,
) -> Result<()> {
    let mut procs = spawn_all(configs)?;
    if !args.json {
        eprintln!(
            "started {} nodes in {} ({} genesis members); the members reshare to nodes 0..{to} after round {}",
            configs.len(),
            dir.display(),
            args.nodes,
            args.reshare_at
        );
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(observe_reshare(
        &mut procs,
        configs,
        args.nodes,
        to,
        args.rounds,
        args.reshare_at,
        Duration::from_secs(args.timeout_s),
    ));
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            stop(&mut procs);
            return Err(e);
        }
    };
    let joined: Vec<u32> = (args.nodes..to).collect();
    let left: Vec<u32> = (to..args.nodes).collect();
    let http: Vec<&String> = procs.iter().take(to as usize).map(|p| &p.http).collect();
    let report = json!({
        "nodes": to,
        "rounds": outcome.checked_to,
        "scheme": args.scheme.as_str(),
        "chain_identical": outcome.chain_identical,
        "chain_verified": outcome.chain_verified,
        "beacon_latency_ms": outcome.latency,
        "samples": outcome.samples,
        "http": http,
        "dir": dir.display().to_string(),
        "wall_s": wall.elapsed().as_secs_f64(),
        "reshare": {
            "from": args.nodes,
            "to": to,
            "joined": joined,
            "left": left,
            "proposed_after_round": outcome.proposed_after,
            "epoch_start": outcome.epoch_start,
            "switch_s": outcome.switch_s,
            "backfill_s": outcome.backfill_s,
            "group_key": outcome.group_key_before,
            "group_key_unchanged": outcome.group_key_unchanged,
        },
    });
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{} -> {to} members (joined {joined:?}, left {left:?}): proposed after round {}, the new epoch runs from round {} ({:.2} s after the proposals); joiners backfilled in {:.2} s",
            args.nodes, outcome.proposed_after, outcome.epoch_start, outcome.switch_s, outcome.backfill_s
        );
        println!(
            "rounds 1..={} on the {to} members: chain identical: {}, verifies: {}, group key unchanged: {}",
            outcome.checked_to, outcome.chain_identical, outcome.chain_verified, outcome.group_key_unchanged
        );
        let lat = &outcome.latency;
        println!(
            "round latency (ms, {} samples): p50 {:.2}  p90 {:.2}  max {:.2}; wall {:.1} s",
            outcome.samples,
            lat.p50,
            lat.p90,
            lat.max,
            wall.elapsed().as_secs_f64()
        );
    }
    keep_or_stop(args, &runtime, &mut procs);
    if !outcome.chain_identical || !outcome.chain_verified || !outcome.group_key_unchanged {
        bail!("the new members do not serve one valid chain under the genesis group key");
    }
    Ok(())
}
