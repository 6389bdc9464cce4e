//! A joiner that restarts during a change of members (issue 38): it lost its
//! invitation with its memory, and the old members send invitations unasked
//! only to new members they have not heard from. The restarted joiner asks
//! (`HandoffRequest` of the next epoch, at once on start and then every phase
//! length), and an old member of the change answers a new member with its
//! invitation; `f + 1` of them start the joiner's transition again. Driven
//! through `Member` as the node and the simulator drive it, with old members
//! restored from a chain that decided the change.

mod common;

use beacon::dkg::relay::SigningKey;
use beacon::dkg::DkgTiming;
use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Point, Scheme, Time};
use consensus::epoch::{
    member_id, Control, Directory, EpochChange, EpochMessage, EpochView, ReshareWire,
};
use consensus::{
    consensus_key, member_key, Block, CommitCertificate, CommitPath, CommittedEntry,
    DirectoryIndex, Envelope, Epoch, Height, Member, MemberIdentity, MemberInput, MemberOutput,
    MemberTimer, ReplicaConfig, View,
};
use std::sync::Arc;
use std::time::Duration;

type S = MinSig;
type Sig = <S as Scheme>::Signature;

/// Phase length of the change (µs).
const PHASE_US: u64 = 1_000_000;

/// The timing the members take part in changes with: phases of [`PHASE_US`].
const TIMING: DkgTiming = DkgTiming::new(Duration::from_micros(PHASE_US), 1);

/// Genesis members 0..4, joiners 4..7; the change makes all seven members.
struct Fixture {
    config: ReplicaConfig,
    outputs: Vec<Arc<beacon::dkg::DkgOutput<S>>>,
    directory: Directory,
    chain: Vec<Arc<CommittedEntry<S>>>,
}

fn seed(i: u32) -> [u8; 32] {
    [i as u8 + 1; 32]
}

fn key(i: u32) -> SigningKey {
    member_key(&seed(i))
}

fn identity(i: u32, directory: &Directory) -> MemberIdentity {
    MemberIdentity::new(
        DirectoryIndex::new(i),
        key(i),
        consensus_key(&seed(i)),
        directory.clone(),
    )
}

