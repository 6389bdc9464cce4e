//! A member's side of epoch changes ([`crate::epoch`]): proposing, reading the
//! decisions off the finalized chain, running its [`Transition`], telling the
//! old members it is ready, switching replicas at the decided height, and —
//! for a joiner — believing invitations and handoffs from `f + 1` old members.
//!
//! This module owns the bookkeeping ([`EpochState`], handoffs); `decide`
//! proposes, reads decisions off the chain and runs the transition;
//! `switch` takes the change's messages, invitations and handoffs, and
//! switches replicas.

use super::EARLY_LIMIT;
use crate::config::ReplicaConfig;
use crate::epoch::NamedKeys;
use crate::epoch::{
    ChangeRefused, ConsensusKeyCheck, Control, CurrentEpoch, Directory, EpochMessage, EpochView,
    Governance, Invitation, Transition, TransitionFailure,
};
use crate::messages::{CommittedEntry, Message};
use crate::{ConsensusError, DirectoryIndex, Epoch, Height};
use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::multisig::ConsensusListing;
use beacon::reshare::MemberId;
use beacon::Scheme;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// What an epoch change did at this member, for its driver (logs, metrics,
/// persistence).
#[derive(Clone, Debug)]
pub enum EpochEvent<S: Scheme> {
    /// The chain decided the change into `epoch` at `height`.
    Decided {
        /// The new epoch.
        epoch: Epoch,
        /// The height whose block decided it.
        height: Height,
    },
    /// This member holds its keys of `epoch` and told the old members.
    Ready {
        /// The new epoch.
        epoch: Epoch,
        /// [`crate::epoch::keys_digest`] of the new public keys.
        digest: [u8; 32],
    },
    /// This member runs the replica of `epoch` from height `start`: persist
    /// `output` (its new key material) with `config`, `members` (directory
    /// indices by epoch index) and their consensus keys, replacing the
    /// previous key material.
    Started {
        /// The epoch.
        epoch: Epoch,
        /// Its first height.
        start: Height,
        /// Its members, by epoch index (directory indices).
        members: Vec<DirectoryIndex>,
        /// Its replica configuration.
        config: ReplicaConfig,
        /// Its members' consensus keys, by epoch index (the change's).
        consensus: Arc<Vec<ConsensusListing>>,
        /// This member's key material in it.
        output: Arc<DkgOutput<S>>,
    },
    /// This member is not in `epoch`, which began after `height`: it erased its
    /// shares and stopped.
    Retired {
        /// The epoch it is not part of.
        epoch: Epoch,
        /// The last height it finalized.
        height: Height,
    },
    /// The change into `epoch` failed at this member.
    Failed {
        /// The epoch.
        epoch: Epoch,
        /// Why.
        reason: EpochChangeFailure,
    },
}

