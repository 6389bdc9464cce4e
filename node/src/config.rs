//! The node's configuration file (`node.toml`): who this node is, where it
//! listens, the network it belongs to (every member and the protocol
//! parameters), and where it keeps its state. One type, validated on load.
//!
//! Relative paths are resolved against the directory of the config file.

use crate::NodeError;
use beacon::{NodeIndex, SchemeId};
use consensus::ReplicaConfig;
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
    /// The network: members and protocol parameters (identical on every member).
    pub network: NetworkSection,
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
    /// Extra collectors `c` (`f = (n - 2c - 1) / 3`, `n` = number of peers).
    #[serde(default)]
    pub c: u32,
    /// Seconds between rounds (0: back-to-back rounds).
    #[serde(default)]
    pub period: u32,
    /// Unix time (seconds) of round 1.
    #[serde(default)]
    pub genesis_time: i64,
    /// Hex of the 32-byte seed round 1 chains on (default: SHA-256 of `id`).
    #[serde(default)]
    pub genesis_seed: Option<String>,
    /// Longest wait of each DKG phase for silent members, in milliseconds (a
    /// phase ends as soon as everything it waits for is in).
    #[serde(default = "default_dkg_phase_ms")]
    pub dkg_phase_ms: u64,
    /// Smallest DKG committee (0: every member deals); the committee is drawn
    /// from the genesis seed and sized by the committee rule.
    #[serde(default)]
    pub dkg_dealers: u32,
    /// DKG attempts (fresh session, doubled phases) before the node gives up.
    #[serde(default = "default_dkg_attempts")]
    pub dkg_attempts: u32,
    /// How long to wait for every peer before starting the DKG with those present.
    #[serde(default = "default_peer_wait_ms")]
    pub peer_wait_ms: u64,
    /// Collector's fast-path wait in milliseconds.
    #[serde(default = "default_fast_path_ms")]
    pub fast_path_timeout_ms: u64,
    /// Base view-change timeout in milliseconds.
    #[serde(default = "default_view_change_ms")]
    pub view_change_timeout_ms: u64,
}

fn default_dkg_phase_ms() -> u64 {
    3_000
}
fn default_dkg_attempts() -> u32 {
    3
}
fn default_peer_wait_ms() -> u64 {
    60_000
}
/// Default fast-path timeout of a node (ms).
pub fn default_fast_path_ms() -> u64 {
    50
}
/// Default view-change timeout of a node (ms).
pub fn default_view_change_ms() -> u64 {
    1_000
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
    /// Members by index.
    pub peers: Vec<Peer>,
    /// Listen address.
    pub listen: Multiaddr,
    /// HTTP address.
    pub http: SocketAddr,
    /// Identity key file (absolute or relative to the working directory).
    pub identity: PathBuf,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Replica parameters.
    pub replica: ReplicaConfig,
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
        let scheme: SchemeId = match self.network.scheme.parse() {
            Ok(s @ (SchemeId::PedersenBlsChained | SchemeId::BlsChainedG1Rfc9380)) => s,
            Ok(other) => {
                return err(format!(
                    "scheme {other} cannot sign beacons (use pedersen-bls-chained or bls-chained-g1-rfc9380)"
                ))
            }
            Err(_) => {
                return err(format!(
                    "unknown scheme {:?} (use pedersen-bls-chained or bls-chained-g1-rfc9380)",
                    self.network.scheme
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
        let mut replica = ReplicaConfig::new(n, self.network.c)
            .map_err(|e| NodeError::Config(format!("n = {n}, c = {}: {e}", self.network.c)))?;
        replica.period_us = u64::from(self.network.period) * 1_000_000;
        replica.genesis_time_us = u64::try_from(self.network.genesis_time)
            .map_err(|_| NodeError::Config("genesis_time must not be negative".into()))?
            .saturating_mul(1_000_000);
        replica.genesis_seed = match &self.network.genesis_seed {
            Some(h) => hex::decode(h)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())
                .ok_or_else(|| {
                    NodeError::Config(format!("genesis_seed must be 64 hex digits, got {h:?}"))
                })?,
            None => Sha256::digest(self.network.id.as_bytes()).into(),
        };
        replica.fast_path_timeout_us = self.network.fast_path_timeout_ms * 1000;
        replica.view_change_timeout_us = self.network.view_change_timeout_ms * 1000;
        replica
            .validate()
            .map_err(|e| NodeError::Config(e.to_string()))?;
        self.limits.apply(&mut replica)?;
        if self.network.dkg_phase_ms == 0 {
            return err("dkg_phase_ms must be positive".into());
        }
        if self.network.id.is_empty() {
            return err("network.id must not be empty".into());
        }
        let data_dir = self.resolve(&self.node.data_dir);
        Ok(Validated {
            me: NodeIndex(self.node.index),
            scheme,
            peers,
            listen,
            http,
            identity,
            data_dir,
            replica,
            raw: self,
        })
    }
}

impl Validated {
    /// The DKG session identifier: the network id, scheme and every member's peer ID.
    pub fn dkg_session(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"sbft-beacon dkg session");
        h.update((self.raw.network.id.len() as u64).to_be_bytes());
        h.update(self.raw.network.id.as_bytes());
        h.update(self.scheme.as_str().as_bytes());
        for p in &self.peers {
            h.update(p.id.to_bytes());
        }
        h.finalize().into()
    }

    /// This node's own entry.
    pub fn me(&self) -> &Peer {
        &self.peers[self.me.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A valid 4-member config in `dir` (identity file created), as TOML text.
    fn valid(dir: &Path) -> String {
        let mut peers = String::new();
        for i in 0..4 {
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
