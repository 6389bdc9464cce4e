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

use crate::config::Validated;
use crate::limits::{Admission, HEAD_BYTES, MAX_FRAME_BYTES};
use crate::metrics::Metrics;
use crate::NodeError;
use beacon::NodeIndex;
use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::identity::Keypair;
use libp2p::swarm::{ListenError, NetworkBehaviour, SwarmEvent};
use libp2p::{allow_block_list, noise, tcp, yamux, PeerId, StreamProtocol, SwarmBuilder};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify, OwnedSemaphorePermit, Semaphore};
use tracing::{debug, info, warn, Instrument as _};

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
        let net = |e: String| NodeError::Network(e);
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
            .map_err(|e| net(format!("cannot listen on {}: {e}", cfg.listen)))?;
        let mut control = swarm.behaviour().streams.new_control();
        let incoming = control
            .accept(PROTOCOL)
            .map_err(|e| net(format!("protocol {PROTOCOL}: {e}")))?;
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
        .map_err(|e| NodeError::Network(format!("transport: {e}")))?
        .with_dns_config(dns.0, dns.1)
        .with_behaviour(|_| behaviour)
        .map_err(|e| NodeError::Network(format!("behaviour: {e}")))?
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

/// When to dial a disconnected peer next, and the backoff after that.
struct Redial {
    address: libp2p::Multiaddr,
    at: tokio::time::Instant,
    backoff: Duration,
}

/// Drives the swarm: dials disconnected members with exponential backoff, keeps
/// the connection counts (all peers, and the first `genesis` of them), and
/// logs refused peers.
async fn swarm_loop(
    mut swarm: libp2p::Swarm<Behaviour>,
    index_of: HashMap<PeerId, NodeIndex>,
    addresses: Vec<(PeerId, libp2p::Multiaddr)>,
    wake: HashMap<PeerId, Arc<Notify>>,
    (connected, connected_genesis, genesis): (watch::Sender<usize>, watch::Sender<usize>, u32),
    metrics: Arc<Metrics>,
) {
    use libp2p::swarm::dial_opts::{DialOpts, PeerCondition};
    let mut up: std::collections::HashSet<PeerId> = Default::default();
    let mut redial: HashMap<PeerId, Redial> = addresses
        .into_iter()
        .map(|(peer, address)| {
            let r = Redial {
                address,
                at: tokio::time::Instant::now(),
                backoff: BACKOFF_MIN,
            };
            (peer, r)
        })
        .collect();
    let mut tick = tokio::time::interval(BACKOFF_MIN);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let event = tokio::select! {
            e = swarm.next() => match e {
                Some(e) => e,
                None => return,
            },
            _ = tick.tick() => {
                let now = tokio::time::Instant::now();
                for (peer, r) in redial.iter_mut() {
                    if up.contains(peer) || r.at > now {
                        continue;
                    }
                    let opts = DialOpts::peer_id(*peer)
                        .addresses(vec![r.address.clone()])
                        .condition(PeerCondition::DisconnectedAndNotDialing)
                        .build();
                    if let Err(e) = swarm.dial(opts) {
                        debug!(%peer, error = %e, "dial not started");
                    }
                    r.at = now + r.backoff;
                    r.backoff = (r.backoff * 2).min(BACKOFF_MAX);
                }
                continue;
            }
        };
        match event {
            SwarmEvent::NewListenAddr { address, .. } => info!(%address, "listening"),
            SwarmEvent::ConnectionEstablished { peer_id, .. } => {
                if let Some(r) = redial.get_mut(&peer_id) {
                    r.backoff = BACKOFF_MIN;
                }
                // The writer may be waiting out a backoff: it can open its stream now.
                if let Some(w) = wake.get(&peer_id) {
                    w.notify_one();
                }
                if up.insert(peer_id) {
                    let index = index_of.get(&peer_id).map(|i| i.0);
                    info!(peer = index, %peer_id, "peer connected");
                }
            }
            SwarmEvent::ConnectionClosed {
                peer_id,
                num_established: 0,
                cause,
                ..
            } if up.remove(&peer_id) => {
                let index = index_of.get(&peer_id).map(|i| i.0);
                let cause = cause.map(|c| c.to_string()).unwrap_or_default();
                info!(peer = index, %peer_id, cause, "peer disconnected");
            }
            SwarmEvent::IncomingConnectionError {
                send_back_addr,
                error,
                peer_id,
                ..
            } => match error {
                ListenError::Denied { .. } => {
                    metrics.refused_connections.inc();
                    crate::warn_throttled!(
                        peer_id = ?peer_id.map(|p| p.to_string()),
                        from = %send_back_addr,
                        "refused connection: peer ID not in the config"
                    );
                }
                other => {
                    debug!(from = %send_back_addr, error = %other, "incoming connection failed")
                }
            },
            SwarmEvent::OutgoingConnectionError { peer_id, error, .. } => {
                debug!(peer_id = ?peer_id, %error, "dial failed")
            }
            _ => {}
        }
        metrics.connected_peers.set(up.len() as i64);
        connected.send_replace(up.len());
        let members = up
            .iter()
            .filter(|p| index_of.get(p).is_some_and(|i| i.0 < genesis))
            .count();
        connected_genesis.send_replace(members);
    }
}

