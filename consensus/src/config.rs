//! Replica parameters and key material.
//!
//! [`ReplicaConfig`] is what a replica runs with (durations in microseconds).
//! It is valid by construction: its only constructors check `n = 3f + 2c + 1`,
//! the thresholds and the bounds ([`ReplicaSettings::validate`]), and it is
//! read, never written, through its [`ReplicaSettings`]. A driver or a test that
//! changes a parameter edits a copy of the settings and builds a new config
//! ([`ReplicaConfig::with`]), which is checked again; deserializing one checks
//! it too. Drivers build it from the `[protocol]` table with
//! [`ReplicaConfig::from_params`] and the DKG from the `[dkg]` table with
//! [`ReplicaConfig::dkg_config`] (both in `crate::params`, which uses this
//! module, never the other way); the chain info of a network comes from it
//! too ([`ReplicaConfig::chain_info`]): one builder each for the simulator and
//! the node.

use crate::ConsensusError;
use beacon::multisig::SignerBitmap;
use beacon::time::{clamp_u64, Period, RoundSchedule, US_PER_S};
use beacon::{ChainInfo, SchemeId};
use serde::{Deserialize, Serialize};

/// Default tolerated clock skew on paced chains: 100 ms (NTP-synchronised hosts
/// are typically within a few milliseconds of each other).
pub const DEFAULT_CLOCK_SKEW_US: u64 = 100_000;

/// Largest `election_lag`: the electing beacon must still be in the replica's
/// chain window ([`crate::replica::CHAIN_WINDOW`]).
pub const MAX_ELECTION_LAG: u64 = 64;

/// Where replicas send their beacon shares (`[protocol] beacon_shares`).
///
/// A beacon share is a unique signature on public data (`beta_{h-1}` and the
/// round), so sending it to more replicas changes who learns `beta_h` first,
/// never what it is: the choice is latency against messages, not safety.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BeaconShares {
    /// On the vote (SIGN-SHARE) to the collectors, who combine `beta_h` and
    /// broadcast it: two message delays from the round's time, `(c + 4) n`
    /// messages a round in all.
    #[default]
    Collectors,
    /// Also on a BEACON-SHARE to every other replica, each of which combines
    /// `beta_h` from the first `t_b` valid shares: one message delay from the
    /// round's time, about `n^2` more messages and a share check and combine at
    /// every replica. drand's pattern; for small networks.
    Everyone,
}

/// Largest paced network whose replicas share beacon shares with everyone
/// unless told otherwise ([`BeaconShares::for_network`]).
pub const EVERYONE_SHARES_UP_TO: u32 = 16;

impl BeaconShares {
    /// The route of a network of `n` replicas, `period` apart (zero: back to
    /// back), that does not choose one, as measured (`docs/results.md`):
    /// - paced, up to [`EVERYONE_SHARES_UP_TO`] replicas: everyone. The beacon
    ///   comes one message delay after the round's time instead of two
    ///   (simulated, a core per node: 3.2 to 2.2 ms at 4 nodes and 5.6 to
    ///   4.2 ms at 16 on loopback, 94 to 41 ms at 16 over the WAN table).
    /// - back to back: the collectors. Blocks commit through the collectors
    ///   either way, so the cadence stays two delays, and the extra shares
    ///   only cost CPU (4 nodes: 17.6 against 19.8 ms on a 2-core machine).
    /// - above that size: the collectors, where `n^2` messages a round cost
    ///   more than the delay saved.
    pub fn for_network(n: u32, period: Period) -> BeaconShares {
        if !period.is_zero() && n <= EVERYONE_SHARES_UP_TO {
            BeaconShares::Everyone
        } else {
            BeaconShares::Collectors
        }
    }

    /// Its name in a `[protocol]` table.
    pub fn name(self) -> &'static str {
        match self {
            BeaconShares::Collectors => "collectors",
            BeaconShares::Everyone => "everyone",
        }
    }
}

impl std::str::FromStr for BeaconShares {
    type Err = ConsensusError;
    /// The route named `text` as a `[protocol]` table names it
    /// ([`BeaconShares::name`]): `--beacon-shares` on the command line.
    fn from_str(text: &str) -> Result<Self, ConsensusError> {
        [BeaconShares::Collectors, BeaconShares::Everyone]
            .into_iter()
            .find(|b| b.name() == text)
            .ok_or_else(|| ConsensusError::UnknownBeaconShares {
                name: text.to_string(),
            })
    }
}

