//! Step tables, one per role: one replica, one input per step, and the outputs
//! it must produce, written as data in the order it produces them
//! (`Output`'s `Display`: `send sign-share to 2`, `timer retransmit(1,0)`,
//! `beacon 1`, `evidence invalid vote share by 3`, `persist-votes 1` (the
//! record of what it signed, first whenever a step signs something new), ...).
//! The replica's own messages travel through its loopback inside one step, so
//! a step shows everything one input causes.
//!
//! Roles: voter, collector (fast path), slow path, view change, catch-up. The
//! network is `n = 4, c = 0` (`f = 1`; fast path 4 shares, slow path 3, beacon
//! 2, view change 3), with a genesis seed where the primary and the collector of
//! `(1, 0)` differ.

mod common;

use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::multisig::SignerBitmap;
use beacon::{InterpolationMethod, MinSig, NodeIndex, Point, Scheme, SignatureShare, Time};
use common::Net;
use consensus::messages::{
    signed, CommitCertificate, CommittedEntry, Digest, PrepareCertificate, ViewChange,
    ViewChangeProof,
};
use consensus::{
    Block, CommitPath, Election, Height, Input, Message, Replica, ReplicaConfig, ReplicaKeys,
    Timer, View,
};
use std::sync::Arc;

type S = MinSig;
type Sig = <S as Scheme>::Signature;

/// One input and the outputs it must produce, in order.
struct Step {
    desc: &'static str,
    input: Input<S>,
    expected: Vec<String>,
}

fn step(desc: &'static str, input: Input<S>, expected: Vec<String>) -> Step {
    Step {
        desc,
        input,
        expected,
    }
}

/// Runs `steps` on `replica`, step `i` at `i` ms.
fn check(replica: &mut Replica<S>, steps: Vec<Step>) {
    for (i, step) in steps.into_iter().enumerate() {
        let out: Vec<String> = replica
            .handle(Time::from_millis(i as u64), step.input)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(out, step.expected, "step {i}: {}", step.desc);
    }
}

fn msg(from: NodeIndex, message: Message<S>) -> Input<S> {
    Input::Message { from, message }
}

/// The keys of a 4-replica network, and the roles of `(1, 0)`.
struct Fixture {
    config: ReplicaConfig,
    keys: Vec<ReplicaKeys<S>>,
    /// Primary and collector of `(1, 0)`.
    primary: NodeIndex,
    collector: NodeIndex,
    /// The other two.
    others: [NodeIndex; 2],
}

impl Fixture {
    fn new(seed: u64) -> Self {
        let (config, primary, collector) = (0..=255u8)
            .find_map(|g| {
                let config = ReplicaConfig::new(4, 0)
                    .unwrap()
                    .with(|s| s.genesis_seed = [g; 32])
                    .unwrap();
                let e = Election::draw(
                    &config.genesis_seed,
                    &config.genesis_seed,
                    Height::new(1),
                    View::ZERO,
                    4,
                    1,
                );
                (e.primary != e.collectors[0]).then_some((config, e.primary, e.collectors[0]))
            })
            .unwrap();
        let outputs: Vec<Arc<DkgOutput<S>>> = common::dkg(&config, seed);
        let keys = common::replica_keys(&config, &outputs);
        let rest: Vec<NodeIndex> = (0..4)
            .map(NodeIndex)
            .filter(|i| *i != primary && *i != collector)
            .collect();
        Fixture {
            config,
            keys,
            primary,
            collector,
            others: [rest[0], rest[1]],
        }
    }

    fn replica(&self, i: NodeIndex) -> Replica<S> {
        let keys = self.keys[i.0 as usize].clone();
        Replica::new(self.config.clone(), keys, [i.0 as u8; 32], Memo::disabled()).unwrap()
    }

    /// Replica `i`, started (its outputs dropped).
    fn started(&self, i: NodeIndex) -> Replica<S> {
        let mut replica = self.replica(i);
        replica.handle(Time::ZERO, Input::Start);
        replica
    }

    /// A valid block of height 1.
    fn block(&self, tag: &[u8]) -> Arc<Block> {
        Arc::new(Block {
            height: Height::new(1),
            parent: [0; 32],
            previous_beacon: self.config.genesis_seed.to_vec(),
            transactions: vec![tag.to_vec()],
        })
    }

    fn proposal(&self, view: u64, block: &Arc<Block>) -> Message<S> {
        let view = View::new(view);
        Message::PrePrepare {
            height: Height::new(1),
            view,
            block: block.clone(),
        }
    }

    /// `i`'s beacon share (`key` 0) or its vote (otherwise) on `msg`.
    fn sign(&self, i: NodeIndex, key: usize, msg: &[u8]) -> Sig {
        let k = &self.keys[i.0 as usize];
        match key {
            0 => k.beacon.share.sign::<S>(msg).signature,
            _ => k.sign_vote(msg),
        }
    }

    fn round_message(&self) -> [u8; 32] {
        beacon::chain::round_message(S::ID, 1, &self.config.genesis_seed)
    }

    /// `i`'s SIGN-SHARE on `block` in `view`; `bad` corrupts the share named.
    fn sign_share(&self, i: NodeIndex, view: u64, block: &Block, bad: &str) -> Message<S> {
        let view = View::new(view);
        let digest = block.digest();
        let corrupt = |s: Sig, name: &str| {
            if bad == name {
                s.add(&Sig::generator())
            } else {
                s
            }
        };
        Message::SignShare {
            height: Height::new(1),
            view,
            digest,
            vote: corrupt(
                self.sign(i, 2, &signed::fast_vote(Height::new(1), view, &digest)),
                "vote",
            ),
            beacon: corrupt(self.sign(i, 0, &self.round_message()), "beacon"),
        }
    }

