//! The tests of the store: the chain across reopening, the member seed, the
//! epoch record, the vote record (and its move out of the chain database),
//! transactions by digest, corrupt key material.

use super::{EpochRecord, EpochRecordError, Store, StoreError, VOTES, VOTES_KEY, VOTE_BLOCKS};
use crate::NodeError;
use beacon::{MinSig, Scheme};
use consensus::{Block, CommitCertificate, CommitPath, CommittedEntry, Height, SignedVotes, View};
use redb::{Database, ReadableDatabase as _};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

const TEST_CACHE: usize = 1 << 20;

fn entry(height: u64) -> Arc<CommittedEntry<MinSig>> {
    use beacon::Point as _;
    let block = Arc::new(Block {
        height: Height::new(height),
        parent: [0; 32],
        previous_beacon: Vec::new(),
        transactions: vec![height.to_be_bytes().to_vec()],
    });
    let sig = <MinSig as Scheme>::Signature::generator();
    Arc::new(CommittedEntry {
        certificate: CommitCertificate {
            height: Height::new(height),
            view: View::ZERO,
            digest: block.digest(),
            path: CommitPath::Fast,
            signature: sig,
            signers: beacon::multisig::SignerBitmap::new(4),
        },
        block,
        beacon: sig,
    })
}

#[test]
fn chain_survives_reopening_and_gaps_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert!(store.load_recent::<MinSig>(10).unwrap().is_empty());
        assert_eq!(store.latest_height().unwrap(), 0);
        assert!(store.load_dkg::<MinSig>().unwrap().is_none());
        store.append(&[entry(1), entry(2)]).unwrap();
        store.append(&[entry(3)]).unwrap();
    }
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    let chain = store.load_recent::<MinSig>(10).unwrap();
    assert_eq!(chain.len(), 3);
    assert_eq!(chain[2], entry(3));
    assert_eq!(store.latest_height().unwrap(), 3);
    let recent = store.load_recent::<MinSig>(2).unwrap();
    assert_eq!(recent, vec![entry(2), entry(3)]);
    store.append(&[entry(5)]).unwrap();
    assert!(matches!(
        store.load_recent::<MinSig>(10),
        Err(NodeError::Store(StoreError::OutOfPlace {
            height: 3,
            expected: 4
        }))
    ));
    // A joiner's store: the run above the gap, and its lowest height.
    store.append(&[entry(6)]).unwrap();
    assert_eq!(
        store.load_tail::<MinSig>(10).unwrap(),
        vec![entry(5), entry(6)]
    );
    assert_eq!(
        store
            .lowest_of_tail::<MinSig>()
            .unwrap()
            .map(|e| e.block.height.get()),
        Some(5)
    );
}

/// The member seed survives a restart (a node that restarts in the
/// middle of a DKG deals the same deal again), a replaced one is gone
/// for good, and a seed file of the wrong length is a clear error.
#[test]
fn the_member_seed_is_stored_until_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        store.member_seed().unwrap()
    };
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(
        store.member_seed().unwrap(),
        first,
        "read back after a restart"
    );
    let next = store.replace_seed().unwrap();
    assert_ne!(next, first);
    assert_eq!(store.member_seed().unwrap(), next);
    std::fs::write(dir.path().join("member.seed"), [7u8; 31]).unwrap();
    let err = store.member_seed().unwrap_err().to_string();
    assert!(err.contains("not a 32-byte seed"), "{err}");
}

/// The mark of the seed that dealt the genesis keys survives a restart with
/// that seed, goes with it when the seed is replaced, and a mark that does
/// not decode is a clear error.
#[test]
fn the_dealing_seed_mark_lives_as_long_as_the_seed_it_marks() {
    let dir = tempfile::tempdir().unwrap();
    let mark = consensus::disk::DealingSeed {
        attempt: 1,
        until: beacon::Time(42_000_000),
    };
    let seed = {
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert_eq!(store.dealing_seed().unwrap(), None);
        let seed = store.member_seed().unwrap();
        store.keep_dealing_seed(&mark).unwrap();
        seed
    };
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.dealing_seed().unwrap(), Some(mark), "after a restart");
    assert_eq!(store.member_seed().unwrap(), seed, "with the seed it marks");
    store.replace_seed().unwrap();
    assert_eq!(store.dealing_seed().unwrap(), None, "gone with its seed");
    store.keep_dealing_seed(&mark).unwrap();
    std::fs::write(dir.path().join("member.seed.dealing"), b"{").unwrap();
    let err = store.dealing_seed().unwrap_err().to_string();
    assert!(err.contains("not the mark of a dealing seed"), "{err}");
}