/// Keeps one stream to a peer open and writes its queued frames, reconnecting
/// with exponential backoff (cut short when the swarm connects to the peer). The
/// frames being written when a stream fails are written again on the next stream,
/// at most [`WRITE_ATTEMPTS`] times.
struct Writer {
    peer: PeerId,
    index: NodeIndex,
    control: libp2p_stream::Control,
    queue: mpsc::UnboundedReceiver<Frame>,
    queued: Arc<AtomicUsize>,
    gauge: prometheus_client::metrics::gauge::Gauge,
    connected: Arc<Notify>,
    metrics: Arc<Metrics>,
}

impl Writer {
    async fn run(mut self) {
        let index = self.index;
        let mut backoff = BACKOFF_MIN;
        let mut pending: Vec<Frame> = Vec::new();
        let mut attempts = 0u32;
        loop {
            let mut stream = match self.control.open_stream(self.peer, PROTOCOL).await {
                Ok(s) => s,
                Err(e) => {
                    debug!(peer = index.0, error = %e, ?backoff, "cannot open stream; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = self.connected.notified() => {}
                    }
                    backoff = (backoff * 2).min(BACKOFF_MAX);
                    continue;
                }
            };
            // The reader acknowledges a stream it accepted with one byte; libp2p drops
            // inbound streams it cannot hand over at once, and frames written into
            // such a stream would be lost.
            let mut ack = [0u8; 1];
            let accepted = tokio::time::timeout(ACK_TIMEOUT, stream.read_exact(&mut ack)).await;
            if !matches!(accepted, Ok(Ok(()))) || ack[0] != STREAM_ACK {
                debug!(peer = index.0, ?backoff, "stream not accepted; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            backoff = BACKOFF_MIN;
            loop {
                if pending.is_empty() {
                    match self.queue.recv().await {
                        Some(f) => pending.push(f),
                        None => return,
                    }
                    // Coalesce whatever else is queued into one flush.
                    let mut bytes = pending[0].len();
                    while bytes < FLUSH_BYTES {
                        match self.queue.try_recv() {
                            Ok(f) => {
                                bytes += f.len();
                                pending.push(f);
                            }
                            Err(_) => break,
                        }
                    }
                    attempts = 0;
                }
                attempts += 1;
                let written = async {
                    for f in &pending {
                        stream.write_all(&(f.len() as u32).to_be_bytes()).await?;
                        stream.write_all(f).await?;
                    }
                    stream.flush().await
                }
                .await;
                match written {
                    Ok(()) => {
                        tracing::trace!(target: "timeline", at = crate::clock::now().0, to = index.0, frames = pending.len(), "flushed");
                        self.release(&mut pending)
                    }
                    Err(e) => {
                        if attempts >= WRITE_ATTEMPTS {
                            self.metrics.frames_dropped("undeliverable");
                            crate::warn_throttled!(
                                peer = index.0,
                                frames = pending.len(),
                                "frames failed {WRITE_ATTEMPTS} streams: dropped"
                            );
                            self.release(&mut pending);
                        }
                        debug!(peer = index.0, error = %e, "stream failed; reconnecting");
                        break;
                    }
                }
            }
        }
    }

    /// Forgets the frames of `pending` and the bytes they held in the queue.
    fn release(&self, pending: &mut Vec<Frame>) {
        let bytes: usize = pending.iter().map(|f| f.len() + FRAME_OVERHEAD).sum();
        let left = self.queued.fetch_sub(bytes, Ordering::Relaxed) - bytes;
        self.gauge.set(left as i64);
        pending.clear();
    }
}

/// Accepts the streams peers open to us and reads each in its own task; the
/// streams of one peer share its inbound byte budget.
async fn accept_loop<M: DeserializeOwned + Send + 'static>(
    mut incoming: libp2p_stream::IncomingStreams,
    index_of: HashMap<PeerId, NodeIndex>,
    tx: mpsc::Sender<Inbound<M>>,
    limits: NetLimits,
    metrics: Arc<Metrics>,
) {
    let budgets: HashMap<NodeIndex, Arc<Semaphore>> = index_of
        .values()
        .map(|&i| (i, Arc::new(Semaphore::new(limits.peer_inbound_bytes))))
        .collect();
    let cpu: HashMap<NodeIndex, Arc<std::sync::Mutex<CpuBudget>>> = index_of
        .values()
        .map(|&i| {
            let b = CpuBudget::new(limits.peer_decode_cpu_ms_per_s);
            (i, Arc::new(std::sync::Mutex::new(b)))
        })
        .collect();
    while let Some((peer, stream)) = incoming.next().await {
        let Some(&from) = index_of.get(&peer) else {
            warn!(%peer, "stream from a peer not in the config: closed");
            continue;
        };
        let (Some(bytes), Some(cpu)) = (budgets.get(&from), cpu.get(&from)) else {
            continue;
        };
        let reader = Reader {
            from,
            tx: tx.clone(),
            admission: limits.admission.clone(),
            bytes: bytes.clone(),
            cpu: cpu.clone(),
            metrics: metrics.clone(),
        };
        tokio::spawn(reader.run(stream).in_current_span());
    }
}

/// A peer's decoding CPU as a leaky bucket: it drains at the allowed rate and may
/// hold one second's worth.
#[derive(Debug)]
pub struct CpuBudget {
    debt_ns: u64,
    at: std::time::Instant,
    rate_ns_per_s: u64,
}

impl CpuBudget {
    /// A budget of `ms_per_s` milliseconds of CPU per second.
    pub fn new(ms_per_s: u64) -> Self {
        CpuBudget {
            debt_ns: 0,
            at: std::time::Instant::now(),
            rate_ns_per_s: ms_per_s.saturating_mul(1_000_000),
        }
    }

