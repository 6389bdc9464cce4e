//! Phases end on events, and sessions over the relay send bounded attestations.

use super::*;

/// Phases end on events: an honest run needs no timer (messages take no time
/// in the harness), and a silent dealer costs the deal phase's timeout plus
/// the complaint phase's (its complaint never comes), not three phases.
#[test]
fn phases_end_when_everything_is_in() {
    let cfg = config(7, Vec::new());
    let run = harness::run::<MinPk, _>(
        harness::honest(&cfg, 5, &Memo::shared()).unwrap(),
        5,
        &Disturbances::default(),
    );
    assert!(run.results.iter().all(|r| matches!(r, Some(Ok(_)))));
    assert_eq!(run.finished_at, Time::ZERO);
    let silent = with_faults::<MinPk>(7, &[(3, DealerFault::Silent)], 5, &Disturbances::default());
    assert_eq!(
        silent.finished_at,
        Time::ZERO.plus_micros(2 * cfg.timing.phase_us())
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

/// With a committee of dealers, the relay's summaries go to and from the
/// committee (2 (n - K) K + K (K - 1) per kind, not n (n - 1)), a complaint
/// naming nobody and a vote go point to point to the committee alone, and
/// committee members send certificates of `n - f` votes; every
/// member still ends with the same keys, in any delivery order, without a
/// timer when messages take no time.
#[test]
fn with_a_committee_summaries_and_empty_complaints_go_through_it() {
    let n = 16u32;
    let dealers: Vec<NodeIndex> = [0, 3, 6, 9, 12].map(NodeIndex).to_vec();
    let k = dealers.len() as u64;
    let cfg = DkgSettings {
        min_qualified: 3,
        ..settings(n, dealers)
    }
    .build()
    .unwrap();
    for delivery in [harness::Delivery::Fifo, harness::Delivery::Random] {
        let run = harness::run_sessions::<MinSig>(
            harness::honest_sessions(&cfg, 8, &Memo::shared()).unwrap(),
            8,
            delivery,
        );
        let keys: Vec<_> = run
            .results
            .iter()
            .map(|r| match r {
                Some(Ok(out)) => out.keys[0].group_key().to_bytes(),
                other => panic!("{delivery:?}: {other:?}"),
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0] == w[1]), "{delivery:?}");
        let count = |kind: &str| run.traffic.get(kind).map_or(0, |t| t.0);
        let n = u64::from(n);
        // Only the committee's deals are broadcast: no complaint is.
        assert_eq!(
            count("dkg-broadcast"),
            k * (n - 1) + count("dkg-pull"),
            "{:?}",
            run.traffic
        );
        assert_eq!(count("dkg-no-complaint"), (n - k) * k + k * (k - 1));
        // Votes go to the committee, whose members certify the quorum.
        assert_eq!(count("dkg-result"), (n - k) * k + k * (k - 1));
        let certificates = count("dkg-certificate");
        assert!(
            certificates >= n - 1 && certificates <= k * (n - 1),
            "{:?}",
            run.traffic
        );
        if delivery == harness::Delivery::Fifo {
            assert_eq!(run.finished_at, Time::ZERO);
            assert_eq!(
                count("dkg-summary"),
                2 * (2 * (n - k) * k + k * (k - 1)),
                "{:?}",
                run.traffic
            );
        } else {
            // Fewer than all to all (two kinds), answers to differing
            // summaries included.
            assert!(count("dkg-summary") < 2 * n * (n - 1), "{:?}", run.traffic);
        }
    }
}
