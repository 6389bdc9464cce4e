//! Catch-up: a replica that sees messages of later heights asks their sender
//! for the finalized heights it missed (at most once per half view timeout): at
//! once for a message two heights ahead or once more than `f` replicas sent
//! messages of later heights, else at its view timer; it
//! answers such requests from its chain window or, for older heights, through
//! its driver's store ([`super::Output::SyncFromStore`]). A response's entries
//! are checked and applied one height at a time: the entry of the current
//! height is recorded (block, certificate, beacon), the post-step finalizes it,
//! and the rest waits for the next height, where it is replayed.

use super::outbox::Origin;
use super::Replica;
use crate::messages::{Block, CommittedEntry, Message};
use crate::Height;
use beacon::{NodeIndex, Scheme, Time};
use std::sync::Arc;

/// Most entries in one sync response.
pub const SYNC_BATCH: usize = 64;
/// Most bytes of blocks in one sync response (one entry is always sent, so a
/// response is at most this plus one block and its proof).
pub const SYNC_RESPONSE_BYTES: usize = 4 << 20;

/// Bytes of a block's wire encoding: height, parent, previous beacon, and each
/// transaction with its 8-byte length.
pub fn block_bytes(block: &Block) -> usize {
    block_header_bytes(block.previous_beacon.len())
        + block
            .transactions
            .iter()
            .map(|t| t.len() + 8)
            .sum::<usize>()
}

/// Bytes of a block's encoding besides its transactions.
pub(super) fn block_header_bytes(previous_beacon: usize) -> usize {
    8 + 32 + 8 + previous_beacon + 8
}

/// Catch-up state (kept across heights).
pub(super) struct CatchUp<S: Scheme> {
    /// When we last asked a peer.
    last_request: Option<Time>,
    /// Entries of later heights from the last response, and their sender.
    rest: Option<(NodeIndex, Vec<Arc<CommittedEntry<S>>>)>,
    /// Requests sent to replicas found ahead by their messages: the next one
    /// goes to the next of them in turn.
    asked: usize,
}

impl<S: Scheme> CatchUp<S> {
    /// Nothing asked.
    pub(super) fn new() -> Self {
        CatchUp {
            last_request: None,
            rest: None,
            asked: 0,
        }
    }

    /// The rest of a response, to replay at the next height.
    pub(super) fn take_rest(&mut self) -> Option<(NodeIndex, Message<S>)> {
        let (from, entries) = self.rest.take()?;
        Some((from, Message::SyncResponse { entries }))
    }
}

impl<S: Scheme> Replica<S> {
    /// Asks the next of the replicas that sent messages of later heights (in
    /// turn: one of them may be Byzantine and never answer), unless we asked
    /// recently.
    pub(super) fn sync_with_someone_ahead(&mut self, now: Time) {
        if let Some(peer) = self.future.sender(self.sync.asked) {
            if self.maybe_sync(now, peer) {
                self.sync.asked = self.sync.asked.wrapping_add(1);
            }
        }
    }

    /// Asks `from` for the heights from ours on, unless we asked recently;
    /// whether it asked.
    pub(super) fn maybe_sync(&mut self, now: Time, from: NodeIndex) -> bool {
        let interval = self.config.view_change_timeout_us / 2;
        if self
            .sync
            .last_request
            .is_some_and(|t| now.micros_since(t) < interval)
        {
            return false;
        }
        self.sync.last_request = Some(now);
        let from_height = self.height;
        self.outbox.send(from, Message::SyncRequest { from_height });
        true
    }

    /// Catch-up (`PROTOCOL.md`, "Catch-up"): a peer asks for finalized heights from
    /// `from_height` on: answered from
    /// the chain window, bounded in entries and bytes, or from the store.
    pub(super) fn on_sync_request(&mut self, from: NodeIndex, from_height: Height) {
        match self
            .chain
            .range(from_height, SYNC_BATCH, SYNC_RESPONSE_BYTES, |e| {
                block_bytes(&e.block)
            }) {
            None => self.outbox.sync_from_store(from, from_height),
            Some(entries) if entries.is_empty() => {}
            Some(entries) => self.outbox.send(from, Message::SyncResponse { entries }),
        }
    }

    /// Catch-up (`PROTOCOL.md`, "Catch-up"): finalized heights from a peer. The
    /// entry of the current height, if it
    /// verifies (block, certificate and beacon), is recorded for the post-step
    /// to commit and finalize; later entries wait for the next height.
    pub(super) fn on_sync_response(
        &mut self,
        origin: Origin,
        entries: Vec<Arc<CommittedEntry<S>>>,
    ) {
        let h = self.height;
        let mut entries = entries
            .into_iter()
            .skip_while(|e| e.block.height < h)
            .peekable();
        let Some(entry) = entries.next_if(|e| e.block.height == h) else {
            return;
        };
        let cert = &entry.certificate;
        let beacon_ok = self
            .verifier
            .verify_beacon(self.round.beacon.message(), &entry.beacon);
        if cert.height != h
            || cert.digest != entry.block.digest()
            || !self.block_is_valid(&entry.block)
            || !self.certificate_is_valid(cert)
            || !beacon_ok
        {
            return;
        }
        self.round.blocks.insert(cert.digest, entry.block.clone());
        if self.round.beacon.known().is_none() {
            self.learn_beacon(entry.beacon);
        }
        self.round.commit.certify(cert.clone());
        // A full response may have a successor: ask again as soon as needed.
        self.sync.last_request = None;
        let rest: Vec<_> = entries.collect();
        if !rest.is_empty() {
            self.sync.rest = Some((origin.from, rest));
        }
    }
}
