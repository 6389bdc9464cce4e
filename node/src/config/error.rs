//! Why a `node.toml` is refused: one variant per check of
//! [`NodeConfig::validate`](super::NodeConfig::validate), naming the field and
//! the value that failed it.

use crate::limits::LimitsError;
use beacon::SchemeId;
use libp2p::PeerId;
use std::path::PathBuf;

/// Why a node's configuration is invalid ([`crate::NodeError::Config`]).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file cannot be read.
    #[error("config: reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not TOML, or not a node config (a missing or unknown
    /// field, a value of the wrong type).
    #[error("config: {}: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser found.
        source: toml::de::Error,
    },
    /// `[network] scheme` names a scheme that cannot sign beacons.
    #[error(
        "config: scheme {scheme} cannot sign beacons (use one of {})",
        signing_schemes()
    )]
    SchemeCannotSign {
        /// The scheme named.
        scheme: SchemeId,
    },
    /// `[network] scheme` names no scheme.
    #[error("config: unknown scheme {scheme:?} (use one of {})", signing_schemes())]
    UnknownScheme {
        /// The text of the field.
        scheme: String,
    },
    /// No `[[peers]]` table.
    #[error("config: no [[peers]] listed")]
    NoPeers,
    /// A peer's `index` is not below the number of peers.
    #[error(
        "config: peer index {index} out of range: {peers} peers are listed, indices must be 0..{peers}"
    )]
    PeerIndexOutOfRange {
        /// The index.
        index: u32,
        /// How many peers are listed.
        peers: u32,
    },
    /// A peer's `peer_id` is not a peer ID.
    #[error("config: peer {index}: bad peer_id {peer_id:?}: {source}")]
    BadPeerId {
        /// The peer's index.
        index: u32,
        /// The text of the field.
        peer_id: String,
        /// What the parser found.
        source: libp2p::identity::ParseError,
    },
    /// A peer's `address` is not a multiaddress.
    #[error("config: peer {index}: bad address {address:?}: {source}")]
    BadPeerAddress {
        /// The peer's index.
        index: u32,
        /// The text of the field.
        address: String,
        /// What the parser found.
        source: libp2p::multiaddr::Error,
    },
    /// Two peers have the same `peer_id`.
    #[error("config: peer {index}: peer_id {peer} is listed twice")]
    DuplicatePeerId {
        /// The index of the second peer listed with it.
        index: u32,
        /// The peer ID.
        peer: PeerId,
    },
    /// Two peers have the same `index`.
    #[error("config: peer index {index} is listed twice")]
    DuplicatePeerIndex {
        /// The index.
        index: u32,
    },
    /// `[node] index` is not among the peers.
    #[error("config: node.index {index} is not among the {peers} peers")]
    NodeIndexOutOfRange {
        /// The index.
        index: u32,
        /// How many peers are listed.
        peers: u32,
    },
    /// `[network] members` is not in `1..=peers`.
    #[error(
        "config: [network] members = {members}: the genesis members are the first peers, so it must be in 1..={peers}"
    )]
    Members {
        /// The value of the field.
        members: u32,
        /// How many peers are listed.
        peers: u32,
    },
    /// `[node] listen` is not a multiaddress.
    #[error("config: bad listen address {address:?}: {source}")]
    BadListen {
        /// The text of the field.
        address: String,
        /// What the parser found.
        source: libp2p::multiaddr::Error,
    },
    /// `[node] http` is not an `ip:port` address.
    #[error("config: bad http address {address:?} (expected ip:port): {source}")]
    BadHttp {
        /// The text of the field.
        address: String,
        /// What the parser found.
        source: std::net::AddrParseError,
    },
    /// The `[node] identity` file does not exist.
    #[error(
        "config: identity key file {} is missing (create one with `sbft-beacon keys --out FILE`)",
        path.display()
    )]
    IdentityMissing {
        /// The file (resolved against the config's directory).
        path: PathBuf,
    },
    /// The consensus key file does not exist.
    #[error(
        "config: consensus key file {} is missing (`sbft-beacon keys --out FILE` writes one beside the identity)",
        path.display()
    )]
    ConsensusKeyMissing {
        /// The file (resolved against the config's directory).
        path: PathBuf,
    },
    /// A peer's consensus key or proof of possession is not hex.
    #[error("config: peer {index}: {field} is not hex: {source}")]
    BadConsensusKey {
        /// The peer's index.
        index: u32,
        /// `consensus_key` or `possession`.
        field: &'static str,
        /// What the decoder found.
        source: hex::FromHexError,
    },
    /// A peer's consensus key is not a key of the scheme, or its proof of
    /// possession does not verify.
    #[error("config: peer {index}: its consensus key is refused: {source}")]
    ConsensusKeyRefused {
        /// The peer's index.
        index: u32,
        /// Why.
        source: beacon::Error,
    },
    /// This node's consensus key file holds another key than `[[peers]]`
    /// lists for it.
    #[error(
        "config: consensus key {} is not the consensus key peers[{index}] lists",
        path.display()
    )]
    ConsensusKeyMismatch {
        /// The key file.
        path: PathBuf,
        /// This node's index.
        index: u32,
    },
    /// The identity file's peer ID is not the one `[[peers]]` lists for
    /// this node.
    #[error(
        "config: identity {} has peer ID {found}, but peers[{index}] lists {listed}",
        path.display()
    )]
    IdentityMismatch {
        /// The identity file.
        path: PathBuf,
        /// Its peer ID.
        found: PeerId,
        /// This node's index.
        index: u32,
        /// The peer ID listed for it.
        listed: PeerId,
    },
    /// A peer ID embeds no ed25519 public key (a DKG member key).
    #[error("config: peer ID {peer} does not embed an ed25519 public key")]
    PeerKey {
        /// The peer ID.
        peer: PeerId,
    },
    /// The protocol parameters make no valid replica for `n` members.
    #[error(
        "config: {} {source} (n = {n} members)",
        if *from_network { "[network]" } else { "[protocol]" }
    )]
    Protocol {
        /// Whether they were read from the old `[network]` keys (a file
        /// without a `[protocol]` table).
        from_network: bool,
        /// The number of genesis members.
        n: u32,
        /// What is wrong with them.
        source: consensus::ConsensusError,
    },
    /// Both `[protocol]` and protocol keys of `[network]`.
    #[error(
        "config: protocol parameters in two places: move {} (the [network] keys are read only from files without a [protocol] table)",
        moved.join(", ")
    )]
    ProtocolInTwoPlaces {
        /// Each `[network]` key set, and its place in `[protocol]`.
        moved: Vec<String>,
    },
    /// The DKG parameters make no valid DKG.
    #[error(
        "config: {} {source}",
        if *from_network { "[network] dkg_phase_ms, dkg_dealers or dkg_attempts:" } else { "[dkg]" }
    )]
    Dkg {
        /// Whether they were read from the old `[network]` keys (a file
        /// without a `[dkg]` table).
        from_network: bool,
        /// What is wrong with them.
        source: consensus::ConsensusError,
    },
    /// Both `[dkg]` and DKG keys of `[network]`.
    #[error(
        "config: DKG parameters in two places: {} (the [network] keys are read only from files without a [dkg] table)",
        moved.join(", ")
    )]
    DkgInTwoPlaces {
        /// Each `[network]` key set, and its place in `[dkg]`.
        moved: Vec<String>,
    },
    /// `[network] genesis_time` is negative.
    #[error("config: genesis_time must not be negative (it is {genesis_time})")]
    NegativeGenesisTime {
        /// The value of the field.
        genesis_time: i64,
    },
    /// `[network] genesis_time` in microseconds does not fit 64 bits.
    #[error("config: genesis_time = {genesis_time} is too far in the future")]
    GenesisTooLate {
        /// The value of the field.
        genesis_time: u64,
    },
    /// `[network] genesis_seed` is not 32 bytes of hex.
    #[error("config: genesis_seed must be 64 hex digits, got {seed:?}")]
    GenesisSeed {
        /// The text of the field.
        seed: String,
    },
    /// `[network] id` is empty.
    #[error("config: network.id must not be empty")]
    EmptyNetworkId,
    /// A `[limits]` value is out of range.
    #[error(transparent)]
    Limits(#[from] LimitsError),
    /// The data directory holds a chain but no key material, and the node
    /// was not asked to join.
    #[error(
        "config: {} holds a chain but no key material: this member lost its keys. Start it with \
         `run --join`, and have the members reshare to a member list that includes it",
        data_dir.display()
    )]
    LostKeys {
        /// The data directory.
        data_dir: PathBuf,
    },
}

/// The schemes that sign beacons, for the messages that name them.
fn signing_schemes() -> String {
    SchemeId::SIGNING
        .iter()
        .map(SchemeId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
