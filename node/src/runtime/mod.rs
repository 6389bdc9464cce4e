//! `sbft-beacon run`: one real node. It drives the same [`consensus::Member`]
//! (DKG, then replica) as the simulator, with the wall clock for time, libp2p
//! ([`crate::net`]) for messages, a timer queue (`beacon::schedule`) for the
//! timers the protocol asks for, redb ([`crate::store`]) for what must survive a
//! crash, the HTTP API ([`crate::http`]) for what it serves, and a
//! [`Recorder`] for its replica's events.
//!
//! Start-up: load the identity and check it against the config; if key material
//! is on disk, restore the replica from it and the stored chain (no DKG; missed
//! heights are fetched from peers, verified, then stored); otherwise wait for
//! every peer (at most `peer_wait_ms`), run the DKG and persist its result before
//! signing anything with it.
//!
//! Shutdown: SIGTERM or SIGINT, in any phase (waiting for peers, DKG, rounds),
//! ends the event loop at its next turn; the persistence thread writes what it
//! was given, the store closes and `run` returns `Ok` (exit status 0).
//!
//! Files: `mod.rs` starts the node and runs its event loop; `node.rs` holds
//! the loop's state and carries out the member's outputs; `epoch.rs` a change
//! of members; `archive.rs` the persistence thread and the store as the API's
//! archive; `signal.rs` the stop request.

mod archive;
mod epoch;
mod node;
mod signal;

pub use signal::{shutdown_signal, StopSignal};

use crate::backfill::Backfill;
use crate::config::{ConfigError, Validated};
use crate::http::{AdminRequest, ApiState, EpochJson, Submitted};
use crate::metrics::Metrics;
use crate::net::{Inbox, NetLimits, Network, NetworkError};
use crate::recorder::Recorder;
use crate::store::{EpochRecord, Store, StoreError};
use crate::{identity, NodeError};
use archive::{persistence_thread, publish, StoreArchive};
use beacon::dkg::DkgOutput;
use beacon::memo::Memo;
use beacon::multisig::ConsensusSecretKey;
use beacon::schedule::EventQueue;
use beacon::{ChainInfo, Point as _, Scheme};
use consensus::epoch::{Directory, EpochView};
use consensus::replica::CHAIN_WINDOW;
use consensus::{
    Behaviour, CommittedEntry, ConsensusError, DirectoryIndex, Epoch, Member, MemberIdentity,
    MemberInput,
};
use libp2p::identity::Keypair;
use node::{Node, STORE_READERS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, info_span, warn, Instrument as _};

/// Transactions submitted over HTTP and not yet handed to the replica (their
/// bytes are bounded by `[limits] submit_queue_bytes`).
const SUBMIT_QUEUE: usize = 10_000;

/// How often a joiner that backfills old heights asks another member.
const BACKFILL_EVERY: Duration = Duration::from_secs(1);

/// How often the node logs a status line.
const STATUS_EVERY: Duration = Duration::from_secs(10);

/// The chain parameters of a DKG result (`ReplicaConfig::chain_info`, the
/// simulator's builder too).
pub fn chain_info<S: Scheme>(cfg: &Validated, output: &DkgOutput<S>) -> ChainInfo {
    cfg.replica
        .chain_info(output.keys[0].group_key().to_bytes(), S::ID)
}

/// Runs a node until it is interrupted. `behaviour` makes its replica Byzantine
/// (for tests of the others' defences; never in production).
/// `join` starts a node without key material as a party that joins the
/// running network (it waits to be invited by a change of members); a node
/// that is not a genesis member always does.
pub async fn run<S: Scheme>(
    cfg: Validated,
    behaviour: Option<Behaviour>,
    join: bool,
) -> Result<(), NodeError> {
    let me = cfg.me;
    let span = info_span!("node", index = me.0);
    run_inner::<S>(cfg, behaviour, join).instrument(span).await
}

