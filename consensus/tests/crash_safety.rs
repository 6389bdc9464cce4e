//! Crash safety of votes (issue 11, part 2), through `Member` as the node and
//! the simulator drive it: a member that signed something, crashed, and was
//! restored from its persisted record never signs a different value for the
//! same slot, and sends the same one again. Each test also restores a member
//! without its record, as the code before the record did, and shows the
//! equivocation that the record prevents.

mod common;

use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Time};
use consensus::{
    Block, Election, Envelope, Epoch, Height, Member, MemberInput, MemberOutput, MemberTimer,
    Message, ReplicaConfig, SignedVotes, Timer, View,
};
use std::sync::Arc;

type S = MinSig;

/// A 4-member network (`f = 1`, `c = 0`) at height 1, the primary of `(1, 0)`,
/// and a member that is neither primary nor collector there.
struct Fixture {
    config: ReplicaConfig,
    outputs: Vec<Arc<beacon::dkg::DkgOutput<S>>>,
    primary: NodeIndex,
    voter: NodeIndex,
}

impl Fixture {
    fn new() -> Self {
        let config = ReplicaConfig::new(4, 0).unwrap();
        let outputs = common::dkg::<S>(&config, 11);
        let e = Election::draw(
            &config.genesis_seed,
            &config.genesis_seed,
            Height::new(1),
            View::ZERO,
            4,
            1,
        );
        let voter = (0..4)
            .map(NodeIndex)
            .find(|i| *i != e.primary && !e.collectors.contains(i))
            .unwrap();
        Fixture {
            config,
            outputs,
            primary: e.primary,
            voter,
        }
    }

    /// `who` restored with `votes` (no finalized heights) and started.
    fn member(&self, who: NodeIndex, votes: Vec<SignedVotes<S>>) -> (Member<S>, Vec<Out>) {
        let mut m = common::restore(
            self.config.clone(),
            &self.outputs[who.0 as usize],
            Vec::new(),
            votes,
            [who.0 as u8; 32],
            Memo::disabled(),
            None,
        )
        .unwrap();
        let out = m.handle(Time::ZERO, MemberInput::Start);
        (m, out)
    }

    /// A valid block of height 1 with one transaction `tag`.
    fn block(&self, tag: u8) -> Arc<Block> {
        Arc::new(Block {
            height: Height::new(1),
            parent: [0; 32],
            previous_beacon: self.config.genesis_seed.to_vec(),
            transactions: vec![vec![tag]],
        })
    }

    /// The primary's PRE-PREPARE of `block` in view 0, delivered to `m`.
    fn propose(&self, m: &mut Member<S>, block: &Arc<Block>) -> Vec<Out> {
        let message = Message::PrePrepare {
            height: Height::new(1),
            view: View::ZERO,
            block: block.clone(),
        };
        deliver(m, self.primary, message)
    }
}

type Out = MemberOutput<S>;

fn deliver(m: &mut Member<S>, from: NodeIndex, message: Message<S>) -> Vec<Out> {
    let envelope = Envelope::Consensus(message);
    m.handle(
        Time::from_millis(1),
        MemberInput::Message { from, envelope },
    )
}

