//! Step 3, the backup rule: a rank-0 collector broadcasts what it aggregates
//! at once; a backup collector of rank `r` holds it for `r` backup delays and
//! drops it if another collector's result reached it first (a silent first
//! collector costs a delay, not a view).

use super::interface::Timer;
use super::Replica;
use crate::messages::Message;
use crate::{Height, View};
use beacon::{Scheme, Time};
use std::collections::BTreeMap;

/// A backup collector's held broadcasts, by `(height, view)`.
pub(super) struct Backups<S: Scheme> {
    held: BTreeMap<(Height, View), Held<S>>,
}

/// The broadcasts held for one `(height, view)`.
struct Held<S: Scheme> {
    pending: Vec<Message<S>>,
    proof_seen: bool,
    beacon_seen: bool,
}

impl<S: Scheme> Backups<S> {
    /// Nothing held.
    pub(super) fn new() -> Self {
        Backups {
            held: BTreeMap::new(),
        }
    }

    /// Records that another collector's result for height `h` arrived (a
    /// commit proof, with or without the beacon, or a beacon).
    pub(super) fn note_peer_result(&mut self, h: Height, message: &Message<S>) {
        for held in self
            .held
            .range_mut((h, View::ZERO)..=(h, View::MAX))
            .map(|(_, d)| d)
        {
            match message {
                Message::CommitProof { beacon, .. } => {
                    held.proof_seen = true;
                    held.beacon_seen |= beacon.is_some();
                }
                Message::Beacon { .. } => held.beacon_seen = true,
                _ => {}
            }
        }
    }
}

impl<S: Scheme> Replica<S> {
    /// Step 3: broadcasts a collector's `message` of `view`: at once at rank
    /// 0, else after `rank` backup delays unless a peer's result comes first.
    pub(super) fn collector_broadcast(&mut self, now: Time, view: View, message: Message<S>) {
        let h = self.height;
        let rank = self.round.collector.rank(view).unwrap_or(0);
        if rank == 0 {
            return self.outbox.broadcast(message);
        }
        let held = self.backups.held.entry((h, view)).or_insert_with(|| Held {
            pending: Vec::new(),
            proof_seen: false,
            beacon_seen: false,
        });
        let first = held.pending.is_empty();
        held.pending.push(message);
        if first {
            let delay = self.config.backup_collector_delay_us;
            let at = now.plus_micros(delay.saturating_mul(rank as u64));
            self.outbox
                .timer(at, Timer::BackupCollector { height: h, view });
        }
    }

    /// Step 3, a backup collector's turn: broadcast what no peer has sent yet.
    pub(super) fn on_backup_timer(&mut self, height: Height, view: View) {
        let Some(held) = self.backups.held.remove(&(height, view)) else {
            return;
        };
        for m in held.pending {
            let seen = match &m {
                Message::Beacon { .. } => held.beacon_seen,
                Message::CommitProof { .. } | Message::Prepare { .. } => held.proof_seen,
                _ => false,
            };
            if !seen {
                self.outbox.broadcast(m);
            }
        }
    }
}