    /// Charges `spent_ns` at `now`; returns how long the peer must wait before
    /// its next frame is read.
    pub fn charge(&mut self, now: std::time::Instant, spent_ns: u64) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        let drained = (elapsed * self.rate_ns_per_s as f64) as u64;
        self.at = now;
        self.debt_ns = self
            .debt_ns
            .saturating_sub(drained)
            .saturating_add(spent_ns);
        let over = self.debt_ns.saturating_sub(self.rate_ns_per_s);
        Duration::from_secs_f64(over as f64 / self.rate_ns_per_s.max(1) as f64)
    }
}

/// Reads one stream of a peer.
struct Reader<M> {
    from: NodeIndex,
    tx: mpsc::Sender<Inbound<M>>,
    admission: Admission,
    bytes: Arc<Semaphore>,
    cpu: Arc<std::sync::Mutex<CpuBudget>>,
    metrics: Arc<Metrics>,
}

impl<M: DeserializeOwned + Send + 'static> Reader<M> {
    /// Reads frames until the stream ends or a frame is over its limit.
    async fn run(self, mut stream: libp2p::Stream) {
        let from = self.from;
        let acked = async {
            stream.write_all(&[STREAM_ACK]).await?;
            stream.flush().await
        };
        if acked.await.is_err() {
            return;
        }
        let mut len = [0u8; 4];
        loop {
            if stream.read_exact(&mut len).await.is_err() {
                return;
            }
            let size = u32::from_be_bytes(len) as usize;
            if size > MAX_FRAME_BYTES {
                self.metrics.frames_dropped("oversized");
                crate::warn_throttled!(
                    peer = from.0,
                    size,
                    "oversized frame (limit {MAX_FRAME_BYTES} bytes): dropped, stream closed"
                );
                return;
            }
            let mut head = [0u8; HEAD_BYTES];
            let head = &mut head[..size.min(HEAD_BYTES)];
            if stream.read_exact(head).await.is_err() {
                return;
            }
            let admit = self.admission.admit(head);
            if admit.max_bytes == 0 {
                self.metrics.frames_dropped("malformed");
                self.metrics.frame_refused(from.0, admit.kind);
                crate::warn_throttled!(
                    peer = from.0,
                    size,
                    "malformed frame (unknown kind): dropped, stream closed"
                );
                return;
            }
            if size > admit.max_bytes {
                self.metrics.frames_dropped("oversized");
                self.metrics.frame_refused(from.0, admit.kind);
                crate::warn_throttled!(
                    peer = from.0,
                    size,
                    kind = admit.kind,
                    limit = admit.max_bytes,
                    "frame over its kind's limit: dropped, stream closed"
                );
                return;
            }
            // Hold the frame's bytes in the peer's budget until the event loop
            // has handled it; while the budget is spent the stream is not read.
            let Ok(held) = self.bytes.clone().acquire_many_owned(size as u32).await else {
                return;
            };
            let mut buf = Vec::with_capacity(size.min(64 * 1024));
            buf.extend_from_slice(head);
            let rest = (size - head.len()) as u64;
            match (&mut stream).take(rest).read_to_end(&mut buf).await {
                Ok(n) if n as u64 == rest => {}
                _ => return,
            }
            tracing::trace!(target: "timeline", at = crate::clock::now().0, from = from.0, kind = admit.kind, size, "read");
            let points = admit.max_points;
            let decoded = tokio::task::spawn_blocking(move || {
                let started = crate::clock::now().0;
                let cpu = crate::clock::thread_cpu_ns();
                let m = beacon::wire::decode_with_point_budget::<M>(&buf, points);
                (
                    m,
                    crate::clock::thread_cpu_ns().saturating_sub(cpu),
                    started,
                )
            })
            .await;
            let Ok((decoded, spent, started)) = decoded else {
                return;
            };
            let pause = self
                .cpu
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .charge(std::time::Instant::now(), spent);
            match decoded {
                Ok(message) => {
                    let inbound = Inbound {
                        from,
                        message,
                        held: Some(held),
                    };
                    tracing::trace!(target: "timeline", at = crate::clock::now().0, from = from.0, kind = admit.kind, started, cpu_us = spent / 1000, "decoded");
                    if self.tx.send(inbound).await.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    self.metrics.frames_dropped("malformed");
                    crate::warn_throttled!(peer = from.0, size, kind = admit.kind, error = %e, "malformed frame: dropped");
                }
            }
            if !pause.is_zero() {
                self.metrics.decode_pauses.inc();
                debug!(
                    peer = from.0,
                    ?pause,
                    "peer over its decoding CPU budget: paused"
                );
                tokio::time::sleep(pause.min(CPU_PAUSE_MAX)).await;
            }
        }
    }
}

