//! Step 3 as a collector (one of the `c + 1` drawn for the view): tally the
//! voters' signatures and say what is ready — a commit proof from `3f + c + 1`
//! votes (fast path) or `2f + c + 1` COMMIT votes (slow path), a PREPARE from
//! `2f + c + 1` of the same votes once the fast-path timer expired (a vote in
//! SIGN-SHARE is both a fast-path and a prepare vote: one tally, checked once),
//! each a multi-signature with the bitmap of its signers — and, with the
//! beacon shares that ride on SIGN-SHARE, `beta_h` (step 4). What is ready is
//! broadcast (through the backup rule, [`super::backup`]) and delivered to this
//! replica through the loopback like anyone else's: the collector never commits
//! or votes itself.

use super::interface::{EvidenceKind, ShareKind, Timer};
use super::outbox::{Origin, Outbox};
use super::tally::Tally;
use super::verifier::Verifier;
use super::Replica;
use crate::config::{BeaconShares, ReplicaConfig};
use crate::messages::{signed, CommitCertificate, CommitPath, Digest, Message, PrepareCertificate};
use crate::{Height, View};
use beacon::{Scheme, Time};
use std::collections::BTreeMap;

/// The two signatures of one SIGN-SHARE, on one block in one view.
pub(super) struct VoteShares<S: Scheme> {
    /// The vote (the sender's own key): fast-path and prepare vote at once.
    pub(super) vote: S::Signature,
    /// Beacon share.
    pub(super) beacon: S::Signature,
}

/// A collector's state at one height, by view.
pub(super) struct Collector<S: Scheme> {
    views: BTreeMap<View, Collecting<S>>,
}

/// A collector's state for one view.
struct Collecting<S: Scheme> {
    rank: usize,
    fast_timer_set: bool,
    fast_timer_fired: bool,
    votes: Tally<S, Digest>,
    commit: Tally<S, Digest>,
    prepare_sent: bool,
    proof_sent: bool,
}

/// What a collector has ready to send.
enum Collected<S: Scheme> {
    /// A commit proof (fast or slow path).
    Proof(CommitCertificate<S>),
    /// A prepare certificate (first half of the slow path).
    Prepare(PrepareCertificate<S>),
}

impl<S: Scheme> Collector<S> {
    /// Nothing collected.
    pub(super) fn new() -> Self {
        Collector {
            views: BTreeMap::new(),
        }
    }

    /// This collector's rank in `view` (0 acts at once), if it collects there.
    pub(super) fn rank(&self, view: View) -> Option<usize> {
        self.views.get(&view).map(|c| c.rank)
    }

    /// What is ready in `view` at height `h`, in order: the fast-path proof,
    /// the slow-path proof, then (after the fast-path timer) the PREPARE.
    fn ready(
        &mut self,
        view: View,
        h: Height,
        config: &ReplicaConfig,
        verifier: &mut Verifier<S>,
        outbox: &mut Outbox<S>,
    ) -> Option<Collected<S>> {
        let col = self.views.get_mut(&view)?;
        if col.proof_sent {
            return None;
        }
        let fast_t = config.fast_threshold() as usize;
        let slow_t = config.slow_threshold() as usize;
        let proof = |digest, path, signature, signers| {
            Collected::Proof(CommitCertificate {
                height: h,
                view,
                digest,
                path,
                signature,
                signers,
            })
        };
        if let Some((digest, sig, signers)) = col.votes.recover(fast_t, verifier, h, outbox) {
            col.proof_sent = true;
            return Some(proof(digest, CommitPath::Fast, sig, signers));
        }
        if let Some((digest, sig, signers)) = col.commit.recover(slow_t, verifier, h, outbox) {
            col.proof_sent = true;
            return Some(proof(digest, CommitPath::Slow, sig, signers));
        }
        if !col.fast_timer_fired || col.prepare_sent {
            return None;
        }
        let (digest, signature, signers) = col.votes.recover(slow_t, verifier, h, outbox)?;
        col.prepare_sent = true;
        Some(Collected::Prepare(PrepareCertificate {
            view,
            digest,
            signature,
            signers,
        }))
    }
}