    fn commit_share(&self, i: NodeIndex, view: u64, digest: Digest) -> Message<S> {
        let view = View::new(view);
        Message::CommitShare {
            height: Height::new(1),
            view,
            digest,
            share: self.sign(i, 1, &signed::commit(Height::new(1), view, &digest)),
        }
    }

    fn beacon_share(&self, i: NodeIndex) -> Message<S> {
        Message::BeaconShare {
            round: Height::new(1),
            share: self.sign(i, 0, &self.round_message()),
        }
    }

    /// The beacon of round 1 from everyone's shares.
    fn beacon(&self) -> Sig {
        let shares: Vec<SignatureShare<S>> = (0..4)
            .map(|i| SignatureShare {
                signer: NodeIndex(i),
                signature: self.sign(NodeIndex(i), 0, &self.round_message()),
            })
            .collect();
        self.keys[0]
            .beacon
            .public
            .aggregate(&shares, InterpolationMethod::RootsOfUnity)
            .unwrap()
    }

    /// Everyone's multi-signature on `msg`, with its bitmap.
    fn certify(&self, msg: &[u8]) -> (Sig, SignerBitmap) {
        let votes: Vec<SignatureShare<S>> = (0..4)
            .map(|i| SignatureShare {
                signer: NodeIndex(i),
                signature: self.sign(NodeIndex(i), 1, msg),
            })
            .collect();
        beacon::multisig::aggregate::<S>(4, &votes).unwrap()
    }

    /// A valid fast-path proof of `block`.
    fn fast_proof(&self, block: &Block) -> CommitCertificate<S> {
        let digest = block.digest();
        let (signature, signers) =
            self.certify(&signed::fast_vote(Height::new(1), View::ZERO, &digest));
        CommitCertificate {
            height: Height::new(1),
            view: View::ZERO,
            digest,
            path: CommitPath::Fast,
            signature,
            signers,
        }
    }

    /// `i`'s signed VIEW-CHANGE to `view`, with nothing prepared or voted.
    fn view_change(&self, i: NodeIndex, view: u64) -> Message<S> {
        let view = View::new(view);
        let mut vc = ViewChange {
            from: i,
            height: Height::new(1),
            new_view: view,
            prepared: None::<PrepareCertificate<S>>,
            fast_vote: None,
            beacon_share: Some(self.sign(i, 0, &self.round_message())),
            block: None,
            signature: Sig::generator(),
        };
        vc.signature = self.sign(i, 1, &vc.signed_message());
        Message::ViewChange(Arc::new(vc))
    }

    /// The block a primary with an empty mempool proposes at height 1.
    fn fresh_block(&self) -> Block {
        Block {
            height: Height::new(1),
            parent: [0; 32],
            previous_beacon: self.config.genesis_seed.to_vec(),
            transactions: vec![],
        }
    }

    /// The primary of `(2, 0)`: the first collector of height 1, drawn from
    /// the genesis seed (a primary is drawn one round before its collectors).
    fn primary_of_height_2(&self) -> NodeIndex {
        Election::primary(&self.config.genesis_seed, Height::new(2), 4)
    }
}

/// Strings with `{}` filled in from `args`, for expected outputs.
macro_rules! outs {
    ($($fmt:literal $(, $arg:expr)*);* $(;)?) => {
        vec![$(format!($fmt $(, $arg)*)),*]
    };
}

/// A voter where beacon shares go to everyone (`beacon_shares = "everyone"`):
/// its share leaves for every other non-collector before the write of its vote
/// record (a beacon share is not a vote), the SIGN-SHARE after it; a second
/// share makes the beacon at the voter itself, with nothing broadcast.
#[test]
fn voter_sharing_beacon_shares_with_everyone() {
    let mut fx = Fixture::new(77);
    fx.config = fx
        .config
        .with(|s| s.beacon_shares = Some(consensus::BeaconShares::Everyone))
        .unwrap();
    let (p, c) = (fx.primary, fx.collector);
    let me = fx.others[0];
    let x = fx.others[1];
    let block = fx.block(b"tx");
    let mut vote: Vec<String> = (0..4)
        .map(NodeIndex)
        .filter(|i| *i != me && *i != c)
        .map(|i| format!("send beacon-share to {i}"))
        .collect();
    vote.extend(outs!["persist-votes 1"; "send sign-share to {}", c; "timer retransmit(1,0)"]);
    let steps = vec![
        step(
            "start: arm the view timer",
            Input::Start,
            outs!["timer view-change(1,0)"],
        ),
        step(
            "pre-prepare from the primary: beacon shares, then the write, then the vote",
            msg(p, fx.proposal(0, &block)),
            vote,
        ),
        step(
            "another replica's share makes the beacon here (t_b = 2)",
            msg(x, fx.beacon_share(x)),
            outs!["beacon 1"],
        ),
    ];
    check(&mut fx.replica(me), steps);
}

