//! The bridge between the agent loop and the runner's assembled tools
//! ([`crate::assemble::AssembledTools`]): every tool call goes through the one call path
//! (guardrails, time limit, cancellation, fence); prompt and response guardrails apply to the user
//! message and the final answer; guardrail hits and egress proxy decisions become audit events;
//! a task's browser session is closed at the end of the task.

use std::sync::Arc;

use async_trait::async_trait;
use forge_egress::proxy::{Decision, EgressObserver, Outcome};
use forge_tools::{ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{LoopTools, SessionCloser};
use crate::assemble::{AssembledTools, GuardrailEvent, ToolEvents, ToolRunner};
use crate::audit::{events, AuditLog};
use crate::guardrails::Guardrails;
use crate::providers::ToolSpec;

/// [`LoopTools`] over the assembled tool set.
pub struct AssembledLoopTools {
    runner: ToolRunner,
    guardrails: Arc<Guardrails>,
}

impl AssembledLoopTools {
    /// The loop's view of `tools` (the loop audits prompt/response guardrail hits itself).
    pub fn new(tools: &AssembledTools) -> Self {
        Self {
            runner: tools.runner(),
            guardrails: tools.guardrails().clone(),
        }
    }
}

#[async_trait]
impl LoopTools for AssembledLoopTools {
    fn specs(&self) -> Vec<ToolSpec> {
        self.runner
            .registry()
            .list()
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect()
    }

    async fn run(
        &self,
        ctx: &ToolContext,
        name: &str,
        input: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.runner.execute(name, input, ctx).await
    }

    fn check_prompt(&self, prompt: &str) -> Result<(), String> {
        self.guardrails
            .check_prompt(prompt)
            .map_err(|h| h.to_string())
    }

    fn check_response(&self, response: &str) -> Result<String, String> {
        self.guardrails
            .check_response(response)
            .map(|()| response.to_string())
            .map_err(|h| h.to_string())
    }
}

/// Writes `guardrail_check` audit events for tool guardrail hits.
pub struct AuditToolEvents(pub AuditLog);

impl ToolEvents for AuditToolEvents {
    fn on_guardrail(&self, ev: &GuardrailEvent) {
        let mut fields = json!({
            "stage": ev.stage,
            "tool": ev.tool,
            "action": ev.action,
            "redactions": ev.redactions,
        });
        if let Some(hit) = &ev.hit {
            // The rule and where it is declared; never the matched text.
            fields["skill"] = json!(hit.skill);
            fields["field"] = json!(hit.field);
            fields["pattern"] = json!(hit.pattern);
        }
        self.0
            .emit(Some(&ev.session_key), events::GUARDRAIL_CHECK, fields);
    }
}

/// Writes `egress_allowed` / `egress_blocked` audit events for the egress proxy's decisions.
pub struct AuditEgressObserver(pub AuditLog);

impl EgressObserver for AuditEgressObserver {
    fn on_decision(&self, d: &Decision) {
        let event = match d.outcome {
            Outcome::Allowed => events::EGRESS_ALLOWED,
            Outcome::Blocked | Outcome::Malformed => events::EGRESS_BLOCKED,
            // Allowed by policy but the upstream failed: the policy allowed it.
            Outcome::Failed => events::EGRESS_ALLOWED,
        };
        self.0.emit(
            None,
            event,
            json!({
                "via": "proxy",
                "method": d.method,
                "host": d.host,
                "port": d.port,
                "ip": d.chosen.map(|a| a.ip().to_string()),
                "status": d.status,
                "reason": d.reason,
                "bytes_up": d.bytes_up,
                "bytes_down": d.bytes_down,
                "duration_ms": d.duration.as_millis() as u64,
            }),
        );
    }
}

/// Closes a task's browser session through the assembled tools.
pub struct AssembledSessions(pub Arc<AssembledTools>);

#[async_trait]
impl SessionCloser for AssembledSessions {
    async fn close_session(&self, key: &str) {
        self.0.close_session(key).await;
    }
}