impl<S: Scheme> Replica<S> {
    /// The collecting state of `view`, when this replica is one of its
    /// collectors and `view` is current.
    fn collecting(&mut self, view: View) -> Option<&mut Collecting<S>> {
        let rank = self.round.election.rank(self.me())?;
        if view != self.view {
            return None;
        }
        let n = self.config.n;
        Some(
            self.round
                .collector
                .views
                .entry(view)
                .or_insert_with(|| Collecting {
                    rank,
                    fast_timer_set: false,
                    fast_timer_fired: false,
                    votes: Tally::new(ShareKind::Vote, n),
                    commit: Tally::new(ShareKind::Commit, n),
                    prepare_sent: false,
                    proof_sent: false,
                }),
        )
    }

    /// Step 3: a SIGN-SHARE. The first one of a view from another replica
    /// starts the fast-path timer (this collector's own share leaves at once
    /// when it is also the primary: counting from it would spend a whole round
    /// trip of the wait before any other share can arrive, and send rounds of
    /// long links down the slow path for nothing); the beacon share goes to the
    /// beacon round (step 4).
    pub(super) fn on_sign_share(
        &mut self,
        now: Time,
        origin: Origin,
        view: View,
        digest: Digest,
        shares: VoteShares<S>,
    ) {
        let VoteShares { vote, beacon } = shares;
        let (from, h, me) = (origin.from, self.height, self.me());
        if self.verifier.is_convicted(from, h) {
            return;
        }
        let Some(col) = self.collecting(view) else {
            return;
        };
        let first = from != me && !col.fast_timer_set;
        col.fast_timer_set |= first;
        let message = signed::fast_vote(h, view, &digest);
        if !col.votes.insert(digest, &message, from, vote) {
            let kind = EvidenceKind::ConflictingVotes {
                view,
                share: ShareKind::Vote,
            };
            self.outbox.evidence(from, h, kind);
        }
        self.add_beacon_share(from, beacon);
        if first {
            let at = now.plus_micros(self.config.fast_path_timeout_us);
            self.outbox.timer(at, Timer::FastPath { height: h, view });
        }
        self.collect(now, view);
    }

    /// Step 3, slow path: a COMMIT share.
    pub(super) fn on_commit_share(
        &mut self,
        now: Time,
        origin: Origin,
        view: View,
        digest: Digest,
        share: S::Signature,
    ) {
        let (from, h) = (origin.from, self.height);
        if self.verifier.is_convicted(from, h) {
            return;
        }
        let Some(col) = self.collecting(view) else {
            return;
        };
        if !col
            .commit
            .insert(digest, &signed::commit(h, view, &digest), from, share)
        {
            let kind = EvidenceKind::ConflictingVotes {
                view,
                share: ShareKind::Commit,
            };
            self.outbox.evidence(from, h, kind);
        }
        self.collect(now, view);
    }

    /// Step 3: the fast-path wait of `view` is over; the slow path may start.
    pub(super) fn on_fast_path_timer(&mut self, now: Time, view: View) {
        if let Some(col) = self.round.collector.views.get_mut(&view) {
            col.fast_timer_fired = true;
            self.collect(now, view);
        }
    }

    /// Sends what is ready in `view`: the beacon (with `early_beacon`), then a
    /// commit proof (carrying the beacon when known) or a PREPARE (kept for
    /// retransmission). Each goes to this replica too, through the loopback.
    fn collect(&mut self, now: Time, view: View) {
        let h = self.height;
        let me = self.me();
        if self.round.election.rank(me).is_some() {
            if let Some(signature) = self.recover_beacon() {
                // Where everyone shares, everyone combines: no one waits for it.
                if self.config.early_beacon
                    && self.config.beacon_share_route() == BeaconShares::Collectors
                {
                    let beacon = Message::Beacon {
                        round: h,
                        signature,
                    };
                    self.collector_broadcast(now, view, beacon);
                }
            }
        }
        if self.round.commit.committed().is_some() {
            return;
        }
        let ready =
            self.round
                .collector
                .ready(view, h, &self.config, &mut self.verifier, &mut self.outbox);
        let message = match ready {
            None => return,
            Some(Collected::Proof(certificate)) => Message::CommitProof {
                certificate,
                beacon: self.round.beacon.known(),
            },
            Some(Collected::Prepare(certificate)) => {
                let prepare = Message::Prepare {
                    height: h,
                    certificate,
                };
                // Broadcast again with the retransmissions until the height commits.
                self.round.retransmit.keep_broadcast(view, prepare.clone());
                prepare
            }
        };
        self.collector_broadcast(now, view, message.clone());
        self.outbox.loop_back(me, message);
    }
}
