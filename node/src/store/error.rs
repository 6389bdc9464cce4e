//! Why the store failed, or what in it is not what the node wrote: the file
//! or height, and the error underneath.

use std::path::PathBuf;

/// Why the store failed or holds invalid data ([`crate::NodeError::Store`]).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A database file failed: opening it, a transaction, a table, the disk
    /// (a failed write is retried: the file is opened again at its next use).
    #[error("store: {}: {source}", path.display())]
    Database {
        /// The database file (`chain.redb`, `votes.redb`).
        path: PathBuf,
        /// Why it failed.
        source: redb::Error,
    },
    /// A database file is closed: opening it again after a failure failed
    /// (it is tried again at its next use).
    #[error("store: {} is closed after a failure (opened again at its next use)", path.display())]
    Closed {
        /// The database file.
        path: PathBuf,
    },
    /// A value cannot be encoded for the store (the wire codec's limit).
    #[error("store: {0}")]
    Encode(#[source] beacon::Error),
    /// The epoch record cannot be written as JSON.
    #[error("store: {0}")]
    EncodeRecord(#[source] serde_json::Error),
    /// The DKG key material file (`dkg.key`) is not valid key material.
    #[error("store: {} is not valid key material: {source}", path.display())]
    KeyMaterial {
        /// The file.
        path: PathBuf,
        /// Why it does not decode or check.
        source: beacon::Error,
    },
    /// The member seed file (`member.seed`) is not 32 bytes.
    #[error("store: {} holds {len} bytes, not a 32-byte seed", path.display())]
    SeedLength {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
    },
    /// The epoch record file (`epoch.key`) is not a valid record.
    #[error("store: {} is not a valid epoch record: {source}", path.display())]
    EpochRecord {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: EpochRecordError,
    },
    /// The kept proposal of a change of members (`proposal.json`) is not one.
    #[error("store: {} is not a proposal of a change of members: {source}", path.display())]
    Proposal {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        source: serde_json::Error,
    },
    /// The mark of the seed that dealt the genesis keys
    /// (`member.seed.dealing`) does not decode.
    #[error("store: {} is not the mark of a dealing seed: {source}", path.display())]
    DealingSeed {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        source: serde_json::Error,
    },
    /// What the member dealt in a change, kept until its erasure
    /// (`member.deal.<epoch>.retained`), does not decode.
    #[error("store: {} is not a retained deal: {source}", path.display())]
    RetainedDeal {
        /// The file.
        path: PathBuf,
        /// Why it does not decode.
        source: beacon::Error,
    },
    /// The record of what the replica signed does not decode.
    #[error("store: the vote record is corrupt: {0}")]
    CorruptVotes(#[source] beacon::Error),
    /// A block body of the vote record does not hash to its digest.
    #[error("store: the vote record is corrupt: a block body does not match its digest")]
    VoteBodyDigest,
    /// A finalized height's entry does not decode.
    #[error("store: height {height}: {source}")]
    Entry {
        /// The height.
        height: u64,
        /// Why.
        source: beacon::Error,
    },
    /// A finalized height does not follow the one after it (a gap below
    /// the heights read), or is stored under another height.
    #[error("store: height {height} is out of place (expected {expected})")]
    OutOfPlace {
        /// The height (its key in the database).
        height: u64,
        /// The height that should be there.
        expected: u64,
    },
    /// An entry is stored under another height than its own.
    #[error("store: height {height} is out of place (it holds height {found})")]
    WrongHeight {
        /// The height (its key in the database).
        height: u64,
        /// The height of the entry stored there.
        found: u64,
    },
    /// The key material found is not this node's of this network.
    #[error(
        "store: the key material in {} belongs to another network or node (session, index or n differ)",
        data_dir.display()
    )]
    ForeignKeyMaterial {
        /// The data directory.
        data_dir: PathBuf,
    },
}

/// What is wrong with an epoch record file ([`StoreError::EpochRecord`]).
#[derive(Debug, thiserror::Error)]
pub enum EpochRecordError {
    /// A record with the current header is not the JSON of a record.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A record without the header (the bincode of builds before it) does
    /// not decode with this build's protocol settings.
    #[error(
        "{0} (a record in bincode, as builds before the v2 header wrote it, must \
         have the protocol settings of the build that reads it: start the node once \
         with the build that wrote it, which rewrites it at its next change, or \
         rejoin with `run --join`)"
    )]
    Bincode(#[source] beacon::Error),
    /// The key material in the record does not decode or check.
    #[error(transparent)]
    KeyMaterial(beacon::Error),
    /// A member's record without key material, or a leaver's with it.
    #[error("a member's record without key material, or a leaver's with it")]
    KeyMaterialPresence,
}
