//! The SBFT-style replica: one pure state machine per member,
//! `handle(now, input) -> Vec<Output>`, with no I/O, clock or hidden randomness.
//!
//! Per height `h`, view `v` (see `SAFETY.md` for why it is safe):
//! 1. The primary of `(h, v)` — drawn, with `c + 1` collectors, from the beacon of
//!    round `h - k` — proposes a block in PRE-PREPARE, no earlier than the round's
//!    time when a period is set.
//! 2. Each replica accepts one proposal per view and sends one SIGN-SHARE to the
//!    collectors: `sigma_i` and `tau_i` on the block digest, and its beacon share of
//!    round `h` (message `SHA-256(beta_{h-1} || u64_be(h))`, drand's chained rule).
//! 3. A collector with `3f + c + 1` sigma shares broadcasts the fast-path commit
//!    proof. When its fast-path timer expires with `2f + c + 1` tau shares it
//!    broadcasts PREPARE; replicas answer with COMMIT shares; `2f + c + 1` of them
//!    make the slow-path commit proof.
//! 4. `t_b` beacon shares make `beta_h`, broadcast alone as soon as it exists (with
//!    `early_beacon`) and attached to the commit proof. Threshold BLS is unique, so
//!    `beta_h` is the same whoever aggregates it and whatever the view.
//! 5. On timeout, VIEW-CHANGE carries the highest prepare certificate and fast vote;
//!    the new primary needs `2f + 2c + 1` and re-proposes the only safe block
//!    ([`safe_value`]) in NEW-VIEW. Everyone counts view changes (O(1) each) for the
//!    join rule: `f + 1` replicas wanting a later view pull a replica along.
//!
//! Liveness on lossy links: shares to collectors (and a collector's PREPARE) are
//! sent again every two fast-path timeouts until the height commits; a replica
//! that hears a VIEW-CHANGE for an older view answers once with its own latest
//! VIEW-CHANGE or NEW-VIEW, so restarted or cut-off replicas rejoin quickly.
//!
//! A height is finalized when its block is committed and its beacon known; the
//! replica then moves to `h + 1`. Collectors verify optimistically (one check of the
//! recovered signature) and fall back to batch verification with bisection; invalid
//! shares become [`Evidence`], never a bad proof or beacon. Rank-0 collectors act at
//! once; a backup collector of rank `r` acts after `r` backup delays if the result
//! has not reached it by then.
//!
//! Submodules: `beacon_shares` (the beacon from shares, and BEACON-SHARE when
//! the collectors withhold it), `view_change_checks` (signatures and claims of
//! the view changes in a NEW-VIEW).

mod beacon_shares;
mod chain;
mod view_change_checks;

use crate::config::{ReplicaConfig, ReplicaKeys};
use crate::election::Election;
use crate::messages::{
    signed, Block, CommitCertificate, CommitPath, CommittedEntry, Digest, FastVote, Message,
    PrepareCertificate, ViewChange,
};
use crate::view_change::safe_value;
use crate::{Height, View};
use beacon::chain::round_message;
use beacon::memo::Memo;
use beacon::{
    InterpolationMethod, NodeIndex, Point, Scheme, ShareSet, SignatureShare, ThresholdPublicKey,
    Time,
};
pub use chain::{sync_response, ChainWindow, CHAIN_WINDOW};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use sha2::{Digest as _, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;

/// Most messages buffered for future heights or views.
const FUTURE_LIMIT: usize = 20_000;
/// Furthest height ahead that is buffered.
const FUTURE_HEIGHTS: u64 = 64;
/// Most entries in one sync response.
const SYNC_BATCH: usize = 64;
/// Messages for views more than this far above the current one are ignored: no
/// honest replica gets there before the timeouts in between have run, and a view
/// number from the network must never drive arithmetic or memory.
pub const VIEW_WINDOW: View = 1024;
/// A new primary keeps view changes for views at most this far above its own.
const VIEW_CHANGE_STORE_WINDOW: View = 8;
/// Heights for which a replica proven to send invalid shares is ignored.
pub const CONVICTION_HEIGHTS: Height = 64;
/// Most proposals held until a paced round's release time.
const HELD_LIMIT: usize = 64;
/// Most bytes of blocks in one sync response (one entry is always sent, so a
/// response is at most this plus one block and its proof).
pub const SYNC_RESPONSE_BYTES: usize = 4 << 20;

/// Bytes of a block's wire encoding: height, parent, previous beacon, and each
/// transaction with its 8-byte length.
pub fn block_bytes(block: &Block) -> usize {
    block_header_bytes(block.previous_beacon.len())
        + block
            .transactions
            .iter()
            .map(|t| t.len() + 8)
            .sum::<usize>()
}

fn block_header_bytes(previous_beacon: usize) -> usize {
    8 + 32 + 8 + previous_beacon + 8
}

/// Inputs of a replica.
#[derive(Clone, Debug)]
pub enum Input<S: Scheme> {
    /// Start (or resume) participating.
    Start,
    /// A message from an authenticated sender.
    Message {
        /// Sender.
        from: NodeIndex,
        /// Message.
        message: Message<S>,
    },
    /// A timer fired.
    Timer(Timer),
    /// A client transaction (opaque bytes).
    ClientTransaction(Vec<u8>),
}

/// Timers a replica asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// The round's time has come: the primary may propose.
    Propose {
        /// Height.
        height: Height,
    },
    /// A collector's fast-path wait is over.
    FastPath {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// No commit in time: change view.
    ViewChange {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// Send this view's shares to the collectors again.
    Retransmit {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// A backup collector's turn to act.
    BackupCollector {
        /// Height.
        height: Height,
        /// View.
        view: View,
    },
    /// A paced round's release time: proposals held until now may be signed.
    Release {
        /// Height.
        height: Height,
    },
}

/// What a collector or replica proved about another replica.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The misbehaving replica.
    pub culprit: NodeIndex,
    /// Height.
    pub height: Height,
    /// What it did.
    pub kind: EvidenceKind,
}

/// Kinds of misbehaviour.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvidenceKind {
    /// An invalid signature share for one of the keys.
    InvalidShare {
        /// "sigma", "tau", "commit" or "beacon".
        key: &'static str,
    },
    /// Two different proposals from the primary in one view.
    ConflictingProposals {
        /// View.
        view: View,
    },
    /// A beacon, proof or certificate that does not verify.
    InvalidProof {
        /// Which message.
        what: &'static str,
    },
}

/// Outputs of a replica.
#[derive(Clone, Debug)]
pub enum Output<S: Scheme> {
    /// Send to one replica.
    Send {
        /// Recipient.
        to: NodeIndex,
        /// Message.
        message: Message<S>,
    },
    /// Send to every other replica.
    Broadcast(Message<S>),
    /// Fire `timer` at `at`.
    SetTimer {
        /// When.
        at: Time,
        /// Which.
        timer: Timer,
    },
    /// A block committed.
    Committed {
        /// The block.
        block: Arc<Block>,
        /// Its proof.
        certificate: CommitCertificate<S>,
        /// When this replica first saw the proposal.
        proposed_at: Time,
        /// Now.
        committed_at: Time,
    },
    /// A beacon became known (verified).
    Beacon {
        /// The beacon in drand's format.
        beacon: beacon::Beacon,
        /// When the previous beacon became known here.
        previous_learned_at: Time,
        /// Now.
        learned_at: Time,
    },
    /// A height is complete (block and beacon): persist it.
    Finalized(Arc<CommittedEntry<S>>),
    /// This replica moved to a new view.
    ViewChanged {
        /// Height.
        height: Height,
        /// New view.
        view: View,
    },
    /// Provable misbehaviour of another replica.
    Evidence(Evidence),
    /// A peer asked for finalized heights older than this replica keeps in
    /// memory: the driver answers from its store with a
    /// [`Message::SyncResponse`] (see [`sync_response`]).
    SyncFromStore {
        /// Who asked.
        to: NodeIndex,
        /// First height wanted.
        from_height: Height,
    },
}

/// Which shares a collector aggregates.
#[derive(Clone, Copy)]
enum ShareKey {
    /// Fast-path votes.
    Sigma,
    /// Prepare votes.
    Tau,
    /// Slow-path commit shares.
    Commit,
}

impl ShareKey {
    fn name(self) -> &'static str {
        match self {
            ShareKey::Sigma => "sigma",
            ShareKey::Tau => "tau",
            ShareKey::Commit => "commit",
        }
    }

    /// Adds `from`'s share on `digest` (whose signed message is `message`), unless
    /// `from` already proved faulty for this key.
    fn insert<S: Scheme>(
        self,
        col: &mut Collecting<S>,
        n: u32,
        digest: Digest,
        message: Digest,
        from: NodeIndex,
        signature: S::Signature,
    ) {
        if col.invalid.contains(&(from, self.name())) {
            return;
        }
        let set = self
            .sets(col)
            .entry(digest)
            .or_insert_with(|| ShareSet::new(message.to_vec(), n));
        let _ = set.insert(
            &message,
            SignatureShare {
                signer: from,
                signature,
            },
        );
    }

    fn sets<S: Scheme>(self, col: &mut Collecting<S>) -> &mut BTreeMap<Digest, ShareSet<S>> {
        match self {
            ShareKey::Sigma => &mut col.sigma,
            ShareKey::Tau => &mut col.tau,
            ShareKey::Commit => &mut col.commit,
        }
    }
}

