//! Workspaces: one files directory per unit of isolation (an A2A conversation, a task on its own,
//! an MCP session, one `forge run --once`, one `forge tool call` run), under the agent's files
//! dir (`.forge/files/<workspace-id>/`). The runtime picks the directory and hands it to tools in
//! their [`forge_tools::ToolContext`]; no tool computes a shared path itself.
//!
//! The id is made by forge: `ws-` and the first 32 hex digits of the SHA-256 of the unit's key
//! (the `contextId`, the task id, `mcp-<id>`, ...). A client-chosen string never becomes a path:
//! only its hash does, so `../x`, `/etc` or a very long id all give a plain 35-character name.
//!
//! Retention: a workspace idle (no use, no file written) for longer than `workspaces.retention`
//! (forge.yaml, default 24 h) is removed by [`sweep`]; artifacts live on in the task store.
//!
//! Artifacts are immutable once made: [`capture`] copies a file a tool just made, read once
//! (a regular file, not a symlink, at most [`MAX_CAPTURE_BYTES`]), into a content-addressed,
//! read-only copy `.forge/files/.artifacts/<sha256>/<name>` (outside every workspace, so no tool
//! lists or overwrites it) and records its SHA-256. A2A inline bytes, `/artifacts/{task}/{name}`,
//! the state store and MCP image content all read that copy, so a later overwrite or delete of
//! the workspace file changes nothing that was already reported.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// The prefix of every workspace directory name; [`sweep`] touches nothing else (but the
/// artifact copies).
const PREFIX: &str = "ws-";

/// The directory under the files dir that keeps the captured artifacts.
pub(crate) const ARTIFACTS_DIR: &str = ".artifacts";

/// Largest file captured as an artifact: the limit for serving one (a2a/files.rs); a larger file
/// is reported by path only, as before.
pub(crate) const MAX_CAPTURE_BYTES: u64 = crate::a2a::files::MAX_SERVED_FILE_BYTES;

/// A captured artifact: the immutable copy and the SHA-256 (hex) of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Captured {
    pub path: PathBuf,
    pub sha256: String,
    pub size: u64,
}

/// Capture `src` (a file a tool made under the files dir `root`) as artifact `name`: read it once
/// (`O_NOFOLLOW`, a regular file, at most [`MAX_CAPTURE_BYTES`]) and keep the bytes read-only at
/// `root/.artifacts/<sha256>/<name>`. `None` when `src` is outside the calling workspace `within`
/// (and is not an already captured copy), not a plain file, too large or unreadable, or `name` is
/// not a plain file name.
pub(crate) fn capture(root: &Path, within: &Path, src: &Path, name: &str) -> Option<Captured> {
    use std::io::{Read as _, Write as _};
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    if !crate::a2a::files::is_servable_name(name) {
        return None;
    }
    let root = root.canonicalize().ok()?;
    let real = src.canonicalize().ok()?;
    // Only the calling workspace's own files, or copies already captured: a tool's output names
    // the path, and a path into another conversation's workspace must not become this one's
    // artifact.
    let own = within
        .canonicalize()
        .ok()
        .is_some_and(|w| w.starts_with(&root) && real.starts_with(&w));
    if !own && !real.starts_with(root.join(ARTIFACTS_DIR)) {
        return None;
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(src)
        .ok()?;
    let meta = f.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_CAPTURE_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_CAPTURE_BYTES).read_to_end(&mut bytes).ok()?;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    let dir = root.join(ARTIFACTS_DIR).join(&sha256);
    std::fs::create_dir_all(&dir).ok()?;
    let path = dir.join(name);
    if std::fs::symlink_metadata(&path).is_err() {
        // Written under a temporary name and renamed, so a reader never sees half a file.
        let tmp = dir.join(format!(".{}.tmp", forge_state::new_id()));
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .ok()?;
        out.write_all(&bytes).ok()?;
        drop(out);
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444));
        std::fs::rename(&tmp, &path).ok()?;
    } else {
        touch(&dir);
    }
    Some(Captured {
        path,
        sha256,
        size: bytes.len() as u64,
    })
}

/// `name` made distinct from `taken`: `report.txt`, then `report-2.txt`, `report-3.txt`, ...
pub(crate) fn distinct_name(name: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t == name) {
        return name.to_string();
    }
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    (2..)
        .map(|n| format!("{stem}-{n}{ext}"))
        .find(|c| !taken.iter().any(|t| t == c))
        .unwrap_or_else(|| name.to_string())
}

/// The workspace id of the unit keyed `key`: `ws-` + 32 hex digits of SHA-256(key).
pub fn workspace_id(key: &str) -> String {
    let digest = Sha256::digest(key.as_bytes());
    format!("{PREFIX}{}", &hex::encode(digest)[..32])
}

/// The files directory of the unit keyed `key` under the agent's files dir `root`. Created (and
/// marked as used now, for retention) when possible; a failure here surfaces in the tool that
/// writes (it names the path).
pub fn workspace_dir(root: &Path, key: &str) -> PathBuf {
    let dir = root.join(workspace_id(key));
    prepare(&dir);
    dir
}

