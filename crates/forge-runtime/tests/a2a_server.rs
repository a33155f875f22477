//! The A2A server over real sockets: agent card and health, message/send, message/stream (SSE with
//! tool progress, artifacts and a final event), tasks/get, tasks/cancel reaching the tool in
//! flight, JSON-RPC errors, and the bearer token. The model is the scripted provider; the tools are
//! registered in a plain registry (a slow tool that waits for cancellation, and a real builtin).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use forge_llm::scripted::Scripted;
use forge_runtime::AuditLog;
use forge_runtime::{
    agent_card, load_or_create_token, serve_a2a, CardInfo, ServerHandle, TaskStore,
};
use forge_runtime::{AgentLoop, LoopConfig, SessionCloser};
use forge_tools::{Registry, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A tool that runs until its task is cancelled (bounded at 60 s), recording that it saw the cancel.
struct WaitTool {
    started: Arc<AtomicUsize>,
    saw_cancel: Arc<AtomicBool>,
}

#[async_trait]
impl Tool for WaitTool {
    fn name(&self) -> &str {
        "wait_for_cancel"
    }
    fn description(&self) -> &str {
        "Waits until the task is cancelled."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        tokio::select! {
            _ = ctx.cancel.cancelled() => {
                self.saw_cancel.store(true, Ordering::SeqCst);
                Err(ToolError::Cancelled)
            }
            _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(ToolOutput::text("waited 60 s")),
        }
    }
}

/// Records which sessions were closed.
#[derive(Default)]
struct Sessions(std::sync::Mutex<Vec<String>>);

#[async_trait]
impl SessionCloser for Sessions {
    async fn close_session(&self, key: &str) {
        self.0.lock().unwrap().push(key.to_string());
    }
}

struct Fixture {
    addr: std::net::SocketAddr,
    handle: ServerHandle,
    started: Arc<AtomicUsize>,
    saw_cancel: Arc<AtomicBool>,
    sessions: Arc<Sessions>,
    _dir: tempfile::TempDir,
}

async fn start(script: &str, token: Option<&str>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let script_path = dir.path().join("script.yaml");
    std::fs::write(&script_path, script).unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let mut reg = Registry::new();
    reg.register(Arc::new(WaitTool {
        started: started.clone(),
        saw_cancel: saw_cancel.clone(),
    }));
    reg.register(Arc::new(forge_tools::builtins::math::MathCalculate));
    let sessions = Arc::new(Sessions::default());
    let agent = Arc::new(AgentLoop {
        provider: Arc::new(Scripted::load(&script_path).unwrap()),
        tools: Arc::new(reg),
        system_prompt: "test".into(),
        audit: AuditLog::to_writer(Box::new(std::io::sink())),
        config: LoopConfig::default(),
        files_dir: dir.path().join("files"),
        egress: None,
        sessions: Some(sessions.clone()),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let info = CardInfo {
        name: "test-agent".into(),
        description: "an agent for tests".into(),
        version: "1.2.3".into(),
        skills: vec![("browse".into(), "Browse things".into(), vec!["web".into()])],
    };
    let card = agent_card(&info, &format!("http://{addr}/"), token.is_some());
    let handle = serve_a2a(
        listener,
        TaskStore::new(agent),
        card,
        token.map(str::to_string),
    )
    .unwrap();
    Fixture {
        addr,
        handle,
        started,
        saw_cancel,
        sessions,
        _dir: dir,
    }
}

/// One HTTP/1.1 request; returns (status, headers, body).
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&Value>,
) -> (u16, String, String) {
    http_host(addr, &addr.to_string(), method, path, auth, body).await
}

/// [`http`] with an explicit `Host` header.
async fn http_host(
    addr: std::net::SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: Option<&Value>,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n", payload.len());
    if let Some(t) = auth {
        req.push_str(&format!("authorization: Bearer {t}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(&payload);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("response within 30 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

async fn rpc(addr: std::net::SocketAddr, method: &str, params: Value) -> Value {
    let (status, _, body) = http(
        addr,
        "POST",
        "/",
        None,
        Some(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn user_message(text: &str) -> Value {
    json!({"kind": "message", "role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}]})
}

const CALC_SCRIPT: &str = "turns:\n  - tool_calls:\n      - {name: math_calculate, arguments: {expression: \"40+2\"}}\n  - text: \"answer: {{result:math_calculate}}\"\n";
const WAIT_SCRIPT: &str =
    "turns:\n  - tool_calls:\n      - {name: wait_for_cancel}\n  - text: never\n";

#[tokio::test]
async fn card_and_health_are_served() {
    let f = start(CALC_SCRIPT, None).await;
    let (status, _, body) = http(f.addr, "GET", "/.well-known/agent-card.json", None, None).await;
    assert_eq!(status, 200);
    let card: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(card["name"], "test-agent");
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["url"], format!("http://{}/", f.addr));
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][0]["id"], "browse");
    assert!(card.get("security").is_none());
    let (status, _, body) = http(f.addr, "GET", "/healthz", None, None).await;
    assert_eq!((status, body.as_str()), (200, "{\"status\":\"ok\"}"));
    let (status, _, _) = http(f.addr, "GET", "/nope", None, None).await;
    assert_eq!(status, 404);
    // The card advertises the address the client used.
    let (_, _, body) = http_host(
        f.addr,
        "agent.example:9999",
        "GET",
        "/.well-known/agent-card.json",
        None,
        None,
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["url"],
        "http://agent.example:9999/"
    );
    f.handle.shutdown().await;
}

#[tokio::test]
async fn message_send_runs_the_task_and_tasks_get_returns_it() {
    let f = start(CALC_SCRIPT, None).await;
    let r = rpc(
        f.addr,
        "message/send",
        json!({"message": user_message("add")}),
    )
    .await;
    assert_eq!(r["id"], 7);
    let task = &r["result"];
    assert_eq!(task["kind"], "task");
    assert_eq!(task["status"]["state"], "completed", "{r}");
    let answer = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        answer.starts_with("answer: ") && answer.contains("42"),
        "{answer}"
    );
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], answer);
    assert_eq!(task["history"][0]["role"], "user");
    assert_eq!(task["history"][1]["role"], "agent");

    let id = task["id"].as_str().unwrap();
    let got = rpc(f.addr, "tasks/get", json!({"id": id})).await;
    assert_eq!(got["result"]["status"]["state"], "completed");
    assert_eq!(got["result"]["contextId"], task["contextId"]);
    let one = rpc(f.addr, "tasks/get", json!({"id": id, "historyLength": 1})).await;
    assert_eq!(one["result"]["history"].as_array().unwrap().len(), 1);
    assert!(
        f.sessions.0.lock().unwrap().is_empty(),
        "no browser tool ran, no session to close"
    );
    f.handle.shutdown().await;
}

#[tokio::test]
async fn message_stream_sends_tool_progress_then_a_final_event() {
    let f = start(CALC_SCRIPT, None).await;
    let mut s = TcpStream::connect(f.addr).await.unwrap();
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": {"message": user_message("add")}}).to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(s);
    let mut head = String::new();
    let mut events: Vec<Value> = Vec::new();
    let res = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap() == 0 {
                break;
            }
            if events.is_empty() && !line.starts_with("data:") {
                head.push_str(&line);
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                let v: Value = serde_json::from_str(data).unwrap();
                assert_eq!(v["id"], "s1");
                let ev = v["result"].clone();
                let is_final = ev["final"] == true;
                events.push(ev);
                if is_final {
                    break;
                }
            }
        }
    })
    .await;
    assert!(res.is_ok(), "stream finished within 30 s");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    assert_eq!(events[0]["kind"], "task");
    let tool_events: Vec<&Value> = events
        .iter()
        .filter_map(|e| e["status"]["message"]["parts"].as_array())
        .flat_map(|p| p.iter())
        .filter(|p| p["kind"] == "data")
        .map(|p| &p["data"])
        .filter(|d| d["tool"] == "math_calculate")
        .collect();
    assert_eq!(tool_events.len(), 2, "tool_start and tool_end: {events:#?}");
    assert_eq!(tool_events[0]["event"], "tool_start");
    assert_eq!(tool_events[1]["event"], "tool_end");
    assert_eq!(tool_events[1]["ok"], true);
    assert!(events.iter().any(|e| e["kind"] == "artifact-update"));
    let last = events.last().unwrap();
    assert_eq!(last["kind"], "status-update");
    assert_eq!(last["final"], true);
    assert_eq!(last["status"]["state"], "completed");
    f.handle.shutdown().await;
}

#[tokio::test]
async fn tasks_cancel_reaches_the_tool_in_flight() {
    let f = start(WAIT_SCRIPT, None).await;
    let r = rpc(
        f.addr,
        "message/send",
        json!({"message": user_message("wait"), "configuration": {"blocking": false}}),
    )
    .await;
    let id = r["result"]["id"].as_str().unwrap().to_string();
    assert!(
        matches!(
            r["result"]["status"]["state"].as_str(),
            Some("submitted" | "working")
        ),
        "{r}"
    );
    // Wait (bounded) until the tool is running.
    for _ in 0..3000 {
        if f.started.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.started.load(Ordering::SeqCst), 1, "the tool started");
    let c = rpc(f.addr, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(c["result"]["status"]["state"], "canceled", "{c}");
    assert!(
        f.saw_cancel.load(Ordering::SeqCst),
        "the tool saw the cancellation"
    );
    let again = rpc(f.addr, "tasks/cancel", json!({"id": id})).await;
    assert_eq!(again["error"]["code"], -32002);
    f.handle.shutdown().await;
}

#[tokio::test]
async fn json_rpc_errors_use_the_standard_codes() {
    let f = start(CALC_SCRIPT, None).await;
    let (_, _, body) = http(f.addr, "POST", "/", None, None).await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], -32700);
    assert_eq!(
        rpc(f.addr, "tasks/list_everything", json!({})).await["error"]["code"],
        -32601
    );
    assert_eq!(
        rpc(f.addr, "tasks/get", json!({"id": "no-such-task"})).await["error"]["code"],
        -32001
    );
    assert_eq!(
        rpc(f.addr, "tasks/get", json!({})).await["error"]["code"],
        -32602
    );
    assert_eq!(
        rpc(
            f.addr,
            "message/send",
            json!({"message": {"role": "user", "parts": []}})
        )
        .await["error"]["code"],
        -32602
    );
    f.handle.shutdown().await;
}

#[tokio::test]
async fn a_bearer_token_is_required_when_configured() {
    let f = start(CALC_SCRIPT, Some("s3cret-token-0123456789abcdef0123456789")).await;
    let req = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}});
    let (status, head, _) = http(f.addr, "POST", "/", None, Some(&req)).await;
    assert_eq!(status, 401);
    assert!(head
        .to_ascii_lowercase()
        .contains("www-authenticate: bearer"));
    let (status, _, _) = http(f.addr, "POST", "/", Some("wrong-token"), Some(&req)).await;
    assert_eq!(status, 401);
    let (status, _, body) = http(
        f.addr,
        "POST",
        "/",
        Some("s3cret-token-0123456789abcdef0123456789"),
        Some(&req),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["code"],
        -32001
    );
    // Discovery and probes stay public; the card advertises the scheme.
    let (status, _, card) = http(f.addr, "GET", "/.well-known/agent-card.json", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&card).unwrap()["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    f.handle.shutdown().await;
}

