//! The agent loop with the scripted provider and tools in a plain registry: independent calls run
//! concurrently, calls of the stateful `browser_*` family run in order, large outputs are truncated
//! with a note the model sees, max_iterations stops a model that never answers, bad calls become
//! tool errors the model sees, artifacts are collected, cancellation reaches the tool, and the
//! task's session is closed at the end.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forge_llm::scripted::Scripted;
use forge_llm::{ChatRequest, ChatResponse, Message, Provider, ProviderError};
use forge_runtime::AuditLog;
use forge_runtime::{AgentLoop, LoopConfig, LoopError, LoopEvent, SessionCloser};
use forge_tools::{Registry, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Waits at a shared barrier: succeeds only if `n` calls are in flight at once (bounded wait).
struct Rendezvous {
    barrier: Arc<tokio::sync::Barrier>,
}

#[async_trait]
impl Tool for Rendezvous {
    fn name(&self) -> &str {
        "rendezvous"
    }
    fn description(&self) -> &str {
        "meets the other calls"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        match tokio::time::timeout(Duration::from_secs(20), self.barrier.wait()).await {
            Ok(_) => Ok(ToolOutput::text("met")),
            Err(_) => Err(ToolError::Failed(
                "the other call never ran concurrently".into(),
            )),
        }
    }
}

/// A stateful tool of the browser family: records the largest number of overlapping calls.
struct Stateful {
    name: String,
    active: Arc<AtomicUsize>,
    max_seen: Arc<AtomicUsize>,
    order: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Stateful {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        "stateful"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_seen.fetch_max(now, Ordering::SeqCst);
        for _ in 0..5 {
            tokio::task::yield_now().await;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.order
            .lock()
            .unwrap()
            .push(input["step"].as_str().unwrap_or("?").to_string());
        self.active.fetch_sub(1, Ordering::SeqCst);
        Ok(ToolOutput::text("done"))
    }
}

/// Returns a large output.
struct Big;

#[async_trait]
impl Tool for Big {
    fn name(&self) -> &str {
        "big"
    }
    fn description(&self) -> &str {
        "large output"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        let body: String = (0..5000).map(|i| format!("row {i}\n")).collect();
        Ok(ToolOutput::text(format!("BEGIN\n{body}END")))
    }
}

/// Writes a file and returns the file_create-style JSON.
struct WriteFile;

#[async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "writes a file"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        std::fs::create_dir_all(&ctx.files_dir).map_err(|e| ToolError::Failed(e.to_string()))?;
        let p = ctx.files_dir.join("out.txt");
        std::fs::write(&p, "hello").map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::json(
            json!({"filename": "out.txt", "mime_type": "text/plain", "path": p, "size_bytes": 5}),
        ))
    }
}

/// Waits for cancellation (bounded at 60 s).
struct Hang(Arc<AtomicBool>);

#[async_trait]
impl Tool for Hang {
    fn name(&self) -> &str {
        "browser_hang"
    }
    fn description(&self) -> &str {
        "waits"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        tokio::select! {
            _ = ctx.cancel.cancelled() => { self.0.store(true, Ordering::SeqCst); Err(ToolError::Cancelled) }
            _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(ToolOutput::text("late")),
        }
    }
}

#[derive(Default)]
struct Sessions(Mutex<Vec<String>>);

#[async_trait]
impl SessionCloser for Sessions {
    async fn close_session(&self, key: &str) {
        self.0.lock().unwrap().push(key.to_string());
    }
}

/// Wraps a provider and keeps every request it saw.
struct Recording<P> {
    inner: P,
    seen: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl<P: Provider> Provider for Recording<P> {
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
        self.seen.lock().unwrap().push(req.clone());
        self.inner.chat(req, cancel).await
    }
}

