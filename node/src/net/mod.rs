//! The node's transport: libp2p over TCP with noise and yamux, admitting only the
//! peer IDs of the config. Peer addresses may name hosts (`/dns4/node-3/tcp/9000`):
//! names are resolved at each dial and cached for seconds only. Every ordered pair of members has one long-lived
//! stream (`/sbft-beacon/wire/1`) carrying length-prefixed frames (a 4-byte
//! big-endian length, then one wire-encoded message of at most
//! [`MAX_FRAME_BYTES`]). Writers reconnect with exponential backoff; readers drop
//! malformed frames (and close the stream on an oversized one) with a log line.
//!
//! Bounds (see [`crate::limits`]): a frame over the limit is never queued; the
//! frames queued for a peer are bounded in bytes; a reader reads a frame's kind
//! from its first bytes, closes the stream on a frame over its kind's limit,
//! reads the rest incrementally (no allocation of the announced size up front),
//! holds at most `peer_inbound_bytes` of a peer's frames until the event loop has
//! handled them, and decodes on the blocking pool (never on the protocol thread)
//! with a budget of points per kind and of decoding CPU per peer.
//!
//! Files: here the transport and its queues; `swarm.rs` dials members;
//! `writer.rs` writes a peer's frames; `reader.rs` reads and decodes them;
//! `probe.rs` peers that misbehave on purpose, for tests.

mod error;
mod probe;
mod reader;
mod swarm;
mod writer;

pub use error::{NetworkError, StreamStep};
pub use probe::{send_raw, serve_silent};
pub use reader::CpuBudget;

use crate::config::Validated;
use crate::limits::{Admission, MAX_FRAME_BYTES};
use crate::metrics::Metrics;
use crate::NodeError;
use beacon::NodeIndex;
use libp2p::identity::Keypair;
use libp2p::swarm::NetworkBehaviour;
use libp2p::{allow_block_list, noise, tcp, yamux, StreamProtocol, SwarmBuilder};
use reader::accept_loop;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use swarm::swarm_loop;
use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit};
use tracing::{debug, warn, Instrument as _};
use writer::Writer;

/// The stream protocol of wire frames.
pub const PROTOCOL: StreamProtocol = StreamProtocol::new("/sbft-beacon/wire/1");
/// Decoded messages waiting for the event loop (their bytes are bounded per peer).
const INBOX: usize = 4096;
/// Accounting overhead of one queued frame (its `Arc` and queue slot).
const FRAME_OVERHEAD: usize = 64;
/// Times a batch of frames is written to fresh streams before it is dropped (a
/// reader closes a stream on a frame it refuses: retrying forever would poison
/// the link).
const WRITE_ATTEMPTS: u32 = 3;
/// Most bytes coalesced into one flush.
const FLUSH_BYTES: usize = 1 << 20;
/// Longest a reader pauses a peer that is over its decoding CPU budget, per frame.
const CPU_PAUSE_MAX: Duration = Duration::from_secs(1);
/// The byte a reader sends when it accepted a stream.
const STREAM_ACK: u8 = 0xAC;
/// How long a writer waits for that byte.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest a name lookup is cached (answers and "no such name" alike).
const DNS_MAX_TTL: Duration = Duration::from_secs(5);
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// One encoded message, shared between the queues of a broadcast.
pub type Frame = Arc<Vec<u8>>;

#[derive(NetworkBehaviour)]
struct Behaviour {
    allowed: allow_block_list::Behaviour<allow_block_list::AllowedPeers>,
    streams: libp2p_stream::Behaviour,
}

/// A message from a member, decoded.
#[derive(Debug)]
pub struct Inbound<M> {
    /// Sender (authenticated by noise and the allow list).
    pub from: NodeIndex,
    /// Decoded message.
    pub message: M,
    /// The sender's inbound bytes this message holds (released when dropped).
    pub held: Option<OwnedSemaphorePermit>,
}

/// The limits the transport enforces.
#[derive(Clone, Debug)]
pub struct NetLimits {
    /// Most bytes queued per peer.
    pub peer_queue_bytes: usize,
    /// Most bytes received from a peer and not yet handled.
    pub peer_inbound_bytes: usize,
    /// Decoding CPU per peer (ms per second).
    pub peer_decode_cpu_ms_per_s: u64,
    /// Sizes and point budgets by frame kind.
    pub admission: Admission,
}

