//! Peers that break the protocol on purpose, for tests and operators' probes:
//! one that never reads what it is sent, one that writes hand-made bytes.

use super::{build_swarm, NetworkError, StreamStep, PROTOCOL, STREAM_ACK};
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
    let mut swarm = build_swarm(
        key,
        libp2p_stream::Behaviour::new(),
        Duration::from_secs(3600),
    )?;
    swarm
        .listen_on(address.clone())
        .map_err(|source| NetworkError::Listen { address, source })?;
    let mut incoming = swarm
        .behaviour()
        .new_control()
        .accept(PROTOCOL)
        .map_err(NetworkError::Protocol)?;
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

/// How long [`send_raw`] has to connect and write, and how long its
/// connection may stay idle.
const PROBE_TIME: Duration = Duration::from_secs(10);

/// Opens a raw stream to `peer` with `key` and writes `bytes` as they are (no
/// framing added): lets tests and operators probe a node with hand-made frames.
pub async fn send_raw(
    key: Keypair,
    peer: PeerId,
    address: libp2p::Multiaddr,
    bytes: Vec<u8>,
) -> Result<(), NodeError> {
    let mut swarm = build_swarm(key, libp2p_stream::Behaviour::new(), PROBE_TIME)?;
    let opts = libp2p::swarm::dial_opts::DialOpts::peer_id(peer)
        .addresses(vec![address])
        .build();
    swarm.dial(opts).map_err(NetworkError::Dial)?;
    let mut control = swarm.behaviour().new_control();
    let driver = tokio::spawn(async move {
        loop {
            swarm.next().await;
        }
    });
    let result = async {
        let failed =
            |step: StreamStep| move |source: std::io::Error| NetworkError::Stream { step, source };
        let mut stream = control
            .open_stream(peer, PROTOCOL)
            .await
            .map_err(NetworkError::OpenStream)?;
        let mut ack = [0u8; 1];
        stream
            .read_exact(&mut ack)
            .await
            .map_err(NetworkError::NotAccepted)?;
        stream
            .write_all(&bytes)
            .await
            .map_err(failed(StreamStep::Write))?;
        stream.flush().await.map_err(failed(StreamStep::Flush))?;
        stream.close().await.map_err(failed(StreamStep::Close))
    };
    let r = match tokio::time::timeout(PROBE_TIME, result).await {
        Ok(r) => r.map_err(NodeError::from),
        Err(_) => Err(NetworkError::TimedOut { after: PROBE_TIME }.into()),
    };
    driver.abort();
    r
}
