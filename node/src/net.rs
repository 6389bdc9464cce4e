//! The node's transport: libp2p over TCP with noise and yamux, admitting only the
//! peer IDs of the config. Every ordered pair of members has one long-lived
//! stream (`/sbft-beacon/wire/1`) carrying length-prefixed frames (a 4-byte
//! big-endian length, then one wire-encoded message of at most
//! [`MAX_FRAME_BYTES`]). Writers reconnect with exponential backoff; readers drop
//! malformed frames (and close the stream on an oversized one) with a log line.

use crate::config::Validated;
use crate::metrics::Metrics;
use crate::NodeError;
use beacon::NodeIndex;
use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::identity::Keypair;
use libp2p::swarm::{ListenError, NetworkBehaviour, SwarmEvent};
use libp2p::{allow_block_list, noise, tcp, yamux, PeerId, StreamProtocol, SwarmBuilder};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch, Notify};
use tracing::{debug, info, warn, Instrument as _};

/// The stream protocol of wire frames.
pub const PROTOCOL: StreamProtocol = StreamProtocol::new("/sbft-beacon/wire/1");
/// Largest frame accepted (the wire codec's limit).
pub const MAX_FRAME_BYTES: usize = beacon::wire::MAX_MESSAGE_BYTES;
/// Frames queued per peer while it is unreachable; more are dropped (the protocol
/// retransmits what matters).
const QUEUE: usize = 4096;
/// The byte a reader sends when it accepted a stream.
const STREAM_ACK: u8 = 0xAC;
/// How long a writer waits for that byte.
const ACK_TIMEOUT: Duration = Duration::from_secs(5);
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
}

/// The running transport.
pub struct Network {
    outbound: Vec<Option<mpsc::Sender<Frame>>>,
    /// Number of members connected.
    pub connected: watch::Receiver<usize>,
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
        let (in_tx, in_rx) = mpsc::channel(QUEUE);
        let (conn_tx, conn_rx) = watch::channel(0usize);
        let mut outbound = vec![None; cfg.peers.len()];
        let mut wake = HashMap::new();
        for p in &cfg.peers {
            if p.index == cfg.me {
                continue;
            }
            let (tx, rx) = mpsc::channel(QUEUE);
            outbound[p.index.0 as usize] = Some(tx);
            let connected = Arc::new(Notify::new());
            wake.insert(p.id, connected.clone());
            tokio::spawn(
                write_loop(p.id, p.index, control.clone(), rx, connected).in_current_span(),
            );
        }
        tokio::spawn(
            accept_loop::<M>(incoming, index_of.clone(), in_tx, metrics.clone()).in_current_span(),
        );
        let addresses = cfg
            .peers
            .iter()
            .filter(|p| p.index != cfg.me)
            .map(|p| (p.id, p.address.clone()))
            .collect();
        tokio::spawn(
            swarm_loop(swarm, index_of, addresses, wake, conn_tx, metrics.clone())
                .in_current_span(),
        );
        Ok((
            Network {
                outbound,
                connected: conn_rx,
                metrics,
            },
            in_rx,
        ))
    }

    /// Queues `frame` for member `to` (dropped with a debug line if its queue is full).
    pub fn send(&self, to: NodeIndex, frame: Frame) {
        let Some(Some(tx)) = self.outbound.get(to.0 as usize) else {
            return;
        };
        if tx.try_send(frame).is_err() {
            self.metrics.frames_dropped("queue-full");
            debug!(to = to.0, "queue to peer full: frame dropped");
        }
    }

    /// Queues `frame` for every other member.
    pub fn broadcast(&self, frame: Frame) {
        for i in 0..self.outbound.len() {
            self.send(NodeIndex(i as u32), frame.clone());
        }
    }
}

/// The node's transport (TCP without Nagle, noise, yamux) on tokio, carrying
/// `behaviour`; connections idle for `idle` close.
fn build_swarm<B: NetworkBehaviour>(
    key: Keypair,
    behaviour: B,
    idle: Duration,
) -> Result<libp2p::Swarm<B>, NodeError> {
    Ok(SwarmBuilder::with_existing_identity(key)
        .with_tokio()
        .with_tcp(
            tcp::Config::default().nodelay(true),
            noise::Config::new,
            yamux::Config::default,
        )
        .map_err(|e| NodeError::Network(format!("transport: {e}")))?
        .with_behaviour(|_| behaviour)
        .map_err(|e| NodeError::Network(format!("behaviour: {e}")))?
        .with_swarm_config(|c| c.with_idle_connection_timeout(idle))
        .build())
}

