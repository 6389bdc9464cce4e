//! Byzantine replicas as swappable implementations: each wraps an honest
//! [`Replica`] and rewrites what it sends. The honest code has no fault flags.

use crate::config::ReplicaKeys;
use crate::messages::{signed, FastVote, Message, ViewChange};
use crate::replica::{Input, Output, Replica};
use crate::{CommittedEntry, Height};
use beacon::{NodeIndex, Point, Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

/// Anything that can stand in the protocol: the honest [`Replica`] or a wrapper.
pub trait Participant<S: Scheme>: Send {
    /// Handles one input (see [`Replica::handle`]).
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>>;
    /// The member index.
    fn index(&self) -> NodeIndex;
    /// Finalized heights.
    fn finalized(&self) -> &[Arc<CommittedEntry<S>>];
    /// The height being decided.
    fn current_height(&self) -> Height;
    /// Whether this participant follows the protocol.
    fn is_honest(&self) -> bool {
        true
    }
}

impl<S: Scheme> Participant<S> for Replica<S> {
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        Replica::handle(self, now, input)
    }
    fn index(&self) -> NodeIndex {
        self.me()
    }
    fn finalized(&self) -> &[Arc<CommittedEntry<S>>] {
        self.chain()
    }
    fn current_height(&self) -> Height {
        self.height()
    }
}

/// Kinds of Byzantine behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Behaviour {
    /// As primary, sends one block to even-indexed replicas and another to odd ones.
    EquivocatingPrimary,
    /// Every signature share it sends (sigma, tau, commit, beacon) is invalid.
    BadShares,
    /// Never sends its signature shares (a silent voter).
    WithholdShares,
    /// As collector, never sends what it aggregates (proofs, prepares, beacons).
    SilentCollector,
    /// Its view changes claim a fast vote for a block nobody proposed.
    ConflictingViewChange,
    /// Sends nothing at all.
    Silent,
    /// DKG: signs three versions of its complaint (two harmless, one against an
    /// honest dealer) and sends each to a different member.
    ComplaintVersions,
    /// DKG: replays honest members' signed broadcasts of a failed attempt in the
    /// next attempt.
    ReplayOldSession,
}

impl Behaviour {
    /// Every kind, for campaigns.
    pub const ALL: [Behaviour; 8] = [
        Behaviour::EquivocatingPrimary,
        Behaviour::BadShares,
        Behaviour::WithholdShares,
        Behaviour::SilentCollector,
        Behaviour::ConflictingViewChange,
        Behaviour::Silent,
        Behaviour::ComplaintVersions,
        Behaviour::ReplayOldSession,
    ];

    /// Name used in configs.
    pub fn as_str(&self) -> &'static str {
        match self {
            Behaviour::EquivocatingPrimary => "equivocating-primary",
            Behaviour::BadShares => "bad-shares",
            Behaviour::WithholdShares => "withhold-shares",
            Behaviour::SilentCollector => "silent-collector",
            Behaviour::ConflictingViewChange => "conflicting-view-change",
            Behaviour::Silent => "silent",
            Behaviour::ComplaintVersions => "complaint-versions",
            Behaviour::ReplayOldSession => "replay-old-session",
        }
    }
}

impl std::str::FromStr for Behaviour {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Behaviour::ALL
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown behaviour {s:?}; known: {}",
                    Behaviour::ALL.map(|b| b.as_str()).join(", ")
                )
            })
    }
}

/// A Byzantine replica: an honest [`Replica`] whose outputs are rewritten.
pub struct ByzantineReplica<S: Scheme> {
    inner: Replica<S>,
    keys: ReplicaKeys<S>,
    behaviour: Behaviour,
}

impl<S: Scheme> ByzantineReplica<S> {
    /// Wraps `inner` (built with `keys`) with `behaviour`.
    pub fn new(inner: Replica<S>, keys: ReplicaKeys<S>, behaviour: Behaviour) -> Self {
        ByzantineReplica {
            inner,
            keys,
            behaviour,
        }
    }

    /// The behaviour.
    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    fn corrupt(sig: S::Signature) -> S::Signature {
        sig.add(&S::Signature::generator())
    }

    fn rewrite(&self, output: Output<S>, out: &mut Vec<Output<S>>) {
        let n = self.inner.config().n;
        let me = self.inner.me();
        match (self.behaviour, output) {
            (Behaviour::Silent, Output::Send { .. } | Output::Broadcast(_)) => {}
            (
                Behaviour::EquivocatingPrimary,
                Output::Broadcast(Message::PrePrepare {
                    height,
                    view,
                    block,
                }),
            ) => {
                let mut other = (*block).clone();
                other.transactions.push(b"equivocation".to_vec());
                let other = Arc::new(other);
                for j in (0..n).filter(|j| *j != me.0) {
                    let b = if j % 2 == 0 {
                        block.clone()
                    } else {
                        other.clone()
                    };
                    out.push(Output::Send {
                        to: NodeIndex(j),
                        message: Message::PrePrepare {
                            height,
                            view,
                            block: b,
                        },
                    });
                }
            }
            (
                Behaviour::BadShares,
                Output::Send {
                    to,
                    message:
                        Message::SignShare {
                            height,
                            view,
                            digest,
                            sigma,
                            tau,
                            beacon,
                        },
                },
            ) => {
                let message = Message::SignShare {
                    height,
                    view,
                    digest,
                    sigma: Self::corrupt(sigma),
                    tau: Self::corrupt(tau),
                    beacon: Self::corrupt(beacon),
                };
                out.push(Output::Send { to, message });
            }
            (
                Behaviour::BadShares,
                Output::Send {
                    to,
                    message:
                        Message::CommitShare {
                            height,
                            view,
                            digest,
                            share,
                        },
                },
            ) => {
                out.push(Output::Send {
                    to,
                    message: Message::CommitShare {
                        height,
                        view,
                        digest,
                        share: Self::corrupt(share),
                    },
                });
            }
            (
                Behaviour::WithholdShares,
                Output::Send {
                    message: Message::SignShare { .. } | Message::CommitShare { .. },
                    ..
                },
            ) => {}
            (
                Behaviour::SilentCollector,
                Output::Broadcast(
                    Message::CommitProof { .. } | Message::Prepare { .. } | Message::Beacon { .. },
                ),
            ) => {}
            (Behaviour::ConflictingViewChange, Output::Broadcast(Message::ViewChange(vc))) => {
                let digest: [u8; 32] =
                    Sha256::digest(format!("never proposed {}", vc.height)).into();
                let view = vc.new_view - 1;
                let hashed = S::hash_message(&signed::fast_vote(vc.height, view, &digest));
                let share = self.keys.sigma.share.sign_hashed::<S>(&hashed).signature;
                let forged = ViewChange {
                    fast_vote: Some(FastVote {
                        view,
                        digest,
                        share,
                    }),
                    block: None,
                    ..(*vc).clone()
                };
                out.push(Output::Broadcast(Message::ViewChange(Arc::new(forged))));
            }
            (_, o) => out.push(o),
        }
    }
}

impl<S: Scheme> Participant<S> for ByzantineReplica<S> {
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        let outputs = self.inner.handle(now, input);
        let mut out = Vec::with_capacity(outputs.len());
        for o in outputs {
            self.rewrite(o, &mut out);
        }
        out
    }
    fn index(&self) -> NodeIndex {
        self.inner.me()
    }
    fn finalized(&self) -> &[Arc<CommittedEntry<S>>] {
        self.inner.chain()
    }
    fn current_height(&self) -> Height {
        self.inner.height()
    }
    fn is_honest(&self) -> bool {
        false
    }
}