/// Starts the node (its identity checked, its data directory read, the API
/// served, the transport started, its member built) and runs its event loop
/// until it stops; then lets the persistence thread finish.
async fn run_inner<S: Scheme>(
    cfg: Validated,
    behaviour: Option<Behaviour>,
    join: bool,
) -> Result<(), NodeError> {
    // First of all: from here on SIGTERM and SIGINT stop the node cleanly,
    // whatever phase it is in (waiting for peers, DKG, rounds).
    let mut stop = StopSignal::new()?;
    signal::ignore_file_size_signal();
    if let Some(b) = behaviour {
        warn!(
            behaviour = b.as_str(),
            "this node is Byzantine (testing only)"
        );
    }
    for old in &cfg.warnings {
        warn!("node.toml: {old} (the old key is still read)");
    }
    let key = identity::load(&cfg.identity)?;
    check_identity(&cfg, &key)?;
    let Some(disk) = open_data_dir::<S>(&cfg, join, &mut stop).await? else {
        info!("stopping while the disk refused writes");
        return Ok(());
    };
    let metrics = Arc::new(Metrics::new());
    let (submit, submitted) = tokio::sync::mpsc::channel(SUBMIT_QUEUE);
    let state = Arc::new(ApiState::new(
        metrics.clone(),
        submit,
        cfg.replica.max_transaction_bytes,
        &cfg.raw.limits,
    ));
    disk.show(&cfg, &state);
    let _api = crate::http::serve(cfg.http, state.clone())?;
    let member_key = identity::member_key(&key)?;
    let consensus_key = identity::load_consensus(&cfg.consensus_key)?;
    let directory = directory::<S>(&cfg, &consensus_key)?;
    let dkg_done = Arc::new(AtomicBool::new(disk.keys.is_some() || disk.joins));
    let net_limits = NetLimits::of(&cfg, dkg_done.clone());
    let (mut net, inbound) =
        Network::start::<consensus::Envelope<S>>(key, &cfg, net_limits, metrics.clone())?;
    // The seed is stored before anything dealt from it leaves: a node that
    // restarts in the middle of a DKG or a change deals the same deals
    // again, never a second version (`consensus/SAFETY.md`, "A member's part
    // of a change survives its crash"); replaced once the keys it dealt are
    // stored.
    let parts = MemberParts {
        seed: disk.store.member_seed()?,
        identity: MemberIdentity::new(
            DirectoryIndex::new(cfg.me.0),
            member_key,
            consensus_key,
            directory,
        ),
        behaviour,
    };
    let stored = disk.keys.is_some();
    let had_epoch = disk.epoch_record.is_some();
    let epoch_start = disk.epoch_record.as_ref().map_or(1, |(r, _)| r.start);
    let store = disk.store.clone();
    let Some(member) = build_member(&cfg, disk, parts, &mut net, &mut stop).await? else {
        return Ok(());
    };
    let (persist_tx, persist_rx) = std::sync::mpsc::channel();
    let persister = persistence_thread::<S>(store.clone(), state.clone(), persist_rx);
    let recorder = Recorder::new(state.clone(), persist_tx.clone(), cfg.replica.clone());
    let (admin_tx, admin) = tokio::sync::mpsc::channel::<AdminRequest>(4);
    let _ = state.admin.set(admin_tx);
    // A joiner that stopped before its backfill was over goes on with it.
    let backfill = if had_epoch {
        store
            .lowest_of_tail::<S>()?
            .and_then(|e| Backfill::below(Arc::new(e), &cfg.replica.genesis_seed))
    } else {
        None
    };
    let mut node = Node {
        member,
        net,
        timers: EventQueue::new(),
        store,
        state,
        cfg,
        recorder,
        dkg_started: (!stored).then(std::time::Instant::now),
        dkg_done,
        store_readers: Arc::new(tokio::sync::Semaphore::new(STORE_READERS)),
        persist: persist_tx,
        backfill,
        backfill_turn: 0,
        epoch_start,
        held: std::collections::VecDeque::new(),
        disk_retry: None,
    };
    node.handle(MemberInput::Start)?;
    node.resubmit_proposal()?;
    node.publish_epoch();
    let result = event_loop(node, stop, submitted, admin, inbound).await;
    // Let the persistence thread write what it was given (each batch is one
    // durable transaction); the store closes with its last holder.
    let _ = tokio::task::spawn_blocking(move || persister.join()).await;
    if result.is_ok() {
        info!("store flushed; stopped");
    }
    result
}

