//! 64 → 96 members, from a real DKG, without the simulator: checks the result and
//! reports (never asserts) how long the DKG and the resharing took. Run with
//! `cargo test -p beacon reshare_64_to_96 -- --nocapture` to see the numbers.

use super::*;
use crate::dkg::{harness as dkg_harness, DkgSettings, DkgTiming};
use crate::scheme::MinSig;
use std::time::{Duration, Instant};

/// CPU time of this process so far (user + system, Linux only): robust to other
/// load on the machine, unlike wall-clock times.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn ms(d: Option<Duration>) -> String {
    d.map_or("n/a".into(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3))
}

fn per_member(cpu: &[Duration]) -> (f64, f64) {
    let ms: Vec<f64> = cpu.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let mean = ms.iter().sum::<f64>() / ms.len().max(1) as f64;
    let max = ms.iter().copied().fold(0.0, f64::max);
    (mean, max)
}

/// Wall time and process CPU of `f`.
fn measure<T>(f: impl FnOnce() -> T) -> (T, Duration, Option<Duration>) {
    let cpu = process_cpu();
    let started = Instant::now();
    let value = f();
    let wall = started.elapsed();
    let spent = process_cpu().zip(cpu).map(|(b, a)| b.saturating_sub(a));
    (value, wall, spent)
}

fn report(what: &str, wall: Duration, process: Option<Duration>, cpu: &[Duration], sent: &[u64]) {
    let (mean, max) = per_member(cpu);
    println!(
        "{what}: wall {:.0} ms, process CPU {} (shared computations once); per party \
         (shared ones charged to each) mean {mean:.0} ms, max {max:.0} ms; max sent {} B",
        wall.as_secs_f64() * 1e3,
        ms(process),
        sent.iter().max().copied().unwrap_or(0),
    );
}

/// A DKG of `n` members with one threshold `f + 1`.
fn dkg(n: u32, seed: u64) -> dkg_harness::DkgRun<MinSig> {
    let f = (n - 1) / 3;
    let config = DkgSettings {
        session: [n as u8; 32],
        n,
        thresholds: vec![f + 1],
        dealers: Vec::new(),
        timing: DkgTiming::new(Duration::from_millis(1), 1),
        min_qualified: f + 1,
        max_faulty: f,
    }
    .build()
    .unwrap();
    let memo = Memo::shared();
    let participants = dkg_harness::honest(&config, seed, &memo).unwrap();
    dkg_harness::run::<MinSig, _>(participants, seed, &Disturbances::default())
}

#[test]
fn reshare_64_to_96_from_a_dkg() {
    // The old group: a DKG of 64 members (f = 21, beacon threshold 22).
    let (old, wall, process) = measure(|| dkg(64, 64));
    report("DKG 64 (t = 22)", wall, process, &old.cpu, &old.bytes_sent);
    let outputs: Vec<_> = old
        .results
        .iter()
        .map(|r| r.clone().unwrap().unwrap())
        .collect();
    let old_polynomial = outputs[0].keys[0].public_polynomial.clone();
    let old_shares: Vec<Option<SecretShare>> = outputs
        .iter()
        .map(|o| Some(o.keys[0].secret_share.clone()))
        .collect();

    // The new group: 8 of the 64 leave, 40 join (96 members, f = 31, t = 32).
    let epoch = epoch::<MinSig>(&ids(0..64), old_polynomial, &ids(8..104), 32);
    let (run, wall, process) = measure(|| {
        let participants = harness::honest(&epoch, &old_shares, 65, &Memo::shared()).unwrap();
        harness::run(participants, 65, &Disturbances::default())
    });
    report(
        "reshare 64 -> 96 (t = 22 -> 32, 104 participants)",
        wall,
        process,
        &run.cpu,
        &run.bytes_sent,
    );
    let results = check_reshared(&run, &epoch, &[]);
    assert_eq!(results[0].as_ref().unwrap().verdicts.qual.len(), 64);
    let signers: Vec<u32> = (0..96).step_by(3).collect();
    assert!(sign_beacon(&results, &signers, 96));

    // For scale: a fresh DKG of the new group's size.
    let (fresh, wall, process) = measure(|| dkg(96, 96));
    report(
        "DKG 96 (t = 32)",
        wall,
        process,
        &fresh.cpu,
        &fresh.bytes_sent,
    );
}
