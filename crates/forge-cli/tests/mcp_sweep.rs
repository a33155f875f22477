//! `forge mcp serve` removes idle workspaces as `forge run` does (issue 20, point 1): a
//! workspace idle for longer than `workspaces.retention` (default 24 h) is removed at start, over
//! HTTP and over stdio; a recently used one stays. Real processes; nothing leaves loopback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent with two workspaces: one last used three days ago, one just now.
fn agent_with_workspaces(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::write(
        dir.join("forge.yaml"),
        "agent_id: sweep\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [example.org]\n",
    )
    .unwrap();
    let files = dir.join(".forge").join("files");
    let stale = files.join(format!("ws-{}", "a".repeat(32)));
    let fresh = files.join(format!("ws-{}", "b".repeat(32)));
    for ws in [&stale, &fresh] {
        std::fs::create_dir_all(ws).unwrap();
        std::fs::write(ws.join("report.txt"), "bytes").unwrap();
    }
    let touched = Command::new("touch")
        .args(["-d", "3 days ago"])
        .arg(stale.join("report.txt"))
        .arg(&stale)
        .status()
        .unwrap();
    assert!(touched.success());
    (stale, fresh)
}

/// Wait (bounded) until `path` is gone.
fn gone_within(path: &Path, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    !path.exists()
}

#[test]
fn mcp_serve_over_http_removes_idle_workspaces_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (stale, fresh) = agent_with_workspaces(dir.path());
    let mut child = forge_testkit::forge!()
        .current_dir(dir.path())
        .args(["mcp", "serve", "--transport", "http", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let _server = Killed(child);
    assert!(first.contains("http://"), "serving: {first:?}");
    assert!(
        gone_within(&stale, Duration::from_secs(10)),
        "the workspace idle for 3 days is removed"
    );
    assert!(
        fresh.join("report.txt").is_file(),
        "the recent workspace stays"
    );
}

#[test]
fn mcp_serve_over_stdio_removes_idle_workspaces_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (stale, fresh) = agent_with_workspaces(dir.path());
    // stdin stays open (piped, never written): the server runs until the test ends.
    let child = forge_testkit::forge!()
        .current_dir(dir.path())
        .args(["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _server = Killed(child);
    assert!(
        gone_within(&stale, Duration::from_secs(10)),
        "the workspace idle for 3 days is removed"
    );
    assert!(
        fresh.join("report.txt").is_file(),
        "the recent workspace stays"
    );
}
