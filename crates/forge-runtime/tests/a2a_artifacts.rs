//! A2A file artifacts without a state store (served from the copy captured when the tool made
//! the file): the FilePart URI is built from the Host the client used, bytes go inline only up to
//! the configured size, `GET /artifacts/...` serves the bytes with their type, and a file swapped
//! for a symlink after the task (pointing outside the files dir) changes nothing served. Two
//! conversations writing the same name each get their own workspace and their own immutable
//! artifact. Real sockets, the scripted model (or a prompt-echoing one) and the real
//! `file_create` builtin.

use std::sync::Arc;
use std::time::Duration;

use forge_llm::scripted::Scripted;
use forge_runtime::ArtifactOptions;
use forge_runtime::AuditLog;
use forge_runtime::{agent_card, serve_a2a, CardInfo, ServerHandle, TaskStore};
use forge_runtime::{AgentLoop, LoopConfig};
use forge_tools::Registry;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An A2A server on loopback over an agent with `provider` and the real `file_create`, writing
/// under `dir/files`, with bytes inline up to `inline_bytes`: (files dir, address, handle).
async fn serve(
    dir: &std::path::Path,
    provider: Arc<dyn forge_llm::Provider>,
    inline_bytes: u64,
) -> (std::path::PathBuf, std::net::SocketAddr, ServerHandle) {
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::file_create::FileCreate));
    let files = dir.join("files");
    let agent = Arc::new(AgentLoop {
        provider,
        tools: Arc::new(reg),
        system_prompt: "test".into(),
        audit: AuditLog::to_writer(Box::new(std::io::sink())),
        config: LoopConfig::default(),
        files_dir: files.clone(),
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
        inline_bytes,
    });
    let info = CardInfo {
        name: "t".into(),
        description: "t".into(),
        version: "0.1.0".into(),
        skills: vec![],
    };
    let card = agent_card(&info, &format!("http://{addr}/"), false);
    let handle = serve_a2a(listener, store, card, None).expect("serve");
    (files, addr, handle)
}

/// One HTTP/1.1 request with `host` as the Host header; returns (status, head, body bytes).
async fn http(
    addr: std::net::SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("response within 30 s")
        .expect("read");
    let split = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&buf[..split]).to_string();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head, buf[split + 4..].to_vec())
}

#[tokio::test]
async fn file_artifacts_are_served_from_the_task_file_with_a_uri_on_the_callers_host() {
    let dir = tempfile::tempdir().expect("tmp");
    let script = dir.path().join("s.yaml");
    std::fs::write(
        &script,
        "turns:\n  - tool_calls:\n      - {name: file_create, arguments: {filename: small.txt, content: \"hello artifact\"}}\n      - {name: file_create, arguments: {filename: big.md, content: \"0123456789012345678901234567890123456789\"}}\n  - text: done\n",
    )
    .expect("script");
    let (files, addr, handle) = serve(
        dir.path(),
        Arc::new(Scripted::load(&script).expect("script loads")),
        20,
    )
    .await;

    // The client reaches the server as `localhost:PORT`: the URIs say so.
    let host = format!("localhost:{}", addr.port());
    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "write two files"}]});
    let (status, _, body) = http(
        addr,
        &host,
        "POST",
        "/",
        Some(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}})),
    )
    .await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&body).expect("json");
    let task = &v["result"];
    assert_eq!(task["status"]["state"], "completed", "{task}");
    let id = task["id"].as_str().expect("id");
    let arts = task["artifacts"].as_array().expect("artifacts");
    let find = |name: &str| {
        arts.iter()
            .find(|a| a["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing: {arts:?}"))
    };
    let small = find("small.txt");
    assert_eq!(
        small["parts"][0]["file"],
        json!({"uri": format!("http://{host}/artifacts/{id}/small.txt"), "mimeType": "text/plain", "name": "small.txt"})
    );
    // 14 bytes <= 20: inline too, base64 of the content.
    assert_eq!(small["parts"][1]["file"]["bytes"], "aGVsbG8gYXJ0aWZhY3Q=");
    // 40 bytes > 20: the URI only.
    let big = find("big.md");
    assert_eq!(big["parts"].as_array().map(Vec::len), Some(1), "{big}");

    let (status, head, bytes) = http(
        addr,
        &host,
        "GET",
        &format!("/artifacts/{id}/small.txt"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain"),
        "{head}"
    );
    assert!(head.contains("sandbox"), "{head}");
    assert_eq!(bytes, b"hello artifact");

    // Without a token the Host must name loopback, as for POST /.
    let (status, _, _) = http(
        addr,
        "attacker.example",
        "GET",
        &format!("/artifacts/{id}/small.txt"),
        None,
    )
    .await;
    assert_eq!(status, 403);
    // Only GET.
    let (status, _, _) = http(
        addr,
        &host,
        "POST",
        &format!("/artifacts/{id}/small.txt"),
        None,
    )
    .await;
    assert_eq!(status, 405);

    // The file swapped for a symlink to a file outside: not followed.
    let outside = dir.path().join("secret.txt");
    std::fs::write(&outside, "outside the files dir").expect("write");
    // The task's files are in its conversation's workspace (`files/ws-<id>/`), not a shared dir.
    let ctx_id = task["contextId"].as_str().expect("contextId");
    let workspace = files.join(forge_runtime::workspace_id(ctx_id));
    let target = std::fs::read_dir(&workspace)
        .expect("the task's workspace")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n == "big.md"))
        .expect("big.md written");
    std::fs::remove_file(&target).expect("rm");
    std::os::unix::fs::symlink(&outside, &target).expect("symlink");
    // The artifact is the copy captured when the tool made it: the same bytes, never the link's.
    let (status, _, bytes) =
        http(addr, &host, "GET", &format!("/artifacts/{id}/big.md"), None).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    assert_eq!(bytes, b"0123456789012345678901234567890123456789");
    assert!(!String::from_utf8_lossy(&bytes).contains("outside the files dir"));
    handle.shutdown().await;
}

