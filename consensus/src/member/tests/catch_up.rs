//! Step tables of a member or joiner that is behind: a genesis member down
//! through the DKG that gets the agreed keys when back, and a joiner that
//! knows only an earlier epoch and learns the current one.

use super::*;
use crate::corpus::MemberNet;

/// Genesis members 0..4 with the default DKG timing, started at 0 but for
/// member `late`, which is down (nothing reaches it) until the others
/// completed their DKG and `down_us` more passed; then it starts afresh from
/// its seed. Messages are delivered in order, timers fired when nothing is
/// in flight, until member `late` completes its DKG or fails, or virtual
/// time passes `limit_us`. Returns each member's key material and whether
/// the late member failed.
fn genesis_dkg_with_a_late_member(
    late: u32,
    down_us: u64,
    limit_us: u64,
) -> (Vec<Option<Arc<DkgOutput<S>>>>, bool) {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let dkg = config.dkg_config([36; 32], &DkgParams::default()).unwrap();
    let memo = Memo::shared();
    let build = |i: u32| {
        Member::<S>::new(
            config.clone(),
            dkg.clone(),
            identity(i),
            [i as u8; 32],
            memo.clone(),
            None,
        )
        .unwrap()
    };
    let mut members: Vec<Option<Member<S>>> =
        (0..4).map(|i| (i != late).then(|| build(i))).collect();
    let mut outputs: Vec<Option<Arc<DkgOutput<S>>>> = vec![None; 4];
    let mut net = MemberNet::new(4, (0..4).filter(|i| *i != late));
    let mut back_at: Option<Time> = None;
    loop {
        if let Some(back) = back_at.filter(|_| members[late as usize].is_none()) {
            if net.now() >= back {
                members[late as usize] = Some(build(late));
                net.start(late);
            } else if net.idle_until(back) {
                if net.now().0 > limit_us {
                    return (outputs, false);
                }
                continue;
            }
        }
        let (to, input) = net.next_input().expect("nothing left to run");
        if net.now().0 > limit_us {
            return (outputs, false);
        }
        let Some(member) = members[to as usize].as_mut() else {
            continue;
        };
        let out = member.handle(net.now(), input);
        for o in &out {
            match o {
                MemberOutput::DkgComplete(output) => {
                    outputs[to as usize] = Some(output.clone());
                    let others_done = (0..4)
                        .filter(|i| *i != late)
                        .all(|i| outputs[i as usize].is_some());
                    if others_done && back_at.is_none() {
                        back_at = Some(net.now().plus_micros(down_us));
                    }
                    if to == late {
                        return (outputs, false);
                    }
                }
                MemberOutput::DkgFailed(_) if to == late => return (outputs, true),
                _ => {}
            }
        }
        net.route(to, out);
    }
}

/// A genesis member down through the whole DKG, back 5 s after the others
/// completed it and started their replicas: it restarts its DKG from its
/// seed, asks the dealers for their deals, its shares and the agreed
/// certificate, and the finished sessions answer, so it adopts the agreed
/// keys. Before, a member dropped its session once its DKG completed: the
/// late member ran its attempts alone and failed ("no agreement after 3
/// attempts"), as a real node killed during the genesis DKG did under
/// `sbft-beacon chaos` (issue 53).
#[test]
fn a_member_down_through_the_genesis_dkg_gets_the_agreed_keys_when_back() {
    let limit_us = DkgParams::default().timing().bound_us() * 3;
    let (outputs, failed) = genesis_dkg_with_a_late_member(3, 5_000_000, limit_us);
    assert!(!failed, "the late member's DKG failed");
    let keys: Vec<_> = outputs
        .iter()
        .map(|o| {
            o.as_ref().expect("every member completes its DKG").keys[0]
                .group_key()
                .to_bytes()
        })
        .collect();
    assert!(keys.windows(2).all(|w| w[0] == w[1]), "one group key");
    let late = outputs[3].as_ref().unwrap();
    assert_eq!(
        late.verdicts.qual,
        outputs[0].as_ref().unwrap().verdicts.qual
    );
    assert_eq!(late.me, NodeIndex(3));
    assert!(
        late.check().is_ok(),
        "the late member's share matches its verification key"
    );
    assert_eq!(
        late.keys[0].verification_keys,
        outputs[0].as_ref().unwrap().keys[0].verification_keys
    );
}

/// Epoch 2 with the parties `[0, 1, 2, 5]` (party 3 left, party 5 came),
/// as its members tell a joiner that is behind.
fn epoch_two() -> CurrentEpoch {
    let members = [0, 1, 2, 5];
    CurrentEpoch {
        number: Epoch::new(2),
        members: members.iter().map(|m| DirectoryIndex::new(*m)).collect(),
        config: ReplicaConfig::new(4, 0).unwrap(),
        consensus: members
            .iter()
            .map(|m| crate::consensus_key(&[*m as u8 + 1; 32]).listing::<S>())
            .collect(),
    }
}

