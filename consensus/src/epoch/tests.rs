use super::*;
use crate::messages::Block;
use beacon::dkg::relay::SigningKey;
use beacon::memo::Memo;
use beacon::multisig::ConsensusListing;
use beacon::{MinPk, NodeIndex};

fn key(i: u8) -> SigningKey {
    SigningKey::from_bytes(&[i + 1; 32])
}

fn id(i: u8) -> MemberId {
    member_id(&key(i).verifying_key())
}

fn block(height: u64, controls: &[Control]) -> Block {
    Block {
        height: crate::Height::new(height),
        parent: [0; 32],
        previous_beacon: vec![],
        transactions: controls
            .iter()
            .map(|c| c.to_transaction().unwrap())
            .collect(),
    }
}

fn change() -> EpochChange {
    EpochChange {
        epoch: Epoch::new(1),
        members: (2..9).map(id).collect(),
        c: 0,
        beacon_threshold: 0,
        consensus_keys: (2..9).map(listing).collect(),
    }
}

/// Party `i`'s consensus key listing.
fn listing(i: u8) -> ConsensusListing {
    crate::consensus_key(&[i; 32]).listing::<MinPk>()
}

fn governance() -> Governance {
    let members = (0..4).map(id).collect();
    Governance::new(
        Epoch::ZERO,
        std::sync::Arc::new(members),
        &ReplicaConfig::new(4, 0).unwrap(),
        ConsensusKeyCheck::new::<MinPk>(Memo::disabled()),
    )
}

#[test]
fn control_transactions_round_trip_and_others_stay_opaque() {
    let c = Control::propose(change(), &key(0));
    assert!(c.verify());
    assert_eq!(
        Control::from_transaction(&c.to_transaction().unwrap()),
        Some(c)
    );
    assert_eq!(Control::from_transaction(b"an ordinary transaction"), None);
    assert_eq!(
        Control::from_transaction(b"sbft-beacon/control/1\0garbage"),
        None
    );
}

#[test]
fn a_change_is_decided_by_n_minus_f_current_members_only() {
    let mut g = governance();
    // An outsider and a repeated proposal do not count.
    let outsider = Control::propose(change(), &key(7));
    let first = Control::propose(change(), &key(0));
    assert!(g
        .on_finalized(&block(1, &[outsider, first.clone(), first]))
        .is_empty());
    assert!(g
        .on_finalized(&block(2, &[Control::propose(change(), &key(1))]))
        .is_empty());
    let decided = g.on_finalized(&block(3, &[Control::propose(change(), &key(2))]));
    assert_eq!(
        decided,
        vec![Decision::Decided {
            change: change(),
            height: crate::Height::new(3)
        }]
    );
}

#[test]
fn a_forged_proposal_does_not_count() {
    let mut g = governance();
    let mut forged = Control::propose(change(), &key(0));
    if let Control::Propose { member, .. } = &mut forged {
        *member = id(1);
    }
    assert!(!forged.verify());
    for i in [0, 2] {
        g.on_finalized(&block(1, &[Control::propose(change(), &key(i))]));
    }
    assert!(g.on_finalized(&block(2, &[forged])).is_empty());
}

