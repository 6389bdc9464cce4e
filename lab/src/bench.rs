//! `sbft-beacon bench ...`: wall-clock medians of the threshold core, printed as a
//! table or as one JSON object per line.

use anyhow::{bail, Result};
use beacon::{
    deal, lagrange::lagrange_fast, lagrange::lagrange_naive, InterpolationMethod, NodeIndex, Point,
    Scalar, Scheme, SchemeId, SignatureShare,
};
use clap::{Args, Subcommand};
use rand_chacha::ChaCha20Rng;
use rand_core::{RngCore, SeedableRng};
use serde_json::json;
use std::time::{Duration, Instant};

/// Benchmarks.
#[derive(Subcommand)]
pub(crate) enum BenchCommand {
    /// Lagrange coefficients (naive, fast, roots of unity), MSM and full aggregation.
    Interpolation(InterpolationArgs),
    /// Share verification: individual, batch + bisection, optimistic recovery.
    Verify(VerifyArgs),
    /// Consensus certificates (multi-signatures of members' own keys): a
    /// verifier's check of one certificate, and a collector's aggregation.
    Certificate(CertificateArgs),
    /// A whole DKG in-process (all n members), per-phase CPU and traffic.
    Dkg(DkgArgs),
    /// Whole DKG sessions in-process over the relay (attempts, agreement): the
    /// messages and bytes of each kind, the relay's attestations among them.
    Relay(RelayArgs),
    /// Measure the cost of each cryptographic operation and write the simulator's
    /// cost model.
    Calibrate(CalibrateArgs),
}

/// Options of `bench calibrate`.
#[derive(Args)]
pub(crate) struct CalibrateArgs {
    /// Where to write the cost model.
    #[arg(long, default_value = "configs/cost-model.toml")]
    pub out: std::path::PathBuf,
    /// Largest MSM size measured (log2).
    #[arg(long, default_value_t = 14)]
    pub max_log_msm: u32,
}

