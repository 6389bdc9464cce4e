//! Durable state of a node: the DKG result in a key file only the owner can read
//! (`dkg.key`, mode 0600), every finalized height (block, commit proof and
//! beacon) in an embedded redb database (`chain.redb`), keyed by height, and in
//! a database of its own (`votes.redb`) the record of what the replica signed
//! at the heights not yet finalized (crash safety of votes: written, fsync'd,
//! before the votes leave the node). The two are apart so that a vote, which
//! the round waits for, never waits for the write lock and fsync of a
//! finalized height, which it does not (stores written before keep the
//! record in `chain.redb`: it moves to `votes.redb` when first opened).
//! After a change of members (`consensus::epoch`), the epoch the node is in
//! and its key material of that epoch live in `epoch.key` (mode 0600), which
//! then takes the place of `dkg.key`.
//! The member's seed, which its dealings derive from, lives in `member.seed`
//! (mode 0600) from before its first dealing until the keys it dealt are
//! stored; then a fresh one replaces it.

use crate::identity::write_private;
use crate::NodeError;
use beacon::dkg::DkgOutput;
use beacon::Scheme;
use consensus::{CommittedEntry, ReplicaConfig, SignedVotes};
use redb::{Database, ReadableDatabase as _, ReadableTable as _, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CHAIN: TableDefinition<u64, &[u8]> = TableDefinition::new("chain");
/// Where each committed transaction (by SHA-256) is: its height.
const TRANSACTIONS: TableDefinition<&[u8; 32], u64> = TableDefinition::new("transactions");
/// The replica's last record of what it signed (one row, [`VOTES_KEY`]).
const VOTES: TableDefinition<&str, &[u8]> = TableDefinition::new("votes");
const VOTES_KEY: &str = "signed";
/// The bodies of the blocks that record names, each once, by digest.
const VOTE_BLOCKS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("vote_blocks");

/// The epoch a node is in after a change of members: what a restarted node
/// resumes instead of the genesis epoch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// The epoch number (1 for the first change).
    pub number: u64,
    /// Its members: directory indices (`[[peers]]` indices), by epoch index.
    pub members: Vec<u32>,
    /// Its replica configuration.
    pub config: ReplicaConfig,
    /// The first height of the epoch.
    pub start: u64,
    /// Whether this node is not a member of it (it left, and erased its
    /// shares): it holds no key material.
    pub retired: bool,
}

/// `epoch.key`: the epoch, and this node's key material in it (encoded
/// [`DkgOutput`]; none once retired).
#[derive(Serialize, Deserialize)]
struct EpochFile {
    record: EpochRecord,
    output: Option<Vec<u8>>,
}

/// A node's store.
pub struct Store {
    dir: PathBuf,
    db: Database,
    votes: Database,
}

fn db_err(e: impl std::fmt::Display) -> NodeError {
    NodeError::Store(e.to_string())
}

/// Page cache of the vote database (it holds one record and a few blocks).
const VOTES_CACHE_BYTES: usize = 1 << 20;

