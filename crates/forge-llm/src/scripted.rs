//! The `scripted` provider: replays a YAML file of assistant turns, in order. It is a test and
//! demo device, not a model: it does not read the conversation except to count the turns already
//! played and to quote tool results where the script asks for them.
//!
//! ```yaml
//! turns:
//!   - tool_calls:
//!       - name: browser_navigate
//!         arguments: { url: "http://${FORGE_DEMO_SITE}/" }
//!   - text: "The page says: {{result:browser_extract}}"
//! ```
//!
//! - Turn *n* of a task is the script's turn *n* (the count of assistant turns since the latest
//!   user message), so every task replays the script from the start, independently, even when it
//!   continues an earlier conversation.
//! - A turn has optional `text`, optional `tool_calls` (`name`, `arguments`, optional `id`) and
//!   optional `delay_ms` (a pause before answering, which cancellation interrupts). A turn without
//!   tool calls is the final answer.
//! - In every string, `${VAR}` is replaced by the environment variable `VAR` (empty when unset);
//!   in `text`, `{{result:TOOL}}` is replaced by the latest result of tool `TOOL` in this task,
//!   `{{result}}` by the latest tool result of any tool, and `{{result:TOOL|inner}}` by only the
//!   content inside the result's untrusted-content fence (markers and notice dropped).

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{ChatRequest, ChatResponse, Message, Provider, ProviderError, ToolCall};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    name: String,
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    #[serde(default)]
    delay_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    turns: Vec<Turn>,
}

/// The scripted provider.
pub struct Scripted {
    path: PathBuf,
    display: String,
    turns: Vec<Turn>,
}

impl Scripted {
    /// Load and check a script file.
    pub fn load(path: &Path) -> Result<Self, ProviderError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ProviderError::Script(format!(
                "cannot read the scripted provider's script {}: {e}. For provider scripted, \
                 model.name is the script path relative to the agent directory",
                path.display()
            ))
        })?;
        Self::parse(&text, path)
    }

    /// Parse a script from text (`path` is used in messages).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ProviderError> {
        let bad = |e: serde_norway::Error| {
            let at = e
                .location()
                .map(|l| format!(":{}:{}", l.line(), l.column()))
                .unwrap_or_default();
            ProviderError::Script(format!(
                "{}{at}: not a valid script: {e}. A script is `turns:` followed by a list of \
                 turns, each with optional `text`, `tool_calls` (name, arguments) and `delay_ms`",
                path.display()
            ))
        };
        // A bare list of turns is accepted too; each form is parsed directly so errors keep
        // their line and column.
        let bare = matches!(
            serde_norway::from_str::<serde_norway::Value>(text),
            Ok(serde_norway::Value::Sequence(_))
        );
        let turns = if bare {
            serde_norway::from_str::<Vec<Turn>>(text).map_err(bad)?
        } else {
            serde_norway::from_str::<ScriptFile>(text)
                .map_err(bad)?
                .turns
        };
        if turns.is_empty() {
            return Err(ProviderError::Script(format!(
                "{}: the script has no turns",
                path.display()
            )));
        }
        for (i, t) in turns.iter().enumerate() {
            if t.text.is_none() && t.tool_calls.is_empty() {
                return Err(ProviderError::Script(format!(
                    "{}: turn {} has neither text nor tool_calls",
                    path.display(),
                    i + 1
                )));
            }
            for c in &t.tool_calls {
                if !matches!(c.arguments, None | Some(Value::Object(_))) {
                    return Err(ProviderError::Script(format!(
                        "{}: turn {}: arguments of {} must be a mapping",
                        path.display(),
                        i + 1,
                        c.name
                    )));
                }
            }
        }
        let display = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(Self {
            path: path.to_path_buf(),
            display,
            turns,
        })
    }

    /// Number of turns in the script.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the script is empty (never true for a loaded script).
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

