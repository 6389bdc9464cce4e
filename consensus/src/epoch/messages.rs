//! What epochs add to the wire: the control transactions the chain decides on
//! ([`Control`]), and the messages members exchange around a change
//! ([`EpochMessage`]).

use crate::config::ReplicaConfig;
use crate::messages::CommittedEntry;
use crate::ConsensusError;
use crate::{DirectoryIndex, Epoch, Height};
use beacon::dkg::relay::{RelayMessage, RelayedWire, SigningKey, VerifyingKey};
use beacon::dkg::DealtShares;
use beacon::multisig::ConsensusListing;
use beacon::reshare::{MemberId, ReshareEpoch};
use beacon::{wire, NodeIndex, Scheme};
use ed25519_dalek::{Signer as _, Verifier as _};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// What starts a transaction that the chain reads as a control transaction;
/// any other transaction stays opaque.
const CONTROL_PREFIX: &[u8] = b"sbft-beacon/control/1\0";

/// Domain separation of proposal signatures.
const PROPOSE_DOMAIN: &[u8] = b"sbft-beacon/epoch-propose/1";

/// Domain separation of ready signatures.
const READY_DOMAIN: &[u8] = b"sbft-beacon/epoch-ready/2";

/// Largest member list a change may name.
pub(super) const MAX_MEMBERS: usize = 1 << 16;

/// A change of members: epoch `epoch` with `members` (by member key, in epoch
/// order) and their consensus keys, `c` extra collectors and beacon threshold
/// `beacon_threshold` (0: `f + 1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochChange {
    /// The epoch it starts (the current one plus one).
    pub epoch: Epoch,
    /// The new members, in their new order.
    pub members: Vec<MemberId>,
    /// Extra collectors' slack of the new epoch.
    pub c: u32,
    /// Beacon threshold of the new epoch (0: `f + 1`).
    pub beacon_threshold: u32,
    /// Each new member's consensus key and proof of possession, in the order
    /// of `members`: the chain records them with the change, and members
    /// check every proof before they count a proposal of it.
    pub consensus_keys: Vec<ConsensusListing>,
}

impl EpochChange {
    /// SHA-256 of the change's encoding: what proposals are counted by.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/epoch-change/2");
        h.update(wire::encode(self).unwrap_or_default());
        h.finalize().into()
    }
}

/// A new member's signed statement that it holds the keys of epoch `epoch`
/// whose public side has digest `digest`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochReady {
    /// The epoch.
    pub epoch: Epoch,
    /// The change it answers ([`EpochChange::digest`]).
    pub change: [u8; 32],
    /// The new member.
    pub member: MemberId,
    /// [`super::keys_digest`] of its new public keys.
    pub digest: [u8; 32],
    /// The old members (participant indices) whose sub-shares its resharing
    /// combined: a member whose own resharing combined others (it started
    /// late) recomputes its share from these once the chain switched.
    pub dealers: Vec<NodeIndex>,
    /// Its ed25519 signature.
    #[serde(with = "beacon::wire::hex_bytes")]
    pub signature: Vec<u8>,
}

/// A transaction the chain decides membership with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Control {
    /// A current member proposes a change.
    Propose {
        /// The change.
        change: EpochChange,
        /// The proposer.
        member: MemberId,
        /// Its ed25519 signature.
        #[serde(with = "beacon::wire::hex_bytes")]
        signature: Vec<u8>,
    },
    /// A new member holds its keys.
    Ready(EpochReady),
}

fn propose_bytes(change: &EpochChange, member: &MemberId) -> Vec<u8> {
    let mut m = PROPOSE_DOMAIN.to_vec();
    m.extend_from_slice(&change.digest());
    m.extend_from_slice(&member.0);
    m
}

