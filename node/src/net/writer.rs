//! One peer's writer: keeps a stream to the peer open and writes its queued
//! frames, in batches, again on a fresh stream when one fails.

use super::{
    Frame, ACK_TIMEOUT, BACKOFF_MAX, BACKOFF_MIN, FLUSH_BYTES, FRAME_OVERHEAD, PROTOCOL,
    STREAM_ACK, WRITE_ATTEMPTS,
};
use crate::metrics::Metrics;
use beacon::NodeIndex;
use futures::{AsyncReadExt as _, AsyncWriteExt as _};
use libp2p::PeerId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, Notify};
use tracing::debug;

/// Keeps one stream to a peer open and writes its queued frames, reconnecting
/// with exponential backoff (cut short when the swarm connects to the peer). The
/// frames being written when a stream fails are written again on the next stream,
/// at most [`WRITE_ATTEMPTS`] times.
pub(super) struct Writer {
    pub(super) peer: PeerId,
    pub(super) index: NodeIndex,
    pub(super) control: libp2p_stream::Control,
    pub(super) queue: mpsc::UnboundedReceiver<Frame>,
    pub(super) queued: Arc<AtomicUsize>,
    pub(super) gauge: prometheus_client::metrics::gauge::Gauge,
    pub(super) connected: Arc<Notify>,
    pub(super) metrics: Arc<Metrics>,
}

impl Writer {
    /// Opens streams and writes the queue into them until the queue closes
    /// (the transport stopped).
    pub(super) async fn run(mut self) {
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