/// A collector's state for one `(height, view)`.
struct Collecting<S: Scheme> {
    rank: usize,
    fast_timer_fired: bool,
    sigma: BTreeMap<Digest, ShareSet<S>>,
    tau: BTreeMap<Digest, ShareSet<S>>,
    commit: BTreeMap<Digest, ShareSet<S>>,
    invalid: BTreeSet<(NodeIndex, &'static str)>,
    prepare_sent: bool,
    proof_sent: bool,
}

/// A backup collector's deferred broadcasts for one `(height, view)`; dropped when
/// another collector's result arrives first.
struct Deferred<S: Scheme> {
    pending: Vec<Message<S>>,
    proof_seen: bool,
    beacon_seen: bool,
}

/// Everything about the height being decided.
struct RoundState<S: Scheme> {
    election: Election,
    beacon: Option<S::Signature>,
    beacon_from_peer: bool,
    beacon_shares: ShareSet<S>,
    beacon_invalid: BTreeSet<NodeIndex>,
    committed: Option<(Arc<Block>, CommitCertificate<S>)>,
    pending_certificate: Option<CommitCertificate<S>>,
    blocks: BTreeMap<Digest, Arc<Block>>,
    accepted: BTreeMap<View, Digest>,
    proposal_seen_at: Option<Time>,
    proposed: BTreeSet<View>,
    fast_vote: Option<FastVote<S>>,
    prepared: Option<PrepareCertificate<S>>,
    commit_share_sent: BTreeSet<View>,
    collecting: BTreeMap<View, Collecting<S>>,
    view_changes: BTreeMap<View, BTreeMap<NodeIndex, Arc<ViewChange<S>>>>,
    wanted: BTreeMap<NodeIndex, View>,
    wanted_count: BTreeMap<View, u32>,
    /// Shares sent to the collectors, by view, for retransmission.
    resend: Vec<(View, Message<S>)>,
    /// Views whose retransmission timer runs.
    retransmit_armed: BTreeSet<View>,
    /// As a collector: PREPAREs to broadcast again until the height commits.
    resend_broadcast: Vec<(View, Message<S>)>,
    /// Our latest VIEW-CHANGE or accepted NEW-VIEW at this height.
    latest_view_message: Option<Message<S>>,
    /// (replica, our view) pairs already answered.
    answered: BTreeSet<(NodeIndex, View)>,
    primaries: BTreeMap<View, NodeIndex>,
    new_view_sent: BTreeSet<View>,
    in_view_change: bool,
    future_views: Vec<(NodeIndex, Message<S>)>,
    /// Proposals that arrived before the round's release time.
    held: Vec<(NodeIndex, Message<S>)>,
    /// Whether this replica sent its beacon share to everyone (committed, but no
    /// beacon in time).
    beacon_share_sent: bool,
}

/// One honest replica.
pub struct Replica<S: Scheme> {
    config: ReplicaConfig,
    keys: ReplicaKeys<S>,
    memo: Arc<Memo>,
    rng: ChaCha20Rng,
    started: bool,
    chain: ChainWindow<S>,
    height: Height,
    view: View,
    previous_beacon: Vec<u8>,
    previous_beacon_at: Time,
    round: RoundState<S>,
    mempool: VecDeque<Vec<u8>>,
    mempool_index: HashSet<Digest>,
    mempool_bytes: usize,
    future: BTreeMap<Height, Vec<(NodeIndex, Message<S>)>>,
    future_count: usize,
    last_sync_request: Option<Time>,
    deferred: BTreeMap<(Height, View), Deferred<S>>,
    /// Replicas proven to have sent invalid shares, with the height of their
    /// last conviction: their shares are ignored for [`CONVICTION_HEIGHTS`].
    convicted: BTreeMap<NodeIndex, Height>,
    out: Vec<Output<S>>,
}

impl<S: Scheme> Replica<S> {
    /// A replica at height 1. `seed` drives its private randomness (batch
    /// verification weights); `memo` shares pure public computations in simulation.
    pub fn new(
        config: ReplicaConfig,
        keys: ReplicaKeys<S>,
        seed: [u8; 32],
        memo: Arc<Memo>,
    ) -> Self {
        Self::restore(config, keys, seed, memo, ChainWindow::default())
    }

    /// A replica resuming after `chain` (its most recent persisted finalized
    /// heights; see [`ChainWindow::resume`]).
    pub fn restore(
        config: ReplicaConfig,
        keys: ReplicaKeys<S>,
        seed: [u8; 32],
        memo: Arc<Memo>,
        chain: ChainWindow<S>,
    ) -> Self {
        let height = chain.height() + 1;
        let previous_beacon = chain
            .last()
            .map(|e| e.beacon.to_bytes())
            .unwrap_or_else(|| config.genesis_seed.to_vec());
        let round = RoundState::new(&config, &chain, height, 0, &previous_beacon);
        Replica {
            rng: ChaCha20Rng::from_seed(seed),
            config,
            keys,
            memo,
            started: false,
            chain,
            height,
            view: 0,
            previous_beacon,
            previous_beacon_at: Time::ZERO,
            round,
            mempool: VecDeque::new(),
            mempool_index: HashSet::new(),
            mempool_bytes: 0,
            future: BTreeMap::new(),
            future_count: 0,
            last_sync_request: None,
            deferred: BTreeMap::new(),
            convicted: BTreeMap::new(),
            out: Vec::new(),
        }
    }