#[test]
fn the_epoch_record_replaces_the_genesis_key_material() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert!(store.load_epoch::<MinSig>().unwrap().is_none());
    let config = consensus::ReplicaConfig::new(4, 0).unwrap();
    let output = (*consensus::corpus::honest_dkg::<MinSig>(&config, 1)[0]).clone();
    store.save_dkg(&output).unwrap();
    let record = EpochRecord {
        number: consensus::Epoch::new(1),
        members: (0..4).map(consensus::DirectoryIndex::new).collect(),
        config,
        consensus: Vec::new(),
        start: 11,
        retired: false,
    };
    store.save_epoch(&record, Some(&output)).unwrap();
    assert!(
        store.load_dkg::<MinSig>().unwrap().is_none(),
        "genesis shares erased"
    );
    let (back, keys) = store.load_epoch::<MinSig>().unwrap().unwrap();
    assert_eq!(back, record);
    assert_eq!(keys.unwrap().encode().unwrap(), output.encode().unwrap());
    let written = std::fs::read(dir.path().join("epoch.key")).unwrap();
    assert!(written.starts_with(super::EPOCH_FILE_HEADER));
    // A leaver keeps the record and no shares.
    let left = EpochRecord {
        retired: true,
        ..record.clone()
    };
    store.save_epoch::<MinSig>(&left, None).unwrap();
    let (back, keys) = store.load_epoch::<MinSig>().unwrap().unwrap();
    assert!(back.retired && keys.is_none());
    // A record in the bincode of earlier builds still reads.
    let legacy = beacon::wire::encode(&super::EpochFile {
        record: record.clone(),
        output: Some(output.encode().unwrap()),
    })
    .unwrap();
    std::fs::write(dir.path().join("epoch.key"), &legacy).unwrap();
    let (back, keys) = store.load_epoch::<MinSig>().unwrap().unwrap();
    assert_eq!(back, record);
    assert_eq!(keys.unwrap().encode().unwrap(), output.encode().unwrap());
    // A file that is not a record is an error, not a panic.
    std::fs::write(dir.path().join("epoch.key"), b"garbage").unwrap();
    assert!(matches!(
        store.load_epoch::<MinSig>(),
        Err(NodeError::Store(StoreError::EpochRecord {
            source: EpochRecordError::Bincode(_),
            ..
        }))
    ));
}

#[test]
fn the_vote_record_survives_reopening() {
    use beacon::Point as _;
    use consensus::messages::PrepareCertificate;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert!(store.load_votes::<MinSig>().unwrap().is_empty());
    let mut record = SignedVotes::<MinSig>::new(Height::new(7));
    record.votes.insert(View::ZERO, [1; 32]);
    record.commits.insert(View::new(1), [2; 32]);
    record.prepared = Some(PrepareCertificate {
        view: View::new(1),
        digest: [2; 32],
        signature: <MinSig as Scheme>::Signature::generator(),
        signers: beacon::multisig::SignerBitmap::new(4),
    });
    let block = Arc::new(consensus::Block {
        height: Height::new(7),
        parent: [3; 32],
        previous_beacon: vec![4; 48],
        transactions: vec![vec![5; 100]],
    });
    record.votes.insert(View::new(2), block.digest());
    record.blocks.insert(block.digest(), block.clone());
    store.save_votes(&[record.clone()]).unwrap();
    drop(store);
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![record.clone()]);
    // A record that no longer names the block drops its body.
    let mut next = SignedVotes::<MinSig>::new(Height::new(8));
    next.votes.insert(View::ZERO, block.digest());
    store.save_votes(&[next.clone()]).unwrap();
    assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![next]);
}

/// Writes `record` where versions before `votes.redb` kept it.
fn put_record_in_chain(chain: &Database, record: &SignedVotes<MinSig>) {
    let bytes = beacon::wire::encode(&vec![record.clone()]).unwrap();
    let tx = chain.begin_write().unwrap();
    tx.open_table(VOTES)
        .unwrap()
        .insert(VOTES_KEY, bytes.as_slice())
        .unwrap();
    tx.commit().unwrap();
}