/// A voter (neither primary nor collector): one SIGN-SHARE per view to the
/// collector, evidence for a second proposal and a bad beacon, a commit proof
/// whose block it lacks, catch-up on messages from ahead, and the withheld-beacon
/// rule after a commit.
#[test]
fn voter() {
    let fx = Fixture::new(77);
    let (p, c) = (fx.primary, fx.collector);
    let next = fx.primary_of_height_2();
    let me = *fx.others.iter().find(|i| **i != next).unwrap();
    let x = *fx.others.iter().find(|i| **i != me).unwrap();
    let (block, other) = (fx.block(b"tx"), fx.block(b"other"));
    let bad_beacon = Message::Beacon {
        round: Height::new(1),
        signature: Sig::generator(),
    };
    let ahead = Message::Beacon {
        round: Height::new(3),
        signature: Sig::generator(),
    };
    let steps = vec![
        step("start: arm the view timer", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "pre-prepare from a replica that is not the primary: ignored",
            msg(x, fx.proposal(0, &block)),
            vec![],
        ),
        step(
            "pre-prepare from the primary: one sign-share to the collector, kept for retransmission",
            msg(p, fx.proposal(0, &block)),
            outs!["persist-votes 1"; "send sign-share to {}", c; "timer retransmit(1,0)"],
        ),
        step("the same pre-prepare again: nothing", msg(p, fx.proposal(0, &block)), vec![]),
        step(
            "a second, different pre-prepare: evidence against the primary",
            msg(p, fx.proposal(0, &other)),
            outs!["evidence conflicting proposals in view 0 by {}", p],
        ),
        step(
            "an invalid beacon: evidence against its sender",
            msg(c, bad_beacon),
            outs!["evidence invalid beacon by {}", c],
        ),
        step(
            "a valid commit proof for a block never accepted: ask the sender for it",
            msg(
                c,
                Message::CommitProof {
                    certificate: fx.fast_proof(&other),
                    beacon: None,
                },
            ),
            outs!["send block-request to {}", c],
        ),
        step(
            "the block arrives: committed, not finalized (no beacon yet)",
            msg(c, Message::BlockResponse { block: other }),
            outs!["committed 1"],
        ),
        step(
            "a message two heights ahead: ask its sender to sync",
            msg(x, ahead),
            outs!["send sync-request to {}", x],
        ),
        step(
            "view timer after a commit without beacon: beacon share to all, timer re-armed",
            Input::Timer(Timer::ViewChange { height: Height::new(1), view: View::ZERO }),
            outs!["broadcast beacon-share"; "timer view-change(1,0)"],
        ),
        step(
            "a second beacon share makes the beacon: broadcast it, finalize, enter height 2",
            msg(p, fx.beacon_share(p)),
            outs!["beacon 1"; "broadcast beacon"; "finalized 1"; "timer view-change(2,0)"],
        ),
        step(
            "a beacon share of the finished round is answered with the beacon",
            msg(x, fx.beacon_share(x)),
            outs!["send beacon to {}", x],
        ),
        step(
            "a sync request is answered from the chain window",
            msg(x, Message::SyncRequest { from_height: Height::new(1) }),
            outs!["send sync-response to {}", x],
        ),
    ];
    check(&mut fx.replica(me), steps);
}

/// The rank-0 collector on the fast path: its own vote through the loopback,
/// the beacon from `t_b = 2` shares (broadcast at once), the proof from 4
/// votes, then commit, finalize and the next height in one step — where
/// it is the primary, so its proposal and its own vote on it follow (the vote
/// after the height's timers: it travels through the loopback).
#[test]
fn collector() {
    let fx = Fixture::new(78);
    let (p, c) = (fx.primary, fx.collector);
    let [a, b] = fx.others;
    let next = Election::primary(&fx.config.genesis_seed, Height::new(2), 4);
    assert_eq!(next, c, "the collector proposes height 2");
    // The collector of height 2 is the primary of height 3, drawn by beacon 1.
    let beacon_1 = fx.beacon();
    let collector_2 = Election::primary(
        &beacon::chain::randomness(&beacon_1.to_bytes()),
        Height::new(3),
        4,
    );
    let block = fx.block(b"tx");
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "pre-prepare: its own sign-share goes to itself (the fast-path wait counts from another's)",
            msg(p, fx.proposal(0, &block)),
            outs!["persist-votes 1"; "timer retransmit(1,0)"],
        ),
        step(
            "a second beacon share, the first of another replica: fast-path timer; the beacon, broadcast at once (rank 0, early beacon)",
            msg(p, fx.sign_share(p, 0, &block, "")),
            outs!["timer fast-path(1,0)"; "beacon 1"; "broadcast beacon"],
        ),
        step(
            "a third vote: not yet",
            msg(a, fx.sign_share(a, 0, &block, "")),
            vec![],
        ),
        step(
            "a duplicate: nothing",
            msg(a, fx.sign_share(a, 0, &block, "")),
            vec![],
        ),
        step(
            "the fourth: fast-path proof, commit, finalize; height 2 proposed and voted on",
            msg(b, fx.sign_share(b, 0, &block, "")),
            outs!["broadcast commit-proof"; "committed 1"; "finalized 1";
                // The proof leaves before the durable write of the next
                // proposal, which only what follows waits for.
                "persist-votes 2"; "broadcast pre-prepare";
                // Its own proposal, looped back, is voted on before the
                // height's view timer queued after it (the one order).
                "send sign-share to {}", collector_2; "timer retransmit(2,0)";
                "timer view-change(2,0)"
            ],
        ),
    ];
    check(&mut fx.replica(c), steps);
}