/// Parameters every replica of one network shares, validated: a replica runs
/// only with one of these. Read its fields through [`ReplicaSettings`]
/// (`config.n`, `config.fast_threshold()`); change them with
/// [`ReplicaConfig::with`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ReplicaSettings", into = "ReplicaSettings")]
pub struct ReplicaConfig(ReplicaSettings);

impl std::ops::Deref for ReplicaConfig {
    type Target = ReplicaSettings;
    fn deref(&self) -> &ReplicaSettings {
        &self.0
    }
}

impl TryFrom<ReplicaSettings> for ReplicaConfig {
    type Error = ConsensusError;
    /// Checks `settings` ([`ReplicaSettings::validate`]).
    fn try_from(settings: ReplicaSettings) -> Result<Self, ConsensusError> {
        settings.validate()?;
        Ok(ReplicaConfig(settings))
    }
}

impl From<ReplicaConfig> for ReplicaSettings {
    fn from(config: ReplicaConfig) -> Self {
        config.0
    }
}

/// The fields of a [`ReplicaConfig`], unchecked: a copy to edit, which becomes
/// a config again only through [`ReplicaSettings::build`] (or
/// [`ReplicaConfig::with`]), that is, only if it is safe.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSettings {
    /// Number of replicas, `n = 3f + 2c + 1`.
    pub n: u32,
    /// Byzantine replicas tolerated.
    pub f: u32,
    /// Extra collectors' slack (fast path survives `c` slow or crashed replicas).
    pub c: u32,
    /// Beacon threshold `t_b` (`f + 1 <= t_b <= n - f`).
    pub beacon_threshold: u32,
    /// Lag `k`: the beacon of height `h - k` elects the primary and collectors of `h`.
    pub election_lag: u64,
    /// Beacon period (zero: back-to-back rounds), whole seconds that chain
    /// info can publish; serialized as `period_us`, its microseconds.
    #[serde(rename = "period_us")]
    pub period: Period,
    /// Time of round 1 (replicas sign height `h` at
    /// `genesis_time + (h - 1) * period` by their clocks).
    pub genesis_time_us: u64,
    /// The 32-byte seed round 1 chains on.
    pub genesis_seed: [u8; 32],
    /// The clock skew tolerated between replicas on a paced chain: honest
    /// replicas sign round `h` at `time_of_round(h)` by their own clocks, so
    /// none of its beacon shares exists before `time_of_round(h) -
    /// max_clock_skew_us` of true time while clocks are within this skew.
    pub max_clock_skew_us: u64,
    /// How long a collector waits for the fast path before preparing (slow path).
    pub fast_path_timeout_us: u64,
    /// How long a replica waits for a commit before changing view (doubled per view).
    pub view_change_timeout_us: u64,
    /// Delay per rank before a backup collector acts for a silent first collector.
    pub backup_collector_delay_us: u64,
    /// Whether collectors broadcast the beacon on its own as soon as it exists
    /// (lower beacon latency), or only with the commit proof (fewer messages).
    pub early_beacon: bool,
    /// Most transactions in one block.
    pub max_batch: usize,
    /// Largest accepted transaction (bytes).
    pub max_transaction_bytes: usize,
    /// Most pending transactions held.
    pub mempool_limit: usize,
    /// Most bytes of pending transactions held (sum of their lengths).
    #[serde(default = "default_mempool_bytes")]
    pub mempool_bytes_limit: usize,
    /// Largest block (its wire encoding, bytes). A VIEW-CHANGE carries a block
    /// and its certificate's signer bitmap; a NEW-VIEW carries the block and
    /// the aggregated view changes of `Q = 2f + 2c + 1` senders
    /// ([`ReplicaConfig::new_view_proof_bytes`]); both must fit the wire limit
    /// ([`beacon::wire::MAX_MESSAGE_BYTES`], 16 MiB): [`ReplicaConfig::new`]
    /// picks `min(1 MiB, what fits)` and [`ReplicaConfig::validate`] checks
    /// it. The default 1 MiB fits up to about 45,000 members (n = 16,384:
    /// NEW-VIEWs of at most 6.4 MiB).
    #[serde(default = "default_max_block_bytes")]
    pub max_block_bytes: usize,
    /// Where a replica's beacon share goes: to the collectors on its vote
    /// (two message delays to the beacon), or to every replica too, each of
    /// which combines the beacon itself (one delay, `n^2` messages); `None`:
    /// by the network's size and pace ([`BeaconShares::for_network`]), read through
    /// [`ReplicaSettings::beacon_share_route`].
    #[serde(default)]
    pub beacon_shares: Option<BeaconShares>,
}

