//! Node identities: the libp2p ed25519 key pair a node authenticates with, stored
//! as hex of libp2p's protobuf encoding in a file only its owner can read.

use crate::NodeError;
use libp2p::identity::Keypair;
use libp2p::PeerId;
use std::io::Write as _;
use std::path::Path;

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename) with mode
/// 0600 on Unix.
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), NodeError> {
    let io = |e: std::io::Error| NodeError::Io(format!("writing {}: {e}", path.display()));
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
    let bytes = key
        .to_protobuf_encoding()
        .map_err(|e| NodeError::Identity(format!("encoding key: {e}")))?;
    write_private(path, format!("{}\n", hex::encode(bytes)).as_bytes())
}

/// Loads the identity in `path`.
pub fn load(path: &Path) -> Result<Keypair, NodeError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| NodeError::Identity(format!("reading {}: {e}", path.display())))?;
    let bytes = hex::decode(text.trim())
        .map_err(|e| NodeError::Identity(format!("{}: not a hex key file: {e}", path.display())))?;
    Keypair::from_protobuf_encoding(&bytes)
        .map_err(|e| NodeError::Identity(format!("{}: not a libp2p key: {e}", path.display())))
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
    fn garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.key");
        std::fs::write(&path, "zz").unwrap();
        assert!(matches!(load(&path), Err(NodeError::Identity(_))));
        std::fs::write(&path, "0011").unwrap();
        assert!(matches!(load(&path), Err(NodeError::Identity(_))));
        assert!(load(&dir.path().join("missing")).is_err());
    }
}
