//! The fault schedule of a chaos run, drawn from the seed alone: the same
//! seed, node count and duration give the same schedule (a failing run is
//! replayed from its seed).
//!
//! Faults come one after another at random gaps, their kinds in rounds of one
//! of each (in a random order), so that every kind is drawn as often. The
//! faults that take a node out of the protocol (a kill, a partition, a full
//! disk, a clock skew, which restarts the node) never leave more than `f`
//! members out at once: a fault waits until enough nodes are back (counting
//! a few seconds for a node to catch up after it heals). Every
//! `change_every_ms` the members change: one leaves, a spare joins, and a
//! member or the joiner is killed while the change runs.

use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use serde::Serialize;

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FaultKind {
    /// SIGKILL, then a restart from disk when the fault heals.
    Kill,
    /// The nodes' links to the others cut in the emulator, both ways.
    Partition,
    /// The node restarted with its clock moved (within or beyond the network's
    /// `max_clock_skew`), and restarted with a true clock when it heals.
    ClockSkew,
    /// Extra one-way delay on every link from and to the node.
    SlowLink,
    /// Every write of the node to a file fails (a file size limit of 0).
    DiskFull,
    /// A change of members: `nodes[0]` leaves, `nodes[1]` joins.
    MemberChange,
}

impl FaultKind {
    /// The kinds drawn at random gaps (a change of members comes on its own
    /// clock).
    pub(crate) const RANDOM: [FaultKind; 5] = [
        FaultKind::Kill,
        FaultKind::Partition,
        FaultKind::ClockSkew,
        FaultKind::SlowLink,
        FaultKind::DiskFull,
    ];

    /// The name in reports (`faults` keys).
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::Kill => "kill",
            FaultKind::Partition => "partition",
            FaultKind::ClockSkew => "clock_skew",
            FaultKind::SlowLink => "slow_link",
            FaultKind::DiskFull => "disk_full",
            FaultKind::MemberChange => "member_change",
        }
    }

    /// Whether the fault takes its nodes out of the protocol while it lasts.
    pub(crate) fn takes_nodes_out(self) -> bool {
        !matches!(self, FaultKind::SlowLink | FaultKind::MemberChange)
    }
}

/// One fault: from `at_ms` to `heal_ms` after the start of the run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Fault {
    pub(crate) at_ms: u64,
    pub(crate) heal_ms: u64,
    pub(crate) kind: FaultKind,
    /// The nodes it hits (directory indices).
    pub(crate) nodes: Vec<u32>,
    /// Clock offset (ms) of a `ClockSkew`; extra delay (ms) of a `SlowLink`.
    pub(crate) amount_ms: i64,
}

/// What the schedule is drawn for.
#[derive(Clone, Debug)]
pub(crate) struct ScheduleParams {
    pub(crate) seed: u64,
    /// Genesis members (nodes `0..members`); nodes `members..members +
    /// SPARES` are the spares that the first changes of members add.
    pub(crate) members: u32,
    pub(crate) duration_ms: u64,
    /// Mean gap between two random faults.
    pub(crate) mean_gap_ms: u64,
    /// Time between two changes of members (0: none).
    pub(crate) change_every_ms: u64,
    /// The network's `max_clock_skew` (ms).
    pub(crate) max_skew_ms: u64,
}

/// Nodes outside the genesis members that changes of members add in turn:
/// a leaver joins again two changes later, so that it can keep running
/// while it serves what it dealt (32 phase lengths after its switch: a
/// member that missed the switch needs every dealer the chain named).
pub(crate) const SPARES: u32 = 2;

/// Milliseconds a node is counted out after its fault heals (restart and
/// catch-up).
const CATCH_UP_MS: u64 = 1_000;
/// Milliseconds after a change's proposal before the joiner is a target.
const CHANGE_SETTLES_MS: u64 = 60_000;
/// No fault starts this close to the end, so the last heal comes before it.
const QUIET_END_MS: u64 = 5_000;

/// The largest `f` with `3f + 1 <= n`.
pub(crate) fn max_faulty(n: u32) -> u32 {
    n.saturating_sub(1) / 3
}

/// Who is a member from a time on, and the joiner that is no target before
/// its change settled.
struct Era {
    from: u64,
    members: Vec<u32>,
    settling: Option<(u32, u64)>,
}

/// One interval a node is out, for the budget of `f`.
struct Out {
    node: u32,
    from: u64,
    to: u64,
    /// Whether it counts against `f` (a slow link only keeps other faults off
    /// the node).
    counts: bool,
}

