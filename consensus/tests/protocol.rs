//! Protocol tests on an in-memory pump: liveness and safety under faults.

mod common;

use beacon::{MinPk, MinSig, NodeIndex, Time};
use common::Net;
use consensus::{Behaviour, EvidenceKind, Height};

use common::fast_config as config;

#[test]
fn all_honest_commit_on_the_fast_path_with_verifying_beacons() {
    for (n, c) in [(4, 0), (6, 1), (16, 0)] {
        let mut net = Net::<MinSig>::new(config(n, c), n as u64, &[]);
        net.start();
        assert!(
            net.run_until(8, Time::from_millis(60_000)),
            "n = {n}: no progress"
        );
        net.assert_agreement();
        net.assert_beacons_verify();
        assert_eq!(
            net.fast_commits(),
            net.all_commits(),
            "n = {n}: a slow-path commit without faults"
        );
        assert_eq!(net.record.view_changes, 0);
    }
}

#[test]
fn default_scheme_works_too() {
    let mut net = Net::<MinPk>::new(config(4, 0), 3, &[]);
    net.start();
    assert!(net.run_until(4, Time::from_millis(60_000)));
    net.assert_agreement();
    net.assert_beacons_verify();
}

#[test]
fn one_silent_replica_with_c_collectors_keeps_the_fast_path() {
    // n = 6, f = 1, c = 1: 3f + c + 1 = 5 of 6 suffice.
    let mut net = Net::<MinSig>::new(config(6, 1), 11, &[(2, Behaviour::WithholdShares)]);
    net.start();
    assert!(net.run_until(8, Time::from_millis(60_000)));
    net.assert_agreement();
    net.assert_beacons_verify();
    assert_eq!(net.fast_commits(), net.all_commits());
}

#[test]
fn one_silent_replica_without_c_commits_on_the_slow_path() {
    let mut net = Net::<MinSig>::new(config(4, 0), 12, &[(1, Behaviour::WithholdShares)]);
    net.start();
    assert!(net.run_until(8, Time::from_millis(60_000)));
    net.assert_agreement();
    net.assert_beacons_verify();
    // Wherever the withholder is not itself the collector, only the slow path can commit.
    assert!(
        net.fast_commits() < net.all_commits(),
        "the slow path was never used"
    );
}

#[test]
fn silent_primary_leads_to_a_view_change_and_progress() {
    let mut net = Net::<MinSig>::new(config(4, 0), 13, &[(0, Behaviour::Silent)]);
    net.start();
    assert!(net.run_until(10, Time::from_millis(120_000)));
    net.assert_agreement();
    net.assert_beacons_verify();
}

#[test]
fn silent_collector_is_covered_by_the_backup_or_a_view_change() {
    for (n, c) in [(4, 0), (6, 1)] {
        let mut net = Net::<MinSig>::new(config(n, c), 14, &[(1, Behaviour::SilentCollector)]);
        net.start();
        let ok = net.run_until(10, Time::from_millis(120_000));
        let heights: Vec<Height> = (0..n as usize).map(|i| net.current_height(i)).collect();
        assert!(
            ok,
            "n = {n}: heights {heights:?}, view changes {}",
            net.record.view_changes
        );
        net.assert_agreement();
        net.assert_beacons_verify();
    }
}

#[test]
fn invalid_shares_are_named_and_commits_continue() {
    // n = 7: f = 2 bad signers.
    let mut net = Net::<MinSig>::new(
        config(7, 0),
        15,
        &[(3, Behaviour::BadShares), (5, Behaviour::BadShares)],
    );
    net.start();
    assert!(net.run_until(6, Time::from_millis(120_000)));
    net.assert_agreement();
    net.assert_beacons_verify();
    let mut culprits: Vec<NodeIndex> = net
        .record
        .evidence
        .iter()
        .filter(|e| matches!(e.kind, EvidenceKind::InvalidShare { .. }))
        .map(|e| e.culprit)
        .collect();
    culprits.sort();
    culprits.dedup();
    assert_eq!(culprits, vec![NodeIndex(3), NodeIndex(5)]);
}

#[test]
fn equivocating_primaries_never_cause_two_commits() {
    for seed in 0..12u64 {
        let byz = [
            (0, Behaviour::EquivocatingPrimary),
            (3, Behaviour::ConflictingViewChange),
        ];
        let mut net = Net::<MinSig>::new(config(7, 0), 100 + seed, &byz);
        // Adversarial scheduling: widely spread delays reorder everything.
        net.min_delay_us = 0;
        net.max_delay_us = 80_000;
        net.start();
        let progressed = net.run_until(5, Time::from_millis(240_000));
        net.assert_agreement();
        assert!(progressed, "seed {seed}: no progress");
        net.assert_beacons_verify();
    }
}
