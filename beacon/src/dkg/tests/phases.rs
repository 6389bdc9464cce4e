//! Phases end on events, and sessions over the relay send bounded attestations.

use super::*;

/// Phases end on events: an honest run needs no timer (messages take no time
/// in the harness), and a silent dealer costs the deal phase's timeout plus
/// the complaint phase's (its complaint never comes), not three phases.
#[test]
fn phases_end_when_everything_is_in() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinPk>(
        harness::honest(&cfg, 5, &Memo::shared()).unwrap(),
        5,
        &Disturbances::default(),
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert_eq!(run.finished_at, Time::ZERO);
    let silent = with_faults::<MinPk>(7, &[(3, DealerFault::Silent)], 5, &Disturbances::default());
    assert_eq!(
        silent.finished_at,
        Time::ZERO.plus_micros(2 * cfg.phase_timeout_us)
    );
}

/// Whole sessions over the relay: an honest run ends without a timer, and its
/// attestations are one summary per member pair and kind (deals, complaints;
/// no justification is due), with no lists or pulls.
#[test]
fn honest_sessions_end_on_events_with_bounded_attestations() {
    let n = 10u32;
    let cfg = config(n, Vec::new())
        .with(|c| c.max_faulty = (n - 1) / 3)
        .unwrap();
    let run = harness::run_sessions::<MinSig>(
        harness::honest_sessions(&cfg, 8, &Memo::shared()).unwrap(),
        8,
        harness::Delivery::Fifo,
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert_eq!(run.finished_at, Time::ZERO);
    let pairs = u64::from(n * (n - 1));
    let count = |kind: &str| run.traffic.get(kind).map_or(0, |t| t.0);
    assert_eq!(count("dkg-summary"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-broadcast"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-shares"), pairs);
    assert_eq!(count("dkg-result"), pairs);
    for kind in ["dkg-pull", "dkg-pull-versions", "dkg-versions"] {
        assert_eq!(count(kind), 0, "{kind}: {:?}", run.traffic);
    }
    // Any delivery order: still one summary per pair and kind; members that
    // hear of broadcasts before they arrive ask a few lists and payloads.
    let run = harness::run_sessions::<MinSig>(
        harness::honest_sessions(&cfg, 8, &Memo::shared()).unwrap(),
        8,
        harness::Delivery::Random,
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    let count = |kind: &str| run.traffic.get(kind).map_or(0, |t| t.0);
    assert_eq!(count("dkg-summary"), 2 * pairs, "{:?}", run.traffic);
    assert_eq!(count("dkg-broadcast"), 2 * pairs + count("dkg-pull"));
    assert!(count("dkg-pull-versions") <= 2 * pairs, "{:?}", run.traffic);
}