    /// The height being decided.
    pub fn height(&self) -> Height {
        self.height
    }

    /// The current view.
    pub fn view(&self) -> View {
        self.view
    }

    /// This replica.
    pub fn me(&self) -> NodeIndex {
        self.keys.me
    }

    /// The most recent finalized heights.
    pub fn chain(&self) -> &ChainWindow<S> {
        &self.chain
    }

    /// The configuration.
    pub fn config(&self) -> &ReplicaConfig {
        &self.config
    }

    /// The primary and collectors of `view` at the current height.
    pub fn election_of(&self, view: View) -> Election {
        RoundState::<S>::elect(&self.config, &self.chain, self.height, view)
    }

    /// Handles one input at time `now`.
    pub fn handle(&mut self, now: Time, input: Input<S>) -> Vec<Output<S>> {
        match input {
            Input::Start => {
                if !self.started {
                    self.started = true;
                    self.previous_beacon_at = now;
                    self.enter_height(now);
                }
            }
            Input::Message { from, message } if self.started && from.0 < self.config.n => {
                self.on_message(now, from, message)
            }
            Input::Message { .. } => {}
            Input::Timer(timer) if self.started => self.on_timer(now, timer),
            Input::Timer(_) => {}
            Input::ClientTransaction(tx) => self.add_transaction(tx),
        }
        std::mem::take(&mut self.out)
    }

    // ----- helpers -------------------------------------------------------------

    fn round_message(&self) -> [u8; 32] {
        round_message(S::ID, self.height, &self.previous_beacon)
    }

    /// Hash to the curve, shared between simulated replicas.
    fn hash(&self, msg: &[u8]) -> S::Signature {
        let mut h = Sha256::new();
        h.update(b"hash-to-curve");
        h.update(S::DST);
        h.update(msg);
        self.memo
            .get_or_compute(h.finalize().into(), || S::hash_message(msg))
            .as_ref()
            .to_owned()
    }

    /// Verifies a threshold signature under `key`, shared between simulated replicas.
    fn verify(&self, key: &ThresholdPublicKey<S>, msg: &[u8], sig: &S::Signature) -> bool {
        let mut h = Sha256::new();
        h.update(b"verify");
        h.update(key.group_key().to_bytes());
        h.update(msg);
        h.update(sig.to_bytes());
        let hashed = self.hash(msg);
        *self.memo.get_or_compute(h.finalize().into(), || {
            S::verify_hashed(key.group_key(), &hashed, sig)
        })
    }

    fn sign(&self, share: &beacon::SecretShare, msg: &[u8]) -> S::Signature {
        share.sign_hashed::<S>(&self.hash(msg)).signature
    }

    fn send_to(&mut self, to: NodeIndex, message: Message<S>) {
        self.out.push(Output::Send { to, message });
    }

    fn broadcast(&mut self, message: Message<S>) {
        self.out.push(Output::Broadcast(message));
    }

    fn timer(&mut self, at: Time, timer: Timer) {
        self.out.push(Output::SetTimer { at, timer });
    }

    /// Whether `from`'s shares are ignored: convicted less than
    /// [`CONVICTION_HEIGHTS`] ago (a conviction expires, so a replica that was
    /// faulty once, say with a corrupted key it has since restored, counts again).
    fn is_convicted(&self, from: NodeIndex) -> bool {
        self.convicted
            .get(&from)
            .is_some_and(|at| self.height < at.saturating_add(CONVICTION_HEIGHTS))
    }

    fn evidence(&mut self, culprit: NodeIndex, kind: EvidenceKind) {
        if matches!(kind, EvidenceKind::InvalidShare { .. }) {
            // Proven faulty: its shares are not worth verifying for a while.
            self.convicted.insert(culprit, self.height);
        }
        let height = self.height;
        self.out.push(Output::Evidence(Evidence {
            culprit,
            height,
            kind,
        }));
    }

    /// Digest of the last finalized block: its certificate names it (checked
    /// against the block when it was committed), so no re-encoding is needed.
    fn last_digest(&self) -> Digest {
        self.chain
            .last()
            .map(|e| e.certificate.digest)
            .unwrap_or([0; 32])
    }

    fn view_timeout(&self, view: View) -> u64 {
        self.config.view_timeout_us(view)
    }

    // ----- heights -------------------------------------------------------------

    fn enter_height(&mut self, now: Time) {
        self.view = 0;
        self.round = RoundState::new(
            &self.config,
            &self.chain,
            self.height,
            0,
            &self.previous_beacon,
        );
        let h = self.height;
        let round_time = Time(self.config.time_of_round(h));
        if self.round.election.primary == self.me() {
            if round_time > now {
                self.timer(round_time, Timer::Propose { height: h });
            } else {
                self.propose(now);
            }
        }
        let at = now.max(round_time).plus_micros(self.view_timeout(0));
        self.timer(at, Timer::ViewChange { height: h, view: 0 });
        let release = Time(self.config.release_time(h));
        if release > now {
            self.timer(release, Timer::Release { height: h });
        }
        if let Some(buffered) = self.future.remove(&h) {
            self.future_count -= buffered.len();
            for (from, message) in buffered {
                if self.height != h {
                    break;
                }
                self.on_message(now, from, message);
            }
        }
    }

    fn propose(&mut self, now: Time) {
        let view = self.view;
        if self.round.proposed.contains(&view) || self.round.in_view_change {
            return;
        }
        self.round.proposed.insert(view);
        let block = Arc::new(self.fresh_block());
        self.broadcast(Message::PrePrepare {
            height: self.height,
            view,
            block: block.clone(),
        });
        let me = self.me();
        self.on_pre_prepare(now, me, view, block);
    }

    /// A block for the current height from the mempool, as the primary would
    /// propose it.
    pub fn fresh_block(&self) -> Block {
        let mut room = self
            .config
            .max_block_bytes
            .saturating_sub(block_header_bytes(self.previous_beacon.len()));
        let transactions = self
            .mempool
            .iter()
            .take(self.config.max_batch)
            .take_while(|t| match room.checked_sub(t.len() + 8) {
                Some(left) => {
                    room = left;
                    true
                }
                None => false,
            })
            .cloned()
            .collect();
        Block {
            height: self.height,
            parent: self.last_digest(),
            previous_beacon: self.previous_beacon.clone(),
            transactions,
        }
    }

    fn block_is_valid(&self, block: &Block) -> bool {
        block.height == self.height
            && block.parent == self.last_digest()
            && block.previous_beacon == self.previous_beacon
            && block.transactions.len() <= self.config.max_batch
            && block
                .transactions
                .iter()
                .all(|t| t.len() <= self.config.max_transaction_bytes)
            && block_bytes(block) <= self.config.max_block_bytes
    }

