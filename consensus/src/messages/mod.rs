//! Blocks and the protocol's messages (names from the SBFT paper), and their one
//! wire encoding (through `beacon::wire`).

use beacon::multisig::SignerBitmap;
use beacon::{wire, Scheme};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

use crate::{ConsensusError, Height, View};

mod view_change;
pub use view_change::{ClaimGroup, ViewChange, ViewChangeClaims, ViewChangeProof};

/// A 32-byte SHA-256 digest.
pub type Digest = [u8; 32];

/// A block: a batch of opaque client transactions at one height, linked to its
/// parent and to the beacon that preceded it. The view is not part of the block,
/// so a block re-proposed after a view change keeps its digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    /// Height (>= 1).
    pub height: Height,
    /// Digest of the block at `height - 1` (zero for height 1).
    pub parent: Digest,
    /// The beacon signature of round `height - 1` (the genesis seed for height 1).
    #[serde(with = "beacon::wire::hex_bytes")]
    pub previous_beacon: Vec<u8>,
    /// Client transactions, opaque.
    pub transactions: Vec<Vec<u8>>,
}

impl Block {
    /// SHA-256 of the block's wire encoding.
    pub fn digest(&self) -> Digest {
        let bytes = wire::encode(self).unwrap_or_default();
        Sha256::digest(bytes).into()
    }
}

/// How a block was committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CommitPath {
    /// 3f+c+1 votes in one view.
    Fast,
    /// A prepare certificate and 2f+c+1 commit shares.
    Slow,
}

impl CommitPath {
    /// `fast` or `slow`, for reports and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            CommitPath::Fast => "fast",
            CommitPath::Slow => "slow",
        }
    }
}

/// Proof that a block is committed: a multi-signature of at least `3f + c + 1`
/// members on the fast-path vote, or of at least `2f + c + 1` on the slow-path
/// commit, of `(epoch, height, view, digest)`, with the bitmap of its signers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct CommitCertificate<S: Scheme> {
    /// Height.
    pub height: Height,
    /// View in which it committed.
    pub view: View,
    /// Digest of the block.
    pub digest: Digest,
    /// Fast or slow path.
    pub path: CommitPath,
    /// The sum of the signers' votes.
    pub signature: S::Signature,
    /// Who signed (members of the certificate's epoch).
    pub signers: SignerBitmap,
}

/// A prepare certificate: a multi-signature of at least `2f + c + 1` members
/// on the prepare of `(epoch, height, view, digest)`, with its signers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct PrepareCertificate<S: Scheme> {
    /// View of the prepare.
    pub view: View,
    /// Prepared digest.
    pub digest: Digest,
    /// The sum of the signers' prepare votes.
    pub signature: S::Signature,
    /// Who signed.
    pub signers: SignerBitmap,
}

/// A replica's fast-path vote (its own signature) on `(height, view, digest)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct FastVote<S: Scheme> {
    /// View of the vote.
    pub view: View,
    /// Voted digest.
    pub digest: Digest,
    /// The vote: the sender's signature with its own consensus key.
    pub share: S::Signature,
}

/// A committed height: block, commit proof and beacon. What a replica persists
/// and serves to peers that catch up.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct CommittedEntry<S: Scheme> {
    /// The block.
    pub block: Arc<Block>,
    /// Its commit proof.
    pub certificate: CommitCertificate<S>,
    /// The beacon of round `block.height`.
    pub beacon: S::Signature,
}

