//! Bounded resources, in real processes (issue 16): a flood of the largest
//! transactions does not halt the chain; a member's largest frames do not stall
//! the node that receives them; a peer that never reads does not grow its
//! senders' memory past their budget; RSS stays flat over a long run.
//!
//! Issue 37: a frame of any kind larger than the protocol can need from n and
//! the thresholds is refused at admission, before it is read.
//!
//! The flood and the admission test run by default (about a minute each); the
//! others are `#[ignore]`d and run by `scripts/soak.sh`
//! (`cargo test -p lab --test limits -- --ignored`).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

const BIN: &str = env!("CARGO_BIN_EXE_sbft-beacon");

fn client() -> http::Client {
    http::Client::new()
}

/// A tiny blocking HTTP client over reqwest's async one.
mod http {
    use std::time::Duration;

    pub struct Client {
        rt: tokio::runtime::Runtime,
        inner: ::reqwest::Client,
    }

    impl Client {
        pub fn new() -> Self {
            Client {
                rt: tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap(),
                inner: ::reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .unwrap(),
            }
        }

        /// GET as JSON; `None` on any failure.
        pub fn json(&self, url: &str) -> Option<serde_json::Value> {
            self.rt.block_on(async {
                let r = self.inner.get(url).send().await.ok()?;
                if !r.status().is_success() {
                    return None;
                }
                r.json().await.ok()
            })
        }

        /// GET as text.
        pub fn text(&self, url: &str) -> String {
            self.rt.block_on(async {
                match self.inner.get(url).send().await {
                    Ok(r) => r.text().await.unwrap_or_default(),
                    Err(_) => String::new(),
                }
            })
        }

        /// POST `body`; the status code (0 on a transport error).
        pub fn post(&self, url: &str, body: Vec<u8>) -> u16 {
            self.rt.block_on(async {
                match self.inner.post(url).body(body).send().await {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => 0,
                }
            })
        }
    }
}

/// A network of `run` processes from `localnet --configs-only`.
struct Net {
    dir: tempfile::TempDir,
    nodes: Vec<Option<Child>>,
    apis: Vec<String>,
}

impl Net {
    /// Configs of `n` nodes (`period` seconds between rounds), with `limits`
    /// appended as a `[limits]` section.
    fn configs(n: u32, period: u32, limits: &str) -> Net {
        let period = period.to_string();
        let (dir, apis) = common::localnet_configs(BIN, n, &["--period", &period]);
        let net = Net {
            dir,
            nodes: (0..n).map(|_| None).collect(),
            apis,
        };
        if !limits.is_empty() {
            for i in 0..n as usize {
                let mut text = std::fs::read_to_string(net.config(i)).unwrap();
                text += &format!("\n[limits]\n{limits}\n");
                std::fs::write(net.config(i), text).unwrap();
            }
        }
        net
    }

