//! Step 1's input: client transactions waiting for a block, bounded in count
//! and bytes, without duplicates; a committed block's transactions leave.
//! Membership control transactions have a lane of their own, ahead of the
//! clients' and bounded apart: a backlog or a flood of client transactions
//! neither delays nor drops a change of members.

use crate::config::ReplicaConfig;
use crate::messages::{Block, Digest};
use sha2::{Digest as _, Sha256};
use std::collections::{HashSet, VecDeque};

/// Most control transactions pending (members send a few per change, and
/// the member layer bounds what each signer gets in).
const CONTROL_LIMIT: usize = 4096;

/// Pending client transactions, oldest first.
pub(super) struct Mempool {
    /// Control transactions, oldest first; proposed before the others.
    controls: VecDeque<Vec<u8>>,
    transactions: VecDeque<Vec<u8>>,
    index: HashSet<Digest>,
    bytes: usize,
}

impl Mempool {
    /// Empty.
    pub(super) fn new() -> Self {
        Mempool {
            controls: VecDeque::new(),
            transactions: VecDeque::new(),
            index: HashSet::new(),
            bytes: 0,
        }
    }

    /// Adds `tx` unless it is too large, a duplicate, or the pool is full.
    pub(super) fn add(&mut self, config: &ReplicaConfig, tx: Vec<u8>) {
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

    /// Adds the control transaction `tx` to its lane unless it is too large,
    /// a duplicate, or the lane is full.
    pub(super) fn add_control(&mut self, config: &ReplicaConfig, tx: Vec<u8>) {
        if tx.len() > config.max_transaction_bytes || self.controls.len() >= CONTROL_LIMIT {
            return;
        }
        let id: Digest = Sha256::digest(&tx).into();
        if self.index.insert(id) {
            self.bytes += tx.len();
            self.controls.push_back(tx);
        } else if let Some(at) = self.transactions.iter().position(|t| *t == tx) {
            // A client sent it first: it moves to the control lane rather
            // than wait behind the clients' backlog.
            self.transactions.remove(at);
            self.controls.push_back(tx);
        }
    }

    /// The oldest transactions, control ones first, at most `max` of them and
    /// `room` bytes of encoding (each costs its length plus 8).
    pub(super) fn batch(&self, max: usize, mut room: usize) -> Vec<Vec<u8>> {
        self.controls
            .iter()
            .chain(&self.transactions)
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
    pub(super) fn remove_committed(&mut self, block: &Block) {
        let committed: HashSet<&[u8]> = block
            .transactions
            .iter()
            .filter(|tx| self.index.remove(&Digest::from(Sha256::digest(tx))))
            .map(Vec::as_slice)
            .collect();
        if !committed.is_empty() {
            self.bytes -= committed.iter().map(|t| t.len()).sum::<usize>();
            self.controls.retain(|t| !committed.contains(t.as_slice()));
            self.transactions
                .retain(|t| !committed.contains(t.as_slice()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(transactions: Vec<Vec<u8>>) -> Block {
        Block {
            height: crate::Height::new(1),
            parent: [0; 32],
            previous_beacon: vec![],
            transactions,
        }
    }

    /// A change of members must not wait behind, or be refused by, a backlog of
    /// client transactions (an anonymous flood would otherwise veto it).
    #[test]
    fn control_transactions_go_first_and_a_full_pool_does_not_refuse_them() {
        let config = ReplicaConfig::new(4, 0)
            .unwrap()
            .with(|s| s.mempool_limit = 3)
            .unwrap();
        let mut pool = Mempool::new();
        for i in 0..5u8 {
            pool.add(&config, vec![i; 8]);
        }
        assert_eq!(pool.batch(10, 1 << 20).len(), 3, "the client pool is full");
        pool.add_control(&config, b"control-a".to_vec());
        // A client sent a member's control transaction first: it moves over.
        pool.add(&config, b"control-b".to_vec());
        pool.remove_committed(&block(vec![vec![0; 8]]));
        pool.add(&config, b"control-b".to_vec());
        pool.add_control(&config, b"control-b".to_vec());
        let batch = pool.batch(3, 1 << 20);
        assert_eq!(
            batch,
            vec![b"control-a".to_vec(), b"control-b".to_vec(), vec![1; 8]]
        );
        pool.remove_committed(&block(batch));
        assert_eq!(pool.batch(10, 1 << 20), vec![vec![2; 8]]);
        assert_eq!(pool.bytes, 8);
    }
}