/// A model that writes the user's message to `report.txt`, then writes it again with " (second)"
/// appended, then answers.
struct EchoWriter;

#[async_trait::async_trait]
impl forge_llm::Provider for EchoWriter {
    fn name(&self) -> &str {
        "echo-writer"
    }
    fn model(&self) -> &str {
        "echo-writer"
    }
    fn host(&self) -> Option<String> {
        None
    }
    async fn chat(
        &self,
        req: &forge_llm::ChatRequest,
        _cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<forge_llm::ChatResponse, forge_llm::ProviderError> {
        use forge_llm::Message;
        let last_user = req
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User(_)))
            .expect("a user message");
        let Message::User(text) = &req.messages[last_user] else {
            unreachable!("found as a user message")
        };
        let turn = req.messages[last_user..]
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let write = |content: String| forge_llm::ToolCall {
            id: format!("c{turn}"),
            name: "file_create".into(),
            arguments: json!({"filename": "report.txt", "content": content}),
        };
        Ok(match turn {
            0 => forge_llm::ChatResponse {
                tool_calls: vec![write(text.clone())],
                ..Default::default()
            },
            1 => forge_llm::ChatResponse {
                tool_calls: vec![write(format!("{text} (second)"))],
                ..Default::default()
            },
            _ => forge_llm::ChatResponse {
                text: "done".into(),
                ..Default::default()
            },
        })
    }
}

fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(b))
}

#[tokio::test]
async fn two_conversations_writing_report_txt_each_keep_their_own_immutable_bytes() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().expect("tmp");
    let (files, addr, handle) = serve(dir.path(), Arc::new(EchoWriter), 1024).await;
    let host = addr.to_string();

    // Two conversations, each one task writing report.txt twice.
    let mut tasks = Vec::new();
    for (ctx, text) in [("conv-a", "bytes of A"), ("conv-b", "bytes of B")] {
        let msg = json!({"kind": "message", "role": "user", "messageId": format!("m-{ctx}"), "contextId": ctx, "parts": [{"kind": "text", "text": text}]});
        let (status, _, body) = http(
            addr,
            &host,
            "POST",
            "/",
            Some(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}})),
        )
        .await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).expect("json");
        let task = v["result"].clone();
        assert_eq!(task["status"]["state"], "completed", "{task}");
        assert_eq!(task["contextId"], ctx, "{task}");
        tasks.push((ctx, text, task));
    }

    let check = |task: &Value, name: &str, want: &[u8]| {
        let arts = task["artifacts"].as_array().expect("artifacts");
        let a = arts
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("{name} missing: {arts:?}"));
        let inline = a["parts"][1]["file"]["bytes"].as_str().expect("inline");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inline)
            .expect("base64");
        assert_eq!(bytes, want, "{name} inline");
        assert_eq!(a["metadata"]["sha256"], sha256_hex(want), "{a}");
        let result = arts
            .iter()
            .find(|a| a["name"] == "result")
            .expect("result artifact");
        let rec = result["parts"][0]["data"]["artifacts"]
            .as_array()
            .expect("result artifacts")
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in the result object: {result}"));
        assert_eq!(rec["sha256"], sha256_hex(want), "{rec}");
    };

    for (ctx, text, task) in &tasks {
        // The second write of the same name is kept under a distinct name, the first unchanged.
        check(task, "report.txt", text.as_bytes());
        check(task, "report-2.txt", format!("{text} (second)").as_bytes());
        // Each conversation wrote into its own workspace.
        let ws = files.join(forge_runtime::workspace_id(ctx));
        assert_eq!(
            std::fs::read(ws.join("report.txt")).expect("the workspace file"),
            format!("{text} (second)").as_bytes()
        );
    }

    // The files on disk are overwritten (and one deleted) after the artifacts were made: every
    // artifact still serves its own bytes, over HTTP too.
    std::fs::write(
        files
            .join(forge_runtime::workspace_id("conv-a"))
            .join("report.txt"),
        "overwritten",
    )
    .expect("overwrite");
    std::fs::remove_file(
        files
            .join(forge_runtime::workspace_id("conv-b"))
            .join("report.txt"),
    )
    .expect("rm");
    for (_, text, task) in &tasks {
        let id = task["id"].as_str().expect("id");
        for (name, want) in [
            ("report.txt", text.to_string()),
            ("report-2.txt", format!("{text} (second)")),
        ] {
            let (status, head, bytes) =
                http(addr, &host, "GET", &format!("/artifacts/{id}/{name}"), None).await;
            assert_eq!(status, 200, "{head}");
            assert_eq!(bytes, want.as_bytes(), "{name} of {id}");
        }
        // tasks/get gives the same inline bytes and SHA-256 as when the task ended.
        let (status, _, body) = http(
            addr,
            &host,
            "POST",
            "/",
            Some(&json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}})),
        )
        .await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).expect("json");
        check(&v["result"], "report.txt", text.as_bytes());
    }
    handle.shutdown().await;
}
