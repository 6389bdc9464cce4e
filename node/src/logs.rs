//! Log lines of the node that are more than one call:
//!
//! - rate-limited warnings: a peer that repeats one fault (oversized frames,
//!   malformed messages, invalid shares) must not flood the log. Each call
//!   site of [`warn_throttled!`] writes at most one line per [`INTERVAL_US`],
//!   and the next line it writes says how many it held back;
//! - [`log_epoch_event`]: one line per step of an epoch change.

use beacon::Scheme;
use consensus::EpochEvent;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;
use tracing::{info, warn};

/// Shortest time between two lines of one call site (1 s).
pub const INTERVAL_US: u64 = 1_000_000;

/// One call site's budget.
#[derive(Debug, Default)]
pub struct Throttle {
    /// Earliest time (µs since the process's first throttled line, plus one so
    /// that 0 means "never written") of the next line.
    next_us: AtomicU64,
    suppressed: AtomicU64,
}

fn now_us() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

impl Throttle {
    /// A call site that has written nothing yet.
    pub const fn new() -> Self {
        Throttle {
            next_us: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now; if so, how many were held back since
    /// the last one.
    pub fn allow(&self) -> Option<u64> {
        self.allow_at(now_us())
    }

    /// [`Throttle::allow`] at time `now_us`.
    pub fn allow_at(&self, now_us: u64) -> Option<u64> {
        let next = self.next_us.load(Ordering::Relaxed);
        if next != 0 && now_us + 1 < next {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let later = now_us + 1 + INTERVAL_US;
        match self
            .next_us
            .compare_exchange(next, later, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Some(self.suppressed.swap(0, Ordering::Relaxed)),
            Err(_) => {
                // Another thread wrote the line for this interval.
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }
}

/// `tracing::warn!` at most once per second per call site, with a `suppressed`
/// field counting the lines held back since the last one.
#[macro_export]
macro_rules! warn_throttled {
    ($($arg:tt)+) => {{
        static THROTTLE: $crate::logs::Throttle = $crate::logs::Throttle::new();
        if let Some(suppressed) = THROTTLE.allow() {
            tracing::warn!(suppressed, $($arg)+);
        }
    }};
}

/// Logs a step of an epoch change.
pub(crate) fn log_epoch_event<S: Scheme>(event: &EpochEvent<S>) {
    match event {
        EpochEvent::Decided { epoch, height } => {
            info!(
                epoch = epoch.get(),
                height = height.get(),
                "epoch change decided"
            )
        }
        EpochEvent::Ready { epoch, digest } => {
            info!(
                epoch = epoch.get(),
                keys = hex::encode(&digest[..8]),
                "holding the new epoch's keys"
            )
        }
        EpochEvent::Started {
            epoch,
            start,
            members,
            ..
        } => info!(
            epoch = epoch.get(),
            start = start.get(),
            members = members.len(),
            "running the new epoch; its key material saved"
        ),
        EpochEvent::Retired { epoch, height } => {
            warn!(
                epoch = epoch.get(),
                height = height.get(),
                "left the group: shares erased"
            )
        }
        EpochEvent::Failed { epoch, reason } => {
            warn!(epoch = epoch.get(), reason = %reason, "epoch change failed")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_and_the_count_of_the_rest() {
        let t = Throttle::new();
        assert_eq!(t.allow_at(0), Some(0));
        for i in 1..=190 {
            assert_eq!(t.allow_at(i * 5_000), None);
        }
        assert_eq!(t.allow_at(INTERVAL_US), Some(190));
        assert_eq!(t.allow_at(INTERVAL_US + 1), None);
        assert_eq!(t.allow_at(10 * INTERVAL_US), Some(1));
        assert_eq!(t.allow_at(20 * INTERVAL_US), Some(0));
    }
}