impl NetLimits {
    /// The limits of `cfg` (its `[limits]` table and replica parameters); DKG
    /// frames are wanted until `dkg_done`.
    pub fn of(cfg: &Validated, dkg_done: Arc<std::sync::atomic::AtomicBool>) -> Self {
        let limits = &cfg.raw.limits;
        NetLimits {
            peer_queue_bytes: limits.peer_queue_bytes,
            peer_inbound_bytes: limits.peer_inbound_bytes,
            peer_decode_cpu_ms_per_s: limits.peer_decode_cpu_ms_per_s,
            admission: Admission::new(&cfg.replica, cfg.peers.len(), dkg_done),
        }
    }
}

/// One peer's outbound queue: frames and the bytes they hold.
#[derive(Clone)]
struct Outbound {
    tx: mpsc::UnboundedSender<Frame>,
    queued: Arc<AtomicUsize>,
    gauge: prometheus_client::metrics::gauge::Gauge,
}

/// The running transport.
#[derive(Clone)]
pub struct Network {
    outbound: Vec<Option<Outbound>>,
    peer_queue_bytes: usize,
    /// Number of members connected.
    pub connected: watch::Receiver<usize>,
    /// Number of genesis members (`[network] members`) connected: what the
    /// DKG waits for (parties that join later may not run yet).
    pub connected_genesis: watch::Receiver<usize>,
    metrics: Arc<Metrics>,
}

/// Messages received from members, decoded.
pub type Inbox<M> = mpsc::Receiver<Inbound<M>>;

impl Network {
    /// Listens on the configured address and starts connecting to every member;
    /// what they send arrives, decoded as `M`, in the returned inbox.
    pub fn start<M: DeserializeOwned + Send + 'static>(
        key: Keypair,
        cfg: &Validated,
        limits: NetLimits,
        metrics: Arc<Metrics>,
    ) -> Result<(Self, Inbox<M>), NodeError> {
        let mut swarm = build_swarm(
            key,
            Behaviour {
                allowed: allow_block_list::Behaviour::default(),
                streams: libp2p_stream::Behaviour::new(),
            },
            Duration::from_secs(3600),
        )?;
        let mut index_of = HashMap::new();
        for p in &cfg.peers {
            if p.index != cfg.me {
                swarm.behaviour_mut().allowed.allow_peer(p.id);
                swarm.add_peer_address(p.id, p.address.clone());
                index_of.insert(p.id, p.index);
            }
        }
        swarm
            .listen_on(cfg.listen.clone())
            .map_err(|source| NetworkError::Listen {
                address: cfg.listen.clone(),
                source,
            })?;
        let mut control = swarm.behaviour().streams.new_control();
        let incoming = control.accept(PROTOCOL).map_err(NetworkError::Protocol)?;
        let (in_tx, in_rx) = mpsc::channel(INBOX);
        let (conn_tx, conn_rx) = watch::channel(0usize);
        let (genesis_tx, genesis_rx) = watch::channel(0usize);
        let mut outbound: Vec<Option<Outbound>> = (0..cfg.peers.len()).map(|_| None).collect();
        let mut wake = HashMap::new();
        for p in &cfg.peers {
            if p.index == cfg.me {
                continue;
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let queued = Arc::new(AtomicUsize::new(0));
            let gauge = metrics.queued_for(p.index.0);
            outbound[p.index.0 as usize] = Some(Outbound {
                tx,
                queued: queued.clone(),
                gauge: gauge.clone(),
            });
            let connected = Arc::new(Notify::new());
            wake.insert(p.id, connected.clone());
            let writer = Writer {
                peer: p.id,
                index: p.index,
                control: control.clone(),
                queue: rx,
                queued,
                gauge,
                connected,
                metrics: metrics.clone(),
            };
            tokio::spawn(writer.run().in_current_span());
        }
        let peer_queue_bytes = limits.peer_queue_bytes;
        tokio::spawn(
            accept_loop::<M>(incoming, index_of.clone(), in_tx, limits, metrics.clone())
                .in_current_span(),
        );
        let addresses = cfg
            .peers
            .iter()
            .filter(|p| p.index != cfg.me)
            .map(|p| (p.id, p.address.clone()))
            .collect();
        tokio::spawn(
            swarm_loop(
                swarm,
                index_of,
                addresses,
                wake,
                (conn_tx, genesis_tx, cfg.genesis_members),
                metrics.clone(),
            )
            .in_current_span(),
        );
        Ok((
            Network {
                outbound,
                peer_queue_bytes,
                connected: conn_rx,
                connected_genesis: genesis_rx,
                metrics,
            },
            in_rx,
        ))
    }

    /// Queues `frame` for member `to`. A frame over the limit, or one that would
    /// take the peer's queue over its bytes, is dropped and counted.
    pub fn send(&self, to: NodeIndex, frame: Frame) {
        let Some(Some(out)) = self.outbound.get(to.0 as usize) else {
            return;
        };
        if frame.len() > MAX_FRAME_BYTES {
            self.metrics.frames_dropped("too-large-to-send");
            crate::warn_throttled!(
                to = to.0,
                size = frame.len(),
                "frame over the limit of {MAX_FRAME_BYTES} bytes: not sent"
            );
            return;
        }
        let cost = frame.len() + FRAME_OVERHEAD;
        let before = out.queued.fetch_add(cost, Ordering::Relaxed);
        if before + cost > self.peer_queue_bytes {
            out.queued.fetch_sub(cost, Ordering::Relaxed);
            self.metrics.frames_dropped("queue-full");
            debug!(to = to.0, "queue to peer full: frame dropped");
            return;
        }
        if out.tx.send(frame).is_err() {
            out.queued.fetch_sub(cost, Ordering::Relaxed);
        }
        out.gauge.set(out.queued.load(Ordering::Relaxed) as i64);
    }

    /// Bytes queued for member `to` now.
    pub fn queued_bytes(&self, to: NodeIndex) -> usize {
        match self.outbound.get(to.0 as usize) {
            Some(Some(out)) => out.queued.load(Ordering::Relaxed),
            _ => 0,
        }
    }

    /// Number of other members a broadcast goes to.
    pub fn peers(&self) -> usize {
        self.outbound.iter().flatten().count()
    }

    /// Queues `frame` for every other member.
    pub fn broadcast(&self, frame: Frame) {
        for i in 0..self.outbound.len() {
            self.send(NodeIndex(i as u32), frame.clone());
        }
    }
}

