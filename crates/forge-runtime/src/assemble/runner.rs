//! [`ToolRunner`]: the single call path for tools, used by the agent loop and `forge tool call`:
//! lookup, `deny_commands` on the input, the time limit and cancellation, the tool itself (which
//! fences outside content), then `deny_output` (block, then redact) on the text and the data.
//! A guardrail hit is returned as [`ToolError::Guardrail`] (the model sees it; the task goes on)
//! and reported to [`ToolEvents`].

use std::sync::Arc;

use forge_tools::{Registry, ToolContext, ToolError, ToolOutput};
use serde::Serialize;
use serde_json::Value;

use crate::guardrails::{GuardrailHit, Guardrails};

/// Where in a call a guardrail acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailStage {
    ToolInput,
    ToolOutput,
}

/// A guardrail acted on a tool call.
#[derive(Debug, Clone, Serialize)]
pub struct GuardrailEvent {
    pub session_key: String,
    pub tool: String,
    pub stage: GuardrailStage,
    /// `blocked` or `redacted`.
    pub action: &'static str,
    /// The rule, for `blocked`.
    pub hit: Option<GuardrailHit>,
    /// Number of replacements, for `redacted`.
    pub redactions: usize,
}

/// Receives guardrail events (the runtime turns them into `guardrail_check` audit events).
pub trait ToolEvents: Send + Sync {
    fn on_guardrail(&self, event: &GuardrailEvent);
}

/// The tool call path. Cheap to clone; share it across tasks.
#[derive(Clone)]
pub struct ToolRunner {
    registry: Arc<Registry>,
    guardrails: Arc<Guardrails>,
    events: Option<Arc<dyn ToolEvents>>,
}

impl ToolRunner {
    /// A runner over `registry` with `guardrails`.
    pub fn new(
        registry: Arc<Registry>,
        guardrails: Arc<Guardrails>,
        events: Option<Arc<dyn ToolEvents>>,
    ) -> Self {
        Self {
            registry,
            guardrails,
            events,
        }
    }

    /// The tools this runner can call.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    fn report(&self, ev: GuardrailEvent) {
        tracing::info!(tool = %ev.tool, stage = ?ev.stage, action = ev.action, "guardrail");
        if let Some(e) = &self.events {
            e.on_guardrail(&ev);
        }
    }

    /// Run tool `name` with `input` in `ctx`.
    pub async fn execute(
        &self,
        name: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(tool) = self.registry.get(name) else {
            let names: Vec<&str> = self.registry.list().iter().map(|t| t.name()).collect();
            return Err(ToolError::InvalidInput(format!(
                "there is no tool called {name:?} for this agent; available: {}",
                names.join(", ")
            )));
        };
        if let Err(hit) = self.guardrails.check_input(name, &input) {
            let msg = hit.to_string();
            self.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolInput,
                action: "blocked",
                hit: Some(hit),
                redactions: 0,
            });
            return Err(ToolError::Guardrail(msg));
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let run = tool.execute(ctx, input);
        let out = tokio::select! {
            r = async {
                match ctx.timeout {
                    Some(t) => tokio::time::timeout(t, run).await.unwrap_or(Err(ToolError::Timeout(t))),
                    None => run.await,
                }
            } => r,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        match out {
            Ok(out) => self.filter_output(name, ctx, out),
            Err(e) => Err(self.filter_error(name, ctx, e)),
        }
    }

    /// A tool error can quote outside content (a browser error carries a fresh observation of
    /// the page): its message gets the same output guardrails as a result (block, then redact).
    fn filter_error(&self, name: &str, ctx: &ToolContext, e: ToolError) -> ToolError {
        let rebuild: fn(String) -> ToolError = match &e {
            ToolError::InvalidInput(_) => ToolError::InvalidInput,
            ToolError::Blocked(_) => ToolError::Blocked,
            ToolError::Failed(_) => ToolError::Failed,
            _ => return e,
        };
        let msg = match &e {
            ToolError::InvalidInput(m) | ToolError::Blocked(m) | ToolError::Failed(m) => m,
            _ => return e,
        };
        match self.guardrails.check_output(name, msg) {
            Err(hit) => {
                let why = hit.to_string();
                self.report(GuardrailEvent {
                    session_key: ctx.session_key.clone(),
                    tool: name.to_string(),
                    stage: GuardrailStage::ToolOutput,
                    action: "blocked",
                    hit: Some(hit),
                    redactions: 0,
                });
                ToolError::Guardrail(why)
            }
            Ok(r) if r.redactions > 0 => {
                self.report(GuardrailEvent {
                    session_key: ctx.session_key.clone(),
                    tool: name.to_string(),
                    stage: GuardrailStage::ToolOutput,
                    action: "redacted",
                    hit: None,
                    redactions: r.redactions,
                });
                rebuild(r.value)
            }
            Ok(_) => e,
        }
    }

    fn filter_output(
        &self,
        name: &str,
        ctx: &ToolContext,
        out: ToolOutput,
    ) -> Result<ToolOutput, ToolError> {
        let blocked = |this: &Self, hit: GuardrailHit| {
            let msg = hit.to_string();
            this.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolOutput,
                action: "blocked",
                hit: Some(hit),
                redactions: 0,
            });
            ToolError::Guardrail(msg)
        };
        // Structured data first, string by string (keeps JSON valid). When the text is just the
        // data's JSON, it is re-rendered from the redacted data, then checked as text too (which
        // catches patterns spanning several values).
        let (data, data_redactions) = match &out.data {
            Some(d) => {
                let r = self
                    .guardrails
                    .check_output_value(name, d)
                    .map_err(|h| blocked(self, h))?;
                (Some(r.value), r.redactions)
            }
            None => (None, 0),
        };
        let text_in = match (&out.data, &data) {
            (Some(orig), Some(redacted))
                if serde_json::to_string(orig).ok().as_deref() == Some(out.text.as_str()) =>
            {
                redacted.to_string()
            }
            _ => out.text.clone(),
        };
        let text = self
            .guardrails
            .check_output(name, &text_in)
            .map_err(|h| blocked(self, h))?;
        let redactions = text.redactions + data_redactions;
        if redactions > 0 {
            self.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolOutput,
                action: "redacted",
                hit: None,
                redactions,
            });
        }
        Ok(ToolOutput {
            text: text.value,
            data,
        })
    }
}
