//! `browser_close`: end this conversation's browser session (its tabs, cookies and storage).
//!
//! Unlike the other tools this is not a [`super::BrowserAction`]: it must not open a session to
//! close it, so it talks to the manager directly and never launches Chromium.

use std::sync::Arc;

use async_trait::async_trait;
use forge_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

use crate::manager::BrowserManager;

/// The `browser_close` tool.
pub(crate) struct Close {
    pub(crate) manager: Arc<BrowserManager>,
}

#[async_trait]
impl Tool for Close {
    fn name(&self) -> &str {
        "browser_close"
    }

    fn description(&self) -> &str {
        "End this conversation's browser (tabs, cookies, logins); next calls start anew."
    }

    fn input_schema(&self) -> Value {
        super::schema(serde_json::Map::new(), &[])
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        if !input.is_object() && !input.is_null() {
            return Err(ToolError::InvalidInput(
                "the input must be a JSON object".into(),
            ));
        }
        let key = if ctx.session_key.is_empty() {
            "default"
        } else {
            ctx.session_key.as_str()
        };
        let closed = tokio::select! {
            c = self.manager.close_session(key) => c,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let text = if closed {
            "closed the browser session: its tabs, cookies and storage are gone; the next browser call starts a fresh one"
        } else {
            "no browser session was open; nothing to close"
        };
        Ok(ToolOutput {
            text: text.to_string(),
            data: Some(json!({"closed": closed})),
        })
    }
}
