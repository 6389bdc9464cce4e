//! The replica's finalized chain: a window of the most recent heights.
//!
//! A replica needs only the last few finalized heights: the previous beacon, the
//! parent digest, the beacon that elects the current height (`election_lag`
//! back), and recent heights to answer lagging peers' sync and block requests
//! without touching the disk. Everything older lives in the driver's store (the
//! node's redb database, the simulator's per-node disk); a sync request for it
//! becomes [`super::Output::SyncFromStore`], answered there. So a replica's
//! memory does not grow with the chain.

use super::sync::{block_bytes, SYNC_BATCH, SYNC_RESPONSE_BYTES};
use crate::messages::CommittedEntry;
use crate::Height;
use beacon::Scheme;
use std::collections::VecDeque;
use std::sync::Arc;

/// Finalized heights a replica keeps in memory. Larger than any accepted
/// `election_lag` ([`crate::config::MAX_ELECTION_LAG`]) and than one sync batch.
pub const CHAIN_WINDOW: usize = 256;

/// The most recent finalized heights, oldest first.
#[derive(Clone, Debug)]
pub struct ChainWindow<S: Scheme> {
    recent: VecDeque<Arc<CommittedEntry<S>>>,
    /// The last finalized height (0 before height 1).
    height: Height,
}

impl<S: Scheme> Default for ChainWindow<S> {
    fn default() -> Self {
        ChainWindow {
            recent: VecDeque::new(),
            height: Height::ZERO,
        }
    }
}

impl<S: Scheme> ChainWindow<S> {
    /// The window of a replica resuming after `entries`: the most recent
    /// finalized heights, consecutive and ending at the last finalized one (the
    /// first may be any height). `None` when they are not consecutive.
    pub fn resume(entries: Vec<Arc<CommittedEntry<S>>>) -> Option<Self> {
        let mut window = ChainWindow::default();
        for (i, entry) in entries.into_iter().enumerate() {
            if i > 0 && Some(entry.block.height) != window.height.next() {
                return None;
            }
            window.height = entry.block.height;
            window.push_entry(entry);
        }
        Some(window)
    }

    /// The last finalized height (0 before height 1).
    pub fn height(&self) -> Height {
        self.height
    }

    /// The oldest height still in memory (`height() + 1` when none is).
    pub fn first(&self) -> Height {
        self.height
            .saturating_sub(self.recent.len() as u64)
            .saturating_add(1)
    }

    /// The last finalized entry.
    pub fn last(&self) -> Option<&Arc<CommittedEntry<S>>> {
        self.recent.back()
    }

    /// The entry of `height`, if it is finalized and still in memory.
    pub fn get(&self, height: Height) -> Option<&Arc<CommittedEntry<S>>> {
        let offset = height.get().checked_sub(self.first().get())?;
        self.recent.get(usize::try_from(offset).ok()?)
    }

    /// Entries in memory, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<CommittedEntry<S>>> {
        self.recent.iter()
    }

    /// Number of entries in memory (at most [`CHAIN_WINDOW`]).
    pub fn len(&self) -> usize {
        self.recent.len()
    }

    /// Whether nothing is finalized yet (or remembered).
    pub fn is_empty(&self) -> bool {
        self.recent.is_empty()
    }

    /// Appends the next finalized height (whose block is at `height() + 1`),
    /// forgetting the oldest beyond the window.
    pub fn push(&mut self, entry: Arc<CommittedEntry<S>>) {
        self.height = self.height.saturating_add(1);
        debug_assert_eq!(entry.block.height, self.height);
        self.push_entry(entry);
    }

    fn push_entry(&mut self, entry: Arc<CommittedEntry<S>>) {
        self.recent.push_back(entry);
        while self.recent.len() > CHAIN_WINDOW {
            self.recent.pop_front();
        }
    }

    /// Up to `max_entries` consecutive entries from `from` whose blocks add up
    /// to at most `max_bytes` (the first is always included), by `bytes` of a
    /// block. `None` when `from` is older than the window (the store has it);
    /// empty when `from` is not finalized yet.
    pub fn range(
        &self,
        from: Height,
        max_entries: usize,
        max_bytes: usize,
        bytes: impl Fn(&CommittedEntry<S>) -> usize,
    ) -> Option<Vec<Arc<CommittedEntry<S>>>> {
        let from = from.max(Height::new(1));
        if from < self.first() {
            return None;
        }
        let mut total = 0;
        Some(
            self.recent
                .iter()
                .skip(from.saturating_since(self.first()) as usize)
                .take(max_entries)
                .take_while(|e| {
                    let first = total == 0;
                    total += bytes(e);
                    first || total <= max_bytes
                })
                .cloned()
                .collect(),
        )
    }
}

