//! forge-mcp's client against forge-mcp's server over real loopback sockets (streamable HTTP
//! through the egress client) and an in-process duplex pipe (the stdio framing), with the real
//! rmcp client on the other side where the forge client is not the subject.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{wait_for, TestHost, PNG};
use forge_egress::client::ClientOptions;
use forge_egress::EgressPolicy;
use forge_mcp::{
    connect, serve_http, serve_io, EgressDeps, HttpOptions, McpError, ServeOptions, ServerSpec,
    ServerTransport,
};
use forge_testkit::site::{Response, Site};
use forge_tools::{ToolContext, ToolError};
use rmcp::model::{
    CallToolRequestParams, ContentBlock, NumberOrString, ProgressNotificationParam, ProgressToken,
    RequestParamsMeta,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

fn deps(entries: &[String]) -> EgressDeps {
    EgressDeps {
        policy: Arc::new(EgressPolicy::allowlist(entries.iter().cloned()).unwrap()),
        options: ClientOptions::default(),
    }
}

fn spec(url: &str, bearer: Option<&str>) -> ServerSpec {
    ServerSpec {
        name: "srv".into(),
        transport: ServerTransport::Http {
            url: url.into(),
            bearer: bearer.map(str::to_string),
        },
        allow: vec!["*".into()],
        deny: vec!["env_names".into()],
        timeout: Duration::from_secs(10),
    }
}

struct Server {
    host: Arc<TestHost>,
    url: String,
    entry: String,
    handle: forge_mcp::HttpServerHandle,
    _dir: tempfile::TempDir,
}

async fn server(http: HttpOptions) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let host = TestHost::new(dir.path().to_path_buf());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let handle = serve_http(listener, host.clone(), ServeOptions::default(), http).unwrap();
    let port = handle.addr.port();
    Server {
        host,
        url: format!("http://127.0.0.1:{port}/mcp"),
        entry: format!("127.0.0.1:{port}"),
        handle,
        _dir: dir,
    }
}

fn ctx() -> ToolContext {
    ToolContext::new("task-1", std::env::temp_dir())
}

#[tokio::test]
async fn http_tools_are_listed_filtered_called_and_the_session_closes() {
    let s = server(HttpOptions::default()).await;
    let conn = connect(
        spec(&s.url, None),
        Some(&deps(std::slice::from_ref(&s.entry))),
    )
    .await
    .unwrap();
    let mut names: Vec<String> = conn.tools().iter().map(|t| t.name().to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "srv__browser_screenshot",
            "srv__echo",
            "srv__fail",
            "srv__slow",
            "srv__stats"
        ]
    );
    assert_eq!(conn.skipped().len(), 1);
    assert_eq!(conn.skipped()[0].tool, "env_names");
    assert!(
        conn.skipped()[0].reason.contains("deny"),
        "{:?}",
        conn.skipped()
    );

    let tools = conn.tools();
    let echo = tools.iter().find(|t| t.name() == "srv__echo").unwrap();
    assert_eq!(echo.description(), "Echo the text back.");
    assert_eq!(echo.input_schema()["required"], json!(["text"]));
    let out = echo
        .execute(&ctx(), json!({"text": "hello"}))
        .await
        .unwrap();
    assert!(
        out.text.contains("source=mcp server=srv tool=echo") && out.text.contains("hello"),
        "{}",
        out.text
    );
    assert_eq!(out.data, Some(json!({"echo": "hello", "session": "mcp-0"})));

    // A tool failure is a failed call carrying the tool's message.
    let fail = tools.iter().find(|t| t.name() == "srv__fail").unwrap();
    match fail.execute(&ctx(), json!({})).await {
        Err(ToolError::Failed(m)) => assert!(
            m.contains("blocked by egress policy: host evil.example is not in the allowlist"),
            "{m}"
        ),
        other => panic!("expected a failure, got {other:?}"),
    }
    // Non-object input is refused before the server sees it.
    assert!(matches!(
        echo.execute(&ctx(), json!("x")).await,
        Err(ToolError::InvalidInput(_))
    ));

    // One MCP session, one host session, closed when the client ends the MCP session.
    assert_eq!(s.host.opened.load(Ordering::SeqCst), 1);
    conn.shutdown().await;
    assert!(
        wait_for(Duration::from_secs(5), || s.host.closed() == ["mcp-0"]).await,
        "host session not closed: {:?}",
        s.host.closed()
    );
    match echo.execute(&ctx(), json!({"text": "x"})).await {
        Err(ToolError::Failed(m)) => assert!(m.contains("shut down"), "{m}"),
        other => panic!("{other:?}"),
    }
    s.handle.shutdown().await;
}