    fn add_transaction(&mut self, tx: Vec<u8>) {
        if tx.len() > self.config.max_transaction_bytes
            || self.mempool.len() >= self.config.mempool_limit
            || self.mempool_bytes + tx.len() > self.config.mempool_bytes_limit
        {
            return;
        }
        let id: Digest = Sha256::digest(&tx).into();
        if self.mempool_index.insert(id) {
            self.mempool_bytes += tx.len();
            self.mempool.push_back(tx);
        }
    }

    // ----- messages ------------------------------------------------------------

    fn on_message(&mut self, now: Time, from: NodeIndex, message: Message<S>) {
        match &message {
            Message::SyncRequest { from_height } => {
                return self.on_sync_request(from, *from_height)
            }
            Message::SyncResponse { entries } => {
                let entries = entries.clone();
                return self.on_sync_response(now, entries);
            }
            Message::BlockRequest { height, digest } => {
                return self.on_block_request(from, *height, *digest)
            }
            _ => {}
        }
        let Some(h) = message.height() else { return };
        if message
            .view()
            .is_some_and(|v| v > self.view.saturating_add(VIEW_WINDOW))
        {
            return;
        }
        if let Message::BeaconShare { round, share } = message {
            return self.on_beacon_share(now, from, round, share);
        }
        if from != self.me()
            && matches!(
                message,
                Message::CommitProof { .. } | Message::Beacon { .. }
            )
        {
            self.note_peer_result(h, &message);
        }
        if h < self.height {
            return;
        }
        if h > self.height {
            if h >= self.height + 2 {
                self.maybe_sync(now, from);
            }
            if h <= self.height + FUTURE_HEIGHTS && self.future_count < FUTURE_LIMIT {
                self.future.entry(h).or_default().push((from, message));
                self.future_count += 1;
            }
            return;
        }
        if now < Time(self.config.release_time(h))
            && matches!(
                message,
                Message::PrePrepare { .. } | Message::NewView { .. }
            )
        {
            // Signing it would release our beacon share before the round's time.
            if self.round.held.len() < HELD_LIMIT {
                self.round.held.push((from, message));
            }
            return;
        }
        match message {
            Message::PrePrepare { view, block, .. } => {
                if view > self.view {
                    self.buffer_future_view(
                        from,
                        Message::PrePrepare {
                            height: h,
                            view,
                            block,
                        },
                    );
                } else {
                    self.on_pre_prepare(now, from, view, block)
                }
            }
            Message::SignShare {
                view,
                digest,
                sigma,
                tau,
                beacon,
                ..
            } => {
                if view > self.view {
                    let m = Message::SignShare {
                        height: h,
                        view,
                        digest,
                        sigma,
                        tau,
                        beacon,
                    };
                    self.buffer_future_view(from, m);
                } else {
                    self.on_sign_share(now, from, view, digest, sigma, tau, beacon)
                }
            }
            Message::CommitProof {
                certificate,
                beacon,
            } => self.on_commit_proof(now, from, certificate, beacon),
            Message::Prepare { certificate, .. } => self.on_prepare(now, from, certificate),
            Message::CommitShare {
                view,
                digest,
                share,
                ..
            } => {
                if view > self.view {
                    self.buffer_future_view(
                        from,
                        Message::CommitShare {
                            height: h,
                            view,
                            digest,
                            share,
                        },
                    );
                } else {
                    self.on_commit_share(now, from, view, digest, share)
                }
            }
            Message::Beacon { signature, .. } => self.on_beacon(now, from, signature),
            Message::ViewChange(vc) => self.on_view_change(now, from, vc),
            Message::NewView {
                view,
                view_changes,
                block,
                ..
            } => self.on_new_view(now, from, view, view_changes, block),
            Message::BlockResponse { block } => self.on_block_response(now, block),
            Message::SyncRequest { .. }
            | Message::SyncResponse { .. }
            | Message::BlockRequest { .. }
            | Message::BeaconShare { .. } => {}
        }
    }

    fn buffer_future_view(&mut self, from: NodeIndex, message: Message<S>) {
        if self.round.future_views.len() < FUTURE_LIMIT {
            self.round.future_views.push((from, message));
        }
    }

    /// SBFT step 1 (accept): one proposal per view from the view's primary.
    fn on_pre_prepare(&mut self, now: Time, from: NodeIndex, view: View, block: Arc<Block>) {
        if view != self.view || self.round.in_view_change || from != self.round.election.primary {
            return;
        }
        if view > 0 {
            // Blocks of later views arrive in NEW-VIEW, which decides what is safe.
            return;
        }
        if !self.block_is_valid(&block) {
            return;
        }
        self.accept_block(now, view, block);
    }

    fn accept_block(&mut self, now: Time, view: View, block: Arc<Block>) {
        let digest = block.digest();
        if let Some(existing) = self.round.accepted.get(&view) {
            if *existing != digest {
                let primary = self.round.election.primary;
                self.evidence(primary, EvidenceKind::ConflictingProposals { view });
            }
            return;
        }
        self.round.accepted.insert(view, digest);
        self.round.blocks.insert(digest, block);
        self.round.proposal_seen_at.get_or_insert(now);
        // SBFT step 2: one SIGN-SHARE to the collectors.
        let h = self.height;
        let sigma = self.sign(&self.keys.sigma.share, &signed::fast_vote(h, view, &digest));
        let tau = self.sign(&self.keys.tau.share, &signed::prepare(h, view, &digest));
        let beacon = self.sign(&self.keys.beacon.share, &self.round_message());
        self.round.fast_vote = Some(FastVote {
            view,
            digest,
            share: sigma,
        });
        let collectors = self.round.election.collectors.clone();
        let me = self.me();
        let message = Message::SignShare {
            height: h,
            view,
            digest,
            sigma,
            tau,
            beacon,
        };
        for c in collectors {
            if c == me {
                self.on_sign_share(now, me, view, digest, sigma, tau, beacon);
            } else {
                self.send_to(c, message.clone());
            }
        }
        self.keep_for_retransmission(now, view, message);
        // A proof may have arrived before the block.
        if let Some(cert) = self.round.pending_certificate.take() {
            self.on_certificate(now, cert);
        }
    }

    fn collecting(&mut self, view: View) -> Option<&mut Collecting<S>> {
        let rank = self.round.election.rank(self.keys.me)?;
        if view != self.view {
            return None;
        }
        Some(
            self.round
                .collecting
                .entry(view)
                .or_insert_with(|| Collecting {
                    rank,
                    fast_timer_fired: false,
                    sigma: BTreeMap::new(),
                    tau: BTreeMap::new(),
                    commit: BTreeMap::new(),
                    invalid: BTreeSet::new(),
                    prepare_sent: false,
                    proof_sent: false,
                }),
        )
    }

    /// SBFT step 3 (collect).
    #[allow(clippy::too_many_arguments)]
    fn on_sign_share(
        &mut self,
        now: Time,
        from: NodeIndex,
        view: View,
        digest: Digest,
        sigma: S::Signature,
        tau: S::Signature,
        beacon: S::Signature,
    ) {
        if self.is_convicted(from) {
            return;
        }
        let h = self.height;
        let n = self.config.n;
        let first = self
            .round
            .collecting
            .get(&view)
            .is_none_or(|c| c.sigma.is_empty() && c.tau.is_empty());
        let Some(col) = self.collecting(view) else {
            return;
        };
        ShareKey::Sigma.insert(
            col,
            n,
            digest,
            signed::fast_vote(h, view, &digest),
            from,
            sigma,
        );
        ShareKey::Tau.insert(col, n, digest, signed::prepare(h, view, &digest), from, tau);
        self.add_beacon_share(from, beacon);
        if first {
            let at = now.plus_micros(self.config.fast_path_timeout_us);
            self.timer(at, Timer::FastPath { height: h, view });
        }
        self.try_collect(now, view);
    }

