//! Resource limits of a node (`[limits]` in `node.toml`) and the admission of
//! inbound frames by kind.
//!
//! Every queue and buffer that a peer or a client can fill is bounded in bytes:
//! frames per peer in both directions, the mempool, transactions waiting for the
//! event loop, the HTTP API's concurrency and request rates. A frame's kind is
//! read from its first bytes (the enum tags of [`consensus::Envelope`]) before
//! it is buffered or decoded, and each kind has a byte size and a number of group
//! elements (points) that an honest message of that kind never exceeds; see
//! [`Admission::admit`] for the table and the section "Limits and what
//! happens at them" of `docs/operating.md` for what happens at each limit.

use beacon::multisig::SignerBitmap;
use consensus::{ReplicaConfig, ReplicaSettings};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Largest frame accepted (the wire codec's limit).
pub const MAX_FRAME_BYTES: usize = beacon::wire::MAX_MESSAGE_BYTES;

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

    /// Checks the limits and applies the block and mempool bounds to
    /// `replica`: the config it runs with, if the result is valid.
    pub fn apply(&self, mut replica: ReplicaSettings) -> Result<ReplicaConfig, LimitsError> {
        if let Some(b) = self.max_block_bytes {
            replica.max_block_bytes = b;
        }
        replica.mempool_bytes_limit = self.mempool_bytes;
        let max_transaction_bytes = replica.max_transaction_bytes;
        let max_block_bytes = replica.max_block_bytes;
        if max_block_bytes < max_transaction_bytes + 1024 {
            return Err(LimitsError::BlockTooSmall {
                max_block_bytes,
                max_transaction_bytes,
            });
        }
        if self.mempool_bytes < max_block_bytes {
            return Err(LimitsError::MempoolTooSmall {
                mempool_bytes: self.mempool_bytes,
                max_block_bytes,
            });
        }
        if self.submit_queue_bytes < max_transaction_bytes {
            return Err(LimitsError::SubmitQueueTooSmall {
                submit_queue_bytes: self.submit_queue_bytes,
                max_transaction_bytes,
            });
        }
        if self.peer_queue_bytes < MAX_FRAME_BYTES {
            return Err(LimitsError::PeerQueueTooSmall {
                peer_queue_bytes: self.peer_queue_bytes,
            });
        }
        if self.peer_inbound_bytes < MAX_FRAME_BYTES || self.peer_inbound_bytes > u32::MAX as usize
        {
            return Err(LimitsError::PeerInbound {
                peer_inbound_bytes: self.peer_inbound_bytes,
            });
        }
        if self.peer_decode_cpu_ms_per_s == 0 || self.peer_decode_cpu_ms_per_s > 1000 {
            return Err(LimitsError::PeerDecodeCpu {
                peer_decode_cpu_ms_per_s: self.peer_decode_cpu_ms_per_s,
            });
        }
        if self.tx_per_s_per_client == 0 || self.tx_burst_per_client == 0 {
            return Err(LimitsError::TxRate {
                tx_per_s_per_client: self.tx_per_s_per_client,
                tx_burst_per_client: self.tx_burst_per_client,
            });
        }
        if matches!(&self.tx_token, Some(t) if t.is_empty()) {
            return Err(LimitsError::EmptyTxToken);
        }
        if self.http_timeout_ms == 0 || self.http_concurrency == 0 {
            return Err(LimitsError::Http {
                http_timeout_ms: self.http_timeout_ms,
                http_concurrency: self.http_concurrency,
            });
        }
        if self.stats_page == 0 || self.stats_rounds == 0 {
            return Err(LimitsError::Stats {
                stats_page: self.stats_page,
                stats_rounds: self.stats_rounds,
            });
        }
        if self.store_cache_bytes < MIN_STORE_CACHE_BYTES {
            return Err(LimitsError::StoreCache {
                store_cache_bytes: self.store_cache_bytes,
            });
        }
        replica.build().map_err(LimitsError::Replica)
    }
}