/// Create the workspace `dir` if needed and mark it as used now (for retention).
pub(crate) fn prepare(dir: &Path) {
    if std::fs::create_dir_all(dir).is_ok() {
        touch(dir);
    }
}

/// Mark `dir` as used now (its modification time), so the retention sweep keeps it.
fn touch(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Is `name` a workspace directory name (`ws-` + 32 lowercase hex digits)?
fn is_workspace_name(name: &str) -> bool {
    name.strip_prefix(PREFIX).is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The latest modification time of `path` and of everything under it (symlinks not followed).
fn last_used(path: &Path) -> Option<SystemTime> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let mut latest = meta.modified().ok()?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).ok()?.flatten() {
            if let Some(t) = last_used(&entry.path()) {
                latest = latest.max(t);
            }
        }
    }
    Some(latest)
}

/// Remove the workspaces under `root` idle for longer than `retention`; returns how many were
/// removed. Only directories named like a workspace are considered; anything else in `root` is
/// left alone.
pub fn sweep(root: &Path, retention: Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let now = SystemTime::now();
    let mut removed = 0;
    // Captured artifact copies idle as long go too (the task store keeps its own copy).
    if let Ok(blobs) = std::fs::read_dir(root.join(ARTIFACTS_DIR)) {
        for entry in blobs.flatten() {
            let path = entry.path();
            let idle = last_used(&path)
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default();
            if idle > retention && entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_workspace_name(name) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let idle = last_used(&path)
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        if idle > retention && std::fs::remove_dir_all(&path).is_ok() {
            tracing::info!(workspace = %name, idle_secs = idle.as_secs(), "workspace removed after its retention period");
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_forge_made_and_stable() {
        let a = workspace_id("ctx-1");
        assert_eq!(a, workspace_id("ctx-1"));
        assert_ne!(a, workspace_id("ctx-2"));
        assert!(is_workspace_name(&a), "{a}");
        for hostile in ["../../etc", "/etc/passwd", "a/b", "", &"x".repeat(5000)] {
            let id = workspace_id(hostile);
            assert!(is_workspace_name(&id), "{id}");
            assert!(!id.contains('/') && !id.contains(".."));
        }
    }

    #[test]
    fn captured_bytes_outlive_the_file_and_names_stay_distinct() {
        let root = tempfile::tempdir().expect("tempdir");
        let ws = workspace_dir(root.path(), "conv");
        let f = ws.join("report.txt");
        std::fs::write(&f, b"first").expect("write");
        let a = capture(root.path(), &ws, &f, "report.txt").expect("captured");
        assert_eq!(a.sha256, hex::encode(Sha256::digest(b"first")));
        std::fs::write(&f, b"second").expect("overwrite");
        assert_eq!(std::fs::read(&a.path).expect("copy"), b"first");
        std::fs::remove_file(&f).expect("rm");
        assert_eq!(std::fs::read(&a.path).expect("copy"), b"first");
        // Outside the files dir or a symlink: not captured.
        let outside = tempfile::tempdir().expect("tempdir");
        let o = outside.path().join("x.txt");
        std::fs::write(&o, b"x").expect("write");
        assert!(capture(root.path(), &ws, &o, "x.txt").is_none());
        // Another workspace's file: not this one's artifact.
        let other = workspace_dir(root.path(), "other-conv");
        std::fs::write(other.join("theirs.txt"), b"theirs").expect("write");
        assert!(capture(root.path(), &ws, &other.join("theirs.txt"), "theirs.txt").is_none());
        // An already captured copy can be captured again under another name.
        assert!(capture(root.path(), &ws, &a.path, "report-2.txt").is_some());
        std::os::unix::fs::symlink(&o, ws.join("l.txt")).expect("symlink");
        assert!(capture(root.path(), &ws, &ws.join("l.txt"), "l.txt").is_none());
        let taken = vec!["report.txt".to_string(), "report-2.txt".to_string()];
        assert_eq!(distinct_name("report.txt", &taken), "report-3.txt");
        assert_eq!(distinct_name("other.txt", &taken), "other.txt");
        assert_eq!(distinct_name("README", &["README".into()]), "README-2");
    }

    #[test]
    fn sweep_removes_only_idle_workspaces() {
        let root = tempfile::tempdir().expect("tempdir");
        let old = workspace_dir(root.path(), "old");
        std::fs::write(old.join("f.txt"), b"x").expect("write");
        let fresh = workspace_dir(root.path(), "fresh");
        let other = root.path().join("legacy.txt");
        std::fs::write(&other, b"keep").expect("write");
        let past = SystemTime::now() - Duration::from_secs(3600);
        for p in [old.join("f.txt"), old.clone()] {
            let f = std::fs::File::open(&p).expect("open");
            f.set_modified(past).expect("set mtime");
        }
        assert_eq!(sweep(root.path(), Duration::from_secs(60)), 1);
        assert!(!old.exists());
        assert!(fresh.exists());
        assert!(other.exists());
        // Used again: kept.
        assert_eq!(sweep(root.path(), Duration::from_secs(60)), 0);
    }
}