/// Upper bound of what a view change adds to its block on the wire (bytes),
/// besides its prepare certificate's signer bitmap
/// ([`ReplicaConfig::view_change_overhead`] adds it): sender, height, view, a
/// prepare certificate's signature, a fast vote, a beacon share, option and
/// length tags (about 400 bytes with G2 signatures).
pub const VIEW_CHANGE_OVERHEAD: usize = 1024;
/// Upper bound of one claim group of a NEW-VIEW besides its senders (bytes):
/// two claims, two signatures, option and length tags (about 290 bytes with
/// G2 signatures). A NEW-VIEW has at most one group per sender.
pub const CLAIM_GROUP_OVERHEAD: usize = 512;
/// Upper bound of a NEW-VIEW's own fields and tags besides its block and
/// view changes (bytes).
pub const MESSAGE_OVERHEAD: usize = 64 * 1024;
/// Smallest `max_block_bytes` a configuration may set (bytes).
pub const MIN_BLOCK_BYTES: usize = 1024;
/// Largest block [`ReplicaConfig::new`] picks (bytes).
pub const DEFAULT_MAX_BLOCK_BYTES: usize = 1 << 20;

fn default_mempool_bytes() -> usize {
    64 << 20
}

fn default_max_block_bytes() -> usize {
    DEFAULT_MAX_BLOCK_BYTES
}

impl ReplicaConfig {
    /// A copy of this config with `edit` applied to its settings, checked
    /// again: `config.with(|s| s.fast_path_timeout_us = 30_000)?`.
    pub fn with(&self, edit: impl FnOnce(&mut ReplicaSettings)) -> Result<Self, ConsensusError> {
        let mut settings = self.0.clone();
        edit(&mut settings);
        settings.build()
    }

    /// A copy of the settings, to edit and [`ReplicaSettings::build`] again.
    pub fn settings(&self) -> ReplicaSettings {
        self.0.clone()
    }

    /// A config for `n = 3f + 2c + 1` replicas with `t_b = f + 1` and the
    /// driver's fields (genesis, clock skew, mempool and block bounds) set;
    /// the other protocol fields are zero until
    /// [`ReplicaConfig::from_params`] fills them.
    pub(crate) fn sized(n: u32, c: u32) -> Result<ReplicaSettings, ConsensusError> {
        check_size(n, c)?;
        let f = (n - 2 * c - 1) / 3;
        let mut cfg = ReplicaSettings {
            n,
            f,
            c,
            beacon_threshold: f + 1,
            election_lag: 0,
            period: Period::ZERO,
            genesis_time_us: 0,
            genesis_seed: [0; 32],
            max_clock_skew_us: DEFAULT_CLOCK_SKEW_US,
            fast_path_timeout_us: 0,
            view_change_timeout_us: 0,
            backup_collector_delay_us: 0,
            early_beacon: false,
            max_batch: 0,
            max_transaction_bytes: 64 * 1024,
            mempool_limit: 100_000,
            mempool_bytes_limit: default_mempool_bytes(),
            max_block_bytes: 0,
            beacon_shares: None,
        };
        cfg.max_block_bytes = DEFAULT_MAX_BLOCK_BYTES.min(cfg.largest_block_that_fits());
        Ok(cfg)
    }
}

impl ReplicaSettings {
    /// Where this replica's beacon shares go: the configured route, else the
    /// one for the network's size and pace.
    pub fn beacon_share_route(&self) -> BeaconShares {
        self.beacon_shares
            .unwrap_or_else(|| BeaconShares::for_network(self.n, self.period))
    }

    /// These settings as a config, if they are valid ([`Self::validate`]).
    pub fn build(self) -> Result<ReplicaConfig, ConsensusError> {
        ReplicaConfig::try_from(self)
    }