/// Why a `[limits]` table is refused ([`LimitsSection::apply`]): the field
/// and its value.
#[derive(Debug, thiserror::Error)]
pub enum LimitsError {
    /// A block cannot hold one transaction of the largest size.
    #[error(
        "config: [limits] max_block_bytes = {max_block_bytes} cannot hold one transaction of {max_transaction_bytes} bytes"
    )]
    BlockTooSmall {
        /// The largest block.
        max_block_bytes: usize,
        /// The largest transaction.
        max_transaction_bytes: usize,
    },
    /// The mempool cannot hold one block.
    #[error(
        "config: [limits] mempool_bytes = {mempool_bytes} is smaller than a block ({max_block_bytes} bytes)"
    )]
    MempoolTooSmall {
        /// The value of the field.
        mempool_bytes: usize,
        /// The largest block.
        max_block_bytes: usize,
    },
    /// The submission queue cannot hold one transaction.
    #[error(
        "config: [limits] submit_queue_bytes = {submit_queue_bytes} cannot hold one transaction ({max_transaction_bytes} bytes)"
    )]
    SubmitQueueTooSmall {
        /// The value of the field.
        submit_queue_bytes: usize,
        /// The largest transaction.
        max_transaction_bytes: usize,
    },
    /// A peer's outbound queue cannot hold one frame.
    #[error(
        "config: [limits] peer_queue_bytes = {peer_queue_bytes} must be at least the frame limit ({MAX_FRAME_BYTES} bytes)"
    )]
    PeerQueueTooSmall {
        /// The value of the field.
        peer_queue_bytes: usize,
    },
    /// A peer's inbound buffer cannot hold one frame, or is over 4 GiB.
    #[error(
        "config: [limits] peer_inbound_bytes = {peer_inbound_bytes} must be between the frame limit ({MAX_FRAME_BYTES} bytes) and 4 GiB"
    )]
    PeerInbound {
        /// The value of the field.
        peer_inbound_bytes: usize,
    },
    /// The decoding CPU of a peer is not in `1..=1000` ms per second.
    #[error(
        "config: [limits] peer_decode_cpu_ms_per_s = {peer_decode_cpu_ms_per_s} must be in 1..=1000"
    )]
    PeerDecodeCpu {
        /// The value of the field.
        peer_decode_cpu_ms_per_s: u64,
    },
    /// A client's transaction rate or burst is zero.
    #[error(
        "config: [limits] tx_per_s_per_client and tx_burst_per_client must be positive (they are {tx_per_s_per_client} and {tx_burst_per_client})"
    )]
    TxRate {
        /// The value of `tx_per_s_per_client`.
        tx_per_s_per_client: u32,
        /// The value of `tx_burst_per_client`.
        tx_burst_per_client: u32,
    },
    /// `tx_token` is set to the empty string.
    #[error("config: [limits] tx_token must not be empty (leave it out for no token)")]
    EmptyTxToken,
    /// The HTTP time limit or concurrency is zero.
    #[error(
        "config: [limits] http_timeout_ms and http_concurrency must be positive (they are {http_timeout_ms} and {http_concurrency})"
    )]
    Http {
        /// The value of `http_timeout_ms`.
        http_timeout_ms: u64,
        /// The value of `http_concurrency`.
        http_concurrency: usize,
    },
    /// A round-statistics bound is zero.
    #[error(
        "config: [limits] stats_page and stats_rounds must be positive (they are {stats_page} and {stats_rounds})"
    )]
    Stats {
        /// The value of `stats_page`.
        stats_page: usize,
        /// The value of `stats_rounds`.
        stats_rounds: usize,
    },
    /// The store's page cache is below the minimum.
    #[error(
        "config: [limits] store_cache_bytes = {store_cache_bytes} must be at least {MIN_STORE_CACHE_BYTES} (64 KiB)"
    )]
    StoreCache {
        /// The value of the field.
        store_cache_bytes: usize,
    },
    /// The replica refuses the bounds the limits set (a block too large for
    /// a NEW-VIEW to fit a frame, for one).
    #[error("config: [limits] {0}")]
    Replica(#[source] consensus::ConsensusError),
}

/// Enum tags of [`consensus::Envelope`] and the enums inside it (bincode encodes
/// a variant as its `u32` little-endian index in declaration order; a test checks
/// these against real encodings).
mod tag {
    pub(super) const ENVELOPE_DKG: u32 = 0;
    pub(super) const ENVELOPE_CONSENSUS: u32 = 1;
    pub(super) const ENVELOPE_EPOCH: u32 = 2;
    pub(super) const EPOCH_CONTROL: u32 = 0;
    pub(super) const EPOCH_INVITE: u32 = 1;
    pub(super) const EPOCH_RESHARE: u32 = 2;
    pub(super) const EPOCH_HANDOFF: u32 = 3;
    pub(super) const EPOCH_HANDOFF_REQUEST: u32 = 4;
    pub(super) const EPOCH_NAMED: u32 = 5;
    pub(super) const EPOCH_CURRENT: u32 = 6;
    pub(super) const PRE_PREPARE: u32 = 0;
    pub(super) const VIEW_CHANGE: u32 = 7;
    pub(super) const NEW_VIEW: u32 = 8;
    pub(super) const BLOCK_RESPONSE: u32 = 10;
    pub(super) const SYNC_RESPONSE: u32 = 12;
    /// Highest consensus message tag.
    pub(super) const LAST_MESSAGE: u32 = 12;
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
    view_change_overhead: usize,
    n: usize,
    /// Commitments one genesis dealer broadcasts: the beacon threshold.
    dkg_points: usize,
    /// Parties of the config (genesis members and those that may join): no
    /// epoch has more members, nor a threshold above that.
    parties: usize,
    dkg_done: Arc<AtomicBool>,
}