/// The slow path at the collector: a bad vote stalls the fast path (the
/// sender is named and its later shares ignored); after the fast-path timer,
/// the other votes make PREPARE, whose COMMIT shares make the slow-path proof.
#[test]
fn slow_path() {
    let fx = Fixture::new(79);
    let (p, c) = (fx.primary, fx.collector);
    assert_eq!(
        fx.primary_of_height_2(),
        c,
        "the collector proposes height 2"
    );
    let [a, x] = fx.others;
    let block = fx.block(b"tx");
    let digest = block.digest();
    // The collector of height 2 is the primary of height 3, drawn by beacon 1.
    let beacon_1 = fx.beacon();
    let collector_2 = Election::primary(
        &beacon::chain::randomness(&beacon_1.to_bytes()),
        Height::new(3),
        4,
    );
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "pre-prepare",
            msg(p, fx.proposal(0, &block)),
            outs!["persist-votes 1"; "timer retransmit(1,0)"],
        ),
        step(
            "a sign-share with a bad vote (its beacon share is good): the first of another replica starts the fast-path timer",
            msg(x, fx.sign_share(x, 0, &block, "vote")),
            outs!["timer fast-path(1,0)"; "beacon 1"; "broadcast beacon"],
        ),
        step("a third", msg(p, fx.sign_share(p, 0, &block, "")), vec![]),
        step(
            "the fourth: the fast proof fails, the bad share is found and named",
            msg(a, fx.sign_share(a, 0, &block, "")),
            outs!["evidence invalid vote share by {}", x],
        ),
        step(
            "fast-path timer: PREPARE from the three valid votes; its own COMMIT share goes to itself",
            Input::Timer(Timer::FastPath { height: Height::new(1), view: View::ZERO }),
            outs!["broadcast prepare"; "persist-votes 1"],
        ),
        step(
            "a second COMMIT share",
            msg(p, fx.commit_share(p, 0, digest)),
            vec![],
        ),
        step(
            "a COMMIT share from the convicted replica: ignored",
            msg(x, fx.commit_share(x, 0, digest)),
            vec![],
        ),
        step(
            "the third: slow-path proof, commit, finalize; height 2 proposed and voted on",
            msg(a, fx.commit_share(a, 0, digest)),
            outs!["broadcast commit-proof"; "committed 1"; "finalized 1";
                // The proof leaves before the durable write of the next
                // proposal, which only what follows waits for.
                "persist-votes 2"; "broadcast pre-prepare";
                // Its own proposal, looped back, is voted on before the
                // height's view timer queued after it (the one order).
                "send sign-share to {}", collector_2; "timer retransmit(2,0)";
                "timer view-change(2,0)"
            ],
        ),
    ];
    check(&mut fx.replica(c), steps);
}

/// The primary of view 1: its view timer starts the view change (its own
/// VIEW-CHANGE through the loopback), a second view change's beacon share makes
/// the beacon, the third makes NEW-VIEW with a fresh block, which it then votes
/// on as the view's collector — all in one step.
#[test]
fn view_change() {
    let fx = Fixture::new(80);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let me = e1.primary;
    let [a, b] = {
        let v: Vec<NodeIndex> = (0..4).map(NodeIndex).filter(|i| *i != me).collect();
        [v[0], v[1]]
    };
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "view timer without a commit: to view 1",
            Input::Timer(Timer::ViewChange {
                height: Height::new(1),
                view: View::ZERO,
            }),
            outs!["persist-votes 1"; "view-changed (1,1)"; "timer view-change(1,1)"; "broadcast view-change";
                  "timer retransmit(1,1)"],
        ),
        step(
            "a second view change: its beacon share makes the beacon",
            msg(a, fx.view_change(a, 1)),
            outs!["beacon 1"; "broadcast beacon"],
        ),
        step(
            "the third: NEW-VIEW with a fresh block, accepted and voted on by itself",
            msg(b, fx.view_change(b, 1)),
            outs!["persist-votes 1"; "broadcast new-view"; "timer view-change(1,1)"],
        ),
        step(
            "a stale view timer: nothing",
            Input::Timer(Timer::ViewChange {
                height: Height::new(1),
                view: View::ZERO,
            }),
            vec![],
        ),
        step(
            "the same view change again: it missed our NEW-VIEW, which goes to it again",
            msg(a, fx.view_change(a, 1)),
            outs!["send new-view to {}", a.0],
        ),
        step(
            "a sign-share of view 1 from a replica: counted, the view's fast-path timer started",
            msg(a, fx.sign_share(a, 1, &fx.fresh_block(), "")),
            outs!["timer fast-path(1,1)"],
        ),
    ];
    check(&mut fx.replica(me), steps);
}