/// Moves a vote record that a store written before `votes.redb` existed kept
/// in `chain.redb` (with its block bodies) into `votes`, unless `votes`
/// already has one: copied durably first, then removed from `chain`, so that
/// a crash in between leaves a copy in `votes`, which wins when opened again.
fn move_votes(chain: &Database, votes: &Database) -> Result<(), NodeError> {
    let (record, bodies) = {
        let tx = chain.begin_read().map_err(db_err)?;
        let table = match tx.open_table(VOTES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(db_err(e)),
        };
        let Some(record) = table.get(VOTES_KEY).map_err(db_err)? else {
            return Ok(());
        };
        let record = record.value().to_vec();
        let mut bodies = Vec::new();
        if let Ok(t) = tx.open_table(VOTE_BLOCKS) {
            for row in t.iter().map_err(db_err)? {
                let (k, v) = row.map_err(db_err)?;
                bodies.push((*k.value(), v.value().to_vec()));
            }
        }
        (record, bodies)
    };
    let tx = votes.begin_write().map_err(db_err)?;
    {
        let mut table = tx.open_table(VOTES).map_err(db_err)?;
        if table.get(VOTES_KEY).map_err(db_err)?.is_none() {
            table.insert(VOTES_KEY, record.as_slice()).map_err(db_err)?;
            let mut blocks = tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
            for (digest, body) in &bodies {
                blocks.insert(digest, body.as_slice()).map_err(db_err)?;
            }
        }
    }
    tx.commit().map_err(db_err)?;
    let tx = chain.begin_write().map_err(db_err)?;
    tx.delete_table(VOTES).map_err(db_err)?;
    tx.delete_table(VOTE_BLOCKS).map_err(db_err)?;
    tx.commit().map_err(db_err)
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, with a page cache of
    /// `cache_bytes` (`[limits] store_cache_bytes`).
    pub fn open(dir: &Path, cache_bytes: usize) -> Result<Self, NodeError> {
        std::fs::create_dir_all(dir)
            .map_err(|e| NodeError::Io(format!("creating {}: {e}", dir.display())))?;
        // redb's page cache defaults to 1 GiB; the node reads little back.
        let db = redb::Builder::new()
            .set_cache_size(cache_bytes)
            .create(dir.join("chain.redb"))
            .map_err(db_err)?;
        let tx = db.begin_write().map_err(db_err)?;
        tx.open_table(CHAIN).map_err(db_err)?;
        tx.open_table(TRANSACTIONS).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        let votes = redb::Builder::new()
            .set_cache_size(cache_bytes.min(VOTES_CACHE_BYTES))
            .create(dir.join("votes.redb"))
            .map_err(db_err)?;
        let tx = votes.begin_write().map_err(db_err)?;
        tx.open_table(VOTES).map_err(db_err)?;
        tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        move_votes(&db, &votes)?;
        Ok(Store {
            dir: dir.to_path_buf(),
            db,
            votes,
        })
    }

    fn key_path(&self) -> PathBuf {
        self.dir.join("dkg.key")
    }

    /// The persisted DKG result, if any (checked on decode).
    pub fn load_dkg<S: Scheme>(&self) -> Result<Option<DkgOutput<S>>, NodeError> {
        let path = self.key_path();
        match std::fs::read(&path) {
            Ok(bytes) => DkgOutput::decode(&bytes).map(Some).map_err(|e| {
                NodeError::Store(format!("{} is not valid key material: {e}", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(NodeError::Io(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Persists the DKG result (mode 0600, atomically).
    pub fn save_dkg<S: Scheme>(&self, output: &DkgOutput<S>) -> Result<(), NodeError> {
        let bytes = output
            .encode()
            .map_err(|e| NodeError::Store(e.to_string()))?;
        write_private(&self.key_path(), &bytes)
    }

    fn seed_path(&self) -> PathBuf {
        self.dir.join("member.seed")
    }

    /// The member's seed (`member.seed`, mode 0600): the one stored, or a
    /// fresh random one, stored durably before it is returned (so before
    /// anything dealt from it leaves the node). A node that restarts in the
    /// middle of a DKG or a change deals the same deals from it again.
    pub fn member_seed(&self) -> Result<[u8; 32], NodeError> {
        let path = self.seed_path();
        match std::fs::read(&path) {
            Ok(bytes) => bytes.as_slice().try_into().map_err(|_| {
                NodeError::Store(format!(
                    "{} holds {} bytes, not a 32-byte seed",
                    path.display(),
                    bytes.len()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.replace_seed(),
            Err(e) => Err(NodeError::Io(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Stores a fresh random member seed in place of the last one, durably,
    /// and returns it: once the keys the last one dealt are stored, nothing
    /// needs it, and erasing it keeps those dealings secret from whoever
    /// later reads this disk.
    pub fn replace_seed(&self) -> Result<[u8; 32], NodeError> {
        use rand::{rngs::OsRng, RngCore as _};
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        write_private(&self.seed_path(), &seed)?;
        Ok(seed)
    }

    fn epoch_path(&self) -> PathBuf {
        self.dir.join("epoch.key")
    }

    /// The epoch this node switched to, with its key material in it (none
    /// when it retired), if it ever took part in a change of members.
    #[allow(clippy::type_complexity)]
    pub fn load_epoch<S: Scheme>(
        &self,
    ) -> Result<Option<(EpochRecord, Option<DkgOutput<S>>)>, NodeError> {
        let path = self.epoch_path();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(NodeError::Io(format!("reading {}: {e}", path.display()))),
        };
        let bad = |e: String| {
            NodeError::Store(format!(
                "{} is not a valid epoch record: {e}",
                path.display()
            ))
        };
        let file: EpochFile = beacon::wire::decode(&bytes).map_err(|e| bad(e.to_string()))?;
        let output = match &file.output {
            Some(b) => Some(DkgOutput::decode(b).map_err(|e| bad(e.to_string()))?),
            None => None,
        };
        if output.is_none() != file.record.retired {
            return Err(bad(
                "a member's record without key material, or a leaver's with it".into(),
            ));
        }
        Ok(Some((file.record, output)))
    }

    /// Persists the epoch this node switched to and its key material in it
    /// (none when it left: its shares are erased), atomically and durably,
    /// then erases the genesis key material: the old shares are of no use
    /// once the chain switched, and must not outlive the change.
    pub fn save_epoch<S: Scheme>(
        &self,
        record: &EpochRecord,
        output: Option<&DkgOutput<S>>,
    ) -> Result<(), NodeError> {
        let output = output
            .map(|o| o.encode().map_err(|e| NodeError::Store(e.to_string())))
            .transpose()?;
        let file = EpochFile {
            record: record.clone(),
            output,
        };
        let bytes = beacon::wire::encode(&file).map_err(db_err)?;
        write_private(&self.epoch_path(), &bytes)?;
        match std::fs::remove_file(self.key_path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(NodeError::Io(format!(
                "erasing {}: {e}",
                self.key_path().display()
            ))),
        }
    }

    /// Replaces the record of what the replica signed, durably (redb commits
    /// with fsync): it returns only once a crash can no longer lose it. The
    /// bodies of the blocks it names go into their own table in the same
    /// transaction, each written once (the record changes a few times per
    /// height; its block does not); bodies no longer named are dropped.
    pub fn save_votes<S: Scheme>(&self, record: &[SignedVotes<S>]) -> Result<(), NodeError> {
        let bytes = beacon::wire::encode(&record.to_vec()).map_err(db_err)?;
        let tx = self.votes.begin_write().map_err(db_err)?;
        {
            let mut table = tx.open_table(VOTES).map_err(db_err)?;
            table.insert(VOTES_KEY, bytes.as_slice()).map_err(db_err)?;
            let mut bodies = tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
            let named: std::collections::BTreeSet<[u8; 32]> = record
                .iter()
                .flat_map(|r| r.blocks.keys().copied())
                .collect();
            let mut stale = Vec::new();
            for row in bodies.iter().map_err(db_err)? {
                let digest = *row.map_err(db_err)?.0.value();
                if !named.contains(&digest) {
                    stale.push(digest);
                }
            }
            for digest in &stale {
                bodies.remove(digest).map_err(db_err)?;
            }
            for (digest, block) in record.iter().flat_map(|r| &r.blocks) {
                if bodies.get(digest).map_err(db_err)?.is_none() {
                    let body = beacon::wire::encode(block.as_ref()).map_err(db_err)?;
                    bodies.insert(digest, body.as_slice()).map_err(db_err)?;
                }
            }
        }
        tx.commit().map_err(db_err)
    }

    /// The last record of what the replica signed (empty when none), with the
    /// bodies of the blocks it names (a body must hash to its digest).
    pub fn load_votes<S: Scheme>(&self) -> Result<Vec<SignedVotes<S>>, NodeError> {
        let corrupt = |e: &dyn std::fmt::Display| {
            NodeError::Store(format!("the vote record is corrupt: {e}"))
        };
        let tx = self.votes.begin_read().map_err(db_err)?;
        let table = tx.open_table(VOTES).map_err(db_err)?;
        let Some(v) = table.get(VOTES_KEY).map_err(db_err)? else {
            return Ok(Vec::new());
        };
        let mut records: Vec<SignedVotes<S>> =
            beacon::wire::decode(v.value()).map_err(|e| corrupt(&e))?;
        let bodies = tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
        for record in &mut records {
            let named: Vec<[u8; 32]> = record.named().copied().collect();
            for digest in named {
                let Some(body) = bodies.get(&digest).map_err(db_err)? else {
                    continue;
                };
                let block: consensus::Block =
                    beacon::wire::decode(body.value()).map_err(|e| corrupt(&e))?;
                if block.digest() != digest {
                    return Err(corrupt(&"a block body does not match its digest"));
                }
                record.blocks.insert(digest, Arc::new(block));
            }
        }
        Ok(records)
    }

    /// The most recent `count` finalized heights in order (what a restarted
    /// replica keeps in memory); an undecodable entry or a gap is an error.
    pub fn load_recent<S: Scheme>(
        &self,
        count: usize,
    ) -> Result<Vec<Arc<CommittedEntry<S>>>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(CHAIN).map_err(db_err)?;
        let mut out = Vec::new();
        for row in table.iter().map_err(db_err)?.rev().take(count) {
            let (k, v) = row.map_err(db_err)?;
            let height = k.value();
            let entry: CommittedEntry<S> = beacon::wire::decode(v.value())
                .map_err(|e| NodeError::Store(format!("height {height}: {e}")))?;
            let expected = out.last().map_or(height, |next: &Arc<CommittedEntry<S>>| {
                next.block.height.get().saturating_sub(1)
            });
            if entry.block.height.get() != height || height != expected || height == 0 {
                return Err(NodeError::Store(format!(
                    "height {height} is out of place (expected {expected})"
                )));
            }
            out.push(Arc::new(entry));
        }
        out.reverse();
        Ok(out)
    }

    /// The most recent finalized heights, at most `count`, that follow each
    /// other without a gap, in order: what a member that joined a running
    /// network resumes from while it still backfills older heights (below a
    /// gap). An undecodable entry is an error.
    pub fn load_tail<S: Scheme>(
        &self,
        count: usize,
    ) -> Result<Vec<Arc<CommittedEntry<S>>>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(CHAIN).map_err(db_err)?;
        let mut out: Vec<Arc<CommittedEntry<S>>> = Vec::new();
        for row in table.iter().map_err(db_err)?.rev().take(count) {
            let (k, v) = row.map_err(db_err)?;
            let height = k.value();
            if out
                .last()
                .is_some_and(|next| next.block.height.get() != height.saturating_add(1))
            {
                break;
            }
            let entry: CommittedEntry<S> = beacon::wire::decode(v.value())
                .map_err(|e| NodeError::Store(format!("height {height}: {e}")))?;
            if entry.block.height.get() != height {
                return Err(NodeError::Store(format!("height {height} is out of place")));
            }
            out.push(Arc::new(entry));
        }
        out.reverse();
        Ok(out)
    }

    /// The lowest height of the run of heights that ends at the last one
    /// (the first below it is missing, or it is height 1), if any is stored.
    pub fn lowest_of_tail<S: Scheme>(&self) -> Result<Option<CommittedEntry<S>>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(CHAIN).map_err(db_err)?;
        let mut lowest: Option<u64> = None;
        for row in table.iter().map_err(db_err)?.rev() {
            let (k, _) = row.map_err(db_err)?;
            let height = k.value();
            if lowest.is_some_and(|l| l != height.saturating_add(1)) {
                break;
            }
            lowest = Some(height);
        }
        drop(table);
        drop(tx);
        match lowest {
            Some(h) => self.get(h),
            None => Ok(None),
        }
    }

    /// The last finalized height stored (0 if none).
    pub fn latest_height(&self) -> Result<u64, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(CHAIN).map_err(db_err)?;
        let last = table.last().map_err(db_err)?.map_or(0, |(k, _)| k.value());
        Ok(last)
    }

    /// The height at which the transaction with SHA-256 `id` committed, if any.
    pub fn transaction_height(&self, id: &[u8; 32]) -> Result<Option<u64>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(TRANSACTIONS).map_err(db_err)?;
        Ok(table.get(id).map_err(db_err)?.map(|v| v.value()))
    }

    /// The stored entry of `height`, if any.
    pub fn get<S: Scheme>(&self, height: u64) -> Result<Option<CommittedEntry<S>>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(CHAIN).map_err(db_err)?;
        let Some(v) = table.get(height).map_err(db_err)? else {
            return Ok(None);
        };
        beacon::wire::decode(v.value())
            .map(Some)
            .map_err(|e| NodeError::Store(format!("height {height}: {e}")))
    }

    /// Appends finalized heights, and the index of their transactions, in one
    /// durable transaction.
    pub fn append<S: Scheme>(&self, entries: &[Arc<CommittedEntry<S>>]) -> Result<(), NodeError> {
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut table = tx.open_table(CHAIN).map_err(db_err)?;
            let mut index = tx.open_table(TRANSACTIONS).map_err(db_err)?;
            for e in entries {
                let bytes = beacon::wire::encode(e.as_ref()).map_err(db_err)?;
                table
                    .insert(e.block.height.get(), bytes.as_slice())
                    .map_err(db_err)?;
                for t in &e.block.transactions {
                    let id: [u8; 32] = Sha256::digest(t).into();
                    index.insert(&id, e.block.height.get()).map_err(db_err)?;
                }
            }
        }
        tx.commit().map_err(db_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use beacon::MinSig;
    use consensus::{Block, CommitCertificate, CommitPath, Height, View};

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
            Err(NodeError::Store(_))
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

    #[test]
    fn the_epoch_record_replaces_the_genesis_key_material() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert!(store.load_epoch::<MinSig>().unwrap().is_none());
        let config = consensus::ReplicaConfig::new(4, 0).unwrap();
        let output = (*consensus::corpus::honest_dkg::<MinSig>(&config, 1)[0]).clone();
        store.save_dkg(&output).unwrap();
        let record = EpochRecord {
            number: 1,
            members: vec![0, 1, 2, 3],
            config,
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
        // A leaver keeps the record and no shares.
        let left = EpochRecord {
            retired: true,
            ..record
        };
        store.save_epoch::<MinSig>(&left, None).unwrap();
        let (back, keys) = store.load_epoch::<MinSig>().unwrap().unwrap();
        assert!(back.retired && keys.is_none());
        // A file that is not a record is an error, not a panic.
        std::fs::write(dir.path().join("epoch.key"), b"garbage").unwrap();
        assert!(matches!(
            store.load_epoch::<MinSig>(),
            Err(NodeError::Store(_))
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
        put_record_in_chain(&store.db, &record);
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
        let tx = store.db.begin_read().unwrap();
        assert!(tx.open_table(VOTES).is_err(), "moved out of chain.redb");
        drop(tx);
        // A newer record in votes.redb wins over a stale copy left in
        // chain.redb by a crash between the copy and the removal.
        let mut newer = SignedVotes::<MinSig>::new(Height::new(8));
        newer.votes.insert(View::ZERO, [9; 32]);
        store.save_votes(&[newer.clone()]).unwrap();
        put_record_in_chain(&store.db, &old);
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
        assert!(matches!(
            store.load_dkg::<MinSig>(),
            Err(NodeError::Store(_))
        ));
    }
}
