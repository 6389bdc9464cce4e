//! Resource limits of a node (`[limits]` in `node.toml`) and the admission of
//! inbound frames by kind.
//!
//! Every queue and buffer that a peer or a client can fill is bounded in bytes:
//! frames per peer in both directions, the mempool, transactions waiting for the
//! event loop, the HTTP API's concurrency and request rates. A frame's kind is
//! read from its first bytes (the enum tags of [`crate::runtime::Frame`]) before
//! it is buffered or decoded, and each kind has a byte size and a number of group
//! elements (points) that an honest message of that kind never exceeds; see
//! [`Admission::admit`] for the table and the README section "Limits and what
//! happens at them" for what happens at each limit.

use crate::NodeError;
use consensus::ReplicaConfig;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Smallest page cache of the chain store (bytes): a few B-tree paths.
pub const MIN_STORE_CACHE_BYTES: usize = 64 << 10;

/// The `[limits]` section. Every field has a default; unknown fields are errors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsSection {
    /// Largest block (bytes of its encoding); default: 1 MiB or, for larger
    /// networks, what lets a NEW-VIEW of `2f + 2c + 1` view changes with their
    /// blocks fit one 16 MiB frame.
    pub max_block_bytes: Option<usize>,
    /// Most bytes of pending transactions in the mempool.
    pub mempool_bytes: usize,
    /// Most bytes of transactions accepted over HTTP and not yet in the mempool.
    pub submit_queue_bytes: usize,
    /// Most bytes of frames queued for one peer; more are dropped
    /// (`sbft_beacon_dropped_frames_total{reason="queue-full"}`).
    pub peer_queue_bytes: usize,
    /// Most bytes of frames received from one peer and not yet handled; the
    /// peer's stream is not read while it is full. At least the frame limit.
    pub peer_inbound_bytes: usize,
    /// CPU one peer's frames may spend being decoded, in milliseconds per second
    /// (its stream is not read while it is over).
    pub peer_decode_cpu_ms_per_s: u64,
    /// Requests one client (IP address) may make to `POST /tx` per second.
    pub tx_per_s_per_client: u32,
    /// Burst of `POST /tx` requests one client may make at once.
    pub tx_burst_per_client: u32,
    /// If set, `POST /tx` requires `Authorization: Bearer TOKEN`.
    pub tx_token: Option<String>,
    /// Time limit of one HTTP request (milliseconds).
    pub http_timeout_ms: u64,
    /// HTTP requests handled at once; more wait (then time out).
    pub http_concurrency: usize,
    /// Most round statistics one `/stats/rounds` response holds.
    pub stats_page: usize,
    /// Round statistics kept for `/stats/rounds`.
    pub stats_rounds: usize,
    /// Page cache of the chain store (bytes). The node writes far more than it
    /// reads back (old beacons, catch-up of peers), and the cache fills as the
    /// store grows, so it is one of the node's memory bounds.
    pub store_cache_bytes: usize,
}

impl Default for LimitsSection {
    fn default() -> Self {
        LimitsSection {
            max_block_bytes: None,
            mempool_bytes: 64 << 20,
            submit_queue_bytes: 16 << 20,
            peer_queue_bytes: 64 << 20,
            peer_inbound_bytes: 32 << 20,
            peer_decode_cpu_ms_per_s: 250,
            tx_per_s_per_client: 32,
            tx_burst_per_client: 64,
            tx_token: None,
            http_timeout_ms: 5_000,
            http_concurrency: 64,
            stats_page: 1_000,
            stats_rounds: 10_000,
            store_cache_bytes: 1 << 20,
        }
    }
}

impl LimitsSection {
    /// Whether every limit has its default.
    pub fn is_default(&self) -> bool {
        *self == LimitsSection::default()
    }