/// A replica that is not the new primary: it changes view on its timer, then
/// accepts the NEW-VIEW (its view changes verified) and votes in view 1; a
/// NEW-VIEW whose view changes carry forged signatures is evidence.
#[test]
fn new_view() {
    let fx = Fixture::new(81);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let q = e1.primary;
    let others: Vec<NodeIndex> = (0..4).map(NodeIndex).filter(|i| *i != q).collect();
    let me = *others.iter().find(|i| **i != fx.primary).unwrap();
    let [a, b] = {
        let v: Vec<NodeIndex> = others.iter().copied().filter(|i| *i != me).collect();
        [v[0], v[1]]
    };
    let vcs: Vec<Arc<ViewChange<S>>> = [q, a, b]
        .iter()
        .map(|i| match fx.view_change(*i, 1) {
            Message::ViewChange(vc) => vc,
            _ => unreachable!(),
        })
        .collect();
    let with_proof = |proof: ViewChangeProof<S>| Message::NewView {
        height: Height::new(1),
        view: View::new(1),
        proof,
        block: Arc::new(fx.fresh_block()),
    };
    let new_view = |vcs: Vec<Arc<ViewChange<S>>>| with_proof(ViewChangeProof::aggregate(&vcs));
    // Two real view changes counted as three: the sender `a` named twice, with
    // the two signatures' sum (which verifies against the signers' bitmap,
    // where `a` is one bit).
    let double_counted = {
        let mut proof = ViewChangeProof::aggregate(&vcs[..2]);
        assert_eq!(proof.groups.len(), 1, "fresh view changes claim nothing");
        proof.groups[0].senders.push(a);
        proof.groups[0].senders.sort();
        with_proof(proof)
    };
    // The same view changes, each signed by the new primary instead of its sender.
    let forged: Vec<Arc<ViewChange<S>>> = vcs
        .iter()
        .map(|vc| {
            let mut vc = (**vc).clone();
            vc.signature = fx.sign(q, 1, &vc.signed_message());
            Arc::new(vc)
        })
        .collect();
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "view timer without a commit: to view 1",
            Input::Timer(Timer::ViewChange {
                height: Height::new(1),
                view: View::ZERO,
            }),
            outs!["persist-votes 1"; "view-changed (1,1)"; "timer view-change(1,1)"; "broadcast view-change";
                  "timer retransmit(1,1)"],
        ),
        step(
            "a NEW-VIEW whose view changes the new primary signed itself: evidence",
            msg(q, new_view(forged)),
            outs!["evidence invalid new-view by {}", q],
        ),
        step(
            "a NEW-VIEW from a replica that is not the primary of view 1: ignored",
            msg(a, new_view(vcs.clone())),
            vec![],
        ),
        step(
            "a NEW-VIEW that counts one sender twice to make a quorum: ignored",
            msg(q, double_counted),
            vec![],
        ),
        step(
            "the NEW-VIEW: accepted, and a vote in view 1 to its collector",
            msg(q, new_view(vcs.clone())),
            outs!["timer view-change(1,1)"; "persist-votes 1"; "send sign-share to {}", e1.collectors[0]],
        ),
        step(
            "the same NEW-VIEW again: nothing",
            msg(q, new_view(vcs)),
            vec![],
        ),
    ];
    check(&mut fx.replica(me), steps);
}

/// Catch-up when the proof of our height passed us by (a collector that sent
/// it to some replicas only): messages of the next height from more than `f`
/// replicas mean an honest one finalized ours, so we ask one of them at once,
/// not at our next view timer (up to 16 view timeouts away). One replica ahead
/// proves nothing (it may be Byzantine), and its repeats do not count twice.
/// Seed 56 of the campaign on `reshare-small` without `[reshare]` (twins as
/// collectors): two honest replicas waited out a 20 s view timer at a height
/// the others had finalized, and the others could not go on without them.
#[test]
fn a_replica_behind_asks_to_sync_once_more_than_f_replicas_are_ahead() {
    let fx = Fixture::new(77);
    let (p, c) = (fx.primary, fx.collector);
    let [me, x] = fx.others;
    let next_height = |from: NodeIndex| {
        msg(
            from,
            Message::Beacon {
                round: Height::new(2),
                signature: Sig::generator(),
            },
        )
    };
    let steps = vec![
        step(
            "start: arm the view timer",
            Input::Start,
            outs!["timer view-change(1,0)"],
        ),
        step(
            "one replica at the next height: kept, no request",
            next_height(x),
            vec![],
        ),
        step("the same replica again: still one", next_height(x), vec![]),
        step(
            "a second replica (f + 1 = 2) at the next height: ask the first at once",
            next_height(p),
            outs!["send sync-request to {}", x],
        ),
        step("a third: asked recently, nothing", next_height(c), vec![]),
    ];
    check(&mut fx.replica(me), steps);
}

/// Catch-up: a sync response with three heights is applied height by height
/// in one step (each entry checked, committed, finalized), and a forged beacon
/// in an entry stops it.
#[test]
fn catch_up() {
    let config = ReplicaConfig::new(4, 0)
        .unwrap()
        .with(|s| {
            s.fast_path_timeout_us = 30_000;
            s.view_change_timeout_us = 300_000;
        })
        .unwrap();
    let (net, me) = (1..50u64)
        .find_map(|seed| {
            let mut net = Net::<S>::new(config.clone(), seed, &[]);
            net.start();
            assert!(net.run_until(3, Time::from_millis(60_000)));
            // A replica that is primary of none of heights 1 to 4.
            let chain = &net.record.disks[0];
            let primaries: Vec<NodeIndex> = (1..=4u64)
                .map(|h| {
                    // Drawn from the beacon of round h - 2 (election lag 1).
                    let randomness = match h {
                        1 | 2 => config.genesis_seed.to_vec(),
                        _ => beacon::chain::randomness(&chain[h as usize - 3].beacon.to_bytes())
                            .to_vec(),
                    };
                    Election::primary(&randomness, Height::new(h), 4)
                })
                .collect();
            let me = (0..4).map(NodeIndex).find(|i| !primaries.contains(i))?;
            Some((net, me))
        })
        .unwrap();
    let entries: Vec<Arc<CommittedEntry<S>>> = net.record.disks[0][..3].to_vec();
    let peer = NodeIndex((me.0 + 1) % 4);
    let keys = common::replica_keys(&config, &net.outputs)[me.0 as usize].clone();
    let fresh =
        || Replica::<S>::new(config.clone(), keys.clone(), [9; 32], Memo::disabled()).unwrap();
    let sync = |entries: Vec<Arc<CommittedEntry<S>>>| msg(peer, Message::SyncResponse { entries });
    let mut applied = Vec::new();
    for h in 1..=3 {
        applied.extend([
            format!("beacon {h}"),
            format!("committed {h}"),
            format!("finalized {h}"),
            format!("timer view-change({},0)", h + 1),
        ]);
    }
    let digest = entries[1].certificate.digest;
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "three heights in one response",
            sync(entries.clone()),
            applied,
        ),
        step(
            "a block request for a finalized height",
            msg(
                peer,
                Message::BlockRequest {
                    height: Height::new(2),
                    digest,
                },
            ),
            outs!["send block-response to {}", peer],
        ),
        step(
            "a sync request from height 2",
            msg(
                peer,
                Message::SyncRequest {
                    from_height: Height::new(2),
                },
            ),
            outs!["send sync-response to {}", peer],
        ),
    ];
    check(&mut fresh(), steps);
    // An entry whose beacon is another round's: refused, and nothing after it.
    let mut forged = (*entries[0]).clone();
    forged.beacon = entries[1].beacon;
    let steps = vec![
        step("start", Input::Start, outs!["timer view-change(1,0)"]),
        step(
            "a forged beacon: nothing applied",
            sync(vec![Arc::new(forged), entries[1].clone()]),
            vec![],
        ),
    ];
    check(&mut fresh(), steps);
}

