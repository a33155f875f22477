//! The A2A 0.3 JSON shapes the task store sends: JSON-RPC errors, agent messages, file artifacts
//! and the status of a task that failed because forge stopped; the text of a message.

use std::path::Path;

use serde_json::{json, Value};

use super::files::read_plain_file;
use crate::audit::rfc3339_now;
use crate::task_scope::mime_for;
use forge_state::{new_id, TaskRecord};

/// A JSON-RPC error: code, message, optional data.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC / A2A error code.
    pub code: i64,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// -32602 invalid params.
    pub fn invalid_params(m: impl Into<String>) -> Self {
        Self {
            code: -32602,
            message: m.into(),
        }
    }
    /// -32001 task not found.
    pub fn task_not_found(id: &str) -> Self {
        Self {
            code: -32001,
            message: format!("Task not found: {id}"),
        }
    }
}

/// JSON-RPC error code of a message refused because the server is draining (retry elsewhere).
pub(crate) const DRAINING: i64 = -32050;

/// The text of an A2A message's text parts (0.3 `{kind: text, text}`; a part with a bare `text`
/// is accepted too), joined by newlines.
pub(crate) fn message_text(msg: &Value) -> String {
    msg.get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| {
                    p.get("kind")
                        .and_then(Value::as_str)
                        .is_none_or(|k| k == "text")
                })
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

pub(super) fn agent_message(task_id: &str, context_id: &str, parts: Vec<Value>) -> Value {
    json!({"kind": "message", "role": "agent", "messageId": new_id(), "taskId": task_id, "contextId": context_id, "parts": parts})
}

/// The stored task `t` marked failed with `reason` as its status message (what the state store
/// writes for tasks interrupted by a restart or left by a replica that is gone).
pub(crate) fn failed_task(t: &TaskRecord, reason: &str) -> Value {
    let mut task = t.task.clone();
    let message = agent_message(
        &t.id,
        &t.context_id,
        vec![json!({"kind": "text", "text": reason})],
    );
    task["status"] = json!({"state": "failed", "message": message, "timestamp": rfc3339_now()});
    task
}

/// The artifact for file `path` (named `name`) of task `task_id`: a FilePart with the absolute
/// URI `{base_url}artifacts/{task_id}/{name}`, and a second FilePart with the bytes (base64) when
/// the file is at most `inline_limit` bytes.
pub(super) fn file_artifact(
    base_url: &str,
    task_id: &str,
    name: &str,
    path: &Path,
    inline_limit: u64,
) -> Value {
    let mime = mime_for(path);
    let uri = match url::Url::parse(base_url) {
        Ok(mut u) => {
            if let Ok(mut segs) = u.path_segments_mut() {
                segs.pop_if_empty().extend(["artifacts", task_id, name]);
            }
            u.to_string()
        }
        Err(_) => format!("{base_url}artifacts/{task_id}/{name}"),
    };
    let mut parts =
        vec![json!({"kind": "file", "file": {"uri": uri, "mimeType": mime, "name": name}})];
    let size = std::fs::symlink_metadata(path).map(|m| m.len()).ok();
    if inline_limit > 0 && size.is_some_and(|n| n <= inline_limit) {
        if let Ok(bytes) = read_plain_file(path) {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            parts.push(
                json!({"kind": "file", "file": {"bytes": b64, "mimeType": mime, "name": name}}),
            );
        }
    }
    let mut artifact = json!({
        "artifactId": new_id(),
        "name": name,
        "description": format!("file written by the agent ({} bytes)", size.unwrap_or(0)),
        "parts": parts,
    });
    // The bytes were captured when the tool made the file: their SHA-256.
    if let Some(sha) = crate::agent_loop::captured_sha256(path) {
        artifact["metadata"] = json!({"sha256": sha});
    }
    artifact
}
