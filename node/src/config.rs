//! The node's configuration file (`node.toml`): who this node is, where it
//! listens, the network it belongs to (`[network]` and every member), the
//! protocol parameters (`[protocol]`), and where it keeps its state. One type,
//! validated on load.
//!
//! `[protocol]` is [`consensus::ProtocolParams`], the table of the simulator's
//! scenarios: a scenario's table pasted here gives the node the replica config
//! the simulator ran (`ReplicaConfig::from_params`, one function for both).
//! Files written before that table keep loading: without a `[protocol]`
//! table, the old `[network]` keys `c`, `period` (seconds),
//! `fast_path_timeout_ms` and `view_change_timeout_ms` are read into it
//! (everything else at its default); a file with a `[protocol]` table and any
//! of those keys in `[network]` is refused with a message naming the new place.
//!
//! Relative paths are resolved against the directory of the config file.

use crate::NodeError;
use beacon::{NodeIndex, SchemeId};
use consensus::{DkgParams, ProtocolParams, ReplicaConfig};
use libp2p::{Multiaddr, PeerId};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A node's configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node.
    pub node: NodeSection,
    /// The network's identity, genesis and DKG (identical on every member).
    pub network: NetworkSection,
    /// Protocol parameters (identical on every member); absent in files
    /// written before this table, which set some of them in `[network]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolParams>,
    /// DKG parameters (identical on every member): the simulator's `[dkg]`
    /// table, the same names and defaults; absent in files written before
    /// this table, which set them in `[network]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkg: Option<DkgParams>,
    /// Every member, this node included.
    pub peers: Vec<PeerEntry>,
    /// Resource limits (every field has a default; written only when changed).
    #[serde(
        default,
        skip_serializing_if = "crate::limits::LimitsSection::is_default"
    )]
    pub limits: crate::limits::LimitsSection,
    /// The directory the config was read from (relative paths start there).
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// This node's own settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeSection {
    /// Member index (0-based; must appear in `peers`).
    pub index: u32,
    /// The libp2p identity key file (`sbft-beacon keys` writes one).
    pub identity: PathBuf,
    /// libp2p listen address, e.g. `/ip4/127.0.0.1/tcp/9000`.
    pub listen: String,
    /// HTTP API address, e.g. `127.0.0.1:8000`.
    pub http: String,
    /// Directory of the key material and the chain database.
    pub data_dir: PathBuf,
}

/// Parameters every member shares.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSection {
    /// Network name (also separates DKG sessions of different networks).
    pub id: String,
    /// Signature scheme: `pedersen-bls-chained` or `bls-chained-g1-rfc9380`.
    pub scheme: String,
    /// Unix time (seconds) of round 1.
    #[serde(default)]
    pub genesis_time: i64,
    /// Hex of the 32-byte seed round 1 chains on (default: SHA-256 of `id`).
    #[serde(default)]
    pub genesis_seed: Option<String>,
    /// Old place of `[dkg] phase_timeout_ms`; read, with a warning, only from
    /// files without `[dkg]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkg_phase_ms: Option<u64>,
    /// Old place of `[dkg] dealers`; read, with a warning, only from files
    /// without `[dkg]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkg_dealers: Option<u32>,
    /// Old place of `[dkg] max_attempts`; read, with a warning, only from
    /// files without `[dkg]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dkg_attempts: Option<u32>,
    /// How long to wait for every peer before starting the DKG with those present.
    #[serde(default = "default_peer_wait_ms")]
    pub peer_wait_ms: u64,
    /// The genesis members: `[[peers]]` `0..members` run the DKG at start-up;
    /// the peers after them are parties that may join later through a
    /// resharing (`run --join`). Default: every peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<u32>,
    /// Old place of `[protocol] c`, read only from files without `[protocol]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c: Option<u32>,
    /// Old place of `[protocol] period_ms`, in seconds; read only from files
    /// without `[protocol]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u32>,
    /// Old place of `[protocol] fast_path_timeout_ms`; read only from files
    /// without `[protocol]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fast_path_timeout_ms: Option<u64>,
    /// Old place of `[protocol] view_change_timeout_ms`; read only from files
    /// without `[protocol]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view_change_timeout_ms: Option<u64>,
}