#[test]
fn unsafe_sizes_and_wrong_epochs_are_refused() {
    let refusal = |c: &EpochChange| check_change(Epoch::ZERO, c).unwrap_err();
    let mut bad = change();
    bad.members.pop(); // 6 members: not 3f + 2c + 1 for c = 0
    let e = refusal(&bad);
    assert!(
        matches!(&e, ChangeRefused::UnsafeSize(s) if matches!(**s, ConsensusError::NetworkSize { n: 6, c: 0, .. })),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("n = 6 is not 3f + 2c + 1 for c = 0"),
        "{e}"
    );
    let mut skip = change();
    skip.epoch = Epoch::new(2);
    let e = refusal(&skip);
    assert!(matches!(
        e,
        ChangeRefused::NotNextEpoch { proposed, current }
            if proposed == Epoch::new(2) && current == Epoch::ZERO
    ));
    assert_eq!(e.to_string(), "epoch 2 does not follow epoch 0");
    let mut twice = change();
    twice.members[1] = twice.members[0];
    let e = refusal(&twice);
    assert!(matches!(e, ChangeRefused::MemberListedTwice));
    assert_eq!(e.to_string(), "a member is listed twice");
    let mut weak = change();
    weak.beacon_threshold = 2; // f = 2 for 7 members
    let e = refusal(&weak);
    assert!(matches!(
        e,
        ChangeRefused::BeaconThreshold {
            threshold: 2,
            min: 3,
            n: 7
        }
    ));
    assert_eq!(
        e.to_string(),
        "beacon threshold 2 outside [f + 1, n] = [3, 7]"
    );
    let mut short = change();
    short.consensus_keys.pop();
    let e = refusal(&short);
    assert!(matches!(
        e,
        ChangeRefused::ConsensusKeyCount {
            keys: 6,
            members: 7
        }
    ));
    assert_eq!(e.to_string(), "6 consensus keys for 7 members");
    assert!(check_change(Epoch::ZERO, &change()).is_ok());
}