/// Largest small consensus message (shares, proofs, beacons, requests).
const SMALL: usize = 4 * 1024;
/// Small messages' own fields besides a block.
const SLACK: usize = 4 * 1024;
/// Bytes of a DKG or resharing frame besides what grows with its members and
/// commitments: tags, session, attempt, one attestation, a share's Merkle path.
const RELAY_FIXED: usize = 4 * 1024;
/// Bytes per member of a DKG or resharing frame: two attestations of 112
/// bytes (a `Versions` answer), a revealed share of 108 (a justification), a
/// member id of 32 (a complaint or a result's `qual` of 4).
const RELAY_PER_MEMBER: usize = 256;
/// Bytes of an [`consensus::epoch::EpochMessage::Named`] besides its dealers:
/// tags, epoch, digest and the list's length.
const NAMED_FIXED: usize = 64;
/// Bytes per dealer of a `Named` (a `u32`).
const NAMED_PER_DEALER: usize = 4;
/// Bytes per commitment (the largest compressed point, in G2).
const POINT_BYTES: usize = 96;
/// Bytes per member of a change's consensus keys: a public key and its proof
/// of possession (at most 96 bytes each) with their length prefixes.
const LISTING_BYTES: usize = 2 * POINT_BYTES + 16;
/// Bytes per member of an invitation: the member lists of the change, of the
/// old and of the new epoch (32 bytes each), a coefficient of the old group
/// polynomial, and the change's consensus key of the member.
const INVITE_PER_PARTY: usize = 3 * 32 + POINT_BYTES + LISTING_BYTES;
/// Bytes per member of an [`consensus::epoch::EpochMessage::Current`]: its
/// directory index and its consensus key (the configuration is in the fixed
/// part).
const CURRENT_PER_PARTY: usize = 4 + LISTING_BYTES;

/// Largest frame of a DKG or resharing among `members` whose dealers each
/// broadcast `points` commitments: a deal, a `Versions` answer or a
/// justification, whichever is largest.
fn relay_bytes(members: usize, points: usize) -> usize {
    RELAY_FIXED
        .saturating_add(members.saturating_mul(RELAY_PER_MEMBER))
        .saturating_add(points.saturating_mul(POINT_BYTES))
        .min(MAX_FRAME_BYTES)
}

impl Admission {
    /// Limits for a replica with `cfg` among `parties` configured parties;
    /// DKG frames are wanted until `dkg_done`.
    pub fn new(cfg: &ReplicaConfig, parties: usize, dkg_done: Arc<AtomicBool>) -> Self {
        Admission {
            max_block_bytes: cfg.max_block_bytes,
            max_new_view_bytes: cfg.max_new_view_bytes(),
            view_change_overhead: cfg.view_change_overhead(),
            n: cfg.n as usize,
            dkg_points: cfg.dkg_thresholds().iter().map(|t| *t as usize).sum(),
            parties: parties.max(cfg.n as usize),
            dkg_done,
        }
    }

