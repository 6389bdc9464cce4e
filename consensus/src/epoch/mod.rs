//! Membership epochs: how the consensus itself changes the member set and
//! reshares the beacon key, while the group key — and so the beacon chain —
//! stays the same.
//!
//! # Protocol
//! 1. **Propose.** The operator of each member asks it to propose epoch `e + 1`
//!    ([`EpochChange`]: the new members by member key, `c`, the beacon
//!    threshold). The member signs a [`Control::Propose`] transaction and hands
//!    it to every member ([`EpochMessage::Control`]), whose replicas put it in a
//!    block like any transaction.
//! 2. **Decide** ([`Governance`]). At the first finalized height `h` by which
//!    the chain holds `n - f` distinct current members' proposals of one change,
//!    every honest member decides it: the same height everywhere, since the chain
//!    is. Old members invite the members that join ([`EpochMessage::Invite`]); a
//!    joiner believes an invitation once `f + 1` old members sent the same one.
//! 3. **Transition** ([`Transition`]). The old members reshare the beacon key to
//!    the new ones (`beacon::reshare`), and the new members run a fresh DKG for
//!    the consensus keys: the fast-path threshold `3f + c + 1` cannot survive
//!    silent dealers in a resharing, and these keys need not stay the same.
//! 4. **Ready.** A new member holding both signs a [`Control::Ready`] with the
//!    digest of the new public keys ([`keys_digest`]) and hands it to the old
//!    members.
//! 5. **Switch.** At the first finalized height `h'` by which the chain holds
//!    `n' - f'` new members' readies with one digest, every old member ends its
//!    replica after `h'`: what that replica did for `h' + 1` is dropped, never
//!    sent. The new members run the new epoch's replica from `h' + 1`, resuming
//!    from the chain up to `h'` (a joiner from `f + 1` identical
//!    [`EpochMessage::Handoff`]s); the beacon of `h' + 1` signs the beacon of
//!    `h'` under the same group key. Members that leave erase their shares.
//!
//!    Readies split by faulty dealers converge: the first keys that `f' + 1`
//!    new members are ready with are named by the chain
//!    ([`Decision::Named`]; joiners learn them from `f + 1` old members'
//!    [`EpochMessage::Named`]), and every new member whose keys differ
//!    recombines those and is ready with them (`consensus/SAFETY.md`, "The
//!    chain names the dealers").
//!
//! A change that never gathers its readies leaves the old epoch running: the
//! chain never waits for a resharing.
//!
//! # Faults and late members
//! - *Control transactions* ride a lane of the mempool of their own, ahead of
//!   client transactions and bounded apart (a client backlog or flood neither
//!   delays nor drops a change); a member forwards at most 8 distinct ones per
//!   signer and epoch, only from parties of its directory.
//! - *Loss and partitions.* A member sends its pending control transactions
//!   again, an old member its invitations (until the switch), and a new member
//!   with its keys asks the old members for the handoff
//!   ([`EpochMessage::HandoffRequest`]), every DKG phase length, until done.
//! - *Members that decide late* (behind the others when the decision was
//!   finalized) keep the other members' resharing and DKG messages that come
//!   before their own transition starts (bounded per sender) and replay them.
//!   A late member may have taken a dealer the others had given up on: the
//!   ready carries the dealers each member's resharing combined
//!   ([`EpochReady::dealers`]), the switch names those of the quorum, and a
//!   member whose keys differ recombines its share from them
//!   ([`Transition::adopt`]); the new members' DKG likewise adopts the QUAL
//!   that `n - f` members signed when this member holds its shares.
//! - *Members behind the switch* ask for the chain as before; members that
//!   left the epoch answer them from their store (heights up to the switch
//!   carry the old epoch's certificates), so a lagging leaver still retires
//!   and a lagging stayer still switches.
//! - *Restarted members* read the control transactions of their stored chain
//!   window before resuming: the proposals they had counted before they
//!   stopped, and a decision or a switch they missed.
//! - *Members that crashed during the change* start their transition again
//!   from the decision in their stored chain: an old member deals the same
//!   deal (derived from its old share and the session), and a new member asks
//!   the dealers for the deals, sub-shares, shares and certificate it lacks
//!   ([`ReshareWire::Request`], `SessionMessage::Request`), which they send
//!   it alone, point to point; old members keep what they dealt for a few
//!   phase lengths after the switch to answer. A new member whose own
//!   resharing ended short waits and recombines its share from the dealers
//!   the chain names. See `consensus/SAFETY.md`, "A member's part of a change
//!   survives its crash".
//! - *Members partitioned away* during the change ask the same way once they
//!   can reach the others; one that went on to a later DKG attempt alone is
//!   taken back to the agreed one by its certificate.
//!
//! # Identities and indices
//! Drivers address members by a *directory* index: the member keys of every
//! party the transport knows (for the simulator, its nodes; the genesis members
//! first, in genesis order). Each epoch numbers its members `0..n` in its own
//! list; [`EpochView`] translates.

