//! The inbound side: the streams peers open, read frame by frame within each
//! peer's budgets of bytes held and of decoding CPU, and decoded off the
//! protocol thread.

use super::{Inbound, NetLimits, CPU_PAUSE_MAX, STREAM_ACK};
use crate::limits::{Admission, HEAD_BYTES, MAX_FRAME_BYTES};
use crate::metrics::Metrics;
use beacon::NodeIndex;
use futures::{AsyncReadExt as _, AsyncWriteExt as _, StreamExt as _};
use libp2p::PeerId;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, warn, Instrument as _};

/// Accepts the streams peers open to us and reads each in its own task; the
/// streams of one peer share its inbound byte budget.
pub(super) async fn accept_loop<M: DeserializeOwned + Send + 'static>(
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