fn ready_bytes(
    epoch: Epoch,
    change: &[u8; 32],
    member: &MemberId,
    digest: &[u8; 32],
    dealers: &[NodeIndex],
) -> Vec<u8> {
    let mut m = READY_DOMAIN.to_vec();
    m.extend_from_slice(&epoch.get().to_be_bytes());
    m.extend_from_slice(change);
    m.extend_from_slice(&member.0);
    m.extend_from_slice(digest);
    m.extend_from_slice(&(dealers.len() as u64).to_be_bytes());
    for d in dealers {
        m.extend_from_slice(&d.0.to_be_bytes());
    }
    m
}

fn verify(member: &MemberId, bytes: &[u8], signature: &[u8]) -> bool {
    let Ok(key) = VerifyingKey::from_bytes(&member.0) else {
        return false;
    };
    ed25519_dalek::Signature::from_slice(signature).is_ok_and(|s| key.verify(bytes, &s).is_ok())
}

impl Control {
    /// `key`'s proposal of `change`.
    pub fn propose(change: EpochChange, key: &SigningKey) -> Self {
        let member = MemberId(key.verifying_key().to_bytes());
        let signature = key
            .sign(&propose_bytes(&change, &member))
            .to_bytes()
            .to_vec();
        Control::Propose {
            change,
            member,
            signature,
        }
    }

    /// `key`'s ready for the change with digest `change` of epoch `epoch`.
    pub fn ready(
        epoch: Epoch,
        change: [u8; 32],
        digest: [u8; 32],
        dealers: Vec<NodeIndex>,
        key: &SigningKey,
    ) -> Self {
        let member = MemberId(key.verifying_key().to_bytes());
        let signature = key
            .sign(&ready_bytes(epoch, &change, &member, &digest, &dealers))
            .to_bytes()
            .to_vec();
        Control::Ready(EpochReady {
            epoch,
            change,
            member,
            digest,
            dealers,
            signature,
        })
    }

    /// The member that signed it.
    pub fn signer(&self) -> MemberId {
        match self {
            Control::Propose { member, .. } => *member,
            Control::Ready(r) => r.member,
        }
    }

    /// Whether the signature is its member's.
    pub fn verify(&self) -> bool {
        match self {
            Control::Propose {
                change,
                member,
                signature,
            } => {
                change.members.len() <= MAX_MEMBERS
                    && verify(member, &propose_bytes(change, member), signature)
            }
            Control::Ready(r) => {
                r.dealers.len() <= MAX_MEMBERS
                    && verify(
                        &r.member,
                        &ready_bytes(r.epoch, &r.change, &r.member, &r.digest, &r.dealers),
                        &r.signature,
                    )
            }
        }
    }

    /// The transaction that carries it.
    pub fn to_transaction(&self) -> Result<Vec<u8>, ConsensusError> {
        let mut tx = CONTROL_PREFIX.to_vec();
        tx.extend_from_slice(&wire::encode(self)?);
        Ok(tx)
    }

    /// The control transaction `tx` carries, if it is one (and decodes).
    pub fn from_transaction(tx: &[u8]) -> Option<Self> {
        wire::decode(tx.strip_prefix(CONTROL_PREFIX)?).ok()
    }
}

/// What an old member tells a member that joins: the decided change and the
/// resharing it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Invitation<S: Scheme> {
    /// The change.
    pub change: EpochChange,
    /// The height whose block decided it.
    pub decided_at: Height,
    /// The resharing (old members, old beacon polynomial, new members).
    pub reshare: ReshareEpoch<S>,
}

impl<S: Scheme> Invitation<S> {
    /// SHA-256 of its encoding: a joiner counts identical invitations.
    pub fn digest(&self) -> [u8; 32] {
        Sha256::digest(wire::encode(self).unwrap_or_default()).into()
    }
}

/// A resharing message: a signed broadcast through the relay, or sub-shares.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ReshareWire {
    /// A relay message (the resharing's broadcasts, signed).
    Relay(RelayMessage),
    /// A dealer's sub-shares for the recipient.
    Shares(DealtShares),
    /// A new member asks an old member for its deal and its sub-share again
    /// (it restarted during the change, or they were lost).
    Request,
}