/// A kill of `node` from `at` to `heal`: the fault, and the node counted out
/// until it has caught up.
fn push_kill(outs: &mut Vec<Out>, faults: &mut Vec<Fault>, node: u32, at: u64, heal: u64) {
    outs.push(Out {
        node,
        from: at,
        to: heal + CATCH_UP_MS,
        counts: true,
    });
    faults.push(Fault {
        at_ms: at,
        heal_ms: heal,
        kind: FaultKind::Kill,
        nodes: vec![node],
        amount_ms: 0,
    });
}

/// Draws the schedule of `p`, sorted by start.
pub(crate) fn draw(p: &ScheduleParams) -> Vec<Fault> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(p.seed);
    let f = max_faulty(p.members);
    let end = p.duration_ms.saturating_sub(QUIET_END_MS);
    let mut faults = Vec::new();
    // Changes of members first: they fix who is a member when.
    let mut members: Vec<u32> = (0..p.members).collect();
    // The spares join in turn, a leaver after the others: it keeps serving
    // what it dealt for a while after it left ([`SPARES`]).
    let mut spares: std::collections::VecDeque<u32> = (p.members..p.members + SPARES).collect();
    let mut eras = vec![Era {
        from: 0,
        members: members.clone(),
        settling: None,
    }];
    let mut outs: Vec<Out> = Vec::new();
    if p.change_every_ms > 0 {
        let mut at = p.change_every_ms;
        while at < end {
            let leaver = members[rng.gen_range(0..members.len())];
            let Some(spare) = spares.pop_front() else {
                break;
            };
            faults.push(Fault {
                at_ms: at,
                heal_ms: at,
                kind: FaultKind::MemberChange,
                nodes: vec![leaver, spare],
                amount_ms: 0,
            });
            members.retain(|&m| m != leaver);
            members.push(spare);
            members.sort_unstable();
            eras.push(Era {
                from: at,
                members: members.clone(),
                settling: Some((spare, at + CHANGE_SETTLES_MS)),
            });
            // A kill while the change is dealt: a stayer or the joiner.
            let stayers: Vec<u32> = members.iter().copied().filter(|&m| m != spare).collect();
            let victim = if rng.gen_bool(0.5) {
                spare
            } else {
                stayers[rng.gen_range(0..stayers.len())]
            };
            let kill_at = at + rng.gen_range(500..5_000);
            let heal = kill_at + rng.gen_range(1_000..5_000);
            if heal < end {
                push_kill(&mut outs, &mut faults, victim, kill_at, heal);
            }
            spares.push_back(leaver);
            at += p.change_every_ms;
        }
    }
    // The members at `t` that may be hit: not the leaver of a change after
    // `t`, nor a joiner before its change settled.
    let targets_at = |t: u64, until: u64| -> Vec<u32> {
        let mut era = 0;
        for (i, e) in eras.iter().enumerate() {
            if e.from <= t {
                era = i;
            }
        }
        let mut nodes = eras[era].members.clone();
        if let Some((joiner, settled)) = eras[era].settling {
            if t < settled {
                nodes.retain(|&m| m != joiner);
            }
        }
        // Not a node that leaves before the fault heals.
        for e in eras.iter().skip(era + 1).filter(|e| e.from <= until) {
            nodes.retain(|m| e.members.contains(m));
        }
        nodes
    };
    // A kill during the genesis DKG.
    let mut at = rng.gen_range(300..2_000);
    let first = rng.gen_range(0..p.members);
    let heal = at + rng.gen_range(1_000..4_000);
    if heal < end {
        push_kill(&mut outs, &mut faults, first, at, heal);
    }
    let mut kinds: Vec<FaultKind> = Vec::new();
    let skew_beyond = rng.gen_range(0..p.members);
    loop {
        if kinds.is_empty() {
            kinds = FaultKind::RANDOM.to_vec();
            kinds.shuffle(&mut rng);
        }
        let kind = kinds[kinds.len() - 1];
        at += rng.gen_range(p.mean_gap_ms / 4..=p.mean_gap_ms * 7 / 4);
        let length = match kind {
            FaultKind::Kill => rng.gen_range(1_000..3_000),
            FaultKind::SlowLink | FaultKind::ClockSkew => rng.gen_range(3_000..6_000),
            _ => rng.gen_range(2_000..5_000),
        };
        let width = if matches!(kind, FaultKind::Kill | FaultKind::Partition) {
            rng.gen_range(1..=f.max(1))
        } else {
            1
        };
        // The first start from `at` on at which `width` nodes can be out.
        let mut start = at;
        let chosen = loop {
            if start + length >= end {
                break None;
            }
            let heal = start + length;
            let busy = |n: u32| {
                outs.iter()
                    .any(|o| o.node == n && o.from < heal + CATCH_UP_MS && start < o.to)
            };
            let out_now = outs
                .iter()
                .filter(|o| o.counts && o.from < heal + CATCH_UP_MS && start < o.to)
                .map(|o| o.node)
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u32;
            let mut free: Vec<u32> = targets_at(start, heal)
                .into_iter()
                .filter(|&n| !busy(n))
                .collect();
            let fits = !kind.takes_nodes_out() || out_now + width <= f;
            if fits && free.len() >= width as usize {
                free.shuffle(&mut rng);
                free.truncate(width as usize);
                free.sort_unstable();
                break Some(free);
            }
            // Wait for the next node to come back.
            start = outs
                .iter()
                .map(|o| o.to)
                .filter(|&t| t > start)
                .min()
                .unwrap_or(start + 1_000);
        };
        let Some(nodes) = chosen else {
            break;
        };
        kinds.pop();
        at = start;
        let heal = start + length;
        let amount_ms = match kind {
            FaultKind::ClockSkew => {
                let bound = p.max_skew_ms as i64;
                let sign = if rng.gen_bool(0.5) { 1 } else { -1 };
                if nodes[0] == skew_beyond {
                    sign * rng.gen_range(bound * 3 / 2..=bound * 3)
                } else {
                    sign * rng.gen_range(0..=bound * 4 / 5)
                }
            }
            FaultKind::SlowLink => rng.gen_range(100..600),
            _ => 0,
        };
        if kind.takes_nodes_out() || kind == FaultKind::SlowLink {
            for &n in &nodes {
                outs.push(Out {
                    node: n,
                    from: start,
                    to: heal
                        + if kind.takes_nodes_out() {
                            CATCH_UP_MS
                        } else {
                            0
                        },
                    counts: kind.takes_nodes_out(),
                });
            }
        }
        faults.push(Fault {
            at_ms: start,
            heal_ms: heal,
            kind,
            nodes,
            amount_ms,
        });
    }
    faults.sort_by_key(|f| (f.at_ms, f.kind));
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(seed: u64) -> ScheduleParams {
        ScheduleParams {
            seed,
            members: 7,
            duration_ms: 600_000,
            mean_gap_ms: 3_000,
            change_every_ms: 90_000,
            max_skew_ms: 100,
        }
    }

    #[test]
    fn the_same_seed_draws_the_same_schedule_and_another_seed_another() {
        assert_eq!(draw(&params(7)), draw(&params(7)));
        assert_ne!(draw(&params(7)), draw(&params(8)));
    }

    /// At no instant are more than f members out (counting the catch-up
    /// after each heal), and the last fault heals before the end.
    #[test]
    fn never_more_than_f_out_at_once() {
        for seed in 0..20 {
            let p = params(seed);
            let faults = draw(&p);
            let f = max_faulty(p.members) as usize;
            let out: Vec<&Fault> = faults.iter().filter(|x| x.kind.takes_nodes_out()).collect();
            for x in &out {
                for t in [x.at_ms, x.heal_ms] {
                    let mut nodes: Vec<u32> = out
                        .iter()
                        .filter(|y| y.at_ms <= t && t < y.heal_ms + CATCH_UP_MS)
                        .flat_map(|y| y.nodes.clone())
                        .collect();
                    nodes.sort_unstable();
                    nodes.dedup();
                    assert!(nodes.len() <= f, "seed {seed}: {nodes:?} out at {t} ms");
                }
            }
            assert!(faults.iter().all(|x| x.heal_ms < p.duration_ms));
        }
    }

    #[test]
    fn every_kind_is_drawn_about_as_often_and_changes_come_on_time() {
        let faults = draw(&params(3));
        let count = |k: FaultKind| faults.iter().filter(|x| x.kind == k).count();
        for k in FaultKind::RANDOM {
            assert!(count(k) >= 20, "{k:?}: {}", count(k));
        }
        assert_eq!(count(FaultKind::MemberChange), 6);
        // A kill while the genesis DKG runs, and one within 5 s of each change.
        assert!(faults[0].kind == FaultKind::Kill && faults[0].at_ms < 2_000);
        for c in faults.iter().filter(|x| x.kind == FaultKind::MemberChange) {
            assert!(faults.iter().any(|x| x.kind == FaultKind::Kill
                && x.at_ms > c.at_ms
                && x.at_ms < c.at_ms + 5_000));
        }
        // Exactly one node is skewed beyond the bound, and only beyond it.
        let beyond: std::collections::BTreeSet<u32> = faults
            .iter()
            .filter(|x| x.kind == FaultKind::ClockSkew && x.amount_ms.unsigned_abs() > 100)
            .map(|x| x.nodes[0])
            .collect();
        assert_eq!(beyond.len(), 1);
    }
}
