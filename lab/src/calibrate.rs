//! `bench calibrate`: fits the simulator's cost model to this machine — the
//! cryptographic operations, decoding, the durable write of a vote record, and
//! the network stack's CPU per message between two nodes, and the WAN
//! emulator's relay CPU per message it carries.

use anyhow::{bail, Context, Result};
use beacon::{MinSig, Point, Scalar, Scheme};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::Path;
use std::time::{Duration, Instant};

/// Median microseconds of `f` (at least 5 runs, more while under ~0.3 s).
fn median_us<T>(mut f: impl FnMut() -> T) -> f64 {
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < 5 || (samples.len() < 200 && start.elapsed() < Duration::from_millis(300))
    {
        let t = Instant::now();
        std::hint::black_box(f());
        samples.push(t.elapsed());
    }
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// Median time of a node's durable write of its vote record (a store commit
/// with fsync), in a store under the system's temporary directory: the disk a
/// local network's nodes write to; and the writing thread's mean CPU per
/// write (on its CPU clock).
fn persist_votes_us() -> Result<(f64, f64)> {
    use consensus::messages::PrepareCertificate;
    use consensus::{Height, SignedVotes, View};
    let dir = std::env::temp_dir().join(format!("sbft-beacon-calibrate-{}", std::process::id()));
    let store = node::store::Store::open(&dir, 1 << 20)?;
    let mut failed = None;
    let mut height = 0u64;
    // As at a node: each record names a new block (its body is written once,
    // the previous one's dropped) and carries a prepare certificate.
    let cpu_before = node::clock::thread_cpu_ns();
    let us = median_us(|| {
        height += 1;
        let block = std::sync::Arc::new(consensus::Block {
            height: Height::new(height),
            parent: [1; 32],
            previous_beacon: vec![2; 96],
            transactions: Vec::new(),
        });
        let mut record = SignedVotes::<MinSig>::new(Height::new(height));
        record.votes.insert(View::ZERO, block.digest());
        record.prepared = Some(PrepareCertificate {
            view: View::ZERO,
            digest: block.digest(),
            signature: <MinSig as Scheme>::Signature::generator(),
            signers: beacon::multisig::SignerBitmap::new(4),
        });
        record.blocks.insert(block.digest(), block);
        if let Err(e) = store.save_votes(&[record]) {
            failed = Some(e);
        }
    });
    let cpu_ns = node::clock::thread_cpu_ns().saturating_sub(cpu_before);
    let cpu_us = (cpu_ns as f64 / 1e3 / height.max(1) as f64).min(us);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(e) = failed {
        bail!("writing the vote record: {e}");
    }
    eprintln!("durable vote record: {us:.1} us, {cpu_us:.1} us of it on a core");
    Ok((us, cpu_us))
}

/// `bench calibrate`: fits the cost model (MSM sizes up to `2^max_log_msm`)
/// and writes it to `out`.
pub(crate) fn calibrate(out: &Path, max_log_msm: u32) -> Result<()> {
    let model = fit_cost_model(max_log_msm)?;
    let text = cost_model_file(&model);
    std::fs::write(out, &text).with_context(|| format!("writing {}", out.display()))?;
    println!("{text}");
    println!("wrote {}", out.display());
    Ok(())
}

/// The cost model as `bench calibrate` writes it.
pub(crate) fn cost_model_file(model: &sim::cost_model::CostModel) -> String {
    format!(
        "# Virtual CPU cost (microseconds) per cryptographic operation, used by the\n# simulator's compute-cost model. Regenerate with\n#   cargo run --release -- bench calibrate\n{}",
        model.to_toml()
    )
}

/// Measures the simulator's cost model on this machine (MSM sizes up to
/// `2^max_log_msm`): the one way to fit it, behind `bench calibrate` and
/// `compare --calibrate`.
pub(crate) fn fit_cost_model(max_log_msm: u32) -> Result<sim::cost_model::CostModel> {
    use beacon::curve::pairing_product_is_one;
    use beacon::{G1, G2};
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let s = Scalar::random(&mut rng);
    let p1 = G1::generator().mul(&s);
    let p2 = G2::generator().mul(&s);
    let two = median_us(|| pairing_product_is_one(&[(p1, p2), (p1.neg(), p2)]));
    let four =
        median_us(|| pairing_product_is_one(&[(p1, p2), (p1.neg(), p2), (p1, p2), (p1.neg(), p2)]));
    let miller = ((four - two) / 2.0).max(1.0);
    let final_exp = (two - 2.0 * miller).max(1.0);
    let hash_g1 = median_us(|| G1::hash_to_curve(b"calibrate", beacon::scheme::DST_G1));
    let hash_g2 = median_us(|| G2::hash_to_curve(b"calibrate", beacon::scheme::DST_G2));
    let mul_g1 = median_us(|| p1.mul(&s));
    let mul_g2 = median_us(|| p2.mul(&s));
    // Additions, 1,024 at a time (a certificate's sums are thousands long).
    let add_g1 = median_us(|| (0..1024).fold(p1, |a, _| a.add(&p1))) / 1024.0;
    let add_g2 = median_us(|| (0..1024).fold(p2, |a, _| a.add(&p2))) / 1024.0;
    let mut msm_g1 = vec![mul_g1];
    let mut msm_g2 = vec![mul_g2];
    for log in 1..=max_log_msm {
        let n = 1usize << log;
        let scalars: Vec<Scalar> = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let g1: Vec<G1> = (0..n)
            .map(|i| p1.mul(&Scalar::from_u64(i as u64 + 1)))
            .collect();
        let g2: Vec<G2> = (0..n)
            .map(|i| p2.mul(&Scalar::from_u64(i as u64 + 1)))
            .collect();
        msm_g1.push(median_us(|| G1::msm(&g1, &scalars)) / n as f64);
        msm_g2.push(median_us(|| G2::msm(&g2, &scalars)) / n as f64);
        eprintln!(
            "msm 2^{log}: {:.2} us/point (G1), {:.2} us/point (G2)",
            msm_g1[log as usize], msm_g2[log as usize]
        );
    }
    // Decoding: a message without points gives the fixed cost; a block of
    // 64 KiB of transactions the cost per KiB of plain bytes; each point (a
    // decompression and a subgroup check) is charged apart, by group.
    let small = consensus::Message::<MinSig>::SyncRequest {
        from_height: consensus::Height::new(1),
    }
    .encode()?;
    let message = median_us(|| consensus::Message::<MinSig>::decode(&small).expect("valid"));
    let block = consensus::Message::<MinSig>::BlockResponse {
        block: std::sync::Arc::new(consensus::Block {
            height: consensus::Height::new(1),
            parent: [1; 32],
            previous_beacon: vec![2; 96],
            transactions: vec![vec![3; 1024]; 64],
        }),
    }
    .encode()?;
    let block_us = median_us(|| consensus::Message::<MinSig>::decode(&block).expect("valid"));
    let kilobyte = (block_us - message).max(0.0) / (block.len() as f64 / 1024.0);
    let (g1_bytes, g2_bytes) = (p1.to_bytes(), p2.to_bytes());
    let decode_g1 = median_us(|| G1::from_bytes(&g1_bytes).expect("valid"));
    let decode_g2 = median_us(|| G2::from_bytes(&g2_bytes).expect("valid"));
    let (persist_votes, persist_votes_cpu) = persist_votes_us()?;
    let (stack, relay) = network_stack()?;
    let round = |v: f64| (v * 100.0).round() / 100.0;
    let model = sim::cost_model::CostModel {
        calibrated_on: format!(
            "bench calibrate, {} threads available, {}",
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            std::env::consts::ARCH
        ),
        miller_loop_us: round(miller),
        final_exp_us: round(final_exp),
        hash_g1_us: round(hash_g1),
        hash_g2_us: round(hash_g2),
        mul_g1_us: round(mul_g1),
        mul_g2_us: round(mul_g2),
        add_g1_us: (add_g1 * 1000.0).round() / 1000.0,
        add_g2_us: (add_g2 * 1000.0).round() / 1000.0,
        msm_g1_point_us: msm_g1.into_iter().map(round).collect(),
        msm_g2_point_us: msm_g2.into_iter().map(round).collect(),
        message_us: round(message + 2.0),
        kilobyte_us: round(kilobyte),
        decode_g1_us: round(decode_g1),
        decode_g2_us: round(decode_g2),
        transport_us: round(stack),
        relay_us: round(relay),
        persist_votes_us: round(persist_votes),
        persist_votes_cpu_us: round(persist_votes_cpu),
        scale: 1.0,
    };
    Ok(model)
}

/// Round trips timed by [`ping_pong`], after as many to warm up.
const ROUND_TRIPS: usize = 300;

/// What each in-process transport of [`ping_pong`] reports.
type Reports = std::sync::mpsc::Sender<Result<Option<(Duration, u64)>>>;

/// The network stack's CPU per message between two nodes on this machine, and
/// that of the WAN emulator's relay per message it carries, in microseconds.
/// A small consensus message goes back and forth between two in-process
/// transports (libp2p over loopback TCP with noise and yamux, each on a thread
/// and a current-thread runtime of its own as a node runs it, frames decoded
/// on the blocking pool): the process's CPU per message is the stack's, both
/// ends together. The same again through the emulator's relays (`localnet
/// --latency-ms 1`, in this process: each message waits on the relay's timer,
/// as over a real link) costs the relay's CPU more.
fn network_stack() -> Result<(f64, f64)> {
    let stack = ping_pong(false)?;
    let relayed = ping_pong(true)?;
    let relay = (relayed - stack).max(0.0);
    eprintln!("WAN emulator's relay: {relay:.1} us of CPU per message");
    Ok((stack, relay))
}

/// The process's CPU per message of [`ROUND_TRIPS`] timed round trips between
/// two in-process transports, through the WAN emulator's relays if `relayed`.
/// Prints the wall time per message too (the latency of an idle stack).
fn ping_pong(relayed: bool) -> Result<f64> {
    use std::sync::atomic::AtomicBool;
    use std::sync::{mpsc, Arc};
    let dir = std::env::temp_dir().join(format!("sbft-beacon-stack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let params = consensus::ProtocolParams::default();
    let configs =
        crate::localnet::write_configs(&dir, 4, 4, beacon::SchemeId::default(), &params, 0)?;
    let paths: Vec<_> = configs.iter().map(|(path, _)| path.clone()).collect();
    // Dropped (the relays stopped) after the transports.
    let _relays = if relayed {
        let args = crate::wan::WanArgs {
            latency_ms: Some(1.0),
            ..Default::default()
        };
        let model = crate::wan::WanModel::from_args(&args, 4)?.context("a 1 ms WAN")?;
        Some(crate::wan::LinkEmulator::in_front_of(model, &paths)?)
    } else {
        None
    };
    let (reports, received) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = paths
        .iter()
        .map(|path| {
            let (path, reports, stop) = (path.clone(), reports.clone(), stop.clone());
            std::thread::spawn(move || {
                if let Err(e) = transport(&path, &reports, &stop) {
                    let _ = reports.send(Err(e));
                }
            })
        })
        .collect();
    drop(reports);
    // Every transport reports once it is connected, then node 0 its timing.
    let outcome = (|| -> Result<(Duration, u64)> {
        loop {
            let report = received
                .recv_timeout(Duration::from_secs(120))
                .context("the in-process transports did not finish their round trips")?;
            if let Some(timing) = report? {
                return Ok(timing);
            }
        }
    })();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (wall, cpu) = outcome?;
    let messages = (2 * ROUND_TRIPS) as f64;
    let per_message_us = wall.as_secs_f64() * 1e6 / messages;
    let cpu_us = cpu as f64 / 1e3 / messages;
    let path = if relayed { ", through the relays" } else { "" };
    eprintln!("network stack{path}: {per_message_us:.1} us per message, {cpu_us:.1} us of CPU");
    Ok(cpu_us)
}

/// One transport of [`ping_pong`], with the config at `path`, on a
/// current-thread runtime of its own until `stop`: it reports `Ok(None)` once
/// connected to every peer; node 0 then pings node 1, which echoes, and
/// reports the wall time and process CPU of the timed round trips; nodes 2
/// and 3 only let the others connect (four is the smallest valid network).
fn transport(path: &Path, reports: &Reports, stop: &std::sync::atomic::AtomicBool) -> Result<()> {
    use consensus::{Envelope, Height, Message};
    use node::net::{NetLimits, Network};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let cfg = node::config::NodeConfig::load(path)?;
    let key = node::identity::load(&cfg.identity)?;
    let frame = Arc::new(beacon::wire::encode(&Envelope::<MinSig>::Consensus(
        Message::SyncRequest {
            from_height: Height::new(1),
        },
    ))?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(4)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let limits = NetLimits::of(&cfg, Arc::new(AtomicBool::new(true)));
        let metrics = Arc::new(node::metrics::Metrics::new());
        let (net, mut inbox) = Network::start::<Envelope<MinSig>>(key, &cfg, limits, metrics)?;
        let mut connected = net.connected.clone();
        let peers = cfg.peers.len() - 1;
        tokio::time::timeout(Duration::from_secs(30), connected.wait_for(|c| *c >= peers))
            .await
            .context("the in-process transports did not connect")??;
        let _ = reports.send(Ok(None));
        match cfg.me.0 {
            0 => {
                // Let every transport finish connecting: its dialing would
                // be counted otherwise.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let mut timed = (Instant::now(), 0);
                for k in 0..2 * ROUND_TRIPS {
                    if k == ROUND_TRIPS {
                        timed = (Instant::now(), node::clock::process_cpu_ns());
                    }
                    net.send(beacon::NodeIndex(1), frame.clone());
                    if inbox.recv().await.is_none() {
                        bail!("the echoing transport stopped");
                    }
                }
                let cpu = node::clock::process_cpu_ns() - timed.1;
                let _ = reports.send(Ok(Some((timed.0.elapsed(), cpu))));
            }
            1 => {
                while !stop.load(Ordering::Relaxed) {
                    let wait = Duration::from_millis(20);
                    if let Ok(Some(_)) = tokio::time::timeout(wait, inbox.recv()).await {
                        net.send(beacon::NodeIndex(0), frame.clone());
                    }
                }
            }
            _ => {}
        }
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    })
}
