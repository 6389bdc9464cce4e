//! Step 1's input: client transactions waiting for a block, bounded in count
//! and bytes, without duplicates; a committed block's transactions leave.

use crate::config::ReplicaConfig;
use crate::messages::{Block, Digest};
use sha2::{Digest as _, Sha256};
use std::collections::{HashSet, VecDeque};

/// Pending client transactions, oldest first.
pub(super) struct Mempool {
    transactions: VecDeque<Vec<u8>>,
    index: HashSet<Digest>,
    bytes: usize,
}

impl Mempool {
    /// Empty.
    pub fn new() -> Self {
        Mempool {
            transactions: VecDeque::new(),
            index: HashSet::new(),
            bytes: 0,
        }
    }

    /// Adds `tx` unless it is too large, a duplicate, or the pool is full.
    pub fn add(&mut self, config: &ReplicaConfig, tx: Vec<u8>) {
        if tx.len() > config.max_transaction_bytes
            || self.transactions.len() >= config.mempool_limit
            || self.bytes + tx.len() > config.mempool_bytes_limit
        {
            return;
        }
        let id: Digest = Sha256::digest(&tx).into();
        if self.index.insert(id) {
            self.bytes += tx.len();
            self.transactions.push_back(tx);
        }
    }

    /// The oldest transactions, at most `max` of them and `room` bytes of
    /// encoding (each costs its length plus 8).
    pub fn batch(&self, max: usize, mut room: usize) -> Vec<Vec<u8>> {
        self.transactions
            .iter()
            .take(max)
            .take_while(|t| match room.checked_sub(t.len() + 8) {
                Some(left) => {
                    room = left;
                    true
                }
                None => false,
            })
            .cloned()
            .collect()
    }

    /// Drops `block`'s transactions, in one pass.
    pub fn remove_committed(&mut self, block: &Block) {
        let committed: HashSet<&[u8]> = block
            .transactions
            .iter()
            .filter(|tx| self.index.remove(&Digest::from(Sha256::digest(tx))))
            .map(Vec::as_slice)
            .collect();
        if !committed.is_empty() {
            self.bytes -= committed.iter().map(|t| t.len()).sum::<usize>();
            self.transactions
                .retain(|t| !committed.contains(t.as_slice()));
        }
    }
}