/// Party 0, a member of `epoch` with its keys (restored), running it.
fn member_0_of(epoch: &CurrentEpoch) -> Member<S> {
    let outputs = crate::corpus::honest_dkg::<S>(&epoch.config, 35);
    let view = EpochView::new(
        epoch.number,
        epoch.members.clone(),
        epoch.config.clone(),
        Arc::new(epoch.consensus.clone()),
    );
    Member::restore_in(
        view,
        RestoredParts {
            output: &outputs[0],
            consensus: crate::consensus_key(&[1; 32]),
            chain: Vec::new(),
            votes: Vec::new(),
            seed: [0; 32],
            memo: Memo::disabled(),
            adversary: None,
        },
    )
    .unwrap()
    .with_identity(identity(0), TIMING)
}

/// A party that left and is added back with an empty disk (issue 53, chaos
/// finding 1) knows only the genesis epoch; the members run epoch 2 and
/// invite it to epoch 3. Before, it asked the genesis members for a handoff
/// of epoch 1 and took only invitations to epoch 1 from them: it never
/// joined. Now a member tells a party that asks for an epoch that began
/// without it which epoch it runs; the joiner believes `f + 1` members of
/// the epoch it knows that say the same, and asks that epoch's members.
#[test]
fn a_joiner_that_knows_only_an_earlier_epoch_learns_the_current_one_and_asks_its_members() {
    let current = epoch_two();
    let mut member = member_0_of(&current);
    let request = |epoch: u64| {
        Envelope::Epoch(EpochMessage::HandoffRequest {
            epoch: Epoch::new(epoch),
        })
    };
    check(
        &mut member,
        vec![
            step(
                "party 3, which knows epoch 0, asks for epoch 1's handoff",
                message(3, request(1)),
                &["send epoch-current to 3"],
            ),
            step(
                "party 5, a member of epoch 2, is no joiner that is behind",
                message(5, request(2)),
                &[],
            ),
            step(
                "party 6 asks for epoch 3, which has not begun",
                message(6, request(3)),
                &[],
            ),
        ],
    );
    let mut joiner = joiner(3);
    joiner.handle(Time::ZERO, MemberInput::Start);
    let told = || Envelope::Epoch(EpochMessage::Current(Box::new(epoch_two())));
    check(
        &mut joiner,
        vec![
            step("genesis member 0 tells epoch 2", message(0, told()), &[]),
            step(
                "member 0 again: one statement per member",
                message(0, told()),
                &[],
            ),
            step("party 5 is no genesis member", message(5, told()), &[]),
        ],
    );
    assert_eq!(joiner.epoch().number, Epoch::ZERO, "f + 1 = 2 must agree");
    check(
        &mut joiner,
        vec![
            step("genesis member 1 tells epoch 2", message(1, told()), &[]),
            step(
                "its next request goes to epoch 2's members, for epoch 3",
                MemberInput::Timer(MemberTimer::EpochResend),
                &[
                    "send epoch-handoff-request to 0",
                    "send epoch-handoff-request to 1",
                    "send epoch-handoff-request to 2",
                    "send epoch-handoff-request to 5",
                    "timer epoch-resend",
                ],
            ),
        ],
    );
    assert_eq!(joiner.epoch().number, Epoch::new(2));
    assert_eq!(joiner.epoch().members, epoch_two().members);
}

/// A party added by a change while it knew only an earlier epoch, with an
/// empty disk (`sbft-beacon chaos`, seeds 707 and 808: a node that left
/// was added back and restarted with an empty data directory as the change
/// was decided; the members switched without it). Before, the members did
/// not tell a member of their epoch which epoch they run, and a joiner took
/// only invitations into the epoch after the one it knew: it waited at the
/// genesis epoch for good, and the change never completed. Now it learns
/// the epoch it is a member of, asks that epoch's members for the handoff
/// into it, and takes the invitation into it from `f + 1` of them.
#[test]
fn a_party_added_while_it_was_behind_learns_its_epoch_and_joins_its_change() {
    // Epoch 1: genesis members 0, 1, 2 stay, party 4 comes (3 leaves).
    let change = change(&[0, 1, 2, 4]);
    let directory = directory();
    let current = CurrentEpoch {
        number: change.epoch,
        members: change
            .members
            .iter()
            .map(|m| directory.index_of(m).unwrap())
            .collect(),
        config: ReplicaConfig::new(4, 0)
            .unwrap()
            .resized(4, change.c, change.beacon_threshold)
            .unwrap(),
        consensus: change.consensus_keys.clone(),
    };
    // A member of epoch 2 tells party 5, a member of it that asks for
    // epoch 1 (it knows epoch 0 only), which epoch it runs.
    let two = epoch_two();
    let mut member = member_0_of(&two);
    check(
        &mut member,
        vec![step(
            "member 5 of epoch 2 asks for epoch 1: it is told epoch 2",
            message(
                5,
                Envelope::Epoch(EpochMessage::HandoffRequest {
                    epoch: Epoch::new(1),
                }),
            ),
            &["send epoch-current to 5"],
        )],
    );
    // Party 4, told epoch 1 (of which it is a member) by f + 1 genesis
    // members, joins the change into it.
    let mut joiner = joiner(4);
    joiner.handle(Time::ZERO, MemberInput::Start);
    let told = || Envelope::Epoch(EpochMessage::Current(Box::new(current.clone())));
    check(
        &mut joiner,
        vec![
            step("genesis member 0 tells epoch 1", message(0, told()), &[]),
            step("genesis member 1 tells epoch 1", message(1, told()), &[]),
            step(
                "it is a member of epoch 1 without keys: it asks epoch 1's \
                 members for the handoff into epoch 1",
                MemberInput::Timer(MemberTimer::EpochResend),
                &[
                    "send epoch-handoff-request to 0",
                    "send epoch-handoff-request to 1",
                    "send epoch-handoff-request to 2",
                    "send epoch-handoff-request to 4",
                    "timer epoch-resend",
                ],
            ),
        ],
    );
    assert_eq!(joiner.epoch().number, Epoch::new(1));
    let invite = |i: u32| invite_in(&sent_to(i, decided_window(&change), 4));
    check(
        &mut joiner,
        vec![
            step(
                "member 0 of epoch 1 (an old member that stayed) invites it \
                 into epoch 1: f = 1 is not enough",
                message(0, invite(0)),
                &[],
            ),
            step(
                "member 1's identical invitation is the f + 1-th: the \
                 transition into epoch 1 starts",
                message(1, invite(1)),
                &["timer epoch 1 Recover", "timer epoch 1 Reshare(EndOfDeal)"],
            ),
        ],
    );
    assert_eq!(joiner.changing_to(), Some(Epoch::new(1)));
}

