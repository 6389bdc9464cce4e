//! `tle`'s files: standard input and output or named files, and an output
//! written to a temporary file beside it and renamed only once complete.

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub(super) fn is_stdio(path: &Option<PathBuf>) -> bool {
    path.as_deref().is_none_or(|p| p == Path::new("-"))
}

/// Writes through `write` into a temporary file beside `path`, renamed to
/// `path` only if `write` succeeds (nothing is created or truncated
/// otherwise). An existing file's permissions are kept; a new file gets
/// owner-only ones.
pub(super) fn write_atomically<T>(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<&std::fs::File>) -> Result<T>,
) -> Result<T> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = tempfile::Builder::new()
        .prefix(".tle-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    let value = {
        let mut w = std::io::BufWriter::new(tmp.as_file());
        let value = write(&mut w)?;
        w.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        value
    };
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("writing {}", path.display()))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // Best effort: the rename below matters, the mode is a courtesy.
        let _ = tmp.as_file().set_permissions(meta.permissions());
    }
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(value)
}

pub(super) fn open_input(input: &Option<PathBuf>) -> Result<Box<dyn Read>> {
    if is_stdio(input) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let path = input.as_deref().expect("not stdin");
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

pub(super) fn input_name(input: &Option<PathBuf>) -> String {
    if is_stdio(input) {
        "standard input".into()
    } else {
        input.as_deref().expect("not stdin").display().to_string()
    }
}
