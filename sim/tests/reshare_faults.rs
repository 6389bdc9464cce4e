//! Changes of members under crashes and partitions (issue 38): the campaign
//! seeds that once cost a member its part of a change, replayed as
//! regression tests. The simulator no longer excuses such a member: every
//! honest new member must run the new epoch.

use sim::reshare::ReshareReport;
use sim::{campaign, SimConfig};

/// The change-of-members campaign's base scenario.
fn reshare_small() -> SimConfig {
    SimConfig::load("../configs/sim/reshare-small.toml").unwrap()
}

/// Runs campaign seed `seed` (whose fault mix has one fault that `faults`
/// counts) and checks that it is clean and that every honest new member runs
/// the new epoch; returns the seed's configuration and its change.
fn every_honest_new_member_switches(
    seed: u64,
    faults: impl Fn(&SimConfig) -> usize,
) -> (SimConfig, ReshareReport) {
    let cfg = campaign::draw(&reshare_small(), seed);
    assert_eq!(faults(&cfg), 1, "seed {seed}: the fault mix changed");
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(
        report.violations.is_empty(),
        "seed {seed}: {:?}",
        report.violations
    );
    let change = report.reshare.expect("a change of members");
    // Twins are faulty and not in `byzantine`: at most that many fewer.
    let honest_new = change.new_nodes - report.byzantine - cfg.faults.twins;
    assert!(
        change.started >= honest_new,
        "seed {seed}: {} of {honest_new} honest new members started",
        change.started
    );
    (cfg, change)
}

/// Seed 730070: old member 3, which stays, crashes before the decision and
/// restarts 2 s after it, while a `split-new-view` member runs. It used to
/// deal and take its sub-shares 2 s late and complain about every dealer it
/// had missed, after the dealers' complaint phase; joiner 8, still in its
/// justification phase, took the complaints and disqualified every honest
/// dealer ("only 1 qualified old dealers"), and member 3's own DKG of the
/// consensus keys ended on a result it did not hold. Now the restarted member
/// asks the dealers for what it lacks, and a member whose own resharing ends
/// short waits for the dealers the chain names.
#[test]
fn a_member_restarted_mid_change_asks_for_its_part_and_switches() {
    // Every honest new member runs the new epoch, the restarted one included.
    let (cfg, change) = every_honest_new_member_switches(730_070, |cfg| cfg.faults.crash.len());
    assert!(
        !change.left.contains(&cfg.faults.crash[0].node),
        "the crashed member must be one that stays"
    );
}

/// Seeds 27 and 261: old members 0 and 1, which stay, are partitioned away
/// from the others after the decision (for 2.3 s and for 7.4 s). The others
/// agreed on the new members' DKG without them; their own attempt never got
/// the votes, and they went through the attempts alone ("no agreement after
/// 3 attempts"); the simulator excused them. Now they keep asking until they
/// hold both results: the certificate of the agreed attempt (taking them
/// back to it if they went on), its deals and their shares. Seed 261 then
/// failed another way (with the dealings of issue 38's seeds): member 0's
/// own resharing completed from dealers 0, 1, 3 and 6, the chain switched to
/// the keys of dealers 1, 2 and 3, and it had stopped asking once done,
/// without dealer 2's deal ("the epoch switched to keys this member does not
/// hold"). Now it asks the dealers the chain named for what it lacks and
/// adopts the chain's keys when their deals are in.
#[test]
fn members_partitioned_away_during_the_change_catch_up_and_switch() {
    for seed in [27, 261] {
        every_honest_new_member_switches(seed, |cfg| cfg.partitions.len());
    }
}

/// Seeds 730102 and 730039: a member completes (or misses) the new members'
/// DKG of the consensus keys and is then cut off, crashed (old member 5,
/// 3.4 s to 4.2 s, before the switch) or partitioned away (old members 0 and
/// 1, 2.8 s to 7.2 s). It comes back after the others agreed, with its own
/// attempt over alone, and asks every dealer: the certificate arrived with
/// the first answer, before the other dealers' deals and shares, and the
/// member counted those without looking at the agreed result again; it
/// waited, went on alone and failed ("no agreement after 3 attempts"). Now
/// each deal or share that comes in while `n - f` agreed makes it check
/// whether it holds the agreed result.
#[test]
fn a_member_back_after_the_agreement_adopts_the_keys_once_its_answers_are_in() {
    for seed in [730_102, 730_039] {
        every_honest_new_member_switches(seed, |cfg| cfg.faults.crash.len() + cfg.partitions.len());
    }
}

