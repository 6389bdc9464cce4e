//! Peers that break the protocol on purpose, for tests and operators' probes:
//! one that never reads what it is sent, one that writes hand-made bytes.

use super::{build_swarm, PROTOCOL, STREAM_ACK};
use crate::NodeError;
use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::identity::Keypair;
use libp2p::PeerId;
use std::time::Duration;

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
