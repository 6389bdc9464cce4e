//! The state of the height being decided, split by role: each part is owned
//! by its role's file (its fields are private there); `Round` only holds them
//! together, with what every role reads — the current election and the blocks
//! known at this height.

use super::beacon_round::BeaconRound;
use super::chain::ChainWindow;
use super::collector::Collector;
use super::commit::Commit;
use super::pending::Waiting;
use super::primary::{elect, Primary};
use super::retransmit::Retransmit;
use super::view_change::ViewChanges;
use super::voter::Voter;
use crate::config::ReplicaConfig;
use crate::election::Election;
use crate::messages::{Block, Digest};
use crate::{Height, View};
use beacon::Scheme;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Everything about the height being decided, by role.
pub(super) struct Round<S: Scheme> {
    /// Primary and collectors of the current view.
    pub election: Election,
    /// Blocks of this height known here (proposed, fetched or synced), by digest.
    pub blocks: BTreeMap<Digest, Arc<Block>>,
    /// Step 1: proposals made, primaries drawn.
    pub primary: Primary,
    /// Steps 2-3: what this replica accepted and voted.
    pub voter: Voter<S>,
    /// Step 3: shares tallied as a collector.
    pub collector: Collector<S>,
    /// Step 4: the beacon round.
    pub beacon: BeaconRound<S>,
    /// Steps 3-4: the certificate and the committed block.
    pub commit: Commit<S>,
    /// Step 5: view changes.
    pub view_change: ViewChanges<S>,
    /// Steps 2-3: what is sent again.
    pub retransmit: Retransmit<S>,
    /// Messages waiting for a later view or the signing time.
    pub waiting: Waiting<S>,
}

impl<S: Scheme> Round<S> {
    /// Height `height` at view 0, chained on `previous_beacon`.
    pub(super) fn new(
        config: &ReplicaConfig,
        chain: &ChainWindow<S>,
        height: Height,
        previous_beacon: &[u8],
    ) -> Self {
        Round {
            election: elect(config, chain, height, View::ZERO),
            blocks: BTreeMap::new(),
            primary: Primary::new(),
            voter: Voter::new(),
            collector: Collector::new(),
            beacon: BeaconRound::new(height, previous_beacon, config.n),
            commit: Commit::new(),
            view_change: ViewChanges::new(),
            retransmit: Retransmit::new(),
            waiting: Waiting::new(),
        }
    }
}