fn default_peer_wait_ms() -> u64 {
    60_000
}
/// One member of the network.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerEntry {
    /// Member index.
    pub index: u32,
    /// Its libp2p peer ID.
    pub peer_id: String,
    /// Where it listens (libp2p multiaddress).
    pub address: String,
}

/// A peer with its parsed identity and address.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Member index.
    pub index: NodeIndex,
    /// libp2p peer ID.
    pub id: PeerId,
    /// Listen address.
    pub address: Multiaddr,
}

/// A validated configuration with every field parsed.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The file as read.
    pub raw: NodeConfig,
    /// This node's index.
    pub me: NodeIndex,
    /// Scheme.
    pub scheme: SchemeId,
    /// Every party the transport reaches, by index (the directory): the
    /// genesis members first, then parties that may join later.
    pub peers: Vec<Peer>,
    /// How many of `peers` are genesis members (`[network] members`).
    pub genesis_members: u32,
    /// Listen address.
    pub listen: Multiaddr,
    /// HTTP address.
    pub http: SocketAddr,
    /// Identity key file (absolute or relative to the working directory).
    pub identity: PathBuf,
    /// Data directory.
    pub data_dir: PathBuf,
    /// The protocol parameters in force (`[protocol]`, or the old `[network]`
    /// keys of a file without it).
    pub protocol: ProtocolParams,
    /// Replica parameters.
    pub replica: ReplicaConfig,
    /// The DKG parameters in force (`[dkg]`, or the old `[network]` keys of
    /// a file without it).
    pub dkg: DkgParams,
    /// What the file should change: old keys read from their old place
    /// (the node logs each at start).
    pub warnings: Vec<String>,
}