/// The node's transport (TCP without Nagle, names resolved by DNS, noise,
/// yamux) on tokio, carrying `behaviour`; connections idle for `idle` close.
fn build_swarm<B: NetworkBehaviour>(
    key: Keypair,
    behaviour: B,
    idle: Duration,
) -> Result<libp2p::Swarm<B>, NodeError> {
    let dns = resolver();
    Ok(SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            yamux::Config::default,
        )
        .map_err(NetworkError::Transport)?
        .with_dns_config(dns.0, dns.1)
        .with_behaviour(|_| behaviour)
        .unwrap_or_else(|never| match never {})
        .with_swarm_config(|c| c.with_idle_connection_timeout(idle))
        .build())
}

/// The resolver behind `/dns4` and `/dns6` addresses: the system's name
/// servers and options (`/etc/resolv.conf`), with answers cached for a few
/// seconds at most, so that a peer whose address changed (a container that was
/// reconnected or recreated) is found at its new address by the next redial.
/// Where `/etc/resolv.conf` cannot be read, names resolve from `/etc/hosts` only
/// (and `/ip4` and `/ip6` addresses work as ever).
fn resolver() -> (libp2p::dns::ResolverConfig, libp2p::dns::ResolverOpts) {
    let (config, mut opts) = match hickory_resolver::system_conf::read_system_conf() {
        Ok(system) => system,
        Err(e) => {
            warn!(error = %e, "no usable /etc/resolv.conf: names resolve from /etc/hosts only");
            (
                libp2p::dns::ResolverConfig::from_parts(None, Vec::new(), Vec::new()),
                libp2p::dns::ResolverOpts::default(),
            )
        }
    };
    opts.positive_max_ttl = Some(DNS_MAX_TTL);
    opts.negative_max_ttl = Some(DNS_MAX_TTL);
    (config, opts)
}