/// Options of `bench dkg`.
#[derive(Args)]
pub(crate) struct DkgArgs {
    /// Numbers of members.
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024")]
    n: Vec<u32>,
    /// Committee size K (dealers spread evenly over the members); all members by default.
    #[arg(long)]
    dealers: Option<u32>,
    /// Signature scheme (decides the key group).
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed for the polynomials and the delivery order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `bench relay`.
#[derive(Args)]
pub(crate) struct RelayArgs {
    /// Numbers of members (every member deals).
    #[arg(long, value_delimiter = ',', default_value = "128")]
    n: Vec<u32>,
    /// Delivery order: `fifo` (equal latency everywhere) or `random` (any
    /// message may overtake any other).
    #[arg(long, default_value = "fifo")]
    delivery: String,
    /// Signature scheme (decides the key group).
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed for the polynomials, keys and delivery order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `bench interpolation`.
#[derive(Args)]
pub(crate) struct InterpolationArgs {
    /// Thresholds t to measure (n = 2t - 1, a random t-subset of signers).
    #[arg(long, value_delimiter = ',', default_value = "64,256,1024,4096,16384")]
    threshold: Vec<u32>,
    /// Signature scheme.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed for the random subset and points.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `bench verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// Number of signers (all sign; the threshold is n/2 + 1).
    #[arg(long, default_value_t = 4096)]
    n: u32,
    /// Numbers of bad shares to measure.
    #[arg(long, value_delimiter = ',', default_value = "0,4")]
    bad: Vec<u32>,
    /// Signature scheme.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed for keys, bad positions and batch weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Options of `bench certificate`.
#[derive(Args)]
pub(crate) struct CertificateArgs {
    /// Members of the epoch.
    #[arg(long, default_value_t = 4096)]
    n: u32,
    /// Numbers of signers to measure (default: the slow and the fast quorum of
    /// n = 4,096 with c = 3: 2,730 and 4,093).
    #[arg(long, value_delimiter = ',', default_value = "2730,4093")]
    signers: Vec<u32>,
    /// Signature scheme.
    #[arg(long, default_value = "pedersen-bls-chained")]
    scheme: SchemeId,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Seed for the keys, the signers and the batch weights.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// Runs one benchmark subcommand.
pub(crate) fn run(cmd: BenchCommand) -> Result<()> {
    match cmd {
        BenchCommand::Interpolation(a) => with_bls_scheme!(a.scheme, interpolation, &a),
        BenchCommand::Verify(a) => with_bls_scheme!(a.scheme, verify, &a),
        BenchCommand::Certificate(a) => with_bls_scheme!(a.scheme, certificate, &a),
        BenchCommand::Dkg(a) => with_bls_scheme!(a.scheme, dkg, &a),
        BenchCommand::Relay(a) => with_bls_scheme!(a.scheme, relay, &a),
        BenchCommand::Calibrate(a) => crate::calibrate::calibrate(&a.out, a.max_log_msm),
    }
}

/// Median wall time of `f` in milliseconds: at least 3 runs (1 if a run takes
/// over 5 s), more while the total stays under ~2 s, at most 15.
fn median_ms<T>(mut f: impl FnMut() -> T) -> f64 {
    let mut samples = Vec::new();
    let start = Instant::now();
    loop {
        let t = Instant::now();
        std::hint::black_box(f());
        samples.push(t.elapsed());
        let total = start.elapsed();
        let enough = samples.len() >= 15
            || (samples.len() >= 3 && total > Duration::from_secs(2))
            || samples[0] > Duration::from_secs(5);
        if enough {
            break;
        }
    }
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e3
}

fn random_subset(rng: &mut ChaCha20Rng, n: u32, t: u32) -> Vec<NodeIndex> {
    let mut all: Vec<NodeIndex> = (0..n).map(NodeIndex).collect();
    for i in (1..all.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        all.swap(i, j);
    }
    all.truncate(t as usize);
    all
}

fn interpolation<S: Scheme>(args: &InterpolationArgs) -> Result<()> {
    if !args.json {
        println!(
            "{:>7} {:>7} {:>12} {:>12} {:>12} {:>12} {:>13}   scheme {}",
            "t",
            "n",
            "naive_ms",
            "fast_ms",
            "rou_ms",
            "msm_ms",
            "aggregate_ms",
            S::ID
        );
    }
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
    for &t in &args.threshold {
        if t == 0 || t > (1 << 30) {
            bail!("threshold {t} out of range (1..=2^30)");
        }
        let n = 2 * t - 1;
        let domain = beacon::SignerDomain::new(n)?;
        let signers = random_subset(&mut rng, n, t);
        let points: Vec<_> = signers
            .iter()
            .map(|s| domain.point(*s))
            .collect::<Result<_, _>>()?;
        // Shares: random points of the signature group (the MSM does not care whether
        // they are valid signatures; a real aggregate of valid shares is checked below).
        let base = S::Signature::generator().mul(&Scalar::random(&mut rng));
        let shares: Vec<SignatureShare<S>> = signers
            .iter()
            .enumerate()
            .map(|(i, s)| SignatureShare {
                signer: *s,
                signature: base.mul(&Scalar::from_u64(i as u64 + 1)),
            })
            .collect();
        let sigs: Vec<S::Signature> = shares.iter().map(|s| s.signature).collect();
        let scalars: Vec<Scalar> = (0..t).map(|_| Scalar::random(&mut rng)).collect();

        // Naive is Theta(t^2): estimate from a run at t/4 (x16) before committing to it.
        let naive = if t <= 4096 || estimate_naive_ms(&points) <= 60_000.0 {
            Some(median_ms(|| {
                lagrange_naive(&points).expect("distinct points")
            }))
        } else {
            eprintln!("t = {t}: one naive run would exceed 60 s; naive_coeff_ms = null");
            None
        };
        let fast = median_ms(|| lagrange_fast(&points).expect("distinct points"));
        let rou = median_ms(|| {
            domain
                .lagrange_at_zero(&signers, InterpolationMethod::RootsOfUnity)
                .expect("valid")
        });
        let msm = median_ms(|| S::Signature::msm(&sigs, &scalars));
        let aggregate = median_ms(|| {
            let c = domain
                .lagrange_at_zero(&signers, InterpolationMethod::RootsOfUnity)
                .expect("valid");
            beacon::threshold::combine::<S>(&c, &shares)
        });
        if args.json {
            println!(
                "{}",
                json!({"scheme": S::ID.as_str(), "threshold": t, "n": n, "naive_coeff_ms": naive,
                       "fast_coeff_ms": fast, "rou_coeff_ms": rou, "msm_ms": msm, "aggregate_ms": aggregate})
            );
        } else {
            let naive = naive.map_or("null".to_string(), |v| format!("{v:.3}"));
            println!(
                "{t:>7} {n:>7} {naive:>12} {fast:>12.3} {rou:>12.3} {msm:>12.3} {aggregate:>13.3}"
            );
        }
    }
    Ok(())
}

fn estimate_naive_ms(points: &[Scalar]) -> f64 {
    let quarter = &points[..points.len() / 4];
    let t = Instant::now();
    std::hint::black_box(lagrange_naive(quarter).expect("distinct points"));
    t.elapsed().as_secs_f64() * 1e3 * 16.0
}

fn verify<S: Scheme>(args: &VerifyArgs) -> Result<()> {
    let n = args.n;
    if n == 0 {
        bail!("--n must be at least 1");
    }
    let t = n / 2 + 1;
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
    let (public, secret) = deal::<S, _>(t, n, &mut rng)?;
    let msg = b"bench verify";
    let hashed = S::hash_message(msg);
    let honest: Vec<SignatureShare<S>> =
        secret.iter().map(|s| s.sign_hashed::<S>(&hashed)).collect();
    if !args.json {
        println!(
            "{:>6} {:>5} {:>14} {:>10} {:>14} {:>14}   scheme {}",
            "n",
            "bad",
            "individual_ms",
            "batch_ms",
            "optimistic_ms",
            "identified_ok",
            S::ID
        );
    }
    for &bad in &args.bad {
        if bad > n {
            bail!("--bad {bad} exceeds n = {n}");
        }
        let mut shares = honest.clone();
        let mut bad_signers: Vec<NodeIndex> = random_subset(&mut rng, n, bad);
        bad_signers.sort();
        for b in &bad_signers {
            let s = &mut shares[b.0 as usize];
            s.signature = s.signature.add(&S::Signature::generator());
        }
        let individual = median_ms(|| {
            shares
                .iter()
                .filter(|s| !public.verify_share(&hashed, s))
                .count()
        });
        let mut found = Vec::new();
        let batch = median_ms(|| found = public.find_invalid(&hashed, &shares, &mut rng));
        let identified_ok = found == bad_signers;
        let optimistic = median_ms(|| {
            public
                .recover(msg, &shares, InterpolationMethod::RootsOfUnity, &mut rng)
                .expect("enough shares")
        });
        if args.json {
            println!(
                "{}",
                json!({"scheme": S::ID.as_str(), "n": n, "bad": bad, "individual_ms": individual,
                       "batch_ms": batch, "optimistic_ms": optimistic, "identified_ok": identified_ok})
            );
        } else {
            println!("{n:>6} {bad:>5} {individual:>14.3} {batch:>10.3} {optimistic:>14.3} {identified_ok:>14}");
        }
    }
    Ok(())
}

/// `bench certificate`: one certificate of `s` signers among `n` members,
/// verified as a replica does (the signers' keys added, or the total less the
/// missing ones, then one pairing equation, the message hashed already), and
/// aggregated as a collector does (the votes added, the sum checked once);
/// and the batch check with random weights that names bad votes.
fn certificate<S: Scheme>(args: &CertificateArgs) -> Result<()> {
    use beacon::multisig::{aggregate, hash_vote, ConsensusSecretKey, MultisigKeys};
    let n = args.n;
    if n == 0 {
        bail!("--n must be at least 1");
    }
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed);
    let secrets: Vec<ConsensusSecretKey> = (0..n)
        .map(|_| ConsensusSecretKey::random(&mut rng))
        .collect();
    let keys = MultisigKeys::<S>::new(std::sync::Arc::new(
        secrets.iter().map(|s| s.public::<S>()).collect(),
    ));
    let hashed = hash_vote::<S>(b"bench certificate");
    let votes: Vec<SignatureShare<S>> = secrets
        .iter()
        .enumerate()
        .map(|(i, s)| SignatureShare {
            signer: NodeIndex(i as u32),
            signature: s.sign_hashed::<S>(&hashed),
        })
        .collect();
    if !args.json {
        println!(
            "{:>6} {:>8} {:>10} {:>13} {:>10}   scheme {}",
            "n",
            "signers",
            "verify_ms",
            "aggregate_ms",
            "batch_ms",
            S::ID
        );
    }
    for &s in &args.signers {
        if s == 0 || s > n {
            bail!("--signers {s} must be in 1..={n}");
        }
        let mut chosen = random_subset(&mut rng, n, s);
        chosen.sort();
        let signed: Vec<SignatureShare<S>> = chosen.iter().map(|i| votes[i.0 as usize]).collect();
        let (sum, bitmap) = aggregate::<S>(n, &signed)?;
        if !keys.verify(&hashed, &sum, &bitmap) {
            bail!("the certificate of {s} signers does not verify");
        }
        let verify = median_ms(|| keys.verify(&hashed, &sum, &bitmap));
        let aggregate_ms = median_ms(|| {
            let (sum, bitmap) = aggregate::<S>(n, &signed).expect("distinct signers");
            keys.verify(&hashed, &sum, &bitmap)
        });
        let batch = median_ms(|| keys.batch_verify(&hashed, &signed, &mut rng));
        if args.json {
            println!(
                "{}",
                json!({"scheme": S::ID.as_str(), "n": n, "signers": s, "verify_ms": verify,
                       "aggregate_ms": aggregate_ms, "batch_ms": batch})
            );
        } else {
            println!("{n:>6} {s:>8} {verify:>10.3} {aggregate_ms:>13.3} {batch:>10.3}");
        }
    }
    Ok(())
}

/// Committee of `k` dealers spread evenly over `n` members.
pub(crate) fn committee(n: u32, k: u32) -> Vec<NodeIndex> {
    (0..k)
        .map(|i| NodeIndex((i as u64 * n as u64 / k as u64) as u32))
        .collect()
}

fn dkg<S: Scheme>(args: &DkgArgs) -> Result<()> {
    use beacon::dkg::{harness, DkgSettings, DkgTiming};
    if !args.json {
        println!(
            "{:>6} {:>7} {:>18} {:>9} {:>10} {:>11} {:>12} {:>12} {:>13} {:>14}   scheme {}",
            "n",
            "dealers",
            "thresholds",
            "deal_ms",
            "verify_ms",
            "finalize_ms",
            "per_node_ms",
            "alone_ms",
            "total_wall_ms",
            "bytes_per_node",
            S::ID
        );
    }
    // Times are CPU times: MSMs on this thread alone, not on blst's pool.
    beacon::curve::set_msm_pool(false);
    for &n in &args.n {
        if n == 0 {
            bail!("--n must be at least 1");
        }
        let k = args.dealers.unwrap_or(n).clamp(1, n);
        // The DKG a network of n members runs: the beacon key's threshold.
        let c = consensus::config::smallest_collector_slack(n).unwrap_or(0);
        let thresholds = consensus::ReplicaConfig::new(n, c)?.dkg_thresholds();
        let config = DkgSettings {
            session: [args.seed as u8; 32],
            n,
            thresholds: thresholds.clone(),
            dealers: if k == n { Vec::new() } else { committee(n, k) },
            timing: DkgTiming::new(Duration::from_secs(1), 1),
            min_qualified: 1,
            max_faulty: 0,
        }
        .build()?;
        let memo = beacon::memo::Memo::shared();
        let start = Instant::now();
        let mut participants = harness::honest::<S>(&config, args.seed, &memo)?;
        // Member 0 computes everything alone, as a node does (it shares no
        // memo): its time is a node's, where the others' charges are those of
        // the computations they share (the FFTs at every member's point).
        participants[0] = Box::new(beacon::dkg::Dkg::<S>::new(
            config.clone(),
            NodeIndex(0),
            harness::member_seed(args.seed, 0),
            beacon::memo::Memo::disabled(),
        )?);
        let run = harness::run(participants, args.seed, &harness::Disturbances::default());
        let wall = start.elapsed().as_secs_f64() * 1e3;
        let failed = run
            .results
            .iter()
            .filter(|r| !matches!(r, Some(Ok(_))))
            .count();
        if failed > 0 {
            bail!("n = {n}: {failed} members did not finish the DKG");
        }
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e3 / n as f64;
        let cpu: f64 = run.cpu.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / n as f64;
        let alone = run.cpu[0].as_secs_f64() * 1e3;
        let bytes = run.bytes_sent.iter().sum::<u64>() / n as u64;
        let (deal, verify, finalize) = (
            per(run.phase_cpu[0]),
            per(run.phase_cpu[1]),
            per(run.phase_cpu[2]),
        );
        if args.json {
            println!(
                "{}",
                json!({"scheme": S::ID.as_str(), "n": n, "dealers": k, "thresholds": thresholds, "deal_ms": deal,
                       "verify_ms": verify, "finalize_ms": finalize, "per_node_cpu_ms": cpu,
                       "alone_cpu_ms": alone,
                       "total_wall_ms": wall, "bytes_sent_per_node": bytes})
            );
        } else {
            let th = format!("{thresholds:?}");
            println!(
                "{n:>6} {k:>7} {th:>18} {deal:>9.2} {verify:>10.2} {finalize:>11.2} {cpu:>12.2} {alone:>12.2} {wall:>13.0} {bytes:>14}"
            );
        }
    }
    Ok(())
}

fn relay<S: Scheme>(args: &RelayArgs) -> Result<()> {
    use beacon::dkg::{harness, DkgSettings, DkgTiming};
    let delivery = match args.delivery.as_str() {
        "fifo" => harness::Delivery::Fifo,
        "random" => harness::Delivery::Random,
        other => bail!("--delivery {other}: expected fifo or random"),
    };
    for &n in &args.n {
        if n < 4 {
            bail!("--n must be at least 4");
        }
        let f = (n - 1) / 3;
        let config = DkgSettings {
            session: [args.seed as u8; 32],
            n,
            thresholds: vec![f + 1, 2 * f + 1, 3 * f + 1],
            dealers: Vec::new(),
            timing: DkgTiming::new(Duration::from_secs(1), 1),
            min_qualified: f + 1,
            max_faulty: f,
        }
        .build()?;
        let memo = beacon::memo::Memo::shared();
        let start = Instant::now();
        let members = harness::honest_sessions::<S>(&config, args.seed, &memo)?;
        let run = harness::run_sessions(members, args.seed, delivery);
        let wall_s = start.elapsed().as_secs_f64();
        let failed = run
            .results
            .iter()
            .filter(|r| !matches!(r, Some(Ok(_))))
            .count();
        if failed > 0 {
            bail!("n = {n}: {failed} members did not finish the DKG");
        }
        // The relay's own traffic besides the broadcasts themselves.
        let attestation_kinds = ["dkg-summary", "dkg-pull-versions", "dkg-versions"];
        let (mut messages, mut bytes) = (0u64, 0u64);
        for k in attestation_kinds {
            if let Some((m, b)) = run.traffic.get(k) {
                messages += m;
                bytes += b;
            }
        }
        // Distinct broadcasts: every member's deal and complaint (+ justifications).
        let broadcasts = u64::from(2 * n);
        let traffic: serde_json::Map<String, serde_json::Value> = run
            .traffic
            .iter()
            .map(|(k, (m, b))| (k.to_string(), json!({"messages": m, "bytes": b})))
            .collect();
        let report = json!({
            "n": n,
            "scheme": S::ID.as_str(),
            "delivery": args.delivery,
            "traffic": traffic,
            "attestation_messages": messages,
            "attestation_bytes": bytes,
            "attestation_messages_per_broadcast": messages as f64 / broadcasts as f64,
            "attestation_bytes_per_broadcast": bytes as f64 / broadcasts as f64,
            "attestation_bytes_per_member": bytes as f64 / f64::from(n),
            "echo_design_messages_per_broadcast": u64::from(n) * u64::from(n - 1),
            "wall_s": wall_s,
        });
        if args.json {
            println!("{report}");
            continue;
        }
        println!(
            "n = {n}, {} delivery, scheme {} ({wall_s:.1} s):",
            args.delivery,
            S::ID
        );
        println!("{:>20} {:>10} {:>14}", "kind", "messages", "bytes");
        for (k, (m, b)) in &run.traffic {
            println!("{k:>20} {m:>10} {b:>14}");
        }
        println!(
            "attestations: {messages} messages, {bytes} bytes in all; per broadcast ({broadcasts}): {:.0} messages, {:.0} bytes (one attestation per member pair would be {} messages)",
            messages as f64 / broadcasts as f64,
            bytes as f64 / broadcasts as f64,
            u64::from(n) * u64::from(n - 1)
        );
    }
    Ok(())
}
