//! Durable state of a node: the DKG result in a key file only the owner can read
//! (`dkg.key`, mode 0600), every finalized height (block, commit proof and
//! beacon) in an embedded redb database (`chain.redb`), keyed by height, and in
//! the same database the record of what the replica signed at the heights not
//! yet finalized (crash safety of votes: written, fsync'd, before the votes
//! leave the node).

use crate::identity::write_private;
use crate::NodeError;
use beacon::dkg::DkgOutput;
use beacon::Scheme;
use consensus::{CommittedEntry, SignedVotes};
use redb::{Database, ReadableDatabase as _, ReadableTable as _, TableDefinition};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const CHAIN: TableDefinition<u64, &[u8]> = TableDefinition::new("chain");
/// Where each committed transaction (by SHA-256) is: its height.
const TRANSACTIONS: TableDefinition<&[u8; 32], u64> = TableDefinition::new("transactions");
/// The replica's last record of what it signed (one row, [`VOTES_KEY`]).
const VOTES: TableDefinition<&str, &[u8]> = TableDefinition::new("votes");
const VOTES_KEY: &str = "signed";

/// A node's store.
pub struct Store {
    dir: PathBuf,
    db: Database,
}

fn db_err(e: impl std::fmt::Display) -> NodeError {
    NodeError::Store(e.to_string())
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
        tx.open_table(VOTES).map_err(db_err)?;
        tx.commit().map_err(db_err)?;
        Ok(Store {
            dir: dir.to_path_buf(),
            db,
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

    /// Replaces the record of what the replica signed, durably (redb commits
    /// with fsync): it returns only once a crash can no longer lose it.
    pub fn save_votes<S: Scheme>(&self, record: &[SignedVotes<S>]) -> Result<(), NodeError> {
        let bytes = beacon::wire::encode(&record.to_vec()).map_err(db_err)?;
        let tx = self.db.begin_write().map_err(db_err)?;
        {
            let mut table = tx.open_table(VOTES).map_err(db_err)?;
            table.insert(VOTES_KEY, bytes.as_slice()).map_err(db_err)?;
        }
        tx.commit().map_err(db_err)
    }

    /// The last record of what the replica signed (empty when none).
    pub fn load_votes<S: Scheme>(&self) -> Result<Vec<SignedVotes<S>>, NodeError> {
        let tx = self.db.begin_read().map_err(db_err)?;
        let table = tx.open_table(VOTES).map_err(db_err)?;
        let Some(v) = table.get(VOTES_KEY).map_err(db_err)? else {
            return Ok(Vec::new());
        };
        beacon::wire::decode(v.value())
            .map_err(|e| NodeError::Store(format!("the vote record is corrupt: {e}")))
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
        store.save_votes(&[record.clone()]).unwrap();
        drop(store);
        let store = Store::open(dir.path(), TEST_CACHE).unwrap();
        assert_eq!(store.load_votes::<MinSig>().unwrap(), vec![record]);
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
