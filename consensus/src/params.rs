//! The protocol parameters of a network as one table: the `[protocol]` table of
//! a simulator scenario (`configs/sim/*.toml`) and of a node's `node.toml` alike.
//!
//! - One set of defaults ([`ProtocolParams::default`]), chosen for real networks
//!   (a LAN, or a WAN of a few regions): 50 ms fast-path wait, 1 s view change,
//!   100 ms backup collector delay. Scenarios write their own values out.
//! - One unit in files, milliseconds; [`ms_to_us`] is the only conversion to the
//!   microseconds of [`ReplicaConfig`], and the period is a [`Period`] from
//!   the moment it is read (`period_ms`, through [`beacon::time::period_ms`]).
//! - One builder, [`ReplicaConfig::from_params`], used by the simulator and the
//!   node, so that a scenario's table pasted into `node.toml` gives the node the
//!   replica config the simulator ran (same `n`; the genesis time and seed are
//!   the driver's).
//!
//! Bad values (zero timeouts, a lag above [`crate::config::MAX_ELECTION_LAG`], a beacon
//! threshold outside `[f + 1, n - f]`, a period that is not whole seconds) are
//! [`ConsensusError`]s naming the key, never panics.

use crate::config::{check_positive, check_size, smallest_collector_slack, BeaconShares};
use crate::{ConsensusError, ReplicaConfig};
use beacon::dkg::committee::Committee;
use beacon::dkg::{DkgConfig, DkgSettings, DkgTiming};
use beacon::time::Period;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Default fast-path wait of a collector (ms).
pub const DEFAULT_FAST_PATH_TIMEOUT_MS: u64 = 50;
/// Default base view-change timeout (ms).
pub const DEFAULT_VIEW_CHANGE_TIMEOUT_MS: u64 = 1_000;
/// Default delay per rank of a backup collector (ms).
pub const DEFAULT_BACKUP_COLLECTOR_DELAY_MS: u64 = 100;
/// Default most transactions in one block.
pub const DEFAULT_MAX_BATCH: usize = 256;

/// The parameters every replica of one network shares, as written in the
/// `[protocol]` table (durations in milliseconds). Every key is optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProtocolParams {
    /// Extra collectors' slack `c` (`n = 3f + 2c + 1`); absent: the smallest
    /// `c` that makes `n` valid ([`smallest_collector_slack`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c: Option<u32>,
    /// Beacon threshold `t_b` (0: `f + 1`; else within `[f + 1, n - f]`).
    pub beacon_threshold: u32,
    /// Election lag `k`: the beacon of height `h - k` elects height `h`
    /// (`1..=MAX_ELECTION_LAG`).
    pub election_lag: u64,
    /// Time between rounds, whole seconds (zero: back-to-back rounds); the
    /// key `period_ms`, in milliseconds.
    #[serde(rename = "period_ms", with = "beacon::time::period_ms")]
    pub period: Period,
    /// How long a collector waits for the fast path before preparing (ms, > 0).
    pub fast_path_timeout_ms: u64,
    /// Base view-change timeout (ms, > 0; doubled per view).
    pub view_change_timeout_ms: u64,
    /// Delay per rank before a backup collector acts for a silent first
    /// collector (ms).
    pub backup_collector_delay_ms: u64,
    /// Whether collectors broadcast the beacon as soon as it exists (else only
    /// with the commit proof).
    pub early_beacon: bool,
    /// Where beacon shares go: `"collectors"` (two message delays to the
    /// beacon, `(c + 4) n` messages a round) or `"everyone"` (one delay, about
    /// `n^2` more messages); absent: everyone on paced networks of up to 16
    /// replicas, else the collectors ([`BeaconShares::for_network`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub beacon_shares: Option<BeaconShares>,
    /// Most transactions in one block (> 0).
    pub max_batch: usize,
}