/// Every consensus message. The sender is authenticated by the transport.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum Message<S: Scheme> {
    /// PRE-PREPARE from the primary.
    PrePrepare {
        /// Height.
        height: Height,
        /// View.
        view: View,
        /// Proposed block.
        block: Arc<Block>,
    },
    /// SIGN-SHARE to the collectors: the sender's fast-path and prepare votes
    /// on the block digest (its own key) and its beacon share of round `height`.
    SignShare {
        /// Height.
        height: Height,
        /// View.
        view: View,
        /// Block digest.
        digest: Digest,
        /// The sender's vote on `digest` under its own consensus key: its
        /// fast-path vote and its prepare vote at once (`signed::fast_vote`).
        vote: S::Signature,
        /// Beacon share.
        beacon: S::Signature,
    },
    /// FULL-COMMIT-PROOF (fast path) or slow-path COMMIT-PROOF, with the beacon
    /// when the collector has it.
    CommitProof {
        /// The certificate.
        certificate: CommitCertificate<S>,
        /// Beacon of round `height`, if known.
        beacon: Option<S::Signature>,
    },
    /// PREPARE with the prepare certificate (slow path).
    Prepare {
        /// Height.
        height: Height,
        /// The certificate.
        certificate: PrepareCertificate<S>,
    },
    /// COMMIT share on a prepared digest (slow path).
    CommitShare {
        /// Height.
        height: Height,
        /// View.
        view: View,
        /// Digest.
        digest: Digest,
        /// The sender's vote on the commit message.
        share: S::Signature,
    },
    /// A replica's beacon share of round `round`, to every member: sent by a
    /// replica that committed but learned no beacon in time (a collector that
    /// withholds it cannot halt the chain).
    BeaconShare {
        /// Round.
        round: Height,
        /// The sender's beacon share.
        share: S::Signature,
    },
    /// A beacon, on its own.
    Beacon {
        /// Round.
        round: Height,
        /// Threshold signature.
        signature: S::Signature,
    },
    /// VIEW-CHANGE.
    ViewChange(Arc<ViewChange<S>>),
    /// NEW-VIEW from the new primary: the `2f + 2c + 1` view changes it used,
    /// aggregated, and the safe block.
    NewView {
        /// Height.
        height: Height,
        /// The new view.
        view: View,
        /// The view changes' claims and multi-signatures.
        proof: ViewChangeProof<S>,
        /// The block to agree on in the new view.
        block: Arc<Block>,
    },
    /// Ask a collector for the block a commit proof names.
    BlockRequest {
        /// Height.
        height: Height,
        /// Digest.
        digest: Digest,
    },
    /// A block, answering a [`Message::BlockRequest`].
    BlockResponse {
        /// The block.
        block: Arc<Block>,
    },
    /// Ask a peer for committed heights from `from_height` on.
    SyncRequest {
        /// First height wanted.
        from_height: Height,
    },
    /// Committed heights, consecutive.
    SyncResponse {
        /// Entries.
        entries: Vec<Arc<CommittedEntry<S>>>,
    },
}

impl<S: Scheme> Message<S> {
    /// Encodes with the wire codec.
    pub fn encode(&self) -> Result<Vec<u8>, ConsensusError> {
        Ok(wire::encode(self)?)
    }

    /// Decodes with the wire codec (bad points, lengths, trailing bytes, oversized
    /// input are errors).
    pub fn decode(bytes: &[u8]) -> Result<Self, ConsensusError> {
        Ok(wire::decode(bytes)?)
    }

    /// The slot a sender signs at most one value for, and the value: SIGN-SHARE,
    /// COMMIT share and PRE-PREPARE per `(height, view)`, VIEW-CHANGE per
    /// `(height, new view)` (its `from` is the signer, which a forwarder is
    /// not). An honest replica never sends two values for one slot, not even
    /// across a crash (`replica/votes.rs`); checkers use this to tell.
    pub fn vote_slot(&self) -> Option<(Height, View, &'static str, Digest)> {
        match self {
            Message::SignShare {
                height,
                view,
                digest,
                ..
            }
            | Message::CommitShare {
                height,
                view,
                digest,
                ..
            } => Some((*height, *view, self.kind(), *digest)),
            Message::PrePrepare {
                height,
                view,
                block,
            } => Some((*height, *view, self.kind(), block.digest())),
            Message::ViewChange(vc) => {
                Some((vc.height, vc.new_view, self.kind(), vc.signed_message()))
            }
            _ => None,
        }
    }

