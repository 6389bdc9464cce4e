//! Byzantine replicas as swappable implementations: each wraps an honest
//! [`Replica`] and rewrites what it sends. The honest code has no fault flags.

pub use crate::behaviour::Behaviour;
use crate::byzantine_dkg::ByzantineSession;
use crate::keys::ReplicaKeys;
use crate::messages::{
    signed, Block, CommitCertificate, CommitPath, FastVote, Message, ViewChange, ViewChangeProof,
};
use crate::participant::{Adversary, Participant};
use crate::replica::{ChainWindow, Input, Output, Replica, Timer, FUTURE_HEIGHTS, FUTURE_LIMIT};
use crate::{Height, View};
use beacon::dkg::session::{DkgSession, SessionParticipant};
use beacon::effect::Effect;
use beacon::multisig::SignerBitmap;
use beacon::{NodeIndex, Point, Scalar, Scheme, Time};
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

impl Behaviour {
    /// This behaviour as what a driver plugs into a [`crate::Member`].
    pub fn adversary<S: Scheme>(self) -> Arc<dyn Adversary<S>> {
        Arc::new(self)
    }
}

/// A member with a behaviour wraps its DKG session when the behaviour is a
/// DKG one (the session is honest otherwise), and every replica.
impl<S: Scheme> Adversary<S> for Behaviour {
    fn session(&self, session: DkgSession<S>) -> Box<dyn SessionParticipant<S>> {
        if self.is_dkg() {
            Box::new(ByzantineSession::new(session, *self))
        } else {
            Box::new(session)
        }
    }

    fn replica(&self, replica: Replica<S>, keys: ReplicaKeys<S>) -> Box<dyn Participant<S>> {
        Box::new(ByzantineReplica::new(replica, keys, *self))
    }
}

/// A Byzantine replica: an honest [`Replica`] whose outputs are rewritten.
pub struct ByzantineReplica<S: Scheme> {
    inner: Replica<S>,
    keys: ReplicaKeys<S>,
    behaviour: Behaviour,
    /// (height, view) pairs already attacked, so each attack goes out once.
    attacked: BTreeSet<(Height, View)>,
    /// `flood-future-heights`: whether the first flood, the one that fills
    /// the others' buffers, has gone out (later ones only top them up).
    flooded: bool,
}