    /// Checks `n = 3f + 2c + 1` exactly (every quorum is derived from `f` and
    /// `c`, and is only safe at that size: `SAFETY.md`), threshold bounds,
    /// a period of whole seconds (chain info publishes seconds) and
    /// timeouts.
    pub fn validate(&self) -> Result<(), ConsensusError> {
        check_size(self.n, self.c)?;
        let expected = u64::from(self.f) * 3 + u64::from(self.c) * 2 + 1;
        if u64::from(self.n) != expected {
            return Err(ConsensusError::QuorumMismatch {
                n: self.n,
                f: self.f,
                c: self.c,
                expected,
            });
        }
        let range = |name, value: u64, min: u64, max: u64| {
            if value < min || value > max {
                return Err(ConsensusError::OutOfRange {
                    name,
                    value,
                    min,
                    max,
                });
            }
            Ok(())
        };
        range(
            "beacon_threshold",
            self.beacon_threshold.into(),
            u64::from(self.f) + 1,
            u64::from(self.n - self.f),
        )?;
        range("election_lag", self.election_lag, 1, MAX_ELECTION_LAG)?;
        self.period
            .as_secs()
            .map_err(|source| ConsensusError::Period {
                name: "period_us",
                source,
            })?;
        check_positive([
            ("fast_path_timeout_us", self.fast_path_timeout_us),
            ("view_change_timeout_us", self.view_change_timeout_us),
            ("max_batch", self.max_batch as u64),
        ])?;
        let fits = self.largest_block_that_fits();
        if fits < MIN_BLOCK_BYTES {
            return Err(ConsensusError::NewViewTooLarge {
                n: self.n,
                view_changes: self.view_change_quorum(),
                proof_bytes: self.new_view_proof_bytes(),
                message_bytes: beacon::wire::MAX_MESSAGE_BYTES,
            });
        }
        if self.max_block_bytes > fits {
            return Err(ConsensusError::BlockTooLarge {
                max_block_bytes: self.max_block_bytes,
                view_changes: self.view_change_quorum(),
                message_bytes: beacon::wire::MAX_MESSAGE_BYTES,
                fits,
            });
        }
        range(
            "max_block_bytes",
            self.max_block_bytes as u64,
            MIN_BLOCK_BYTES as u64,
            fits as u64,
        )
    }

    /// Largest `max_block_bytes` for which a VIEW-CHANGE (the block and its
    /// own fields) and a NEW-VIEW (the block and `Q` aggregated view changes)
    /// fit one wire message.
    pub fn largest_block_that_fits(&self) -> usize {
        let room = beacon::wire::MAX_MESSAGE_BYTES.saturating_sub(MESSAGE_OVERHEAD);
        room.saturating_sub(self.view_change_overhead().max(self.new_view_proof_bytes()))
    }

    /// Bound of a VIEW-CHANGE's encoding besides its block (bytes): its own
    /// fields, and the signer bitmap of its prepare certificate (`n` bits).
    pub fn view_change_overhead(&self) -> usize {
        VIEW_CHANGE_OVERHEAD + SignerBitmap::encoded_len(self.n)
    }

    /// Bound of a NEW-VIEW's aggregated view changes (bytes): `Q` senders of 4
    /// bytes, at most one claim group each, and one prepare certificate.
    pub fn new_view_proof_bytes(&self) -> usize {
        let senders = self.view_change_quorum() as usize;
        senders * (4 + CLAIM_GROUP_OVERHEAD) + self.view_change_overhead()
    }

    /// Bound of a NEW-VIEW's encoding under this config (bytes).
    pub fn max_new_view_bytes(&self) -> usize {
        self.max_block_bytes + self.new_view_proof_bytes() + MESSAGE_OVERHEAD
    }

    /// Fast-path threshold `3f + c + 1`.
    pub fn fast_threshold(&self) -> u32 {
        3 * self.f + self.c + 1
    }

    /// Slow-path threshold `2f + c + 1`.
    pub fn slow_threshold(&self) -> u32 {
        2 * self.f + self.c + 1
    }

    /// View changes a new primary needs: `2f + 2c + 1`.
    pub fn view_change_quorum(&self) -> u32 {
        2 * self.f + 2 * self.c + 1
    }

    /// The thresholds to request from the DKG: the beacon key's alone.
    /// Consensus certificates are multi-signatures of the members' own keys
    /// ([`crate::keys`]), which need no dealt key.
    pub fn dkg_thresholds(&self) -> Vec<u32> {
        vec![self.beacon_threshold]
    }

    /// The chain info of this network under `public_key` (the beacon group
    /// key, compressed), for the simulator and the node alike: period and
    /// genesis time in whole seconds, the genesis seed, the default beacon id.
    pub fn chain_info(&self, public_key: Vec<u8>, scheme: SchemeId) -> ChainInfo {
        ChainInfo {
            public_key,
            // Whole seconds within u32 by validation ([`Self::validate`]).
            period: self.period.as_secs().unwrap_or(u32::MAX),
            genesis_time: i64::try_from(self.genesis_time_us / US_PER_S).unwrap_or(i64::MAX),
            genesis_seed: self.genesis_seed.to_vec(),
            scheme,
            beacon_id: "default".into(),
        }
    }

