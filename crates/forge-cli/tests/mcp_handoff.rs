//! `browser_handoff` over MCP for real (issue 24 point 3): the real `forge mcp serve --transport
//! http` process with Debian's Chromium behind the real egress proxy; the client is raw JSON-RPC
//! over HTTP (as mcp_serve.rs does), reading the tool call's SSE stream as it comes. The session
//! opens a loopback page that asks for a one-time code and calls `browser_handoff`. The test reads
//! the person's link from the notification the client got, redeems it (HTTP, keeping the cookie),
//! clicks the field, types the code it computed and presses Enter and Done through the hand-off
//! routes. The tool call returns "the person finished: ...", the page's server saw the code, and
//! the link is refused a second time. Over stdio the tool refuses at once.
//!
//! Skips (with a message) when Chromium is missing; fails instead when FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use forge_testkit::site::{Response, Site};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A page asking for a one-time code: its field fills the viewport, so a click anywhere on the
/// picture lands in it; Enter submits to /verify.
const CODE_PAGE: &str = r#"<!doctype html><html><head><title>Second factor</title>
<style>body{margin:0} #code{position:fixed;left:0;top:0;width:100vw;height:100vh;font-size:40px;border:0;margin:0;padding:0}</style>
</head><body><form action="/verify"><input id=code name=code aria-label="One-time code" placeholder="Enter the code we sent you"></form></body></html>"#;

/// Kills the child when dropped (a failing test must not leave forge running).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_agent(dir: &Path, site: SocketAddr) -> PathBuf {
    std::fs::create_dir_all(dir.join("skills/look")).expect("skill dir");
    std::fs::write(
        dir.join("skills/look/SKILL.md"),
        format!(
            "---\nname: look\ndescription: Look at the test page.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{site}\"]\n---\nOpen the page.\n"
        ),
    )
    .expect("SKILL.md");
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        "agent_id: handoff-mcp\nversion: 0.1.0\negress:\n  mode: allowlist\nbrowser:\n  handoff_timeout: 120s\n",
    )
    .expect("forge.yaml");
    cfg
}

/// Start `forge mcp serve --transport http` auditing to `audit`; its first stdout line gives the
/// URL.
fn start_http(cwd: &Path, audit: &Path) -> (Killed, u16) {
    let mut c = forge_testkit::forge!();
    c.current_dir(cwd)
        .args(["mcp", "serve", "--transport", "http", "--port", "0"])
        .arg("--audit-file")
        .arg(audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = c.spawn().expect("start forge mcp serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let first = BufReader::new(stdout)
        .lines()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("forge mcp serve printed nothing"));
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"));
    let port = url
        .trim_start_matches("http://")
        .split(['/', ':'])
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {url}"));
    (Killed(child), port)
}

/// De-chunk what has arrived of a chunked body (a partial last chunk is left out).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..eol]).into_owned();
        let Ok(size) = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
        else {
            break;
        };
        if size == 0 || raw.len() < eol + 2 + size + 2 {
            break;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[eol + 2 + size + 2..];
    }
    out
}

/// An MCP POST whose answer is read as it arrives.
struct Stream {
    s: tokio::net::TcpStream,
    buf: Vec<u8>,
}

impl Stream {
    async fn post(port: u16, session: Option<&str>, body: &str) -> Self {
        let req = forge_testkit::mcp::request_bytes(port, session, body);
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        s.write_all(req.as_bytes()).await.expect("write");
        Self { s, buf: Vec::new() }
    }

    /// The session's standalone stream (`GET /mcp`): messages not tied to a request (log
    /// messages) come here.
    async fn listen(port: u16, session: &str) -> Self {
        let req = format!(
            "GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\nmcp-session-id: {session}\r\n\r\n"
        );
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        s.write_all(req.as_bytes()).await.expect("write");
        Self { s, buf: Vec::new() }
    }

    fn head(&self) -> String {
        let end = self
            .buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(self.buf.len());
        String::from_utf8_lossy(&self.buf[..end]).into_owned()
    }

    /// The body so far (de-chunked when chunked).
    fn body(&self) -> String {
        let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            return String::new();
        };
        let raw = &self.buf[end + 4..];
        if self
            .head()
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            String::from_utf8_lossy(&dechunk(raw)).into_owned()
        } else {
            String::from_utf8_lossy(raw).into_owned()
        }
    }

    /// The JSON-RPC messages in the body so far (SSE `data:` lines or plain JSON).
    fn messages(&self) -> Vec<Value> {
        self.body()
            .lines()
            .map(|l| l.strip_prefix("data:").unwrap_or(l).trim().to_string())
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
            .collect()
    }

    /// Read until `done(messages)` holds or the answer ends; at most `limit`.
    async fn until(&mut self, limit: Duration, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut chunk = [0u8; 16 * 1024];
        loop {
            let m = self.messages();
            if done(&m) {
                return m;
            }
            match tokio::time::timeout_at(deadline, self.s.read(&mut chunk)).await {
                Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return self.messages(),
                Ok(Ok(n)) => self.buf.extend_from_slice(&chunk[..n]),
            }
        }
    }
}