impl<S: Scheme> ByzantineReplica<S> {
    /// Wraps `inner` (built with `keys`) with `behaviour`.
    pub fn new(inner: Replica<S>, keys: ReplicaKeys<S>, behaviour: Behaviour) -> Self {
        ByzantineReplica {
            inner,
            keys,
            behaviour,
            attacked: BTreeSet::new(),
            flooded: false,
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
        vc.signature = self.keys.sign_vote(&vc.signed_message());
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
            out.push(Output::send(NodeIndex(j), make(block)));
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
                let view_changes: Vec<Arc<ViewChange<S>>> = (0..n)
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
                out.push(Output::broadcast(Message::NewView {
                    height: h,
                    view,
                    proof: ViewChangeProof::aggregate(&view_changes),
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
                out.push(Output::broadcast(Message::ViewChange(vc.clone())));
                out.push(Output::broadcast(Message::NewView {
                    height: h,
                    view: View::MAX,
                    proof: ViewChangeProof::aggregate(&[vc]),
                    block: block.clone(),
                }));
                out.push(Output::broadcast(Message::PrePrepare {
                    height: h,
                    view: View::MAX,
                    block,
                }));
            }
            Behaviour::FloodFutureHeights => {
                if !self.attacked.insert((h, View::ZERO)) {
                    return;
                }
                // At first, enough to fill a replica's buffer of later heights
                // (spread over heights h + 2 to h + 64, not h + 1, which is
                // replayed soon); then, at each height, the messages of height
                // h + 1 the others have taken out meanwhile, at h + 64.
                let (count, first) = if !std::mem::replace(&mut self.flooded, true) {
                    (FUTURE_LIMIT as u64, 2)
                } else {
                    (
                        FUTURE_LIMIT as u64 / (FUTURE_HEIGHTS - 1) + 1,
                        FUTURE_HEIGHTS,
                    )
                };
                let span = FUTURE_HEIGHTS + 1 - first;
                for k in 0..count {
                    out.push(Output::broadcast(Message::SignShare {
                        height: h.saturating_add(first + k % span),
                        view: View::ZERO,
                        digest: [k as u8; 32],
                        vote: S::Signature::generator(),
                        beacon: S::Signature::generator(),
                    }));
                }
            }
            Behaviour::ShareSumCertificate => {
                if !self.attacked.insert((h, View::ZERO)) {
                    return;
                }
                let config = self.inner.config();
                let (n, quorum) = (config.n, config.fast_threshold());
                let block = self.rogue_block(b"share-sum certificate");
                let view = self.inner.view();
                let digest = block.digest();
                let msg = signed::fast_vote(h, view, &digest);
                let named = (0..quorum).map(|j| NodeIndex((me.0 + j) % n));
                let Ok(signers) = SignerBitmap::of(n, named) else {
                    return;
                };
                let times = Scalar::from_u64(u64::from(quorum));
                let hashed = self.keys.epoch.hash_vote(&msg);
                let from_share = hashed.mul(self.keys.beacon.share.value()).mul(&times);
                let from_own = self.keys.sign_vote(&msg).mul(&times);
                out.push(Output::broadcast(Message::BlockResponse { block }));
                for signature in [from_share, from_own] {
                    let certificate = CommitCertificate {
                        height: h,
                        view,
                        digest,
                        path: CommitPath::Fast,
                        signature,
                        signers: signers.clone(),
                    };
                    out.push(Output::broadcast(Message::CommitProof {
                        certificate,
                        beacon: None,
                    }));
                }
            }
            _ => {}
        }
    }

    fn rewrite(&self, output: Output<S>, out: &mut Vec<Output<S>>) {
        let Output::Effect(effect) = output else {
            return out.push(output);
        };
        match (self.behaviour, effect) {
            (Behaviour::Silent, Effect::Send { .. } | Effect::Broadcast(_)) => {}
            (
                Behaviour::EquivocatingPrimary,
                Effect::Broadcast(Message::PrePrepare {
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
                Effect::Send {
                    to,
                    message:
                        Message::SignShare {
                            height,
                            view,
                            digest,
                            vote,
                            beacon,
                        },
                },
            ) => {
                let message = Message::SignShare {
                    height,
                    view,
                    digest,
                    vote: Self::corrupt(vote),
                    beacon: Self::corrupt(beacon),
                };
                out.push(Output::send(to, message));
            }
            (
                Behaviour::BadShares,
                Effect::Send {
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
                let message = Message::CommitShare {
                    height,
                    view,
                    digest,
                    share: Self::corrupt(share),
                };
                out.push(Output::send(to, message));
            }
            (
                Behaviour::BadShares,
                Effect::Send {
                    to,
                    message: Message::BeaconShare { round, share },
                },
            ) => {
                let message = Message::BeaconShare {
                    round,
                    share: Self::corrupt(share),
                };
                out.push(Output::send(to, message));
            }
            (Behaviour::BadShares, Effect::Broadcast(Message::BeaconShare { round, share })) => {
                let message = Message::BeaconShare {
                    round,
                    share: Self::corrupt(share),
                };
                out.push(Output::broadcast(message));
            }
            (
                Behaviour::WithholdShares,
                Effect::Send {
                    message:
                        Message::SignShare { .. }
                        | Message::CommitShare { .. }
                        | Message::BeaconShare { .. },
                    ..
                },
            )
            | (Behaviour::WithholdShares, Effect::Broadcast(Message::BeaconShare { .. })) => {}
            (
                Behaviour::SilentCollector,
                Effect::Broadcast(
                    Message::CommitProof { .. } | Message::Prepare { .. } | Message::Beacon { .. },
                ),
            ) => {}
            (Behaviour::ConflictingViewChange, Effect::Broadcast(Message::ViewChange(vc))) => {
                let digest: [u8; 32] =
                    Sha256::digest(format!("never proposed {}", vc.height)).into();
                let view = vc.new_view.saturating_sub(1);
                let share = self
                    .keys
                    .sign_vote(&signed::fast_vote(vc.height, view, &digest));
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
                out.push(Output::broadcast(Message::ViewChange(Arc::new(forged))));
            }
            (
                Behaviour::SplitNewView,
                Effect::Broadcast(Message::NewView {
                    height,
                    view,
                    proof,
                    block,
                }),
            ) => {
                let other = self.rogue_block(b"split new view");
                self.split(out, &block, &other, |block| Message::NewView {
                    height,
                    view,
                    proof: proof.clone(),
                    block,
                });
            }
            (
                Behaviour::WithholdBeacon,
                Effect::Broadcast(
                    Message::Beacon { .. }
                    | Message::BeaconShare { .. }
                    | Message::SyncResponse { .. },
                )
                | Effect::Send {
                    message:
                        Message::Beacon { .. }
                        | Message::BeaconShare { .. }
                        | Message::SyncResponse { .. },
                    ..
                },
            ) => {}
            (
                Behaviour::WithholdBeacon,
                Effect::Broadcast(Message::CommitProof { certificate, .. }),
            ) => out.push(Output::broadcast(Message::CommitProof {
                certificate,
                beacon: None,
            })),
            (_, e) => out.push(Output::Effect(e)),
        }
    }
}

impl<S: Scheme> Participant<S> for ByzantineReplica<S> {
    fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        let mut pending: VecDeque<Output<S>> = self.inner.handle(now, input).into();
        let mut out = Vec::with_capacity(pending.len());
        while let Some(o) = pending.pop_front() {
            match (self.behaviour, o) {
                // An eager replica does not wait for the round's time: it
                // votes (and releases its beacon share) on what it holds at once.
                // It tells its replica the release time has come (the real
                // timer still fires, for proposals that arrive later).
                (
                    Behaviour::EagerPrimary,
                    o @ Output::Effect(Effect::SetTimer {
                        at,
                        timer: timer @ Timer::Release { .. },
                    }),
                ) => {
                    pending.extend(self.inner.handle(at, Input::Timer(timer)));
                    self.rewrite(o, &mut out);
                }
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