impl ReshareWire {
    /// What a relayed resharing puts on the wire, as a resharing message:
    /// `None` for a complaint naming nobody, which only a genesis DKG with a
    /// hub sends (a resharing has no committee).
    pub fn of_relayed(wire: RelayedWire) -> Option<Self> {
        match wire {
            RelayedWire::Shares(shares) => Some(ReshareWire::Shares(shares)),
            RelayedWire::Relay(message) => Some(ReshareWire::Relay(message)),
            RelayedWire::NoComplaint => None,
        }
    }
}

/// Messages of epoch changes.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum EpochMessage<S: Scheme> {
    /// A signed control transaction for the mempool (every member may be the
    /// next primary).
    Control(Control),
    /// An invitation to a joining member.
    Invite(Box<Invitation<S>>),
    /// A resharing message of epoch `epoch`.
    Reshare {
        /// The epoch.
        epoch: Epoch,
        /// The message.
        message: ReshareWire,
    },
    /// The chain up to the switch into epoch `epoch` (its last entry is the
    /// switch height), for members that did not follow it.
    Handoff {
        /// The epoch that starts after the last entry.
        epoch: Epoch,
        /// The digest of the new keys the chain switched to.
        digest: [u8; 32],
        /// The resharing dealers behind that digest ([`EpochReady::dealers`]).
        dealers: Vec<NodeIndex>,
        /// The most recent finalized entries, consecutive.
        entries: Vec<Arc<CommittedEntry<S>>>,
    },
    /// A new member that holds its keys but no handoff yet (lost, or sent
    /// while it was unreachable) asks an old member for it. A joiner asks
    /// with it too while it waits for an invitation (it may have restarted
    /// during a change): an old member of the change into `epoch` answers a
    /// new member with its invitation as well.
    HandoffRequest {
        /// The epoch it waits to start.
        epoch: Epoch,
    },
    /// An old member tells a joiner (which does not read the old epoch's
    /// chain) the keys the chain named for epoch `epoch`
    /// ([`super::Decision::Named`]); a joiner believes `f + 1` old members
    /// that send the same.
    Named {
        /// The epoch the keys are for.
        epoch: Epoch,
        /// The digest of the named keys.
        digest: [u8; 32],
        /// The resharing dealers they combine.
        dealers: Vec<NodeIndex>,
    },
    /// A member tells a party that asked for the handoff of an epoch that is
    /// over (a joiner that knows only an earlier epoch: the genesis, or the
    /// one it left before more changes) which epoch it runs now
    /// ([`CurrentEpoch`]); the joiner believes `f + 1` members of the epoch
    /// it knows that send the same, and waits there to be invited.
    Current(Box<CurrentEpoch>),
}

impl<S: Scheme> EpochMessage<S> {
    /// Short name of the message kind.
    pub fn kind(&self) -> &'static str {
        match self {
            EpochMessage::Control(_) => "epoch-control",
            EpochMessage::Invite(_) => "epoch-invite",
            EpochMessage::Reshare { .. } => "epoch-reshare",
            EpochMessage::Handoff { .. } => "epoch-handoff",
            EpochMessage::HandoffRequest { .. } => "epoch-handoff-request",
            EpochMessage::Named { .. } => "epoch-named",
            EpochMessage::Current(_) => "epoch-current",
        }
    }
}

/// The epoch a member runs, as it tells a joiner that is behind
/// ([`EpochMessage::Current`]): what the joiner needs to wait there for an
/// invitation (who may invite it, and how many make `f + 1`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CurrentEpoch {
    /// The epoch.
    pub number: Epoch,
    /// Its members: directory indices, by epoch index.
    pub members: Vec<DirectoryIndex>,
    /// Its replica configuration.
    pub config: ReplicaConfig,
    /// Its members' consensus keys, by epoch index.
    pub consensus: Vec<ConsensusListing>,
}

impl CurrentEpoch {
    /// SHA-256 of its encoding: identical statements are counted by it.
    pub fn digest(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/epoch-current/1");
        h.update(wire::encode(self).unwrap_or_default());
        h.finalize().into()
    }
}
