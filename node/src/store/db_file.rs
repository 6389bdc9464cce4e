//! One redb database file of the store, opened again after a failure: redb
//! refuses every operation once a write failed (`PreviousIo`) until the
//! database is opened anew, and opening it repairs what the failed commit
//! left. A full disk thus fails the store's writes while it lasts, and the
//! store takes writes again once the disk does, without a restart.

use super::StoreError;
use crate::NodeError;
use redb::Database;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

/// Creates a database's tables (in one write transaction) when it is opened.
pub(super) type CreateTables = fn(&Database) -> Result<(), NodeError>;

/// A redb database file, opened again at its next use after an operation on
/// it failed.
pub(super) struct DbFile {
    path: PathBuf,
    cache_bytes: usize,
    create_tables: CreateTables,
    /// The open database (none while opening it again fails).
    db: RwLock<Option<Database>>,
    /// An operation failed since it was opened: open it again before the next.
    failed: AtomicBool,
}

impl DbFile {
    /// Opens (creating if needed) the database at `path` with a page cache of
    /// `cache_bytes`, and its tables.
    pub(super) fn open(
        path: PathBuf,
        cache_bytes: usize,
        create_tables: CreateTables,
    ) -> Result<Self, NodeError> {
        let db = open(&path, cache_bytes, create_tables)?;
        Ok(DbFile {
            path,
            cache_bytes,
            create_tables,
            db: RwLock::new(Some(db)),
            failed: AtomicBool::new(false),
        })
    }

    /// Runs `f` on the database, opened again first if an operation failed
    /// since it was opened. A database error names the file, and makes the
    /// next use open the file again.
    pub(super) fn with<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, NodeError>,
    ) -> Result<T, NodeError> {
        if self.failed.load(Ordering::Acquire) {
            self.reopen()?;
        }
        let guard = self.db.read().unwrap_or_else(|e| e.into_inner());
        let result = match guard.as_ref() {
            Some(db) => f(db),
            // Another thread's attempt to open it again failed meanwhile.
            None => Err(StoreError::Closed {
                path: self.path.clone(),
            }
            .into()),
        };
        drop(guard);
        result.map_err(|e| self.named(e))
    }

    /// Closes the database and opens it again (once, however many threads
    /// ask), unless another thread did it since.
    fn reopen(&self) -> Result<(), NodeError> {
        let mut guard = self.db.write().unwrap_or_else(|e| e.into_inner());
        if !self.failed.load(Ordering::Acquire) {
            return Ok(());
        }
        // The old handle holds the file's lock: closed first.
        *guard = None;
        let db =
            open(&self.path, self.cache_bytes, self.create_tables).map_err(|e| self.named(e))?;
        *guard = Some(db);
        self.failed.store(false, Ordering::Release);
        Ok(())
    }

    /// `e` with this file's path if it is a database error (then the next
    /// use opens the file again).
    fn named(&self, e: NodeError) -> NodeError {
        match e {
            NodeError::Store(StoreError::Database { path, source }) => {
                self.failed.store(true, Ordering::Release);
                let path = if path.as_os_str().is_empty() {
                    self.path.clone()
                } else {
                    path
                };
                StoreError::Database { path, source }.into()
            }
            NodeError::Store(StoreError::Closed { .. }) => {
                self.failed.store(true, Ordering::Release);
                e
            }
            other => other,
        }
    }

    /// The file.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

fn open(
    path: &Path,
    cache_bytes: usize,
    create_tables: CreateTables,
) -> Result<Database, NodeError> {
    let named = |e: NodeError| match e {
        NodeError::Store(StoreError::Database { source, .. }) => StoreError::Database {
            path: path.to_path_buf(),
            source,
        }
        .into(),
        other => other,
    };
    let db = redb::Builder::new()
        .set_cache_size(cache_bytes)
        .create(path)
        .map_err(super::db_err)
        .map_err(named)?;
    create_tables(&db).map_err(named)?;
    Ok(db)
}