/// The identity file's peer ID must be the one the config lists for this node.
/// Every peer's member key and consensus key (`[[peers]]`): each consensus
/// key checked under the network's scheme with its proof of possession (a
/// listing that does not verify is refused, naming its peer), and this
/// node's own the one its key file holds.
fn directory<S: Scheme>(
    cfg: &Validated,
    consensus_key: &ConsensusSecretKey,
) -> Result<Directory, NodeError> {
    let member_keys = cfg
        .peers
        .iter()
        .map(|p| identity::member_public_key(&p.id))
        .collect::<Result<Vec<_>, _>>()?;
    if !consensus::keys::lists::<S>(&cfg.me().consensus, consensus_key) {
        return Err(ConfigError::ConsensusKeyMismatch {
            path: cfg.consensus_key.clone(),
            index: cfg.me.0,
        }
        .into());
    }
    let listings: Vec<_> = cfg.peers.iter().map(|p| p.consensus.clone()).collect();
    // One batch check of every proof; a failure names the peer.
    match Directory::new(Arc::new(member_keys), Arc::new(listings))?.checked::<S>() {
        Ok(directory) => Ok(directory),
        Err(ConsensusError::ConsensusKey { member, source }) => {
            Err(ConfigError::ConsensusKeyRefused {
                index: member,
                source,
            }
            .into())
        }
        Err(other) => Err(other.into()),
    }
}

fn check_identity(cfg: &Validated, key: &Keypair) -> Result<(), NodeError> {
    if identity::peer_id(key) != cfg.me().id {
        return Err(ConfigError::IdentityMismatch {
            path: cfg.identity.clone(),
            found: identity::peer_id(key),
            index: cfg.me.0,
            listed: cfg.me().id,
        }
        .into());
    }
    Ok(())
}

/// What the data directory holds at start-up.
struct OnDisk<S: Scheme> {
    store: Arc<Store>,
    /// The epoch this node changed into last, with its key material (none
    /// once it left).
    epoch_record: Option<(EpochRecord, Option<DkgOutput<S>>)>,
    /// This node's key material: the epoch record's, or else the genesis
    /// DKG's.
    keys: Option<DkgOutput<S>>,
    /// The recent chain the replica resumes from.
    chain: Vec<Arc<CommittedEntry<S>>>,
    /// Whether the node starts as a party that joins the running network.
    joins: bool,
}

impl<S: Scheme> OnDisk<S> {
    /// Opens the store and reads it; `join`: the operator asked the node to
    /// join. Stored key material must belong to this node of this network,
    /// and a node with a chain but no keys must join.
    fn open(cfg: &Validated, join: bool) -> Result<Self, NodeError> {
        let store = Arc::new(Store::open(
            &cfg.data_dir,
            cfg.raw.limits.store_cache_bytes,
        )?);
        // After a change of members the epoch record holds this node's key
        // material (none once it left); before, the genesis DKG's file does.
        let epoch_record = store.load_epoch::<S>()?;
        let stored = match &epoch_record {
            Some((_, output)) => output.clone(),
            None => store.load_dkg::<S>()?,
        };
        if let Some(output) = &stored {
            check_key_material(cfg, output, epoch_record.as_ref().map(|(r, _)| r))?;
        }
        // A node that joined a running network may still lack old heights (it
        // fetches them from the members): it resumes from the run above the gap.
        let chain = match &epoch_record {
            Some(_) => store.load_tail::<S>(CHAIN_WINDOW)?,
            None => store.load_recent::<S>(CHAIN_WINDOW)?,
        };
        let joins =
            stored.is_none() && (join || epoch_record.is_some() || !cfg.is_genesis_member());
        if stored.is_none() && !joins && !chain.is_empty() {
            let data_dir = cfg.data_dir.clone();
            return Err(ConfigError::LostKeys { data_dir }.into());
        }
        Ok(OnDisk {
            store,
            epoch_record,
            keys: stored,
            chain,
            joins,
        })
    }

