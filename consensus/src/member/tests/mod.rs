//! Step tables for [`Member`], as the replica's (`consensus/tests/steps.rs`):
//! one member, one input per step, and the outputs it must produce, written
//! as data in the order it produces them ([`MemberOutput`]'s `Display`). What
//! the DKG session, the replica and the transition return goes through the
//! member's loopback inside one step, so a step shows everything one input
//! causes, in the order the loopback runs it.
//!
//! The network: genesis members 0..4 (`n = 4, c = 0`), and parties 4..7 that
//! may join.
//!
//! The tables of a member's changes are by role: `change` (every member),
//! `joiner`, `dealer` (an old member after the switch); `catch_up` has a
//! member or joiner that is behind.

use super::*;
use crate::config::{smallest_collector_slack, ReplicaConfig};
use crate::epoch::{
    member_id, Control, CurrentEpoch, Directory, EpochChange, EpochMessage, ReshareWire,
    TransitionTimer,
};
use crate::messages::{Block, CommitCertificate, CommitPath, CommittedEntry};
use crate::params::DkgParams;
use crate::{DirectoryIndex, View};
use beacon::multisig::SignerBitmap;
use beacon::{MinSig, Point};

type S = MinSig;
type Sig = <S as Scheme>::Signature;

/// Phase length of changes (µs).
const PHASE_US: u64 = 1_000_000;

/// The timing of the members' changes: phases of [`PHASE_US`].
const TIMING: DkgTiming = DkgTiming::new(std::time::Duration::from_micros(PHASE_US), 1);

/// Parties: the genesis members, then the joiners.
const PARTIES: u32 = 7;

/// What genesis member 0 emits on reading the decision of epoch 1 at height
/// 3: the decision, an invitation to each new member, its deal (broadcast
/// and sub-shares), the end of its deal phase and the resend timer.
const DECIDED: &[&str] = &[
    "epoch 1 decided at 3",
    "send epoch-invite to 1",
    "send epoch-invite to 2",
    "send epoch-invite to 3",
    "send epoch-invite to 4",
    "send epoch-invite to 5",
    "send epoch-invite to 6",
    "broadcast epoch-reshare",
    "send epoch-reshare to 1",
    "send epoch-reshare to 2",
    "send epoch-reshare to 3",
    "send epoch-reshare to 4",
    "send epoch-reshare to 5",
    "send epoch-reshare to 6",
    "timer epoch 1 Reshare(EndOfDeal)",
    "timer epoch-resend",
];

/// One input and the outputs it must produce, in order.
struct Step {
    desc: &'static str,
    input: MemberInput<S>,
    expected: Vec<&'static str>,
}

fn step(desc: &'static str, input: MemberInput<S>, expected: &[&'static str]) -> Step {
    Step {
        desc,
        input,
        expected: expected.to_vec(),
    }
}

/// Runs `steps` on `member`, step `i` at `i` ms.
fn check(member: &mut Member<S>, steps: Vec<Step>) {
    check_from(member, Time::ZERO, steps)
}

/// Runs `steps` on `member`, step `i` at `start` + `i` ms.
fn check_from(member: &mut Member<S>, start: Time, steps: Vec<Step>) {
    for (i, step) in steps.into_iter().enumerate() {
        let out = member.handle(start.plus_millis(i as u64), step.input);
        let lines: Vec<String> = out.iter().map(ToString::to_string).collect();
        assert_eq!(lines, step.expected, "step {i}: {}", step.desc);
    }
}

fn key(i: u32) -> SigningKey {
    member_key(&[i as u8 + 1; 32])
}

/// Every party's keys: party `i`'s derive from the seed `[i + 1; 32]`.
fn directory() -> Directory {
    let seeds: Vec<[u8; 32]> = (0..PARTIES).map(|i| [i as u8 + 1; 32]).collect();
    Directory::derived::<S>(&seeds)
}

fn identity(i: u32) -> MemberIdentity {
    MemberIdentity::new(
        DirectoryIndex::new(i),
        key(i),
        crate::consensus_key(&[i as u8 + 1; 32]),
        directory(),
    )
}

fn message(from: u32, envelope: Envelope<S>) -> MemberInput<S> {
    MemberInput::Message {
        from: NodeIndex(from),
        envelope,
    }
}

/// The change into epoch 1 with the parties `members`.
fn change(members: &[u32]) -> EpochChange {
    let directory = directory();
    let keys = directory.keys();
    EpochChange {
        epoch: Epoch::new(1),
        members: members
            .iter()
            .map(|d| member_id(&keys[*d as usize]))
            .collect(),
        c: smallest_collector_slack(members.len() as u32).unwrap(),
        beacon_threshold: 0,
        consensus_keys: members
            .iter()
            .map(|d| directory.listing(DirectoryIndex::new(*d)).unwrap().clone())
            .collect(),
    }
}