mod governance;
mod messages;
mod transition;

pub use governance::{
    check_change, check_consensus_keys, ChangeRefused, ConsensusKeyCheck, Decision, Governance,
    NamedKeys, ReplicaShape,
};
pub use messages::{
    Control, CurrentEpoch, EpochChange, EpochMessage, EpochReady, Invitation, ReshareWire,
};
pub use transition::{
    keys_digest, Transition, TransitionFailure, TransitionInput, TransitionOutput, TransitionTimer,
};

use crate::config::ReplicaConfig;
use crate::keys::EpochKeys;
use crate::{ConsensusError, DirectoryIndex, Epoch};
use beacon::dkg::relay::{SigningKey, VerifyingKey};
use beacon::memo::Memo;
use beacon::multisig::{ConsensusListing, ConsensusSecretKey};
use beacon::reshare::MemberId;
use beacon::{NodeIndex, Scheme};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The member id of a member key.
pub fn member_id(key: &VerifyingKey) -> MemberId {
    MemberId(key.to_bytes())
}

/// One epoch as a member sees it: its number, its members (directory indices,
/// by epoch index), their consensus keys and its replica configuration.
#[derive(Clone, Debug)]
pub struct EpochView {
    /// The epoch (0 for the genesis members).
    pub number: Epoch,
    /// Directory index of each member, by epoch index.
    pub members: Vec<DirectoryIndex>,
    /// The replicas' configuration in this epoch.
    pub config: ReplicaConfig,
    /// Each member's consensus key and proof of possession, by epoch index:
    /// the genesis directory's, then those the chain recorded with each
    /// change (shared by every member of a simulated epoch).
    pub consensus: Arc<Vec<ConsensusListing>>,
    position: Positions,
}

/// The epoch index of each member by directory index, as [`EpochView::new`]
/// found it.
#[derive(Clone, Debug)]
enum Positions {
    /// Member `i` is party `i`, for every `i` below the count (the genesis
    /// epoch): no map. A map each was most of what a simulated genesis member
    /// held of its own (`n` entries per member, `n^2` in all).
    Identity(u32),
    /// Any other epoch.
    Map(BTreeMap<DirectoryIndex, NodeIndex>),
}

impl EpochView {
    /// Epoch `number` with `members` (directory indices by epoch index) and
    /// their consensus keys `consensus`.
    pub fn new(
        number: Epoch,
        members: Vec<DirectoryIndex>,
        config: ReplicaConfig,
        consensus: Arc<Vec<ConsensusListing>>,
    ) -> Self {
        let identity = members.iter().enumerate().all(|(i, d)| d.as_usize() == i);
        let position = if identity {
            Positions::Identity(members.len() as u32)
        } else {
            Positions::Map(
                members
                    .iter()
                    .enumerate()
                    .map(|(i, d)| (*d, NodeIndex(i as u32)))
                    .collect(),
            )
        };
        EpochView {
            number,
            members,
            config,
            consensus,
            position,
        }
    }

    /// The genesis epoch: directory members `0..config.n`, with the
    /// directory's consensus keys.
    pub fn genesis(config: ReplicaConfig, directory: &Directory) -> Self {
        let members: Vec<DirectoryIndex> = (0..config.n).map(DirectoryIndex::new).collect();
        let consensus = directory.listings_of(&members);
        EpochView::new(Epoch::ZERO, members, config, consensus)
    }

    /// The epoch's public consensus keys, checked as points (their proofs
    /// were checked where they entered: the genesis directory, the change
    /// that recorded them), shared between simulated members.
    pub fn consensus_keys<S: Scheme>(
        &self,
        memo: &Memo,
    ) -> Result<Arc<EpochKeys<S>>, ConsensusError> {
        let id = crate::keys::binding(self.number, &self.consensus);
        crate::keys::memoized(memo, id, || {
            EpochKeys::<S>::from_listings(self.number, &self.consensus, false).map(Arc::new)
        })
    }