/// Why a change of members failed at this member ([`EpochEvent::Failed`]);
/// it keeps running the epoch it is in.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EpochChangeFailure {
    /// The operator proposed a change to a member without a member key.
    #[error("this member has no member key to propose with")]
    NoMemberKey,
    /// The operator's proposal cannot follow the current epoch.
    #[error(transparent)]
    Refused(#[from] ChangeRefused),
    /// A member without an identity (no directory) cannot place the new
    /// members.
    #[error("no identity")]
    NoIdentity,
    /// A new member of the change is not in this member's directory.
    #[error("a new member is not in this member's directory")]
    NewMemberNotInDirectory,
    /// The current configuration resized to the change is invalid.
    #[error(transparent)]
    Config(Arc<ConsensusError>),
    /// The resharing of the change cannot be set up.
    #[error(transparent)]
    Resharing(beacon::Error),
    /// This member's transition cannot be set up.
    #[error(transparent)]
    TransitionSetup(Arc<ConsensusError>),
    /// The transition (resharing, new members' DKG) failed.
    #[error(transparent)]
    Transition(#[from] TransitionFailure),
    /// The chain switched to keys this member does not hold.
    #[error("the epoch switched to keys this member does not hold")]
    SwitchedToOtherKeys,
    /// `f + 1` old members handed over a chain that switched to keys other
    /// than this joiner's.
    #[error("the old members switched to keys other than this member's")]
    HandedOverOtherKeys,
    /// The epoch ended and this member never learned the change (it has no
    /// identity): it stops.
    #[error("the epoch ended, and this member does not know the next one")]
    NextEpochUnknown,
    /// The new epoch's replica cannot be built from the new keys.
    #[error(transparent)]
    Replica(Arc<ConsensusError>),
}

/// Bookkeeping of epoch changes at one member.
pub(super) struct EpochState<S: Scheme> {
    /// The current epoch's reading of the chain (none without an identity).
    governance: Option<Governance>,
    transition: Option<Transition<S>>,
    invitation: Option<Invitation<S>>,
    /// This member's keys of the next epoch, and their digest.
    ready: Option<([u8; 32], Arc<DkgOutput<S>>)>,
    /// A joiner's invitations by digest, and who sent each (one per sender).
    invites: BTreeMap<[u8; 32], (Invitation<S>, BTreeSet<DirectoryIndex>)>,
    invited_by: BTreeSet<DirectoryIndex>,
    /// A joiner's handoffs, one per old member.
    handoffs: BTreeMap<DirectoryIndex, Handoff<S>>,
    /// A joiner's statements of a later epoch ([`EpochMessage::Current`]) by
    /// digest, and who sent each (one per member of the epoch it knows).
    currents: BTreeMap<[u8; 32], (CurrentEpoch, BTreeSet<DirectoryIndex>)>,
    current_from: BTreeSet<DirectoryIndex>,
    /// Consensus messages ahead of the replica, kept while this member is ready
    /// to switch (they may be the next epoch's first height).
    ahead: Vec<(DirectoryIndex, Message<S>)>,
    /// Resharing and DKG messages of the next epoch that came before this
    /// member started its transition (other members decide, or invite, a
    /// little earlier), by sender; replayed when it starts.
    early: BTreeMap<DirectoryIndex, Vec<EpochMessage<S>>>,
    /// This member's control transactions not yet seen in a finalized block.
    pending: Vec<Control>,
    /// Control transactions forwarded to the replica (their digests), per
    /// signer.
    controls_from: BTreeMap<MemberId, BTreeSet<[u8; 32]>>,
    /// Parties that sent this member a message of the change.
    heard_from: BTreeSet<DirectoryIndex>,
    /// Whether an [`MemberTimer::EpochResend`] is armed.
    resend_armed: bool,
    /// A stayer whose keys were not ready at the switch: its own chain up to
    /// the switch, to start from once they are.
    own_handoff: Option<Handoff<S>>,
    /// The handoff into this member's epoch (or, once it left, into the epoch
    /// it left to), served to new members that ask for it.
    served: Option<Handoff<S>>,
    /// The transition of the change this member went through, kept after the
    /// switch so that, as a dealer, it can send its deal and sub-share again
    /// to a new member that restarted or was cut off; erased
    /// [`RETAIN_PHASES`] phase lengths after the switch.
    retained: Option<Transition<S>>,
    /// The invitation of the change this member went through as an old
    /// member, kept with [`EpochState::retained`]: sent again to a new member
    /// that asks for its handoff (it may have restarted and lost the
    /// invitation, which old members send only until they hear from it).
    retained_invitation: Option<Invitation<S>>,
    /// The keys (digest, resharing dealers) the chain named for the next
    /// epoch ([`Decision::Named`]; a joiner's from `f + 1` old members).
    named: Option<NamedKeys>,
    /// A joiner's notices of the named keys, one per old member.
    named_by: BTreeMap<DirectoryIndex, NamedKeys>,
    /// The digest of the keys this member last signed a ready for.
    readied: Option<[u8; 32]>,
}

/// Phase lengths after the switch during which an old member still sends its
/// deal and sub-share again to new members that ask (then erases them: they
/// determine its old share). A stayer killed again after the switch, before
/// it recombined its keys, needs them when it is back: 8 phase lengths left
/// it out for good when it was down longer (issue 53).
pub(in crate::member) const RETAIN_PHASES: u64 = 32;

/// Most of its own control transactions a member keeps sending until they
/// are finalized.
const MAX_PENDING_CONTROLS: usize = 16;

/// Most distinct control transactions of one signer a member puts in its
/// mempool per epoch (an honest one signs a proposal and a ready).
const MAX_CONTROLS_PER_SIGNER: usize = 8;

/// Most early transition messages kept per sender: a few for each party of
/// the change (its deals, its relay attestations, its shares) and no more,
/// so a Byzantine sender fills only its own slot.
fn early_per_sender(parties: usize) -> usize {
    parties.saturating_mul(4).saturating_add(64)
}

/// What identical handoffs share (the certificates may differ between
/// honest members; those are not covered). Ordered by epoch, then keys, then
/// entries.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct HandoffIdentity {
    epoch: Epoch,
    /// The keys the handoff is for.
    keys: NamedKeys,
    /// The SHA-256 of every entry's height, block digest and beacon.
    entries: [u8; 32],
}

