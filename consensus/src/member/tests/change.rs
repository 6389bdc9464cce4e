//! Step tables of every member's part in a change ([`super::epochs`]'s
//! `Change`): messages of the change that come before its transition starts
//! are kept, a bounded number per sender, and replayed when it starts.

use super::*;

#[test]
fn a_message_of_the_next_epoch_waits_for_the_transition_and_is_replayed_after_its_start() {
    // Every party is a member of epoch 1. Genesis members 0 and 1 read the
    // decision off their window and send joiner 4 their invitation and
    // their part of the resharing.
    let change = change(&[0, 1, 2, 3, 4, 5, 6]);
    let (from_0, from_1) = (
        sent_to(0, decided_window(&change), 4),
        sent_to(1, decided_window(&change), 4),
    );
    let (invite, reshare) = (invite_in, reshare_in);
    let mut joiner = joiner(4);
    let recover = MemberInput::Timer(MemberTimer::Epoch {
        epoch: Epoch::new(1),
        timer: TransitionTimer::Recover,
    });
    check(
        &mut joiner,
        vec![
            step(
                "a joiner asks the genesis members for the handoff (it may \
                 have lost an invitation) and arms the resend timer",
                MemberInput::Start,
                &[
                    "send epoch-handoff-request to 0",
                    "send epoch-handoff-request to 1",
                    "send epoch-handoff-request to 2",
                    "send epoch-handoff-request to 3",
                    "timer epoch-resend",
                ],
            ),
            step(
                "dealer 0's resharing broadcast, before any invitation: kept",
                message(0, reshare(&from_0, false)),
                &[],
            ),
            step(
                "dealer 0's sub-shares for this joiner: kept",
                message(0, reshare(&from_0, true)),
                &[],
            ),
            step(
                "one invitation: f + 1 = 2 are needed",
                message(0, invite(&from_0)),
                &[],
            ),
            step(
                "the second identical invitation starts the transition (its \
                 timers; a new member deals nothing: consensus keys are its \
                 own); the kept messages are read after it",
                message(1, invite(&from_1)),
                &["timer epoch 1 Recover", "timer epoch 1 Reshare(EndOfDeal)"],
            ),
            step(
                "dealer 1's resharing broadcast, during the transition",
                message(1, reshare(&from_1, false)),
                &[],
            ),
            step(
                "dealer 1's sub-shares, during the transition",
                message(1, reshare(&from_1, true)),
                &[],
            ),
            step(
                "time to ask for what is missing: the deals and sub-shares of \
                 dealers 2 and 3 only (0's were kept and read, 1's came \
                 during the transition)",
                recover,
                &[
                    "send epoch-reshare to 2",
                    "send epoch-reshare to 3",
                    "timer epoch 1 Recover",
                ],
            ),
        ],
    );
    assert_eq!(joiner.changing_to(), Some(Epoch::new(1)));
}

/// A joiner's step table up to its transition's first ask for missing deals:
/// dealer 0's sub-shares `copies` times, then its broadcast, all before the
/// invitations; then dealer 1's part during the transition. Returns the
/// outputs of the ask.
fn ask_after_early_copies(copies: usize) -> Vec<String> {
    let change = change(&[0, 1, 2, 3, 4, 5, 6]);
    let (from_0, from_1) = (
        sent_to(0, decided_window(&change), 4),
        sent_to(1, decided_window(&change), 4),
    );
    let mut joiner = joiner(4);
    joiner.handle(Time::ZERO, MemberInput::Start);
    for _ in 0..copies {
        joiner.handle(Time::ZERO, message(0, reshare_in(&from_0, true)));
    }
    let early = [
        message(0, reshare_in(&from_0, false)),
        message(0, invite_in(&from_0)),
        message(1, invite_in(&from_1)),
        message(1, reshare_in(&from_1, false)),
        message(1, reshare_in(&from_1, true)),
    ];
    for input in early {
        joiner.handle(Time::ZERO, input);
    }
    assert_eq!(joiner.changing_to(), Some(Epoch::new(1)));
    let recover = MemberInput::Timer(MemberTimer::Epoch {
        epoch: Epoch::new(1),
        timer: TransitionTimer::Recover,
    });
    let out = joiner.handle(Time::from_millis(1), recover);
    out.iter().map(ToString::to_string).collect()
}

#[test]
fn early_messages_are_kept_up_to_a_bound_per_sender() {
    // 7 parties: 7 * 4 + 64 = 92 early messages kept per sender. Dealer 0's
    // broadcast as the 92nd is kept and replayed: only dealers 2 and 3 are
    // asked.
    assert_eq!(
        ask_after_early_copies(91),
        [
            "send epoch-reshare to 2",
            "send epoch-reshare to 3",
            "timer epoch 1 Recover"
        ]
    );
    // As the 93rd it is dropped: dealer 0 is asked for its deal too.
    assert_eq!(
        ask_after_early_copies(92),
        [
            "send epoch-reshare to 0",
            "send epoch-reshare to 2",
            "send epoch-reshare to 3",
            "timer epoch 1 Recover"
        ]
    );
}