#[test]
fn a_vote_record_written_before_block_bodies_still_loads() {
    // The encoding of the record itself is unchanged: bodies live in
    // their own table, absent from stores written by older versions, which
    // also kept the record in `chain.redb`.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    let mut record = SignedVotes::<MinSig>::new(Height::new(7));
    record.votes.insert(View::ZERO, [1; 32]);
    store
        .db
        .with(|db| {
            put_record_in_chain(db, &record);
            Ok(())
        })
        .unwrap();
    drop(store);
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![record]);
}

#[test]
fn a_vote_record_in_the_chain_database_moves_to_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let block = Arc::new(Block {
        height: Height::new(7),
        parent: [3; 32],
        previous_beacon: vec![4; 48],
        transactions: vec![vec![5; 100]],
    });
    let mut old = SignedVotes::<MinSig>::new(Height::new(7));
    old.votes.insert(View::ZERO, block.digest());
    old.blocks.insert(block.digest(), block.clone());
    // The layout of earlier versions: record and bodies in chain.redb.
    {
        let db = Database::create(dir.path().join("chain.redb")).unwrap();
        put_record_in_chain(&db, &old);
        let tx = db.begin_write().unwrap();
        let body = beacon::wire::encode(block.as_ref()).unwrap();
        tx.open_table(VOTE_BLOCKS)
            .unwrap()
            .insert(&block.digest(), body.as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![old.clone()]);
    store
        .db
        .with(|db| {
            let tx = db.begin_read().unwrap();
            assert!(tx.open_table(VOTES).is_err(), "moved out of chain.redb");
            Ok(())
        })
        .unwrap();
    // A newer record in votes.redb wins over a stale copy left in
    // chain.redb by a crash between the copy and the removal.
    let mut newer = SignedVotes::<MinSig>::new(Height::new(8));
    newer.votes.insert(View::ZERO, [9; 32]);
    store.save_votes(&[newer.clone()]).unwrap();
    store
        .db
        .with(|db| {
            put_record_in_chain(db, &old);
            Ok(())
        })
        .unwrap();
    drop(store);
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![newer]);
}

#[test]
fn transactions_are_indexed_by_their_digest() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    store.append(&[entry(1), entry(2)]).unwrap();
    let id: [u8; 32] = Sha256::digest(2u64.to_be_bytes()).into();
    assert_eq!(store.transaction_height(&id).unwrap(), Some(2));
    assert_eq!(store.transaction_height(&[7; 32]).unwrap(), None);
}

#[test]
fn corrupt_key_material_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    std::fs::write(dir.path().join("dkg.key"), b"not key material").unwrap();
    let e = store.load_dkg::<MinSig>().unwrap_err();
    assert!(
        matches!(&e, NodeError::Store(StoreError::KeyMaterial { path, .. }) if path.ends_with("dkg.key")),
        "{e:?}"
    );
    assert!(e.to_string().contains("is not valid key material"), "{e}");
}

/// An epoch record written before a protocol setting existed (here: without
/// `beacon_shares` and `max_block_bytes`, as a build before them wrote its
/// JSON) reads, with the settings' defaults. Before the v2 header, records were
/// bincode, and a build with one more setting failed to read them.
#[test]
fn an_epoch_record_without_a_later_setting_reads_with_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    let config = consensus::ReplicaConfig::new(4, 0).unwrap();
    let output = (*consensus::corpus::honest_dkg::<MinSig>(&config, 1)[0]).clone();
    let record = EpochRecord {
        number: consensus::Epoch::new(2),
        members: [0, 1, 2, 4].map(consensus::DirectoryIndex::new).to_vec(),
        config,
        consensus: Vec::new(),
        start: 40,
        retired: false,
    };
    store.save_epoch(&record, Some(&output)).unwrap();
    let path = dir.path().join("epoch.key");
    let written = std::fs::read(&path).unwrap();
    let json = written.strip_prefix(super::EPOCH_FILE_HEADER).unwrap();
    let mut file: serde_json::Value = serde_json::from_slice(json).unwrap();
    let settings = file["record"]["config"].as_object_mut().unwrap();
    assert!(settings.remove("beacon_shares").is_some());
    assert!(settings.remove("max_block_bytes").is_some());
    let mut older = super::EPOCH_FILE_HEADER.to_vec();
    older.extend(serde_json::to_vec(&file).unwrap());
    std::fs::write(&path, older).unwrap();
    let (back, keys) = store.load_epoch::<MinSig>().unwrap().unwrap();
    assert_eq!(back, record, "the defaults are those of ReplicaConfig::new");
    assert!(keys.is_some());
}