    /// Checks the limits and applies the block and mempool bounds to `replica`.
    pub fn apply(&self, replica: &mut ReplicaConfig) -> Result<(), NodeError> {
        let err = |m: String| Err(NodeError::Config(format!("[limits] {m}")));
        if let Some(b) = self.max_block_bytes {
            replica.max_block_bytes = b;
        }
        replica.mempool_bytes_limit = self.mempool_bytes;
        if replica.max_block_bytes < replica.max_transaction_bytes + 1024 {
            return err(format!(
                "max_block_bytes = {} cannot hold one transaction of {} bytes",
                replica.max_block_bytes, replica.max_transaction_bytes
            ));
        }
        if self.mempool_bytes < replica.max_block_bytes {
            return err(format!(
                "mempool_bytes = {} is smaller than a block ({} bytes)",
                self.mempool_bytes, replica.max_block_bytes
            ));
        }
        if self.submit_queue_bytes < replica.max_transaction_bytes {
            return err("submit_queue_bytes cannot hold one transaction".into());
        }
        if self.peer_queue_bytes < crate::net::MAX_FRAME_BYTES {
            return err(format!(
                "peer_queue_bytes must be at least the frame limit ({} bytes)",
                crate::net::MAX_FRAME_BYTES
            ));
        }
        if self.peer_inbound_bytes < crate::net::MAX_FRAME_BYTES
            || self.peer_inbound_bytes > u32::MAX as usize
        {
            return err(format!(
                "peer_inbound_bytes must be between the frame limit ({} bytes) and 4 GiB",
                crate::net::MAX_FRAME_BYTES
            ));
        }
        if self.peer_decode_cpu_ms_per_s == 0 || self.peer_decode_cpu_ms_per_s > 1000 {
            return err("peer_decode_cpu_ms_per_s must be in 1..=1000".into());
        }
        if self.tx_per_s_per_client == 0 || self.tx_burst_per_client == 0 {
            return err("tx_per_s_per_client and tx_burst_per_client must be positive".into());
        }
        if matches!(&self.tx_token, Some(t) if t.is_empty()) {
            return err("tx_token must not be empty (leave it out for no token)".into());
        }
        if self.http_timeout_ms == 0 || self.http_concurrency == 0 {
            return err("http_timeout_ms and http_concurrency must be positive".into());
        }
        if self.stats_page == 0 || self.stats_rounds == 0 {
            return err("stats_page and stats_rounds must be positive".into());
        }
        if self.store_cache_bytes < MIN_STORE_CACHE_BYTES {
            return err(format!(
                "store_cache_bytes must be at least {MIN_STORE_CACHE_BYTES} (64 KiB)"
            ));
        }
        replica
            .validate()
            .map_err(|e| NodeError::Config(format!("[limits] {e}")))
    }
}

/// Enum tags of [`crate::runtime::Frame`] and the enums inside it (bincode encodes
/// a variant as its `u32` little-endian index in declaration order; a test checks
/// these against real encodings).
mod tag {
    pub const ENVELOPE_DKG: u32 = 0;
    pub const ENVELOPE_CONSENSUS: u32 = 1;
    pub const ENVELOPE_EPOCH: u32 = 2;
    pub const EPOCH_CONTROL: u32 = 0;
    pub const EPOCH_INVITE: u32 = 1;
    pub const EPOCH_RESHARE: u32 = 2;
    pub const EPOCH_DKG: u32 = 3;
    pub const EPOCH_HANDOFF: u32 = 4;
    pub const EPOCH_HANDOFF_REQUEST: u32 = 5;
    pub const PRE_PREPARE: u32 = 0;
    pub const VIEW_CHANGE: u32 = 7;
    pub const NEW_VIEW: u32 = 8;
    pub const BLOCK_RESPONSE: u32 = 10;
    pub const SYNC_RESPONSE: u32 = 12;
    /// Highest consensus message tag.
    pub const LAST_MESSAGE: u32 = 12;
}

/// Bytes of the tags [`Admission::admit`] reads.
pub const HEAD_BYTES: usize = 8;

/// What a frame of one kind may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admit {
    /// Kind, for logs and metrics.
    pub kind: &'static str,
    /// Largest frame of this kind (bytes).
    pub max_bytes: usize,
    /// Most group elements decoded from it.
    pub max_points: usize,
}

/// Decides from a frame's first bytes whether it is wanted and how large it may be.
#[derive(Clone, Debug)]
pub struct Admission {
    max_block_bytes: usize,
    max_new_view_bytes: usize,
    n: usize,
    dkg_done: Arc<AtomicBool>,
}

/// Largest small consensus message (shares, proofs, beacons, requests).
const SMALL: usize = 4 * 1024;
/// Small messages' own fields besides a block.
const SLACK: usize = 4 * 1024;

impl Admission {
    /// Limits for a replica with `cfg`; DKG frames are wanted until `dkg_done`.
    pub fn new(cfg: &ReplicaConfig, dkg_done: Arc<AtomicBool>) -> Self {
        Admission {
            max_block_bytes: cfg.max_block_bytes,
            max_new_view_bytes: cfg.max_new_view_bytes(),
            n: cfg.n as usize,
            dkg_done,
        }
    }

