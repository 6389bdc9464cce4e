//! Steps 2 and 5 of an epoch change: reading the finalized chain's control
//! transactions. Every honest member reads the same blocks in the same order,
//! so every one decides the same change, and switches, at the same height.

use super::messages::{Control, EpochChange};
use crate::config::{check_size, ReplicaConfig};
use crate::messages::Block;
use crate::{ConsensusError, Epoch, Height};
use beacon::memo::Memo;
use beacon::reshare::MemberId;
use beacon::{NodeIndex, Scheme};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What the chain decided at one height.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// `n - f` current members proposed `change` by `height`: start it.
    Decided {
        /// The change.
        change: EpochChange,
        /// The height whose block completed the quorum.
        height: Height,
    },
    /// `f' + 1` new members, one of them honest, are ready with keys of
    /// digest `digest` from the resharing `dealers`, the first keys to gather
    /// that many, by `height`: these keys exist, and every new member whose
    /// own keys differ (its resharing qualified other dealers) recombines
    /// them from `dealers` and is ready with them instead, so that the
    /// readies, split by faulty dealers, converge on one set
    /// (`consensus/SAFETY.md`, "The chain names the dealers").
    Named {
        /// The digest of the named keys ([`super::keys_digest`]).
        digest: [u8; 32],
        /// The resharing dealers they combine.
        dealers: Vec<NodeIndex>,
        /// The height whose block gathered the `f' + 1`-th ready.
        height: Height,
    },
    /// `n' - f'` new members are ready with keys of digest `digest` (from the
    /// same resharing dealers) by
    /// `height`: the old epoch ends after `height`.
    Switch {
        /// The last height of the old epoch.
        height: Height,
        /// The new keys' digest ([`super::keys_digest`]).
        digest: [u8; 32],
        /// The resharing dealers the ready members combined.
        dealers: Vec<NodeIndex>,
    },
}

/// Keys a new member is ready with, or the chain named: their digest
/// ([`super::keys_digest`]) and the resharing dealers they combine (as the
/// signed readies and the epoch messages number them, in the old epoch).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NamedKeys {
    /// The digest of the keys.
    pub digest: [u8; 32],
    /// The resharing dealers they combine.
    pub dealers: Vec<NodeIndex>,
}

/// The chain's view of one epoch's membership: the proposals for the next
/// epoch, the decided change, and its readies. Bounded: one proposal per
/// current member and one ready per new member count.
#[derive(Clone, Debug)]
pub struct Governance {
    epoch: Epoch,
    /// Shared: every member of a simulated network holds the same set.
    members: Arc<BTreeSet<MemberId>>,
    quorum: usize,
    /// First proposal of each current member (change digest).
    proposals: BTreeMap<MemberId, [u8; 32]>,
    changes: BTreeMap<[u8; 32], EpochChange>,
    /// Changes whose consensus keys did not verify: their proposals count
    /// for nothing.
    refused: BTreeSet<[u8; 32]>,
    keys_check: ConsensusKeyCheck,
    decided: Option<Decided>,
}

#[derive(Clone, Debug)]
struct Decided {
    change: EpochChange,
    digest: [u8; 32],
    members: BTreeSet<MemberId>,
    quorum: usize,
    /// `f' + 1` of the new epoch: readies that include an honest one.
    vouched: usize,
    /// Each new member's ready (keys digest, resharing dealers): its first,
    /// or the named keys' once it is ready with those.
    readies: BTreeMap<MemberId, NamedKeys>,
    /// The first keys `vouched` new members were ready with
    /// ([`Decision::Named`]).
    named: Option<NamedKeys>,
    switched: bool,
}

