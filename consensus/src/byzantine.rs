//! Byzantine replicas as swappable implementations: each wraps an honest
//! [`Replica`] and rewrites what it sends. The honest code has no fault flags.

use crate::config::ReplicaKeys;
use crate::messages::{signed, Block, FastVote, Message, ViewChange};
use crate::replica::{ChainWindow, Input, Output, Replica, Timer};
use crate::{Height, View};
use beacon::{NodeIndex, Point, Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

/// Anything that can stand in the protocol: the honest [`Replica`] or a wrapper.
pub trait Participant<S: Scheme>: Send {
    /// Handles one input (see [`Replica::handle`]).
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>>;
    /// The member index.
    fn index(&self) -> NodeIndex;
    /// Finalized heights.
    fn finalized(&self) -> &ChainWindow<S>;
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
    fn finalized(&self) -> &ChainWindow<S> {
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
    /// As the primary of the next view, sends a NEW-VIEW built on view changes it
    /// wrote in the other members' names (claiming nothing was prepared or
    /// voted) with a fresh block of its own.
    ForgedViewChange,
    /// As a new primary, sends its NEW-VIEW with one block to even-indexed
    /// members and another to odd ones.
    SplitNewView,
    /// As collector, never sends the beacon: commit proofs go out without it,
    /// beacons, beacon shares and sync responses (which carry beacons) not at all.
    WithholdBeacon,
    /// As primary, proposes at once, ignoring the round's time on paced chains.
    EagerPrimary,
    /// Sends VIEW-CHANGE, NEW-VIEW and PRE-PREPARE for view `u64::MAX`.
    HugeView,
    /// DKG: signs three versions of its complaint (two harmless, one against an
    /// honest dealer) and sends each to a different member.
    ComplaintVersions,
    /// DKG: replays honest members' signed broadcasts of a failed attempt in the
    /// next attempt.
    ReplayOldSession,
}

impl Behaviour {
    /// Every kind, for campaigns.
    pub const ALL: [Behaviour; 13] = [
        Behaviour::EquivocatingPrimary,
        Behaviour::BadShares,
        Behaviour::WithholdShares,
        Behaviour::SilentCollector,
        Behaviour::ConflictingViewChange,
        Behaviour::Silent,
        Behaviour::ForgedViewChange,
        Behaviour::SplitNewView,
        Behaviour::WithholdBeacon,
        Behaviour::EagerPrimary,
        Behaviour::HugeView,
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
            Behaviour::ForgedViewChange => "forged-view-change",
            Behaviour::SplitNewView => "split-new-view",
            Behaviour::WithholdBeacon => "withhold-beacon",
            Behaviour::EagerPrimary => "eager-primary",
            Behaviour::HugeView => "huge-view",
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
    /// (height, view) pairs already attacked, so each attack goes out once.
    attacked: BTreeSet<(Height, View)>,
}

impl<S: Scheme> ByzantineReplica<S> {
    /// Wraps `inner` (built with `keys`) with `behaviour`.
    pub fn new(inner: Replica<S>, keys: ReplicaKeys<S>, behaviour: Behaviour) -> Self {
        ByzantineReplica {
            inner,
            keys,
            behaviour,
            attacked: BTreeSet::new(),
        }
    }

    /// The behaviour.
    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    fn corrupt(sig: S::Signature) -> S::Signature {
        sig.add(&S::Signature::generator())
    }

    /// Signs a view change with this member's own key (only its own is genuine).
    fn sign_view_change(&self, vc: &mut ViewChange<S>) {
        let hashed = S::hash_message(&vc.signed_message());
        vc.signature = self.keys.tau.share.sign_hashed::<S>(&hashed).signature;
    }

    /// A block of the current height that no honest member proposed.
    fn rogue_block(&self, tag: &[u8]) -> Arc<Block> {
        let mut block = self.inner.fresh_block();
        block.transactions.push(tag.to_vec());
        Arc::new(block)
    }

    /// Sends `make(a)` to the other even-indexed members and `make(b)` to the odd ones.
    fn split(
        &self,
        out: &mut Vec<Output<S>>,
        a: &Arc<Block>,
        b: &Arc<Block>,
        make: impl Fn(Arc<Block>) -> Message<S>,
    ) {
        let me = self.inner.me().0;
        for j in (0..self.inner.config().n).filter(|j| *j != me) {
            let block = if j % 2 == 0 { a.clone() } else { b.clone() };
            out.push(Output::Send {
                to: NodeIndex(j),
                message: make(block),
            });
        }
    }

    /// Attacks that do not wait for an output to rewrite.
    fn attack(&mut self, out: &mut Vec<Output<S>>) {
        let h = self.inner.height();
        let me = self.inner.me();
        match self.behaviour {
            Behaviour::ForgedViewChange => {
                // As the next view's primary: a NEW-VIEW whose quorum is names.
                let view = self.inner.view().saturating_add(1);
                let quorum = self.inner.config().view_change_quorum();
                if self.inner.election_of(view).primary != me || !self.attacked.insert((h, view)) {
                    return;
                }
                let n = self.inner.config().n;
                let view_changes = (0..n)
                    .map(|j| (me.0 + j) % n)
                    .take(quorum as usize)
                    .map(|j| {
                        let mut vc = ViewChange {
                            from: NodeIndex(j),
                            height: h,
                            new_view: view,
                            prepared: None,
                            fast_vote: None,
                            beacon_share: None,
                            block: None,
                            signature: S::Signature::generator(),
                        };
                        // Its own signature stands in for everyone's.
                        self.sign_view_change(&mut vc);
                        Arc::new(vc)
                    })
                    .collect();
                out.push(Output::Broadcast(Message::NewView {
                    height: h,
                    view,
                    view_changes,
                    block: self.rogue_block(b"forged view change"),
                }));
            }
            Behaviour::HugeView => {
                if !self.attacked.insert((h, View::MAX)) {
                    return;
                }
                let mut vc = ViewChange {
                    from: me,
                    height: h,
                    new_view: View::MAX,
                    prepared: None,
                    fast_vote: None,
                    beacon_share: None,
                    block: None,
                    signature: S::Signature::generator(),
                };
                self.sign_view_change(&mut vc);
                let vc = Arc::new(vc);
                let block = self.rogue_block(b"huge view");
                out.push(Output::Broadcast(Message::ViewChange(vc.clone())));
                out.push(Output::Broadcast(Message::NewView {
                    height: h,
                    view: View::MAX,
                    view_changes: vec![vc],
                    block: block.clone(),
                }));
                out.push(Output::Broadcast(Message::PrePrepare {
                    height: h,
                    view: View::MAX,
                    block,
                }));
            }
            _ => {}
        }
    }

    fn rewrite(&self, output: Output<S>, out: &mut Vec<Output<S>>) {
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
                self.split(out, &block, &other, |block| Message::PrePrepare {
                    height,
                    view,
                    block,
                });
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
                let view = vc.new_view.saturating_sub(1);
                let hashed = S::hash_message(&signed::fast_vote(vc.height, view, &digest));
                let share = self.keys.sigma.share.sign_hashed::<S>(&hashed).signature;
                let mut forged = ViewChange {
                    fast_vote: Some(FastVote {
                        view,
                        digest,
                        share,
                    }),
                    block: None,
                    ..(*vc).clone()
                };
                self.sign_view_change(&mut forged);
                out.push(Output::Broadcast(Message::ViewChange(Arc::new(forged))));
            }
            (
                Behaviour::SplitNewView,
                Output::Broadcast(Message::NewView {
                    height,
                    view,
                    view_changes,
                    block,
                }),
            ) => {
                let other = self.rogue_block(b"split new view");
                self.split(out, &block, &other, |block| Message::NewView {
                    height,
                    view,
                    view_changes: view_changes.clone(),
                    block,
                });
            }
            (
                Behaviour::WithholdBeacon,
                Output::Broadcast(
                    Message::Beacon { .. }
                    | Message::BeaconShare { .. }
                    | Message::SyncResponse { .. },
                )
                | Output::Send {
                    message:
                        Message::Beacon { .. }
                        | Message::BeaconShare { .. }
                        | Message::SyncResponse { .. },
                    ..
                },
            ) => {}
            (
                Behaviour::WithholdBeacon,
                Output::Broadcast(Message::CommitProof { certificate, .. }),
            ) => out.push(Output::Broadcast(Message::CommitProof {
                certificate,
                beacon: None,
            })),
            (_, o) => out.push(o),
        }
    }
}

impl<S: Scheme> Participant<S> for ByzantineReplica<S> {
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        let mut pending: VecDeque<Output<S>> = self.inner.handle(now, input).into();
        let mut out = Vec::with_capacity(pending.len());
        while let Some(o) = pending.pop_front() {
            match (self.behaviour, o) {
                // An eager primary does not wait for the round's time.
                (
                    Behaviour::EagerPrimary,
                    Output::SetTimer {
                        timer: timer @ Timer::Propose { .. },
                        ..
                    },
                ) => pending.extend(self.inner.handle(now, Input::Timer(timer))),
                (_, o) => self.rewrite(o, &mut out),
            }
        }
        self.attack(&mut out);
        out
    }
    fn index(&self) -> NodeIndex {
        self.inner.me()
    }
    fn finalized(&self) -> &ChainWindow<S> {
        self.inner.chain()
    }
    fn current_height(&self) -> Height {
        self.inner.height()
    }
    fn is_honest(&self) -> bool {
        false
    }
}