/// Listens on `address` as `key` and accepts every stream of [`PROTOCOL`] without
/// ever reading it (a peer that stalls its senders), until `stop` resolves: lets
/// tests check that a sender's memory stays within its budget.
pub async fn serve_silent(
    key: Keypair,
    address: libp2p::Multiaddr,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), NodeError> {
    let net = |e: String| NodeError::Network(e);
    let mut swarm = build_swarm(
        key,
        libp2p_stream::Behaviour::new(),
        Duration::from_secs(3600),
    )?;
    swarm
        .listen_on(address)
        .map_err(|e| net(format!("listen: {e}")))?;
    let mut incoming = swarm
        .behaviour()
        .new_control()
        .accept(PROTOCOL)
        .map_err(|e| net(format!("protocol: {e}")))?;
    let mut held = Vec::new();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = swarm.next() => {}
            Some((_, mut stream)) = incoming.next() => {
                if stream.write_all(&[STREAM_ACK]).await.is_ok() && stream.flush().await.is_ok() {
                    held.push(stream);
                }
            }
        }
    }
}

/// Opens a raw stream to `peer` with `key` and writes `bytes` as they are (no
/// framing added): lets tests and operators probe a node with hand-made frames.
pub async fn send_raw(
    key: Keypair,
    peer: PeerId,
    address: libp2p::Multiaddr,
    bytes: Vec<u8>,
) -> Result<(), NodeError> {
    let net = |e: String| NodeError::Network(e);
    let mut swarm = build_swarm(
        key,
        libp2p_stream::Behaviour::new(),
        Duration::from_secs(10),
    )?;
    let opts = libp2p::swarm::dial_opts::DialOpts::peer_id(peer)
        .addresses(vec![address])
        .build();
    swarm.dial(opts).map_err(|e| net(format!("dial: {e}")))?;
    let mut control = swarm.behaviour().new_control();
    let driver = tokio::spawn(async move {
        loop {
            swarm.next().await;
        }
    });
    let result = async {
        let mut stream = control
            .open_stream(peer, PROTOCOL)
            .await
            .map_err(|e| net(format!("cannot open a stream: {e}")))?;
        let mut ack = [0u8; 1];
        stream
            .read_exact(&mut ack)
            .await
            .map_err(|e| net(format!("stream not accepted: {e}")))?;
        stream
            .write_all(&bytes)
            .await
            .map_err(|e| net(format!("write: {e}")))?;
        stream
            .flush()
            .await
            .map_err(|e| net(format!("flush: {e}")))?;
        stream.close().await.map_err(|e| net(format!("close: {e}")))
    };
    let r = tokio::time::timeout(Duration::from_secs(10), result)
        .await
        .unwrap_or_else(|_| Err(net("timed out".into())));
    driver.abort();
    r
}
