//! A task's files as artifacts: which names may be served, and reading one (a regular file, not
//! a symlink, at most [`MAX_SERVED_FILE_BYTES`]); [`ArtifactReadError`] says why not.

use std::path::Path;

/// Largest file served from the local files dir at `/artifacts/...` (the state store has its own
/// per-artifact cap).
pub(crate) const MAX_SERVED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Why `GET /artifacts/{task_id}/{name}` has nothing to give.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactReadError {
    /// The name (or task id) is not a plain file name: `/`, `\`, `..`, NUL, empty, too long.
    BadName(String),
    /// No such task, or the task has no such artifact.
    NotFound,
    /// The file is there but cannot be served (gone, a symlink, too large, unreadable).
    Unavailable(String),
}

/// Whether `name` is a plain file name that can be served: not empty, at most 255 bytes, no `/`,
/// `\`, `..` or NUL (nothing that could name another directory).
pub(crate) fn is_servable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.contains(['/', '\\', '\0'])
        && !name.contains("..")
}

/// Read a regular file that is not a symlink (opened with `O_NOFOLLOW`), at most
/// [`MAX_SERVED_FILE_BYTES`].
pub(super) fn read_plain_file(path: &Path) -> Result<Vec<u8>, ArtifactReadError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let gone = |e: std::io::Error| ArtifactReadError::Unavailable(format!("cannot read it: {e}"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(gone)?;
    let meta = f.metadata().map_err(gone)?;
    if !meta.is_file() {
        return Err(ArtifactReadError::Unavailable("not a regular file".into()));
    }
    if meta.len() > MAX_SERVED_FILE_BYTES {
        return Err(ArtifactReadError::Unavailable(format!(
            "{} bytes, over the {MAX_SERVED_FILE_BYTES}-byte limit for serving",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_SERVED_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(gone)?;
    Ok(bytes)
}