#[tokio::test]
async fn cancelling_a_call_stops_it_on_the_server() {
    let s = server(HttpOptions::default()).await;
    let conn = connect(
        spec(&s.url, None),
        Some(&deps(std::slice::from_ref(&s.entry))),
    )
    .await
    .unwrap();
    let slow = conn
        .tools()
        .into_iter()
        .find(|t| t.name() == "srv__slow")
        .unwrap();
    let c = ctx();
    let cancel = c.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let t0 = Instant::now();
    let r = slow.execute(&c, json!({"seconds": 30})).await;
    assert!(matches!(r, Err(ToolError::Cancelled)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(
        wait_for(Duration::from_secs(5), || s
            .host
            .cancelled
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the server-side call did not see the cancellation"
    );
    conn.shutdown().await;
    s.handle.shutdown().await;
}

#[tokio::test]
async fn the_server_timeout_bounds_a_call() {
    let s = server(HttpOptions::default()).await;
    let mut sp = spec(&s.url, None);
    sp.timeout = Duration::from_secs(1);
    let conn = connect(sp, Some(&deps(std::slice::from_ref(&s.entry))))
        .await
        .unwrap();
    let slow = conn
        .tools()
        .into_iter()
        .find(|t| t.name() == "srv__slow")
        .unwrap();
    let t0 = Instant::now();
    let r = slow.execute(&ctx(), json!({"seconds": 20})).await;
    assert!(
        matches!(r, Err(ToolError::Timeout(d)) if d == Duration::from_secs(1)),
        "{r:?}"
    );
    assert!(t0.elapsed() < Duration::from_secs(4));
    assert!(
        wait_for(Duration::from_secs(5), || s
            .host
            .cancelled
            .load(Ordering::SeqCst)
            == 1)
        .await,
        "the timed-out call was not cancelled on the server"
    );
    conn.shutdown().await;
    s.handle.shutdown().await;
}

#[tokio::test]
async fn the_egress_policy_governs_http_servers() {
    let s = server(HttpOptions::default()).await;
    // No entry for the server's host:port: refused by the policy, before any byte is sent.
    let err = connect(spec(&s.url, None), Some(&deps(&[])))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("MCP server srv")
            && msg.contains(&s.url)
            && msg.contains("blocked by egress policy"),
        "{msg}"
    );
    assert_eq!(s.host.opened.load(Ordering::SeqCst), 0);
    // Without an egress client there is no way to reach an http server.
    assert!(connect(spec(&s.url, None), None).await.is_err());
    s.handle.shutdown().await;
}

/// Records the decisions a task's client reports (its `blocked` list is built from them).
#[derive(Default)]
struct Seen(std::sync::Mutex<Vec<forge_egress::proxy::Decision>>);

impl forge_egress::proxy::EgressObserver for Seen {
    fn on_decision(&self, d: &forge_egress::proxy::Decision) {
        self.0.lock().unwrap().push(d.clone());
    }
}

#[tokio::test]
async fn a_task_scope_that_does_not_name_an_http_server_refuses_its_tools() {
    let s = server(HttpOptions::default()).await;
    let other = "127.0.0.1:9".to_string();
    let d = deps(&[s.entry.clone(), other.clone()]);
    let conn = connect(spec(&s.url, None), Some(&d)).await.unwrap();
    let tools = conn.tools();
    let echo = tools.iter().find(|t| t.name() == "srv__echo").unwrap();
    let agent = forge_egress::client::EgressClient::new(d.policy.clone(), ClientOptions::default());
    let task_ctx = |scope: &[String], seen: Arc<Seen>| {
        let mut c = ctx();
        let narrowed = d.policy.narrow(scope, "allowed_hosts").unwrap();
        let seen: Arc<dyn forge_egress::proxy::EgressObserver> = seen;
        c.egress = Some(Arc::new(agent.with_policy(Arc::new(narrowed), Some(seen))));
        c
    };
    // A scope without the server: refused before anything is sent, the refusal reported.
    let seen = Arc::new(Seen::default());
    let err = echo
        .execute(
            &task_ctx(std::slice::from_ref(&other), seen.clone()),
            json!({"text": "x"}),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Blocked(_)), "{err}");
    assert!(err.to_string().contains("MCP server srv"), "{err}");
    let seen_now = seen.0.lock().unwrap().clone();
    assert!(
        seen_now
            .iter()
            .any(|d| d.outcome == forge_egress::proxy::Outcome::Blocked
                && s.entry.starts_with(&d.host)
                && s.entry.ends_with(&format!(":{}", d.port))),
        "the refusal reached the task's observer: {} decisions",
        seen_now.len()
    );
    // A scope naming it, and no scope at all: the call goes through.
    let out = echo
        .execute(
            &task_ctx(std::slice::from_ref(&s.entry), Arc::default()),
            json!({"text": "in scope"}),
        )
        .await
        .unwrap();
    assert!(out.text.contains("in scope"), "{}", out.text);
    let out = echo
        .execute(&ctx(), json!({"text": "no scope"}))
        .await
        .unwrap();
    assert!(out.text.contains("no scope"), "{}", out.text);
    s.handle.shutdown().await;
}

/// A loopback site that answers every request (at most 20) with a redirect to `location`.
fn redirector(location: String) -> (String, Site) {
    let site = Site::builder()
        .max_connections(20)
        .start(move |_| Response::bare(307, Vec::new()).header("Location", &location));
    (site.entry(), site)
}

#[tokio::test]
async fn a_redirect_is_refused_not_followed() {
    let target = server(HttpOptions::default()).await;
    let (entry, hits) = redirector(target.url.clone());
    // Both hosts allowed by the policy: the redirect is still not followed.
    let err = connect(
        spec(&format!("http://{entry}/mcp"), Some("tok")),
        Some(&deps(&[entry.clone(), target.entry.clone()])),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("redirect") && msg.contains(&target.url),
        "{msg}"
    );
    assert!(hits.hits() >= 1);
    assert_eq!(target.host.opened.load(Ordering::SeqCst), 0);
    target.handle.shutdown().await;
}

#[tokio::test]
async fn bearer_token_required_and_checked() {
    let s = server(HttpOptions {
        token: Some("s3cret".into()),
        ..Default::default()
    })
    .await;
    let d = deps(std::slice::from_ref(&s.entry));
    for bad in [None, Some("wrong")] {
        let err = connect(spec(&s.url, bad), Some(&d)).await.unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("MCP server srv") && msg.contains("401"),
            "{msg}"
        );
    }
    let conn = connect(spec(&s.url, Some("s3cret")), Some(&d))
        .await
        .unwrap();
    assert_eq!(conn.tools().len(), 5);
    conn.shutdown().await;
    s.handle.shutdown().await;
}

