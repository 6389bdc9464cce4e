//! Step tables of an old member after the switch ([`super::epochs`]'s
//! `Dealer`): a new member that asks (it restarted or was cut off during the
//! change) gets the handoff, the invitation and the deal again, until the
//! erasure timer; then the deal and the invitation no more.

use super::*;

/// Member 0, restored from a window in which it leaves: the change makes
/// parties 1..7 the members. Height 3 decides it; height 4 holds
/// n' - f' = 5 new members' readies: at its start it switches and retires,
/// retaining its transition.
fn leaving_dealer() -> Member<S> {
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let readies = readies(
        &change,
        1..6,
        vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
    );
    restored(0, chain(vec![vec![], vec![], proposals(&change), readies]))
}

#[test]
fn a_dealer_deals_again_to_a_new_member_that_asks_until_the_erasure_timer() {
    let mut dealer = leaving_dealer();
    dealer.handle(Time::ZERO, MemberInput::Start);
    assert!(dealer.is_retired());
    let request = || {
        message(
            4,
            Envelope::Epoch(EpochMessage::Reshare {
                epoch: Epoch::new(1),
                message: ReshareWire::Request,
            }),
        )
    };
    let handoff_request = || {
        message(
            4,
            Envelope::Epoch(EpochMessage::HandoffRequest {
                epoch: Epoch::new(1),
            }),
        )
    };
    let erase = MemberInput::Timer(MemberTimer::Epoch {
        epoch: Epoch::new(1),
        timer: TransitionTimer::Erase,
    });
    check(
        &mut dealer,
        vec![
            step(
                "new member 4 asks for the handoff: the handoff, and the \
                 invitation again (it may have lost it)",
                handoff_request(),
                &["send epoch-handoff to 4", "send epoch-invite to 4"],
            ),
            step(
                "new member 4 asks for the deal: its broadcast and its \
                 sub-shares again",
                request(),
                &["send epoch-reshare to 4", "send epoch-reshare to 4"],
            ),
        ],
    );
    // Its time: RETAIN_PHASES phase lengths after the switch (at 0).
    let erase_at = Time::ZERO.plus_micros(PHASE_US * epochs::RETAIN_PHASES);
    check_from(
        &mut dealer,
        erase_at,
        vec![
            step(
                "the erasure timer: erased, on its disk too",
                erase,
                &["persist erase-deal epoch 1"],
            ),
            step("the deal is erased", request(), &[]),
            step(
                "the handoff is still served, the invitation no more",
                handoff_request(),
                &["send epoch-handoff to 4"],
            ),
        ],
    );
}

#[test]
fn a_dealer_serves_only_the_new_members_of_its_change() {
    let mut dealer = leaving_dealer();
    dealer.handle(Time::ZERO, MemberInput::Start);
    let ask = |from: u32, epoch: u64| {
        message(
            from,
            Envelope::Epoch(EpochMessage::Reshare {
                epoch: Epoch::new(epoch),
                message: ReshareWire::Request,
            }),
        )
    };
    check(
        &mut dealer,
        vec![
            step("a request for another change", ask(4, 2), &[]),
            step(
                "a handoff request for another change",
                message(
                    4,
                    Envelope::Epoch(EpochMessage::HandoffRequest {
                        epoch: Epoch::new(2),
                    }),
                ),
                &[],
            ),
            step(
                "new member 5's request for this change",
                ask(5, 1),
                &["send epoch-reshare to 5", "send epoch-reshare to 5"],
            ),
        ],
    );
}