    /// Shows what the disk holds on the API until the member runs: the
    /// store as its archive, the stored chain and its info, and the epoch.
    fn show(&self, cfg: &Validated, state: &ApiState) {
        // The API thread outlives the event loop: it holds the store weakly, so
        // that the store closes cleanly when the node stops.
        let _ = state
            .archive
            .set(Box::new(StoreArchive::<S>::new(&self.store)));
        if let Some(output) = &self.keys {
            let mut view = state.chain.write().unwrap_or_else(|e| e.into_inner());
            view.set_info(chain_info(cfg, output));
            for entry in &self.chain {
                publish(&mut view, entry);
            }
            state.metrics.height.set(view.latest() as i64);
        }
        // Until the member runs, /epoch says what the disk holds.
        *state.epoch.write().unwrap_or_else(|e| e.into_inner()) = match &self.epoch_record {
            Some((r, _)) => EpochJson {
                epoch: r.number,
                members: r.members.clone(),
                start: r.start,
                f: r.config.f,
                status: "starting".into(),
                changing_to: None,
                retained_deals: Vec::new(),
            },
            None => EpochJson {
                epoch: Epoch::ZERO,
                members: (0..cfg.genesis_members).map(DirectoryIndex::new).collect(),
                start: 1,
                f: cfg.replica.f,
                status: "starting".into(),
                changing_to: None,
                retained_deals: Vec::new(),
            },
        };
    }
}

/// What this node's member is built from: its seed, who it is (its member
/// key and every party's), and its behaviour.
struct MemberParts {
    /// The stored seed its deals derive from.
    seed: [u8; 32],
    identity: MemberIdentity,
    /// Byzantine for tests of the others' defences; never in production.
    behaviour: Option<Behaviour>,
}

/// This node's member: restored from its key material and the stored chain,
/// joining (it waits to be invited), or a genesis member that waits for its
/// peers (at most `peer_wait_ms`) and starts the DKG. `None`: the node was
/// asked to stop while it waited.
async fn build_member<S: Scheme>(
    cfg: &Validated,
    disk: OnDisk<S>,
    parts: MemberParts,
    net: &mut Network,
    stop: &mut StopSignal,
) -> Result<Option<Member<S>>, NodeError> {
    let MemberParts {
        seed,
        identity,
        behaviour,
    } = parts;
    let adversary = behaviour.map(Behaviour::adversary);
    // The memo shares results between replicas of one process (the simulator);
    // a node has one replica, and an unbounded cache there would only grow.
    let memo = Memo::disabled();
    let timing = cfg.dkg.timing();
    let recorded_epoch = disk.epoch_record.as_ref().map(|(r, _)| r.view());
    let directory = identity.directory.clone();
    let member = match &disk.keys {
        Some(output) => {
            info!(
                height = disk.chain.last().map_or(0, |e| e.block.height.get()),
                epoch = recorded_epoch.as_ref().map_or(0, |e| e.number.get()),
                "key material found: skipping the DKG, resuming from the stored chain"
            );
            let votes = disk.store.load_votes()?;
            let dealing_seed = match &recorded_epoch {
                None => disk.store.dealing_seed()?,
                Some(_) => None,
            };
            let epoch = recorded_epoch
                .clone()
                .unwrap_or_else(|| EpochView::genesis(cfg.replica.clone(), &directory));
            let consensus = identity.consensus.clone();
            let member = Member::restore_in(
                epoch,
                consensus::RestoredParts {
                    output,
                    consensus,
                    chain: disk.chain,
                    votes,
                    seed,
                    memo,
                    adversary,
                },
            )?
            .with_identity(identity, timing);
            match dealing_seed {
                Some(mark) => {
                    let dkg = cfg.replica.dkg_config(cfg.dkg_session(), &cfg.dkg)?;
                    info!(
                        attempt = mark.attempt,
                        "the seed that dealt the genesis keys is kept: answering members that missed the DKG"
                    );
                    member.with_finished_dkg(dkg, mark)
                }
                None => member,
            }
        }
        None if disk.joins => {
            // The members it trusts to invite it: those of the epoch it
            // left, or the genesis members.
            let epoch = recorded_epoch
                .clone()
                .unwrap_or_else(|| EpochView::genesis(cfg.replica.clone(), &directory));
            info!(
                epoch = epoch.number.get(),
                members = epoch.members.len(),
                "joining: waiting for the members to reshare to a member list with this node"
            );
            Member::joining(epoch, identity, seed, memo, timing)?
        }
        None => {
            if !wait_for_peers(cfg, net, stop).await {
                return Ok(None);
            }
            let dkg = cfg.replica.dkg_config(cfg.dkg_session(), &cfg.dkg)?;
            Member::new(cfg.replica.clone(), dkg, identity, seed, memo, adversary)?
        }
    };
    let mut member = member;
    for deal in disk.store.retained_deals()? {
        info!(
            epoch = deal.epoch().get(),
            "what this node dealt in a change is kept: answering members that missed it"
        );
        member = member.with_retained_deal(deal);
    }
    Ok(Some(member))
}