/// Initialize a session declaring `capabilities`; its id.
async fn open_session(port: u16, capabilities: Value) -> String {
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities": capabilities,"clientInfo":{"name":"t","version":"1"}}});
    let mut s = Stream::post(port, None, &init.to_string()).await;
    let m = s
        .until(Duration::from_secs(60), |m| m.iter().any(|v| v["id"] == 1))
        .await;
    let head = s.head();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{m:?}");
    assert!(
        m.iter()
            .any(|v| v["id"] == 1 && v["result"]["capabilities"]["logging"].is_object()),
        "the server declares logging (its notices are log messages): {m:?}"
    );
    let id = forge_testkit::mcp::session_id(&head);
    let mut n = Stream::post(
        port,
        Some(&id),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    n.until(Duration::from_secs(10), |_| false).await;
    assert!(n.head().starts_with("HTTP/1.1 202"), "{}", n.head());
    id
}

/// A tool call started (its answer streams); `progress` adds a progress token.
async fn call(
    port: u16,
    session: &str,
    id: u64,
    name: &str,
    args: Value,
    progress: bool,
) -> Stream {
    let mut params = json!({"name": name, "arguments": args});
    if progress {
        params["_meta"] = json!({"progressToken": format!("p{id}")});
    }
    let req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    Stream::post(port, Some(session), &req.to_string()).await
}

/// The text of a tools/call result.
fn result_text(answer: &Value) -> String {
    answer["result"]["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// One HTTP/1.1 request to the server at `port`: (status, head, body).
async fn http(
    port: u16,
    method: &str,
    path: &str,
    cookie: Option<&str>,
    body: Option<&Value>,
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let cookie = cookie
        .map(|c| format!("cookie: {c}\r\n"))
        .unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\norigin: http://127.0.0.1:{port}\r\nconnection: close\r\ncontent-type: application/json\r\n{cookie}content-length: {}\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// A client without URL elicitation gets the link as a progress notice and a log message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_finishes_a_handoff_of_an_mcp_http_session() {
    if forge_testkit::require_browser("browser_handoff over MCP").is_none() {
        return;
    }
    handoff_over_http(false).await;
}

/// A client declaring URL-mode elicitation gets the link as an `elicitation/create` request on
/// the call's stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_with_url_elicitation_gets_the_handoff_link_as_an_elicitation() {
    if forge_testkit::require_browser("browser_handoff over MCP with elicitation").is_none() {
        return;
    }
    handoff_over_http(true).await;
}

async fn handoff_over_http(elicit: bool) {
    let site = Site::builder().max_connections(200).start(|r| {
        if r.path.starts_with("/verify") {
            Response::bare(
                200,
                "<!doctype html><title>Verified</title><h1>Code accepted</h1>",
            )
            .header("content-type", "text/html")
        } else {
            Response::bare(200, CODE_PAGE).header("content-type", "text/html")
        }
    });
    let dir = tempfile::tempdir().expect("tmp");
    write_agent(dir.path(), site.addr);
    let audit = dir.path().join("audit.ndjson");
    let (_forge, port) = start_http(dir.path(), &audit);
    let capabilities = if elicit {
        json!({"elicitation": {"url": {}}})
    } else {
        json!({})
    };
    let session = open_session(port, capabilities).await;

    let mut nav = call(
        port,
        &session,
        2,
        "browser_navigate",
        json!({"url": format!("http://{}/", site.addr)}),
        false,
    )
    .await;
    let m = nav
        .until(Duration::from_secs(90), |m| m.iter().any(|v| v["id"] == 2))
        .await;
    let nav_answer = m.iter().find(|v| v["id"] == 2).cloned().unwrap_or_default();
    assert_ne!(
        nav_answer["result"]["isError"], true,
        "navigate: {nav_answer}"
    );

    let (mut h, url) = if elicit {
        let mut h = call(
            port,
            &session,
            3,
            "browser_handoff",
            json!({"reason": "enter the one-time code sent to the user's phone"}),
            true,
        )
        .await;
        let m = h
            .until(Duration::from_secs(60), |m| {
                m.iter().any(|v| v["method"] == "elicitation/create")
            })
            .await;
        let req = m
            .iter()
            .find(|v| v["method"] == "elicitation/create")
            .unwrap_or_else(|| panic!("no elicitation request on the call's stream: {m:?}"));
        assert_eq!(req["params"]["mode"], "url", "{req}");
        assert!(
            req["params"]["elicitationId"]
                .as_str()
                .is_some_and(|i| i.starts_with("h-")),
            "the hand-off id: {req}"
        );
        assert!(
            req["params"]["message"]
                .as_str()
                .is_some_and(|t| t.contains("A person is needed")),
            "{req}"
        );
        assert!(
            !m.iter().any(|v| v["method"] == "notifications/progress"
                && v["params"]["message"]
                    .as_str()
                    .is_some_and(|t| t.contains("/handoff/t/"))),
            "with elicitation the link is not also a progress notice: {m:?}"
        );
        let url = req["params"]["url"].as_str().unwrap_or("").to_string();
        // The client shows it and answers accept.
        let answer = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept"}});
        let mut a = Stream::post(port, Some(&session), &answer.to_string()).await;
        a.until(Duration::from_secs(10), |_| false).await;
        assert!(a.head().starts_with("HTTP/1.1 202"), "{}", a.head());
        (h, url)
    } else {
        // The hand-off: the call waits; the link arrives as a progress notice on the call's stream
        // and as a log message on the session's standalone stream.
        let mut events = Stream::listen(port, &session).await;
        let mut h = call(
            port,
            &session,
            3,
            "browser_handoff",
            json!({"reason": "enter the one-time code sent to the user's phone"}),
            true,
        )
        .await;
        let m = h
            .until(Duration::from_secs(60), |m| {
                m.iter().any(|v| {
                    v["method"] == "notifications/progress"
                        && v["params"]["message"]
                            .as_str()
                            .is_some_and(|t| t.contains("/handoff/t/"))
                })
            })
            .await;
        let progress = m
            .iter()
            .find(|v| {
                v["params"]["message"]
                    .as_str()
                    .is_some_and(|t| t.contains("/handoff/t/"))
            })
            .unwrap_or_else(|| panic!("no progress notice with the link: {m:?}"));
        let logs = events
            .until(Duration::from_secs(30), |m| {
                m.iter().any(|v| v["method"] == "notifications/message")
            })
            .await;
        assert!(
            events.head().starts_with("HTTP/1.1 200"),
            "{}",
            events.head()
        );
        let log = logs
            .iter()
            .find(|v| v["method"] == "notifications/message")
            .unwrap_or_else(|| panic!("no log message with the link: {logs:?}"));
        assert_eq!(log["params"]["data"]["event"], "handoff", "{log}");
        assert_eq!(log["params"]["level"], "notice", "{log}");
        let url = log["params"]["data"]["url"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            progress["params"]["message"]
                .as_str()
                .is_some_and(|t| t.contains(&url) && t.contains("A person is needed")),
            "the progress notice carries the same link: {progress}"
        );
        (h, url)
    };
    let prefix = format!("http://127.0.0.1:{port}/handoff/t/");
    assert!(
        url.starts_with(&prefix),
        "the link is on this server: {url}"
    );
    assert!(
        !h.messages().iter().any(|v| v["id"] == 3),
        "the call waits for the person"
    );

    // The person: redeem the link (once), keep the cookie.
    let path = url.trim_start_matches(&format!("http://127.0.0.1:{port}"));
    let (status, head, body) = http(port, "GET", path, None, None).await;
    assert_eq!(status, 303, "{head}\n{body}");
    let page = header(&head, "location").unwrap_or("").to_string();
    assert!(
        page.starts_with("/handoff/h-") && page.ends_with('/'),
        "{head}"
    );
    let cookie = header(&head, "set-cookie")
        .and_then(|c| c.split(';').next())
        .unwrap_or("")
        .to_string();
    assert!(cookie.starts_with("forge_handoff="), "{head}");
    let (status, _, body) = http(port, "GET", &page, Some(&cookie), None).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("enter the one-time code"), "{body}");
    // Without the cookie, the page refuses.
    let (status, _, _) = http(port, "GET", &page, None, None).await;
    assert_eq!(status, 403);

    // The code the test computed, typed into the field through the input route.
    let code = format!(
        "{:06}",
        (std::process::id() as u64 * 7919 + port as u64) % 1_000_000
    );
    let input = format!("{page}input");
    for ev in [
        json!({"type": "click", "x": 50, "y": 50, "frame_w": 100, "frame_h": 100}),
        json!({"type": "text", "text": code}),
        json!({"type": "key", "key": "Enter"}),
    ] {
        let (status, _, body) = http(port, "POST", &input, Some(&cookie), Some(&ev)).await;
        assert_eq!(status, 200, "{ev}: {body}");
    }
    // The page's server sees the code (the form's submission), bounded wait.
    let want = format!("/verify?code={code}");
    let mut seen = false;
    for _ in 0..100 {
        if site.paths.lock().expect("paths").iter().any(|p| p == &want) {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        seen,
        "the site never got {want}: {:?}",
        site.paths.lock().expect("paths")
    );
    let (status, _, body) = http(
        port,
        "POST",
        &format!("{page}done"),
        Some(&cookie),
        Some(&json!({"note": "code entered"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let m = h
        .until(Duration::from_secs(60), |m| m.iter().any(|v| v["id"] == 3))
        .await;
    let answer = m
        .iter()
        .find(|v| v["id"] == 3)
        .unwrap_or_else(|| panic!("no answer to the hand-off call: {m:?}"));
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let text = result_text(answer);
    assert!(
        text.starts_with("the person finished: code entered"),
        "{text}"
    );
    assert!(
        text.contains("Code accepted"),
        "a fresh observation: {text}"
    );
    assert!(
        text.contains(&url),
        "the link is in the final text too: {text}"
    );

    // Audited with the MCP session as the task, the hand-off id and never the token.
    let token = url.rsplit('/').next().unwrap_or("").to_string();
    let log = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(
        !token.is_empty() && !log.contains(&token),
        "the token is never logged"
    );
    let ev: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let start = ev
        .iter()
        .find(|e| e["event"] == "handoff_start")
        .unwrap_or_else(|| panic!("no handoff_start: {ev:?}"));
    let id = page
        .trim_start_matches("/handoff/")
        .trim_end_matches('/')
        .to_string();
    assert_eq!(start["handoff"], id.as_str(), "{start}");
    assert!(
        start["task_id"]
            .as_str()
            .is_some_and(|t| t.starts_with("mcp-")),
        "{start}"
    );
    let end = ev
        .iter()
        .find(|e| e["event"] == "handoff_end")
        .unwrap_or_else(|| panic!("no handoff_end: {ev:?}"));
    assert_eq!(end["outcome"], "done", "{end}");
    assert_eq!(end["finished_by"], id.as_str(), "{end}");
    assert_eq!(end["opened"], true, "{end}");

    // The link works once, and the hand-off has ended: its page is gone too.
    let (status, _, body) = http(port, "GET", path, None, None).await;
    assert_eq!(status, 410, "{body}");
    let (status, _, _) = http(port, "GET", &page, Some(&cookie), None).await;
    assert_eq!(status, 403);
}

/// Over stdio no server shows the page: the tool refuses at once, saying where it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_the_handoff_refuses_at_once() {
    if forge_testkit::require_browser("browser_handoff over stdio MCP").is_none() {
        return;
    }
    let site = Site::builder()
        .max_connections(50)
        .start(|_| Response::bare(200, CODE_PAGE).header("content-type", "text/html"));
    let dir = tempfile::tempdir().expect("tmp");
    write_agent(dir.path(), site.addr);
    let mut c = forge_testkit::forge!();
    c.current_dir(dir.path())
        .args(["mcp", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = Killed(c.spawn().expect("start forge mcp serve (stdio)"));
    let mut stdin = child.0.stdin.take().expect("stdin");
    let stdout = child.0.stdout.take().expect("stdout");
    let nav = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url": format!("http://{}/", site.addr)}}});
    let hand = json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"browser_handoff","arguments":{"reason":"enter the code"}}});
    let answers = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut lines = BufReader::new(stdout).lines();
        let mut send = |v: &str| {
            stdin.write_all(v.as_bytes()).expect("write");
            stdin.write_all(b"\n").expect("write");
            stdin.flush().expect("flush");
        };
        send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#);
        let mut out = Vec::new();
        let mut wait_for = |id: u64, out: &mut Vec<Value>| {
            for _ in 0..1000 {
                let Some(Ok(l)) = lines.next() else { return };
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    let hit = v["id"] == id;
                    out.push(v);
                    if hit {
                        return;
                    }
                }
            }
        };
        wait_for(1, &mut out);
        send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        send(&nav.to_string());
        wait_for(2, &mut out);
        send(&hand.to_string());
        wait_for(3, &mut out);
        out
    })
    .await
    .expect("stdio client");
    let nav = answers
        .iter()
        .find(|v| v["id"] == 2)
        .cloned()
        .unwrap_or_default();
    assert_ne!(nav["result"]["isError"], true, "navigate: {nav}");
    let answer = answers
        .iter()
        .find(|v| v["id"] == 3)
        .unwrap_or_else(|| panic!("no answer: {answers:?}"));
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = result_text(answer);
    assert!(
        text.contains("no server shows hand-off pages here")
            && text.contains("forge mcp serve --transport http"),
        "{text}"
    );
}
