//! Step tables of an old member after the switch ([`super::epochs`]'s
//! `Dealer`): a new member that asks (it restarted or was cut off during the
//! change) gets the handoff, the invitation and the deal again, until the
//! erasure timer; then the deal and the invitation no more.

use super::*;

#[test]
fn a_dealer_deals_again_to_a_new_member_that_asks_until_the_erasure_timer() {
    // Member 0 leaves: the change makes parties 1..7 the members. Height 3
    // decides it; height 4 holds n' - f' = 5 new members' readies: it
    // switches and retires, retaining its transition.
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let readies = readies(
        &change,
        1..6,
        vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
    );
    let mut dealer = restored(0, chain(vec![vec![], vec![], proposals(&change), readies]));
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
            step("the erasure timer", erase, &[]),
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
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let readies = readies(
        &change,
        1..6,
        vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
    );
    let mut dealer = restored(0, chain(vec![vec![], vec![], proposals(&change), readies]));
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
