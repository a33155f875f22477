//! Per-task budgets and the result object, with the scripted provider and tools in a plain
//! registry: max_steps counts tool calls (a 5-step script with max_steps 2 ends `incomplete` after
//! 2 steps, with one final turn offered no tools), calls past the budget in one turn are answered
//! "not run", max_seconds stops a slow tool and ends the task `incomplete`, a task that finishes
//! is `done` with its artifacts, and the audit log's `session_end` carries the result object.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forge_llm::scripted::Scripted;
use forge_llm::{ChatRequest, ChatResponse, Message, Provider, ProviderError};
use forge_runtime::AuditLog;
use forge_runtime::{AgentLoop, LoopConfig};
use forge_runtime::{ResultStatus, SpecFields, TaskSpec};
use forge_tools::{Registry, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// Counts its calls and answers at once.
struct Step(Arc<Mutex<usize>>);

#[async_trait]
impl Tool for Step {
    fn name(&self) -> &str {
        "step"
    }
    fn description(&self) -> &str {
        "one step"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _ctx: &ToolContext, _input: Value) -> Result<ToolOutput, ToolError> {
        *self.0.lock().unwrap() += 1;
        Ok(ToolOutput::text("stepped"))
    }
}

/// Waits until cancelled (bounded at 60 s), then says it was stopped.
struct Slow(Arc<AtomicBool>);

#[async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
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
        let p = ctx.files_dir.join("notes.txt");
        std::fs::write(&p, "hello").map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::json(
            json!({"filename": "notes.txt", "mime_type": "text/plain", "path": p, "size_bytes": 5}),
        ))
    }
}

/// Wraps a provider and keeps every request it saw.
struct Recording {
    inner: Scripted,
    seen: Mutex<Vec<ChatRequest>>,
}

#[async_trait]
impl Provider for Recording {
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

/// An in-memory audit sink.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn events(&self) -> Vec<Value> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn make_loop(
    script: &str,
    reg: Registry,
    audit: Buf,
) -> (AgentLoop, Arc<Recording>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(Recording {
        inner: Scripted::parse(script, std::path::Path::new("script.yaml")).unwrap(),
        seen: Mutex::new(vec![]),
    });
    let l = AgentLoop {
        provider: provider.clone(),
        tools: Arc::new(reg),
        system_prompt: "sys".into(),
        audit: AuditLog::to_writer(Box::new(audit)),
        config: LoopConfig::default(),
        files_dir: dir.path().join("files"),
        egress: None,
        sessions: None,
    };
    (l, provider, dir)
}

fn five_steps() -> String {
    let mut s = "turns:\n".to_string();
    for i in 1..=5 {
        s.push_str(&format!(
            "  - text: \"notes after {} steps\"\n    tool_calls: [{{name: step}}]\n",
            i - 1
        ));
    }
    s.push_str("  - text: finished\n");
    s
}

#[tokio::test]
async fn max_steps_2_on_a_5_step_script_ends_incomplete_with_2_steps() {
    let count = Arc::new(Mutex::new(0));
    let mut reg = Registry::new();
    reg.register(Arc::new(Step(count.clone())));
    let audit = Buf::default();
    let (l, p, _d) = make_loop(&five_steps(), reg, audit.clone());
    let spec = l
        .resolve_spec(
            &TaskSpec {
                max_steps: Some(2),
                ..Default::default()
            },
            SpecFields::CLI,
        )
        .unwrap();
    let run = l
        .run_task_with(
            "t1",
            &forge_runtime::BrowserUse::own("t1"),
            "go",
            vec![],
            CancellationToken::new(),
            None,
            &spec,
        )
        .await;
    let out = run.outcome.unwrap();
    assert_eq!(run.result.status, ResultStatus::Incomplete);
    assert_eq!(run.result.steps, 2);
    assert_eq!(*count.lock().unwrap(), 2, "exactly two tool calls ran");
    assert_eq!(out.incomplete.as_deref(), Some("max_steps 2 reached"));
    // The third turn is the final one: no tools offered, the budget named; its text (the
    // script's third turn) is the answer and its tool call is not run.
    let seen = p.seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(!seen[1].tools.is_empty());
    assert!(seen[2].tools.is_empty(), "the final turn offers no tools");
    assert!(seen[2]
        .system
        .contains("budget is spent (max_steps 2 reached)"));
    assert_eq!(run.result.answer, "notes after 2 steps");
    // session_end carries the result object.
    let ev = audit.events();
    let end = ev
        .iter()
        .find(|e| e["event"] == "session_end")
        .expect("session_end");
    assert_eq!(end["result"]["status"], "incomplete");
    assert_eq!(end["result"]["steps"], 2);
    assert_eq!(end["result"]["answer"], "notes after 2 steps");
    let start = ev.iter().find(|e| e["event"] == "session_start").unwrap();
    assert_eq!(start["max_steps"], 2);
}

