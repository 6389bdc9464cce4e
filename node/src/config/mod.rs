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

mod error;

pub use error::ConfigError;

use crate::NodeError;
use beacon::multisig::ConsensusListing;
use beacon::{NodeIndex, Period, SchemeId};
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
    /// The consensus key file (default: `consensus.key` beside the identity,
    /// where `sbft-beacon keys` writes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus_key: Option<PathBuf>,
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
    /// Its consensus public key (hex, compressed; `sbft-beacon keys` prints
    /// it).
    pub consensus_key: String,
    /// The proof of possession of its consensus key (hex).
    pub possession: String,
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
    /// Its consensus key and proof of possession (checked at start, under
    /// the network's scheme).
    pub consensus: ConsensusListing,
}

/// A validated configuration with every field parsed.
#[derive(Clone, Debug)]
pub struct Validated {
    /// The file as read.
    pub raw: NodeConfig,
    /// This node's index.
    pub me: NodeIndex,
    /// The consensus key file (resolved).
    pub consensus_key: PathBuf,
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
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cfg: NodeConfig = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
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
        let scheme: SchemeId = match self.network.scheme.parse() {
            Ok(s) if SchemeId::SIGNING.contains(&s) => s,
            Ok(other) => return Err(ConfigError::SchemeCannotSign { scheme: other }.into()),
            Err(_) => {
                let scheme = self.network.scheme.clone();
                return Err(ConfigError::UnknownScheme { scheme }.into());
            }
        };
        let n = self.peers.len() as u32;
        if n == 0 {
            return Err(ConfigError::NoPeers.into());
        }
        let mut peers: Vec<Option<Peer>> = vec![None; n as usize];
        let mut ids = BTreeSet::new();
        for p in &self.peers {
            let index = p.index;
            if index >= n {
                return Err(ConfigError::PeerIndexOutOfRange { index, peers: n }.into());
            }
            let id: PeerId = p.peer_id.parse().map_err(|source| ConfigError::BadPeerId {
                index,
                peer_id: p.peer_id.clone(),
                source,
            })?;
            let address: Multiaddr =
                p.address
                    .parse()
                    .map_err(|source| ConfigError::BadPeerAddress {
                        index,
                        address: p.address.clone(),
                        source,
                    })?;
            if !ids.insert(id) {
                return Err(ConfigError::DuplicatePeerId { index, peer: id }.into());
            }
            let slot = &mut peers[index as usize];
            if slot.is_some() {
                return Err(ConfigError::DuplicatePeerIndex { index }.into());
            }
            let hex_field = |field: &'static str, text: &str| -> Result<Vec<u8>, NodeError> {
                hex::decode(text).map_err(|source| {
                    ConfigError::BadConsensusKey {
                        index,
                        field,
                        source,
                    }
                    .into()
                })
            };
            let consensus = ConsensusListing {
                public_key: hex_field("consensus_key", &p.consensus_key)?,
                possession: hex_field("possession", &p.possession)?,
            };
            *slot = Some(Peer {
                index: NodeIndex(p.index),
                id,
                address,
                consensus,
            });
        }
        let peers: Vec<Peer> = peers.into_iter().flatten().collect();
        if self.node.index >= n {
            let index = self.node.index;
            return Err(ConfigError::NodeIndexOutOfRange { index, peers: n }.into());
        }
        let parties = n;
        let n = match self.network.members {
            None => parties,
            Some(m) if (1..=parties).contains(&m) => m,
            Some(members) => {
                return Err(ConfigError::Members {
                    members,
                    peers: parties,
                }
                .into())
            }
        };
        let listen: Multiaddr =
            self.node
                .listen
                .parse()
                .map_err(|source| ConfigError::BadListen {
                    address: self.node.listen.clone(),
                    source,
                })?;
        let http: SocketAddr = self
            .node
            .http
            .parse()
            .map_err(|source| ConfigError::BadHttp {
                address: self.node.http.clone(),
                source,
            })?;
        let identity = self.resolve(&self.node.identity);
        if !identity.is_file() {
            return Err(ConfigError::IdentityMissing { path: identity }.into());
        }
        let consensus_key = match &self.node.consensus_key {
            Some(path) => self.resolve(path),
            None => crate::identity::consensus_key_beside(&identity),
        };
        if !consensus_key.is_file() {
            return Err(ConfigError::ConsensusKeyMissing {
                path: consensus_key,
            }
            .into());
        }
        let protocol = self.protocol_params()?;
        let mut replica = ReplicaConfig::from_params(n, &protocol)
            .map_err(|source| ConfigError::Protocol {
                from_network: self.protocol.is_none(),
                n,
                source,
            })?
            .settings();
        let genesis_time = u64::try_from(self.network.genesis_time).map_err(|_| {
            ConfigError::NegativeGenesisTime {
                genesis_time: self.network.genesis_time,
            }
        })?;
        replica.genesis_time_us = beacon::time::secs_to_us(genesis_time)
            .ok_or(ConfigError::GenesisTooLate { genesis_time })?;
        replica.genesis_seed = match &self.network.genesis_seed {
            Some(h) => hex::decode(h)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| ConfigError::GenesisSeed { seed: h.clone() })?,
            None => Sha256::digest(self.network.id.as_bytes()).into(),
        };
        let replica = self.limits.apply(replica).map_err(ConfigError::from)?;
        let (dkg, moved) = self.dkg_params()?;
        // The DKG the node will run (its session is known once validated).
        replica
            .dkg_config([0; 32], &dkg)
            .map_err(|source| ConfigError::Dkg {
                from_network: self.dkg.is_none(),
                source,
            })?;
        if self.network.id.is_empty() {
            return Err(ConfigError::EmptyNetworkId.into());
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
            consensus_key,
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
            Some(_) => Err(ConfigError::DkgInTwoPlaces { moved }.into()),
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
            Some(_) => Err(ConfigError::ProtocolInTwoPlaces { moved }.into()),
            None => {
                let defaults = ProtocolParams::default();
                Ok(ProtocolParams {
                    c: network.c,
                    period: network.period.map_or(defaults.period, Period::from_secs),
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
mod tests;