/// Seeds 110113 and 110145: faulty old members' deals reached some new
/// members within the deal phase and not others (110113: two twins, each
/// instance dealing to its side of the network, and a crash; 110145: two
/// Byzantine members and a partition), so the new members' own resharings
/// qualified different dealers and their readies split over two or three
/// sets of keys (4 + 2 and 4 + 2 + 1 of the 7 the switch needs). The chain
/// never switched, and the old epoch ran until the time bound. Now the
/// first keys `f' + 1` new members are ready with are named by the chain,
/// and every new member recombines those and is ready with them.
#[test]
fn readies_split_by_faulty_dealers_converge_on_the_keys_the_chain_names() {
    let (cfg, _) = every_honest_new_member_switches(110_113, |cfg| cfg.faults.crash.len());
    assert_eq!(cfg.faults.twins, 2, "seed 110113: the fault mix changed");
    let (cfg, _) = every_honest_new_member_switches(110_145, |cfg| cfg.partitions.len());
    assert_eq!(
        cfg.faults.byzantine, 2,
        "seed 110145: the fault mix changed"
    );
}

/// Issue 53, chaos finding 2 (a stayer): old member 0, which stays, crashes
/// right after the others are ready (3.1 s after the DKG), is back 0.6 s
/// later, and crashes again after the switch, still without its new keys;
/// it is back 25 s later. It restarts in the old epoch, reads the decision
/// and the switch on its chain, and asks the named dealers for their deals
/// and its sub-shares. The dealers used to erase what they dealt 8 phase
/// lengths (16 s) after the switch: the stayer never got its keys and the
/// change never completed at it (as at a real node under `sbft-beacon
/// chaos`). They now keep it 32 phase lengths.
#[test]
fn a_stayer_killed_again_after_the_switch_gets_its_keys_when_back() {
    let mut cfg = reshare_small();
    for (at_ms, restart_ms) in [(3_100, 3_700), (4_000, 29_000)] {
        cfg.faults.crash.push(sim::config::Crash {
            node: 0,
            at_ms,
            restart_ms: Some(restart_ms),
            lose_votes: false,
            after_write: None,
            in_dkg: false,
        });
    }
    cfg.validate().unwrap();
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let change = report.reshare.expect("a change of members");
    assert!(!change.left.contains(&0), "member 0 stays");
    assert_eq!(change.started, change.new_nodes, "{change:?}");
}

/// Issue 53, chaos finding (hour runs, seeds 505 and 606): old member 0,
/// which stays, crashes after the decision (3.2 s) and is back after the
/// switch (12 s); old member 1, a dealer of the keys the chain switched to,
/// restarts right after the switch (4.3 s to 4.6 s). Member 0 reads the
/// switch on its chain and asks the named dealers for their deals and its
/// sub-shares. Member 1 used to keep its retained transition in memory
/// only, its old share erased by its new epoch record: nothing could deal
/// its deal again, and member 0 waited for its keys for good (9 of 10
/// members started the new epoch). Now a dealer keeps what it dealt on its
/// disk until the erasure (`consensus::disk::RetainedDeal`) and rebuilds
/// it when restored.
#[test]
fn a_stayer_back_after_the_switch_whose_named_dealer_restarted_gets_its_keys() {
    let mut cfg = reshare_small();
    for (node, at_ms, restart_ms) in [(0, 3_200, 12_000), (1, 4_300, 4_600)] {
        cfg.faults.crash.push(sim::config::Crash {
            node,
            at_ms,
            restart_ms: Some(restart_ms),
            lose_votes: false,
            after_write: None,
            in_dkg: false,
        });
    }
    cfg.validate().unwrap();
    let (report, _) = sim::run(&cfg, None).unwrap();
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    let change = report.reshare.expect("a change of members");
    assert_eq!(change.started, change.new_nodes, "{change:?}");
}
