//! The swarm's driver: dials disconnected members with exponential backoff
//! and keeps the counts of connected members.

use super::{Behaviour, BACKOFF_MAX, BACKOFF_MIN};
use crate::metrics::Metrics;
use beacon::NodeIndex;
use futures::StreamExt as _;
use libp2p::swarm::{ListenError, SwarmEvent};
use libp2p::PeerId;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};
use tracing::{debug, info};

/// When to dial a disconnected peer next, and the backoff after that.
struct Redial {
    address: libp2p::Multiaddr,
    at: tokio::time::Instant,
    backoff: Duration,
}

/// Drives the swarm: dials disconnected members with exponential backoff, keeps
/// the connection counts (all peers, and the first `genesis` of them), and
/// logs refused peers.
pub(super) async fn swarm_loop(
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