impl Fixture {
    fn new() -> Self {
        let config = ReplicaConfig::new(4, 0).unwrap();
        let outputs = common::dkg::<S>(&config, 38);
        let seeds: Vec<[u8; 32]> = (0..7).map(seed).collect();
        let directory = Directory::derived::<S>(&seeds);
        let change = EpochChange {
            epoch: Epoch::new(1),
            members: directory.keys().iter().map(member_id).collect(),
            c: consensus::config::smallest_collector_slack(7).unwrap(),
            beacon_threshold: 0,
            consensus_keys: directory.listings().as_ref().clone(),
        };
        // Heights 1..=3; the third holds n - f = 3 members' proposals: it
        // decides the change.
        let mut chain: Vec<Arc<CommittedEntry<S>>> = Vec::new();
        for h in 1..=3u64 {
            let transactions = if h == 3 {
                (0..3)
                    .map(|i| {
                        Control::propose(change.clone(), &key(i))
                            .to_transaction()
                            .unwrap()
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let block = Block {
                height: Height::new(h),
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
                signers: beacon::multisig::SignerBitmap::new(4),
            };
            chain.push(Arc::new(CommittedEntry {
                block: Arc::new(block),
                certificate,
                beacon: Sig::generator(),
            }));
        }
        Fixture {
            config,
            outputs,
            directory,
            chain,
        }
    }

    /// Old member `i` restored from the chain that decided the change, started.
    fn old_member(&self, i: u32) -> (Member<S>, Vec<MemberOutput<S>>) {
        let mut m = Member::restore(
            self.config.clone(),
            &self.directory,
            consensus::RestoredParts {
                output: &self.outputs[i as usize],
                consensus: consensus_key(&seed(i)),
                chain: self.chain.clone(),
                votes: Vec::new(),
                seed: [i as u8; 32],
                memo: Memo::shared(),
                adversary: None,
            },
        )
        .unwrap()
        .with_identity(identity(i, &self.directory), TIMING);
        let out = m.handle(Time::ZERO, MemberInput::Start);
        (m, out)
    }

    /// Joiner `i` (re)started: it trusts the genesis members.
    fn joiner(&self, i: u32, seed: u8) -> (Member<S>, Vec<MemberOutput<S>>) {
        let mut m = Member::joining(
            EpochView::genesis(self.config.clone(), &self.directory),
            identity(i, &self.directory),
            [seed; 32],
            Memo::shared(),
            TIMING,
        )
        .unwrap();
        let out = m.handle(Time::ZERO, MemberInput::Start);
        (m, out)
    }
}

/// The epoch messages of `out` sent to `to`.
fn sent_to(out: &[MemberOutput<S>], to: u32) -> Vec<EpochMessage<S>> {
    out.iter()
        .filter_map(|o| match o {
            MemberOutput::Effect(beacon::effect::Effect::Send {
                to: t,
                message: Envelope::Epoch(m),
            }) if t.0 == to => Some(m.clone()),
            _ => None,
        })
        .collect()
}

fn invites(messages: &[EpochMessage<S>]) -> usize {
    messages
        .iter()
        .filter(|m| matches!(m, EpochMessage::Invite(_)))
        .count()
}

fn deliver(
    m: &mut Member<S>,
    at: u64,
    from: u32,
    message: EpochMessage<S>,
) -> Vec<MemberOutput<S>> {
    m.handle(
        Time(at),
        MemberInput::Message {
            from: NodeIndex(from),
            envelope: Envelope::Epoch(message),
        },
    )
}

#[test]
fn a_joiner_restarted_during_a_change_asks_for_its_invitation_and_gets_it() {
    let fx = Fixture::new();
    let joiner = 5;
    let (mut a, out_a) = fx.old_member(0);
    let (mut b, out_b) = fx.old_member(1);
    // Each old member read the decision off its chain, runs its part of the
    // change, and invited every new member once.
    for (m, out) in [(&a, &out_a), (&b, &out_b)] {
        assert_eq!(m.changing_to(), Some(Epoch::new(1)));
        assert_eq!(invites(&sent_to(out, joiner)), 1);
    }
    // The joiner took part: it asked both for their deals (they heard from
    // it), then crashed and lost its invitation. The old members' resend
    // invites it no more.
    for m in [&mut a, &mut b] {
        let request = EpochMessage::Reshare {
            epoch: Epoch::new(1),
            message: ReshareWire::Request,
        };
        let _ = deliver(m, 1_000, joiner, request);
        let resent = m.handle(Time(PHASE_US), MemberInput::Timer(MemberTimer::EpochResend));
        assert_eq!(invites(&sent_to(&resent, joiner)), 0);
    }
    // Restarted (a fresh seed, no transition), it asks every genesis member
    // for an invitation at once, and again a phase length later.
    let (mut j, out_j) = fx.joiner(joiner, 0x55);
    assert_eq!(j.changing_to(), None);
    for d in 0..4 {
        let asked = sent_to(&out_j, d);
        assert!(
            matches!(
                asked[..],
                [EpochMessage::HandoffRequest { epoch }] if epoch == Epoch::new(1)
            ),
            "to {d}: {asked:?}"
        );
    }
    assert!(out_j.iter().any(|o| matches!(
        o,
        MemberOutput::Effect(beacon::effect::Effect::SetTimer {
            timer: MemberTimer::EpochResend,
            ..
        })
    )));
    // Each old member answers with its invitation; the joiner needs f + 1 = 2.
    let mut answers = Vec::new();
    for (i, m) in [(0, &mut a), (1, &mut b)] {
        let out = deliver(
            m,
            2 * PHASE_US,
            joiner,
            EpochMessage::HandoffRequest {
                epoch: Epoch::new(1),
            },
        );
        let to_joiner = sent_to(&out, joiner);
        assert_eq!(invites(&to_joiner), 1, "old member {i}: {to_joiner:?}");
        answers.extend(to_joiner.into_iter().map(|m| (i, m)));
    }
    // A request for an epoch no change is under way to gets nothing.
    let (mut c, _) = fx.old_member(2);
    let outsider = deliver(
        &mut c,
        0,
        6,
        EpochMessage::HandoffRequest {
            epoch: Epoch::new(2),
        },
    );
    assert_eq!(invites(&sent_to(&outsider, 6)), 0);
    let mut it = answers.into_iter();
    let (first, invite) = it.next().unwrap();
    let _ = deliver(&mut j, 2 * PHASE_US, first, invite);
    assert_eq!(j.changing_to(), None, "one invitation is not enough");
    let (second, invite) = it.next().unwrap();
    let _ = deliver(&mut j, 2 * PHASE_US, second, invite);
    assert_eq!(
        j.changing_to(),
        Some(Epoch::new(1)),
        "the joiner takes part in the change again"
    );
}