    /// The kind of a frame starting with `head` (at most [`HEAD_BYTES`]) and its
    /// limits:
    ///
    /// | kind | bytes | points |
    /// |---|---|---|
    /// | DKG and relay, during the DKG | 16 MiB | unbounded |
    /// | DKG and relay, after it | 4 KiB | 4 |
    /// | PRE-PREPARE, BLOCK-RESPONSE | block + 4 KiB | 4 |
    /// | VIEW-CHANGE | block + 5 KiB | 8 |
    /// | NEW-VIEW | `(Q + 1)(block + 1 KiB) + 64 KiB` | `8 (n + 1)` |
    /// | SYNC-RESPONSE | 4 MiB + block + 64 KiB | 2 per entry, 64 entries |
    /// | other consensus messages | 4 KiB | 4 |
    /// | epoch control transaction | block + 4 KiB | 4 |
    /// | epoch invitation, resharing, new members' DKG | 16 MiB | unbounded |
    /// | epoch handoff | as SYNC-RESPONSE | as SYNC-RESPONSE |
    /// | epoch handoff request | 4 KiB | 4 |
    ///
    /// A change of members may start at any height, so its large messages
    /// (the old group polynomial, deals, the new members' DKG) are wanted at
    /// all times: like every frame, they are bounded by the peer's decode CPU
    /// budget, and only members of the config can send them.
    pub fn admit(&self, head: &[u8]) -> Admit {
        let word = |i: usize| -> Option<u32> {
            let b = head.get(4 * i..4 * i + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        };
        let small = |kind| Admit {
            kind,
            max_bytes: SMALL,
            max_points: 4,
        };
        let dkg = |kind| {
            if self.dkg_done.load(Ordering::Relaxed) {
                small(kind)
            } else {
                Admit {
                    kind,
                    max_bytes: crate::net::MAX_FRAME_BYTES,
                    max_points: usize::MAX,
                }
            }
        };
        match (word(0), word(1)) {
            (Some(tag::ENVELOPE_DKG), _) => dkg("dkg"),
            (Some(tag::ENVELOPE_CONSENSUS), Some(m)) if m <= tag::LAST_MESSAGE => {
                let block = self.max_block_bytes + SLACK;
                match m {
                    tag::PRE_PREPARE => Admit {
                        kind: "pre-prepare",
                        max_bytes: block,
                        max_points: 4,
                    },
                    tag::BLOCK_RESPONSE => Admit {
                        kind: "block-response",
                        max_bytes: block,
                        max_points: 4,
                    },
                    tag::VIEW_CHANGE => Admit {
                        kind: "view-change",
                        max_bytes: block + consensus::config::VIEW_CHANGE_OVERHEAD,
                        max_points: 8,
                    },
                    tag::NEW_VIEW => Admit {
                        kind: "new-view",
                        max_bytes: self.max_new_view_bytes,
                        max_points: 8 * (self.n + 1),
                    },
                    tag::SYNC_RESPONSE => Admit {
                        kind: "sync-response",
                        max_bytes: self.sync_response_bytes(),
                        max_points: 2 * 64 + 4,
                    },
                    _ => small("consensus"),
                }
            }
            (Some(tag::ENVELOPE_EPOCH), Some(m)) => match m {
                tag::EPOCH_CONTROL => Admit {
                    kind: "epoch-control",
                    max_bytes: self.max_block_bytes + SLACK,
                    max_points: 4,
                },
                tag::EPOCH_INVITE | tag::EPOCH_RESHARE | tag::EPOCH_DKG => Admit {
                    kind: "epoch-change",
                    max_bytes: crate::net::MAX_FRAME_BYTES,
                    max_points: usize::MAX,
                },
                tag::EPOCH_HANDOFF => Admit {
                    kind: "epoch-handoff",
                    max_bytes: self.sync_response_bytes(),
                    max_points: 2 * 64 + 4,
                },
                tag::EPOCH_HANDOFF_REQUEST => small("epoch-handoff-request"),
                _ => Admit {
                    kind: "unknown",
                    max_bytes: 0,
                    max_points: 0,
                },
            },
            _ => Admit {
                kind: "unknown",
                max_bytes: 0,
                max_points: 0,
            },
        }
    }

    fn sync_response_bytes(&self) -> usize {
        consensus::replica::SYNC_RESPONSE_BYTES + self.max_block_bytes + 64 * 1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Frame;
    use beacon::{MinPk, Point as _};
    use consensus::{Block, Envelope, Message};

    type S = MinPk;

    fn head(frame: &Frame<S>) -> Vec<u8> {
        let bytes = beacon::wire::encode(frame).unwrap();
        bytes[..HEAD_BYTES.min(bytes.len())].to_vec()
    }

    fn consensus(m: Message<S>) -> Frame<S> {
        Envelope::Consensus(m)
    }

    #[test]
    fn kinds_are_read_from_real_encodings() {
        let cfg = ReplicaConfig::new(4, 0).unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let a = Admission::new(&cfg, done.clone());
        let block = Arc::new(Block {
            height: consensus::Height::new(1),
            parent: [0; 32],
            previous_beacon: vec![0; 32],
            transactions: vec![],
        });
        let sig = <S as beacon::Scheme>::Signature::generator();
        let cases: Vec<(Frame<S>, &str)> = vec![
            (
                consensus(Message::PrePrepare {
                    height: consensus::Height::new(1),
                    view: consensus::View::ZERO,
                    block: block.clone(),
                }),
                "pre-prepare",
            ),
            (
                consensus(Message::BlockResponse {
                    block: block.clone(),
                }),
                "block-response",
            ),
            (
                consensus(Message::NewView {
                    height: consensus::Height::new(1),
                    view: consensus::View::new(1),
                    view_changes: vec![],
                    block,
                }),
                "new-view",
            ),
            (
                consensus(Message::SyncResponse { entries: vec![] }),
                "sync-response",
            ),
            (
                consensus(Message::Beacon {
                    round: consensus::Height::new(1),
                    signature: sig,
                }),
                "consensus",
            ),
            (
                consensus(Message::SyncRequest {
                    from_height: consensus::Height::new(1),
                }),
                "consensus",
            ),
            (
                consensus(Message::BeaconShare {
                    round: consensus::Height::new(1),
                    share: sig,
                }),
                "consensus",
            ),
        ];
        for (frame, kind) in cases {
            assert_eq!(a.admit(&head(&frame)).kind, kind);
        }
        // Epoch changes: without these, no change of members reaches a node.
        use consensus::epoch::{Control, EpochChange, EpochMessage};
        let key = beacon::dkg::relay::SigningKey::from_bytes(&[7; 32]);
        let change = EpochChange {
            epoch: 1,
            members: vec![consensus::epoch::member_id(&key.verifying_key())],
            c: 0,
            beacon_threshold: 0,
        };
        let epoch_cases: Vec<(EpochMessage<S>, &str)> = vec![
            (
                EpochMessage::Control(Control::propose(change, &key)),
                "epoch-control",
            ),
            (
                EpochMessage::Handoff {
                    epoch: 1,
                    digest: [0; 32],
                    dealers: vec![0],
                    entries: vec![],
                },
                "epoch-handoff",
            ),
            (
                EpochMessage::HandoffRequest { epoch: 1 },
                "epoch-handoff-request",
            ),
        ];
        for (message, kind) in epoch_cases {
            let frame: Frame<S> = Envelope::Epoch(message);
            assert_eq!(a.admit(&head(&frame)).kind, kind);
        }
        // DKG messages: variant 0 of the envelope, whatever follows.
        let dkg = [0u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(a.admit(&dkg).max_bytes, crate::net::MAX_FRAME_BYTES);
        done.store(true, Ordering::Relaxed);
        assert_eq!(a.admit(&dkg).max_bytes, SMALL);
        assert_eq!(a.admit(&[9, 0, 0, 0]).max_bytes, 0);
        assert_eq!(a.admit(&[]).max_bytes, 0);
    }

    #[test]
    fn defaults_are_valid_and_bad_limits_are_named() {
        let mut replica = ReplicaConfig::new(4, 0).unwrap();
        LimitsSection::default().apply(&mut replica).unwrap();
        assert_eq!(replica.max_block_bytes, 1 << 20);
        let bad = LimitsSection {
            max_block_bytes: Some(64 << 20),
            ..Default::default()
        };
        let e = bad.apply(&mut replica.clone()).unwrap_err().to_string();
        assert!(e.contains("NEW-VIEW"), "{e}");
        let bad = LimitsSection {
            peer_queue_bytes: 1,
            ..Default::default()
        };
        let e = bad.apply(&mut replica.clone()).unwrap_err().to_string();
        assert!(e.contains("peer_queue_bytes"), "{e}");
        let bad = LimitsSection {
            store_cache_bytes: 4096,
            ..Default::default()
        };
        let e = bad.apply(&mut replica).unwrap_err().to_string();
        assert!(e.contains("store_cache_bytes"), "{e}");
    }
}
