//! The [`Tool`] trait: a named, described, JSON-schema'd async function a model can call.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What a tool call runs with. Cheap to clone.
#[derive(Clone)]
pub struct ToolContext {
    /// The session this call belongs to (a task or a conversation). Browser tools keep one browser
    /// context per session key.
    pub session_key: String,
    /// Cancelled when the task is cancelled; long-running tools must stop promptly.
    pub cancel: CancellationToken,
    /// The egress HTTP client (the one policy); `None` only in tests of tools that need no network.
    pub egress: Option<Arc<forge_egress::client::EgressClient>>,
    /// This call's workspace: the files directory of its conversation, MCP session or one-off run
    /// (`.forge/files/ws-<id>/` under the agent dir), chosen by the runtime. Tools read and write
    /// files only here, and run programs here.
    pub files_dir: PathBuf,
    /// The time limit for this call (from the skill's `timeout_hint` when given).
    pub timeout: Option<Duration>,
    /// The task this call belongs to (the A2A task id, or a one-off run's), when there is one;
    /// `session_key` is then its conversation. Audit events of the call name it.
    pub task_id: Option<String>,
    /// The agent's resolved secrets (forge.yaml `secrets:`), usable by reference only where
    /// each is bound; empty unless the runtime set them.
    pub secrets: crate::secrets::Secrets,
}

impl ToolContext {
    /// A context for `session_key` writing into `files_dir`, with no egress client and no timeout.
    pub fn new(session_key: impl Into<String>, files_dir: impl Into<PathBuf>) -> Self {
        Self {
            session_key: session_key.into(),
            cancel: CancellationToken::new(),
            egress: None,
            files_dir: files_dir.into(),
            timeout: None,
            task_id: None,
            secrets: crate::secrets::Secrets::default(),
        }
    }
}

/// The result of a successful tool call: the text the model will see.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model sees. Outside content in it is already fenced (see [`crate::fence`]).
    pub text: String,
    /// Optional structured form of the same result (for `forge tool call` JSON lines and audit).
    pub data: Option<Value>,
}

impl ToolOutput {
    /// A plain-text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            data: None,
        }
    }

    /// A JSON result; the text is the compact JSON.
    pub fn json(value: Value) -> Self {
        Self {
            text: value.to_string(),
            data: Some(value),
        }
    }
}

/// Why a tool call failed. The message is shown to the model, so it says what happened and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The input did not match the tool's schema or made no sense.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The egress policy refused a request; Display is the refusal's own
    /// (`blocked by egress policy: ...`).
    #[error("{0}")]
    Blocked(forge_egress::EgressRefusal),
    /// A guardrail refused the input or the output.
    #[error("blocked by guardrail: {0}")]
    Guardrail(String),
    /// The call took longer than its time limit.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The task was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// Anything else, with a message that says what to do.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// A short machine-readable name of the error's kind: the `error_kind` of `tool_exec` audit
    /// events and the `kind` of `forge tool call` result lines.
    pub fn kind(&self) -> &'static str {
        match self {
            ToolError::InvalidInput(_) => "invalid_input",
            ToolError::Blocked(_) => "egress_blocked",
            ToolError::Guardrail(_) => "guardrail",
            ToolError::Timeout(_) => "timeout",
            ToolError::Cancelled => "cancelled",
            ToolError::Failed(_) => "failed",
        }
    }
}

/// A tool a model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by (`http_request`, `browser_navigate`, ...).
    fn name(&self) -> &str;
    /// One or two sentences for the model.
    fn description(&self) -> &str;
    /// The JSON Schema of the input object.
    fn input_schema(&self) -> Value;
    /// Run the tool.
    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError>;
}