/// Why a change cannot follow the current epoch ([`check_change`]).
#[derive(Clone, Debug, thiserror::Error)]
pub enum ChangeRefused {
    /// The change's epoch is not the one after the current epoch.
    #[error("epoch {proposed} does not follow epoch {current}")]
    NotNextEpoch {
        /// The change's epoch.
        proposed: Epoch,
        /// The current epoch.
        current: Epoch,
    },
    /// More members than a `u32` counts.
    #[error("too many members")]
    TooManyMembers,
    /// A member listed twice.
    #[error("a member is listed twice")]
    MemberListedTwice,
    /// Another number of consensus keys than members.
    #[error("{keys} consensus keys for {members} members")]
    ConsensusKeyCount {
        /// Consensus keys listed.
        keys: usize,
        /// Members listed.
        members: usize,
    },
    /// A new member's consensus key is not a valid key with a valid proof of
    /// possession.
    #[error("the consensus key of new member {member} (its place in the change) does not verify: {reason}")]
    ConsensusKey {
        /// The member's place in the change's list.
        member: u32,
        /// Why.
        reason: beacon::Error,
    },
    /// The new member count and `c` make no safe `n = 3f + 2c + 1`
    /// ([`ConsensusError::NetworkSize`]).
    #[error(transparent)]
    UnsafeSize(Arc<ConsensusError>),
    /// A beacon threshold outside `[f + 1, n]` (0 asks for the default).
    #[error("beacon threshold {threshold} outside [f + 1, n] = [{min}, {n}]")]
    BeaconThreshold {
        /// The change's beacon threshold.
        threshold: u32,
        /// The smallest allowed, `f + 1`.
        min: u32,
        /// The new member count, the largest allowed.
        n: u32,
    },
}

/// Whether `change` can follow epoch `epoch`: the next number, distinct
/// members, a safe size and a beacon threshold within it.
pub fn check_change(epoch: Epoch, change: &EpochChange) -> Result<ReplicaShape, ChangeRefused> {
    if Some(change.epoch) != epoch.next() {
        return Err(ChangeRefused::NotNextEpoch {
            proposed: change.epoch,
            current: epoch,
        });
    }
    let n = u32::try_from(change.members.len()).map_err(|_| ChangeRefused::TooManyMembers)?;
    let distinct: BTreeSet<_> = change.members.iter().collect();
    if distinct.len() != change.members.len() {
        return Err(ChangeRefused::MemberListedTwice);
    }
    check_size(n, change.c).map_err(|e| ChangeRefused::UnsafeSize(Arc::new(e)))?;
    let f = (n - 2 * change.c - 1) / 3;
    if change.beacon_threshold > n || (change.beacon_threshold > 0 && change.beacon_threshold <= f)
    {
        return Err(ChangeRefused::BeaconThreshold {
            threshold: change.beacon_threshold,
            min: f + 1,
            n,
        });
    }
    if change.consensus_keys.len() != change.members.len() {
        return Err(ChangeRefused::ConsensusKeyCount {
            keys: change.consensus_keys.len(),
            members: change.members.len(),
        });
    }
    Ok(ReplicaShape { n, f, c: change.c })
}

/// Checks every consensus key a change lists, with its proof of possession,
/// under scheme `S` (two pairings each): what an old member does before it
/// counts a proposal of the change, and a proposer before it signs one.
pub fn check_consensus_keys<S: Scheme>(change: &EpochChange) -> Result<(), ChangeRefused> {
    match crate::keys::EpochKeys::<S>::from_listings(change.epoch, &change.consensus_keys, true) {
        Ok(_) => Ok(()),
        Err(ConsensusError::ConsensusKey { member, source }) => Err(ChangeRefused::ConsensusKey {
            member,
            reason: source,
        }),
        Err(other) => Err(ChangeRefused::UnsafeSize(Arc::new(other))),
    }
}

/// How a member checks a change's consensus keys ([`check_consensus_keys`]
/// for its scheme, shared between simulated members through the memo).
#[derive(Clone)]
pub struct ConsensusKeyCheck(Arc<KeysCheckFn>);

/// The function behind a [`ConsensusKeyCheck`].
type KeysCheckFn = dyn Fn(&EpochChange) -> Result<(), ChangeRefused> + Send + Sync;

impl ConsensusKeyCheck {
    /// The check of scheme `S`, its verdicts shared through `memo` (keyed by
    /// the change's digest).
    pub fn new<S: Scheme>(memo: Arc<Memo>) -> Self {
        ConsensusKeyCheck(Arc::new(move |change: &EpochChange| {
            let mut h = Sha256::new();
            h.update(b"consensus keys of change");
            h.update(S::DST);
            h.update(change.digest());
            crate::keys::memoized(&memo, h.finalize().into(), || {
                check_consensus_keys::<S>(change)
            })
        }))
    }

    fn check(&self, change: &EpochChange) -> Result<(), ChangeRefused> {
        (self.0)(change)
    }
}

impl std::fmt::Debug for ConsensusKeyCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConsensusKeyCheck")
    }
}

