//! The watch page's access rules on a real A2A server (real sockets, the scripted model, the
//! real `file_create`): without the token `/ui`, every data route it uses, the HAR ledger and
//! the artifact route answer 401; `/ui?token=` and the login form set an HttpOnly SameSite=Strict
//! cookie and redirect to a clean URL, and the cookie then opens everything; a request from a
//! page of another origin is refused (403) even with the cookie; without a server token a
//! foreign Host is refused. The page's assets name nothing outside forge and carry a strict
//! CSP. Event streams: one tells about a task that runs, at most 16 are open at once (the next
//! gets 503), and /healthz still answers while they are.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use forge_llm::scripted::Scripted;
use forge_runtime::{agent_card, serve_a2a, AgentLoop, AuditLog, CardInfo, LoopConfig};
use forge_runtime::{ArtifactOptions, ServerHandle, TaskStore};
use forge_tools::Registry;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "watch-test-token-0123456789abcdef0123";

async fn serve(dir: &std::path::Path, token: Option<&str>) -> (SocketAddr, ServerHandle) {
    let script = dir.join("s.yaml");
    std::fs::write(
        &script,
        "turns:\n  - tool_calls:\n      - {name: file_create, arguments: {filename: note.txt, content: \"hello\"}}\n  - text: done\n",
    )
    .expect("script");
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::file_create::FileCreate));
    let agent = Arc::new(AgentLoop {
        provider: Arc::new(Scripted::load(&script).expect("script loads")),
        tools: Arc::new(reg),
        system_prompt: "test".into(),
        audit: AuditLog::open_file(&dir.join("audit.ndjson")).expect("audit file"),
        config: LoopConfig::default(),
        files_dir: dir.join("files"),
        egress: None,
        sessions: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let store = TaskStore::new(agent);
    store.set_artifact_options(ArtifactOptions {
        public_url: None,
        bound_url: format!("http://{addr}/"),
        inline_bytes: 0,
    });
    let info = CardInfo {
        name: "t".into(),
        description: "t".into(),
        version: "0.1.0".into(),
        skills: vec![],
    };
    let card = agent_card(&info, &format!("http://{addr}/"), token.is_some());
    let handle = serve_a2a(listener, store, card, token.map(str::to_string)).expect("serve");
    (addr, handle)
}

/// One request with `headers` (Host first); returns (status, head, body). Reads to the end.
async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &str,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("answer within 30 s")
        .expect("read");
    let t = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = t.split_once("\r\n\r\n").unwrap_or((&t, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// An event-stream request: the open connection and what arrived until `until` was seen (or
/// the stream ended, or 20 s passed).
async fn stream(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, String)],
    until: &str,
) -> (TcpStream, String) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !got.contains(until) {
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.push_str(&String::from_utf8_lossy(&buf[..n])),
            _ => break,
        }
    }
    (s, got)
}

fn header<'a>(head: &'a str, name: &str) -> Vec<&'a str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
        .collect()
}