fn make_loop(
    script: &str,
    reg: Registry,
    config: LoopConfig,
    sessions: Option<Arc<Sessions>>,
) -> (AgentLoop, Arc<Recording<Scripted>>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Recording {
        inner: Scripted::parse(script, std::path::Path::new("script.yaml")).unwrap(),
        seen: Mutex::new(vec![]),
    });
    let l = AgentLoop {
        provider: provider.clone(),
        tools: Arc::new(reg),
        system_prompt: "sys".into(),
        audit: AuditLog::to_writer(Box::new(std::io::sink())),
        config,
        files_dir: dir.path().join("files"),
        egress: None,
        sessions: sessions.map(|s| s as Arc<dyn SessionCloser>),
    };
    (l, provider, dir)
}

fn last_tool_results(req: &ChatRequest) -> Vec<(String, String, bool)> {
    match req.messages.last() {
        Some(Message::ToolResults(r)) => r
            .iter()
            .map(|t| (t.name.clone(), t.content.clone(), t.is_error))
            .collect(),
        _ => vec![],
    }
}

#[tokio::test]
async fn independent_calls_run_concurrently() {
    let mut reg = Registry::new();
    reg.register(Arc::new(Rendezvous {
        barrier: Arc::new(tokio::sync::Barrier::new(2)),
    }));
    let (l, p, _d) = make_loop(
        "turns:\n  - tool_calls:\n      - {name: rendezvous}\n      - {name: rendezvous}\n  - text: ok\n",
        reg,
        LoopConfig::default(),
        None,
    );
    let out = l
        .run_task("t1", "go", vec![], CancellationToken::new(), None)
        .await
        .unwrap();
    assert_eq!(out.answer, "ok");
    let seen = p.seen.lock().unwrap();
    let results = last_tool_results(&seen[1]);
    assert_eq!(
        results,
        vec![
            ("rendezvous".into(), "met".into(), false),
            ("rendezvous".into(), "met".into(), false)
        ]
    );
}

#[tokio::test]
async fn browser_family_calls_run_in_order_one_at_a_time_and_the_session_is_closed() {
    let active = Arc::new(AtomicUsize::new(0));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(Mutex::new(vec![]));
    let mut reg = Registry::new();
    for n in ["browser_navigate", "browser_fill"] {
        reg.register(Arc::new(Stateful {
            name: n.into(),
            active: active.clone(),
            max_seen: max_seen.clone(),
            order: order.clone(),
        }));
    }
    let sessions = Arc::new(Sessions::default());
    let (l, _p, _d) = make_loop(
        "turns:\n  - tool_calls:\n      - {name: browser_navigate, arguments: {step: a}}\n      - {name: browser_fill, arguments: {step: b}}\n      - {name: browser_navigate, arguments: {step: c}}\n  - text: ok\n",
        reg,
        LoopConfig::default(),
        Some(sessions.clone()),
    );
    l.run_task("task-42", "go", vec![], CancellationToken::new(), None)
        .await
        .unwrap();
    assert_eq!(max_seen.load(Ordering::SeqCst), 1);
    assert_eq!(*order.lock().unwrap(), vec!["a", "b", "c"]);
    assert_eq!(*sessions.0.lock().unwrap(), vec!["task-42".to_string()]);
}

#[tokio::test]
async fn large_outputs_are_truncated_with_a_note_the_model_sees() {
    let mut reg = Registry::new();
    reg.register(Arc::new(Big));
    let cfg = LoopConfig {
        max_tool_output_chars: 2_000,
        ..Default::default()
    };
    let (l, p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: big}]\n  - text: ok\n",
        reg,
        cfg,
        None,
    );
    l.run_task("t", "go", vec![], CancellationToken::new(), None)
        .await
        .unwrap();
    let seen = p.seen.lock().unwrap();
    let (_, content, _) = &last_tool_results(&seen[1])[0];
    assert!(content.starts_with("BEGIN\n"));
    assert!(
        content.ends_with("END"),
        "the tail (where a fence closes) is kept"
    );
    assert!(content.contains("output truncated"));
    assert!(content.chars().count() < 2_300);
}