#[test]
fn malformed_messages_decode_to_errors() {
    let block = Block {
        height: Height::new(1),
        parent: [0; 32],
        previous_beacon: vec![1; 32],
        transactions: vec![vec![7; 10]],
    };
    let m = Message::<S>::PrePrepare {
        height: Height::new(1),
        view: View::ZERO,
        block: Arc::new(block),
    };
    let bytes = m.encode().unwrap();
    assert!(Message::<S>::decode(&bytes).is_ok());
    for cut in 0..bytes.len() {
        assert!(Message::<S>::decode(&bytes[..cut]).is_err());
    }
    let mut trailing = bytes.clone();
    trailing.push(0);
    assert!(Message::<S>::decode(&trailing).is_err());
    let share = Message::<S>::Beacon {
        round: Height::new(1),
        signature: Sig::generator(),
    }
    .encode()
    .unwrap();
    let mut bad = share.clone();
    let last = bad.len() - 1;
    bad[last] ^= 0xff;
    assert!(Message::<S>::decode(&bad).is_err());
    assert!(Message::<beacon::MinPk>::decode(&share).is_err());
}

/// Crash safety of a new primary's NEW-VIEW: the primary of view 1, with a
/// client transaction queued, sends NEW-VIEW with a fresh block holding it,
/// crashes and loses its mempool. Restored from its vote record it sends no
/// NEW-VIEW with another block for view 1 (restored without the record, it
/// sends one: two proposals in one view).
#[test]
fn a_restarted_new_primary_sends_no_second_new_view() {
    let fx = Fixture::new(80);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let me = e1.primary;
    let others: Vec<NodeIndex> = (0..4).map(NodeIndex).filter(|i| *i != me).collect();
    let new_view_blocks = |out: &[consensus::Output<S>]| -> Vec<Digest> {
        out.iter()
            .filter_map(|o| match o.message() {
                Some(Message::NewView { block, .. }) => Some(block.digest()),
                _ => None,
            })
            .collect()
    };
    // Drives `replica` (started) to view 1 and feeds it two others' view changes.
    let to_view_one = |replica: &mut Replica<S>, record: &mut Vec<consensus::SignedVotes<S>>| {
        let mut outputs = Vec::new();
        let mut take = |out: Vec<consensus::Output<S>>| {
            for o in &out {
                if let consensus::Output::PersistVotes(r) = o {
                    *record = r.clone();
                }
            }
            outputs.extend(out);
        };
        take(replica.handle(Time::ZERO, Input::Start));
        let timer = Timer::ViewChange {
            height: Height::new(1),
            view: View::ZERO,
        };
        take(replica.handle(Time::from_millis(2_000), Input::Timer(timer)));
        for i in &others[..2] {
            take(replica.handle(Time::from_millis(2_001), msg(*i, fx.view_change(*i, 1))));
        }
        outputs
    };
    let mut record = Vec::new();
    let mut first = fx.replica(me);
    first.handle(Time::ZERO, Input::ClientTransaction(vec![7; 16]));
    let sent = new_view_blocks(&to_view_one(&mut first, &mut record));
    assert_eq!(sent.len(), 1, "the new primary sends NEW-VIEW");
    assert_ne!(
        sent[0],
        fx.fresh_block().digest(),
        "its block holds the transaction"
    );

    let keys = fx.keys[me.0 as usize].clone();
    let restore = |votes| {
        Replica::restore(
            fx.config.clone(),
            keys.clone(),
            [me.0 as u8; 32],
            Memo::disabled(),
            consensus::replica::ChainWindow::default(),
            votes,
        )
        .unwrap()
    };
    let mut ignored = Vec::new();
    let again = new_view_blocks(&to_view_one(&mut restore(record), &mut ignored));
    assert!(
        again.iter().all(|d| *d == sent[0]),
        "a second NEW-VIEW block in view 1"
    );
    let amnesiac = new_view_blocks(&to_view_one(&mut restore(Vec::new()), &mut ignored));
    assert!(amnesiac.iter().any(|d| *d != sent[0]));
}