#[derive(Clone)]
struct Handoff<S: Scheme> {
    epoch: Epoch,
    digest: [u8; 32],
    dealers: Vec<u32>,
    entries: Vec<Arc<CommittedEntry<S>>>,
}

impl<S: Scheme> Handoff<S> {
    /// What identical handoffs share ([`HandoffIdentity`]); none when empty.
    fn identity(&self) -> Option<HandoffIdentity> {
        if self.entries.is_empty() {
            return None;
        }
        let mut h = Sha256::new();
        for e in &self.entries {
            h.update(e.block.height.get().to_be_bytes());
            h.update(e.block.digest());
            h.update(beacon::Point::to_bytes(&e.beacon));
        }
        Some(HandoffIdentity {
            epoch: self.epoch,
            keys: NamedKeys {
                digest: self.digest,
                dealers: self.dealers.clone(),
            },
            entries: h.finalize().into(),
        })
    }
}

impl<S: Scheme> EpochState<S> {
    /// The state of `epoch`; `memo` shares its members' ids between simulated
    /// members (one set each was `n^2` ids and hashes).
    pub(in crate::member) fn new(
        epoch: &EpochView,
        directory: Option<&Directory>,
        memo: &Arc<Memo>,
    ) -> Self {
        let governance = directory.map(|d| {
            let mut key = Sha256::new();
            key.update(b"sbft-beacon/epoch-member-ids/1");
            key.update(epoch.number.get().to_be_bytes());
            for m in &epoch.members {
                key.update(m.get().to_be_bytes());
                key.update(d.key(*m).map_or([0; 32], |k| k.to_bytes()));
            }
            let ids = memo.get_or_compute(key.finalize().into(), || {
                epoch.ids(d).into_iter().collect::<BTreeSet<MemberId>>()
            });
            let keys_check = ConsensusKeyCheck::new::<S>(memo.clone());
            Governance::new(epoch.number, ids, &epoch.config, keys_check)
        });
        EpochState {
            governance,
            transition: None,
            invitation: None,
            ready: None,
            invites: BTreeMap::new(),
            invited_by: BTreeSet::new(),
            handoffs: BTreeMap::new(),
            currents: BTreeMap::new(),
            current_from: BTreeSet::new(),
            ahead: Vec::new(),
            early: BTreeMap::new(),
            pending: Vec::new(),
            controls_from: BTreeMap::new(),
            heard_from: BTreeSet::new(),
            resend_armed: false,
            own_handoff: None,
            served: None,
            retained: None,
            retained_invitation: None,
            named: None,
            named_by: BTreeMap::new(),
            readied: None,
        }
    }

    /// The state of epoch `epoch` after this one: fresh, but for the armed
    /// resend timer (one is in flight), the handoff this member serves, and
    /// the invitation of the change just made (sent again to new members that
    /// ask while this member retains its transition).
    fn next(&mut self, epoch: &EpochView, directory: Option<&Directory>, memo: &Arc<Memo>) -> Self {
        let mut next = EpochState::new(epoch, directory, memo);
        next.resend_armed = self.resend_armed;
        next.served = self.served.take();
        next.retained = self.retained.take();
        next.retained_invitation = self
            .invitation
            .take()
            .or_else(|| self.retained_invitation.take());
        next
    }

    /// Keeps a copy of a consensus message above `height` while this member is
    /// ready to switch (bounded).
    pub(in crate::member) fn keep_ahead(
        &mut self,
        from: DirectoryIndex,
        message: &Message<S>,
        height: Option<Height>,
    ) {
        if self.ready.is_none() || self.ahead.len() >= EARLY_LIMIT {
            return;
        }
        if let (Some(h), Some(current)) = (message.height(), height) {
            if h <= current {
                return;
            }
        }
        self.ahead.push((from, message.clone()));
    }
}

/// Entries a handoff carries: enough for the replica's election lag and the
/// previous beacon.
fn handoff_len(config: &ReplicaConfig) -> usize {
    (config.election_lag as usize).saturating_add(2)
}

mod decide;
mod join;
mod named;
mod switch;
