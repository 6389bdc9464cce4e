//! The one disk contract (`consensus::disk`) in both drivers: a member's
//! durable writes applied to the node's store and to the simulator's disk,
//! a crash between two of them, and the members restored from each.

use beacon::dkg::session::SessionMessage;
use beacon::dkg::{DkgOutput, DkgTiming};
use beacon::effect::Effect;
use beacon::memo::Memo;
use beacon::{MinSig, NodeIndex, Time};
use consensus::disk::{persist, write_kind, DealingSeed, Disk, DiskWrite};
use consensus::epoch::{Directory, EpochView, MemberIdentity};
use consensus::{
    DirectoryIndex, DkgParams, Envelope, Member, MemberInput, MemberOutput, MemberTimer,
    ReplicaConfig, SignedVotes,
};
use node::store::Store;
use sim::disk::SimDisk;

type S = MinSig;

const MEMBERS: u32 = 4;

/// Member 0's seed: the one its DKG deals from.
const DEALING_SEED: [u8; 32] = [0x5e; 32];

fn directory() -> Directory {
    let seeds: Vec<[u8; 32]> = (0..MEMBERS).map(|i| [i as u8 + 1; 32]).collect();
    Directory::derived::<S>(&seeds)
}

fn identity(i: u32) -> MemberIdentity {
    let seed = [i as u8 + 1; 32];
    MemberIdentity::new(
        DirectoryIndex::new(i),
        consensus::member_key(&seed),
        consensus::consensus_key(&seed),
        directory(),
    )
}

fn config() -> ReplicaConfig {
    ReplicaConfig::new(MEMBERS, 0).unwrap()
}

/// The genesis DKG run of the members.
fn dkg_config() -> beacon::dkg::DkgConfig {
    config()
        .dkg_config([35; 32], &DkgParams::default())
        .unwrap()
}

/// The mark of the dealing seed among `outputs`' writes.
fn dealing_mark(outputs: &[MemberOutput<S>]) -> DealingSeed {
    outputs
        .iter()
        .find_map(|o| match o {
            MemberOutput::Persist(DiskWrite::KeepDealingSeed(mark)) => Some(*mark),
            _ => None,
        })
        .expect("the genesis DKG marks its dealing seed")
}

/// Genesis members 0..4 run the DKG (member 0 from `DEALING_SEED`) over
/// the shared in-memory network ([`consensus::corpus::run_genesis_dkg`]);
/// returns member 0 and the outputs of the input that completed its DKG.
fn genesis_dkg() -> (Member<S>, Vec<MemberOutput<S>>) {
    let config = config();
    let dkg = dkg_config();
    let memo = Memo::shared();
    let mut members: Vec<Member<S>> = (0..MEMBERS)
        .map(|i| {
            let seed = if i == 0 { DEALING_SEED } else { [i as u8; 32] };
            Member::new(
                config.clone(),
                dkg.clone(),
                identity(i),
                seed,
                memo.clone(),
                None,
            )
            .unwrap()
        })
        .collect();
    let out = consensus::corpus::run_genesis_dkg(&mut members, 0).expect("the DKG ends");
    (members.swap_remove(0), out)
}

/// Carries out `outputs`' durable writes on `disk` in order, as a driver
/// does, and crashes right after the `after`-th: returns the kinds of the
/// writes made and of those the crash prevented.
fn write_then_crash<D: Disk<S>>(
    member: &mut Member<S>,
    outputs: &[MemberOutput<S>],
    disk: &mut D,
    after: usize,
) -> (Vec<&'static str>, Vec<&'static str>)
where
    D::Error: std::fmt::Debug,
{
    let kinds: Vec<&'static str> = outputs.iter().filter_map(write_kind).collect();
    let mut made = 0;
    for o in outputs {
        if made == after {
            break;
        }
        if persist(member, o, disk).unwrap() {
            made += 1;
        }
    }
    let (written, lost) = kinds.split_at(made);
    (written.to_vec(), lost.to_vec())
}

/// Member 0's two disks as they stood when its DKG dealt: the node's data
/// directory (its seed stored before) and the simulator's disk, both with
/// `DEALING_SEED`.
fn dealing_disks() -> (tempfile::TempDir, Store, SimDisk<S>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("member.seed"), DEALING_SEED).unwrap();
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    (dir, store, SimDisk::new(DEALING_SEED))
}