/// A joiner brings its consensus key with a proof of possession, and the
/// chain records both with the change: a change listing a key without a
/// valid proof (a rogue key `g^x - sum(others)` has none) is refused by
/// every member before any proposal of it counts, so no quorum of
/// proposals decides it.
#[test]
fn a_change_whose_consensus_key_has_no_valid_proof_is_never_decided() {
    let mut rogue = change();
    rogue.consensus_keys[3].possession = rogue.consensus_keys[4].possession.clone();
    let e = check_consensus_keys::<MinPk>(&rogue).unwrap_err();
    assert!(
        matches!(e, ChangeRefused::ConsensusKey { member: 3, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("new member 3"), "{e}");
    assert!(check_consensus_keys::<MinPk>(&change()).is_ok());
    let mut g = governance();
    for (h, i) in (1..).zip(0..4) {
        let decided = g.on_finalized(&block(h, &[Control::propose(rogue.clone(), &key(i))]));
        assert!(decided.is_empty(), "decided at {h}");
    }
    assert_eq!(g.decided(), None);
    // The same change with valid proofs is decided at the third proposal.
    let mut g = governance();
    let decisions: Vec<_> = (1..)
        .zip(0..3)
        .flat_map(|(h, i)| g.on_finalized(&block(h, &[Control::propose(change(), &key(i))])))
        .collect();
    assert!(
        matches!(decisions.as_slice(), [Decision::Decided { .. }]),
        "{decisions:?}"
    );
}

/// Governance after `change()` was decided at height 1 (by members 0-2), and
/// the change's digest.
fn decided() -> (Governance, [u8; 32]) {
    let mut g = governance();
    for i in 0..3 {
        g.on_finalized(&block(1, &[Control::propose(change(), &key(i))]));
    }
    (g, change().digest())
}

#[test]
fn the_switch_needs_n_minus_f_new_members_ready_with_one_digest() {
    let (mut g, digest) = decided();
    // 7 new members, f = 2: five readies with one digest.
    let ready = |i: u8, keys: u8| {
        Control::ready(
            Epoch::new(1),
            digest,
            [keys; 32],
            vec![NodeIndex(0), NodeIndex(1)],
            &key(i),
        )
    };
    let mut height = 2;
    for i in 2..6 {
        let decisions = g.on_finalized(&block(height, &[ready(i, 1)]));
        if i == 4 {
            // f + 1 = 3 readies with one set of keys name them.
            assert_eq!(
                decisions,
                vec![Decision::Named {
                    digest: [1; 32],
                    dealers: vec![NodeIndex(0), NodeIndex(1)],
                    height: crate::Height::new(height),
                }]
            );
        } else {
            assert!(decisions.is_empty());
        }
        height += 1;
    }
    // A ready with another digest, from an old member, or for another change
    // does not complete it.
    let other_change = Control::ready(
        Epoch::new(1),
        [9; 32],
        [1; 32],
        vec![NodeIndex(0), NodeIndex(1)],
        &key(6),
    );
    assert!(g
        .on_finalized(&block(height, &[ready(6, 2), ready(0, 1), other_change]))
        .is_empty());
    assert_eq!(
        g.on_finalized(&block(height + 1, &[ready(7, 1)])),
        vec![Decision::Switch {
            height: crate::Height::new(height + 1),
            digest: [1; 32],
            dealers: vec![NodeIndex(0), NodeIndex(1)],
        }]
    );
}

#[test]
fn the_next_config_keeps_the_protocol_and_resizes_the_quorums() {
    let old = ReplicaConfig::new(4, 0).unwrap();
    let new = old.resized(7, 0, 0).unwrap();
    assert_eq!((new.n, new.f, new.beacon_threshold), (7, 2, 3));
    assert_eq!(new.fast_path_timeout_us, old.fast_path_timeout_us);
    assert!(old.resized(6, 0, 0).is_err());
}

#[test]
fn readies_split_over_two_sets_of_keys_move_to_the_named_one_and_switch() {
    let (mut g, digest) = decided();
    // 7 new members, f = 2, quorum 5: their resharings qualified two sets of
    // dealers, and the readies split 2 + 2.
    let ready = |i: u8, keys: u8, dealers: Vec<NodeIndex>| {
        Control::ready(Epoch::new(1), digest, [keys; 32], dealers, &key(i))
    };
    assert!(g
        .on_finalized(&block(
            2,
            &[
                ready(2, 1, vec![NodeIndex(0), NodeIndex(1)]),
                ready(3, 1, vec![NodeIndex(0), NodeIndex(1)]),
                ready(4, 2, vec![NodeIndex(0), NodeIndex(2)]),
                ready(5, 2, vec![NodeIndex(0), NodeIndex(2)]),
            ]
        ))
        .is_empty());
    // A member may not move to keys that are not named.
    assert!(g
        .on_finalized(&block(3, &[ready(3, 2, vec![NodeIndex(0), NodeIndex(2)])]))
        .is_empty());
    // The third ready with the second set names it (f + 1 = 3).
    assert_eq!(
        g.on_finalized(&block(4, &[ready(6, 2, vec![NodeIndex(0), NodeIndex(2)])])),
        vec![Decision::Named {
            digest: [2; 32],
            dealers: vec![NodeIndex(0), NodeIndex(2)],
            height: crate::Height::new(4),
        }]
    );
    // Once named, a member that was ready with the first set moves to it, and
    // its old ready, finalized again, does not move it back.
    assert!(g
        .on_finalized(&block(
            5,
            &[
                ready(2, 2, vec![NodeIndex(0), NodeIndex(2)]),
                ready(2, 1, vec![NodeIndex(0), NodeIndex(1)])
            ]
        ))
        .is_empty());
    // The fifth ready with the named keys switches; a second naming never
    // comes.
    assert_eq!(
        g.on_finalized(&block(6, &[ready(3, 2, vec![NodeIndex(0), NodeIndex(2)])])),
        vec![Decision::Switch {
            height: crate::Height::new(6),
            digest: [2; 32],
            dealers: vec![NodeIndex(0), NodeIndex(2)],
        }]
    );
}

#[test]
fn a_block_that_gathers_the_switch_names_nothing() {
    let (mut g, digest) = decided();
    let readies: Vec<Control> = (2..7)
        .map(|i| {
            Control::ready(
                Epoch::new(1),
                digest,
                [1; 32],
                vec![NodeIndex(0), NodeIndex(1)],
                &key(i),
            )
        })
        .collect();
    // f + 1 = 3 readies would name the keys, but the same block holds the
    // n - f = 5 that switch: the switch alone.
    assert_eq!(
        g.on_finalized(&block(2, &readies)),
        vec![Decision::Switch {
            height: crate::Height::new(2),
            digest: [1; 32],
            dealers: vec![NodeIndex(0), NodeIndex(1)],
        }]
    );
}