/// The messages in `out`, in order.
fn sent(out: &[Out]) -> Vec<&Message<S>> {
    out.iter()
        .filter_map(|o| match o {
            MemberOutput::Effect(e) => match e.message() {
                Some(Envelope::Consensus(m)) => Some(m),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The digests of the SIGN-SHAREs in `out`.
fn votes(out: &[Out]) -> Vec<[u8; 32]> {
    sent(out)
        .into_iter()
        .filter_map(|m| match m {
            Message::SignShare { digest, .. } => Some(*digest),
            _ => None,
        })
        .collect()
}

/// The record persisted in `out`: it must come before anything is sent.
fn record(out: &[Out]) -> Vec<SignedVotes<S>> {
    let at = out
        .iter()
        .position(|o| matches!(o, MemberOutput::PersistVotes(_)))
        .expect("the vote is persisted");
    let first_send = out
        .iter()
        .position(|o| matches!(o, MemberOutput::Effect(e) if e.message().is_some()))
        .unwrap_or(usize::MAX);
    assert!(at < first_send, "persisted before it is sent");
    match &out[at] {
        MemberOutput::PersistVotes(r) => r.clone(),
        _ => unreachable!(),
    }
}

/// A member voted for A in `(1, 0)`, crashed, and an equivocating primary
/// shows it B in the same view: restored with its record it does not vote
/// for B, and on restart it sends its vote for A again.
#[test]
fn a_restarted_member_never_votes_twice_in_one_view() {
    let f = Fixture::new();
    let (a, b) = (f.block(1), f.block(2));
    let (mut m, _) = f.member(f.voter, Vec::new());
    let out = f.propose(&mut m, &a);
    assert_eq!(votes(&out), vec![a.digest()]);
    let persisted = record(&out);
    drop(m);

    let (mut restarted, start) = f.member(f.voter, persisted);
    assert_eq!(
        votes(&start),
        vec![a.digest()],
        "the same vote is sent again on restart"
    );
    let out = f.propose(&mut restarted, &b);
    assert!(votes(&out).is_empty(), "voted for B after voting for A");
    let out = f.propose(&mut restarted, &a);
    assert!(
        votes(&out).is_empty(),
        "A's vote went out already; the retransmission timer repeats it"
    );

    // Without the record (the code before it), the member votes for B: two
    // votes in one view, which lets an equivocating primary fork the chain.
    let (mut amnesiac, _) = f.member(f.voter, Vec::new());
    assert_eq!(votes(&f.propose(&mut amnesiac, &b)), vec![b.digest()]);
}

/// A member that asked to change to view 1 and crashed comes back in view 1:
/// it sends the very same VIEW-CHANGE again and votes in view 0 no more.
#[test]
fn a_restarted_member_keeps_its_view_change() {
    let f = Fixture::new();
    let a = f.block(1);
    let (mut m, _) = f.member(f.voter, Vec::new());
    let timer = MemberTimer::Replica {
        epoch: Epoch::ZERO,
        timer: Timer::ViewChange {
            height: Height::new(1),
            view: View::ZERO,
        },
    };
    let out = m.handle(Time::from_millis(5_000), MemberInput::Timer(timer));
    let view_change = |out: &[Out]| {
        sent(out).into_iter().find_map(|m| match m {
            Message::ViewChange(vc) => Some(vc.clone()),
            _ => None,
        })
    };
    let first = view_change(&out).expect("a VIEW-CHANGE to view 1");
    assert_eq!(first.new_view, View::new(1));
    let persisted = record(&out);
    drop(m);

    let (mut restarted, start) = f.member(f.voter, persisted);
    let again = view_change(&start).expect("the VIEW-CHANGE is sent again");
    assert_eq!(again, first, "the same VIEW-CHANGE, not a new one");
    assert!(
        votes(&f.propose(&mut restarted, &a)).is_empty(),
        "voted in view 0 after leaving it"
    );

    let (mut amnesiac, _) = f.member(f.voter, Vec::new());
    assert_eq!(votes(&f.propose(&mut amnesiac, &a)), vec![a.digest()]);
}

/// The primary proposed a block with a transaction and crashed, losing its
/// mempool: restored, it does not propose a different block in the same view,
/// and its own vote stays the one for its first proposal.
#[test]
fn a_restarted_primary_never_proposes_twice_in_one_view() {
    let f = Fixture::new();
    let proposals = |out: &[Out]| -> Vec<[u8; 32]> {
        sent(out)
            .into_iter()
            .filter_map(|m| match m {
                Message::PrePrepare { block, .. } => Some(block.digest()),
                _ => None,
            })
            .collect()
    };
    // With a transaction queued, the primary proposes it at start.
    let mut p = common::restore(
        f.config.clone(),
        &f.outputs[f.primary.0 as usize],
        Vec::new(),
        Vec::new(),
        [f.primary.0 as u8; 32],
        Memo::disabled(),
        None,
    )
    .unwrap();
    p.handle(Time::ZERO, MemberInput::ClientTransaction(vec![7; 16]));
    let start = p.handle(Time::ZERO, MemberInput::Start);
    let first = proposals(&start);
    assert_eq!(first.len(), 1, "the primary proposes at start");
    let persisted = record(&start);
    drop(p);

    // Restarted with an empty mempool: its fresh block would differ. It
    // proposes its first block again (its record holds the body), never
    // another.
    let (_, restarted) = f.member(f.primary, persisted);
    assert_eq!(
        proposals(&restarted),
        first,
        "a restarted primary proposes its first block again, nothing else"
    );
    assert!(
        votes(&restarted).iter().all(|d| *d == first[0]),
        "the primary's own vote is for its first proposal only"
    );

    // Without the record it proposes a different block in the same view.
    let (_, amnesiac) = f.member(f.primary, Vec::new());
    let other = proposals(&amnesiac);
    assert_eq!(other.len(), 1);
    assert_ne!(other[0], first[0]);
}

/// Every member loses power at once in the middle of a height (found on real
/// nodes: about half of such restarts stalled for good, one view change after
/// another). Some members had voted for the block; the primary comes back
/// first, and its new copy of the proposal reaches no one. The height's block
/// must be proposed again by whichever member leads the view change, and only
/// the voters' own records still hold its body (a record of digests alone
/// left no member able to produce it).
#[test]
fn a_network_restarted_all_at_once_mid_height_goes_on() {
    let mut stalled = Vec::new();
    for seed in 0..12u64 {
        let config = ReplicaConfig::new(4, 0).unwrap();
        let mut net = common::Net::<S>::new(config, seed, &[]);
        net.start();
        assert!(net.run_until(3, Time::from_millis(60_000)));
        // Run until at least f + c + 1 = 2 members voted at the height in
        // progress while none has finalized it.
        let height = loop {
            let h = net.current_height(0);
            let voters = (0..4)
                .filter(|i| {
                    net.vote_disks[*i]
                        .iter()
                        .any(|r| r.height == h && !r.votes.is_empty())
                })
                .count();
            if voters >= 2 && (0..4).all(|i| net.chain(i).height() < h) {
                break h;
            }
            assert!(net.step(Time::from_millis(60_000)), "seed {seed}: no event");
        };
        let primary = (0..4)
            .find(|i| {
                net.vote_disks[*i]
                    .iter()
                    .any(|r| r.height == height && !r.proposals.is_empty())
            })
            .expect("the primary recorded its proposal");
        net.crash_all();
        // The primary is back first; what it sends meanwhile is lost.
        net.down.remove(&(primary as u32));
        net.restart_honest(primary);
        net.run_for(50_000);
        for i in (0..4).filter(|i| *i != primary) {
            net.down.remove(&(i as u32));
            net.restart_honest(i);
        }
        let target = height.get() + 3;
        if !net.run_until(target, net.now.plus_micros(120_000_000)) {
            stalled.push(seed);
        }
        net.assert_agreement();
    }
    assert!(
        stalled.is_empty(),
        "stalled after a full restart: seeds {stalled:?}"
    );
}