    /// Recovers a threshold signature from `set`, reporting invalid shares.
    fn recover(
        &mut self,
        key: &'static str,
        public: ThresholdPublicKey<S>,
        set: &ShareSet<S>,
    ) -> (Option<S::Signature>, Vec<NodeIndex>) {
        let shares = set.shares();
        match public.recover(
            set.message(),
            &shares,
            InterpolationMethod::RootsOfUnity,
            &mut self.rng,
        ) {
            Ok(r) => {
                for culprit in &r.invalid {
                    self.evidence(*culprit, EvidenceKind::InvalidShare { key });
                }
                (r.signature, r.invalid)
            }
            Err(_) => (None, Vec::new()),
        }
    }

    fn try_collect(&mut self, now: Time, view: View) {
        let h = self.height;
        // The beacon: t_b shares of round h.
        if self.round.election.rank(self.keys.me).is_some() {
            if let Some(sig) = self.try_beacon(now) {
                if self.config.early_beacon {
                    self.collector_broadcast(
                        now,
                        view,
                        Message::Beacon {
                            round: h,
                            signature: sig,
                        },
                    );
                }
            }
        }
        let Some(col) = self.round.collecting.get(&view) else {
            return;
        };
        if col.proof_sent || self.round.committed.is_some() {
            return;
        }
        let fast_t = self.config.fast_threshold() as usize;
        let slow_t = self.config.slow_threshold() as usize;
        // Fast path: 3f+c+1 sigma shares on one digest.
        if let Some((digest, signature)) = self.aggregate_ready(view, ShareKey::Sigma, fast_t) {
            let certificate = CommitCertificate {
                height: h,
                view,
                digest,
                path: CommitPath::Fast,
                signature,
            };
            return self.finish_collecting(now, view, certificate);
        }
        // Slow path, second half: 2f+c+1 commit shares.
        if let Some((digest, signature)) = self.aggregate_ready(view, ShareKey::Commit, slow_t) {
            let certificate = CommitCertificate {
                height: h,
                view,
                digest,
                path: CommitPath::Slow,
                signature,
            };
            return self.finish_collecting(now, view, certificate);
        }
        // Slow path, first half: after the fast-path timer, 2f+c+1 tau shares.
        let col = &self.round.collecting[&view];
        if !col.fast_timer_fired || col.prepare_sent {
            return;
        }
        if let Some((digest, signature)) = self.aggregate_ready(view, ShareKey::Tau, slow_t) {
            if let Some(col) = self.round.collecting.get_mut(&view) {
                col.prepare_sent = true;
            }
            let certificate = PrepareCertificate {
                view,
                digest,
                signature,
            };
            let prepare = Message::Prepare {
                height: h,
                certificate: certificate.clone(),
            };
            // Re-broadcast with the retransmissions until the height commits.
            self.round.resend_broadcast.push((view, prepare.clone()));
            self.collector_broadcast(now, view, prepare);
            let me = self.me();
            self.on_prepare(now, me, certificate);
        }
    }

    /// Recovers the threshold signature of the first digest whose `key` shares
    /// reach `threshold`, dropping and reporting invalid shares on the way.
    fn aggregate_ready(
        &mut self,
        view: View,
        key: ShareKey,
        threshold: usize,
    ) -> Option<(Digest, S::Signature)> {
        let ready: Vec<Digest> = key
            .sets(self.round.collecting.get_mut(&view)?)
            .iter()
            .filter(|(_, s)| s.len() >= threshold)
            .map(|(d, _)| *d)
            .collect();
        for digest in ready {
            let set = key.sets(self.round.collecting.get_mut(&view)?)[&digest].clone();
            let public = match key {
                ShareKey::Sigma => self.keys.sigma.public.clone(),
                ShareKey::Tau | ShareKey::Commit => self.keys.tau.public.clone(),
            };
            let (signature, invalid) = self.recover(key.name(), public, &set);
            let col = self.round.collecting.get_mut(&view)?;
            for i in invalid {
                col.invalid.insert((i, key.name()));
                for s in key.sets(col).values_mut() {
                    s.remove(i);
                }
            }
            if let Some(signature) = signature {
                return Some((digest, signature));
            }
        }
        None
    }

    fn finish_collecting(&mut self, now: Time, view: View, certificate: CommitCertificate<S>) {
        if let Some(col) = self.round.collecting.get_mut(&view) {
            col.proof_sent = true;
        }
        let beacon = self.round.beacon;
        self.collector_broadcast(
            now,
            view,
            Message::CommitProof {
                certificate: certificate.clone(),
                beacon,
            },
        );
        self.on_certificate(now, certificate);
    }

    /// Rank-0 collectors broadcast at once; backups after `rank` backup delays,
    /// unless the result reached them first.
    fn collector_broadcast(&mut self, now: Time, view: View, message: Message<S>) {
        let h = self.height;
        let delay = self.config.backup_collector_delay_us;
        let rank = self.round.collecting.get(&view).map_or(0, |c| c.rank);
        if rank == 0 {
            return self.broadcast(message);
        }
        let entry = self.deferred.entry((h, view)).or_insert_with(|| Deferred {
            pending: Vec::new(),
            proof_seen: false,
            beacon_seen: false,
        });
        let first = entry.pending.is_empty();
        entry.pending.push(message);
        if first {
            let at = now.plus_micros(delay.saturating_mul(rank as u64));
            self.timer(at, Timer::BackupCollector { height: h, view });
        }
    }

    /// Records that another collector's result for height `h` arrived.
    fn note_peer_result(&mut self, h: Height, message: &Message<S>) {
        for ((_, _), d) in self.deferred.range_mut((h, 0)..=(h, View::MAX)) {
            match message {
                Message::CommitProof { beacon, .. } => {
                    d.proof_seen = true;
                    d.beacon_seen |= beacon.is_some();
                }
                Message::Beacon { .. } => d.beacon_seen = true,
                _ => {}
            }
        }
    }

    fn flush_backup(&mut self, height: Height, view: View) {
        let Some(d) = self.deferred.remove(&(height, view)) else {
            return;
        };
        for m in d.pending {
            let seen = match &m {
                Message::Beacon { .. } => d.beacon_seen,
                Message::CommitProof { .. } | Message::Prepare { .. } => d.proof_seen,
                _ => false,
            };
            if !seen {
                self.broadcast(m);
            }
        }
    }

    fn certificate_is_valid(&self, cert: &CommitCertificate<S>) -> bool {
        let (key, msg) = match cert.path {
            CommitPath::Fast => (
                &self.keys.sigma.public,
                signed::fast_vote(cert.height, cert.view, &cert.digest),
            ),
            CommitPath::Slow => (
                &self.keys.tau.public,
                signed::commit(cert.height, cert.view, &cert.digest),
            ),
        };
        self.verify(key, &msg, &cert.signature)
    }