/// A new primary that sent its NEW-VIEW sends it again to a replica whose
/// VIEW-CHANGE comes again (it missed the NEW-VIEW), but at most three times:
/// retransmissions from a large network short of CPU (or a Byzantine replica
/// repeating itself) cannot make it send O(n)-byte messages without bound. At
/// 128 nodes on two cores, unbounded re-sends kept every node busy verifying
/// NEW-VIEWs and the chain never left height 1.
#[test]
fn a_new_primary_resends_its_new_view_at_most_three_times() {
    let fx = Fixture::new(81);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let me = e1.primary;
    let others: Vec<NodeIndex> = (0..4).map(NodeIndex).filter(|i| *i != me).collect();
    let new_views_to = |out: &[consensus::Output<S>], who: NodeIndex| {
        out.iter()
            .filter(|o| match o {
                consensus::Output::Effect(Effect::Send { to, message }) => {
                    *to == who && matches!(message, Message::NewView { .. })
                }
                consensus::Output::Effect(Effect::Broadcast(message)) => {
                    matches!(message, Message::NewView { .. })
                }
                _ => false,
            })
            .count()
    };
    let mut primary = fx.started(me);
    let timer = Timer::ViewChange {
        height: Height::new(1),
        view: View::ZERO,
    };
    primary.handle(Time::from_millis(2_000), Input::Timer(timer));
    let mut first = Vec::new();
    for i in &others[..2] {
        first.extend(primary.handle(Time::from_millis(2_001), msg(*i, fx.view_change(*i, 1))));
    }
    let slow = others[0];
    assert_eq!(new_views_to(&first, slow), 1, "the NEW-VIEW goes out");
    let mut again = 0;
    for k in 0..10 {
        let out = primary.handle(
            Time::from_millis(2_100 + 100 * k),
            msg(slow, fx.view_change(slow, 1)),
        );
        again += new_views_to(&out, slow);
    }
    assert_eq!(again, 3, "sent again three times, then no more");
}

/// Fires the retransmission timer of `view` eight times, starting from the one
/// `out` (handled at `now`) sets, and returns the gaps between firings in ms;
/// each firing must send exactly one message that `resent` accepts.
fn retransmission_gaps(
    replica: &mut Replica<S>,
    mut out: Vec<consensus::Output<S>>,
    mut now: Time,
    view: View,
    resent: impl Fn(&Message<S>) -> bool,
) -> Vec<u64> {
    let mut gaps = Vec::new();
    for _ in 0..8 {
        let at = out
            .iter()
            .find_map(|o| match o {
                consensus::Output::Effect(Effect::SetTimer {
                    at,
                    timer: Timer::Retransmit { .. },
                }) => Some(*at),
                _ => None,
            })
            .expect("the retransmission timer runs");
        gaps.push((at.0 - now.0) / 1_000);
        now = at;
        let timer = Timer::Retransmit {
            height: Height::new(1),
            view,
        };
        out = replica.handle(now, Input::Timer(timer));
        let sent = out
            .iter()
            .filter(|o| o.message().is_some_and(&resent))
            .count();
        assert_eq!(sent, 1, "the message goes out again");
    }
    gaps
}

/// A voter sends its shares to the collectors again until the height commits,
/// but waiting twice as long each time (up to the view's timeout): re-sending
/// every two fast-path timeouts, 128 nodes on two cores spent their CPU
/// decoding and re-verifying copies (the collectors' PREPAREs above all), every
/// round outlasted its view, and every height needed a view change.
#[test]
fn share_retransmissions_back_off() {
    let fx = Fixture::new(83);
    let me = fx.others[0];
    let mut replica = fx.started(me);
    let block = fx.block(b"backoff");
    let out = replica.handle(
        Time::from_millis(1),
        msg(fx.primary, fx.proposal(0, &block)),
    );
    let gaps = retransmission_gaps(&mut replica, out, Time::from_millis(1), View::ZERO, |m| {
        matches!(m, Message::SignShare { .. })
    });
    let cap = fx.config.view_timeout_us(0) / 1_000;
    let expected: Vec<u64> = (0..8u32)
        .map(|k| (2 * fx.config.fast_path_timeout_us / 1_000 * (1 << k)).min(cap))
        .collect();
    assert_eq!(gaps, expected);
    assert!(gaps.windows(2).all(|w| w[1] >= w[0]) && gaps[7] == cap);
}

/// A PREPARE held from a view change is not verified again when a copy
/// comes, but a copy with a forged signature must not be what the replica
/// records and persists: after a restart its VIEW-CHANGEs would carry the
/// forged certificate. Here the valid PREPARE of view 1 comes during the view
/// change, the NEW-VIEW follows, then a copy with another signature.
#[test]
fn a_forged_copy_of_a_held_prepare_never_reaches_the_vote_record() {
    let fx = Fixture::new(85);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let q = e1.primary;
    let others: Vec<NodeIndex> = (0..4).map(NodeIndex).filter(|i| *i != q).collect();
    let me = others[0];
    let vcs: Vec<Arc<ViewChange<S>>> = (0..4)
        .map(NodeIndex)
        .filter(|i| *i != me)
        .map(|i| match fx.view_change(i, 1) {
            Message::ViewChange(vc) => vc,
            _ => unreachable!(),
        })
        .collect();
    let block = Arc::new(fx.fresh_block());
    let digest = block.digest();
    let (signature, signers) = fx.certify(&signed::prepare(Height::new(1), View::new(1), &digest));
    let valid: PrepareCertificate<S> = PrepareCertificate {
        view: View::new(1),
        digest,
        signature,
        signers,
    };
    let forged = PrepareCertificate {
        signature: valid.signature.add(&Sig::generator()),
        ..valid.clone()
    };
    let prepare = |certificate: &PrepareCertificate<S>| Message::Prepare {
        height: Height::new(1),
        certificate: certificate.clone(),
    };
    let mut replica = fx.started(me);
    let timer = Timer::ViewChange {
        height: Height::new(1),
        view: View::ZERO,
    };
    replica.handle(Time::from_millis(2_000), Input::Timer(timer));
    replica.handle(Time::from_millis(2_001), msg(q, prepare(&valid)));
    let new_view = Message::NewView {
        height: Height::new(1),
        view: View::new(1),
        proof: ViewChangeProof::aggregate(&vcs),
        block,
    };
    replica.handle(Time::from_millis(2_002), msg(q, new_view));
    let out = replica.handle(Time::from_millis(2_003), msg(others[1], prepare(&forged)));
    let recorded: Vec<Sig> = out
        .iter()
        .filter_map(|o| match o {
            consensus::Output::PersistVotes(record) => Some(record),
            _ => None,
        })
        .flatten()
        .filter_map(|r| r.prepared.as_ref().map(|p| p.signature))
        .collect();
    assert!(
        !recorded.contains(&forged.signature),
        "the forged copy's signature reached the vote record"
    );
    assert!(
        out.iter()
            .any(|o| matches!(o.message(), Some(Message::CommitShare { .. }))),
        "the held certificate still earns the COMMIT share"
    );
}