impl NodeConfig {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Validated, NodeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| NodeError::Config(format!("reading {}: {e}", path.display())))?;
        let mut cfg: NodeConfig = toml::from_str(&text)
            .map_err(|e| NodeError::Config(format!("{}: {e}", path.display())))?;
        cfg.base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        cfg.validate()
    }

    fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir.join(p)
        }
    }

    /// Checks every field and parses addresses, IDs and parameters.
    pub fn validate(self) -> Result<Validated, NodeError> {
        let err = |m: String| Err(NodeError::Config(m));
        let signing = || {
            SchemeId::SIGNING
                .iter()
                .map(SchemeId::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let scheme: SchemeId = match self.network.scheme.parse() {
            Ok(s) if SchemeId::SIGNING.contains(&s) => s,
            Ok(other) => {
                return err(format!(
                    "scheme {other} cannot sign beacons (use one of {})",
                    signing()
                ))
            }
            Err(_) => {
                return err(format!(
                    "unknown scheme {:?} (use one of {})",
                    self.network.scheme,
                    signing()
                ))
            }
        };
        let n = self.peers.len() as u32;
        if n == 0 {
            return err("no [[peers]] listed".into());
        }
        let mut peers: Vec<Option<Peer>> = vec![None; n as usize];
        let mut ids = BTreeSet::new();
        for p in &self.peers {
            if p.index >= n {
                return err(format!(
                    "peer index {} out of range: {n} peers are listed, indices must be 0..{n}",
                    p.index
                ));
            }
            let id: PeerId = p.peer_id.parse().map_err(|e| {
                NodeError::Config(format!(
                    "peer {}: bad peer_id {:?}: {e}",
                    p.index, p.peer_id
                ))
            })?;
            let address: Multiaddr = p.address.parse().map_err(|e| {
                NodeError::Config(format!(
                    "peer {}: bad address {:?}: {e}",
                    p.index, p.address
                ))
            })?;
            if !ids.insert(id) {
                return err(format!("peer {}: peer_id {id} is listed twice", p.index));
            }
            let slot = &mut peers[p.index as usize];
            if slot.is_some() {
                return err(format!("peer index {} is listed twice", p.index));
            }
            *slot = Some(Peer {
                index: NodeIndex(p.index),
                id,
                address,
            });
        }
        let peers: Vec<Peer> = peers.into_iter().flatten().collect();
        if self.node.index >= n {
            return err(format!(
                "node.index {} is not among the {n} peers",
                self.node.index
            ));
        }
        let parties = n;
        let n = match self.network.members {
            None => parties,
            Some(m) if (1..=parties).contains(&m) => m,
            Some(m) => {
                return err(format!(
                    "[network] members = {m}: the genesis members are the first peers, so it must be in 1..={parties}"
                ))
            }
        };
        let listen: Multiaddr = self.node.listen.parse().map_err(|e| {
            NodeError::Config(format!("bad listen address {:?}: {e}", self.node.listen))
        })?;
        let http: SocketAddr = self.node.http.parse().map_err(|e| {
            NodeError::Config(format!(
                "bad http address {:?} (expected ip:port): {e}",
                self.node.http
            ))
        })?;
        let identity = self.resolve(&self.node.identity);
        if !identity.is_file() {
            return err(format!(
                "identity key file {} is missing (create one with `sbft-beacon keys --out FILE`)",
                identity.display()
            ));
        }
        let protocol = self.protocol_params()?;
        // Where the parameters were read from, for the error message.
        let table = match self.protocol {
            Some(_) => "[protocol]",
            None => "[network]",
        };
        let mut replica = ReplicaConfig::from_params(n, &protocol)
            .map_err(|e| NodeError::Config(format!("{table} {e} (n = {n} members)")))?
            .settings();
        let genesis_time = u64::try_from(self.network.genesis_time)
            .map_err(|_| NodeError::Config("genesis_time must not be negative".into()))?;
        replica.genesis_time_us = genesis_time.checked_mul(1_000_000).ok_or_else(|| {
            NodeError::Config(format!(
                "genesis_time = {genesis_time} is too far in the future"
            ))
        })?;
        replica.genesis_seed = match &self.network.genesis_seed {
            Some(h) => hex::decode(h)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    NodeError::Config(format!("genesis_seed must be 64 hex digits, got {h:?}"))
                })?,
            None => Sha256::digest(self.network.id.as_bytes()).into(),
        };
        let replica = self.limits.apply(replica)?;
        let (dkg, moved) = self.dkg_params()?;
        // The DKG the node will run (its session is known once validated).
        replica.dkg_config([0; 32], &dkg).map_err(|e| {
            NodeError::Config(match self.dkg {
                Some(_) => format!("[dkg] {e}"),
                None => format!("[network] dkg_phase_ms, dkg_dealers or dkg_attempts: {e}"),
            })
        })?;
        if self.network.id.is_empty() {
            return err("network.id must not be empty".into());
        }
        let data_dir = self.resolve(&self.node.data_dir);
        Ok(Validated {
            me: NodeIndex(self.node.index),
            scheme,
            peers,
            genesis_members: n,
            listen,
            http,
            identity,
            data_dir,
            protocol,
            replica,
            dkg,
            warnings: moved,
            raw: self,
        })
    }

    /// The DKG parameters of this file: `[dkg]`, or for a file written before
    /// that table, the defaults with the old `[network]` keys
    /// (`dkg_phase_ms`, `dkg_dealers`, `dkg_attempts`) read in, and a
    /// warning per old key naming its new place. Both at once is an error
    /// naming the keys to move.
    pub fn dkg_params(&self) -> Result<(DkgParams, Vec<String>), NodeError> {
        let network = &self.network;
        // (set in [network], old key, its place in [dkg]).
        let moved: Vec<String> = [
            (
                network.dkg_phase_ms.is_some(),
                "dkg_phase_ms",
                "phase_timeout_ms",
            ),
            (network.dkg_dealers.is_some(), "dkg_dealers", "dealers"),
            (
                network.dkg_attempts.is_some(),
                "dkg_attempts",
                "max_attempts",
            ),
        ]
        .into_iter()
        .filter(|(set, _, _)| *set)
        .map(|(_, old, new)| format!("[network] {old} is now [dkg] {new}"))
        .collect();
        match &self.dkg {
            Some(params) if moved.is_empty() => Ok((params.clone(), moved)),
            Some(_) => Err(NodeError::Config(format!(
                "DKG parameters in two places: {} (the [network] keys are read only from files without a [dkg] table)",
                moved.join(", ")
            ))),
            None => {
                let defaults = DkgParams::default();
                let params = DkgParams {
                    dealers: network.dkg_dealers.unwrap_or(defaults.dealers),
                    phase_timeout_ms: network.dkg_phase_ms.unwrap_or(defaults.phase_timeout_ms),
                    max_attempts: network.dkg_attempts.unwrap_or(defaults.max_attempts),
                };
                Ok((params, moved))
            }
        }
    }

    /// The protocol parameters of this file: `[protocol]`, or for a file
    /// written before that table, the defaults with the old `[network]` keys
    /// (`c`, `period` in seconds, `fast_path_timeout_ms`,
    /// `view_change_timeout_ms`) read in. Both at once is an error naming the
    /// keys to move.
    pub fn protocol_params(&self) -> Result<ProtocolParams, NodeError> {
        let network = &self.network;
        // (set in [network], old key, its place in [protocol]).
        let moved: Vec<String> = [
            (network.c.is_some(), "c", "c"),
            (network.period.is_some(), "period (s)", "period_ms (ms)"),
            (
                network.fast_path_timeout_ms.is_some(),
                "fast_path_timeout_ms",
                "fast_path_timeout_ms",
            ),
            (
                network.view_change_timeout_ms.is_some(),
                "view_change_timeout_ms",
                "view_change_timeout_ms",
            ),
        ]
        .into_iter()
        .filter(|(set, _, _)| *set)
        .map(|(_, old, new)| format!("[network] {old} to [protocol] {new}"))
        .collect();
        match &self.protocol {
            Some(params) if moved.is_empty() => Ok(params.clone()),
            Some(_) => Err(NodeError::Config(format!(
                "protocol parameters in two places: move {} (the [network] keys are read only from files without a [protocol] table)",
                moved.join(", ")
            ))),
            None => {
                let defaults = ProtocolParams::default();
                Ok(ProtocolParams {
                    c: network.c,
                    period_ms: network
                        .period
                        .map_or(defaults.period_ms, |s| u64::from(s) * 1_000),
                    fast_path_timeout_ms: network
                        .fast_path_timeout_ms
                        .unwrap_or(defaults.fast_path_timeout_ms),
                    view_change_timeout_ms: network
                        .view_change_timeout_ms
                        .unwrap_or(defaults.view_change_timeout_ms),
                    ..defaults
                })
            }
        }
    }
}