#[test]
fn the_token_file_is_created_once_with_private_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".forge").join("runtime.token");
    let (t1, new1) = load_or_create_token(&path).unwrap();
    let (t2, new2) = load_or_create_token(&path).unwrap();
    assert!(new1 && !new2);
    assert_eq!(t1, t2);
    assert_eq!(t1.len(), 64);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(Path::new(&path))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600
        );
    }
}

/// A token file that exists but holds no usable token (an empty placeholder, say, created 0644)
/// is rewritten with a fresh token: the file must end up private, not keep its old mode.
#[cfg(unix)]
#[test]
fn a_regenerated_token_never_lands_in_a_world_readable_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runtime.token");
    std::fs::write(&path, "").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_t, new) = load_or_create_token(&path).unwrap();
    assert!(new);
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

/// Without a token (loopback), a web page in the user's browser must not be able to start
/// tasks: a cross-site "simple" POST (text/plain, no preflight) and a DNS-rebinding name (a
/// foreign Host) are refused, and no task starts.
#[tokio::test]
async fn browsers_cannot_drive_a_loopback_server_cross_site() {
    let f = start(CALC_SCRIPT, None).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": user_message("add")}}).to_string();
    for (host, ctype, want) in [
        (f.addr.to_string(), "text/plain", 415),
        (f.addr.to_string(), "application/x-www-form-urlencoded", 415),
        (
            format!("rebind.attacker.example:{}", f.addr.port()),
            "application/json",
            403,
        ),
    ] {
        let mut s = TcpStream::connect(f.addr).await.unwrap();
        let req = format!("POST / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        s.write_all(req.as_bytes()).await.unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.unwrap();
        let text = String::from_utf8_lossy(&buf);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {want}")),
            "{host} {ctype}: {text}"
        );
    }
    // A local client (loopback Host, JSON) still works.
    let r = rpc(
        f.addr,
        "message/send",
        json!({"message": user_message("add")}),
    )
    .await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    let (status, _, _) = http_host(
        f.addr,
        &format!("localhost:{}", f.addr.port()),
        "POST",
        "/",
        None,
        Some(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": "none"}})),
    )
    .await;
    assert_eq!(status, 200);
    f.handle.shutdown().await;
}

#[tokio::test]
async fn tasks_resubscribe_streams_a_running_task_to_its_end() {
    let f = start(WAIT_SCRIPT, None).await;
    let r = rpc(
        f.addr,
        "message/send",
        json!({"message": user_message("wait"), "configuration": {"blocking": false}}),
    )
    .await;
    let id = r["result"]["id"].as_str().unwrap().to_string();
    let mut s = TcpStream::connect(f.addr).await.unwrap();
    let body =
        json!({"jsonrpc": "2.0", "id": "r1", "method": "tasks/resubscribe", "params": {"id": id}})
            .to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut reader = BufReader::new(s);
    let mut events: Vec<Value> = Vec::new();
    let addr = f.addr;
    let cancel_id = id.clone();
    let done = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap() == 0 {
                break;
            }
            if let Some(data) = line.trim_end().strip_prefix("data: ") {
                let ev = serde_json::from_str::<Value>(data).unwrap()["result"].clone();
                if events.is_empty() {
                    // Subscribed: now cancel the task from another connection.
                    let cid = cancel_id.clone();
                    tokio::spawn(
                        async move { rpc(addr, "tasks/cancel", json!({"id": cid})).await },
                    );
                }
                let fin = ev["final"] == true;
                events.push(ev);
                if fin {
                    break;
                }
            }
        }
    })
    .await;
    assert!(done.is_ok(), "the stream ended within 30 s");
    assert_eq!(events[0]["kind"], "task");
    assert_eq!(events[0]["id"], id.as_str());
    let last = events.last().unwrap();
    assert_eq!(
        (last["final"].clone(), last["status"]["state"].clone()),
        (json!(true), json!("canceled"))
    );
    assert_eq!(
        rpc(f.addr, "tasks/resubscribe", json!({"id": "nope"})).await["error"]["code"],
        -32001
    );
    f.handle.shutdown().await;
}