/// Reads the data directory ([`OnDisk::open`]), trying again while its
/// disk refuses writes (full, over quota, or past the process's file size
/// limit), with the backoff of a failed durable write
/// ([`crate::store::WriteRetry`]): a node started on a full disk waits for
/// it instead of exiting (opening a database file may write). `None`: asked
/// to stop meanwhile.
async fn open_data_dir<S: Scheme>(
    cfg: &Validated,
    join: bool,
    stop: &mut StopSignal,
) -> Result<Option<OnDisk<S>>, NodeError> {
    let mut retry: Option<crate::store::WriteRetry> = None;
    loop {
        match OnDisk::<S>::open(cfg, join) {
            Ok(disk) => {
                if let Some(r) = &retry {
                    info!(
                        tries = r.failures(),
                        "the disk takes writes again: data directory read"
                    );
                }
                return Ok(Some(disk));
            }
            Err(e) if refuses_writes(&e) => match &mut retry {
                None => {
                    warn!(error = %e, "the disk refuses writes: reading the data directory again with backoff");
                    retry = Some(crate::store::WriteRetry::new(e.to_string()));
                }
                Some(r) => r.failed_again(),
            },
            Err(e) => return Err(e),
        }
        let due = retry
            .as_ref()
            .map_or_else(std::time::Instant::now, |r| r.due());
        tokio::select! {
            biased;
            _ = stop.wait() => return Ok(None),
            _ = tokio::time::sleep_until(due.into()) => {}
        }
    }
}