/// The answer to a sync request from `from_height`, from a store's finalized
/// entries (`read(h)` is height `h`, `None` past the last): at most one batch,
/// bounded in bytes like the replica's own answers. Drivers answer
/// [`super::Output::SyncFromStore`] with it.
pub fn sync_response<S: Scheme>(
    from_height: Height,
    mut read: impl FnMut(Height) -> Option<Arc<CommittedEntry<S>>>,
) -> Vec<Arc<CommittedEntry<S>>> {
    let mut bytes = 0;
    let mut entries = Vec::new();
    let first = from_height.get().max(1);
    for h in (first..first.saturating_add(SYNC_BATCH as u64)).map(Height::new) {
        let Some(entry) = read(h) else { break };
        bytes += block_bytes(&entry.block);
        if !entries.is_empty() && bytes > SYNC_RESPONSE_BYTES {
            break;
        }
        entries.push(entry);
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::{Block, CommitCertificate, CommitPath};
    use crate::View;
    use beacon::{MinSig, Point};

    fn entry(height: u64) -> Arc<CommittedEntry<MinSig>> {
        let height = Height::new(height);
        let block = Arc::new(Block {
            height,
            parent: [0; 32],
            previous_beacon: vec![],
            transactions: vec![vec![0; height.get() as usize % 7]],
        });
        let sig = <MinSig as Scheme>::Signature::generator();
        Arc::new(CommittedEntry {
            certificate: CommitCertificate {
                height,
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
    fn keeps_the_most_recent_heights_only() {
        let mut w = ChainWindow::<MinSig>::default();
        assert_eq!((w.height(), w.first()), (Height::ZERO, Height::new(1)));
        for h in 1..=(CHAIN_WINDOW as u64 + 10) {
            w.push(entry(h));
        }
        assert_eq!(w.len(), CHAIN_WINDOW);
        assert_eq!(w.height(), Height::new(CHAIN_WINDOW as u64 + 10));
        assert_eq!(w.first(), Height::new(11));
        assert!(w.get(Height::new(10)).is_none());
        assert_eq!(
            w.get(Height::new(11)).unwrap().block.height,
            Height::new(11)
        );
        assert_eq!(w.last().unwrap().block.height, w.height());
        assert!(w.get(w.height().saturating_add(1)).is_none());
        assert!(w.get(Height::MAX).is_none());
    }

    #[test]
    fn ranges_are_bounded_and_older_heights_go_to_the_store() {
        let mut w = ChainWindow::<MinSig>::default();
        for h in 1..=(CHAIN_WINDOW as u64 + 100) {
            w.push(entry(h));
        }
        let one = |_: &CommittedEntry<MinSig>| 1;
        assert!(w.range(Height::new(1), 64, usize::MAX, one).is_none());
        assert!(w.range(Height::new(100), 64, usize::MAX, one).is_none());
        let r = w.range(Height::new(101), 64, usize::MAX, one).unwrap();
        assert_eq!(r.len(), 64);
        assert_eq!(r[0].block.height, Height::new(101));
        assert_eq!(w.range(Height::new(101), 64, 10, one).unwrap().len(), 10);
        assert_eq!(w.range(Height::new(101), 64, 0, one).unwrap().len(), 1);
        assert!(w
            .range(w.height().saturating_add(1), 64, 10, one)
            .unwrap()
            .is_empty());
        assert!(w.range(Height::MAX, 64, 10, one).unwrap().is_empty());
    }

    #[test]
    fn resuming_takes_a_consecutive_suffix() {
        let w = ChainWindow::resume((500..=520).map(entry).collect()).unwrap();
        assert_eq!((w.first().get(), w.height().get()), (500, 520));
        assert!(ChainWindow::resume(vec![entry(1), entry(3)]).is_none());
        let empty = ChainWindow::<MinSig>::resume(vec![]).unwrap();
        assert_eq!(empty.height(), Height::ZERO);
        let long = ChainWindow::resume((1..=1000).map(entry).collect()).unwrap();
        assert_eq!((long.first().get(), long.height().get()), (745, 1000));
    }
}
