//! What the watch page (crate::ui) shows of the A2A task store: a row per task (state, prompt,
//! duration, steps, replica) and a task's result and servable files.

use serde_json::{json, Value};

use super::store::{lock, Entry, TaskStore};
use super::wire::message_text;
use crate::audit::AuditLog;
use crate::task_scope::mime_for;

/// Longest prompt shown in a row.
const PROMPT_CHARS: usize = 400;

impl TaskStore {
    fn watch_row(&self, id: &str, e: &Entry) -> Value {
        let prompt: String = e
            .history
            .first()
            .map(message_text)
            .unwrap_or_default()
            .chars()
            .take(PROMPT_CHARS)
            .collect();
        let status = e
            .status_message
            .as_ref()
            .map(message_text)
            .unwrap_or_default()
            .chars()
            .take(PROMPT_CHARS)
            .collect::<String>();
        let (duration_ms, steps) = match &e.result {
            Some(r) => (
                r.get("seconds")
                    .and_then(Value::as_f64)
                    .map(|s| (s * 1000.0) as i64),
                r.get("steps").and_then(Value::as_u64),
            ),
            None => (Some(forge_state::now_ms() - e.created_ms), None),
        };
        let steps = steps.unwrap_or_else(|| {
            self.agent.audit.tap().events(id).map_or(0, |t| {
                t.events
                    .iter()
                    .filter(|v| v.get("event").and_then(Value::as_str) == Some("tool_start"))
                    .count() as u64
            })
        });
        json!({
            "id": id,
            "contextId": e.context_id,
            "state": e.state.as_str(),
            "final": e.state.is_final(),
            "prompt": prompt,
            "status": status,
            "createdMs": e.created_ms,
            "updated": e.status_time,
            "durationMs": duration_ms,
            "steps": steps,
            "replica": self.replica_id().unwrap_or_else(|| "this server".into()),
        })
    }
}

/// `/artifacts/{task}/{name}` with both segments %-encoded.
fn artifact_url(task: &str, name: &str) -> String {
    let enc = |s: &str| {
        url::form_urlencoded::byte_serialize(s.as_bytes())
            .collect::<String>()
            .replace('+', "%20")
    };
    format!("/artifacts/{}/{}", enc(task), enc(name))
}

impl crate::ui::WatchSource for TaskStore {
    fn audit(&self) -> &AuditLog {
        &self.agent.audit
    }

    fn rows(&self) -> Vec<Value> {
        let inner = lock(&self.inner);
        inner
            .order
            .iter()
            .rev()
            .filter_map(|id| inner.tasks.get(id).map(|e| self.watch_row(id, e)))
            .collect()
    }

    fn task(&self, id: &str) -> Option<Value> {
        let inner = lock(&self.inner);
        let e = inner.tasks.get(id)?;
        let mut v = self.watch_row(id, e);
        v["result"] = e.result.clone().unwrap_or(Value::Null);
        v["artifacts"] = e
            .files
            .iter()
            .map(|(name, path)| json!({"name": name, "url": artifact_url(id, name), "mimeType": mime_for(path)}))
            .collect();
        // A running task of an agent with the browser: the page links its live view
        // (a2a/live.rs, which takes the page's cookie too).
        let running = matches!(
            v["state"].as_str(),
            Some("working" | "submitted" | "input-required")
        );
        if running
            && self
                .agent
                .sessions
                .as_ref()
                .is_some_and(|s| s.browser().is_some())
        {
            v["liveView"] = json!(format!("/ui/tasks/{id}/live"));
        }
        Some(v)
    }
}