    fn on_commit_proof(
        &mut self,
        now: Time,
        from: NodeIndex,
        cert: CommitCertificate<S>,
        beacon: Option<S::Signature>,
    ) {
        if let Some(sig) = beacon {
            self.on_beacon(now, from, sig);
        }
        if self.height != cert.height || self.round.committed.is_some() {
            return;
        }
        if !self.certificate_is_valid(&cert) {
            self.evidence(
                from,
                EvidenceKind::InvalidProof {
                    what: "commit proof",
                },
            );
            return;
        }
        if !self.round.blocks.contains_key(&cert.digest) {
            self.send_to(
                from,
                Message::BlockRequest {
                    height: cert.height,
                    digest: cert.digest,
                },
            );
            self.round.pending_certificate = Some(cert);
            return;
        }
        self.on_certificate(now, cert);
    }

    /// A verified certificate: commit if the block is known.
    fn on_certificate(&mut self, now: Time, cert: CommitCertificate<S>) {
        if self.round.committed.is_some() {
            return;
        }
        let Some(block) = self.round.blocks.get(&cert.digest).cloned() else {
            self.round.pending_certificate = Some(cert);
            return;
        };
        // Drop the committed transactions from the mempool in one pass.
        let committed: HashSet<&[u8]> = block
            .transactions
            .iter()
            .filter(|tx| self.mempool_index.remove(&Digest::from(Sha256::digest(tx))))
            .map(Vec::as_slice)
            .collect();
        if !committed.is_empty() {
            self.mempool_bytes -= committed.iter().map(|t| t.len()).sum::<usize>();
            self.mempool.retain(|t| !committed.contains(t.as_slice()));
        }
        let proposed_at = self.round.proposal_seen_at.unwrap_or(now);
        self.out.push(Output::Committed {
            block: block.clone(),
            certificate: cert.clone(),
            proposed_at,
            committed_at: now,
        });
        self.round.committed = Some((block, cert));
        self.try_finalize(now);
    }

    fn on_block_request(&mut self, from: NodeIndex, height: Height, digest: Digest) {
        let block = if height == self.height {
            self.round.blocks.get(&digest).cloned()
        } else {
            self.chain
                .get(height)
                .filter(|e| e.certificate.digest == digest)
                .map(|e| e.block.clone())
        };
        if let Some(block) = block {
            self.send_to(from, Message::BlockResponse { block });
        }
    }

    fn on_block_response(&mut self, now: Time, block: Arc<Block>) {
        let Some(cert) = self.round.pending_certificate.clone() else {
            return;
        };
        if block.digest() == cert.digest && self.block_is_valid(&block) {
            self.round.blocks.insert(cert.digest, block);
            self.round.pending_certificate = None;
            self.on_certificate(now, cert);
        }
    }

    fn on_beacon(&mut self, now: Time, from: NodeIndex, sig: S::Signature) {
        if self.round.beacon.is_some() {
            self.round.beacon_from_peer = true;
            return;
        }
        let msg = self.round_message();
        if self.verify(&self.keys.beacon.public, &msg, &sig) {
            self.round.beacon_from_peer = true;
            self.learn_beacon(now, sig);
        } else {
            self.evidence(from, EvidenceKind::InvalidProof { what: "beacon" });
        }
    }

    fn learn_beacon(&mut self, now: Time, sig: S::Signature) {
        if self.round.beacon.is_some() {
            return;
        }
        self.round.beacon = Some(sig);
        let beacon = beacon::Beacon {
            round: self.height,
            signature: sig.to_bytes(),
            previous_signature: self.previous_beacon.clone(),
        };
        self.out.push(Output::Beacon {
            beacon,
            previous_learned_at: self.previous_beacon_at,
            learned_at: now,
        });
        self.previous_beacon_at = now;
        self.try_finalize(now);
    }

    fn try_finalize(&mut self, now: Time) {
        let (Some((block, certificate)), Some(beacon)) =
            (self.round.committed.clone(), self.round.beacon)
        else {
            return;
        };
        let entry = Arc::new(CommittedEntry {
            block,
            certificate,
            beacon,
        });
        self.chain.push(entry.clone());
        self.out.push(Output::Finalized(entry));
        self.previous_beacon = beacon.to_bytes();
        self.height += 1;
        self.enter_height(now);
    }

    /// Slow path: a valid prepare certificate earns a COMMIT share.
    fn on_prepare(&mut self, now: Time, from: NodeIndex, cert: PrepareCertificate<S>) {
        let h = self.height;
        if self
            .round
            .prepared
            .as_ref()
            .is_some_and(|p| p.view >= cert.view)
            && cert.view != self.view
        {
            return;
        }
        if from != self.me()
            && !self.verify(
                &self.keys.tau.public,
                &signed::prepare(h, cert.view, &cert.digest),
                &cert.signature,
            )
        {
            self.evidence(from, EvidenceKind::InvalidProof { what: "prepare" });
            return;
        }
        if self
            .round
            .prepared
            .as_ref()
            .is_none_or(|p| p.view < cert.view)
        {
            self.round.prepared = Some(cert.clone());
        }
        if cert.view != self.view
            || self.round.in_view_change
            || !self.round.commit_share_sent.insert(cert.view)
        {
            return;
        }
        let share = self.sign(
            &self.keys.tau.share,
            &signed::commit(h, cert.view, &cert.digest),
        );
        let collectors = self.round.election.collectors.clone();
        let me = self.me();
        let message = Message::CommitShare {
            height: h,
            view: cert.view,
            digest: cert.digest,
            share,
        };
        for c in collectors {
            if c == me {
                self.on_commit_share(now, me, cert.view, cert.digest, share);
            } else {
                self.send_to(c, message.clone());
            }
        }
        self.keep_for_retransmission(now, cert.view, message);
    }

    /// Keeps a share sent to the collectors of `view`, to be sent again every two
    /// fast-path timeouts until the height commits or the view ends: on a lossy
    /// network with only `2f + c + 1` honest replicas, one lost share would
    /// otherwise cost a whole view.
    fn keep_for_retransmission(&mut self, now: Time, view: View, message: Message<S>) {
        self.round.resend.push((view, message));
        if self.round.retransmit_armed.insert(view) {
            let at = now.plus_micros(2 * self.config.fast_path_timeout_us);
            self.timer(
                at,
                Timer::Retransmit {
                    height: self.height,
                    view,
                },
            );
        }
    }

    fn retransmit(&mut self, now: Time, view: View) {
        if view != self.view || self.round.committed.is_some() || self.round.in_view_change {
            return;
        }
        let me = self.me();
        let collectors = self.round.election.collectors.clone();
        let pending: Vec<Message<S>> = self
            .round
            .resend
            .iter()
            .filter(|(v, _)| *v == view)
            .map(|(_, m)| m.clone())
            .collect();
        for m in pending {
            for c in collectors.iter().filter(|c| **c != me) {
                self.send_to(*c, m.clone());
            }
        }
        let broadcasts: Vec<Message<S>> = self
            .round
            .resend_broadcast
            .iter()
            .filter(|(v, _)| *v == view)
            .map(|(_, m)| m.clone())
            .collect();
        for m in broadcasts {
            self.broadcast(m);
        }
        let at = now.plus_micros(2 * self.config.fast_path_timeout_us);
        self.timer(
            at,
            Timer::Retransmit {
                height: self.height,
                view,
            },
        );
    }

