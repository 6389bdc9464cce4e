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
//! stored; then a fresh one replaces it. The seed that dealt the genesis keys
//! stays a little longer, marked in `member.seed.dealing` (when it is
//! replaced, and the attempt it dealt in), so that the node restarted
//! meanwhile deals the same deal again to a genesis member that missed the
//! DKG (`consensus::disk::DealingSeed`). After a change of members, what
//! the member dealt in it (its old beacon share and the change) stays in
//! `member.deal.<epoch>.retained` (mode 0600, one per change still
//! retained) until its erasure, so that the node
//! restarted meanwhile deals it again to a member that missed it
//! (`consensus::disk::RetainedDeal`).
//! The operator's last proposal of a change of members lives in
//! `proposal.json` from when the admin API accepts it until the chain
//! decides that change or another one (a restarted node submits it again).

use crate::identity::write_private;
use crate::{FileOp, NodeError};
use beacon::dkg::DkgOutput;
use beacon::Scheme;
use consensus::disk::{DealingSeed, RetainedDeal};
use consensus::epoch::EpochChange;
use consensus::{CommittedEntry, Epoch, SignedVotes};
use redb::{Database, ReadableDatabase as _, ReadableTable as _, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod db_file;
mod disk;
mod error;
mod health;

use db_file::DbFile;

pub use consensus::disk::EpochRecord;
pub use error::{EpochRecordError, StoreError};
pub use health::{DiskHealth, DiskWriter, WriteRetry};

const CHAIN: TableDefinition<u64, &[u8]> = TableDefinition::new("chain");
/// Where each committed transaction (by SHA-256) is: its height.
const TRANSACTIONS: TableDefinition<&[u8; 32], u64> = TableDefinition::new("transactions");
/// The replica's last record of what it signed (one row, [`VOTES_KEY`]).
const VOTES: TableDefinition<&str, &[u8]> = TableDefinition::new("votes");
const VOTES_KEY: &str = "signed";
/// The bodies of the blocks that record names, each once, by digest.
const VOTE_BLOCKS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("vote_blocks");

/// `epoch.key`: the epoch, and this node's key material in it (encoded
/// [`DkgOutput`]; none once retired). Written as [`EPOCH_FILE_HEADER`] and
/// this in JSON (the key material in hex), so that a later build that adds a
/// protocol setting (with its default) still reads the record; files without
/// the header are the bincode of earlier builds, read as such.
#[derive(Serialize, Deserialize)]
struct EpochFile {
    record: EpochRecord,
    #[serde(with = "hex_bytes")]
    output: Option<Vec<u8>>,
}

/// The first line of an `epoch.key` in JSON (a bincode file never starts with
/// it: its first byte would be a varint tag `0xff`, which bincode never writes).
const EPOCH_FILE_HEADER: &[u8] = b"\xffsbft-beacon epoch record v2\n";

/// Optional bytes as optional hex in JSON, as they are in bincode.
mod hex_bytes {
    use serde::{Deserialize as _, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(bytes) => s.serialize_some(&hex::encode(bytes)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Vec<u8>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|h| hex::decode(h).map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl EpochFile {
    /// The file's bytes: the header, then JSON.
    fn encode(&self) -> Result<Vec<u8>, StoreError> {
        let mut bytes = EPOCH_FILE_HEADER.to_vec();
        serde_json::to_writer(&mut bytes, self).map_err(StoreError::EncodeRecord)?;
        Ok(bytes)
    }

    /// Reads a file [`EpochFile::encode`] wrote, or the bincode of an earlier build.
    fn decode(bytes: &[u8]) -> Result<Self, EpochRecordError> {
        match bytes.strip_prefix(EPOCH_FILE_HEADER) {
            Some(json) => Ok(serde_json::from_slice(json)?),
            None => beacon::wire::decode(bytes).map_err(EpochRecordError::Bincode),
        }
    }
}

/// A node's store.
pub struct Store {
    dir: PathBuf,
    /// `chain.redb`: the finalized heights and the transaction index.
    db: DbFile,
    /// `votes.redb`: the record of what the replica signed.
    votes: DbFile,
}

/// A database error; [`DbFile::with`] names its file.
fn db_err(e: impl Into<redb::Error>) -> NodeError {
    StoreError::Database {
        path: PathBuf::new(),
        source: e.into(),
    }
    .into()
}

/// The tables of `chain.redb`.
fn chain_tables(db: &Database) -> Result<(), NodeError> {
    let tx = db.begin_write().map_err(db_err)?;
    tx.open_table(CHAIN).map_err(db_err)?;
    tx.open_table(TRANSACTIONS).map_err(db_err)?;
    tx.commit().map_err(db_err)
}

/// The tables of `votes.redb`.
fn vote_tables(db: &Database) -> Result<(), NodeError> {
    let tx = db.begin_write().map_err(db_err)?;
    tx.open_table(VOTES).map_err(db_err)?;
    tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
    tx.commit().map_err(db_err)
}

fn encode_err(e: beacon::Error) -> NodeError {
    StoreError::Encode(e).into()
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

/// Replaces the vote record with `bytes` (the encoding of `record`) and keeps
/// the bodies of the blocks it names, in one durable transaction.
fn write_votes<S: Scheme>(
    votes: &Database,
    record: &[SignedVotes<S>],
    bytes: &[u8],
) -> Result<(), NodeError> {
    let tx = votes.begin_write().map_err(db_err)?;
    {
        let mut table = tx.open_table(VOTES).map_err(db_err)?;
        table.insert(VOTES_KEY, bytes).map_err(db_err)?;
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
                let body = beacon::wire::encode(block.as_ref()).map_err(encode_err)?;
                bodies.insert(digest, body.as_slice()).map_err(db_err)?;
            }
        }
    }
    tx.commit().map_err(db_err)
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, with a page cache of
    /// `cache_bytes` (`[limits] store_cache_bytes`).
    pub fn open(dir: &Path, cache_bytes: usize) -> Result<Self, NodeError> {
        std::fs::create_dir_all(dir).map_err(|e| NodeError::io(FileOp::Create, dir, e))?;
        // redb's page cache defaults to 1 GiB; the node reads little back.
        let db = DbFile::open(dir.join("chain.redb"), cache_bytes, chain_tables)?;
        let votes = DbFile::open(
            dir.join("votes.redb"),
            cache_bytes.min(VOTES_CACHE_BYTES),
            vote_tables,
        )?;
        db.with(|chain| votes.with(|votes| move_votes(chain, votes)))?;
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
            Ok(bytes) => match DkgOutput::decode(&bytes) {
                Ok(output) => Ok(Some(output)),
                Err(source) => Err(StoreError::KeyMaterial { path, source }.into()),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(NodeError::io(FileOp::Read, &path, e)),
        }
    }

    /// Persists the DKG result (mode 0600, atomically).
    pub fn save_dkg<S: Scheme>(&self, output: &DkgOutput<S>) -> Result<(), NodeError> {
        let bytes = output.encode().map_err(encode_err)?;
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
            Ok(bytes) => match bytes.as_slice().try_into() {
                Ok(seed) => Ok(seed),
                Err(_) => {
                    let len = bytes.len();
                    Err(StoreError::SeedLength { path, len }.into())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.replace_seed(),
            Err(e) => Err(NodeError::io(FileOp::Read, &path, e)),
        }
    }

    /// Stores a fresh random member seed in place of the last one, durably,
    /// erases the mark of [`Store::keep_dealing_seed`], and returns it: once
    /// the keys the last one dealt are stored (and answered for), nothing
    /// needs it, and erasing it keeps those dealings secret from whoever
    /// later reads this disk.
    pub fn replace_seed(&self) -> Result<[u8; 32], NodeError> {
        use rand::{rngs::OsRng, RngCore as _};
        let mut seed = [0u8; 32];
        OsRng.fill_bytes(&mut seed);
        write_private(&self.seed_path(), &seed)?;
        let mark = self.dealing_seed_path();
        match std::fs::remove_file(&mark) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(NodeError::io(FileOp::Erase, &mark, e)),
        }
        Ok(seed)
    }

    fn dealing_seed_path(&self) -> PathBuf {
        self.dir.join("member.seed.dealing")
    }

    /// Marks the stored seed as the one that dealt the genesis keys, kept
    /// until `mark.until` (`member.seed.dealing`, durably).
    pub fn keep_dealing_seed(&self, mark: &DealingSeed) -> Result<(), NodeError> {
        let bytes = serde_json::to_vec(mark).map_err(StoreError::EncodeRecord)?;
        write_private(&self.dealing_seed_path(), &bytes)
    }

    /// The mark of [`Store::keep_dealing_seed`], while the seed it marks is
    /// stored.
    pub fn dealing_seed(&self) -> Result<Option<DealingSeed>, NodeError> {
        read_json(&self.dealing_seed_path(), |path, source| {
            StoreError::DealingSeed { path, source }
        })
    }

    /// `member.deal.<epoch>.retained`: what the member dealt in the change
    /// into `epoch`.
    fn retained_deal_path(&self, epoch: Epoch) -> PathBuf {
        self.dir.join(format!("member.deal.{epoch}.retained"))
    }

    /// Keeps what the member dealt in the change it switches out of
    /// (`member.deal.<epoch>.retained`, mode 0600, durably), beside the
    /// deals of other changes still kept, in place of an earlier one of the
    /// same change.
    pub fn keep_deal<S: Scheme>(&self, deal: &RetainedDeal<S>) -> Result<(), NodeError> {
        let bytes = beacon::wire::encode(deal).map_err(encode_err)?;
        write_private(&self.retained_deal_path(deal.epoch()), &bytes)
    }

    /// What [`Store::keep_deal`] kept and is still there, by epoch.
    pub fn retained_deals<S: Scheme>(&self) -> Result<Vec<RetainedDeal<S>>, NodeError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(NodeError::io(FileOp::Read, &self.dir, e)),
        };
        let mut deals = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| NodeError::io(FileOp::Read, &self.dir, e))?;
            let name = entry.file_name();
            let is_deal = name
                .to_str()
                .and_then(|n| n.strip_prefix("member.deal."))
                .and_then(|n| n.strip_suffix(".retained"))
                .is_some_and(|epoch| epoch.parse::<u64>().is_ok());
            if !is_deal {
                continue;
            }
            let path = entry.path();
            let bytes = std::fs::read(&path).map_err(|e| NodeError::io(FileOp::Read, &path, e))?;
            match beacon::wire::decode::<RetainedDeal<S>>(&bytes) {
                Ok(deal) => deals.push(deal),
                Err(source) => return Err(StoreError::RetainedDeal { path, source }.into()),
            }
        }
        deals.sort_by_key(RetainedDeal::epoch);
        Ok(deals)
    }

    /// Erases what [`Store::keep_deal`] kept of the change into `epoch`, if
    /// anything (a removal a crash undoes comes back as a deal whose time is
    /// over: erased again at the restart).
    pub fn erase_deal(&self, epoch: Epoch) -> Result<(), NodeError> {
        let path = self.retained_deal_path(epoch);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(NodeError::io(FileOp::Erase, &path, e)),
        }
    }

    fn proposal_path(&self) -> PathBuf {
        self.dir.join("proposal.json")
    }

    /// Keeps the operator's proposal of a change of members, durably, in
    /// place of an earlier one.
    pub fn save_proposal(&self, change: &EpochChange) -> Result<(), NodeError> {
        let bytes = serde_json::to_vec(change).map_err(StoreError::EncodeRecord)?;
        write_private(&self.proposal_path(), &bytes)
    }

    /// The operator's proposal kept by [`Store::save_proposal`], if any.
    pub fn load_proposal(&self) -> Result<Option<EpochChange>, NodeError> {
        read_json(&self.proposal_path(), |path, source| StoreError::Proposal {
            path,
            source,
        })
    }

    /// Erases the kept proposal (the chain decided it, or another change).
    pub fn erase_proposal(&self) -> Result<(), NodeError> {
        let path = self.proposal_path();
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(NodeError::io(FileOp::Erase, &path, e)),
        }
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
            Err(e) => return Err(NodeError::io(FileOp::Read, &path, e)),
        };
        let bad = |source: EpochRecordError| StoreError::EpochRecord {
            path: path.clone(),
            source,
        };
        let file = EpochFile::decode(&bytes).map_err(bad)?;
        let output = match &file.output {
            Some(b) => Some(
                DkgOutput::decode(b)
                    .map_err(EpochRecordError::KeyMaterial)
                    .map_err(bad)?,
            ),
            None => None,
        };
        if output.is_none() != file.record.retired {
            return Err(bad(EpochRecordError::KeyMaterialPresence).into());
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
        let output = output.map(|o| o.encode().map_err(encode_err)).transpose()?;
        let file = EpochFile {
            record: record.clone(),
            output,
        };
        write_private(&self.epoch_path(), &file.encode()?)?;
        match std::fs::remove_file(self.key_path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(NodeError::io(FileOp::Erase, &self.key_path(), e)),
        }
    }

    /// Replaces the record of what the replica signed, durably (redb commits
    /// with fsync): it returns only once a crash can no longer lose it. The
    /// bodies of the blocks it names go into their own table in the same
    /// transaction, each written once (the record changes a few times per
    /// height; its block does not); bodies no longer named are dropped.
    pub fn save_votes<S: Scheme>(&self, record: &[SignedVotes<S>]) -> Result<(), NodeError> {
        let bytes = beacon::wire::encode(&record.to_vec()).map_err(encode_err)?;
        self.votes.with(|votes| write_votes(votes, record, &bytes))
    }

    /// The files of the store's databases: the chain's and the vote record's.
    pub fn database_files(&self) -> [&Path; 2] {
        [self.db.path(), self.votes.path()]
    }

    /// The last record of what the replica signed (empty when none), with the
    /// bodies of the blocks it names (a body must hash to its digest).
    pub fn load_votes<S: Scheme>(&self) -> Result<Vec<SignedVotes<S>>, NodeError> {
        let corrupt = |e: beacon::Error| NodeError::from(StoreError::CorruptVotes(e));
        self.votes.with(|votes| {
            let tx = votes.begin_read().map_err(db_err)?;
            let table = tx.open_table(VOTES).map_err(db_err)?;
            let Some(v) = table.get(VOTES_KEY).map_err(db_err)? else {
                return Ok(Vec::new());
            };
            let mut records: Vec<SignedVotes<S>> =
                beacon::wire::decode(v.value()).map_err(corrupt)?;
            let bodies = tx.open_table(VOTE_BLOCKS).map_err(db_err)?;
            for record in &mut records {
                let named: Vec<[u8; 32]> = record.named().copied().collect();
                for digest in named {
                    let Some(body) = bodies.get(&digest).map_err(db_err)? else {
                        continue;
                    };
                    let block: consensus::Block =
                        beacon::wire::decode(body.value()).map_err(corrupt)?;
                    if block.digest() != digest {
                        return Err(StoreError::VoteBodyDigest.into());
                    }
                    record.blocks.insert(digest, Arc::new(block));
                }
            }
            Ok(records)
        })
    }

    /// The most recent `count` finalized heights in order (what a restarted
    /// replica keeps in memory); an undecodable entry or a gap is an error.
    pub fn load_recent<S: Scheme>(
        &self,
        count: usize,
    ) -> Result<Vec<Arc<CommittedEntry<S>>>, NodeError> {
        self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(CHAIN).map_err(db_err)?;
            let mut out = Vec::new();
            for row in table.iter().map_err(db_err)?.rev().take(count) {
                let (k, v) = row.map_err(db_err)?;
                let height = k.value();
                let entry: CommittedEntry<S> = beacon::wire::decode(v.value())
                    .map_err(|source| StoreError::Entry { height, source })?;
                let expected = out.last().map_or(height, |next: &Arc<CommittedEntry<S>>| {
                    next.block.height.get().saturating_sub(1)
                });
                if entry.block.height.get() != height || height != expected || height == 0 {
                    return Err(StoreError::OutOfPlace { height, expected }.into());
                }
                out.push(Arc::new(entry));
            }
            out.reverse();
            Ok(out)
        })
    }

    /// The most recent finalized heights, at most `count`, that follow each
    /// other without a gap, in order: what a member that joined a running
    /// network resumes from while it still backfills older heights (below a
    /// gap). An undecodable entry is an error.
    pub fn load_tail<S: Scheme>(
        &self,
        count: usize,
    ) -> Result<Vec<Arc<CommittedEntry<S>>>, NodeError> {
        self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
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
                    .map_err(|source| StoreError::Entry { height, source })?;
                let found = entry.block.height.get();
                if found != height {
                    return Err(StoreError::WrongHeight { height, found }.into());
                }
                out.push(Arc::new(entry));
            }
            out.reverse();
            Ok(out)
        })
    }

    /// The lowest height of the run of heights that ends at the last one
    /// (the first below it is missing, or it is height 1), if any is stored.
    pub fn lowest_of_tail<S: Scheme>(&self) -> Result<Option<CommittedEntry<S>>, NodeError> {
        let lowest = self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
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
            Ok(lowest)
        })?;
        match lowest {
            Some(h) => self.get(h),
            None => Ok(None),
        }
    }

    /// The last finalized height stored (0 if none).
    pub fn latest_height(&self) -> Result<u64, NodeError> {
        self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(CHAIN).map_err(db_err)?;
            let last = table.last().map_err(db_err)?.map_or(0, |(k, _)| k.value());
            Ok(last)
        })
    }

    /// The height at which the transaction with SHA-256 `id` committed, if any.
    pub fn transaction_height(&self, id: &[u8; 32]) -> Result<Option<u64>, NodeError> {
        self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(TRANSACTIONS).map_err(db_err)?;
            Ok(table.get(id).map_err(db_err)?.map(|v| v.value()))
        })
    }

    /// The stored entry of `height`, if any.
    pub fn get<S: Scheme>(&self, height: u64) -> Result<Option<CommittedEntry<S>>, NodeError> {
        self.db.with(|db| {
            let tx = db.begin_read().map_err(db_err)?;
            let table = tx.open_table(CHAIN).map_err(db_err)?;
            let Some(v) = table.get(height).map_err(db_err)? else {
                return Ok(None);
            };
            match beacon::wire::decode(v.value()) {
                Ok(entry) => Ok(Some(entry)),
                Err(source) => Err(StoreError::Entry { height, source }.into()),
            }
        })
    }

    /// Appends finalized heights, and the index of their transactions, in one
    /// durable transaction.
    pub fn append<S: Scheme>(&self, entries: &[Arc<CommittedEntry<S>>]) -> Result<(), NodeError> {
        self.db.with(|db| {
            let tx = db.begin_write().map_err(db_err)?;
            {
                let mut table = tx.open_table(CHAIN).map_err(db_err)?;
                let mut index = tx.open_table(TRANSACTIONS).map_err(db_err)?;
                for e in entries {
                    let bytes = beacon::wire::encode(e.as_ref()).map_err(encode_err)?;
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
        })
    }
}

/// The JSON record in `path`, if the file exists; `bad` names a record that
/// does not decode.
fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    bad: impl FnOnce(PathBuf, serde_json::Error) -> StoreError,
) -> Result<Option<T>, NodeError> {
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(record) => Ok(Some(record)),
            Err(source) => Err(bad(path.to_path_buf(), source).into()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(NodeError::io(FileOp::Read, path, e)),
    }
}

#[cfg(test)]
mod tests;
