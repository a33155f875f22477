//! `browser_handoff {reason}`: hand the session's active tab to a person for one step the model
//! cannot or must not do (a second factor, a CAPTCHA, a consent dialog), and wait.
//!
//! Not a [`super::BrowserAction`]: it must not hold the session's state while a person works in
//! the tab (the live view and the input reach the tab through its page, `screencast.rs`), and its
//! time limit is `browser.handoff_timeout`, not an action's. The hand-off itself (one-time token,
//! visitor secret, who may see the tab) is `handoff.rs`; the server that shows the page is the
//! runtime's, told through the [`Handoffs`](crate::handoff::Handoffs) observer.

use std::sync::Arc;

use async_trait::async_trait;
use forge_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{schema, BrowserTool, BrowserToolOptions};
use crate::handoff::{HandoffEnd, Handoffs};
use crate::manager::BrowserManager;

/// Longest reason accepted.
const MAX_REASON: usize = 500;

/// The `browser_handoff` tool.
pub(crate) struct Handoff {
    pub(crate) manager: Arc<BrowserManager>,
    pub(crate) options: BrowserToolOptions,
}

/// Ends the hand-off when the call ends, however it ends (a dropped call included).
struct Guard {
    handoffs: Arc<Handoffs>,
    id: String,
    end: Option<HandoffEnd>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let end = self.end.take().unwrap_or(HandoffEnd::Abandoned);
        self.handoffs.close(&self.id, end);
    }
}

#[async_trait]
impl Tool for Handoff {
    fn name(&self) -> &str {
        "browser_handoff"
    }

    fn description(&self) -> &str {
        "Let a person do a step you must not (2FA, CAPTCHA, consent, login), told in `reason`; waits for Done, returns their note."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("reason".into(), json!({"type": "string"}));
        schema(p, &["reason"])
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let reason = input
            .get("reason")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .ok_or_else(|| {
                ToolError::InvalidInput(
                    "give `reason`: what the person should do, e.g. \"enter the code sent to the user's phone\"".into(),
                )
            })?;
        if reason.chars().count() > MAX_REASON {
            return Err(ToolError::InvalidInput(format!(
                "`reason` is longer than {MAX_REASON} characters; say in one sentence what the person should do"
            )));
        }
        let key = if ctx.session_key.is_empty() {
            "default"
        } else {
            ctx.session_key.as_str()
        };
        let Some(tab) = self.manager.live_tab(key).await else {
            return Err(ToolError::Failed(
                "no page is open to hand over: open the page the person should act on with browser_navigate first".into(),
            ));
        };
        let timeout = self.manager.config().handoff_timeout;
        let handoffs = self.manager.handoffs().clone();
        let opened = handoffs
            .open(tab, ctx.task_id.as_deref(), key, reason, timeout)
            .map_err(ToolError::Failed)?;
        let mut guard = Guard {
            handoffs,
            id: opened.id.clone(),
            end: None,
        };
        let end = tokio::select! {
            r = opened.end => r.unwrap_or(HandoffEnd::Abandoned),
            () = tokio::time::sleep(timeout) => HandoffEnd::TimedOut,
            () = ctx.cancel.cancelled() => HandoffEnd::Abandoned,
        };
        guard.end = Some(end.clone());
        drop(guard);
        let secs = timeout.as_secs();
        match end {
            HandoffEnd::Done(note) => {
                let note = note.trim();
                let note = if note.is_empty() { "(no note)" } else { note };
                // A fresh observation of the tab as the person left it.
                let observe = BrowserTool {
                    action: super::state::State,
                    manager: self.manager.clone(),
                    options: self.options.clone(),
                };
                let seen = observe.execute(ctx, json!({})).await?;
                Ok(ToolOutput {
                    text: format!("the person finished: {note}\n{}", seen.text),
                    data: Some(json!({"handoff": opened.id, "outcome": "done", "note": note})),
                })
            }
            HandoffEnd::Cancelled => Err(ToolError::Failed(format!(
                "the person cancelled the hand-off ({reason}); the tab is as they left it. Tell the user what you needed instead of retrying"
            ))),
            HandoffEnd::TimedOut => Err(ToolError::Failed(format!(
                "nobody finished the hand-off within {secs} s (forge.yaml browser.handoff_timeout); the step ({reason}) was not done. Tell the user a person is needed for it"
            ))),
            HandoffEnd::Abandoned => Err(ToolError::Cancelled),
        }
    }
}