#[test]
fn a_kept_proposal_survives_reopening_until_erased() {
    use beacon::reshare::MemberId;
    use consensus::epoch::EpochChange;
    let dir = tempfile::tempdir().unwrap();
    let change = EpochChange {
        epoch: consensus::Epoch::new(2),
        members: vec![MemberId([1; 32]), MemberId([2; 32])],
        c: 1,
        beacon_threshold: 0,
        consensus_keys: Vec::new(),
    };
    {
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert_eq!(store.load_proposal().unwrap(), None);
        store.save_proposal(&change).unwrap();
    }
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert_eq!(store.load_proposal().unwrap(), Some(change));
    store.erase_proposal().unwrap();
    store.erase_proposal().unwrap();
    assert_eq!(store.load_proposal().unwrap(), None);
    std::fs::write(dir.path().join("proposal.json"), "{").unwrap();
    assert!(matches!(
        store.load_proposal(),
        Err(NodeError::Store(StoreError::Proposal { .. }))
    ));
}

/// What a dealer dealt in a change, with the old share it dealt from.
fn retained_deal() -> consensus::disk::RetainedDeal<MinSig> {
    use beacon::Point as _;
    let ids: Vec<beacon::reshare::MemberId> = (0..4u8)
        .map(|i| beacon::reshare::MemberId([i; 32]))
        .collect();
    let point = <MinSig as Scheme>::PublicKey::generator();
    let invitation = consensus::epoch::Invitation {
        change: consensus::epoch::EpochChange {
            epoch: consensus::Epoch::new(3),
            members: ids.clone(),
            c: 0,
            beacon_threshold: 2,
            consensus_keys: Vec::new(),
        },
        decided_at: Height::new(40),
        reshare: beacon::reshare::ReshareSettings {
            epoch: 3,
            old_members: ids.clone(),
            old_public_polynomial: Arc::new(vec![point; 2]),
            new_members: ids,
            new_threshold: 2,
            phase_timeout_us: 1_000_000,
        }
        .build()
        .unwrap(),
    };
    consensus::disk::RetainedDeal {
        invitation,
        old_share: beacon::threshold::SecretShare::new(
            beacon::NodeIndex(1),
            beacon::Scalar::from_u64(7),
        ),
        until: beacon::Time(90_000_000),
    }
}

/// A dealer's retained deals survive a restart, one file per change (a
/// later change keeps the earlier one's), private to the node's user, until
/// each one is erased (twice is fine); one that does not decode is a clear
/// error.
#[test]
fn the_retained_deals_live_until_their_erasure() {
    let dir = tempfile::tempdir().unwrap();
    let deal = retained_deal();
    let mut later = retained_deal();
    later.invitation.change.epoch = consensus::Epoch::new(4);
    later.until = beacon::Time(120_000_000);
    {
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert!(store.retained_deals::<MinSig>().unwrap().is_empty());
        store.keep_deal(&later).unwrap();
        store.keep_deal(&deal).unwrap();
    }
    let store = Store::open(dir.path(), TEST_CACHE).unwrap();
    assert!(
        store.retained_deals::<MinSig>().unwrap() == vec![deal.clone(), later.clone()],
        "both after a restart, by epoch"
    );
    let path = dir.path().join("member.deal.3.retained");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "it holds a share");
    }
    store.erase_deal(consensus::Epoch::new(3)).unwrap();
    assert!(
        store.retained_deals::<MinSig>().unwrap() == vec![later.clone()],
        "the earlier one erased, the later one kept"
    );
    store.erase_deal(consensus::Epoch::new(3)).unwrap();
    store.erase_deal(consensus::Epoch::new(4)).unwrap();
    assert!(
        store.retained_deals::<MinSig>().unwrap().is_empty(),
        "erased"
    );
    store.keep_deal(&deal).unwrap();
    std::fs::write(&path, b"\x01\x02").unwrap();
    let err = store.retained_deals::<MinSig>().unwrap_err().to_string();
    assert!(err.contains("is not a retained deal"), "{err}");
}