/// What a restarted member reads from a disk: keys, vote record, seed and
/// the mark of the seed that dealt the keys.
struct Restored {
    keys: Option<DkgOutput<S>>,
    votes: Vec<SignedVotes<S>>,
    seed: [u8; 32],
    dealing: Option<DealingSeed>,
}

impl Restored {
    /// What the node reads from its data directory.
    fn from_store(store: &Store) -> Self {
        Restored {
            keys: store.load_dkg().unwrap(),
            votes: store.load_votes().unwrap(),
            seed: store.member_seed().unwrap(),
            dealing: store.dealing_seed().unwrap(),
        }
    }

    /// What the simulator reads from its disk.
    fn from_sim(disk: &SimDisk<S>) -> Self {
        Restored {
            keys: disk.dkg.as_deref().cloned(),
            votes: disk.votes.clone(),
            seed: disk.seed(),
            dealing: disk.dealing_seed,
        }
    }

    /// The member restored from it, as both drivers restore one: started,
    /// then its first timer fired. Returns its outputs, each as its step
    /// line and, for a message, its encoding.
    fn run(self) -> Vec<(String, Vec<u8>)> {
        let keys = self.keys.expect("the keys were saved before the crash");
        let mut member = Member::<S>::restore_in(
            EpochView::genesis(config(), &directory()),
            consensus::RestoredParts {
                output: &keys,
                consensus: consensus::consensus_key(&[1; 32]),
                chain: Vec::new(),
                votes: self.votes,
                seed: self.seed,
                memo: Memo::disabled(),
                adversary: None,
            },
        )
        .unwrap()
        .with_identity(
            identity(0),
            DkgTiming::new(std::time::Duration::from_secs(1), 1),
        );
        if let Some(mark) = self.dealing {
            member = member.with_finished_dkg(dkg_config(), mark);
        }
        let mut out = member.handle(Time(1_000), MemberInput::Start);
        // Member 1 missed the DKG and asks for member 0's deal and shares.
        if let Some(mark) = self.dealing {
            out.extend(member.handle(
                Time(1_000),
                MemberInput::Message {
                    from: NodeIndex(1),
                    envelope: Envelope::Dkg(SessionMessage::Request {
                        attempt: mark.attempt,
                        wants: beacon::dkg::session::Wants {
                            deal: true,
                            shares: true,
                            certificate: true,
                        },
                    }),
                },
            ));
        }
        let timer = out.iter().find_map(|o| match o {
            MemberOutput::Effect(Effect::SetTimer { at, timer }) => Some((*at, *timer)),
            _ => None,
        });
        let (at, timer) = timer.expect("the restored replica sets a timer");
        out.extend(member.handle(at, MemberInput::Timer(timer)));
        out.iter()
            .map(|o| {
                let bytes = match o {
                    MemberOutput::Effect(e) => {
                        e.message().map(|m| m.encode().unwrap()).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                (o.to_string(), bytes)
            })
            .collect()
    }
}

/// A crash between "keys saved" and "seed replaced" at the end of the
/// genesis DKG: the node's store and the simulator's disk hold the same
/// (the keys, and the seed that dealt them: a dealer that restarted before
/// its keys were stored would deal the same deal again from it), and the
/// members restored from each give the same outputs for the same inputs.
#[test]
fn a_crash_between_keys_saved_and_seed_replaced_restarts_alike_in_both_drivers() {
    let (mut member, outputs) = genesis_dkg();
    let (dir, store, mut sim_disk) = dealing_disks();
    assert_eq!(store.member_seed().unwrap(), DEALING_SEED);

    let mut node_disk: &Store = &store;
    let node_writes = write_then_crash(&mut member, &outputs, &mut node_disk, 1);
    let sim_writes = write_then_crash(&mut member, &outputs, &mut sim_disk, 1);
    assert_eq!(node_writes, (vec!["keys"], vec!["dealing-seed"]));
    assert_eq!(sim_writes, node_writes);
    drop(store);

    // The node restarts: it reads its data directory again.
    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let (from_node, from_sim) = (Restored::from_store(&store), Restored::from_sim(&sim_disk));
    assert_eq!(from_node.dealing, None, "the crash came before the mark");
    assert_eq!(from_sim.dealing, None);
    assert_eq!(
        from_node.seed, DEALING_SEED,
        "the node kept the dealing seed"
    );
    assert_eq!(
        from_sim.seed, DEALING_SEED,
        "the simulator kept the dealing seed"
    );
    let node_out = from_node.run();
    let sim_out = from_sim.run();
    assert!(
        node_out.iter().any(|(_, bytes)| !bytes.is_empty()),
        "the restored member sends something: {node_out:?}"
    );
    assert_eq!(node_out, sim_out, "the same outputs from either disk");
}

/// A crash after the genesis DKG's writes, while the seed that dealt the
/// keys is kept (marked): both disks hold the keys, that seed and its mark;
/// the members restored from each rebuild their finished DKG session from
/// it and answer a member that asks for their deal and shares, alike. A
/// dealer restarted in that time used to answer nothing: the member that
/// asked never had its share (`sbft-beacon chaos`, seed 8).
#[test]
fn a_member_restarted_while_its_dealing_seed_is_kept_answers_alike_in_both_drivers() {
    let (mut member, outputs) = genesis_dkg();
    let (dir, store, mut sim_disk) = dealing_disks();
    let mut node_disk: &Store = &store;
    let node_writes = write_then_crash(&mut member, &outputs, &mut node_disk, 2);
    let sim_writes = write_then_crash(&mut member, &outputs, &mut sim_disk, 2);
    assert_eq!(node_writes, (vec!["keys", "dealing-seed"], vec![]));
    assert_eq!(sim_writes, node_writes);
    let mark = dealing_mark(&outputs);
    drop(store);

    let store = Store::open(dir.path(), 1 << 20).unwrap();
    let (from_node, from_sim) = (Restored::from_store(&store), Restored::from_sim(&sim_disk));
    assert_eq!(
        (from_node.seed, from_node.dealing),
        (DEALING_SEED, Some(mark))
    );
    assert_eq!(
        (from_sim.seed, from_sim.dealing),
        (DEALING_SEED, Some(mark))
    );
    let node_out = from_node.run();
    let sim_out = from_sim.run();
    let answers = node_out
        .iter()
        .filter(|(line, _)| line == "send dkg-broadcast to 1" || line == "send dkg-shares to 1")
        .count();
    assert_eq!(answers, 2, "its deal and member 1's shares: {node_out:?}");
    assert_eq!(node_out, sim_out, "the same outputs from either disk");
}

/// Once the time of the seed that dealt the genesis keys is over, both
/// disks replace it (and its mark), and the member deals from the one they
/// drew; before, they keep it.
#[test]
fn both_drivers_replace_the_dealing_seed_once_its_time_is_over() {
    let (mut member, outputs) = genesis_dkg();
    let (_dir, store, mut sim_disk) = dealing_disks();
    let mut node_disk: &Store = &store;
    let all = outputs.iter().filter_map(write_kind).count();
    assert_eq!(all, 2, "keys, then the mark of the dealing seed");
    write_then_crash(&mut member, &outputs, &mut node_disk, all);
    write_then_crash(&mut member, &outputs, &mut sim_disk, all);
    let mark = dealing_mark(&outputs);
    assert_eq!(store.member_seed().unwrap(), DEALING_SEED);
    assert_eq!(sim_disk.seed(), DEALING_SEED);
    assert!(store.load_dkg::<S>().unwrap().is_some());

    let resend = MemberInput::Timer(MemberTimer::EpochResend);
    let before = member.handle(Time(mark.until.0 - 1), resend.clone());
    assert!(before.iter().filter_map(write_kind).next().is_none());
    let after = member.handle(mark.until, resend);
    let kinds: Vec<_> = after.iter().filter_map(write_kind).collect();
    assert_eq!(kinds, ["seed"], "{after:?}");
    write_then_crash(&mut member, &after, &mut node_disk, 1);
    assert_ne!(store.member_seed().unwrap(), DEALING_SEED);
    assert_eq!(store.dealing_seed().unwrap(), None);
    write_then_crash(&mut member, &after, &mut sim_disk, 1);
    assert_ne!(sim_disk.seed(), DEALING_SEED);
    assert_eq!(sim_disk.dealing_seed, None);
    assert_eq!(sim_disk.generation(), 1);
}