#[tokio::test]
async fn calls_past_the_step_budget_in_one_turn_are_answered_not_run() {
    let count = Arc::new(Mutex::new(0));
    let mut reg = Registry::new();
    reg.register(Arc::new(Step(count.clone())));
    let (l, p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: step}, {name: step}, {name: step}]\n  - text: summary\n",
        reg,
        Buf::default(),
    );
    let spec = l
        .resolve_spec(
            &TaskSpec {
                max_steps: Some(2),
                ..Default::default()
            },
            SpecFields::A2A,
        )
        .unwrap();
    let run = l
        .run_task_with(
            "t2",
            &forge_runtime::BrowserUse::own("t2"),
            "go",
            vec![],
            CancellationToken::new(),
            None,
            &spec,
        )
        .await;
    assert_eq!(run.result.status, ResultStatus::Incomplete);
    assert_eq!(run.result.steps, 2);
    assert_eq!(*count.lock().unwrap(), 2);
    let seen = p.seen.lock().unwrap();
    let Some(Message::ToolResults(results)) = seen[1].messages.last() else {
        panic!("the final turn sees the tool results");
    };
    assert_eq!(results.len(), 3, "every call has a result");
    assert!(!results[0].is_error && !results[1].is_error);
    assert!(results[2].is_error);
    assert!(
        results[2]
            .content
            .contains("not run: this task's step budget is spent"),
        "{}",
        results[2].content
    );
    assert_eq!(run.result.answer, "summary");
}

#[tokio::test]
async fn max_seconds_stops_a_slow_tool_and_ends_incomplete() {
    let stopped = Arc::new(AtomicBool::new(false));
    let mut reg = Registry::new();
    reg.register(Arc::new(Slow(stopped.clone())));
    let (l, p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: slow}]\n  - text: \"ran out of time\"\n",
        reg,
        Buf::default(),
    );
    let spec = l
        .resolve_spec(
            &TaskSpec {
                max_seconds: Some(1),
                ..Default::default()
            },
            SpecFields::A2A,
        )
        .unwrap();
    let run = l
        .run_task_with(
            "t3",
            &forge_runtime::BrowserUse::own("t3"),
            "go",
            vec![],
            CancellationToken::new(),
            None,
            &spec,
        )
        .await;
    assert_eq!(run.result.status, ResultStatus::Incomplete);
    assert!(
        stopped.load(Ordering::SeqCst),
        "the slow tool was cancelled"
    );
    assert_eq!(run.result.steps, 1);
    assert_eq!(run.result.answer, "ran out of time");
    let seen = p.seen.lock().unwrap();
    assert!(seen[1].tools.is_empty());
    assert!(seen[1].system.contains("max_seconds 1 reached"));
}

#[tokio::test]
async fn a_finished_task_is_done_with_its_steps_and_artifacts() {
    let mut reg = Registry::new();
    reg.register(Arc::new(WriteFile));
    let (l, _p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: write_file}]\n  - text: written\n",
        reg,
        Buf::default(),
    );
    let spec = l.default_spec();
    assert_eq!((spec.max_steps, spec.max_seconds), (60, 300));
    let run = l
        .run_task_with(
            "t4",
            &forge_runtime::BrowserUse::own("t4"),
            "go",
            vec![],
            CancellationToken::new(),
            None,
            &spec,
        )
        .await;
    let r = run.result;
    assert_eq!(r.status, ResultStatus::Done);
    assert_eq!((r.steps, r.answer.as_str()), (1, "written"));
    assert_eq!(r.artifacts.len(), 1);
    assert_eq!(r.artifacts[0].name, "notes.txt");
    assert_eq!(r.artifacts[0].mime_type, "text/plain");
    assert_eq!(r.artifacts[0].size_bytes, 5);
    assert!(r.artifacts[0].uri.starts_with("file://"));
    assert!(r.navigations.is_empty() && r.blocked.is_empty());
    let j = r.to_json();
    for k in [
        "status",
        "answer",
        "steps",
        "seconds",
        "navigations",
        "blocked",
        "artifacts",
    ] {
        assert!(j.get(k).is_some(), "{k} in {j}");
    }
    assert!(
        r.summary().starts_with("done in 1 step, "),
        "{}",
        r.summary()
    );
}

#[tokio::test]
async fn a_cancelled_task_is_canceled() {
    let stopped = Arc::new(AtomicBool::new(false));
    let mut reg = Registry::new();
    reg.register(Arc::new(Slow(stopped.clone())));
    let (l, _p, _d) = make_loop(
        "turns:\n  - tool_calls: [{name: slow}]\n  - text: never\n",
        reg,
        Buf::default(),
    );
    let cancel = CancellationToken::new();
    let c = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c.cancel();
    });
    let spec = l.default_spec();
    let run = l
        .run_task_with(
            "t5",
            &forge_runtime::BrowserUse::own("t5"),
            "go",
            vec![],
            cancel,
            None,
            &spec,
        )
        .await;
    assert_eq!(run.result.status, ResultStatus::Canceled);
    assert!(run.outcome.is_err());
}
