//! Browser sessions that continue across the messages of an A2A conversation, and artifacts a
//! client fetches over HTTP: `forge run` (bound beyond loopback, so with a bearer token) with the
//! scripted model, real Chromium through the real egress proxy, a loopback site that counts visits
//! in a cookie, and the official A2A Python SDK as the client (`run_sessions_client.py`).
//!
//! - the second message of a context sees the first's page and cookie;
//! - a message with `metadata.forge.close_browser: true` closes the browser after its task, so the
//!   next starts fresh;
//! - with `browser.max_sessions: 1`, another context is refused with the cap error while the first
//!   context's browser is open, and `/readyz` says so; it is ready again once it is closed;
//! - an idle context's browser is closed by the timer (`browser.idle_timeout: 3s`), before any
//!   further message arrives;
//! - the state store records which replica holds the context's live browser while it is open, and
//!   not once it is closed (by close_browser or the idle timer);
//! - the first task's screenshot downloads from its FilePart URI with the token (PNG, the same
//!   bytes as the inline part), is refused without it, and `..`, an encoded `/` and a listing are
//!   refused.
//!
//! Skips when Chromium or the SDK is missing; fails instead when `FORGE_REQUIRE_BROWSER=1`.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use forge_testkit::site::{Response, Site};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// [`forge_testkit::require`] naming what is missing.
fn require(what: &str, ok: bool) -> bool {
    forge_testkit::require(
        ok,
        &format!("{what} is missing (scripts/install-deps.sh browser python)"),
    )
}

fn sdk_available() -> bool {
    forge_testkit::python_has("import a2a.client, httpx")
}

// Stops the server when the test ends, however it ends (SIGTERM first, so Chromium goes too).
use forge_testkit::cli::Terminating as Server;

/// A loopback site: `/visit` counts visits in a `visits` cookie and shows the cookie it got.
/// Bounded: at most 200 connections.
fn serve_visits() -> std::net::SocketAddr {
    Site::builder()
        .max_connections(200)
        .start(|r| {
            let before: Option<u32> = r
                .head
                .lines()
                .filter(|l| l.to_ascii_lowercase().starts_with("cookie:"))
                .flat_map(|l| l[7..].split(';').map(str::trim).collect::<Vec<_>>())
                .find_map(|c| c.strip_prefix("visits=").and_then(|v| v.parse().ok()));
            if r.path == "/visit" {
                let n = before.unwrap_or(0) + 1;
                let seen = before
                    .map(|b| format!("visits={b}"))
                    .unwrap_or_else(|| "none".into());
                let body = format!("<!doctype html><title>Visit {n}</title><h1>visit number {n}, cookie before: {seen}</h1>");
                Response::bare(200, body)
                    .header("content-type", "text/html")
                    .header("set-cookie", &format!("visits={n}; Path=/"))
            } else {
                Response::bare(404, Vec::new())
            }
        })
        .addr
}

/// A raw GET on `addr` with an exact (unnormalised) `path`: (status, body).
async fn get_raw(addr: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("answer within 30 s")
        .unwrap();
    let t = String::from_utf8_lossy(&buf).to_string();
    let status = t
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        status,
        t.split_once("\r\n\r\n")
            .map(|x| x.1)
            .unwrap_or("")
            .to_string(),
    )
}

fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_keeps_its_browser_until_closed_or_idle_and_its_screenshot_downloads() {
    if !require("Chromium", forge_browser::find_browser_binary().is_ok())
        || !require("a2a-sdk for python3", sdk_available())
    {
        return;
    }
    let site = serve_visits();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("skills/visit")).unwrap();
    std::fs::write(
        dir.path().join("skills/visit/SKILL.md"),
        format!("---\nname: visit\ndescription: Visit the test site.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{site}\"]\n---\nVisit the page.\n"),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!(
            "turns:\n  - tool_calls:\n      - {{name: browser_state, arguments: {{}}}}\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/visit\"}}}}\n  - tool_calls:\n      - {{name: browser_screenshot, arguments: {{}}}}\n  - text: \"START[{{{{result:browser_state|inner}}}}] NAV[{{{{result:browser_navigate|inner}}}}]\"\n"
        ),
    )
    .unwrap();
    let cfg = dir.path().join("forge.yaml");
    std::fs::write(
        &cfg,
        "agent_id: visits\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\negress:\n  mode: allowlist\nbrowser:\n  max_sessions: 1\n  idle_timeout: 3s\n",
    )
    .unwrap();
    let audit = dir.path().join("audit.ndjson");
    let token = "sessions-test-token-0123456789abcdef";
    let stderr_path = dir.path().join("stderr.txt");
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .env_remove("FORGE_PUBLIC_URL")
        .env("FORGE_RUNTIME_TOKEN", token)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--host", "0.0.0.0", "--port", "0", "--audit-file"])
        .arg(&audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()))
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    // The first line names the URL; the rest (the token line) is drained until forge exits, so
    // its later prints never meet a closed pipe.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let _ = tx.send(lines.next().and_then(Result::ok).unwrap_or_default());
        for _ in lines.by_ref() {}
    });
    let first = tokio::task::spawn_blocking(move || {
        rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default()
    })
    .await
    .unwrap();
    let port = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .and_then(|u| u.trim_end_matches('/').rsplit(':').next())
        .unwrap_or_else(|| {
            panic!(
                "no URL printed: {first:?}; stderr: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            )
        })
        .to_string();
    // The server listens on every interface; the client talks to it on loopback only.
    let addr = format!("127.0.0.1:{port}");
    let url = format!("http://{addr}/");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_sessions_client.py");
    let out = tokio::task::spawn_blocking({
        let (url, audit) = (url.clone(), audit.clone());
        let db = dir.path().join(".forge/state.db");
        move || {
            Command::new("python3")
                .arg(&script)
                .arg(&url)
                .arg(token)
                .arg(&audit)
                .arg(&db)
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "sdk client failed: {}\nforge stderr: {}",
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&stderr_path).unwrap_or_default()
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");
    let answer = |k: &str| seen[k]["answer"].as_str().unwrap_or("").to_string();
    let ctx = seen["first"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_string();

    // 1. A fresh context: a blank page, then the first visit without a cookie.
    let a1 = answer("first");
    let (start1, nav1) = a1.split_once("NAV[").expect("two parts");
    assert!(
        start1.starts_with("START[") && !start1.contains("visit number"),
        "{a1}"
    );
    assert!(nav1.contains("visit number 1, cookie before: none"), "{a1}");
    // With the cap of 1 taken by this context, the server is not ready for more browser work.
    assert_eq!(seen["ready_after_first"], 503, "{seen}");

    // 2. Another context is refused a browser while the first one's is open: the cap error.
    let other = answer("other");
    assert_ne!(seen["other"]["context"].as_str(), Some(ctx.as_str()));
    assert!(
        other.contains(
            "1 browser sessions are already open, the limit (forge.yaml browser.max_sessions)"
        ),
        "{other}"
    );

    // 3. The same context: the page the first task left, and its cookie.
    let a2 = answer("second");
    assert_eq!(seen["second"]["context"].as_str(), Some(ctx.as_str()));
    let (start2, nav2) = a2.split_once("NAV[").expect("two parts");
    assert!(
        start2.contains("visit number 1"),
        "the first task's page is still open: {a2}"
    );
    assert!(
        nav2.contains("visit number 2, cookie before: visits=1"),
        "{a2}"
    );
    // close_browser closed it after the task: the cap is free again.
    assert_eq!(seen["ready_after_second"], 200, "{seen}");

    // 4. After close_browser: fresh (no page, no cookie).
    let a3 = answer("third");
    let (start3, nav3) = a3.split_once("NAV[").expect("two parts");
    assert!(!start3.contains("visit number"), "{a3}");
    assert!(nav3.contains("visit number 1, cookie before: none"), "{a3}");

    // 5. The idle timer closed it before the fourth message was sent; the fourth starts fresh.
    assert_eq!(seen["idle_closed_before_fourth"], true, "{seen}");
    let a4 = answer("fourth");
    let (start4, nav4) = a4.split_once("NAV[").expect("two parts");
    assert!(!start4.contains("visit number"), "{a4}");
    assert!(nav4.contains("visit number 1, cookie before: none"), "{a4}");

    let ev = audit_events(&audit);
    let closes: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "browser_session_close" && e["session"] == ctx.as_str())
        .map(|e| e["reason"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(closes, vec!["close_browser", "idle"], "{closes:?}");

    // The store says which replica holds the live browser (a replica id), and nothing once closed.
    let replica = seen["replica_after_first"].as_str().unwrap_or("");
    assert!(replica.len() >= 32 && replica != "no row", "{seen}");
    assert_eq!(seen["replica_after_second"], Value::Null, "{seen}");
    assert_eq!(seen["replica_after_third"], replica, "{seen}");
    assert_eq!(seen["replica_after_idle"], Value::Null, "{seen}");

    // 6. The screenshot: an absolute http URI on the address the client used, served with the
    //    token (PNG, nosniff, the same bytes as the inline part), refused without it.
    let uri = seen["uri"].as_str().expect("a FilePart with a URI");
    let task_id = seen["first"]["task"]["id"].as_str().unwrap();
    assert!(
        uri.starts_with(&format!("{url}artifacts/{task_id}/")) && uri.ends_with(".png"),
        "{uri}"
    );
    let dl = &seen["download"];
    assert_eq!(dl["status"], 200, "{dl}");
    assert_eq!(dl["content_type"], "image/png", "{dl}");
    assert_eq!(dl["nosniff"], "nosniff", "{dl}");
    assert_eq!(dl["png"], true, "{dl}");
    assert_eq!(
        dl["same_as_inline"], true,
        "inline bytes match the download: {dl}"
    );
    assert_eq!(seen["download_without_token"], 401, "{seen}");

    // 7. Paths that could leave the task's files, and listings, are refused.
    let name = uri.rsplit('/').next().unwrap();
    let (ok, _) = get_raw(&addr, &format!("/artifacts/{task_id}/{name}"), Some(token)).await;
    assert_eq!(ok, 200);
    for bad in [
        format!("/artifacts/{task_id}/../../forge.yaml"),
        format!("/artifacts/{task_id}/..%2f..%2fforge.yaml"),
        format!("/artifacts/{task_id}/%2e%2e"),
        format!("/artifacts/{task_id}/a%5cb.png"),
        format!("/artifacts/..%2f{task_id}/{name}"),
    ] {
        let (status, body) = get_raw(&addr, &bad, Some(token)).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body.starts_with("refused"), "{bad}: {body}");
    }
    for missing in [
        format!("/artifacts/{task_id}/"),
        "/artifacts/".to_string(),
        format!("/artifacts/{task_id}/other.png"),
        format!("/artifacts/00000000-0000-0000-0000-000000000000/{name}"),
    ] {
        let (status, body) = get_raw(&addr, &missing, Some(token)).await;
        assert_eq!(status, 404, "{missing}: {body}");
        assert!(!body.contains(name), "no listing: {body}");
    }
    let (status, _) = get_raw(&addr, &format!("/artifacts/{task_id}/{name}"), None).await;
    assert_eq!(status, 401, "the token is required");
    drop(server);
}
