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

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// The prefix of every workspace directory name; [`sweep`] touches nothing else.
const PREFIX: &str = "ws-";

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
    if std::fs::create_dir_all(&dir).is_ok() {
        touch(&dir);
    }
    dir
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