    fn config(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{i}/node.toml"))
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("node-{i}/run.log"))
    }

    fn start(&mut self, i: usize) {
        let log = std::fs::File::create(self.log(i)).unwrap();
        let child = Command::new(BIN)
            .arg("run")
            .arg("--config")
            .arg(self.config(i))
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.nodes[i] = Some(child);
    }

    fn pid(&self, i: usize) -> u32 {
        self.nodes[i].as_ref().unwrap().id()
    }

    /// The config's identity and address of node `i`.
    fn peer(&self, i: usize) -> (libp2p::identity::Keypair, libp2p::PeerId, libp2p::Multiaddr) {
        let cfg = node::config::NodeConfig::load(&self.config(i)).unwrap();
        let key = node::identity::load(&cfg.identity).unwrap();
        let me = cfg.me();
        (key, me.id, me.address.clone())
    }

    fn latest(&self, c: &http::Client, i: usize) -> u64 {
        c.json(&format!("{}/public/latest", self.apis[i]))
            .and_then(|v| v["round"].as_u64())
            .unwrap_or(0)
    }

    /// Waits until node `i` serves `round`; panics after `secs` with its log.
    fn wait_for(&self, c: &http::Client, i: usize, round: u64, secs: u64) {
        let start = Instant::now();
        while self.latest(c, i) < round {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "node {i} did not reach round {round} in {secs} s; log:\n{}",
                std::fs::read_to_string(self.log(i)).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for c in self.nodes.iter_mut().flatten() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Resident set size of process `pid` in MB.
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Round latencies (ms) node `api` recorded for rounds `from..`.
fn latencies(c: &http::Client, api: &str, from: u64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut next = from;
    loop {
        let page = c
            .json(&format!("{api}/stats/rounds?from={next}"))
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default();
        let Some(last) = page.last().and_then(|s| s["round"].as_u64()) else {
            return out;
        };
        out.extend(page.iter().filter_map(|s| s["latency_ms"].as_f64()));
        next = last + 1;
    }
}

fn percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Issue 16, finding 1: 260 transactions of 64 KiB to every node of a 4-node
/// `--period 1` network halted the chain for good (blocks over the frame limit,
/// rewritten after every reconnect). The chain must keep finalizing, and every
/// node must answer `/public/latest` within a second throughout.
#[test]
fn a_flood_of_the_largest_transactions_does_not_halt_the_chain() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Admit the whole flood (no per-client rate limit in the way): the blocks,
    // not the rate limit, must keep it from halting the chain.
    let mut net = Net::configs(
        4,
        1,
        "tx_per_s_per_client = 100000\ntx_burst_per_client = 100000\nsubmit_queue_bytes = 67108864",
    );
    for i in 0..4 {
        net.start(i);
    }
    let c = client();
    for i in 0..4 {
        net.wait_for(&c, i, 2, 120);
    }
    let apis = net.apis.clone();
    let posts: Vec<_> = apis
        .iter()
        .enumerate()
        .map(|(i, api)| {
            let api = api.clone();
            std::thread::spawn(move || {
                let c = client();
                let mut accepted = 0;
                for k in 0..260u32 {
                    let mut tx = vec![i as u8; 65_536];
                    tx[..4].copy_from_slice(&k.to_be_bytes());
                    if c.post(&format!("{api}/tx"), tx) == 202 {
                        accepted += 1;
                    }
                }
                accepted
            })
        })
        .collect();
    // While the flood goes on and after it: every node answers within a second.
    let mut slowest = Duration::ZERO;
    let start = Instant::now();
    let mut flood_done = false;
    let mut from = 0;
    while start.elapsed() < Duration::from_secs(60) {
        for api in &apis {
            let t = Instant::now();
            let r = c.json(&format!("{api}/public/latest"));
            slowest = slowest.max(t.elapsed());
            assert!(r.is_some(), "{api}/public/latest failed");
        }
        if !flood_done && posts.iter().all(|p| p.is_finished()) {
            flood_done = true;
            from = net.latest(&c, 0);
        }
        if flood_done && (0..4).all(|i| net.latest(&c, i) >= from + 8) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let accepted: Vec<u32> = posts.into_iter().map(|p| p.join().unwrap()).collect();
    assert!(flood_done, "the flood did not finish in 60 s");
    for i in 0..4 {
        assert!(
            net.latest(&c, i) >= from + 8,
            "node {i} stopped at round {} (flood ended at {from}); accepted {accepted:?}; log:\n{}",
            net.latest(&c, i),
            std::fs::read_to_string(net.log(i)).unwrap_or_default()
        );
    }
    assert!(
        slowest < Duration::from_secs(1),
        "/public/latest took {slowest:?}"
    );
    // The flood's transactions are being committed, in blocks within the bound.
    let latest = net.latest(&c, 0);
    let committed: usize = (1..=latest)
        .filter_map(|h| c.json(&format!("{}/blocks/{h}", apis[0])))
        .map(|b| b["transactions"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        committed > 0,
        "no transaction committed; accepted {accepted:?}"
    );
    eprintln!(
        "flood: accepted {accepted:?}, {committed} committed by round {latest}, slowest /public/latest {slowest:?}"
    );
}

/// Encodes `frame` with its length prefix.
fn framed(bytes: Vec<u8>) -> Vec<u8> {
    let mut out = (bytes.len() as u32).to_be_bytes().to_vec();
    out.extend(bytes);
    out
}

/// The largest frames a member may send after the DKG, one of each kind, packed
/// with points (the costly part of decoding): a NEW-VIEW of view changes, a
/// PRE-PREPARE and a sync response of big blocks, a DKG message, and the 16 MiB
/// frame of G1 points that stalled a node for 20 s before.
fn hostile_frames() -> Vec<Vec<u8>> {
    use beacon::{MinPk, NodeIndex, Point as _, Scheme};
    use consensus::messages::{ClaimGroup, PrepareCertificate, ViewChangeClaims, ViewChangeProof};
    use consensus::{Block, Envelope, Message};
    use std::sync::Arc;
    type S = MinPk;
    let cfg = consensus::ReplicaConfig::new(4, 0).unwrap();
    let sig = <S as Scheme>::Signature::generator();
    let prepared = PrepareCertificate {
        view: consensus::View::ZERO,
        digest: [0; 32],
        signature: sig,
        signers: beacon::multisig::SignerBitmap::new(cfg.n),
    };
    // As many claim groups as the NEW-VIEW bound holds, each with two points.
    let group = |i: u64| ClaimGroup::<S> {
        claims: ViewChangeClaims {
            prepared: Some((consensus::View::new(i), [0; 32])),
            fast_vote: Some((consensus::View::ZERO, [0; 32])),
        },
        senders: vec![NodeIndex(3)],
        signature: sig,
        fast_votes: Some(sig),
    };
    let group_bytes = beacon::wire::encode(&group(0)).unwrap().len();
    let groups = ((cfg.max_new_view_bytes() - 1024) / group_bytes) as u64;
    let block = |bytes: usize| {
        Arc::new(Block {
            height: consensus::Height::new(u64::MAX / 2),
            parent: [0; 32],
            previous_beacon: vec![0; 96],
            transactions: vec![vec![7; bytes]],
        })
    };
    let encode =
        |m: Message<S>| framed(beacon::wire::encode(&Envelope::<S>::Consensus(m)).unwrap());
    let new_view = encode(Message::NewView {
        height: consensus::Height::new(u64::MAX / 2),
        view: consensus::View::new(1),
        proof: ViewChangeProof {
            groups: (0..groups).map(group).collect(),
            prepared: Some(prepared),
        },
        block: block(0),
    });
    let pre_prepare = encode(Message::PrePrepare {
        height: consensus::Height::new(u64::MAX / 2),
        view: consensus::View::ZERO,
        block: block(cfg.max_block_bytes - 200),
    });
    // 290,000 G1 points under a consensus tag, 16 MiB: refused by its size now.
    let points = vec![<S as Scheme>::PublicKey::generator(); 290_000];
    let mut packed = vec![1u8, 0, 0, 0, 7, 0, 0, 0];
    packed.extend(beacon::wire::encode(&points).unwrap());
    packed.truncate(node::limits::MAX_FRAME_BYTES);
    // A DKG-tagged frame after the DKG.
    let mut dkg = vec![0u8, 0, 0, 0, 0, 0, 0, 0];
    dkg.extend(beacon::wire::encode(&points[..80_000]).unwrap());
    vec![new_view, pre_prepare, framed(packed), framed(dkg)]
}

/// Issue 16, finding 2: one member's frame stalled a node for 20 s. A member
/// that keeps sending the largest frame of every kind must not stall its target:
/// the target's round p99 stays under 3x its normal p99 and no round takes
/// over a second.
#[test]
#[ignore = "about 1.5 minutes; run by scripts/soak.sh"]
fn a_members_largest_frames_do_not_stall_the_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut net = Net::configs(4, 0, "");
    for i in 0..4 {
        net.start(i);
    }
    let c = client();
    net.wait_for(&c, 0, 3, 120);
    std::thread::sleep(Duration::from_secs(10));
    let api = net.apis[0].clone();
    let normal = latencies(&c, &api, 3);
    let attack_from = net.latest(&c, 0) + 1;
    let (_, target, address) = net.peer(0);
    let (member, _, _) = net.peer(3);
    let frames = hostile_frames();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let start = Instant::now();
    let mut sent = 0;
    while start.elapsed() < Duration::from_secs(20) {
        for f in &frames {
            let r = rt.block_on(node::net::send_raw(
                member.clone(),
                target,
                address.clone(),
                f.clone(),
            ));
            sent += usize::from(r.is_ok());
        }
    }
    let attacked = latencies(&c, &api, attack_from);
    let (p99_normal, p99_attacked) = (percentile(&normal, 0.99), percentile(&attacked, 0.99));
    let max = attacked.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "hostile frames: {sent} sent; normal p99 {p99_normal:.1} ms ({} rounds); under attack p99 {p99_attacked:.1} ms, max {max:.1} ms ({} rounds)",
        normal.len(),
        attacked.len()
    );
    assert!(attacked.len() > 10, "too few rounds under attack");
    assert!(
        p99_attacked < 3.0 * p99_normal.max(5.0),
        "p99 {p99_attacked:.1} ms under attack, {p99_normal:.1} ms before"
    );
    assert!(max < 1000.0, "a round took {max:.1} ms");
    let metrics = c.text(&format!("{api}/metrics"));
    assert!(metrics.contains("reason=\"oversized\""), "{metrics}");
}

/// CPU time (user + system) process `pid` has used, in seconds.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which is in parentheses): state is the
    // first, utime the 12th and stime the 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// A frame of every kind a member can send, each as large as the frame limit
/// allows and packed with G1 points, with the kind the node names it by: the
/// invitation whose old group polynomial holds 290,000 points (it cost a
/// node 16 s of CPU before), every epoch, DKG and consensus kind, and one of
/// no kind.
fn frames_at_the_frame_limit() -> Vec<(String, Vec<u8>)> {
    use beacon::reshare::{MemberId, ReshareSettings};
    use beacon::{MinPk, Point as _, Scheme};
    use consensus::epoch::EpochChange;
    type S = MinPk;
    let limit = node::limits::MAX_FRAME_BYTES;
    let points = vec![<S as Scheme>::PublicKey::generator(); 290_000];
    let ids: Vec<MemberId> = (0..4u8).map(|i| MemberId([i; 32])).collect();
    // An `Invitation` encodes as its fields in order.
    let invitation = (
        EpochChange {
            epoch: consensus::Epoch::new(1),
            members: ids.clone(),
            c: 0,
            beacon_threshold: 0,
            consensus_keys: Vec::new(),
        },
        consensus::Height::new(5),
        ReshareSettings::<S> {
            epoch: 1,
            old_members: ids.clone(),
            old_public_polynomial: std::sync::Arc::new(points.clone()),
            new_members: ids,
            new_threshold: 2,
            phase_timeout_us: 1_000_000,
        },
    );
    let mut invite = vec![2u8, 0, 0, 0, 1, 0, 0, 0];
    invite.extend(beacon::wire::encode(&invitation).unwrap());
    assert!(invite.len() <= limit, "{}", invite.len());
    let mut frames = vec![("epoch-invite".to_string(), framed(invite))];
    let packed = beacon::wire::encode(&vec![points[0]; 350_000]).unwrap();
    let mut tagged = |envelope: u32, message: u32, kind: &str| {
        let mut frame = envelope.to_le_bytes().to_vec();
        frame.extend(message.to_le_bytes());
        frame.extend_from_slice(&packed[..limit - 8]);
        frames.push((kind.to_string(), framed(frame)));
    };
    // Genesis DKG (after it), the 13 consensus messages, the 6 epoch messages
    // (epoch tag 6 names none since the new members' DKG went: unknown).
    tagged(0, 0, "dkg");
    let consensus = [
        "pre-prepare",
        "consensus",
        "consensus",
        "consensus",
        "consensus",
        "consensus",
        "consensus",
        "view-change",
        "new-view",
        "consensus",
        "block-response",
        "consensus",
        "sync-response",
    ];
    for (tag, kind) in consensus.iter().enumerate() {
        tagged(1, tag as u32, kind);
    }
    let epoch = [
        "epoch-control",
        "epoch-invite",
        "epoch-reshare",
        "epoch-handoff",
        "epoch-handoff-request",
        "epoch-named",
        "unknown",
    ];
    for (tag, kind) in epoch.iter().enumerate() {
        tagged(2, tag as u32, kind);
    }
    tagged(3, 0, "unknown");
    frames
}

/// Issue 37: one member's 16 MiB invitation of 290,000 points cost its
/// target 16 s of CPU and most of its beacon rate. Now every kind has a size
/// the protocol can need, known from n and the thresholds before a byte is
/// decoded: a member that keeps sending the largest frame of every kind has
/// each refused at admission (counted against it), the target spends under
/// 50 ms of CPU on each, and its beacon rate stays at 80% of what it was.
#[test]
fn frames_larger_than_the_protocol_can_need_are_refused_at_admission() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let frames = frames_at_the_frame_limit();
    let mut net = Net::configs(4, 0, "");
    for i in 0..4 {
        net.start(i);
    }
    let c = client();
    net.wait_for(&c, 0, 3, 120);
    std::thread::sleep(Duration::from_secs(2));
    let pid = net.pid(0);
    let window = Duration::from_secs(8);
    // Beacons per second and CPU of the target, before and during the attack.
    let sample = || (net.latest(&c, 0), cpu_s(pid), Instant::now());
    let (r0, cpu0, t0) = sample();
    std::thread::sleep(window);
    let (r1, cpu1, t1) = sample();
    let (_, target, address) = net.peer(0);
    let (member, _, _) = net.peer(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut sent = 0usize;
    while t1.elapsed() < window {
        for (_, frame) in &frames {
            // Refused frames make the send fail (the stream is closed).
            let _ = rt.block_on(node::net::send_raw(
                member.clone(),
                target,
                address.clone(),
                frame.clone(),
            ));
            sent += 1;
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let (r2, cpu2, t2) = sample();
    let before = (r1 - r0) as f64 / (t1 - t0).as_secs_f64();
    let during = (r2 - r1) as f64 / (t2 - t1).as_secs_f64();
    let idle_cpu = (cpu1 - cpu0) / (t1 - t0).as_secs_f64();
    let extra_cpu = (cpu2 - cpu1) - idle_cpu * (t2 - t1).as_secs_f64();
    let per_frame_ms = extra_cpu.max(0.0) * 1e3 / sent as f64;
    eprintln!(
        "admission: {sent} frames of {} kinds at the frame limit; beacons/s {before:.1} before, {during:.1} during ({:.0}%); target CPU {:.2} s/s before, extra {extra_cpu:.2} s during: {per_frame_ms:.2} ms per frame",
        frames.len(),
        100.0 * during / before,
        idle_cpu
    );
    let metrics = c.text(&format!("{}/metrics", net.apis[0]));
    for (kind, _) in &frames {
        let line = format!("sbft_beacon_refused_frames_total{{peer=\"3\",kind=\"{kind}\"}}");
        assert!(metrics.contains(&line), "{kind} not refused:\n{metrics}");
    }
    assert!(
        per_frame_ms < 50.0,
        "{per_frame_ms:.1} ms of CPU per refused frame"
    );
    assert!(
        during >= 0.8 * before,
        "beacons/s fell from {before:.1} to {during:.1}"
    );
}

/// The largest `sbft_beacon_queued_bytes{peer="3"}` in a metrics text.
fn queued_for_3(metrics: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("sbft_beacon_queued_bytes{peer=\"3\"} "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Issue 16, finding 3: outbound queues held 4,096 frames per peer (4 GiB of
/// 1 MiB blocks). A member that accepts its streams but never reads them must
/// not make its senders queue more than `peer_queue_bytes` for it: the queue
/// fills, frames are dropped and counted, and the chain goes on.
#[test]
#[ignore = "about a minute; run by scripts/soak.sh"]
fn a_peer_that_never_reads_does_not_grow_its_senders_memory() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The smallest queue the config allows (the frame limit): 16 MiB.
    let budget = 16.0 * 1024.0 * 1024.0;
    let mut net = Net::configs(
        4,
        0,
        "peer_queue_bytes = 16777216\ntx_per_s_per_client = 100000\ntx_burst_per_client = 100000",
    );
    let (silent_key, _, silent_address) = net.peer(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let silent = rt.spawn(node::net::serve_silent(silent_key, silent_address, async {
        let _ = stop_rx.await;
    }));
    for i in 0..3 {
        net.start(i);
    }
    let c = client();
    // Three of four make progress on the slow path (node 3 deals nothing).
    for i in 0..3 {
        net.wait_for(&c, i, 3, 180);
    }
    let before: Vec<f64> = (0..3).map(|i| rss_mb(net.pid(i))).collect();
    // Blocks of big transactions for 3 never to read: 20 transactions of 64 KiB
    // per second to every node.
    let start = Instant::now();
    let mut k = 0u32;
    let mut peak = before.clone();
    let mut queued: f64 = 0.0;
    while start.elapsed() < Duration::from_secs(40) {
        for (i, api) in net.apis.iter().take(3).enumerate() {
            let mut tx = vec![i as u8; 65_536];
            tx[..4].copy_from_slice(&k.to_be_bytes());
            c.post(&format!("{api}/tx"), tx);
            queued = queued.max(queued_for_3(&c.text(&format!("{api}/metrics"))));
        }
        k += 1;
        for (i, p) in peak.iter_mut().enumerate() {
            *p = p.max(rss_mb(net.pid(i)));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = stop_tx.send(());
    let _ = rt.block_on(silent);
    let metrics = c.text(&format!("{}/metrics", net.apis[0]));
    eprintln!(
        "slow reader: most queued for the silent peer {:.1} MiB (budget 16 MiB); RSS before {before:.1?} MB, peak {peak:.1?} MB; {k} transactions per node",
        queued / 1048576.0
    );
    assert!(
        queued <= budget,
        "{queued} bytes queued for the silent peer"
    );
    assert!(
        metrics.contains("reason=\"queue-full\""),
        "the queue to the silent peer never filled:\n{metrics}"
    );
    assert!(net.latest(&c, 0) > 3);
}

/// Issue 16, finding 3: RSS grew 27.8 -> 108 MB in 90 s of back-to-back rounds.
/// Ten minutes of back-to-back rounds (`SOAK_SECS` to change): after a minute of
/// warm-up, no node's RSS grows by 5 MB or more. Prints the RSS curve.
#[test]
#[ignore = "10 minutes; run by scripts/soak.sh"]
fn rss_stays_flat_over_a_long_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let secs: u64 = std::env::var("SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let mut net = Net::configs(4, 0, "");
    for i in 0..4 {
        net.start(i);
    }
    let c = client();
    net.wait_for(&c, 0, 3, 120);
    let start = Instant::now();
    let warm_up = Duration::from_secs(60.min(secs / 4));
    let mut curve: Vec<(u64, u64, Vec<f64>)> = Vec::new();
    while start.elapsed() < Duration::from_secs(secs) {
        let rss: Vec<f64> = (0..4).map(|i| rss_mb(net.pid(i))).collect();
        curve.push((start.elapsed().as_secs(), net.latest(&c, 0), rss));
        std::thread::sleep(Duration::from_secs(10));
    }
    let rss: Vec<f64> = (0..4).map(|i| rss_mb(net.pid(i))).collect();
    curve.push((start.elapsed().as_secs(), net.latest(&c, 0), rss));
    eprintln!("t_s round rss_mb(node 0..3)");
    for (t, round, rss) in &curve {
        let rss: Vec<String> = rss.iter().map(|r| format!("{r:.1}")).collect();
        eprintln!("{t} {round} {}", rss.join(" "));
    }
    let base = curve
        .iter()
        .find(|(t, _, _)| *t >= warm_up.as_secs())
        .map(|(_, _, r)| r.clone())
        .unwrap();
    let last = &curve.last().unwrap().2;
    for i in 0..4 {
        let growth = last[i] - base[i];
        assert!(
            growth < 5.0,
            "node {i}: RSS grew {growth:.1} MB after warm-up ({:.1} -> {:.1})",
            base[i],
            last[i]
        );
    }
}
