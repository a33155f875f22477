//! A message is run at most once, keyed by its conversation and `messageId` in the state store
//! (issue 20, point 6): replica A accepted a message and died; the message then reaches replica
//! B, which forwards it to A (the holder of the conversation's browser), cannot reach it, and
//! answers with A's task instead of running the message a second time. A message retried on the
//! same replica (its answer was lost) gets the same task too. A real SQLite store, real sockets,
//! a scripted model wrapped to count the turns it is asked for.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forge_llm::scripted::Scripted;
use forge_llm::{ChatRequest, ChatResponse, Provider, ProviderError};
use forge_runtime::{agent_card, serve_a2a, AgentLoop, AuditLog, CardInfo, LoopConfig, TaskStore};
use forge_state::{ContextRecord, SqlStore, StateStore, StoreLocation, TaskRecord};
use forge_tools::Registry;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// The scripted model, counting the turns asked of it.
struct Counting {
    inner: Scripted,
    turns: Mutex<usize>,
}

#[async_trait]
impl Provider for Counting {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn model(&self) -> &str {
        self.inner.model()
    }
    fn host(&self) -> Option<String> {
        None
    }
    async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        *self.turns.lock().unwrap() += 1;
        self.inner.chat(req, cancel).await
    }
}

async fn rpc(addr: std::net::SocketAddr, body: &Value) -> Value {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let payload = body.to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).to_string();
    let (_, body) = text.split_once("\r\n\r\n").expect("a head");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn send(ctx: &str, message_id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "kind": "message", "role": "user", "messageId": message_id, "contextId": ctx,
        "parts": [{"kind": "text", "text": "do it once"}]}}})
}

#[tokio::test]
async fn a_message_accepted_by_a_replica_that_died_is_not_run_again_by_another() {
    let dir = tempfile::tempdir().expect("tmp");
    let store: Arc<dyn StateStore> = Arc::new(
        SqlStore::open(&StoreLocation::Sqlite(dir.path().join("state.db")))
            .await
            .expect("store"),
    );
    // Replica A: alive a moment ago, at an address where nothing answers any more (it died).
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let a_addr = format!("http://{}/", gone.local_addr().expect("addr"));
    drop(gone);
    store
        .heartbeat("replica-a", &a_addr)
        .await
        .expect("A's lease");
    // A accepted message msg-1 of conversation ctx-1 as task-a (it holds the conversation's
    // browser) and was running it when it died.
    assert_eq!(
        store
            .claim_message("ctx-1", "msg-1", "task-a", "replica-a")
            .await
            .expect("A's claim"),
        None
    );
    let now = forge_state::now_ms();
    store
        .save_task(&TaskRecord {
            id: "task-a".into(),
            context_id: "ctx-1".into(),
            state: "working".into(),
            replica: Some("replica-a".into()),
            task: json!({"kind": "task", "id": "task-a", "contextId": "ctx-1",
                "status": {"state": "working"}, "history": [], "artifacts": []}),
            result: None,
            created_ms: now,
            updated_ms: now,
        })
        .await
        .expect("A's task");
    store
        .save_context(&ContextRecord {
            id: "ctx-1".into(),
            messages: json!([]),
            browser_replica: Some("replica-a".into()),
            scope: None,
            updated_ms: now,
        })
        .await
        .expect("A holds the browser");

    // Replica B on the same store.
    let script = dir.path().join("s.yaml");
    std::fs::write(&script, "turns:\n  - text: ran on B\n").expect("script");
    let model = Arc::new(Counting {
        inner: Scripted::load(&script).expect("script loads"),
        turns: Mutex::new(0),
    });
    let agent = Arc::new(AgentLoop {
        provider: model.clone(),
        tools: Arc::new(Registry::new()),
        system_prompt: "test".into(),
        audit: AuditLog::to_writer(Box::new(std::io::sink())),
        config: LoopConfig::default(),
        files_dir: dir.path().join("files"),
        egress: None,
        sessions: None,
    });
    let tasks = TaskStore::with_state(agent, store.clone(), "replica-b".into(), 1 << 20);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let b = listener.local_addr().expect("addr");
    let info = CardInfo {
        name: "t".into(),
        description: "t".into(),
        version: "0.1.0".into(),
        skills: vec![],
    };
    let handle = serve_a2a(
        listener,
        tasks,
        agent_card(&info, &format!("http://{b}/"), false),
        None,
    )
    .expect("serve");

    // msg-1 reaches B (the client retried after A died): B tries A, cannot reach it, and
    // answers with A's task; the model is not asked anything.
    let r = rpc(b, &send("ctx-1", "msg-1")).await;
    assert_eq!(r["result"]["id"], "task-a", "{r}");
    assert_eq!(r["result"]["status"]["state"], "working", "{r}");
    assert_eq!(*model.turns.lock().unwrap(), 0, "msg-1 was not run again");

    // A new message runs on B, once; sent again (its answer was lost), the same task comes back.
    let first = rpc(b, &send("ctx-1", "msg-2")).await;
    assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
    assert_eq!(
        first["result"]["status"]["message"]["parts"][0]["text"],
        "ran on B"
    );
    let turns = *model.turns.lock().unwrap();
    assert_eq!(turns, 1, "one model turn for msg-2");
    let again = rpc(b, &send("ctx-1", "msg-2")).await;
    assert_eq!(again["result"]["id"], first["result"]["id"], "{again}");
    assert_eq!(again["result"]["status"]["state"], "completed");
    assert_eq!(*model.turns.lock().unwrap(), turns, "msg-2 ran once");
    handle.shutdown().await;
}
