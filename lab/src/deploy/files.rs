//! Who owns the files written: the user of this process, or the image's user
//! ([`IMAGE_UID`](super::IMAGE_UID)) where root wrote them (handed over with
//! [`chown_tree`]); and the output folder, which must be new or empty.

#[cfg(not(unix))]
use super::IMAGE_UID;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// The effective user and group of this process.
#[cfg(unix)]
pub(super) fn current_ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Elsewhere: the image's user (files are not handed over).
#[cfg(not(unix))]
pub(super) fn current_ids() -> (u32, u32) {
    (IMAGE_UID, IMAGE_UID)
}

/// Gives `path` and everything under it to `uid:gid`.
pub(super) fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<()> {
    #[cfg(unix)]
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .with_context(|| format!("handing {} to {uid}:{gid}", path.display()))?;
    if path.is_dir() {
        for entry in
            std::fs::read_dir(path).with_context(|| format!("reading {}", path.display()))?
        {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

/// Checks that `out` is absent or an empty directory, and creates it.
pub(super) fn fresh_dir(out: &Path) -> Result<()> {
    if out.exists() {
        let mut entries = std::fs::read_dir(out)
            .with_context(|| format!("--out {} is not a directory", out.display()))?;
        if entries.next().is_some() {
            bail!(
                "--out {} is not empty: a deployment holds identities and chains; choose a new directory",
                out.display()
            );
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))
}