#[tokio::test]
async fn a_second_message_in_a_context_continues_the_conversation() {
    let f = start(CALC_SCRIPT, None).await;
    let first = rpc(
        f.addr,
        "message/send",
        json!({"message": user_message("first question")}),
    )
    .await;
    let ctx = first["result"]["contextId"].as_str().unwrap().to_string();
    let mut msg = user_message("second question");
    msg["contextId"] = json!(ctx);
    let second = rpc(f.addr, "message/send", json!({"message": msg})).await;
    let task = &second["result"];
    assert_eq!(task["contextId"], ctx.as_str());
    assert_ne!(
        task["id"], first["result"]["id"],
        "a new task in the same context"
    );
    // The scripted model replays its script for the new task (turn 1 again, not "script exhausted").
    assert_eq!(task["status"]["state"], "completed", "{task}");
    assert!(task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("42"));
    f.handle.shutdown().await;
}

#[tokio::test]
async fn the_a2a_1_0_method_names_and_shapes_are_served_too() {
    let f = start(CALC_SCRIPT, None).await;
    let (_, _, card) = http(f.addr, "GET", "/.well-known/agent-card.json", None, None).await;
    let card: Value = serde_json::from_str(&card).unwrap();
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, vec!["1.0", "0.3"]);

    let msg = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "add"}]});
    let r = rpc(f.addr, "SendMessage", json!({"message": msg})).await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(task["status"]["message"]["role"], "ROLE_AGENT");
    assert!(task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("42"));
    assert!(
        task["status"]["message"]["parts"][0].get("kind").is_none(),
        "1.0 parts have no kind"
    );
    assert_eq!(task["history"][0]["parts"][0]["text"], "add");

    let got = rpc(f.addr, "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(got["result"]["id"], task["id"]);
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(
        rpc(f.addr, "CancelTask", json!({"id": task["id"]})).await["error"]["code"],
        -32002
    );
    assert_eq!(
        rpc(f.addr, "GetTask", json!({"id": "nope"})).await["error"]["code"],
        -32001
    );
    f.handle.shutdown().await;
}
