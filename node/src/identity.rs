//! Node identities: the libp2p ed25519 key pair a node authenticates with, stored
//! as hex of libp2p's protobuf encoding in a file only its owner can read; and
//! the node's consensus key (a BLS secret key: its votes and view changes, in
//! every epoch it is a member of), stored as hex of its 32 bytes beside it.

use crate::config::ConfigError;
use crate::{FileOp, NodeError};
use beacon::dkg::relay::{SigningKey, VerifyingKey};
use beacon::multisig::ConsensusSecretKey;
use libp2p::identity::Keypair;
use libp2p::PeerId;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Why an identity key file cannot be written or read, or an identity
/// cannot serve as a DKG member key ([`crate::NodeError::Identity`]).
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The key pair cannot be encoded.
    #[error("identity: encoding key: {0}")]
    Encode(#[source] libp2p::identity::DecodingError),
    /// The key file cannot be read.
    #[error("identity: reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The key file is not hex.
    #[error("identity: {}: not a hex key file: {source}", path.display())]
    NotHex {
        /// The file.
        path: PathBuf,
        /// What the decoder found.
        source: hex::FromHexError,
    },
    /// The key file's bytes are not a libp2p key pair.
    #[error("identity: {}: not a libp2p key: {source}", path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// What the decoder found.
        source: libp2p::identity::DecodingError,
    },
    /// The identity is a key pair of another kind than ed25519.
    #[error("identity: the identity is not an ed25519 key")]
    NotEd25519,
    /// The identity's ed25519 secret is not 32 bytes.
    #[error("identity: ed25519 secret of the wrong length ({len} bytes, not 32)")]
    SecretLength {
        /// Its length.
        len: usize,
    },
    /// The consensus key file does not hold a consensus key.
    #[error("consensus key: {}: not a consensus key (64 hex digits of a non-zero scalar below the group order)", path.display())]
    NotAConsensusKey {
        /// The file.
        path: PathBuf,
    },
}

/// The file of the consensus key beside identity file `identity` (the same
/// folder, `consensus.key`): where `keys` writes it and a node looks for it
/// unless its config names another.
pub fn consensus_key_beside(identity: &Path) -> PathBuf {
    identity.with_file_name("consensus.key")
}

/// A new random consensus key.
pub fn generate_consensus() -> ConsensusSecretKey {
    ConsensusSecretKey::random(&mut rand::rngs::OsRng)
}

/// Saves consensus key `key` to `path` (mode 0600).
pub fn save_consensus(key: &ConsensusSecretKey, path: &Path) -> Result<(), NodeError> {
    write_private(
        path,
        format!("{}\n", hex::encode(key.to_bytes())).as_bytes(),
    )
}

/// Loads the consensus key in `path`.
pub fn load_consensus(path: &Path) -> Result<ConsensusSecretKey, NodeError> {
    let bytes = read_hex(path)?;
    let path = path.to_path_buf();
    let bytes: [u8; 32] = match bytes.try_into() {
        Ok(b) => b,
        Err(_) => return Err(IdentityError::NotAConsensusKey { path }.into()),
    };
    ConsensusSecretKey::from_bytes(&bytes)
        .map_err(|_| IdentityError::NotAConsensusKey { path }.into())
}

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename) with mode
/// 0600 on Unix.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), NodeError> {
    let io = |e: std::io::Error| NodeError::io(FileOp::Write, path, e);
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    file.sync_all().map_err(io)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(io)?;
    // The rename is durable only once the directory holding it is.
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io)?;
    }
    Ok(())
}

/// A new random identity.
pub fn generate() -> Keypair {
    Keypair::generate_ed25519()
}

/// Saves `key` to `path` (mode 0600).
pub fn save(key: &Keypair, path: &Path) -> Result<(), NodeError> {
    let bytes = key.to_protobuf_encoding().map_err(IdentityError::Encode)?;
    write_private(path, format!("{}\n", hex::encode(bytes)).as_bytes())
}

/// The bytes of a key file: hex, surrounding whitespace ignored.
fn read_hex(path: &Path) -> Result<Vec<u8>, NodeError> {
    let path = path.to_path_buf();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(source) => return Err(IdentityError::Read { path, source }.into()),
    };
    match hex::decode(text.trim()) {
        Ok(bytes) => Ok(bytes),
        Err(source) => Err(IdentityError::NotHex { path, source }.into()),
    }
}

/// Loads the identity in `path`.
pub fn load(path: &Path) -> Result<Keypair, NodeError> {
    let bytes = read_hex(path)?;
    let path = path.to_path_buf();
    Keypair::from_protobuf_encoding(&bytes)
        .map_err(|source| IdentityError::NotAKey { path, source }.into())
}

/// The member key of the DKG (signing its broadcasts and results): the ed25519
/// secret of the node identity itself, so that the public keys are the ones
/// embedded in the peers' IDs and the config needs no extra field.
pub fn member_key(key: &Keypair) -> Result<SigningKey, NodeError> {
    let ed = key
        .clone()
        .try_into_ed25519()
        .map_err(|_| IdentityError::NotEd25519)?;
    let secret = ed.secret();
    let secret: [u8; 32] = secret
        .as_ref()
        .try_into()
        .map_err(|_| IdentityError::SecretLength {
            len: secret.as_ref().len(),
        })?;
    Ok(SigningKey::from_bytes(&secret))
}

/// The DKG member public key of `peer`: the ed25519 key inside its
/// (identity-hashed) peer ID.
pub fn member_public_key(peer: &PeerId) -> Result<VerifyingKey, NodeError> {
    let bad = || NodeError::from(ConfigError::PeerKey { peer: *peer });
    let hash: &libp2p::multihash::Multihash<64> = peer.as_ref();
    if hash.code() != 0 {
        return Err(bad());
    }
    let public = libp2p::identity::PublicKey::try_decode_protobuf(hash.digest())
        .map_err(|_| bad())?
        .try_into_ed25519()
        .map_err(|_| bad())?;
    VerifyingKey::from_bytes(&public.to_bytes()).map_err(|_| bad())
}

/// The peer ID of `key`.
pub fn peer_id(key: &Keypair) -> PeerId {
    key.public().to_peer_id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("id.key");
        let key = generate();
        save(&key, &path).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(peer_id(&key), peer_id(&back));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn the_member_key_matches_the_peer_id() {
        let key = generate();
        let signing = member_key(&key).unwrap();
        let public = member_public_key(&peer_id(&key)).unwrap();
        assert_eq!(signing.verifying_key(), public);
    }

    #[test]
    fn garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, "zz").unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            matches!(e, NodeError::Identity(IdentityError::NotHex { .. })),
            "{e:?}"
        );
        assert!(e.to_string().contains("bad.key: not a hex key file"), "{e}");
        std::fs::write(&path, "0011").unwrap();
        let e = load(&path).unwrap_err();
        assert!(
            matches!(e, NodeError::Identity(IdentityError::NotAKey { .. })),
            "{e:?}"
        );
        let e = load(&dir.path().join("missing")).unwrap_err();
        assert!(
            matches!(&e, NodeError::Identity(IdentityError::Read { path, .. }) if path.ends_with("missing")),
            "{e:?}"
        );
    }
}