    /// The kind of a frame starting with `head` (at most [`HEAD_BYTES`]) and its
    /// limits:
    ///
    /// Every bound follows from the genesis size `n`, the DKG's one
    /// threshold `T = t_b` (the beacon key's), the largest block, a signer
    /// bitmap `B(m) = 13 + m / 8` bytes over `m` members, and the number `P`
    /// of configured parties (no epoch has more members, and no threshold is
    /// above its size):
    ///
    /// | kind | bytes | points |
    /// |---|---|---|
    /// | DKG and relay, during the DKG | `4 KiB + 256 n + 96 T` | 4 |
    /// | DKG and relay, after it | 4 KiB | 4 |
    /// | PRE-PREPARE, BLOCK-RESPONSE | block + 4 KiB | 4 |
    /// | VIEW-CHANGE | block + 5 KiB + `B(n)` | 8 |
    /// | NEW-VIEW | block + `Q (4 + 512)` + 1 KiB + `B(n)` + 64 KiB | `2 n + 4` (two per claim group, one per certificate) |
    /// | SYNC-RESPONSE | 4 MiB + block + 64 KiB + `64 B(P)` | 2 per entry, 64 entries |
    /// | other consensus messages (a certificate's bitmap) | 4 KiB + `B(P)` | 4 |
    /// | epoch control transaction | block + 4 KiB | 4 |
    /// | epoch invitation | `4 KiB + 400 P` | `P` (the old group polynomial) |
    /// | epoch resharing | `4 KiB + 256 P + 96 P` | 4 |
    /// | epoch handoff | as SYNC-RESPONSE | as SYNC-RESPONSE |
    /// | epoch handoff request | 4 KiB | 4 |
    /// | epoch current (a joiner that is behind) | `4 KiB + 212 P` | 0 |
    ///
    /// A DKG or resharing frame carries its commitments as an opaque payload
    /// (decoded by the session, bounded by the frame's bytes), hence its small
    /// point budget. At n = P = 4 (T = 2) a DKG frame is at most 5.2 KiB and
    /// an invitation 5.6 KiB: the 16 MiB invitation of 290,000 points is
    /// refused before a byte of it is read. A change of members may start at
    /// any height, so its messages are wanted at all times, and only parties
    /// of the config can send them.
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
        // Commit proofs and PREPAREs carry a bitmap over an epoch's members.
        let certified = |kind| Admit {
            kind,
            max_bytes: SMALL + SignerBitmap::encoded_len(self.parties as u32),
            max_points: 4,
        };
        let dkg = |kind| {
            if self.dkg_done.load(Ordering::Relaxed) {
                small(kind)
            } else {
                Admit {
                    kind,
                    max_bytes: relay_bytes(self.n, self.dkg_points),
                    max_points: 4,
                }
            }
        };
        let p = self.parties;
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
                        max_bytes: block + self.view_change_overhead,
                        max_points: 8,
                    },
                    tag::NEW_VIEW => Admit {
                        kind: "new-view",
                        max_bytes: self.max_new_view_bytes,
                        max_points: 2 * self.n + 4,
                    },
                    tag::SYNC_RESPONSE => Admit {
                        kind: "sync-response",
                        max_bytes: self.sync_response_bytes(),
                        max_points: 2 * 64 + 4,
                    },
                    _ => certified("consensus"),
                }
            }
            (Some(tag::ENVELOPE_EPOCH), Some(m)) => match m {
                tag::EPOCH_CONTROL => Admit {
                    kind: "epoch-control",
                    max_bytes: self.max_block_bytes + SLACK,
                    max_points: 4,
                },
                tag::EPOCH_INVITE => Admit {
                    kind: "epoch-invite",
                    max_bytes: RELAY_FIXED
                        .saturating_add(p.saturating_mul(INVITE_PER_PARTY))
                        .min(MAX_FRAME_BYTES),
                    max_points: p,
                },
                tag::EPOCH_RESHARE => Admit {
                    kind: "epoch-reshare",
                    max_bytes: relay_bytes(p, p),
                    max_points: 4,
                },
                tag::EPOCH_HANDOFF => Admit {
                    kind: "epoch-handoff",
                    max_bytes: self.sync_response_bytes(),
                    max_points: 2 * 64 + 4,
                },
                tag::EPOCH_HANDOFF_REQUEST => small("epoch-handoff-request"),
                tag::EPOCH_NAMED => Admit {
                    kind: "epoch-named",
                    max_bytes: NAMED_FIXED.saturating_add(p.saturating_mul(NAMED_PER_DEALER)),
                    max_points: 0,
                },
                tag::EPOCH_CURRENT => Admit {
                    kind: "epoch-current",
                    max_bytes: SMALL
                        .saturating_add(p.saturating_mul(CURRENT_PER_PARTY))
                        .min(MAX_FRAME_BYTES),
                    max_points: 0,
                },
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
        let bitmaps = consensus::replica::SYNC_BATCH
            .saturating_mul(SignerBitmap::encoded_len(self.parties as u32));
        consensus::replica::SYNC_RESPONSE_BYTES + self.max_block_bytes + 64 * 1024 + bitmaps
    }
}

#[cfg(test)]
mod tests;
