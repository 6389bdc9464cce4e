//! When the disk refuses writes (full, an I/O error): which of the store's
//! writers is failing and why (`GET /health` answers 503 and says so while
//! one is), and the schedule on which a failed write is tried again. The
//! node never exits on a failed write and never carries out what must
//! follow it: it holds it, tries again with backoff, and goes on by itself
//! once the disk takes writes.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The first wait before a failed write is tried again.
const FIRST_RETRY: Duration = Duration::from_millis(50);

/// The longest wait between two tries (a disk that is freed is used again
/// within it).
const LAST_RETRY: Duration = Duration::from_secs(1);

/// Who writes to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DiskWriter {
    /// The member's durable writes (`consensus::disk`: key material, the
    /// epoch record, the seed, the vote record before votes leave).
    Member,
    /// The persistence thread's finalized heights.
    Chain,
}

impl DiskWriter {
    /// `member` or `chain`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskWriter::Member => "member",
            DiskWriter::Chain => "chain",
        }
    }
}

/// The writers whose last write failed, with the error (it names the file).
#[derive(Debug, Default)]
pub struct DiskHealth {
    failing: Mutex<BTreeMap<DiskWriter, String>>,
}

impl DiskHealth {
    /// Records that `writer`'s write failed with `error`; returns how many
    /// writers are failing now.
    pub fn failed(&self, writer: DiskWriter, error: String) -> usize {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        failing.insert(writer, error);
        failing.len()
    }

    /// Records that `writer`'s writes succeed again; returns how many
    /// writers are still failing.
    pub fn recovered(&self, writer: DiskWriter) -> usize {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        failing.remove(&writer);
        failing.len()
    }

    /// What fails, if anything: `member: <error>; chain: <error>`.
    pub fn failing(&self) -> Option<String> {
        let failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        if failing.is_empty() {
            return None;
        }
        let parts: Vec<String> = failing
            .iter()
            .map(|(w, e)| format!("{}: {e}", w.as_str()))
            .collect();
        Some(parts.join("; "))
    }
}

/// A write that failed and is tried again: the first after
/// [`FIRST_RETRY`], each later wait twice the one before, at most
/// [`LAST_RETRY`].
#[derive(Debug)]
pub struct WriteRetry {
    /// When the write first failed.
    since: Instant,
    /// The wait before the next try.
    wait: Duration,
    /// When the next try is due.
    due: Instant,
    /// Tries that failed, the first included.
    failures: u64,
    /// The first failure's error (it names the file).
    first_error: String,
}

impl WriteRetry {
    /// A write that just failed with `error`.
    pub fn new(error: String) -> Self {
        let now = Instant::now();
        WriteRetry {
            since: now,
            wait: FIRST_RETRY,
            due: now + FIRST_RETRY,
            failures: 1,
            first_error: error,
        }
    }

    /// The try that was due failed too: the next one waits longer.
    pub fn failed_again(&mut self) {
        self.failures += 1;
        self.wait = (self.wait * 2).min(LAST_RETRY);
        self.due = Instant::now() + self.wait;
    }

    /// When the next try is due.
    pub fn due(&self) -> Instant {
        self.due
    }

    /// Tries that failed so far.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// How long the writes have failed.
    pub fn elapsed(&self) -> Duration {
        self.since.elapsed()
    }

    /// The first failure's error.
    pub fn first_error(&self) -> &str {
        &self.first_error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_to_the_last_wait_and_failing_writers_are_listed() {
        let mut retry = WriteRetry::new("full".into());
        assert_eq!(retry.wait, FIRST_RETRY);
        let mut waits = Vec::new();
        for _ in 0..6 {
            retry.failed_again();
            waits.push(retry.wait.as_millis());
        }
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(retry.failures(), 7);
        assert_eq!(retry.first_error(), "full");

        let health = DiskHealth::default();
        assert_eq!(health.failing(), None);
        assert_eq!(
            health.failed(DiskWriter::Chain, "chain.redb: full".into()),
            1
        );
        assert_eq!(
            health.failed(DiskWriter::Member, "votes.redb: full".into()),
            2
        );
        assert_eq!(
            health.failing().as_deref(),
            Some("member: votes.redb: full; chain: chain.redb: full")
        );
        assert_eq!(health.recovered(DiskWriter::Member), 1);
        assert_eq!(health.recovered(DiskWriter::Chain), 0);
        assert_eq!(health.failing(), None);
    }
}