/// Replace `${VAR}` with the environment variable's value.
fn expand_env(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end)
                if after[..end]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_')
                    && end > 0 =>
            {
                out.push_str(&std::env::var(&after[..end]).unwrap_or_default());
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn expand_value(v: &Value) -> Value {
    match v {
        Value::String(s) => Value::String(expand_env(s)),
        Value::Array(a) => Value::Array(a.iter().map(expand_value).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.clone(), expand_value(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn latest_result(messages: &[Message], tool: Option<&str>) -> Option<String> {
    messages.iter().rev().find_map(|m| match m {
        Message::ToolResults(rs) => rs
            .iter()
            .rev()
            .find(|r| tool.is_none_or(|t| r.name == t))
            .map(|r| r.content.clone()),
        _ => None,
    })
}

/// The content inside forge's untrusted-content fence(s) of a tool result, without the markers and
/// the notice line; the whole text when it has no fence.
fn fence_inner(text: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    let mut any = false;
    for line in text.lines() {
        if line.starts_with("<<<UNTRUSTED_CONTENT_START") {
            inside = true;
            any = true;
        } else if line.starts_with("<<<UNTRUSTED_CONTENT_END") {
            inside = false;
        } else if inside && !line.starts_with("[forge:") {
            out.push(line);
        }
    }
    if any {
        out.join("\n").trim().to_string()
    } else {
        text.trim().to_string()
    }
}

fn fill_results(text: &str, messages: &[Message]) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("{{result") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return out;
        };
        let (inner, filter) = match after[..end].split_once('|') {
            Some((i, f)) => (i, Some(f.trim())),
            None => (&after[..end], None),
        };
        let tool = inner.strip_prefix("result:").map(str::trim);
        if (inner == "result" || tool.is_some()) && matches!(filter, None | Some("inner")) {
            let r = latest_result(messages, tool).unwrap_or_else(|| "(no result)".into());
            out.push_str(&if filter.is_some() { fence_inner(&r) } else { r });
        } else {
            out.push_str(&rest[start..start + 2 + end + 2]);
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    out
}

#[async_trait]
impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        &self.display
    }
    fn host(&self) -> Option<String> {
        None
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        // Turns played in this task: assistant turns since the latest user message (earlier
        // messages of the same A2A conversation belong to earlier tasks).
        let since_user = req
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::User(_)))
            .map_or(0, |i| i + 1);
        let played = req.messages[since_user..]
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let Some(turn) = self.turns.get(played) else {
            return Err(ProviderError::Script(format!(
                "the script {} has {} turns and all were played; end it with a turn that has `text` and no tool_calls",
                self.path.display(),
                self.turns.len()
            )));
        };
        if let Some(ms) = turn.delay_ms {
            tokio::select! {
                _ = cancel.cancelled() => return Err(ProviderError::Cancelled),
                _ = tokio::time::sleep(Duration::from_millis(ms.min(600_000))) => {}
            }
        }
        if cancel.is_cancelled() {
            return Err(ProviderError::Cancelled);
        }
        let text = turn
            .text
            .as_deref()
            .map(|t| fill_results(&expand_env(t), &req.messages))
            .unwrap_or_default();
        let tool_calls = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: c
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("script_{}_{}", played + 1, i + 1)),
                name: c.name.clone(),
                arguments: c
                    .arguments
                    .as_ref()
                    .map(expand_value)
                    .unwrap_or_else(|| Value::Object(Default::default())),
            })
            .collect();
        Ok(ChatResponse {
            text,
            tool_calls,
            stop_reason: Some("script".into()),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolResult;

    #[test]
    fn env_expansion_leaves_malformed_references() {
        std::env::set_var("FORGE_SCRIPT_TEST_VAR", "127.0.0.1:1");
        assert_eq!(
            expand_env("http://${FORGE_SCRIPT_TEST_VAR}/x"),
            "http://127.0.0.1:1/x"
        );
        assert_eq!(expand_env("a ${ b} ${"), "a ${ b} ${");
    }

    #[test]
    fn result_placeholders_quote_the_latest_result() {
        let msgs = vec![
            Message::ToolResults(vec![ToolResult {
                call_id: "1".into(),
                name: "a".into(),
                content: "first".into(),
                is_error: false,
            }]),
            Message::ToolResults(vec![ToolResult {
                call_id: "2".into(),
                name: "b".into(),
                content: "second".into(),
                is_error: false,
            }]),
        ];
        assert_eq!(
            fill_results("x {{result:a}} y {{result}} {{other}}", &msgs),
            "x first y second {{other}}"
        );
        assert_eq!(fill_results("{{result:zzz}}", &msgs), "(no result)");
        let fenced = "header\n<<<UNTRUSTED_CONTENT_START id=1 source=x>>>\n[forge: notice]\nthe page text\n<<<UNTRUSTED_CONTENT_END id=1>>>";
        let msgs = vec![Message::ToolResults(vec![ToolResult {
            call_id: "1".into(),
            name: "x".into(),
            content: fenced.into(),
            is_error: false,
        }])];
        assert_eq!(fill_results("{{result:x|inner}}", &msgs), "the page text");
        assert_eq!(
            fill_results("{{result:x|bogus}}", &msgs),
            "{{result:x|bogus}}"
        );
    }

    #[test]
    fn bad_scripts_name_the_file_and_the_problem() {
        let p = Path::new("s.yaml");
        let e = Scripted::parse("turns: []", p).err().unwrap();
        assert!(e.to_string().contains("no turns"));
        let e = Scripted::parse("turns:\n  - {}\n", p).err().unwrap();
        assert!(e.to_string().contains("turn 1 has neither"), "{e}");
        let e = Scripted::parse("turns:\n  - text: a\n    bogus: 1\n", p)
            .err()
            .unwrap();
        assert!(
            e.to_string().starts_with("s.yaml:3:"),
            "the line of the bad key: {e}"
        );
        assert!(e.to_string().contains("bogus"), "{e}");
        let ok = Scripted::parse("- text: bare list\n", p).unwrap();
        assert_eq!(ok.len(), 1);
    }
}
