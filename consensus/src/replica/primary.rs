//! Step 1: the election and the primary's proposal. The beacon of height
//! `h - k` (`k = election_lag`) draws the `c + 1` collectors of `(h, v)`, the
//! first of whom is the primary of `h + 1` (pipelining, [`crate::election`]).
//! The primary of view 0 proposes a block from the mempool as soon as it
//! enters the height; votes on it, its own included, wait for the round's
//! signing time on a paced chain. Later views' blocks come from the view-change
//! rule ([`super::new_view`]). The proposal is broadcast and handed to this
//! replica's voter through the loopback (or held until the signing time).

use super::chain::ChainWindow;
use super::sync::{block_bytes, block_header_bytes};
use super::Replica;
use crate::config::ReplicaConfig;
use crate::election::Election;
use crate::messages::{Block, Digest, Message};
use crate::{Height, View};
use beacon::{NodeIndex, Point, Scheme, Time};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The election of `(height, view)` from the beacon of `height - k` (the
/// genesis seed while there is none).
pub(super) fn elect<S: Scheme>(
    config: &ReplicaConfig,
    chain: &ChainWindow<S>,
    height: Height,
    view: View,
) -> Election {
    let electing = height.saturating_sub(config.election_lag);
    let randomness = |round: Height| -> Vec<u8> {
        chain
            .get(round)
            .filter(|_| round > Height::ZERO)
            .map(|e| beacon::chain::randomness(&e.beacon.to_bytes()).to_vec())
            .unwrap_or_else(|| config.genesis_seed.to_vec())
    };
    Election::draw(
        &randomness(electing.saturating_sub(1)),
        &randomness(electing),
        height,
        view,
        config.n,
        config.c + 1,
    )
}

/// Proposals made and primaries drawn at one height.
pub(super) struct Primary {
    proposed: BTreeSet<View>,
    primaries: BTreeMap<View, NodeIndex>,
}

impl Primary {
    /// Nothing proposed or drawn.
    pub(super) fn new() -> Self {
        Primary {
            proposed: BTreeSet::new(),
            primaries: BTreeMap::new(),
        }
    }
}

impl<S: Scheme> Replica<S> {
    /// Step 1: as the primary of the current view, propose a fresh block (once
    /// per view, never during a view change). Our own vote on it waits, like
    /// everyone's, for the round's signing time.
    pub(super) fn propose(&mut self, now: Time) {
        let view = self.view;
        if self.round.view_change.in_progress() || !self.round.primary.proposed.insert(view) {
            return;
        }
        // One block per view, even across a crash: a restarted primary
        // proposes the block it proposed before (`votes.rs`).
        let block = self
            .votes
            .proposal(self.height, view)
            .unwrap_or_else(|| Arc::new(self.fresh_block()));
        let height = self.height;
        if self
            .record()
            .propose(height, view, block.digest(), &block)
            .is_err()
        {
            return;
        }
        let proposal = Message::PrePrepare {
            height: self.height,
            view,
            block,
        };
        self.outbox.broadcast(proposal.clone());
        if now < Time(self.config.signing_time(self.height.get())) {
            self.round.waiting.hold(self.me(), proposal);
        } else {
            self.outbox.loop_back(self.me(), proposal);
        }
    }

    /// The primary of `view` at the current height (elections cached per view).
    pub(super) fn primary_of(&mut self, view: View) -> NodeIndex {
        if let Some(p) = self.round.primary.primaries.get(&view) {
            return *p;
        }
        let p = elect(&self.config, &self.chain, self.height, view).primary;
        self.round.primary.primaries.insert(view, p);
        p
    }

    /// A block for the current height from the mempool, as the primary would
    /// propose it.
    pub fn fresh_block(&self) -> Block {
        let room = self
            .config
            .max_block_bytes
            .saturating_sub(block_header_bytes(self.previous_beacon.len()));
        Block {
            height: self.height,
            parent: self.last_digest(),
            previous_beacon: self.previous_beacon.clone(),
            transactions: self.mempool.batch(self.config.max_batch, room),
        }
    }

    /// Whether `block` may be voted on at the current height: it names the
    /// height, the last finalized block and beacon, and fits the limits.
    pub(super) fn block_is_valid(&self, block: &Block) -> bool {
        block.height == self.height
            && block.parent == self.last_digest()
            && block.previous_beacon == self.previous_beacon
            && block.transactions.len() <= self.config.max_batch
            && block
                .transactions
                .iter()
                .all(|t| t.len() <= self.config.max_transaction_bytes)
            && block_bytes(block) <= self.config.max_block_bytes
    }

    /// Digest of the last finalized block: its certificate names it (checked
    /// against the block when it was committed), so no re-encoding is needed.
    fn last_digest(&self) -> Digest {
        self.chain
            .last()
            .map(|e| e.certificate.digest)
            .unwrap_or([0; 32])
    }
}