    /// The epoch index of directory member `d`, if it is a member.
    pub fn index_of(&self, d: DirectoryIndex) -> Option<NodeIndex> {
        match &self.position {
            Positions::Identity(count) => (d.get() < *count).then(|| NodeIndex(d.get())),
            Positions::Map(map) => map.get(&d).copied(),
        }
    }

    /// The directory index of epoch member `i`.
    pub fn directory_of(&self, i: NodeIndex) -> Option<DirectoryIndex> {
        self.members.get(i.0 as usize).copied()
    }

    /// The member ids, by epoch index.
    pub fn ids(&self, directory: &Directory) -> Vec<MemberId> {
        self.members.iter().map(|d| directory.id(*d)).collect()
    }
}

/// The member keys of every party the transport can reach, by directory
/// index, and each party's consensus key with its proof of possession.
#[derive(Clone, Debug)]
pub struct Directory {
    keys: Arc<Vec<VerifyingKey>>,
    consensus: Arc<Vec<ConsensusListing>>,
    /// The scheme under which every listing's proof was checked, if one was
    /// ([`Directory::checked`]).
    checked: Option<beacon::SchemeId>,
    /// Index by member id, built at the first lookup (only changes of members
    /// look up): every member of a simulated network holds a directory, and an
    /// index each was `n^2` entries and hashes at construction.
    position: std::sync::OnceLock<BTreeMap<MemberId, DirectoryIndex>>,
}

impl Directory {
    /// The directory of member keys `keys` and consensus keys `consensus`
    /// (one each per party, in the same order).
    pub fn new(
        keys: Arc<Vec<VerifyingKey>>,
        consensus: Arc<Vec<ConsensusListing>>,
    ) -> Result<Self, ConsensusError> {
        if keys.len() != consensus.len() {
            return Err(ConsensusError::ConsensusKeyCount {
                listed: consensus.len() as u32,
                n: keys.len() as u32,
            });
        }
        Ok(Directory {
            keys,
            consensus,
            checked: None,
            position: std::sync::OnceLock::new(),
        })
    }

    /// This directory with every party's consensus key checked under scheme
    /// `S`, its proof of possession included (one batch): a real node checks
    /// its `[[peers]]` so at start, and a genesis member built from a checked
    /// directory does not check its members again. The error names the first
    /// party whose listing does not verify.
    pub fn checked<S: Scheme>(mut self) -> Result<Self, ConsensusError> {
        EpochKeys::<S>::from_listings(Epoch::ZERO, &self.consensus, true)?;
        self.checked = Some(S::ID);
        Ok(self)
    }

    /// Whether every listing was checked under scheme `S`.
    pub fn is_checked<S: Scheme>(&self) -> bool {
        self.checked == Some(S::ID)
    }

    /// The directory of parties whose keys derive from `seeds`, one each
    /// ([`crate::member_key`], [`crate::consensus_key`]): the tests'; the
    /// simulator derives the same on its threads.
    pub fn derived<S: Scheme>(seeds: &[[u8; 32]]) -> Self {
        let keys = seeds
            .iter()
            .map(|s| crate::member_key(s).verifying_key())
            .collect();
        let listings = seeds
            .iter()
            .map(|s| crate::consensus_key(s).listing::<S>())
            .collect();
        Directory {
            keys: Arc::new(keys),
            consensus: Arc::new(listings),
            checked: None,
            position: std::sync::OnceLock::new(),
        }
    }

    /// Party `d`'s consensus key and proof.
    pub fn listing(&self, d: DirectoryIndex) -> Option<&ConsensusListing> {
        self.consensus.get(d.as_usize())
    }

    /// The consensus keys of the parties of member ids `members`, in that
    /// order: what a proposer lists in a change ([`EpochChange`]). `None`
    /// when one is not in the directory.
    pub fn listings_for(&self, members: &[MemberId]) -> Option<Vec<ConsensusListing>> {
        members
            .iter()
            .map(|m| self.index_of(m).and_then(|d| self.listing(d).cloned()))
            .collect()
    }

    /// Every party's consensus key and proof, by directory index.
    pub fn listings(&self) -> &Arc<Vec<ConsensusListing>> {
        &self.consensus
    }

    /// The consensus keys of `members` (directory indices), in that order;
    /// the whole list, shared, when `members` are the first parties.
    pub fn listings_of(&self, members: &[DirectoryIndex]) -> Arc<Vec<ConsensusListing>> {
        let prefix = members.iter().enumerate().all(|(i, d)| d.as_usize() == i);
        if prefix && members.len() == self.consensus.len() {
            return self.consensus.clone();
        }
        Arc::new(
            members
                .iter()
                .filter_map(|d| self.listing(*d).cloned())
                .collect(),
        )
    }