/// When to dial a disconnected peer next, and the backoff after that.
struct Redial {
    address: libp2p::Multiaddr,
    at: tokio::time::Instant,
    backoff: Duration,
}

/// Drives the swarm: dials disconnected members with exponential backoff, keeps
/// the connection count, and logs refused peers.
async fn swarm_loop(
    mut swarm: libp2p::Swarm<Behaviour>,
    index_of: HashMap<PeerId, NodeIndex>,
    addresses: Vec<(PeerId, libp2p::Multiaddr)>,
    wake: HashMap<PeerId, Arc<Notify>>,
    connected: watch::Sender<usize>,
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
                    warn!(
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
    }
}

/// Keeps one stream to `peer` open and writes its queued frames, reconnecting
/// with exponential backoff (cut short when the swarm connects to the peer); the
/// frames being written when a stream fails are kept.
async fn write_loop(
    peer: PeerId,
    index: NodeIndex,
    mut control: libp2p_stream::Control,
    mut queue: mpsc::Receiver<Frame>,
    connected: Arc<Notify>,
) {
    let mut backoff = BACKOFF_MIN;
    let mut pending: Vec<Frame> = Vec::new();
    loop {
        let mut stream = match control.open_stream(peer, PROTOCOL).await {
            Ok(s) => s,
            Err(e) => {
                debug!(peer = index.0, error = %e, ?backoff, "cannot open stream; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = connected.notified() => {}
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
                match queue.recv().await {
                    Some(f) => pending.push(f),
                    None => return,
                }
                // Coalesce whatever else is queued into one flush.
                while pending.len() < 64 {
                    match queue.try_recv() {
                        Ok(f) => pending.push(f),
                        Err(_) => break,
                    }
                }
            }
            let mut buf = Vec::with_capacity(pending.iter().map(|f| f.len() + 4).sum());
            for f in &pending {
                buf.extend_from_slice(&(f.len() as u32).to_be_bytes());
                buf.extend_from_slice(f);
            }
            let written = async {
                stream.write_all(&buf).await?;
                stream.flush().await
            }
            .await;
            match written {
                Ok(()) => pending.clear(),
                Err(e) => {
                    debug!(peer = index.0, error = %e, "stream failed; reconnecting");
                    break;
                }
            }
        }
    }
}

/// Accepts the streams peers open to us and reads each in its own task.
async fn accept_loop<M: DeserializeOwned + Send + 'static>(
    mut incoming: libp2p_stream::IncomingStreams,
    index_of: HashMap<PeerId, NodeIndex>,
    tx: mpsc::Sender<Inbound<M>>,
    metrics: Arc<Metrics>,
) {
    while let Some((peer, stream)) = incoming.next().await {
        let Some(&from) = index_of.get(&peer) else {
            warn!(%peer, "stream from a peer not in the config: closed");
            continue;
        };
        tokio::spawn(read_loop(from, stream, tx.clone(), metrics.clone()).in_current_span());
    }
}

/// Reads frames from one peer's stream until it ends or sends an oversized frame.
async fn read_loop<M: DeserializeOwned + Send + 'static>(
    from: NodeIndex,
    mut stream: libp2p::Stream,
    tx: mpsc::Sender<Inbound<M>>,
    metrics: Arc<Metrics>,
) {
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
            metrics.frames_dropped("oversized");
            warn!(
                peer = from.0,
                size, "oversized frame (limit {MAX_FRAME_BYTES} bytes): dropped, stream closed"
            );
            return;
        }
        let mut buf = vec![0u8; size];
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        match beacon::wire::decode::<M>(&buf) {
            Ok(message) => {
                if tx.send(Inbound { from, message }).await.is_err() {
                    return;
                }
            }
            Err(e) => {
                metrics.frames_dropped("malformed");
                warn!(peer = from.0, size, error = %e, "malformed frame: dropped");
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