    fn on_commit_share(
        &mut self,
        now: Time,
        from: NodeIndex,
        view: View,
        digest: Digest,
        share: S::Signature,
    ) {
        if self.is_convicted(from) {
            return;
        }
        let h = self.height;
        let n = self.config.n;
        let Some(col) = self.collecting(view) else {
            return;
        };
        ShareKey::Commit.insert(
            col,
            n,
            digest,
            signed::commit(h, view, &digest),
            from,
            share,
        );
        self.try_collect(now, view);
    }

    // ----- timers --------------------------------------------------------------

    fn on_timer(&mut self, now: Time, timer: Timer) {
        match timer {
            Timer::Propose { height } if height == self.height && self.view == 0 => {
                self.propose(now)
            }
            Timer::Release { height } if height == self.height => {
                for (from, message) in std::mem::take(&mut self.round.held) {
                    if self.height != height {
                        break;
                    }
                    self.on_message(now, from, message);
                }
            }
            Timer::FastPath { height, view } if height == self.height => {
                if let Some(col) = self.round.collecting.get_mut(&view) {
                    col.fast_timer_fired = true;
                    self.try_collect(now, view);
                }
            }
            Timer::ViewChange { height, view } if height == self.height && view == self.view => {
                // Replicas ahead of us sent messages for later heights: catch up.
                let ahead = self.future.values().flatten().map(|(from, _)| *from).next();
                if let Some(peer) = ahead {
                    self.maybe_sync(now, peer);
                }
                if self.round.committed.is_none() {
                    self.start_view_change(now, view.saturating_add(1));
                } else {
                    // Committed but no beacon: the collectors withheld it or were
                    // cut off. Every member gets our share; t_b of them make it.
                    self.send_beacon_share(now);
                    let at = now.plus_micros(self.view_timeout(view));
                    self.timer(at, Timer::ViewChange { height, view });
                }
            }
            Timer::BackupCollector { height, view } => self.flush_backup(height, view),
            Timer::Retransmit { height, view } if height == self.height => {
                self.retransmit(now, view)
            }
            _ => {}
        }
    }

    // ----- view change ---------------------------------------------------------

    /// The primary of `view` at the current height (elections cached per view).
    fn primary_of(&mut self, view: View) -> NodeIndex {
        if let Some(p) = self.round.primaries.get(&view) {
            return *p;
        }
        let p = RoundState::<S>::elect(&self.config, &self.chain, self.height, view).primary;
        self.round.primaries.insert(view, p);
        p
    }

    fn start_view_change(&mut self, now: Time, new_view: View) {
        if new_view <= self.view && self.round.in_view_change {
            return;
        }
        let h = self.height;
        self.view = new_view;
        self.round.view_changes.retain(|v, _| *v >= new_view);
        self.round.in_view_change = true;
        self.round.election = RoundState::<S>::elect(&self.config, &self.chain, h, new_view);
        let block = self
            .round
            .prepared
            .as_ref()
            .map(|p| p.digest)
            .or(self.round.fast_vote.as_ref().map(|v| v.digest))
            .and_then(|d| self.round.blocks.get(&d).cloned());
        let release = Time(self.config.release_time(h));
        let mut vc = ViewChange {
            from: self.me(),
            height: h,
            new_view,
            prepared: self.round.prepared.clone(),
            fast_vote: self.round.fast_vote.clone(),
            beacon_share: (now >= release)
                .then(|| self.sign(&self.keys.beacon.share, &self.round_message())),
            block,
            signature: S::Signature::generator(),
        };
        vc.signature = self.sign(&self.keys.tau.share, &vc.signed_message());
        let vc = Arc::new(vc);
        self.out.push(Output::ViewChanged {
            height: h,
            view: new_view,
        });
        let at = now.plus_micros(self.view_timeout(new_view));
        self.timer(
            at,
            Timer::ViewChange {
                height: h,
                view: new_view,
            },
        );
        // Broadcast: the new primary needs the evidence, and everyone counts view
        // changes for the join rule, which keeps honest views together after a
        // partition. Only the new primary keeps (and verifies) the evidence.
        self.broadcast(Message::ViewChange(vc.clone()));
        self.round.latest_view_message = Some(Message::ViewChange(vc.clone()));
        let me = self.me();
        self.on_view_change(now, me, vc);
    }

    fn on_view_change(&mut self, now: Time, from: NodeIndex, vc: Arc<ViewChange<S>>) {
        if vc.from != from || vc.new_view == 0 {
            return;
        }
        let new_view = vc.new_view;
        let share = vc.beacon_share;
        // A replica behind in views (restarted, or cut off by a partition): tell it
        // where we are, once per view — our NEW-VIEW or our own VIEW-CHANGE — so it
        // can join without waiting for everyone's next timeout.
        if new_view < self.view
            && from != self.me()
            && self.round.answered.insert((from, self.view))
        {
            if let Some(m) = self.round.latest_view_message.clone() {
                self.send_to(from, m);
            }
        }
        // Join-rule bookkeeping: the highest view each replica asked for.
        let old = self.round.wanted.get(&from).copied().unwrap_or(0);
        if new_view > old {
            self.round.wanted.insert(from, new_view);
            if let Some(c) = self.round.wanted_count.get_mut(&old) {
                *c -= 1;
                if *c == 0 {
                    self.round.wanted_count.remove(&old);
                }
            }
            *self.round.wanted_count.entry(new_view).or_default() += 1;
        }
        // Only the primary of that view keeps the evidence, for views near ours.
        if new_view <= self.view.saturating_add(VIEW_CHANGE_STORE_WINDOW)
            && self.primary_of(new_view) == self.me()
        {
            self.round
                .view_changes
                .entry(new_view)
                .or_default()
                .entry(from)
                .or_insert(vc);
        }
        // Join rule: f + 1 replicas want a later view, so some honest one does.
        if new_view > self.view {
            let mut count = 0;
            let mut target = None;
            for (v, c) in self.round.wanted_count.range(self.view + 1..).rev() {
                count += c;
                if count > self.config.f {
                    target = Some(*v);
                    break;
                }
            }
            if let Some(t) = target {
                self.start_view_change(now, t);
            }
        }
        let primary = self.round.election.primary == self.me() && new_view == self.view;
        if primary {
            if let Some(share) = share {
                self.add_beacon_share(from, share);
            }
            let h = self.height;
            if let Some(sig) = self.try_beacon(now) {
                self.broadcast(Message::Beacon {
                    round: h,
                    signature: sig,
                });
                if self.height != h {
                    return;
                }
            }
            self.try_new_view(now, new_view);
        }
    }