impl Validated {
    /// The DKG session identifier: the network id, scheme and every genesis
    /// member's peer ID.
    pub fn dkg_session(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon dkg session");
        h.update((self.raw.network.id.len() as u64).to_be_bytes());
        h.update(self.raw.network.id.as_bytes());
        h.update(self.scheme.as_str().as_bytes());
        for p in self.peers.iter().take(self.genesis_members as usize) {
            h.update(p.id.to_bytes());
        }
        h.finalize().into()
    }

    /// This node's own entry.
    pub fn me(&self) -> &Peer {
        &self.peers[self.me.0 as usize]
    }

    /// Whether this node is a genesis member (it runs the DKG at start-up).
    pub fn is_genesis_member(&self) -> bool {
        self.me.0 < self.genesis_members
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid 4-member config in `dir` (identity file created), as TOML text.
    fn valid(dir: &Path) -> String {
        valid_n(dir, 4)
    }

    /// A valid `n`-member config in `dir` (identity file created), as TOML
    /// text with no `[protocol]` table.
    fn valid_n(dir: &Path, n: u32) -> String {
        let mut peers = String::new();
        for i in 0..n {
            let key = crate::identity::generate();
            if i == 0 {
                crate::identity::save(&key, &dir.join("id.key")).unwrap();
            }
            peers += &format!(
                "[[peers]]\nindex = {i}\npeer_id = \"{}\"\naddress = \"/ip4/127.0.0.1/tcp/{}\"\n",
                crate::identity::peer_id(&key),
                9000 + i
            );
        }
        format!(
            "[node]\nindex = 0\nidentity = \"id.key\"\nlisten = \"/ip4/127.0.0.1/tcp/9000\"\nhttp = \"127.0.0.1:8000\"\ndata_dir = \"data\"\n\n[network]\nid = \"test\"\nscheme = \"pedersen-bls-chained\"\n\n{peers}"
        )
    }

    fn load(dir: &Path, text: &str) -> Result<Validated, NodeError> {
        let path = dir.join("node.toml");
        std::fs::write(&path, text).unwrap();
        NodeConfig::load(&path)
    }

    fn error(dir: &Path, text: &str) -> String {
        match load(dir, text) {
            Err(NodeError::Config(m)) => m,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    /// `text` with `table` (a `[protocol]` table) inserted before the peers.
    fn with_protocol(text: &str, table: &str) -> String {
        text.replacen("[[peers]]", &format!("{table}\n[[peers]]"), 1)
    }

    #[test]
    fn protocol_table_sets_the_replica() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // No table at all: the one set of defaults.
        let cfg = load(d, &valid(d)).unwrap();
        assert_eq!(cfg.protocol, ProtocolParams::default());
        assert_eq!(cfg.replica.fast_path_timeout_us, 50_000);
        assert_eq!(cfg.replica.view_change_timeout_us, 1_000_000);
        assert_eq!(cfg.replica.backup_collector_delay_us, 100_000);
        assert_eq!(cfg.replica.period_us, 0);
        // Every key, in milliseconds.
        let table = "[protocol]\nc = 0\nbeacon_threshold = 3\nelection_lag = 2\nperiod_ms = 3000\n\
                     fast_path_timeout_ms = 20\nview_change_timeout_ms = 700\n\
                     backup_collector_delay_ms = 40\nearly_beacon = false\nmax_batch = 8\n";
        let cfg = load(d, &with_protocol(&valid(d), table)).unwrap();
        let r = &cfg.replica;
        assert_eq!((r.n, r.f, r.c, r.beacon_threshold), (4, 1, 0, 3));
        assert_eq!(r.election_lag, 2);
        assert_eq!(r.period_us, 3_000_000);
        assert_eq!(r.fast_path_timeout_us, 20_000);
        assert_eq!(r.view_change_timeout_us, 700_000);
        assert_eq!(r.backup_collector_delay_us, 40_000);
        assert!(!r.early_beacon);
        assert_eq!(r.max_batch, 8);
        let key = vec![1; 48];
        let info = r.chain_info(key, SchemeId::PedersenBlsChained);
        assert_eq!(info.period, 3);
        assert_eq!(info.genesis_time, cfg.raw.network.genesis_time);
    }

    #[test]
    fn old_network_keys_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = valid(d).replace(
            "id = \"test\"",
            "id = \"test\"\nc = 0\nperiod = 2\nfast_path_timeout_ms = 30\nview_change_timeout_ms = 400",
        );
        let cfg = load(d, &old).unwrap();
        assert_eq!(cfg.protocol.c, Some(0));
        assert_eq!(cfg.protocol.period_ms, 2_000);
        assert_eq!(cfg.replica.period_us, 2_000_000);
        assert_eq!(cfg.replica.fast_path_timeout_us, 30_000);
        assert_eq!(cfg.replica.view_change_timeout_us, 400_000);
        // The rest at the defaults.
        assert_eq!(cfg.replica.backup_collector_delay_us, 100_000);
        // The same as the new table with the same values.
        let new = with_protocol(
            &valid(d),
            "[protocol]\nc = 0\nperiod_ms = 2000\nfast_path_timeout_ms = 30\nview_change_timeout_ms = 400\n",
        );
        let new_cfg = load(d, &new).unwrap();
        assert_eq!(new_cfg.protocol, cfg.protocol);
        assert_eq!(new_cfg.replica, cfg.replica);
        // Both places at once: refused, naming where each key goes.
        let both = with_protocol(&old, "[protocol]\nmax_batch = 8\n");
        let m = error(d, &both);
        assert!(
            m.contains("[network] period (s) to [protocol] period_ms (ms)")
                && m.contains("[network] fast_path_timeout_ms to [protocol] fast_path_timeout_ms"),
            "{m}"
        );
    }

    #[test]
    fn bad_protocol_values_are_config_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok = valid(d);
        for (table, expected) in [
            (
                "fast_path_timeout_ms = 0",
                "[protocol] fast_path_timeout_ms must be positive",
            ),
            (
                "view_change_timeout_ms = 0",
                "[protocol] view_change_timeout_ms must be positive",
            ),
            ("max_batch = 0", "[protocol] max_batch must be positive"),
            ("election_lag = 65", "election_lag = 65 outside [1, 64]"),
            (
                "beacon_threshold = 4",
                "beacon_threshold = 4 outside [2, 3]",
            ),
            ("period_ms = 500", "whole seconds"),
            ("c = 1", "not 3f + 2c + 1"),
            ("fast_path_timeout = 5", "unknown field `fast_path_timeout`"),
            (
                "view_change_timeout_ms = 18446744073709552",
                "view_change_timeout_ms",
            ),
        ] {
            let m = error(d, &with_protocol(&ok, &format!("[protocol]\n{table}\n")));
            assert!(m.contains(expected), "{table}: {m}");
        }
        // Old keys with bad values, too.
        let m = error(
            d,
            &ok.replace("id = \"test\"", "id = \"test\"\nview_change_timeout_ms = 0"),
        );
        assert!(m.contains("view_change_timeout_ms must be positive"), "{m}");
        let m = error(
            d,
            &ok.replace(
                "id = \"test\"",
                "id = \"test\"\ngenesis_time = 9223372036854775807",
            ),
        );
        assert!(m.contains("genesis_time"), "{m}");
        let m = error(
            d,
            &ok.replace(
                "id = \"test\"",
                "id = \"test\"\ndkg_phase_ms = 18446744073709552",
            ),
        );
        assert!(m.contains("dkg_phase_ms"), "{m}");
    }