/// The sends among `outputs`: each receiver with the message's encoding.
fn sends(outputs: &[MemberOutput<S>]) -> Vec<(NodeIndex, Vec<u8>)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            MemberOutput::Effect(Effect::Send { to, message }) => {
                Some((*to, beacon::wire::encode(message).unwrap()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_dealer_restarted_after_the_switch_deals_the_same_again_from_its_disk() {
    let mut dealer = leaving_dealer();
    let switch = dealer.handle(Time::ZERO, MemberInput::Start);
    let writes: Vec<&crate::disk::DiskWrite<S>> = switch
        .iter()
        .filter_map(|o| match o {
            MemberOutput::Persist(w) => Some(w),
            _ => None,
        })
        .collect();
    let kinds: Vec<&str> = writes.iter().map(|w| w.kind()).collect();
    assert_eq!(
        kinds,
        ["retained-deal", "epoch", "seed"],
        "what it dealt is durable before the record that erases its old share"
    );
    let (crate::disk::DiskWrite::KeepDeal(deal), crate::disk::DiskWrite::Epoch { record, .. }) =
        (writes[0], writes[1])
    else {
        panic!("{kinds:?}");
    };
    assert_eq!(deal.epoch(), Epoch::new(1));
    let erase_at = Time::ZERO.plus_micros(PHASE_US * epochs::RETAIN_PHASES);
    assert_eq!(deal.until, erase_at, "kept as long as the memory keeps it");
    let request = || {
        message(
            4,
            Envelope::Epoch(EpochMessage::Reshare {
                epoch: Epoch::new(1),
                message: ReshareWire::Request,
            }),
        )
    };
    let before = sends(&dealer.handle(Time::from_millis(1), request()));
    assert_eq!(before.len(), 2, "its deal's broadcast and the sub-shares");

    // Killed and restarted from its disk: retired, it comes back as a party
    // that may join the epoch it left (as a node restarts it), with its deal.
    let mut back = Member::joining(
        record.view(),
        identity(0),
        [0xd0; 32],
        Memo::disabled(),
        TIMING,
    )
    .unwrap()
    .with_retained_deal(deal.as_ref().clone());
    let start = back.handle(Time::from_millis(2), MemberInput::Start);
    let timers: Vec<String> = start
        .iter()
        .filter(|o| matches!(o, MemberOutput::Effect(Effect::SetTimer { .. })))
        .map(ToString::to_string)
        .collect();
    assert!(
        start.iter().any(|o| matches!(
            o,
            MemberOutput::Effect(Effect::SetTimer {
                at,
                timer: MemberTimer::Epoch {
                    timer: TransitionTimer::Erase,
                    ..
                },
            }) if *at == erase_at
        )),
        "the erasure timer armed at the deal's time: {timers:?}"
    );
    let after = sends(&back.handle(Time::from_millis(3), request()));
    assert_eq!(after, before, "the very same deal and sub-shares");

    let erase = || {
        MemberInput::Timer(MemberTimer::Epoch {
            epoch: Epoch::new(1),
            timer: TransitionTimer::Erase,
        })
    };
    let early = back.handle(Time::from_millis(4), erase());
    assert!(
        early.is_empty(),
        "a timer before the deal's time: {early:?}"
    );
    let still = sends(&back.handle(Time::from_millis(5), request()));
    assert_eq!(still, before, "kept until its time");
    let erased: Vec<String> = back
        .handle(erase_at, erase())
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        erased,
        ["persist erase-deal epoch 1"],
        "erased on its disk too"
    );
    assert!(
        sends(&back.handle(erase_at, request())).is_empty(),
        "nothing dealt once erased"
    );
}

/// Issue 53 (chaos, reading seed 808): each dealer kept the deal of its
/// last change only, in memory and on disk, so a change that came within
/// the retention of the one before replaced the deal that a stayer which
/// missed the earlier switch still needed. Now a dealer keeps the deal of
/// every change still within its retention (up to `MAX_RETAINED_CHANGES`),
/// and erases each at its own time. Here: member 0, retired after dealing
/// in the change into epoch 1, is restored at epoch 2 from a disk that
/// holds both changes' deals.
#[test]
fn a_dealer_keeps_the_deal_of_a_change_after_the_next_one_until_its_time() {
    let mut dealer = leaving_dealer();
    let switch = dealer.handle(Time::ZERO, MemberInput::Start);
    let Some((deal, record)) = switch
        .iter()
        .filter_map(|o| match o {
            MemberOutput::Persist(crate::disk::DiskWrite::KeepDeal(d)) => Some(d.clone()),
            _ => None,
        })
        .zip(switch.iter().filter_map(|o| match o {
            MemberOutput::Persist(crate::disk::DiskWrite::Epoch { record, .. }) => {
                Some(record.clone())
            }
            _ => None,
        }))
        .next()
    else {
        panic!("a deal and a record");
    };
    let request = |epoch: u64| {
        message(
            4,
            Envelope::Epoch(EpochMessage::Reshare {
                epoch: Epoch::new(epoch),
                message: ReshareWire::Request,
            }),
        )
    };
    let first = sends(&dealer.handle(Time::from_millis(1), request(1)));
    assert_eq!(first.len(), 2, "its deal's broadcast and the sub-shares");

    // The change into epoch 2 (the same members and the same old share
    // stand in for it), 75 s later, kept 75 s longer.
    let mut later = deal.as_ref().clone();
    later.invitation.change.epoch = Epoch::new(2);
    later.invitation.reshare = later.invitation.reshare.with(|s| s.epoch = 2).unwrap();
    later.until = deal.until.plus_micros(75_000_000);
    let epoch_1 = record.view();
    let epoch_2 = EpochView::new(
        Epoch::new(2),
        epoch_1.members.clone(),
        epoch_1.config.clone(),
        epoch_1.consensus.clone(),
    );
    let mut back = Member::joining(epoch_2, identity(0), [0xd0; 32], Memo::disabled(), TIMING)
        .unwrap()
        .with_retained_deal(deal.as_ref().clone())
        .with_retained_deal(later.clone());
    let start = back.handle(Time::from_millis(2), MemberInput::Start);
    let erasures: Vec<(Epoch, Time)> = start
        .iter()
        .filter_map(|o| match o {
            MemberOutput::Effect(Effect::SetTimer {
                at,
                timer:
                    MemberTimer::Epoch {
                        epoch,
                        timer: TransitionTimer::Erase,
                    },
            }) => Some((*epoch, *at)),
            _ => None,
        })
        .collect();
    assert_eq!(
        erasures,
        [(Epoch::new(1), deal.until), (Epoch::new(2), later.until)],
        "each change's erasure timer at its deal's time"
    );
    assert_eq!(
        sends(&back.handle(Time::from_millis(3), request(1))),
        first,
        "the earlier change's very same deal and sub-shares, after the later change"
    );
    let second = sends(&back.handle(Time::from_millis(4), request(2)));
    assert_eq!(second.len(), 2, "the later change's deal too");

    let erase = |epoch: u64| {
        MemberInput::Timer(MemberTimer::Epoch {
            epoch: Epoch::new(epoch),
            timer: TransitionTimer::Erase,
        })
    };
    check_from(
        &mut back,
        deal.until,
        vec![
            step(
                "the earlier change's erasure timer: that deal erased, on its disk too",
                erase(1),
                &["persist erase-deal epoch 1"],
            ),
            step("the earlier deal is erased", request(1), &[]),
            step(
                "the later one's timer before its time: nothing",
                erase(2),
                &[],
            ),
        ],
    );
    assert_eq!(
        sends(&back.handle(deal.until, request(2))),
        second,
        "the later deal is kept until its time"
    );
    check_from(
        &mut back,
        later.until,
        vec![
            step(
                "the later change's erasure timer",
                erase(2),
                &["persist erase-deal epoch 2"],
            ),
            step("the later deal is erased", request(2), &[]),
        ],
    );
}
