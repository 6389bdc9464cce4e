//! Attacks by one Byzantine member (issue: "one bad member must not fork, halt or
//! crash the network"). Each test replays an attack that worked once and checks
//! that it no longer does: forged view changes, oversized views, a withheld
//! beacon, an eager primary on a paced chain, and networks of the wrong size.

mod common;

use beacon::dkg::DkgOutput;
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::multisig;
use beacon::{MinSig, NodeIndex, Point, Scheme, SignatureShare, Time};
use common::Net;
use consensus::messages::{
    signed, CommitCertificate, PrepareCertificate, ViewChange, ViewChangeProof,
};
use consensus::observe::{dispatch, Observer};
use consensus::{
    Behaviour, CommitPath, Election, Envelope, Event, EvidenceKind, Height, Member, MemberInput,
    MemberOutput, Message, ProofKind, ReplicaConfig, ReplicaKeys, View,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

type S = MinSig;

use common::fast_config;

/// What a hand-scheduled network saw: commits and evidence by member.
#[derive(Default)]
struct Seen {
    commits: BTreeMap<u32, [u8; 32]>,
    evidence: Vec<(NodeIndex, EvidenceKind)>,
}

impl Observer<S> for Seen {
    fn committed(
        &mut self,
        node: NodeIndex,
        _: Time,
        _: &Arc<consensus::Block>,
        certificate: &CommitCertificate<S>,
    ) {
        self.commits.insert(node.0, certificate.digest);
    }

    fn evidence(&mut self, node: NodeIndex, _: Time, evidence: &consensus::Evidence) {
        self.evidence.push((node, evidence.kind));
    }
}

/// A hand-scheduled network of `Member`s: messages wait in a queue until the
/// test delivers them.
struct Manual {
    nodes: Vec<Member<S>>,
    queue: VecDeque<(NodeIndex, NodeIndex, Message<S>)>,
    seen: Seen,
    n: u32,
}

impl Manual {
    fn new(
        config: &ReplicaConfig,
        outputs: &[Arc<DkgOutput<S>>],
        byzantine: NodeIndex,
        behaviour: Behaviour,
    ) -> Self {
        let memo = Memo::disabled();
        let nodes = outputs
            .iter()
            .map(|o| {
                let behaviour = (o.me == byzantine).then_some(behaviour);
                common::restore(
                    config.clone(),
                    o,
                    Vec::new(),
                    Vec::new(),
                    [o.me.0 as u8; 32],
                    memo.clone(),
                    behaviour.map(Behaviour::adversary),
                )
                .unwrap()
            })
            .collect();
        Manual {
            nodes,
            queue: VecDeque::new(),
            seen: Seen::default(),
            n: config.n,
        }
    }

    fn input(&mut self, who: NodeIndex, input: MemberInput<S>) -> Vec<MemberOutput<S>> {
        let out = self.nodes[who.0 as usize].handle(Time::ZERO, input);
        for o in &out {
            match o {
                MemberOutput::Effect(Effect::Send {
                    to,
                    message: Envelope::Consensus(m),
                }) => self.queue.push_back((who, *to, m.clone())),
                MemberOutput::Effect(Effect::Broadcast(Envelope::Consensus(m))) => {
                    for j in (0..self.n).filter(|j| *j != who.0) {
                        self.queue.push_back((who, NodeIndex(j), m.clone()));
                    }
                }
                MemberOutput::Event(e) => dispatch(&mut self.seen, who, Time::ZERO, e),
                _ => {}
            }
        }
        out
    }

    fn deliver(
        &mut self,
        from: NodeIndex,
        to: NodeIndex,
        message: Message<S>,
    ) -> Vec<MemberOutput<S>> {
        let envelope = Envelope::Consensus(message);
        self.input(to, MemberInput::Message { from, envelope })
    }

    /// Delivers queued messages until none is left; `keep` decides which are
    /// delivered, the others are returned undelivered.
    fn drain(
        &mut self,
        keep: impl Fn(NodeIndex, NodeIndex, &Message<S>) -> bool,
    ) -> Vec<(NodeIndex, NodeIndex, Message<S>)> {
        let mut held = Vec::new();
        while let Some((from, to, m)) = self.queue.pop_front() {
            if keep(from, to, &m) {
                self.deliver(from, to, m);
            } else {
                held.push((from, to, m));
            }
        }
        held
    }
}

/// The attack of issue 15, finding 1 (n = 4, c = 0): the view-0 collector
/// commits block d0 on the fast path and its proof is delayed; the Byzantine
/// primary of view 1 sends a NEW-VIEW built on view changes written in the
/// others' names, proposing its own block, and drives the slow path with the
/// two other honest replicas. Unsigned view changes let them commit a second
/// block at height 1; signed ones make them refuse the NEW-VIEW.
#[test]
fn forged_view_changes_do_not_fork_the_chain() {
    // A genesis where the view-1 primary is neither the view-0 primary nor its collector.
    let (config, collector, byzantine) = (0..=255u8)
        .find_map(|g| {
            let config = ReplicaConfig::new(4, 0)
                .unwrap()
                .with(|s| s.genesis_seed = [g; 32])
                .unwrap();
            let e0 = Election::draw(
                &config.genesis_seed,
                &config.genesis_seed,
                Height::new(1),
                View::ZERO,
                4,
                1,
            );
            let e1 = Election::draw(
                &config.genesis_seed,
                &config.genesis_seed,
                Height::new(1),
                View::new(1),
                4,
                1,
            );
            (e0.collectors[0] != e1.primary).then_some((config, e0.collectors[0], e1.primary))
        })
        .unwrap();
    let outputs = common::dkg::<S>(&config, 11);
    let mut net = Manual::new(&config, &outputs, byzantine, Behaviour::ForgedViewChange);
    for i in 0..4 {
        net.input(NodeIndex(i), MemberInput::Start);
    }
    // View 0 runs, but the collector's proof and beacon reach nobody; the forged
    // NEW-VIEW is held back until the collector has committed.
    let held = net.drain(|from, _, m| {
        let withheld =
            from == collector && matches!(m, Message::CommitProof { .. } | Message::Beacon { .. });
        let forged = matches!(m, Message::NewView { .. });
        !(withheld || forged)
    });
    let d0 = *net
        .seen
        .commits
        .get(&collector.0)
        .expect("the collector commits d0");
    let forged: Vec<_> = held
        .into_iter()
        .filter(|(from, to, m)| {
            *from == byzantine && *to != collector && matches!(m, Message::NewView { .. })
        })
        .collect();
    assert_eq!(
        forged.len(),
        2,
        "the forger sends its NEW-VIEW to the other two"
    );
    let victims: Vec<NodeIndex> = forged.iter().map(|(_, to, _)| *to).collect();
    let mut sign_shares = Vec::new();
    for (from, to, m) in forged {
        for o in net.deliver(from, to, m) {
            if let MemberOutput::Effect(Effect::Send {
                message: Envelope::Consensus(message @ Message::SignShare { .. }),
                to: c,
            }) = o
            {
                assert_eq!(c, byzantine);
                sign_shares.push((to, message));
            }
        }
    }
    // The Byzantine coalition finishes the slow path with whatever the victims signed.
    let keys = common::replica_keys(&config, &outputs)[byzantine.0 as usize].clone();
    let n = config.n;
    let own = |msg: &[u8]| SignatureShare::<S> {
        signer: byzantine,
        signature: keys.sign_vote(msg),
    };
    if let [(_, Message::SignShare { view, digest, .. }), ..] = sign_shares.as_slice() {
        let (view, digest) = (*view, *digest);
        let msg = signed::prepare(Height::new(1), view, &digest);
        let mut shares = vec![own(&msg)];
        for (from, m) in &sign_shares {
            if let Message::SignShare { vote, .. } = m {
                shares.push(SignatureShare {
                    signer: *from,
                    signature: *vote,
                });
            }
        }
        let (signature, signers) = multisig::aggregate::<S>(n, &shares).unwrap();
        let prepare = PrepareCertificate {
            view,
            digest,
            signature,
            signers,
        };
        let mut commit_shares = vec![own(&signed::commit(Height::new(1), view, &digest))];
        for v in &victims {
            let prepare = Message::Prepare {
                height: Height::new(1),
                certificate: prepare.clone(),
            };
            for o in net.deliver(byzantine, *v, prepare) {
                if let MemberOutput::Effect(Effect::Send {
                    message: Envelope::Consensus(Message::CommitShare { share, .. }),
                    ..
                }) = o
                {
                    commit_shares.push(SignatureShare {
                        signer: *v,
                        signature: share,
                    });
                }
            }
        }
        if let Ok((signature, signers)) = multisig::aggregate::<S>(n, &commit_shares) {
            for v in &victims {
                let proof = Message::CommitProof {
                    certificate: CommitCertificate {
                        height: Height::new(1),
                        view,
                        digest,
                        path: CommitPath::Slow,
                        signature,
                        signers: signers.clone(),
                    },
                    beacon: None,
                };
                net.deliver(byzantine, *v, proof);
            }
        }
    }
    for (who, digest) in &net.seen.commits {
        assert_eq!(
            *digest, d0,
            "replica {who} committed another block at height 1"
        );
    }
    for v in victims {
        assert!(
            net.seen.evidence.iter().any(|(who, e)| *who == v
                && matches!(
                    e,
                    EvidenceKind::InvalidProof {
                        proof: ProofKind::NewView
                    }
                )),
            "replica {} does not name the forger",
            v.0
        );
    }
}

/// With forged view changes in the mix, a simulated network stays safe and live.
#[test]
fn forged_and_split_new_views_keep_agreement() {
    for (seed, behaviour) in [
        (1, Behaviour::ForgedViewChange),
        (2, Behaviour::SplitNewView),
        (3, Behaviour::ForgedViewChange),
        (4, Behaviour::SplitNewView),
    ] {
        let mut net = Net::<S>::new(fast_config(4, 0), seed, &[(seed as u32 % 4, behaviour)]);
        net.start();
        assert!(
            net.run_until(6, Time::from_millis(120_000)),
            "{behaviour:?} seed {seed}: no progress"
        );
        net.assert_agreement();
        net.assert_beacons_verify();
    }
}

/// Certificates are multi-signatures of the members' own consensus keys,
/// each registered with a proof of possession, never sums under shares of
/// the beacon polynomial (`SAFETY.md`, "Certificates are multi-signatures").
/// A member that forges, at every height, fast-path proofs of a block nobody
/// voted for, naming `3f + c + 1` signers, from its own key material alone
/// (its beacon share, or its own consensus key, scaled by the signer count):
/// every honest member refuses both proofs, names it, and no honest member
/// commits the block.
#[test]
fn a_certificate_from_one_members_key_material_is_refused() {
    for seed in [50, 51] {
        let byzantine = NodeIndex(seed as u32 % 4);
        let attack = [(byzantine.0, Behaviour::ShareSumCertificate)];
        let mut net = Net::<S>::new(fast_config(4, 0), seed, &attack);
        net.start();
        assert!(
            net.run_until(6, Time::from_millis(120_000)),
            "seed {seed}: no progress"
        );
        net.assert_agreement();
        net.assert_beacons_verify();
        for i in (0..4).filter(|i| *i != byzantine.0 as usize) {
            for entry in net.chain(i).iter() {
                assert!(
                    !entry
                        .block
                        .transactions
                        .contains(&b"share-sum certificate".to_vec()),
                    "seed {seed}: member {i} committed the forged block at {}",
                    entry.block.height
                );
            }
        }
        let refused = net
            .record
            .evidence
            .iter()
            .filter(|e| {
                e.culprit == byzantine
                    && e.kind
                        == EvidenceKind::InvalidProof {
                            proof: ProofKind::CommitProof,
                        }
            })
            .count();
        // Both forged proofs, at every honest member, at least at height 1.
        assert!(refused >= 2 * 3, "seed {seed}: {refused} refusals");
    }
}

/// Issue 15, finding 2: with n above 3f + 2c + 1 the quorums derived from f
/// overlap in too few replicas; such sizes are refused, with the nearest valid
/// ones named.
#[test]
fn network_sizes_other_than_3f_2c_1_are_refused() {
    for (n, c) in [(5, 0), (6, 0), (8, 0), (32, 0), (64, 1), (7, 1)] {
        let err = ReplicaConfig::new(n, c).unwrap_err().to_string();
        assert!(err.contains("nearest valid n"), "{n}/{c}: {err}");
        assert!(
            err.contains(&format!("keep n = {n} with c =")),
            "{n}/{c}: {err}"
        );
    }
    assert!(ReplicaConfig::new(5, 0)
        .unwrap_err()
        .to_string()
        .contains("4 or 7"));
    for n in [4, 5, 6, 7, 8, 16, 32, 64, 100, 1024] {
        let c = consensus::config::smallest_collector_slack(n).unwrap();
        let cfg = ReplicaConfig::new(n, c).unwrap();
        assert_eq!(cfg.n, 3 * cfg.f + 2 * cfg.c + 1);
    }
}

/// Issue 37: a replica of n = 5, c = 0 (f-based quorums with one replica too
/// many: a Byzantine view-1 primary forks it with a split NEW-VIEW) cannot be
/// built through any public path. Before, `ReplicaConfig`'s fields were public
/// and `Replica::new` never checked them: `ReplicaConfig { n: 5, f: 1, ..
/// ReplicaConfig::new(4, 0)? }` made a running replica.
#[test]
fn an_unsafe_replica_cannot_be_built_through_any_public_path() {
    use consensus::{ProtocolParams, Replica, ReplicaSettings};
    let four = ReplicaConfig::new(4, 0).unwrap();
    // Constructors.
    assert!(ReplicaConfig::new(5, 0).is_err());
    assert!(ReplicaConfig::from_params(5, &ProtocolParams::with_c(0)).is_err());
    assert!(four.resized(5, 0, 0).is_err());
    // Settings edited by hand, whatever f is made to say.
    for f in [0, 1, 2] {
        let unsafe_size = |s: &mut ReplicaSettings| {
            s.n = 5;
            s.f = f;
            s.c = 0;
        };
        assert!(four.with(unsafe_size).is_err(), "f = {f}");
        let mut settings = four.settings();
        unsafe_size(&mut settings);
        assert!(settings.clone().build().is_err(), "f = {f}");
        assert!(
            ReplicaConfig::try_from(settings.clone()).is_err(),
            "f = {f}"
        );
        // Decoded from a file or the wire.
        let text = toml::to_string(&settings).unwrap();
        assert!(toml::from_str::<ReplicaConfig>(&text).is_err(), "f = {f}");
        let bytes = beacon::wire::encode(&settings).unwrap();
        assert!(
            beacon::wire::decode::<ReplicaConfig>(&bytes).is_err(),
            "f = {f}"
        );
    }
    // The valid config round-trips through both codecs.
    let text = toml::to_string(&four).unwrap();
    assert_eq!(toml::from_str::<ReplicaConfig>(&text).unwrap(), four);
    // A replica or a member of the valid size with the keys of a DKG of
    // another size or other thresholds: refused.
    let seven = ReplicaConfig::new(7, 0).unwrap();
    let outputs = common::dkg::<S>(&seven, 3);
    let keys = common::replica_keys(&seven, &outputs)[0].clone();
    assert!(ReplicaKeys::from_dkg(
        &four,
        &outputs[0],
        keys.consensus.clone(),
        keys.epoch.clone()
    )
    .is_err());
    assert!(keys.check(&four).is_err());
    assert!(Replica::new(four.clone(), keys.clone(), [0; 32], Memo::disabled()).is_err());
    assert!(Replica::new(seven.clone(), keys, [0; 32], Memo::disabled()).is_ok());
    assert!(common::restore::<S>(
        four,
        &outputs[0],
        Vec::new(),
        Vec::new(),
        [0; 32],
        Memo::disabled(),
        None
    )
    .is_err());
}

/// Issue 15, finding 3: one VIEW-CHANGE, NEW-VIEW or PRE-PREPARE for view
/// `u64::MAX` from a member once made every receiver panic (overflow in the
/// election). Sent through `Member`, as the node delivers it.
#[test]
fn a_huge_view_number_is_ignored() {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let outputs = common::dkg::<S>(&config, 5);
    let mut member = common::restore::<S>(
        config.clone(),
        &outputs[0],
        Vec::new(),
        Vec::new(),
        [0; 32],
        Memo::disabled(),
        None,
    )
    .unwrap();
    member.handle(Time::ZERO, MemberInput::Start);
    let keys = common::replica_keys(&config, &outputs)[1].clone();
    for view in [u64::MAX, u64::MAX - 1, 1 << 63].map(View::new) {
        let mut vc = ViewChange::<S> {
            from: NodeIndex(1),
            height: Height::new(1),
            new_view: view,
            prepared: None,
            fast_vote: None,
            beacon_share: None,
            block: None,
            signature: beacon::G1::generator(),
        };
        vc.signature = keys.sign_vote(&vc.signed_message());
        let vc = Arc::new(vc);
        let block = Arc::new(consensus::Block {
            height: Height::new(1),
            parent: [0; 32],
            previous_beacon: config.genesis_seed.to_vec(),
            transactions: Vec::new(),
        });
        for message in [
            Message::ViewChange(vc.clone()),
            Message::NewView {
                height: Height::new(1),
                view,
                proof: ViewChangeProof::aggregate(&vec![vc.clone(); 3]),
                block: block.clone(),
            },
            Message::PrePrepare {
                height: Height::new(1),
                view,
                block: block.clone(),
            },
        ] {
            for from in 1..4 {
                let out = member.handle(
                    Time::from_millis(1),
                    MemberInput::Message {
                        from: NodeIndex(from),
                        envelope: Envelope::Consensus(message.clone()),
                    },
                );
                assert!(
                    !out.iter()
                        .any(|o| matches!(o, MemberOutput::Event(Event::ViewChanged { .. }))),
                    "a huge view moved the replica"
                );
            }
        }
    }
    // The replica still works: a network with a huge-view member makes progress.
    let mut net = Net::<S>::new(fast_config(4, 0), 9, &[(2, Behaviour::HugeView)]);
    net.start();
    assert!(net.run_until(5, Time::from_millis(60_000)));
    net.assert_agreement();
}

/// Issue 15, finding 4: with c = 0 the collector alone holds the beacon shares;
/// one that broadcasts its commit proof without the beacon, and never the
/// beacon, used to halt the chain (everyone committed, nobody finalized).
#[test]
fn a_collector_withholding_the_beacon_does_not_halt_the_chain() {
    for seed in [1, 2, 3] {
        let mut net = Net::<S>::new(
            fast_config(4, 0),
            seed,
            &[(seed as u32 % 4, Behaviour::WithholdBeacon)],
        );
        net.start();
        assert!(
            net.run_until(12, Time::from_millis(120_000)),
            "seed {seed}: the chain halted at a withheld beacon"
        );
        net.assert_agreement();
        net.assert_beacons_verify();
    }
}

/// Issue 15, finding 6: on a paced chain an eager primary proposes early; no
/// honest replica may release its beacon share for round h before
/// `time_of_round(h) - max_clock_skew`, so nobody learns beacon h early. In an
/// unchained scheme (issue 36) every round's message is known from genesis, so
/// the release rule is all that keeps a timelocked round closed.
#[test]
fn an_eager_primary_does_not_make_beacons_public_early() {
    eager_primary_releases_nothing_early::<S>();
    eager_primary_releases_nothing_early::<beacon::MinSigUnchained>();
    eager_primary_releases_nothing_early::<beacon::MinPkUnchained>();
}

fn eager_primary_releases_nothing_early<S: Scheme>() {
    for seed in [1, 2] {
        let cfg = fast_config(4, 0)
            .with(|s| {
                s.period = beacon::Period::from_secs(1);
                s.genesis_time_us = 2_000_000;
                s.max_clock_skew_us = 50_000;
            })
            .unwrap();
        // The primary of height 1 is eager.
        let eager = Election::draw(
            &cfg.genesis_seed,
            &cfg.genesis_seed,
            Height::new(1),
            View::ZERO,
            4,
            1,
        )
        .primary
        .0;
        let mut net = Net::<S>::new(cfg.clone(), seed, &[(eager, Behaviour::EagerPrimary)]);
        net.start();
        assert!(net.run_until(5, Time::from_millis(60_000)));
        net.assert_agreement();
        for (at, who, kind, height) in &net.honest_sends {
            if matches!(*kind, "sign-share" | "beacon-share") {
                let h = height.unwrap().get();
                assert!(
                    at.0 >= cfg.release_time(h),
                    "replica {} sent a {kind} for round {h} at {at}, before {}",
                    who.0,
                    cfg.release_time(h)
                );
            }
        }
        for (at, who, round) in &net.record.learned {
            assert!(
                at.0 >= cfg.release_time(*round),
                "replica {} learned beacon {round} at {at}",
                who.0
            );
        }
    }
}

/// The view changes a NEW-VIEW carries verify in one batch per signed message:
/// one bad signature among them is enough to refuse it.
#[test]
fn view_change_signatures_bind_the_claims() {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let outputs = common::dkg::<S>(&config, 21);
    let keys = common::replica_keys(&config, &outputs)[0].clone();
    let mut vc = ViewChange::<S> {
        from: NodeIndex(0),
        height: Height::new(3),
        new_view: View::new(2),
        prepared: None,
        fast_vote: None,
        beacon_share: None,
        block: None,
        signature: beacon::G1::generator(),
    };
    let msg = vc.signed_message();
    vc.signature = keys.sign_vote(&msg);
    let share = SignatureShare {
        signer: NodeIndex(0),
        signature: vc.signature,
    };
    assert!(keys
        .epoch
        .keys()
        .verify_one(&keys.epoch.hash_vote(&msg), &share));
    // Any change of claim or view changes the signed message.
    let mut other = vc.clone();
    other.new_view = View::new(3);
    assert_ne!(other.signed_message(), msg);
    other.new_view = View::new(2);
    other.fast_vote = Some(consensus::messages::FastVote {
        view: View::new(1),
        digest: [7; 32],
        share: vc.signature,
    });
    assert_ne!(other.signed_message(), msg);
}

/// A replica convicted of invalid shares is ignored for a while, not forever: once
/// it behaves again (say it restored a corrupted key), its shares count again
/// after `CONVICTION_HEIGHTS`, and the fast path (which needs every replica's vote
/// at n = 4) comes back.
#[test]
fn a_conviction_expires() {
    use consensus::replica::CONVICTION_HEIGHTS;
    let cfg = ReplicaConfig::new(4, 0)
        .unwrap()
        .with(|s| {
            s.fast_path_timeout_us = 30_000;
            s.view_change_timeout_us = 300_000;
        })
        .unwrap();
    let mut net = Net::<MinSig>::new(cfg, 5, &[(3, Behaviour::BadShares)]);
    net.start();
    // Faulty until every honest replica, as a collector, convicted it.
    let mut h = 2;
    while (0..3).any(|i| !net.record.convictions.contains_key(&(i, 3))) {
        assert!(
            h < 60,
            "not every replica convicted it: {:?}",
            net.record.convictions
        );
        assert!(net.run_until(h, Time::from_millis(600_000)), "no progress");
        h += 1;
    }
    net.restart_honest(3);
    let back = net.chain(3).height().get() + 1;
    let first = net.record.convictions.values().min().unwrap().get();
    let last = net.record.convictions.values().max().unwrap().get();
    let end = last + CONVICTION_HEIGHTS + 12;
    assert!(
        net.run_until(end, Time::from_millis(600_000)),
        "no progress"
    );
    net.assert_agreement();
    let fast = |heights: std::ops::Range<u64>| {
        heights
            .filter(|h| {
                net.record.commits[&Height::new(*h)]
                    .iter()
                    .all(|c| c.2 == CommitPath::Fast)
            })
            .count()
    };
    // While the other collectors hold the conviction, its votes are ignored: the
    // fast path is left only where it collects itself (about a quarter).
    let convicted = back + 1..first + CONVICTION_HEIGHTS;
    let len = convicted.end - convicted.start;
    assert!(len > 20);
    let during = fast(convicted) as u64;
    assert!(
        during * 2 < len,
        "{during} of {len} heights fast while convicted"
    );
    // Once the convictions expired, its votes count again everywhere.
    let after = last + CONVICTION_HEIGHTS + 1..end;
    let len = after.end - after.start;
    let now = fast(after) as u64;
    assert!(
        now * 10 >= len * 9,
        "{now} of {len} heights fast after expiry"
    );
}