    /// Number of parties.
    pub fn len(&self) -> u32 {
        self.keys.len() as u32
    }

    /// Whether the directory is empty.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Party `d`'s member key.
    pub fn key(&self, d: DirectoryIndex) -> Option<&VerifyingKey> {
        self.keys.get(d.as_usize())
    }

    /// Party `d`'s member id (the zero id when out of range).
    pub fn id(&self, d: DirectoryIndex) -> MemberId {
        self.key(d).map(member_id).unwrap_or(MemberId([0; 32]))
    }

    /// The directory index of `id`.
    pub fn index_of(&self, id: &MemberId) -> Option<DirectoryIndex> {
        self.position
            .get_or_init(|| {
                self.keys
                    .iter()
                    .enumerate()
                    .map(|(i, k)| (member_id(k), DirectoryIndex::new(i as u32)))
                    .collect()
            })
            .get(id)
            .copied()
    }

    /// Every party's member key, by directory index.
    pub fn keys(&self) -> &Arc<Vec<VerifyingKey>> {
        &self.keys
    }

    /// The member keys of `members` (directory indices), in that order.
    pub fn keys_of(&self, members: &[DirectoryIndex]) -> Arc<Vec<VerifyingKey>> {
        Arc::new(
            members
                .iter()
                .filter_map(|d| self.key(*d).copied())
                .collect(),
        )
    }
}

/// Who a member is, in the DKG and in changes of members: its directory
/// index, the member key it signs its DKG and resharing broadcasts, results
/// and control transactions with, its consensus key, and the directory
/// (every party's member key and consensus key). The simulator derives the
/// keys from a member's seed ([`crate::member_key`],
/// [`crate::consensus_key`]); a real node reads them from its key files.
#[derive(Clone, Debug)]
pub struct MemberIdentity {
    /// This member's directory index (its index in the genesis epoch for a
    /// genesis member).
    pub me: DirectoryIndex,
    /// Its member key.
    pub key: SigningKey,
    /// Its consensus key (votes and view changes).
    pub consensus: ConsensusSecretKey,
    /// The member keys of everyone the transport reaches, by directory index:
    /// the genesis members first, then parties that may join later.
    pub directory: Directory,
}

impl MemberIdentity {
    /// Directory member `me` with member key `key` and consensus key
    /// `consensus`, among the parties of `directory`.
    pub fn new(
        me: DirectoryIndex,
        key: SigningKey,
        consensus: ConsensusSecretKey,
        directory: Directory,
    ) -> Self {
        MemberIdentity {
            me,
            key,
            consensus,
            directory,
        }
    }

    /// Whether the directory holds this member's keys at its index: its
    /// member key, and its consensus key under scheme `S`.
    pub fn is_listed<S: Scheme>(&self) -> bool {
        self.directory.key(self.me) == Some(&self.key.verifying_key())
            && self
                .directory
                .listing(self.me)
                .is_some_and(|l| crate::keys::lists::<S>(l, &self.consensus))
    }
}

impl ReplicaConfig {
    /// The configuration of the next epoch: the same protocol parameters and
    /// genesis with `n` replicas, `c` extra collectors and beacon threshold
    /// `beacon_threshold` (0: `f + 1`).
    pub fn resized(&self, n: u32, c: u32, beacon_threshold: u32) -> Result<Self, ConsensusError> {
        let mut next = ReplicaConfig::sized(n, c)?;
        if beacon_threshold > 0 {
            next.beacon_threshold = beacon_threshold;
        }
        next.election_lag = self.election_lag;
        next.period = self.period;
        next.genesis_time_us = self.genesis_time_us;
        next.genesis_seed = self.genesis_seed;
        next.max_clock_skew_us = self.max_clock_skew_us;
        next.fast_path_timeout_us = self.fast_path_timeout_us;
        next.view_change_timeout_us = self.view_change_timeout_us;
        next.backup_collector_delay_us = self.backup_collector_delay_us;
        next.early_beacon = self.early_beacon;
        next.beacon_shares = self.beacon_shares;
        next.max_batch = self.max_batch;
        next.max_transaction_bytes = self.max_transaction_bytes;
        next.mempool_limit = self.mempool_limit;
        next.mempool_bytes_limit = self.mempool_bytes_limit;
        next.max_block_bytes = self.max_block_bytes.min(next.largest_block_that_fits());
        next.build()
    }
}

#[cfg(test)]
mod tests;