#[tokio::test]
async fn a_non_loopback_bind_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let host = TestHost::new(dir.path().to_path_buf());
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let err = serve_http(
        l,
        host.clone(),
        ServeOptions::default(),
        HttpOptions::default(),
    )
    .err()
    .expect("refused");
    assert!(matches!(err, McpError::TokenRequired { .. }), "{err}");
    assert!(err.to_string().contains("without a bearer token"), "{err}");
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let empty = HttpOptions {
        token: Some(String::new()),
        ..Default::default()
    };
    assert!(serve_http(l, host.clone(), ServeOptions::default(), empty).is_err());
    let l = TcpListener::bind("0.0.0.0:0").await.unwrap();
    let with_token = HttpOptions {
        token: Some("t".into()),
        ..Default::default()
    };
    serve_http(l, host, ServeOptions::default(), with_token)
        .unwrap()
        .shutdown()
        .await;
}

/// One raw HTTP/1.1 POST; returns the status code.
async fn raw_post(addr: std::net::SocketAddr, path: &str, headers: &[(&str, &str)]) -> u16 {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!("POST {path} HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    head.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn origin_and_host_are_checked_against_dns_rebinding() {
    let s = server(HttpOptions {
        allowed_origins: vec!["http://localhost:6274".into()],
        ..Default::default()
    })
    .await;
    let a = s.handle.addr;
    let host = format!("127.0.0.1:{}", a.port());
    // Control: a plain client (no Origin, loopback Host) gets through.
    assert_eq!(raw_post(a, "/mcp", &[("Host", &host)]).await, 200);
    assert_eq!(
        raw_post(a, "/mcp", &[("Host", &format!("localhost:{}", a.port()))]).await,
        200
    );
    // A page of another origin: refused.
    assert_eq!(
        raw_post(
            a,
            "/mcp",
            &[("Host", &host), ("Origin", "http://evil.example")]
        )
        .await,
        403
    );
    // An allowed origin passes.
    assert_eq!(
        raw_post(
            a,
            "/mcp",
            &[("Host", &host), ("Origin", "http://localhost:6274")]
        )
        .await,
        200
    );
    // A rebinding name in Host (no token): refused.
    assert_eq!(
        raw_post(
            a,
            "/mcp",
            &[("Host", &format!("rebind.example:{}", a.port()))]
        )
        .await,
        403
    );
    assert_eq!(raw_post(a, "/other", &[("Host", &host)]).await, 404);
    s.handle.shutdown().await;
}

/// A client that counts progress notifications.
#[derive(Clone, Default)]
struct Counting {
    progress: Arc<AtomicUsize>,
}

impl ClientHandler for Counting {
    async fn on_progress(
        &self,
        _params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn over_a_pipe_results_images_progress_and_errors() {
    let dir = tempfile::tempdir().unwrap();
    let host = TestHost::new(dir.path().to_path_buf());
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(server_io);
    let opts = ServeOptions {
        image_cap_bytes: 4096,
        ..Default::default()
    };
    let server = tokio::spawn(serve_io(host.clone(), opts, sr, sw));
    let handler = Counting::default();
    let (cr, cw) = tokio::io::split(client_io);
    let client = handler.clone().serve((cr, cw)).await.unwrap();

    let info = client.peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "forge");
    assert!(info
        .instructions
        .as_deref()
        .unwrap()
        .contains("Allowed hosts"));
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 6);

    // structuredContent from the tool's data object.
    let r = client
        .call_tool(
            CallToolRequestParams::new("echo")
                .with_arguments(json!({"text": "hi"}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(false));
    assert_eq!(
        r.structured_content,
        Some(json!({"echo": "hi", "session": "mcp-0"}))
    );
    assert!(r.content[0]
        .as_text()
        .unwrap()
        .text
        .contains("UNTRUSTED_CONTENT_START"));

    // A failure is a result with isError and the message.
    let r = client
        .call_tool(CallToolRequestParams::new("fail"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(r.content[0]
        .as_text()
        .unwrap()
        .text
        .contains("blocked by egress policy"));
    let r = client
        .call_tool(CallToolRequestParams::new("nope"))
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(r.content[0]
        .as_text()
        .unwrap()
        .text
        .contains("unknown tool \"nope\""));

    // browser_screenshot: image content with the PNG, below the cap; a note above it.
    let r = client
        .call_tool(CallToolRequestParams::new("browser_screenshot"))
        .await
        .unwrap();
    let img = r
        .content
        .iter()
        .find_map(ContentBlock::as_image)
        .expect("image content");
    assert_eq!(img.mime_type, "image/png");
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(&img.data)
            .unwrap(),
        PNG
    );
    let r = client
        .call_tool(
            CallToolRequestParams::new("browser_screenshot")
                .with_arguments(json!({"bytes": 5000}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert!(r.content.iter().all(|c| c.as_image().is_none()));
    assert!(r.content.iter().any(|c| c
        .as_text()
        .is_some_and(|t| t.text.contains("above the image content limit"))));

    // Progress every ~1 s for a call with a progress token.
    let mut p = CallToolRequestParams::new("slow")
        .with_arguments(json!({"seconds": 2.6}).as_object().unwrap().clone());
    p.set_progress_token(ProgressToken(NumberOrString::Number(7)));
    let r = client.call_tool(p).await.unwrap();
    assert_eq!(r.is_error, Some(false));
    assert!(
        wait_for(Duration::from_secs(2), || handler
            .progress
            .load(Ordering::SeqCst)
            >= 2)
        .await,
        "progress notifications: {}",
        handler.progress.load(Ordering::SeqCst)
    );
    // A call shorter than a second sends none (rmcp's client puts a progress token on every
    // request).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = handler.progress.load(Ordering::SeqCst);
    client
        .call_tool(
            CallToolRequestParams::new("slow")
                .with_arguments(json!({"seconds": 0.5}).as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(handler.progress.load(Ordering::SeqCst), before);

    // The connection ends: the host session is closed.
    client.cancel().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(host.closed(), ["mcp-0"]);
}