#[tokio::test]
async fn max_iterations_stops_a_model_that_never_answers() {
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::datetime::DatetimeNow));
    let script = "turns:\n".to_string() + &"  - tool_calls: [{name: datetime_now}]\n".repeat(5);
    let cfg = LoopConfig {
        max_iterations: 3,
        ..Default::default()
    };
    let (l, p, _d) = make_loop(&script, reg, cfg, None);
    let err = l
        .run_task("t", "go", vec![], CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, LoopError::MaxIterations(3)), "{err}");
    assert_eq!(p.seen.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn bad_calls_become_tool_errors_and_artifacts_are_collected() {
    let mut reg = Registry::new();
    reg.register(Arc::new(WriteFile));
    let (l, p, _d) = make_loop(
        "turns:\n  - tool_calls:\n      - {name: no_such_tool}\n      - {name: write_file}\n  - text: ok\n",
        reg,
        LoopConfig::default(),
        None,
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let out = l
        .run_task("t", "go", vec![], CancellationToken::new(), Some(tx))
        .await
        .unwrap();
    assert_eq!(out.artifacts.len(), 1);
    assert!(out.artifacts[0].ends_with("out.txt") && out.artifacts[0].is_file());
    let seen = p.seen.lock().unwrap();
    let results = last_tool_results(&seen[1]);
    assert!(
        results[0].2 && results[0].1.contains("no tool named 'no_such_tool'"),
        "{results:?}"
    );
    assert!(!results[1].2);
    let mut evs = vec![];
    while let Ok(e) = rx.try_recv() {
        evs.push(e);
    }
    assert!(evs.iter().any(
        |e| matches!(e, LoopEvent::ToolEnd { name, ok: false, .. } if name == "no_such_tool")
    ));
}

#[tokio::test]
async fn cancellation_reaches_the_tool_and_closes_the_session() {
    let saw = Arc::new(AtomicBool::new(false));
    let mut reg = Registry::new();
    reg.register(Arc::new(Hang(saw.clone())));
    let sessions = Arc::new(Sessions::default());
    let (l, _p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: browser_hang}]\n  - text: never\n",
        reg,
        LoopConfig::default(),
        Some(sessions.clone()),
    );
    let cancel = CancellationToken::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        // Cancel once the tool has started (bounded by the channel closing).
        while let Some(ev) = rx.recv().await {
            if matches!(ev, LoopEvent::ToolStart { .. }) {
                c2.cancel();
            }
        }
    });
    let err = l
        .run_task("task-c", "go", vec![], cancel, Some(tx))
        .await
        .unwrap_err();
    assert!(matches!(err, LoopError::Cancelled), "{err}");
    assert!(
        saw.load(Ordering::SeqCst),
        "the tool in flight saw the cancellation"
    );
    assert_eq!(*sessions.0.lock().unwrap(), vec!["task-c".to_string()]);
}

#[tokio::test]
async fn the_scripted_provider_reports_an_exhausted_script() {
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::datetime::DatetimeNow));
    let (l, _p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: datetime_now}]\n",
        reg,
        LoopConfig::default(),
        None,
    );
    let err = l
        .run_task("t", "go", vec![], CancellationToken::new(), None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("has 1 turns and all were played"),
        "{err}"
    );
}

#[tokio::test]
async fn history_from_an_earlier_task_reaches_the_model() {
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::datetime::DatetimeNow));
    let (l, p, _d) = make_loop(
        "turns:\n  - text: second answer\n",
        reg,
        LoopConfig::default(),
        None,
    );
    let history = vec![
        Message::User("first question".into()),
        Message::Assistant {
            text: "first answer".into(),
            tool_calls: vec![],
        },
    ];
    let out = l
        .run_task(
            "t2",
            "second question",
            history,
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.answer, "second answer");
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen[0].messages.len(), 3);
    assert_eq!(
        seen[0].messages[1],
        Message::Assistant {
            text: "first answer".into(),
            tool_calls: vec![]
        }
    );
    assert_eq!(
        out.messages.len(),
        4,
        "the conversation now holds both exchanges"
    );
}