    /// How long view `view` of a height lasts before the next view change: the
    /// base timeout doubled per view, at most 16 times.
    pub fn view_timeout_us(&self, view: u64) -> u64 {
        self.view_change_timeout_us.saturating_mul(1 << view.min(4))
    }

    /// A bound on the time to recover from `views` consecutive failed views (the
    /// sum of their timeouts): what a liveness checker should allow after a fault.
    pub fn recovery_bound_us(&self, views: u64) -> u64 {
        (0..views)
            .map(|v| self.view_timeout_us(v))
            .fold(0, u64::saturating_add)
    }

    /// When an honest replica signs for `height` (and so releases its beacon
    /// share), by its own clock: the round's time. The primary proposes
    /// earlier and replicas hold the proposal until then, so the beacon follows
    /// the round's time by two message delays. Back-to-back chains (no period)
    /// have no such time.
    pub fn signing_time(&self, height: u64) -> u64 {
        if self.period.is_zero() {
            return 0;
        }
        self.time_of_round(height)
    }

    /// Earliest time any beacon share of `height` can exist while honest
    /// clocks are within `max_clock_skew_us` of true time: the round's time
    /// less that skew (a replica whose clock runs ahead signs at
    /// [`Self::signing_time`] by its clock). What the simulator checks every
    /// honest beacon against. Back-to-back chains have no such time.
    pub fn release_time(&self, height: u64) -> u64 {
        if self.period.is_zero() {
            return 0;
        }
        self.time_of_round(height)
            .saturating_sub(self.max_clock_skew_us)
    }

    /// When this chain's rounds are due, in microseconds of a replica's
    /// clock ([`RoundSchedule`]).
    pub fn schedule(&self) -> RoundSchedule {
        RoundSchedule {
            genesis: i128::from(self.genesis_time_us),
            period: self.period.as_micros(),
        }
    }

    /// The time of round `height`: honest replicas sign it then by their own
    /// clocks ([`Self::signing_time`]).
    pub fn time_of_round(&self, height: u64) -> u64 {
        clamp_u64(self.schedule().time_of_round(height))
    }
}

/// Checks that every named value is positive; the first zero is an error
/// naming it.
pub(crate) fn check_positive<const N: usize>(
    values: [(&'static str, u64); N],
) -> Result<(), ConsensusError> {
    match values.into_iter().find(|(_, value)| *value == 0) {
        Some((name, _)) => Err(ConsensusError::NotPositive { name }),
        None => Ok(()),
    }
}

/// Checks that `n = 3f + 2c + 1` for some `f`: with more replicas than that,
/// quorums derived from `f` overlap in too few honest replicas and two blocks
/// can commit at one height. The error names the nearest valid sizes.
pub fn check_size(n: u32, c: u32) -> Result<(), ConsensusError> {
    if valid_size(n, c) {
        return Ok(());
    }
    let below = (1..=n).rev().find(|m| valid_size(*m, c));
    let above = (n.saturating_add(1)..=n.saturating_add(3)).find(|m| valid_size(*m, c));
    Err(ConsensusError::NetworkSize {
        n,
        c,
        nearest: below.into_iter().chain(above).collect(),
        other_c: smallest_collector_slack(n),
    })
}

/// The rest of [`ConsensusError::NetworkSize`]'s message: the nearest valid
/// sizes, and the `c` that makes `n` valid.
pub(crate) fn size_hint(n: u32, c: u32, nearest: &[u32], other_c: Option<u32>) -> String {
    let mut msg = String::new();
    if !nearest.is_empty() {
        let sizes: Vec<String> = nearest.iter().map(u32::to_string).collect();
        msg += &format!("; nearest valid n for c = {c}: {}", sizes.join(" or "));
    }
    if let Some(oc) = other_c {
        msg += &format!(
            "; or keep n = {n} with c = {oc} (f = {})",
            (n - 2 * oc - 1) / 3
        );
    }
    msg
}

fn valid_size(n: u32, c: u32) -> bool {
    u64::from(n) > 2 * u64::from(c) && (n - 2 * c - 1) % 3 == 0
}

/// The smallest `c` (0, 1 or 2) with `n = 3f + 2c + 1`, if any.
pub fn smallest_collector_slack(n: u32) -> Option<u32> {
    (0..3).find(|c| valid_size(n, *c))
}