    /// As the new primary: with 2f + 2c + 1 valid view changes, send NEW-VIEW.
    fn try_new_view(&mut self, now: Time, view: View) {
        if self.round.new_view_sent.contains(&view) {
            return;
        }
        let quorum = self.config.view_change_quorum() as usize;
        let Some(vcs) = self.round.view_changes.get(&view) else {
            return;
        };
        if vcs.len() < quorum {
            return;
        }
        let candidates: Vec<Arc<ViewChange<S>>> = vcs.values().cloned().collect();
        let valid = self.valid_view_changes(&candidates);
        if valid.len() < quorum {
            return;
        }
        let chosen: Vec<Arc<ViewChange<S>>> = valid.into_iter().take(quorum).collect();
        let safe = safe_value(&chosen, self.config.f, self.config.c);
        let block = match safe {
            Some(d) => match self.round.blocks.get(&d).cloned().or_else(|| {
                chosen
                    .iter()
                    .filter_map(|v| v.block.clone())
                    .find(|b| b.digest() == d)
            }) {
                Some(b) => b,
                None => return,
            },
            None => Arc::new(self.fresh_block()),
        };
        self.round.new_view_sent.insert(view);
        let h = self.height;
        self.broadcast(Message::NewView {
            height: h,
            view,
            view_changes: chosen.clone(),
            block: block.clone(),
        });
        let me = self.me();
        self.on_new_view(now, me, view, chosen, block);
    }

    /// NEW-VIEW: check the view changes and the block, then vote in the new view.
    fn on_new_view(
        &mut self,
        now: Time,
        from: NodeIndex,
        view: View,
        vcs: Vec<Arc<ViewChange<S>>>,
        block: Arc<Block>,
    ) {
        let h = self.height;
        if view == 0 || view < self.view || self.round.accepted.contains_key(&view) {
            return;
        }
        let election = RoundState::<S>::elect(&self.config, &self.chain, h, view);
        if from != election.primary {
            return;
        }
        let quorum = self.config.view_change_quorum() as usize;
        let senders: BTreeSet<NodeIndex> = vcs.iter().map(|v| v.from).collect();
        if vcs.len() < quorum
            || senders.len() != vcs.len()
            || vcs
                .iter()
                .any(|v| v.height != h || v.new_view != view || v.from.0 >= self.config.n)
        {
            return;
        }
        if from != self.me()
            && (!self.forged_view_changes(&vcs).is_empty() || !self.deciding_claims_verify(&vcs))
        {
            self.evidence(from, EvidenceKind::InvalidProof { what: "new-view" });
            return;
        }
        match safe_value(&vcs, self.config.f, self.config.c) {
            Some(d) if block.digest() != d => return,
            _ => {}
        }
        if !self.block_is_valid(&block) {
            return;
        }
        if view > self.view || self.round.in_view_change {
            self.view = view;
            self.round.election = election;
            let at = now.plus_micros(self.view_timeout(view));
            self.timer(at, Timer::ViewChange { height: h, view });
            self.out.push(Output::ViewChanged { height: h, view });
        }
        self.round.in_view_change = false;
        self.round.latest_view_message = Some(Message::NewView {
            height: h,
            view,
            view_changes: vcs,
            block: block.clone(),
        });
        self.accept_block(now, view, block);
        let buffered = std::mem::take(&mut self.round.future_views);
        for (from, m) in buffered {
            if self.height != h {
                break;
            }
            self.on_message(now, from, m);
        }
    }

    // ----- catch-up ------------------------------------------------------------

    fn maybe_sync(&mut self, now: Time, from: NodeIndex) {
        let interval = self.config.view_change_timeout_us / 2;
        if self
            .last_sync_request
            .is_some_and(|t| now.micros_since(t) < interval)
        {
            return;
        }
        self.last_sync_request = Some(now);
        self.send_to(
            from,
            Message::SyncRequest {
                from_height: self.height,
            },
        );
    }

    fn on_sync_request(&mut self, from: NodeIndex, from_height: Height) {
        match self
            .chain
            .range(from_height, SYNC_BATCH, SYNC_RESPONSE_BYTES, |e| {
                block_bytes(&e.block)
            }) {
            None => self.out.push(Output::SyncFromStore {
                to: from,
                from_height,
            }),
            Some(entries) if entries.is_empty() => {}
            Some(entries) => self.send_to(from, Message::SyncResponse { entries }),
        }
    }

    fn on_sync_response(&mut self, now: Time, entries: Vec<Arc<CommittedEntry<S>>>) {
        // A full response (by count or by bytes) may have a successor.
        let more = !entries.is_empty();
        let mut last_from = None;
        for entry in entries {
            if entry.block.height != self.height {
                continue;
            }
            let cert = &entry.certificate;
            let beacon_ok = self.verify(
                &self.keys.beacon.public,
                &self.round_message(),
                &entry.beacon,
            );
            if cert.height != self.height
                || cert.digest != entry.block.digest()
                || !self.block_is_valid(&entry.block)
                || !self.certificate_is_valid(cert)
                || !beacon_ok
            {
                break;
            }
            let h = self.height;
            self.round.blocks.insert(cert.digest, entry.block.clone());
            self.round.proposal_seen_at.get_or_insert(now);
            // The beacon first: it was verified for this height above, and learning
            // it after the commit could land it on the next height.
            if self.round.beacon.is_none() {
                self.learn_beacon(now, entry.beacon);
            }
            if self.height == h {
                self.on_certificate(now, cert.clone());
            }
            last_from = Some(h);
        }
        if more && last_from.is_some() {
            self.last_sync_request = None;
        }
    }
}

impl<S: Scheme> RoundState<S> {
    fn new(
        config: &ReplicaConfig,
        chain: &ChainWindow<S>,
        height: Height,
        view: View,
        previous_beacon: &[u8],
    ) -> Self {
        let message = round_message(S::ID, height, previous_beacon).to_vec();
        RoundState {
            election: Self::elect(config, chain, height, view),
            beacon: None,
            beacon_from_peer: false,
            beacon_shares: ShareSet::new(message, config.n),
            beacon_invalid: BTreeSet::new(),
            committed: None,
            pending_certificate: None,
            blocks: BTreeMap::new(),
            accepted: BTreeMap::new(),
            proposal_seen_at: None,
            proposed: BTreeSet::new(),
            fast_vote: None,
            prepared: None,
            commit_share_sent: BTreeSet::new(),
            collecting: BTreeMap::new(),
            view_changes: BTreeMap::new(),
            wanted: BTreeMap::new(),
            wanted_count: BTreeMap::new(),
            resend: Vec::new(),
            retransmit_armed: BTreeSet::new(),
            resend_broadcast: Vec::new(),
            latest_view_message: None,
            answered: BTreeSet::new(),
            primaries: BTreeMap::new(),
            new_view_sent: BTreeSet::new(),
            in_view_change: false,
            future_views: Vec::new(),
            held: Vec::new(),
            beacon_share_sent: false,
        }
    }

    /// The election of `(height, view)` from the beacon of `height - k`.
    fn elect(
        config: &ReplicaConfig,
        chain: &ChainWindow<S>,
        height: Height,
        view: View,
    ) -> Election {
        let electing = height.saturating_sub(config.election_lag);
        let randomness: Vec<u8> = if electing >= 1 {
            chain
                .get(electing)
                .map(|e| beacon::chain::randomness(&e.beacon.to_bytes()).to_vec())
                .unwrap_or_else(|| config.genesis_seed.to_vec())
        } else {
            config.genesis_seed.to_vec()
        };
        Election::draw(&randomness, height, view, config.n, config.c + 1)
    }
}
