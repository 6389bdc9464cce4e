//! A member's side of epoch changes ([`crate::epoch`]): proposing, reading the
//! decisions off the finalized chain, running its
//! [`Transition`](crate::epoch::Transition), telling the old members it is
//! ready, switching replicas at the decided height, and — for a joiner —
//! believing invitations and handoffs from `f + 1` old members.
//!
//! The bookkeeping is split by role, each a struct with private fields:
//! `change` ([`Change`]: every member's part in the change out of its epoch),
//! `joiner` ([`Joiner`]: what a new member believes from `f + 1` old
//! members) and `dealer` ([`Dealer`]: what an old member serves new members
//! after the switch). This module owns what they share (the events, the
//! failures, handoffs) and moves the roles from one epoch to the next. The
//! `impl Member` files act on them: `decide` proposes, reads decisions off
//! the chain and runs the transition; `switch` routes the change's messages
//! and switches replicas; `join` is the joiner's side (and the old members'
//! answers to it); `named` the keys the chain names.

use super::Member;
use crate::config::ReplicaConfig;
use crate::epoch::{ChangeRefused, Directory, EpochView, NamedKeys, TransitionFailure};
use crate::messages::CommittedEntry;
use crate::{ConsensusError, DirectoryIndex, Epoch, Height};
use beacon::dkg::DkgOutput;
use beacon::multisig::ConsensusListing;
use beacon::{NodeIndex, Scheme};
use sha2::{Digest as _, Sha256};
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
    /// A stayer waited for the keys the chain switched to longer than the
    /// dealers keep what they dealt, without them (a dealer it needs erased
    /// its deal, or is gone): it erased its old keys and waits as a member
    /// without keys, to be reshared in a later change.
    #[error("the keys the chain switched to could not be recombined within the dealers' retention: waiting, without keys, for a later change")]
    KeysNotRecombined,
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

/// Phase lengths after the switch during which an old member still sends its
/// deal and sub-share again to new members that ask (then erases them: they
/// determine its old share). A stayer killed again after the switch, before
/// it recombined its keys, needs them when it is back: 8 phase lengths left
/// it out for good when it was down longer (issue 53).
pub(in crate::member) const RETAIN_PHASES: u64 = 32;

/// Phase lengths a stayer waits with its own chain for the keys the chain
/// switched to before it gives them up ([`Member::give_up_keys`]): longer
/// than any dealer keeps what it dealt ([`RETAIN_PHASES`]).
pub(in crate::member) const GIVE_UP_PHASES: u64 = RETAIN_PHASES + 4;

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

/// The chain up to a switch, as an old member hands it to new members (and a
/// late stayer keeps its own): the epoch that starts after it, the keys the
/// chain switched to, and its last entries.
#[derive(Clone)]
struct Handoff<S: Scheme> {
    epoch: Epoch,
    /// The digest of the keys the chain switched to.
    digest: [u8; 32],
    /// The resharing dealers they combine.
    dealers: Vec<NodeIndex>,
    /// Its entries, the switch height last (an old member hands over the
    /// last [`handoff_len`]).
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

impl<S: Scheme> Member<S> {
    /// Moves the roles to epoch `epoch`, the one after this: a fresh change
    /// (but for the armed resend timer) and joiner; the dealer keeps what it
    /// serves, its retained transition, and the invitation of the change just
    /// made (sent again to new members that ask while it retains its
    /// transition).
    fn move_roles_to(&mut self, epoch: &EpochView, directory: Option<&Directory>) {
        self.dealer.keep_invitation(self.change.take_invitation());
        self.change = self.change.next(epoch, directory, &self.memo);
        self.joiner = Joiner::new();
    }
}

/// Entries a handoff carries: enough for the replica's election lag and the
/// previous beacon.
fn handoff_len(config: &ReplicaConfig) -> usize {
    (config.election_lag as usize).saturating_add(2)
}

mod change;
mod dealer;
mod decide;
mod join;
mod joiner;
mod named;
mod switch;
pub(super) use change::Change;
pub(super) use dealer::Dealer;
pub(super) use joiner::Joiner;