impl Default for ProtocolParams {
    fn default() -> Self {
        ProtocolParams {
            c: None,
            beacon_threshold: 0,
            election_lag: 1,
            period: Period::ZERO,
            fast_path_timeout_ms: DEFAULT_FAST_PATH_TIMEOUT_MS,
            view_change_timeout_ms: DEFAULT_VIEW_CHANGE_TIMEOUT_MS,
            backup_collector_delay_ms: DEFAULT_BACKUP_COLLECTOR_DELAY_MS,
            early_beacon: true,
            beacon_shares: None,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

/// Default longest wait of a DKG phase for silent members (ms).
pub const DEFAULT_DKG_PHASE_TIMEOUT_MS: u64 = 3_000;
/// Default DKG attempts before the DKG fails.
pub const DEFAULT_DKG_MAX_ATTEMPTS: u32 = 3;

/// The DKG's parameters, as written in the `[dkg]` table of a simulator
/// scenario and of a node's `node.toml` alike (the same names and defaults;
/// [`ReplicaConfig::dkg_config`] builds the DKG from them). Every key is
/// optional.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DkgParams {
    /// Smallest committee of dealers (0: every member deals). The committee
    /// is drawn from the genesis seed and raised to the size the committee
    /// rule needs (`beacon::dkg::committee`).
    pub dealers: u32,
    /// Longest wait of each DKG phase for silent members in the first
    /// attempt (ms, > 0; doubled per attempt). A phase ends as soon as
    /// everything it waits for is in.
    pub phase_timeout_ms: u64,
    /// DKG attempts (each with a fresh session) before the DKG fails.
    pub max_attempts: u32,
}

impl Default for DkgParams {
    fn default() -> Self {
        DkgParams {
            dealers: 0,
            phase_timeout_ms: DEFAULT_DKG_PHASE_TIMEOUT_MS,
            max_attempts: DEFAULT_DKG_MAX_ATTEMPTS,
        }
    }
}

impl DkgParams {
    /// The DKG's timing ([`DkgTiming`]: phases of `phase_timeout_ms` in the
    /// first attempt, doubled per attempt, `max_attempts` attempts), built
    /// here once for the DKG, the member's resharings, the node and the
    /// simulator's campaigns.
    pub fn timing(&self) -> DkgTiming {
        DkgTiming::new(
            Duration::from_millis(self.phase_timeout_ms),
            self.max_attempts,
        )
    }
}

/// Milliseconds to microseconds ([`beacon::time::ms_to_us`]) for file durations; a
/// value too large for microseconds in a `u64` is an error naming `name`.
pub fn ms_to_us(name: &'static str, ms: u64) -> Result<u64, ConsensusError> {
    beacon::time::ms_to_us(ms).ok_or(ConsensusError::Unusable {
        name,
        value: ms,
        reason: "too large (microseconds overflow 64 bits)",
    })
}

impl ProtocolParams {
    /// The defaults with `c` fixed.
    pub fn with_c(c: u32) -> Self {
        ProtocolParams {
            c: Some(c),
            ..ProtocolParams::default()
        }
    }

    /// The `c` of a network of `n` replicas: the configured one if `n` is
    /// `3f + 2c + 1` for it, else the smallest that makes `n` valid.
    pub fn collector_slack(&self, n: u32) -> Result<u32, ConsensusError> {
        let c = match self.c {
            Some(c) => c,
            None => smallest_collector_slack(n).unwrap_or(0),
        };
        check_size(n, c)?;
        Ok(c)
    }

    /// The period in whole seconds, as chain info publishes it.
    pub fn period_s(&self) -> Result<u32, ConsensusError> {
        self.period
            .as_secs()
            .map_err(|source| ConsensusError::Period {
                name: "period_ms",
                source,
            })
    }

    /// Checks what needs no `n`, named by the table's keys: positive
    /// timeouts and batch, a period of whole seconds, durations that fit
    /// microseconds. ([`ReplicaConfig::from_params`] checks the rest: `c`,
    /// the beacon threshold and the election lag.)
    pub fn validate(&self) -> Result<(), ConsensusError> {
        check_positive([
            ("fast_path_timeout_ms", self.fast_path_timeout_ms),
            ("view_change_timeout_ms", self.view_change_timeout_ms),
            ("max_batch", self.max_batch as u64),
        ])?;
        self.period_s()?;
        self.durations_us().map(|_| ())
    }

    /// Fast-path timeout, view-change timeout and backup delay in
    /// microseconds.
    fn durations_us(&self) -> Result<[u64; 3], ConsensusError> {
        Ok([
            ms_to_us("fast_path_timeout_ms", self.fast_path_timeout_ms)?,
            ms_to_us("view_change_timeout_ms", self.view_change_timeout_ms)?,
            ms_to_us("backup_collector_delay_ms", self.backup_collector_delay_ms)?,
        ])
    }
}

impl ReplicaConfig {
    /// Defaults for `n` replicas with `c` extra collectors: `f = (n - 2c - 1) / 3`,
    /// `t_b = f + 1`, and the protocol defaults of [`ProtocolParams::default`]
    /// (50 ms fast-path timeout, 1 s view-change timeout).
    pub fn new(n: u32, c: u32) -> Result<Self, ConsensusError> {
        ReplicaConfig::from_params(n, &ProtocolParams::with_c(c))
    }

    /// The replica config of a network of `n` replicas with these parameters:
    /// `c` resolved ([`ProtocolParams::collector_slack`]), `f = (n - 2c - 1) / 3`,
    /// `t_b = f + 1` unless set, durations converted by [`ms_to_us`], the rest
    /// (genesis, clock skew, mempool and block bounds) as [`ReplicaConfig::new`]
    /// sets them; validated.
    pub fn from_params(n: u32, params: &ProtocolParams) -> Result<Self, ConsensusError> {
        params.validate()?;
        let c = params.collector_slack(n)?;
        let mut cfg = ReplicaConfig::sized(n, c)?;
        if params.beacon_threshold > 0 {
            cfg.beacon_threshold = params.beacon_threshold;
        }
        let [fast_path, view_change, backup] = params.durations_us()?;
        cfg.election_lag = params.election_lag;
        cfg.period = params.period;
        cfg.fast_path_timeout_us = fast_path;
        cfg.view_change_timeout_us = view_change;
        cfg.backup_collector_delay_us = backup;
        cfg.early_beacon = params.early_beacon;
        cfg.beacon_shares = params.beacon_shares;
        cfg.max_batch = params.max_batch;
        cfg.build()
    }

    /// The DKG of this network, for the simulator and the node alike: its
    /// thresholds, the fault bound `f` (the agreement quorum is `n - f`), and
    /// the committee of at least `params.dealers` (0: every member) drawn
    /// from the genesis seed, with `min_qualified` from the committee rule
    /// ([`Committee::draw`]); the timing of [`DkgParams::timing`].
    pub fn dkg_config(
        &self,
        session: [u8; 32],
        params: &DkgParams,
    ) -> Result<DkgConfig, ConsensusError> {
        let DkgParams {
            dealers: requested_dealers,
            phase_timeout_ms,
            ..
        } = *params;
        if phase_timeout_ms == 0 {
            return Err(ConsensusError::NotPositive {
                name: "phase_timeout_ms",
            });
        }
        // A phase too long for microseconds is refused by name.
        ms_to_us("phase_timeout_ms", phase_timeout_ms)?;
        let committee = Committee::draw(self.n, self.f, requested_dealers, &self.genesis_seed);
        Ok(DkgSettings {
            session,
            n: self.n,
            thresholds: self.dkg_thresholds(),
            dealers: committee.dealers,
            timing: params.timing(),
            min_qualified: committee.min_qualified,
            max_faulty: self.f,
        }
        .build()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_ELECTION_LAG;
    use beacon::time::US_PER_S;

    #[test]
    fn beacon_shares_go_to_everyone_on_small_paced_networks() {
        let route = |n: u32, period_s: u32, set: Option<BeaconShares>| {
            let params = ProtocolParams {
                period: Period::from_secs(period_s),
                beacon_shares: set,
                ..ProtocolParams::default()
            };
            ReplicaConfig::from_params(n, &params)
                .unwrap()
                .beacon_share_route()
        };
        assert_eq!(route(4, 1, None), BeaconShares::Everyone);
        assert_eq!(route(16, 3, None), BeaconShares::Everyone);
        assert_eq!(route(17, 1, None), BeaconShares::Collectors);
        assert_eq!(route(4, 0, None), BeaconShares::Collectors);
        let everyone = Some(BeaconShares::Everyone);
        assert_eq!(route(64, 0, everyone), BeaconShares::Everyone);
        let collectors = Some(BeaconShares::Collectors);
        assert_eq!(route(4, 1, collectors), BeaconShares::Collectors);
        let p: ProtocolParams = toml::from_str("beacon_shares = \"everyone\"").unwrap();
        assert_eq!(p.beacon_shares, everyone);
        assert!(toml::from_str::<ProtocolParams>("beacon_shares = \"all\"").is_err());
        // A resized network decides again, for its new size.
        let small = ReplicaConfig::from_params(
            4,
            &ProtocolParams {
                period: Period::from_secs(1),
                ..ProtocolParams::default()
            },
        )
        .unwrap();
        let large = small.resized(31, 0, 0).unwrap();
        assert_eq!(large.beacon_share_route(), BeaconShares::Collectors);
    }

    #[test]
    fn defaults_suit_real_networks() {
        let p = ProtocolParams::default();
        assert_eq!(p.c, None);
        assert_eq!(p.beacon_threshold, 0);
        assert_eq!(p.election_lag, 1);
        assert_eq!(p.period, Period::ZERO);
        assert_eq!(p.fast_path_timeout_ms, 50);
        assert_eq!(p.view_change_timeout_ms, 1_000);
        assert_eq!(p.backup_collector_delay_ms, 100);
        assert!(p.early_beacon);
        assert_eq!(p.max_batch, 256);
        // An empty table is the defaults.
        let empty: ProtocolParams = toml::from_str("").unwrap();
        assert_eq!(empty, p);
        // ReplicaConfig::new has the same defaults (one set).
        let cfg = ReplicaConfig::from_params(4, &p).unwrap();
        assert_eq!(cfg, ReplicaConfig::new(4, 0).unwrap());
        assert_eq!(cfg.fast_path_timeout_us, 50_000);
        assert_eq!(cfg.view_change_timeout_us, 1_000_000);
        assert_eq!(cfg.backup_collector_delay_us, 100_000);
        assert_eq!(cfg.beacon_threshold, cfg.f + 1);
    }

    #[test]
    fn table_parses_and_converts_once() {
        let p: ProtocolParams = toml::from_str(
            "c = 1\nbeacon_threshold = 5\nelection_lag = 3\nperiod_ms = 2000\n\
             fast_path_timeout_ms = 400\nview_change_timeout_ms = 2500\n\
             backup_collector_delay_ms = 30\nearly_beacon = false\nmax_batch = 64\n",
        )
        .unwrap();
        let cfg = ReplicaConfig::from_params(12, &p).unwrap();
        assert_eq!((cfg.n, cfg.f, cfg.c), (12, 3, 1));
        assert_eq!(cfg.beacon_threshold, 5);
        assert_eq!(cfg.election_lag, 3);
        assert_eq!(cfg.period, Period::from_secs(2));
        assert_eq!(cfg.fast_path_timeout_us, 400_000);
        assert_eq!(cfg.view_change_timeout_us, 2_500_000);
        assert_eq!(cfg.backup_collector_delay_us, 30_000);
        assert!(!cfg.early_beacon);
        assert_eq!(cfg.max_batch, 64);
        assert_eq!(p.period_s().unwrap(), 2);
        // Written out and read back: the same table.
        let text = toml::to_string(&p).unwrap();
        assert_eq!(toml::from_str::<ProtocolParams>(&text).unwrap(), p);
        assert_eq!(ms_to_us("x", 7).unwrap(), 7_000);
    }

    #[test]
    fn c_is_derived_from_n_when_absent() {
        let p = ProtocolParams::default();
        for (n, c) in [(4, 0), (6, 1), (8, 2), (64, 0), (32, 2)] {
            assert_eq!(p.collector_slack(n).unwrap(), c, "n = {n}");
            assert_eq!(ReplicaConfig::from_params(n, &p).unwrap().c, c);
        }
        assert!(p.collector_slack(2).is_err());
        // A fixed c that does not fit n is refused with the nearest sizes.
        let e = ProtocolParams::with_c(2).collector_slack(4).unwrap_err();
        assert!(e.to_string().contains("nearest valid n"), "{e}");
    }

    #[test]
    fn bad_values_are_named_errors() {
        let bad = |edit: fn(&mut ProtocolParams), n: u32| -> String {
            let mut p = ProtocolParams::default();
            edit(&mut p);
            ReplicaConfig::from_params(n, &p).unwrap_err().to_string()
        };
        let m = bad(|p| p.fast_path_timeout_ms = 0, 4);
        assert_eq!(m, "fast_path_timeout_ms must be positive");
        let m = bad(|p| p.view_change_timeout_ms = 0, 4);
        assert_eq!(m, "view_change_timeout_ms must be positive");
        let m = bad(|p| p.max_batch = 0, 4);
        assert_eq!(m, "max_batch must be positive");
        let m = bad(|p| p.election_lag = 0, 4);
        assert!(m.contains("election_lag = 0 outside [1, 64]"), "{m}");
        let m = bad(|p| p.election_lag = MAX_ELECTION_LAG + 1, 4);
        assert!(m.contains("election_lag = 65 outside"), "{m}");
        // n = 4, f = 1: t_b in [2, 3].
        let m = bad(|p| p.beacon_threshold = 4, 4);
        assert!(m.contains("beacon_threshold = 4 outside [2, 3]"), "{m}");
        let m = bad(|p| p.beacon_threshold = 1, 4);
        assert!(m.contains("beacon_threshold = 1 outside [2, 3]"), "{m}");
        let m = bad(|p| p.period = Period::from_millis(1_500).unwrap(), 4);
        assert!(
            m.contains("period_ms = 1500") && m.contains("whole seconds"),
            "{m}"
        );
        let m = bad(|p| p.view_change_timeout_ms = u64::MAX, 4);
        assert!(
            m.contains("view_change_timeout_ms") && m.contains("overflow"),
            "{m}"
        );
        let m = bad(
            |p| p.period = Period::from_micros((u64::from(u32::MAX) + 1) * US_PER_S),
            4,
        );
        assert!(m.contains("period_ms") && m.contains("u32"), "{m}");
        // A replica's settings edited by hand are checked alike.
        let m = ReplicaConfig::new(4, 0)
            .unwrap()
            .with(|s| s.period = Period::from_millis(1_500).unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            m.starts_with("period_us = 1500ms: must be whole seconds"),
            "{m}"
        );
        // In a table: too long for microseconds, refused as it is read.
        let e = toml::from_str::<ProtocolParams>("period_ms = 9223372036854775807")
            .unwrap_err()
            .to_string();
        assert!(e.contains("period_ms") && e.contains("overflow"), "{e}");
        let m = bad(|p| p.c = Some(1), 4);
        assert!(m.contains("not 3f + 2c + 1"), "{m}");
        // Unknown keys are refused by name.
        let e = toml::from_str::<ProtocolParams>("fast_path_timeout = 5").unwrap_err();
        assert!(e.to_string().contains("fast_path_timeout"), "{e}");
    }
}