    /// Short name, for logs and per-kind counters.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::PrePrepare { .. } => "pre-prepare",
            Message::SignShare { .. } => "sign-share",
            Message::CommitProof { .. } => "commit-proof",
            Message::Prepare { .. } => "prepare",
            Message::CommitShare { .. } => "commit-share",
            Message::Beacon { .. } => "beacon",
            Message::BeaconShare { .. } => "beacon-share",
            Message::ViewChange(_) => "view-change",
            Message::NewView { .. } => "new-view",
            Message::BlockRequest { .. } => "block-request",
            Message::BlockResponse { .. } => "block-response",
            Message::SyncRequest { .. } => "sync-request",
            Message::SyncResponse { .. } => "sync-response",
        }
    }

    /// The height the message is about (None for sync requests).
    pub fn height(&self) -> Option<Height> {
        match self {
            Message::PrePrepare { height, .. }
            | Message::SignShare { height, .. }
            | Message::Prepare { height, .. }
            | Message::CommitShare { height, .. }
            | Message::NewView { height, .. }
            | Message::BlockRequest { height, .. } => Some(*height),
            Message::BlockResponse { block } => Some(block.height),
            Message::CommitProof { certificate, .. } => Some(certificate.height),
            Message::Beacon { round, .. } | Message::BeaconShare { round, .. } => Some(*round),
            Message::ViewChange(vc) => Some(vc.height),
            Message::SyncRequest { .. } | Message::SyncResponse { .. } => None,
        }
    }

    /// The view the message is about, for messages bound to one.
    pub fn view(&self) -> Option<View> {
        match self {
            Message::PrePrepare { view, .. }
            | Message::SignShare { view, .. }
            | Message::CommitShare { view, .. }
            | Message::NewView { view, .. } => Some(*view),
            Message::Prepare { certificate, .. } => Some(certificate.view),
            Message::CommitProof { certificate, .. } => Some(certificate.view),
            Message::ViewChange(vc) => Some(vc.new_view),
            _ => None,
        }
    }
}

/// Domain-separated digests of what members sign with their consensus keys.
///
/// The fast-path vote and the prepare vote are one message: an honest replica
/// casts both at once, in one SIGN-SHARE, so one signature is both (it is
/// hashed to the curve and multiplied once), and a certificate's count of
/// signers says which it proves: `3f + c + 1` a fast proof, `2f + c + 1` a
/// prepare certificate, whose signers all cast the same vote. The commit and
/// the view change have tags of their own, so that a prepare certificate is
/// never a commit certificate. The verifier binds each message to its epoch
/// before hashing it to the curve (`replica::verifier`).
pub mod signed {
    use super::*;

    fn tagged(tag: &[u8], height: Height, view: View, digest: &Digest) -> Digest {
        let mut h = Sha256::new();
        h.update(tag);
        h.update(height.get().to_be_bytes());
        h.update(view.get().to_be_bytes());
        h.update(digest);
        h.finalize().into()
    }

    /// Fast-path vote.
    pub fn fast_vote(height: Height, view: View, digest: &Digest) -> Digest {
        tagged(b"sbft-beacon/v2/vote", height, view, digest)
    }

    /// Prepare vote (slow path, first half): the same message as the
    /// fast-path vote.
    pub fn prepare(height: Height, view: View, digest: &Digest) -> Digest {
        fast_vote(height, view, digest)
    }

    /// Slow-path commit.
    pub fn commit(height: Height, view: View, digest: &Digest) -> Digest {
        tagged(b"sbft-beacon/v2/commit", height, view, digest)
    }

    /// A VIEW-CHANGE (the sender's own consensus key): the height, the new
    /// view, and the (view, digest) of its prepare and fast-vote claims.
    pub fn view_change(height: Height, new_view: View, claims: ViewChangeClaims) -> Digest {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon/v2/view-change");
        h.update(height.get().to_be_bytes());
        h.update(new_view.get().to_be_bytes());
        for claim in [claims.prepared, claims.fast_vote] {
            match claim {
                Some((view, digest)) => {
                    h.update([1]);
                    h.update(view.get().to_be_bytes());
                    h.update(digest);
                }
                None => h.update([0]),
            }
        }
        h.finalize().into()
    }
}