/// The size of an epoch's replica set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaShape {
    /// Replicas.
    pub n: u32,
    /// Byzantine replicas tolerated.
    pub f: u32,
    /// Extra collectors' slack.
    pub c: u32,
}

impl Governance {
    /// Epoch `epoch` with `members` under `config`; `keys_check` checks the
    /// consensus keys of a proposed change.
    pub fn new(
        epoch: Epoch,
        members: Arc<BTreeSet<MemberId>>,
        config: &ReplicaConfig,
        keys_check: ConsensusKeyCheck,
    ) -> Self {
        Governance {
            epoch,
            members,
            quorum: (config.n - config.f) as usize,
            proposals: BTreeMap::new(),
            changes: BTreeMap::new(),
            refused: BTreeSet::new(),
            keys_check,
            decided: None,
        }
    }

    /// The current epoch.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The decided change, if any.
    pub fn decided(&self) -> Option<&EpochChange> {
        self.decided.as_ref().map(|d| &d.change)
    }

    /// Reads a finalized block's control transactions.
    pub fn on_finalized(&mut self, block: &Block) -> Vec<Decision> {
        let mut out = Vec::new();
        // Keys named by this block, said once it is read: not when the same
        // block also gathers the switch.
        let mut named = None;
        for tx in &block.transactions {
            let Some(control) = Control::from_transaction(tx) else {
                continue;
            };
            if !control.verify() {
                continue;
            }
            match control {
                Control::Propose { change, member, .. } => {
                    self.on_proposal(change, member, block.height, &mut out)
                }
                Control::Ready(ready) => {
                    let Some(d) = self.decided.as_mut() else {
                        continue;
                    };
                    if d.switched
                        || ready.epoch != d.change.epoch
                        || ready.change != d.digest
                        || !d.members.contains(&ready.member)
                    {
                        continue;
                    }
                    let key = NamedKeys {
                        digest: ready.digest,
                        dealers: ready.dealers,
                    };
                    // A member's first ready counts; a later one only when it
                    // moves to the named keys (once: those stay its ready).
                    match d.readies.get(&ready.member) {
                        None => {}
                        Some(first) if d.named.as_ref() == Some(&key) && *first != key => {}
                        Some(_) => continue,
                    }
                    d.readies.insert(ready.member, key.clone());
                    let count = d.readies.values().filter(|v| **v == key).count();
                    if count >= d.quorum {
                        d.switched = true;
                        out.push(Decision::Switch {
                            height: block.height,
                            digest: key.digest,
                            dealers: key.dealers,
                        });
                    } else if count >= d.vouched && d.named.is_none() {
                        d.named = Some(key.clone());
                        named = Some(Decision::Named {
                            digest: key.digest,
                            dealers: key.dealers,
                            height: block.height,
                        });
                    }
                }
            }
        }
        let switched = self.decided.as_ref().is_some_and(|d| d.switched);
        out.extend(named.filter(|_| !switched));
        out
    }

    fn on_proposal(
        &mut self,
        change: EpochChange,
        member: MemberId,
        height: Height,
        out: &mut Vec<Decision>,
    ) {
        if self.decided.is_some()
            || !self.members.contains(&member)
            || self.proposals.contains_key(&member)
        {
            return;
        }
        let Ok(shape) = check_change(self.epoch, &change) else {
            return;
        };
        let digest = change.digest();
        // Every consensus key the change would bring in is checked once,
        // before any proposal of it counts: a key without a proof of
        // possession could forge certificates of the new epoch.
        if self.refused.contains(&digest) {
            return;
        }
        if !self.changes.contains_key(&digest) && self.keys_check.check(&change).is_err() {
            self.refused.insert(digest);
            return;
        }
        self.proposals.insert(member, digest);
        self.changes.entry(digest).or_insert(change);
        let count = self.proposals.values().filter(|d| **d == digest).count();
        if count < self.quorum {
            return;
        }
        let Some(change) = self.changes.get(&digest).cloned() else {
            return;
        };
        self.decided = Some(Decided {
            members: change.members.iter().copied().collect(),
            quorum: (shape.n - shape.f) as usize,
            vouched: (shape.f + 1) as usize,
            change: change.clone(),
            digest,
            readies: BTreeMap::new(),
            named: None,
            switched: false,
        });
        self.proposals.clear();
        self.changes.clear();
        out.push(Decision::Decided { change, height });
    }
}