/// Whether `e` comes from a disk that refuses writes: `ENOSPC`, `EDQUOT`,
/// or `EFBIG` (past the file size limit, as `sbft-beacon chaos` fills a
/// node's disk).
fn refuses_writes(e: &NodeError) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        let io = c.downcast_ref::<std::io::Error>().or_else(|| {
            // redb's error names no source: its I/O error is inside.
            match c.downcast_ref::<redb::Error>() {
                Some(redb::Error::Io(io)) => Some(io),
                _ => None,
            }
        });
        if let Some(io) = io {
            if matches!(
                io.raw_os_error(),
                Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
            ) {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

/// Waits for every other genesis member to connect, at most `peer_wait_ms`
/// (the DKG then starts with those present); `false`: the node was asked to
/// stop meanwhile.
async fn wait_for_peers(cfg: &Validated, net: &mut Network, stop: &mut StopSignal) -> bool {
    let others = cfg.genesis_members as usize - 1;
    info!(peers = others, "waiting for peers before the DKG");
    let wait = Duration::from_millis(cfg.raw.network.peer_wait_ms);
    let all = net.connected_genesis.wait_for(|c| *c >= others);
    let in_time = tokio::select! {
        biased;
        _ = stop.wait() => {
            info!("stopping while waiting for peers");
            return false;
        }
        r = tokio::time::timeout(wait, all) => r.is_ok(),
    };
    if in_time {
        info!("all peers connected; starting the DKG");
    } else {
        warn!(
            connected = *net.connected_genesis.borrow(),
            "not every peer connected in time; starting the DKG with those present"
        );
    }
    true
}

/// The event loop: the member's inputs (frames, due timers, submitted
/// transactions, the operator's proposals) until the node is asked to stop
/// (`Ok`) or fails. While a failed durable write waits to be tried again,
/// frames are dropped, transactions wait and timers wait (`node.rs`).
async fn event_loop<S: Scheme>(
    mut node: Node<S>,
    mut stop: StopSignal,
    mut submitted: tokio::sync::mpsc::Receiver<Submitted>,
    mut admin: tokio::sync::mpsc::Receiver<AdminRequest>,
    mut inbound: Inbox<consensus::Envelope<S>>,
) -> Result<(), NodeError> {
    let mut backfill_tick = tokio::time::interval(BACKFILL_EVERY);
    let mut status = tokio::time::interval(STATUS_EVERY);
    let mut last_status = (0u64, std::time::Instant::now());
    loop {
        let deadline = node.next_deadline();
        tokio::select! {
            biased;
            _ = stop.wait() => {
                let phase = if node.dkg_done.load(Ordering::Relaxed) { "rounds" } else { "the DKG" };
                info!("stopping during {phase}");
                return Ok(());
            }
            Some((tx, _held)) = submitted.recv(), if !node.disk_stalled() => {
                node.handle(MemberInput::ClientTransaction(tx))?;
            }
            Some((request, reply)) = admin.recv() => {
                let _ = reply.send(node.propose(request));
            }
            _ = backfill_tick.tick(), if node.backfill.is_some() => node.request_backfill(),
            _ = status.tick() => log_status(&node, &mut last_status),
            message = inbound.recv() => {
                let Some(m) = message else { return Err(NetworkError::Stopped.into()) };
                if node.disk_stalled() {
                    // The protocol's retransmissions and catch-up make up for it.
                    node.state.metrics.frames_dropped("disk-failing");
                } else {
                    node.receive(m.from, m.message)?;
                }
            }
            _ = tokio::time::sleep(deadline) => {}
        }
        node.retry_disk()?;
        node.fire_timers()?;
    }
}

/// Logs the status line: the height finalized and the rate since the last
/// line (`last`: that line's height and time).
fn log_status<S: Scheme>(node: &Node<S>, last: &mut (u64, std::time::Instant)) {
    let height = node
        .member
        .replica()
        .map_or(0, |r| r.finalized().height().get());
    let elapsed = last.1.elapsed().as_secs_f64();
    let rate = height.saturating_sub(last.0) as f64 / elapsed.max(1e-3);
    if height > 0 {
        info!(
            height,
            beacons_per_s = format!("{rate:.1}"),
            peers = *node.net.connected.borrow(),
            "status"
        );
    }
    *last = (height, std::time::Instant::now());
}

/// Checks that stored key material belongs to this node of this network: the
/// genesis DKG's, or (after a change of members) that of the epoch `record`.
fn check_key_material<S: Scheme>(
    cfg: &Validated,
    output: &DkgOutput<S>,
    record: Option<&EpochRecord>,
) -> Result<(), NodeError> {
    let fits = match record {
        None => {
            output.session == cfg.dkg_session() && output.me == cfg.me && output.n == cfg.replica.n
        }
        Some(r) => {
            output.n as usize == r.members.len()
                && r.members.get(output.me.0 as usize) == Some(&DirectoryIndex::new(cfg.me.0))
                && r.config.n == output.n
        }
    };
    if !fits {
        let data_dir = cfg.data_dir.clone();
        return Err(StoreError::ForeignKeyMaterial { data_dir }.into());
    }
    Ok(())
}