async fn run_task(addr: SocketAddr, auth: &[(&str, String)]) -> String {
    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "write a note"}]});
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}})
            .to_string();
    let mut h = auth.to_vec();
    h.push(("content-type", "application/json".into()));
    let (status, _, body) = http(addr, "POST", "/", &h, &body).await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["result"]["status"]["state"], "completed", "{v}");
    v["result"]["id"].as_str().expect("id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_token_every_watch_route_answers_401_and_the_cookie_opens_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let (addr, handle) = serve(dir.path(), Some(TOKEN)).await;
    let bearer = vec![("authorization", format!("Bearer {TOKEN}"))];
    let id = run_task(addr, &bearer).await;

    let data_routes = [
        "/ui".to_string(),
        "/ui/".to_string(),
        "/ui/app.js".to_string(),
        "/ui/api/tasks".to_string(),
        format!("/ui/api/tasks/{id}"),
        "/ui/api/events".to_string(),
        format!("/tasks/{id}/egress"),
        format!("/artifacts/{id}/note.txt"),
    ];
    let wrong_cookie = vec![("cookie", "forge_token=not-the-token".to_string())];
    let wrong_bearer = vec![("authorization", "Bearer not-the-token".to_string())];
    for path in &data_routes {
        for (what, h) in [
            ("nothing", vec![]),
            ("a wrong cookie", wrong_cookie.clone()),
            ("a wrong bearer", wrong_bearer.clone()),
        ] {
            let (status, _, body) = http(addr, "GET", path, &h, "").await;
            assert_eq!(status, 401, "{path} with {what}: {body}");
        }
    }

    // `/ui?token=` sets the cookie and sends the browser to the clean URL.
    let (status, head, _) = http(addr, "GET", &format!("/ui?token={TOKEN}"), &[], "").await;
    assert_eq!(status, 303, "{head}");
    assert_eq!(header(&head, "location"), vec!["/ui"], "{head}");
    let cookie = header(&head, "set-cookie");
    assert_eq!(cookie.len(), 1, "{head}");
    let attrs: Vec<&str> = cookie[0].split(';').map(str::trim).collect();
    assert_eq!(attrs[0], format!("forge_token={TOKEN}"));
    for want in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(attrs.contains(&want), "{want} missing: {attrs:?}");
    }
    let (status, head, _) = http(addr, "GET", "/ui?token=wrong-token", &[], "").await;
    assert_eq!(status, 401, "{head}");
    assert!(header(&head, "set-cookie").is_empty(), "{head}");
    // The login form does the same.
    let form = [(
        "content-type",
        "application/x-www-form-urlencoded".to_string(),
    )];
    let (status, head, _) = http(addr, "POST", "/ui/login", &form, &format!("token={TOKEN}")).await;
    assert_eq!(status, 303, "{head}");
    assert!(header(&head, "set-cookie")[0].starts_with(&format!("forge_token={TOKEN};")));
    let (status, _, _) = http(addr, "POST", "/ui/login", &form, "token=nope").await;
    assert_eq!(status, 401);

    // The cookie opens every route; a page of another origin is refused even with it.
    let good = vec![("cookie", format!("other=1; forge_token={TOKEN}"))];
    for path in &data_routes {
        if path.ends_with("/events") {
            let (_s, got) = stream(addr, path, &good, "event: hello").await;
            assert!(got.starts_with("HTTP/1.1 200"), "{path}: {got}");
            assert!(
                got.to_ascii_lowercase()
                    .contains("content-type: text/event-stream"),
                "{got}"
            );
        } else {
            let (status, _, body) = http(addr, "GET", path, &good, "").await;
            assert_eq!(status, 200, "{path}: {body}");
        }
        let same = [good.clone(), vec![("origin", format!("http://{addr}"))]].concat();
        let foreign = [
            good.clone(),
            vec![("origin", "http://evil.test".to_string())],
        ]
        .concat();
        let cross = [
            good.clone(),
            vec![("sec-fetch-site", "cross-site".to_string())],
        ]
        .concat();
        if !path.ends_with("/events") {
            let (status, _, body) = http(addr, "GET", path, &same, "").await;
            assert_eq!(status, 200, "{path} same origin: {body}");
        }
        for (what, h) in [
            ("a foreign Origin", foreign),
            ("Sec-Fetch-Site: cross-site", cross),
        ] {
            let (status, _, body) = http(addr, "GET", path, &h, "").await;
            // The artifact route is the API's: there the cookie counts only from the page's
            // own origin, so a foreign page is as unauthenticated as no token (401).
            let want = if path.starts_with("/artifacts/") {
                401
            } else {
                403
            };
            assert_eq!(status, want, "{path} with {what}: {body}");
        }
    }
    // The live view (a2a/live.rs) takes the page's cookie as the artifact route does: a wrong
    // one is refused (401); the right one passes (this agent has no browser, so the route then
    // answers 404 saying so); from a page of another origin the cookie does not count (401).
    let live = format!("/ui/tasks/{id}/live");
    let (status, _, body) = http(addr, "GET", &live, &wrong_cookie, "").await;
    assert_eq!(status, 401, "{live} with a wrong cookie: {body}");
    let (status, _, body) = http(addr, "GET", &live, &good, "").await;
    assert_eq!(status, 404, "{live} with the cookie: {body}");
    assert!(body.contains("no browser"), "{body}");
    let foreign = [
        good.clone(),
        vec![("origin", "http://evil.test".to_string())],
    ]
    .concat();
    let (status, _, body) = http(addr, "GET", &live, &foreign, "").await;
    assert_eq!(status, 401, "{live} from a foreign page: {body}");

    // The login form posted from another origin sets nothing.
    let evil_form = [form[0].clone(), ("origin", "http://evil.test".to_string())];
    let (status, head, _) = http(
        addr,
        "POST",
        "/ui/login",
        &evil_form,
        &format!("token={TOKEN}"),
    )
    .await;
    assert_eq!(status, 403, "{head}");
    assert!(header(&head, "set-cookie").is_empty());

    // The page: a strict CSP, no inline script or style, nothing loaded from elsewhere.
    let (_, head, html) = http(addr, "GET", "/ui", &good, "").await;
    let csp = header(&head, "content-security-policy").join(" ");
    assert!(csp.contains("default-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    let (_, _, js) = http(addr, "GET", "/ui/app.js", &good, "").await;
    let (status, _, css) = http(addr, "GET", "/ui/app.css", &[], "").await;
    assert_eq!(status, 200, "the stylesheet holds no data");
    for (name, text) in [("index", &html), ("js", &js), ("css", &css)] {
        assert!(!text.is_empty(), "{name}");
        for far in ["http://", "https://", "//cdn", "@import"] {
            assert!(!text.contains(far), "{name} names {far}");
        }
    }
    assert!(html.contains("<script src=\"/ui/app.js\""), "{html}");
    assert_eq!(
        html.matches("<script").count(),
        1,
        "one script tag, external"
    );
    assert!(!html.contains(" style="), "no inline style");
    let handler = html.split(" on").skip(1).find(|rest| {
        let name: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        !name.is_empty() && rest[name.len()..].starts_with('=')
    });
    assert!(handler.is_none(), "no inline handlers: on{handler:?}");

    // The detail names the task's file and says the audit file verifies with its events in it.
    let (_, _, d) = http(addr, "GET", &format!("/ui/api/tasks/{id}"), &good, "").await;
    let d: Value = serde_json::from_str(&d).expect("json");
    assert_eq!(d["state"], "completed", "{d}");
    assert_eq!(
        d["artifacts"][0]["url"],
        format!("/artifacts/{id}/note.txt")
    );
    assert_eq!(d["audit"]["verified"], true, "{d}");
    assert!(d["audit"]["taskEvents"].as_u64().unwrap_or(0) >= 3, "{d}");
    let starts: Vec<&Value> = d["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["event"] == "tool_start")
        .collect();
    assert_eq!(starts.len(), 1, "{d}");
    assert_eq!(starts[0]["arguments"]["filename"], "note.txt");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_server_token_a_foreign_host_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (addr, handle) = serve(dir.path(), None).await;
    let id = run_task(addr, &[]).await;
    for path in [
        "/ui".to_string(),
        "/ui/api/tasks".to_string(),
        format!("/ui/api/tasks/{id}"),
        "/ui/api/events".to_string(),
        format!("/tasks/{id}/egress"),
    ] {
        let evil = vec![("host", format!("evil.test:{}", addr.port()))];
        let (status, _, body) = http(addr, "GET", &path, &evil, "").await;
        assert_eq!(status, 403, "{path}: {body}");
        let foreign = vec![("origin", "http://evil.test".to_string())];
        let (status, _, body) = http(addr, "GET", &path, &foreign, "").await;
        assert_eq!(status, 403, "{path} foreign Origin: {body}");
        if !path.ends_with("/events") {
            let local = vec![("host", format!("localhost:{}", addr.port()))];
            let (status, _, body) = http(addr, "GET", &path, &local, "").await;
            assert_eq!(status, 200, "{path}: {body}");
        }
    }
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_tell_about_tasks_are_capped_and_leave_healthz_answering() {
    let dir = tempfile::tempdir().expect("tmp");
    let (addr, handle) = serve(dir.path(), None).await;
    let (mut first, hello) = stream(addr, "/ui/api/events", &[], "event: hello").await;
    assert!(hello.contains("event: hello"), "{hello}");
    let id = run_task(addr, &[]).await;
    // The stream names the task that ran (bounded read).
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    let want = format!("event: task\ndata: {{\"id\":\"{id}\"}}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !got.contains(&want) {
        match tokio::time::timeout_at(deadline, first.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.push_str(&String::from_utf8_lossy(&buf[..n])),
            _ => break,
        }
    }
    assert!(got.contains(&want), "{got}");

    // 16 open at once (this one and 15 more); the 17th is told to come back.
    let mut open = vec![first];
    for i in 1..16 {
        let (s, got) = stream(addr, "/ui/api/events", &[], "event: hello").await;
        assert!(got.starts_with("HTTP/1.1 200"), "stream {i}: {got}");
        open.push(s);
    }
    let (_s, over) = stream(addr, "/ui/api/events", &[], "\r\n\r\n").await;
    assert!(over.starts_with("HTTP/1.1 503"), "{over}");
    assert!(
        over.to_ascii_lowercase().contains("retry-after: 5"),
        "{over}"
    );
    let (status, _, _) = http(addr, "GET", "/healthz", &[], "").await;
    assert_eq!(status, 200, "health answers while the streams are open");
    drop(open);
    handle.shutdown().await;
}