/// A stayer whose keys cannot be recombined (`sbft-beacon chaos`, seed 808:
/// stayers 3 and 4 were down across the switch into epoch 1, and a dealer
/// the chain named was the leaver, stopped as soon as it retired: its deal
/// was gone, and they waited with their own chains for good while the
/// others ran epochs 1 and 2). Now a stayer that waited longer than any
/// dealer keeps what it dealt gives the change up: it erases its old keys,
/// records epoch 1 without keys, and waits in it as a member without keys,
/// asking its members for the handoff; a later epoch's members tell it
/// theirs, and it joins the change into it (above).
#[test]
fn a_stayer_that_cannot_recombine_its_keys_gives_them_up_and_waits_for_a_later_change() {
    // Member 0 stays: parties 0..6 are epoch 1's members; height 4 holds
    // five readies for keys this member does not hold (digest [7; 32]).
    let change = change(&[0, 1, 2, 3, 4, 5]);
    let readies = readies(
        &change,
        1..6,
        vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
    );
    let mut stayer = restored(0, chain(vec![vec![], vec![], proposals(&change), readies]));
    let start: Vec<String> = stayer
        .handle(Time::ZERO, MemberInput::Start)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert!(
        !stayer.is_retired() && !stayer.is_late_member(),
        "waiting with its own chain: {start:?}"
    );
    assert_eq!(stayer.changing_to(), Some(Epoch::new(1)));
    let resend = |stayer: &mut Member<S>, k: u64| -> Vec<String> {
        stayer
            .handle(
                Time::ZERO.plus_micros(PHASE_US * k),
                MemberInput::Timer(MemberTimer::EpochResend),
            )
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    for k in 1..=epochs::GIVE_UP_PHASES {
        let out = resend(&mut stayer, k);
        assert!(
            !out.iter().any(|o| o.starts_with("persist")),
            "phase {k}: it still waits for the dealers' answers: {out:?}"
        );
    }
    assert!(!stayer.is_late_member());
    let out = resend(&mut stayer, epochs::GIVE_UP_PHASES + 1);
    let persisted: Vec<&String> = out.iter().filter(|o| o.starts_with("persist")).collect();
    assert_eq!(
        persisted,
        ["persist epoch 1 retired", "persist new-seed"],
        "its record of epoch 1 without keys (a leaver's form), then a new seed: {out:?}"
    );
    assert!(
        out.iter()
            .any(|o| o.contains("epoch 1") && o.contains("failed")),
        "{out:?}"
    );
    for to in [1, 2, 3, 4, 5] {
        assert!(
            out.contains(&format!("send epoch-handoff-request to {to}")),
            "it asks epoch 1's members for the handoff into it: {out:?}"
        );
    }
    assert!(stayer.is_late_member(), "its old keys are erased");
    assert_eq!(stayer.epoch().number, Epoch::new(1));
    assert_eq!(stayer.changing_to(), None);

    // Restarted from that record, it waits the same way (as a node restarts
    // a record without keys).
    let view = EpochView::new(
        Epoch::new(1),
        stayer.epoch().members.clone(),
        stayer.epoch().config.clone(),
        stayer.epoch().consensus.clone(),
    );
    let mut back =
        Member::joining(view, identity(0), [0xd1; 32], Memo::disabled(), TIMING).unwrap();
    back.handle(Time::ZERO, MemberInput::Start);
    assert!(back.is_late_member());
    let out = resend(&mut back, 1);
    assert!(
        out.contains(&"send epoch-handoff-request to 1".to_string()),
        "{out:?}"
    );
}