/// A chain of `blocks.len()` heights holding `blocks`' transactions (its
/// certificates are not checked by a restored member).
fn chain(blocks: Vec<Vec<Vec<u8>>>) -> Vec<Arc<CommittedEntry<S>>> {
    let mut chain: Vec<Arc<CommittedEntry<S>>> = Vec::new();
    for (h, transactions) in blocks.into_iter().enumerate() {
        let block = Block {
            height: Height::new(h as u64 + 1),
            parent: chain.last().map_or([0; 32], |e| e.block.digest()),
            previous_beacon: Vec::new(),
            transactions,
        };
        let certificate = CommitCertificate {
            height: block.height,
            view: View::ZERO,
            digest: block.digest(),
            path: CommitPath::Fast,
            signature: Sig::generator(),
            signers: SignerBitmap::new(4),
        };
        chain.push(Arc::new(CommittedEntry {
            block: Arc::new(block),
            certificate,
            beacon: Sig::generator(),
        }));
    }
    chain
}

/// Genesis members 0, 1 and 2 propose `change`.
fn proposals(change: &EpochChange) -> Vec<Vec<u8>> {
    (0..3)
        .map(|i| {
            Control::propose(change.clone(), &key(i))
                .to_transaction()
                .unwrap()
        })
        .collect()
}

/// Ready transactions for epoch 1 of `change` from new members `from`, each
/// with the keys of digest `[7; 32]` combined from `dealers`.
fn readies(
    change: &EpochChange,
    from: std::ops::Range<u32>,
    dealers: Vec<NodeIndex>,
) -> Vec<Vec<u8>> {
    from.map(|i| {
        Control::ready(
            Epoch::new(1),
            change.digest(),
            [7; 32],
            dealers.clone(),
            &key(i),
        )
        .to_transaction()
        .unwrap()
    })
    .collect()
}

/// Genesis member `i`, restored from `chain` with its identity (not started).
fn restored(i: u32, chain: Vec<Arc<CommittedEntry<S>>>) -> Member<S> {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let outputs = crate::corpus::honest_dkg::<S>(&config, 35);
    Member::restore(
        config,
        &directory(),
        RestoredParts {
            output: &outputs[i as usize],
            consensus: crate::consensus_key(&[i as u8 + 1; 32]),
            chain,
            votes: Vec::new(),
            seed: [i as u8; 32],
            memo: Memo::disabled(),
            adversary: None,
        },
    )
    .unwrap()
    .with_identity(identity(i), TIMING)
}

/// Party `i` (not a genesis member), waiting to join (not started).
fn joiner(i: u32) -> Member<S> {
    Member::joining(
        EpochView::genesis(ReplicaConfig::new(4, 0).unwrap(), &directory()),
        identity(i),
        [i as u8 * 11; 32],
        Memo::disabled(),
        TIMING,
    )
    .unwrap()
}

/// The chain window of a genesis member that read the decision of `change`
/// at height 3.
fn decided_window(change: &EpochChange) -> Vec<Arc<CommittedEntry<S>>> {
    chain(vec![vec![], vec![], proposals(change)])
}

/// What genesis member `i`, restored from `window`, sends party `to` (or
/// broadcasts) when it starts.
fn sent_to(i: u32, window: Vec<Arc<CommittedEntry<S>>>, to: u32) -> Vec<EpochMessage<S>> {
    restored(i, window)
        .handle(Time::ZERO, MemberInput::Start)
        .into_iter()
        .filter_map(|o| match o {
            MemberOutput::Effect(Effect::Send {
                to: NodeIndex(d),
                message: Envelope::Epoch(m),
            }) if d == to => Some(m),
            MemberOutput::Effect(Effect::Broadcast(Envelope::Epoch(m))) => Some(m),
            _ => None,
        })
        .collect()
}

/// The invitation among `sent`.
fn invite_in(sent: &[EpochMessage<S>]) -> Envelope<S> {
    let invite = sent.iter().find(|m| matches!(m, EpochMessage::Invite(_)));
    Envelope::Epoch(invite.cloned().unwrap())
}

/// The resharing message among `sent`: the sub-shares (`shares`) or the
/// relayed broadcast.
fn reshare_in(sent: &[EpochMessage<S>], shares: bool) -> Envelope<S> {
    let reshare = sent.iter().find(|m| match m {
        EpochMessage::Reshare { message, .. } => {
            matches!(message, ReshareWire::Shares(_)) == shares
                && !matches!(message, ReshareWire::Request)
        }
        _ => false,
    });
    Envelope::Epoch(reshare.cloned().unwrap())
}