    /// A scenario's `[protocol]` table pasted into `node.toml` gives the node
    /// the replica config the simulator builds for the same `n` (the genesis
    /// time and seed are each driver's own).
    #[test]
    fn scenario_table_gives_the_simulators_replica() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in ["default", "byzantine", "lossy", "crash-restart"] {
            let scenario = sim::SimConfig::load(name).unwrap();
            let text = sim::config::BUILT_IN
                .iter()
                .find(|(n, _)| *n == format!("sim/{name}.toml"))
                .unwrap()
                .1;
            let parsed: toml::Table = toml::from_str(text).unwrap();
            let mut table = toml::Table::new();
            table.insert("protocol".into(), parsed["protocol"].clone());
            table.insert("dkg".into(), parsed["dkg"].clone());
            let pasted = toml::to_string(&table).unwrap();
            assert!(
                pasted.contains("[protocol]") && pasted.contains("[dkg]"),
                "{pasted}"
            );
            let cfg = load(d, &with_protocol(&valid_n(d, scenario.nodes), &pasted)).unwrap();
            assert_eq!(cfg.protocol, scenario.protocol, "{name}");
            assert_eq!(cfg.dkg, scenario.dkg, "{name}: the same [dkg] table");
            let simulated = scenario
                .replica_config()
                .unwrap()
                .with(|s| {
                    s.genesis_seed = cfg.replica.genesis_seed;
                    s.genesis_time_us = cfg.replica.genesis_time_us;
                })
                .unwrap();
            assert_eq!(cfg.replica, simulated, "{name}");
        }
    }

    /// The example network's files (docs/operating.md) use the `[protocol]`
    /// and `[dkg]` tables.
    #[test]
    fn shipped_example_configs_load() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs/localnet-4");
        for i in 0..4 {
            let cfg = NodeConfig::load(&dir.join(format!("node-{i}/node.toml"))).unwrap();
            assert!(cfg.raw.protocol.is_some() && cfg.raw.network.c.is_none());
            assert_eq!(cfg.protocol, ProtocolParams::with_c(0));
            assert!(cfg.raw.dkg.is_some() && cfg.warnings.is_empty());
            assert_eq!(cfg.dkg.phase_timeout_ms, 1_000);
        }
    }

    /// `[dkg]` has the simulator's names and defaults; the old `[network]`
    /// keys still load, each with a warning naming its new place; both at
    /// once, an unknown key or a zero phase are errors naming the key.
    #[test]
    fn dkg_table_and_its_old_keys() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let cfg = load(d, &valid(d)).unwrap();
        assert_eq!(cfg.dkg, DkgParams::default());
        assert!(cfg.warnings.is_empty());
        let table = "[dkg]\ndealers = 2\nphase_timeout_ms = 700\nmax_attempts = 5\n";
        let cfg = load(d, &with_protocol(&valid(d), table)).unwrap();
        let expected = DkgParams {
            dealers: 2,
            phase_timeout_ms: 700,
            max_attempts: 5,
        };
        assert_eq!(cfg.dkg, expected);
        assert!(cfg.warnings.is_empty());
        let old = valid(d).replace(
            "id = \"test\"",
            "id = \"test\"\ndkg_dealers = 2\ndkg_phase_ms = 700\ndkg_attempts = 5",
        );
        let cfg = load(d, &old).unwrap();
        assert_eq!(cfg.dkg, expected);
        assert_eq!(
            cfg.warnings,
            vec![
                "[network] dkg_phase_ms is now [dkg] phase_timeout_ms",
                "[network] dkg_dealers is now [dkg] dealers",
                "[network] dkg_attempts is now [dkg] max_attempts",
            ]
        );
        let m = error(d, &with_protocol(&old, table));
        assert!(m.contains("DKG parameters in two places"), "{m}");
        assert!(
            m.contains("[network] dkg_phase_ms is now [dkg] phase_timeout_ms"),
            "{m}"
        );
        let m = error(
            d,
            &with_protocol(&valid(d), "[dkg]\nphase_timeout_ms = 0\n"),
        );
        assert!(m.contains("[dkg] phase_timeout_ms must be positive"), "{m}");
        let m = error(d, &with_protocol(&valid(d), "[dkg]\nphase_ms = 10\n"));
        assert!(m.contains("unknown field `phase_ms`"), "{m}");
    }

    #[test]
    fn valid_config_loads() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(dir.path(), &valid(dir.path())).unwrap();
        assert_eq!(cfg.replica.n, 4);
        assert_eq!(cfg.replica.f, 1);
        assert_eq!(cfg.peers.len(), 4);
        assert_eq!(cfg.data_dir, dir.path().join("data"));
        assert_eq!(cfg.dkg_session(), cfg.clone().dkg_session());
    }

    #[test]
    fn bad_configs_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok = valid(d);
        let m = error(
            d,
            &ok.replace("/ip4/127.0.0.1/tcp/9000\"\nhttp", "not-an-address\"\nhttp"),
        );
        assert!(m.contains("bad listen address"), "{m}");
        let m = error(d, &ok.replace("127.0.0.1:8000", "localhost"));
        assert!(m.contains("bad http address"), "{m}");
        let m = error(d, &ok.replace("pedersen-bls-chained", "rsa"));
        assert!(m.contains("unknown scheme"), "{m}");
        let m = error(d, &ok.replace("pedersen-bls-chained", "insecure-mock"));
        assert!(m.contains("cannot sign"), "{m}");
        let m = error(d, &ok.replace("id = \"test\"", "id = \"test\"\nc = 2"));
        assert!(
            m.contains("not 3f + 2c + 1") && m.contains("nearest valid n"),
            "{m}"
        );
        let m = error(
            d,
            &ok.replace("identity = \"id.key\"", "identity = \"nope.key\""),
        );
        assert!(
            m.contains("identity key file") && m.contains("missing"),
            "{m}"
        );
        let m = error(d, &ok.replace("index = 3", "index = 7"));
        assert!(m.contains("out of range"), "{m}");
        let m = error(d, &ok.replace("index = 3", "index = 2"));
        assert!(m.contains("listed twice"), "{m}");
        let m = error(d, &ok.replace("[node]\nindex = 0", "[node]\nindex = 9"));
        assert!(m.contains("not among"), "{m}");
        let m = error(d, &ok.replacen("peer_id = \"", "peer_id = \"x", 1));
        assert!(m.contains("bad peer_id"), "{m}");
        let m = error(d, &ok.replace("/tcp/9001", "/tcpx/9001"));
        assert!(m.contains("bad address"), "{m}");
        let m = error(
            d,
            &ok.replace("id = \"test\"", "id = \"test\"\ngenesis_seed = \"00\""),
        );
        assert!(m.contains("genesis_seed"), "{m}");
        let m = error(d, &ok.replace("id = \"test\"", "id = \"test\"\nbogus = 1"));
        assert!(m.contains("bogus"), "{m}");
        let m = error(d, &format!("{ok}\n[limits]\nbogus = 1\n"));
        assert!(m.contains("bogus"), "{m}");
        let m = error(d, &format!("{ok}\n[limits]\nhttp_concurrency = 0\n"));
        assert!(m.contains("http_concurrency"), "{m}");
        let cfg = load(d, &format!("{ok}\n[limits]\nmax_block_bytes = 200000\n")).unwrap();
        assert_eq!(cfg.replica.max_block_bytes, 200_000);
        let m = error(d, "[node]\n");
        assert!(m.contains("missing field"), "{m}");
    }
}
