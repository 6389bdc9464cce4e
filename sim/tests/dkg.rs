//! DKG attacks as seeded simulations (issue 15, findings 5, 7 and 8): the
//! simulator runs the same relay, agreement step and committee draw as the node.

use beacon::dkg::committee::Committee;
use beacon::dkg::Disqualification;
use sim::config::Latency;
use sim::SimConfig;

fn scenario(nodes: u32, seed: u64) -> SimConfig {
    let mut cfg = SimConfig::load("default").unwrap();
    cfg.nodes = nodes;
    cfg.rounds = 3;
    cfg.seed = seed;
    cfg.load.tx_per_second = 0.0;
    cfg.partitions.clear();
    cfg.faults.crash.clear();
    cfg.faults.byzantine = 0;
    cfg
}

/// Finding 5: a member signs three complaint versions, one against an honest
/// dealer, and sends each to a different member. Honest members must end with
/// the same QUAL and group key (the checker fails the run otherwise), and only
/// the equivocating member may be excluded.
#[test]
fn complaint_versions_do_not_split_qual() {
    for seed in 1..=3 {
        let mut cfg = scenario(4, seed);
        cfg.faults.byzantine = 1;
        cfg.faults.byzantine_kinds = vec!["complaint-versions".into()];
        let report = run_attacked(&cfg, seed);
        assert!(report.dkg_disqualified.len() <= 1, "seed {seed}");
    }
}

/// Runs `cfg`: no violation, every round, and only equivocators excluded.
fn run_attacked(cfg: &SimConfig, seed: u64) -> sim::Report {
    cfg.validate().unwrap();
    let (report, _) = sim::run(cfg, None).unwrap();
    assert!(
        report.violations.is_empty(),
        "seed {seed}: {:?}",
        report.violations
    );
    assert!(report.rounds >= 3, "seed {seed}");
    assert!(
        report
            .dkg_disqualified
            .values()
            .all(|why| *why == Disqualification::Equivocation),
        "seed {seed}: {:?}",
        report.dkg_disqualified
    );
    report
}

/// Finding 7: the first attempt fails (phases shorter than the latency), and a
/// member replays the honest dealers' signed deals of that attempt in the next
/// one. No honest dealer may be disqualified.
#[test]
fn replayed_old_session_deals_do_not_disqualify_honest_dealers() {
    let mut cfg = scenario(4, 7);
    cfg.network.latency = Latency::Constant { ms: 10.0 };
    cfg.network.jitter_ms = 0.0;
    cfg.dkg.phase_timeout_ms = 8;
    cfg.dkg.max_attempts = 3;
    cfg.faults.byzantine = 1;
    cfg.faults.byzantine_kinds = vec!["replay-old-session".into()];
    cfg.validate().unwrap();
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    // Attempt 0 lasts 4 phases of 8 ms: a later end means the DKG reran.
    assert!(report.dkg_virtual_ms > 32.0, "{}", report.dkg_virtual_ms);
    assert!(
        report.dkg_disqualified.is_empty(),
        "{:?}",
        report.dkg_disqualified
    );
    assert_eq!(report.dkg_qualified, 4);
}

/// Finding 8: the committee is drawn from the genesis seed and sized by the
/// committee rule, not `i * n / K`.
#[test]
fn the_committee_is_drawn_from_the_genesis_seed() {
    let mut cfg = scenario(16, 3);
    cfg.dkg.dealers = 4;
    cfg.validate().unwrap();
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let genesis: [u8; 32] = sha2_digest(&format!("sbft-beacon genesis {}", cfg.seed));
    let f = (16 - 1) / 3;
    let committee = Committee::draw(16, f, 4, &genesis);
    assert_eq!(report.dkg_dealers as usize, committee.dealers.len());
    assert!(report.dkg_qualified >= committee.min_qualified);
    let fixed: Vec<u32> = (0..committee.dealers.len() as u64)
        .map(|i| (i * 16 / committee.dealers.len() as u64) as u32)
        .collect();
    let drawn: Vec<u32> = committee.dealers.iter().map(|d| d.0).collect();
    assert_ne!(drawn, fixed);
}

/// With a committee, the relay's summaries go to and from the committee and
/// complaints naming nobody to the committee alone. The attacks above still
/// fail, whether the attacker deals or not: honest members end with one QUAL
/// and one group key, and only the attacker may be excluded.
#[test]
fn with_a_committee_the_dkg_attacks_still_fail() {
    for (seed, kind) in [
        (1, "complaint-versions"),
        (2, "complaint-versions"),
        (3, "complaint-versions"),
        (4, "replay-old-session"),
        (5, "false-settled"),
        (6, "false-settled"),
        (7, "bad-result-vote"),
        (8, "bad-result-vote"),
    ] {
        let mut cfg = scenario(16, seed);
        cfg.dkg.dealers = 4;
        cfg.faults.byzantine = 2;
        cfg.faults.byzantine_kinds = vec![kind.into()];
        let report = run_attacked(&cfg, seed);
        assert!(report.dkg_dealers < 16, "seed {seed}: no committee");
        // Complaints naming nobody went to the committee alone.
        assert!(
            report.dkg_messages_by_kind.contains_key("dkg-no-complaint"),
            "seed {seed}: {:?}",
            report.dkg_messages_by_kind
        );
    }
}

fn sha2_digest(s: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(s).into()
}