#[test]
fn a_finalized_block_that_ends_the_epoch_switches_and_drops_the_old_replica() {
    // Member 0 leaves: the change makes parties 1..7 the members. Height 3
    // decides it; height 4 holds n' - f' = 5 new members' readies.
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let readies = readies(
        &change,
        1..6,
        vec![NodeIndex(0), NodeIndex(1), NodeIndex(2)],
    );
    let mut member = restored(0, chain(vec![vec![], vec![], proposals(&change), readies]));
    check(
        &mut member,
        vec![step(
            "the restarted member reads its window: height 3 decides the change \
             (invitations, the resharing's start, the resend timer), height 4 \
             ends the epoch (handoffs to the joiners, the erasure timer of what it \
             dealt, what it dealt kept on its disk until then, its record of the \
             epoch it left and a new seed made durable, retired); the replica of the ended epoch never starts",
            MemberInput::Start,
            &[
                DECIDED,
                &[
                    "send epoch-handoff to 4",
                    "send epoch-handoff to 5",
                    "send epoch-handoff to 6",
                    "timer epoch 1 Erase",
                    "persist retained-deal epoch 1 until 32 s",
                    "persist epoch 1 retired",
                    "persist new-seed",
                    "epoch 1 retired after 4",
                ],
            ]
            .concat(),
        )],
    );
    assert!(member.is_retired());
    assert_eq!(member.epoch().number, Epoch::new(1));
}

#[test]
fn a_decision_on_the_window_starts_the_change_then_the_replica() {
    // As above without the readies: the epoch goes on.
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let mut member = restored(0, chain(vec![vec![], vec![], proposals(&change)]));
    check(
        &mut member,
        vec![step(
            "the decision (invitations, the resharing's start, the resend \
             timer), then the replica of the running epoch starts",
            MemberInput::Start,
            &[
                DECIDED,
                &[
                    "persist-votes 4",
                    "broadcast pre-prepare",
                    // Its own proposal, looped back, is voted on before the
                    // height's view timer queued after it (the one order).
                    "send sign-share to 1",
                    "timer replica 0 retransmit(4,0)",
                    "timer replica 0 view-change(4,0)",
                ],
            ]
            .concat(),
        )],
    );
    assert!(member.has_keys());
    assert_eq!(member.changing_to(), Some(Epoch::new(1)));
}

#[test]
fn readies_that_name_keys_make_an_old_member_tell_the_joiners() {
    // As above, and height 4 holds f' + 1 = 2 new members' readies with one
    // set of keys (n' = 6, c' = 1, f' = 1): the chain names them, and this
    // old member (which leaves) tells the joiners 4, 5 and 6.
    let change = change(&[1, 2, 3, 4, 5, 6]);
    let readies = readies(&change, 1..3, vec![NodeIndex(0), NodeIndex(1)]);
    let mut member = restored(0, chain(vec![vec![], vec![], proposals(&change), readies]));
    check(
        &mut member,
        vec![
            step(
                "the decision, the naming (a notice to each joiner), then the \
             replica of the running epoch starts",
                MemberInput::Start,
                &[
                    DECIDED,
                    &[
                        "send epoch-named to 4",
                        "send epoch-named to 5",
                        "send epoch-named to 6",
                        "timer replica 0 view-change(5,0)",
                    ],
                ]
                .concat(),
            ),
            step(
                "the resend timer: invitations to the new members not heard \
             from, and the notices again (until the switch)",
                MemberInput::Timer(MemberTimer::EpochResend),
                &[
                    "send epoch-invite to 1",
                    "send epoch-invite to 2",
                    "send epoch-invite to 3",
                    "send epoch-invite to 4",
                    "send epoch-invite to 5",
                    "send epoch-invite to 6",
                    "send epoch-named to 4",
                    "send epoch-named to 5",
                    "send epoch-named to 6",
                    "timer epoch-resend",
                ],
            ),
        ],
    );
}

/// Genesis members 0..4 run the DKG ([`crate::corpus::run_genesis_dkg`]);
/// returns member 0 and the outputs of the input that completed its DKG.
fn genesis_dkg() -> (Member<S>, Vec<MemberOutput<S>>) {
    let config = ReplicaConfig::new(4, 0).unwrap();
    let dkg = config.dkg_config([35; 32], &DkgParams::default()).unwrap();
    let memo = Memo::shared();
    let mut members: Vec<Member<S>> = (0..4)
        .map(|i| {
            Member::new(
                config.clone(),
                dkg.clone(),
                identity(i),
                [i as u8; 32],
                memo.clone(),
                None,
            )
            .unwrap()
        })
        .collect();
    let out = crate::corpus::run_genesis_dkg(&mut members, 0).expect("the DKG ends");
    (members.swap_remove(0), out)
}

#[test]
fn the_dkg_done_starts_the_replica_in_the_same_step() {
    let (member, out) = genesis_dkg();
    let lines: Vec<String> = out.iter().map(ToString::to_string).collect();
    let done = lines.iter().position(|l| l == "dkg-complete").unwrap();
    assert_eq!(
        lines[done - 2..],
        [
            "persist keys",
            "persist dealing-seed attempt 0 until 84 s",
            "dkg-complete",
            "timer replica 0 view-change(1,0)"
        ],
        "the keys, then the mark of the seed that dealt them, durable; the DKG's end, then the \
         replica's start: {lines:?}"
    );
    assert!(member.has_keys());
}

mod catch_up;
mod change;
mod dealer;
mod joiner;