/// A replica hashes each message to the curve once per round: its vote (fast
/// and prepare alike) and the commit proof share one message, its beacon
/// share and the beacon another. Hashing each time it signed or verified cost
/// a real node about a sixth of its protocol CPU (three of its five hashes per
/// round were repeats).
#[test]
fn a_round_hashes_each_message_to_the_curve_once() {
    let fx = Fixture::new(84);
    let me = fx.others[0];
    let mut replica = fx.started(me);
    let block = fx.block(b"hash once");
    let proof = Message::CommitProof {
        certificate: fx.fast_proof(&block),
        beacon: Some(fx.beacon()),
    };
    let _ = beacon::cost::take();
    replica.handle(
        Time::from_millis(1),
        msg(fx.primary, fx.proposal(0, &block)),
    );
    let out = replica.handle(Time::from_millis(2), msg(fx.collector, proof));
    assert!(
        out.iter().any(|o| matches!(
            o,
            consensus::Output::Event(consensus::Event::Committed { .. })
        )),
        "the proof commits the block"
    );
    let hashes = beacon::cost::take();
    assert_eq!(hashes.hash_g1 + hashes.hash_g2, 2, "{hashes:?}");
}

/// During a view change a replica sends its VIEW-CHANGE to the new primary
/// again, but waiting twice as long each time (up to the view's timeout): with
/// every replica re-sending every two fast-path timeouts, 128 nodes on two
/// cores drowned the new primary in copies and no height committed.
#[test]
fn view_change_retransmissions_back_off() {
    let fx = Fixture::new(82);
    let e1 = Election::draw(
        &fx.config.genesis_seed,
        &fx.config.genesis_seed,
        Height::new(1),
        View::new(1),
        4,
        1,
    );
    let me = (0..4).map(NodeIndex).find(|i| *i != e1.primary).unwrap();
    let mut replica = fx.started(me);
    let timer = Timer::ViewChange {
        height: Height::new(1),
        view: View::ZERO,
    };
    let out = replica.handle(Time::from_millis(2_000), Input::Timer(timer));
    let gaps = retransmission_gaps(
        &mut replica,
        out,
        Time::from_millis(2_000),
        View::new(1),
        |m| matches!(m, Message::ViewChange(_)),
    );
    // Two fast-path timeouts (50 ms each) first, then doubling up to the
    // view-1 timeout (2 s).
    assert_eq!(gaps, vec![100, 200, 400, 800, 1_600, 2_000, 2_000, 2_000]);
}

/// One replica floods messages of later heights (junk SIGN-SHAREs of heights
/// 3 to 65, as many as the buffer of later heights holds): the next primary's
/// PRE-PREPARE of height 2, arriving after the flood, is still kept, and
/// replayed (voted on) when the replica enters height 2. Before the buffer was
/// shared fairly among senders, the flood filled it and the proposal was
/// dropped: the replica could not vote at height 2 until a view change.
#[test]
fn a_flood_of_later_heights_from_one_replica_leaves_room_for_the_next_proposal() {
    let fx = Fixture::new(77);
    let (p, c) = (fx.primary, fx.collector);
    let next = fx.primary_of_height_2();
    let me = *fx.others.iter().find(|i| **i != next).unwrap();
    let flooder = (0..4)
        .map(NodeIndex)
        .find(|i| *i != me && *i != next)
        .unwrap();
    let block = fx.block(b"tx");
    let beacon = fx.beacon();
    let block_2 = Arc::new(Block {
        height: Height::new(2),
        parent: block.digest(),
        previous_beacon: beacon.to_bytes().to_vec(),
        transactions: vec![b"next".to_vec()],
    });
    let mut replica = fx.replica(me);
    replica.handle(Time::ZERO, Input::Start);
    replica.handle(Time::ZERO, msg(p, fx.proposal(0, &block)));
    for k in 0..consensus::replica::FUTURE_LIMIT as u64 {
        let junk = Message::SignShare {
            height: Height::new(3 + k % 63),
            view: View::ZERO,
            digest: [k as u8; 32],
            vote: Sig::generator(),
            beacon: Sig::generator(),
        };
        replica.handle(Time::from_millis(1), msg(flooder, junk));
    }
    let proposal_2 = Message::PrePrepare {
        height: Height::new(2),
        view: View::ZERO,
        block: block_2,
    };
    assert!(replica
        .handle(Time::from_millis(2), msg(next, proposal_2))
        .is_empty());
    let proof = Message::CommitProof {
        certificate: fx.fast_proof(&block),
        beacon: Some(beacon),
    };
    let out: Vec<String> = replica
        .handle(Time::from_millis(3), msg(c, proof))
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(out.contains(&"finalized 1".to_string()), "{out:?}");
    assert!(
        out.iter().any(|o| o.starts_with("send sign-share to")),
        "entering height 2, the kept proposal is voted on: {out:?}"
    );
}
