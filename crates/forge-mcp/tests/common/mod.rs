//! A small ToolHost for the tests, built from real forge_tools::Tool values: `echo`, `slow`
//! (sleeps, honours cancellation), `stats` (cancellations seen), `fail` (an egress-style refusal), `browser_screenshot` (writes a
//! tiny PNG) and `env_names` (the process's environment variable names).

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forge_mcp::{SessionKey, ToolHost, ToolInfo};
use forge_tools::{Registry, Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

/// A 1x1 PNG.
pub(crate) const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

struct Echo;
#[async_trait]
impl Tool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echo the text back."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let text = input
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`text` is required".into()))?;
        Ok(ToolOutput {
            text: forge_tools::fence::wrap("source=test", text),
            data: Some(json!({"echo": text, "session": ctx.session_key})),
        })
    }
}

/// Sleeps `seconds` (default 10), in 50 ms steps, stopping when cancelled.
pub(crate) struct Slow {
    pub cancelled: Arc<AtomicUsize>,
}
#[async_trait]
impl Tool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> &str {
        "Wait a while."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"seconds": {"type": "number"}}})
    }
    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let secs = input.get("seconds").and_then(Value::as_f64).unwrap_or(10.0);
        let steps = (secs * 20.0) as u64;
        for _ in 0..steps {
            if ctx.cancel.is_cancelled() {
                self.cancelled.fetch_add(1, Ordering::SeqCst);
                return Err(ToolError::Cancelled);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(ToolOutput::text(format!("waited {secs}s")))
    }
}

struct Fail;
#[async_trait]
impl Tool for Fail {
    fn name(&self) -> &str {
        "fail"
    }
    fn description(&self) -> &str {
        "Always refused."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Blocked(
            forge_egress::EgressRefusal::MetadataHost {
                host: "evil.example".into(),
            }
            .rewritten("host evil.example is not in the allowlist"),
        ))
    }
}

struct Screenshot {
    dir: PathBuf,
}
#[async_trait]
impl Tool for Screenshot {
    fn name(&self) -> &str {
        "browser_screenshot"
    }
    fn description(&self) -> &str {
        "Take a screenshot (test: writes a 1x1 PNG)."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object", "properties": {"bytes": {"type": "integer"}}})
    }
    async fn execute(&self, _: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        // `bytes`: pad the PNG to this size (to test the cap).
        let mut data = PNG.to_vec();
        if let Some(n) = input.get("bytes").and_then(Value::as_u64) {
            data.resize(n as usize, 0);
        }
        let path = self.dir.join("shot.png");
        std::fs::write(&path, &data).map_err(|e| ToolError::Failed(e.to_string()))?;
        Ok(ToolOutput::json(json!({
            "filename": "shot.png",
            "mime_type": "image/png",
            "path": path.display().to_string(),
            "size_bytes": data.len(),
        })))
    }
}

struct EnvNames;
#[async_trait]
impl Tool for EnvNames {
    fn name(&self) -> &str {
        "env_names"
    }
    fn description(&self) -> &str {
        "The names of this process's environment variables."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolOutput, ToolError> {
        let mut names: Vec<String> = std::env::vars_os()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(ToolOutput::json(json!({ "names": names })))
    }
}

/// How many `slow` calls saw their cancellation.
struct Stats {
    cancelled: Arc<AtomicUsize>,
}
#[async_trait]
impl Tool for Stats {
    fn name(&self) -> &str {
        "stats"
    }
    fn description(&self) -> &str {
        "Counters of this test host."
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _: &ToolContext, _: Value) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::json(
            json!({"cancelled": self.cancelled.load(Ordering::SeqCst)}),
        ))
    }
}

/// The test host: a registry of the tools above, session bookkeeping.
pub(crate) struct TestHost {
    pub registry: Registry,
    pub files: PathBuf,
    pub opened: AtomicUsize,
    pub closed: Mutex<Vec<String>>,
    pub cancelled: Arc<AtomicUsize>,
}

impl TestHost {
    pub(crate) fn new(files: PathBuf) -> Arc<TestHost> {
        let cancelled = Arc::new(AtomicUsize::new(0));
        let mut registry = Registry::new();
        registry.register(Arc::new(Echo));
        registry.register(Arc::new(Slow {
            cancelled: cancelled.clone(),
        }));
        registry.register(Arc::new(Fail));
        registry.register(Arc::new(Screenshot { dir: files.clone() }));
        registry.register(Arc::new(EnvNames));
        registry.register(Arc::new(Stats {
            cancelled: cancelled.clone(),
        }));
        Arc::new(TestHost {
            registry,
            files,
            opened: AtomicUsize::new(0),
            closed: Mutex::new(Vec::new()),
            cancelled,
        })
    }

    pub(crate) fn closed(&self) -> Vec<String> {
        self.closed.lock().unwrap().clone()
    }
}

#[async_trait]
impl ToolHost for TestHost {
    fn tools(&self) -> Vec<ToolInfo> {
        self.registry
            .list()
            .iter()
            .map(|t| ToolInfo {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect()
    }
    fn instructions(&self) -> String {
        "Allowed hosts: 127.0.0.1:8080. Everything else is refused.".into()
    }
    async fn open_session(&self) -> SessionKey {
        let n = self.opened.fetch_add(1, Ordering::SeqCst);
        format!("mcp-{n}")
    }
    async fn close_session(&self, key: SessionKey) {
        self.closed.lock().unwrap().push(key);
    }
    async fn call(
        &self,
        session: &SessionKey,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self
            .registry
            .get(name)
            .ok_or_else(|| ToolError::Failed(format!("no tool {name}")))?;
        let mut ctx = ToolContext::new(session.clone(), self.files.clone());
        ctx.cancel = cancel;
        tool.execute(&ctx, args).await
    }
}

/// Poll `f` every 20 ms for at most `limit`.
pub(crate) async fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f()
}
