//! Step tables of a joiner ([`super::epochs`]'s `Joiner`): it believes what
//! `f + 1` old members of the epoch it knows tell it the same of, and counts
//! one of each per sender: `f` invitations do not start its transition,
//! `f + 1` identical ones do; the named keys likewise.

use super::*;

#[test]
fn a_joiner_starts_its_transition_on_f_plus_1_identical_invitations_one_per_sender() {
    // Every party is a member of epoch 1; n = 4, f = 1 old members.
    let change = change(&[0, 1, 2, 3, 4, 5, 6]);
    let invite = |i: u32| invite_in(&sent_to(i, decided_window(&change), 4));
    let mut joiner = joiner(4);
    joiner.handle(Time::ZERO, MemberInput::Start);
    check(
        &mut joiner,
        vec![
            step(
                "old member 0 invites: f = 1 is not enough",
                message(0, invite(0)),
                &[],
            ),
            step(
                "old member 0 again: one invitation per old member counts",
                message(0, invite(0)),
                &[],
            ),
            step(
                "party 5 is no old member: its invitation counts for nothing",
                message(5, invite(0)),
                &[],
            ),
        ],
    );
    assert_eq!(
        joiner.changing_to(),
        None,
        "f + 1 = 2 old members must invite"
    );
    check(
        &mut joiner,
        vec![
            step(
                "old member 1's identical invitation is the f + 1-th: the \
                 transition starts (its timers; a new member deals nothing)",
                message(1, invite(1)),
                &["timer epoch 1 Recover", "timer epoch 1 Reshare(EndOfDeal)"],
            ),
            step(
                "old member 2's comes after: nothing more",
                message(2, invite(2)),
                &[],
            ),
        ],
    );
    assert_eq!(joiner.changing_to(), Some(Epoch::new(1)));
}

#[test]
fn a_joiner_believes_the_named_keys_once_f_plus_1_old_members_tell_it_the_same() {
    let mut joiner = joiner(4);
    joiner.handle(Time::ZERO, MemberInput::Start);
    let named = |epoch: u64, digest: u8| {
        Envelope::Epoch(EpochMessage::Named {
            epoch: Epoch::new(epoch),
            digest: [digest; 32],
            dealers: vec![NodeIndex(0), NodeIndex(1)],
        })
    };
    check(
        &mut joiner,
        vec![
            step("old member 0 names keys A", message(0, named(1, 0xA)), &[]),
            step(
                "old member 0 again: one notice per old member counts",
                message(0, named(1, 0xA)),
                &[],
            ),
            step("party 5 is no old member", message(5, named(1, 0xA)), &[]),
            step("old member 1 names keys B", message(1, named(1, 0xB)), &[]),
            step(
                "old member 2 names keys A, but for epoch 2",
                message(2, named(2, 0xA)),
                &[],
            ),
        ],
    );
    assert_eq!(joiner.named_keys(), None, "f + 1 = 2 must agree");
    // The second old member naming A: believed (through the loopback, in
    // the same step; no transition runs yet, so no ready is signed).
    check(
        &mut joiner,
        vec![step(
            "old member 3 names keys A",
            message(3, named(1, 0xA)),
            &[],
        )],
    );
    assert_eq!(
        joiner.named_keys(),
        Some(&crate::epoch::NamedKeys {
            digest: [0xA; 32],
            dealers: vec![NodeIndex(0), NodeIndex(1)]
        })
    );
    // Later notices change nothing.
    check(
        &mut joiner,
        vec![step(
            "old member 1 names keys B again",
            message(1, named(1, 0xB)),
            &[],
        )],
    );
    assert_eq!(
        joiner.named_keys(),
        Some(&crate::epoch::NamedKeys {
            digest: [0xA; 32],
            dealers: vec![NodeIndex(0), NodeIndex(1)]
        })
    );
}
