//! DKG snapshots (`sim --save-dkg` / `--load-dkg`): a run from a snapshot has
//! the rounds of the run that saved it, and a snapshot of another run is
//! refused, naming what differs.

use sim::config::Crash;
use sim::snapshot::SnapshotMode;
use sim::{Report, SimConfig};
use std::path::Path;

fn scenario() -> SimConfig {
    let mut cfg = SimConfig::load("default").unwrap();
    cfg.nodes = 10;
    cfg.rounds = 6;
    cfg.partitions.clear();
    cfg.faults.crash.clear();
    cfg.faults.byzantine = 0;
    cfg
}

fn run(cfg: &SimConfig, mode: SnapshotMode) -> Report {
    let mut cfg = cfg.clone();
    cfg.dkg_snapshot = Some(mode);
    cfg.validate().unwrap();
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    report
}

fn save(cfg: &SimConfig, path: &Path) -> Report {
    run(cfg, SnapshotMode::Save(path.to_path_buf()))
}

fn load(cfg: &SimConfig, path: &Path) -> Report {
    run(cfg, SnapshotMode::Load(path.to_path_buf()))
}

/// The rounds from a snapshot are those of the run that saved it, event for
/// event, with Byzantine members, a twin and a crash-restart after the cut,
/// and whatever the thread count.
#[test]
fn a_run_from_a_snapshot_has_the_rounds_of_the_run_that_saved_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dkg.snap");
    let mut cfg = scenario();
    cfg.faults.byzantine = 1;
    cfg.faults.byzantine_kinds = vec!["equivocating-primary".into()];
    cfg.faults.twins = 1;
    cfg.faults.crash.push(Crash {
        node: 0,
        at_ms: 400,
        restart_ms: Some(900),
        lose_votes: false,
        after_write: None,
        in_dkg: false,
    });
    cfg.threads = 2;
    let saved = save(&cfg, &path);
    let snapshot = saved.dkg_snapshot.as_ref().expect("reported");
    assert_eq!(snapshot.action, "saved");
    assert!(saved.rounds >= cfg.rounds);
    cfg.threads = 16;
    let loaded_on_16 = load(&cfg, &path);
    cfg.threads = 1;
    let loaded = load(&cfg, &path);
    assert_eq!(loaded.dkg_snapshot.as_ref().unwrap().action, "loaded");
    let hash = saved.rounds_trace_hash.clone().expect("a cut");
    assert_eq!(loaded.rounds_trace_hash.as_ref(), Some(&hash));
    assert_eq!(loaded_on_16.rounds_trace_hash.as_ref(), Some(&hash));
    // The run from the file ran nothing before the cut.
    assert_eq!(loaded.trace_hash, hash);
    assert_ne!(saved.trace_hash, hash, "the saving run's trace has its DKG");
    assert_eq!(
        saved.final_beacon.as_ref().map(|b| &b.signature),
        loaded.final_beacon.as_ref().map(|b| &b.signature)
    );
    assert_eq!(saved.group_public_key, loaded.group_public_key);
    assert_eq!(saved.dkg_messages_by_kind, loaded.dkg_messages_by_kind);
    assert_eq!(saved.dkg_virtual_ms, loaded.dkg_virtual_ms);
}

/// A sweep changes what comes after the DKG: the snapshot serves it.
#[test]
fn a_snapshot_serves_a_sweep_of_the_protocol_after_the_dkg() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dkg.snap");
    let cfg = scenario();
    let saved = save(&cfg, &path);
    let mut sweep = cfg.clone();
    sweep.rounds = 9;
    sweep.protocol.fast_path_timeout_ms *= 2;
    sweep.network.jitter_ms += 3.0;
    let loaded = load(&sweep, &path);
    assert!(loaded.rounds >= 9);
    assert_eq!(saved.group_public_key, loaded.group_public_key);
    assert_ne!(saved.rounds_trace_hash, loaded.rounds_trace_hash);
}

/// A snapshot of another scenario, seed, membership or scheme is refused,
/// naming the field; so are damaged files.
#[test]
fn a_snapshot_of_another_run_is_refused_naming_what_differs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dkg.snap");
    let cfg = scenario();
    save(&cfg, &path);
    let refused = |change: &dyn Fn(&mut SimConfig), what: &str| {
        let mut other = cfg.clone();
        change(&mut other);
        other.dkg_snapshot = Some(SnapshotMode::Load(path.clone()));
        let err = sim::run(&other, None).expect_err("refused").to_string();
        assert!(err.contains(what), "{what}: {err}");
    };
    refused(&|c| c.seed += 1, "its seed is 1, this run's is 2");
    refused(&|c| c.nodes = 13, "number of members");
    refused(&|c| c.name = "other".into(), "scenario");
    refused(
        &|c| c.scheme = beacon::SchemeId::BlsChainedG1Rfc9380,
        "scheme",
    );
    refused(
        &|c| {
            c.faults.byzantine = 1;
            c.faults.byzantine_kinds = vec!["equivocating-primary".into()];
        },
        "Byzantine members",
    );

    let bytes = std::fs::read(&path).unwrap();
    let damaged = dir.path().join("damaged.snap");
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let mut other = cfg.clone();
    other.dkg_snapshot = Some(SnapshotMode::Load(damaged));
    let err = sim::run(&other, None).expect_err("refused").to_string();
    assert!(err.contains("not a DKG snapshot"), "{err}");
    other.dkg_snapshot = Some(SnapshotMode::Load(dir.path().join("missing.snap")));
    let err = sim::run(&other, None).expect_err("refused").to_string();
    assert!(err.contains("missing.snap"), "{err}");
}
