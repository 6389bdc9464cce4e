//! What DKG members send each other (deals, shares, complaints,
//! justifications) and the state machine's inputs, timers and actions.

use super::relay::Kind;
use crate::curve::Point;
use crate::dkg::{Commitments, DkgOutput, PhaseOutput};
use crate::field::Scalar;
use crate::scheme::Scheme;
use crate::{wire, Error, NodeIndex};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::{Arc, OnceLock};

/// A dealer's broadcast: Feldman commitments, one vector per threshold.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub struct Deal<S: Scheme> {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// `commitments[k][i] = g^{a_{k,i}}` for threshold `k`, coefficient `i`.
    ///
    /// Decoded on the curve only ([`Commitments`]): checking each
    /// point's subgroup was most of a member's DKG work. Off-group points only
    /// enter MSMs and comparisons, and the DKG checks the subgroup of the sums
    /// it keeps (`Dkg::exclude_off_group`, at step 4), which a Byzantine
    /// dealer's small-order components cannot pass unseen.
    pub commitments: Commitments<S::PublicKey>,
    /// Root of the dealer's [`ShareTree`]: commits to the shares it deals
    /// (see [`batch`]).
    ///
    /// [`batch`]: super::batch
    pub share_root: [u8; 32],
    #[serde(skip)]
    digest: OnceLock<[u8; 32]>,
    #[serde(skip)]
    in_group: OnceLock<bool>,
}

impl<S: Scheme> Deal<S> {
    /// A deal message.
    pub fn new(
        session: [u8; 32],
        dealer: NodeIndex,
        commitments: Commitments<S::PublicKey>,
        share_root: [u8; 32],
    ) -> Self {
        Deal {
            session,
            dealer,
            commitments,
            share_root,
            digest: OnceLock::new(),
            in_group: OnceLock::new(),
        }
    }

    /// Whether every commitment lies in the prime-order subgroup (they are
    /// decoded on the curve only); checked once, shared by every holder of the
    /// `Arc`.
    pub fn commitments_in_group(&self) -> bool {
        *self
            .in_group
            .get_or_init(|| self.commitments.points().all(|p| p.in_group()))
    }

    /// SHA-256 of the encoded deal (computed once, shared by every holder of the `Arc`).
    pub fn digest(&self) -> [u8; 32] {
        *self.digest.get_or_init(|| {
            let mut h = Sha256::new();
            h.update(self.session);
            h.update(self.dealer.0.to_be_bytes());
            for row in self.commitments.rows() {
                h.update((row.len() as u64).to_be_bytes());
                for p in row {
                    h.update(S::PublicKey::from_affine(p).to_bytes());
                }
            }
            h.update(self.share_root);
            h.finalize().into()
        })
    }
}

/// A dealer's private message to one member: its shares, one per threshold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DealtShares {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// The recipient.
    pub recipient: NodeIndex,
    /// `f_{dealer,k}(w^recipient)` per threshold `k`.
    pub shares: Vec<Scalar>,
    /// The salt of the recipient's leaf in the dealer's [`ShareTree`].
    pub salt: [u8; 32],
    /// The leaf's authentication path up to the deal's `share_root`.
    pub path: super::batch::SharePath,
}

/// A member's broadcast complaint against dealers whose shares were missing or bad.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Complaint {
    /// The run.
    pub session: [u8; 32],
    /// The complainer.
    pub from: NodeIndex,
    /// Dealers complained about.
    pub dealers: Vec<NodeIndex>,
}

/// A dealer's broadcast answer to complaints: the complainers' shares, revealed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Justification {
    /// The run.
    pub session: [u8; 32],
    /// The dealer.
    pub dealer: NodeIndex,
    /// `(complainer, shares per threshold)`.
    pub revealed: Vec<(NodeIndex, Vec<Scalar>)>,
}

/// Every DKG message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum DkgMessage<S: Scheme> {
    /// Broadcast commitments.
    Deal(Arc<Deal<S>>),
    /// Private shares.
    Shares(DealtShares),
    /// Broadcast complaint.
    Complaint(Complaint),
    /// Broadcast justification.
    Justification(Arc<Justification>),
}

impl<S: Scheme> DkgMessage<S> {
    /// Encodes with the wire codec.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        wire::encode(self)
    }

    /// Decodes with the wire codec (invalid points, wrong lengths, trailing bytes
    /// and oversized input are errors).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        wire::decode(bytes)
    }
}

/// The DKG's timers, one per phase end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DkgTimer {
    /// End of the deal phase.
    EndOfDeal,
    /// End of the complaint phase.
    EndOfComplaints,
    /// End of the justification phase.
    EndOfJustifications,
}

/// Inputs of the state machine.
#[derive(Clone, Debug)]
pub enum DkgInput<S: Scheme> {
    /// Begin (deal, if a dealer).
    Start,
    /// A message from an authenticated sender.
    Message {
        /// The sender (as authenticated by the transport).
        from: NodeIndex,
        /// The message.
        message: DkgMessage<S>,
    },
    /// A timer requested earlier fired.
    Timer(DkgTimer),
    /// The relay proved that `member` broadcast two different versions of one
    /// message (two signed deals, complaints or justifications): it is faulty,
    /// excluded as a dealer and its complaints ignored. Every honest member must
    /// learn this before the justification phase ends for QUAL to agree (the
    /// session's agreement step catches the runs where some did not).
    Faulty {
        /// The equivocating member.
        member: NodeIndex,
    },
    /// The relay confirms that every member (save proven equivocators) holds the
    /// same versions of the broadcasts of this kind as this member (only used
    /// by a DKG built [`PhaseMachine::with_relay`]).
    ///
    /// [`PhaseMachine::with_relay`]: super::PhaseMachine::with_relay
    Confirmed(Kind),
}

/// Outputs of the DKG state machine: effects, announcements to the relay,
/// and the result ([`PhaseOutput::Done`]) or why there is none.
pub type DkgAction<S> = PhaseOutput<S, DkgOutput<S>>;
