//! `json_parse`: parse a JSON string, optionally pick a part of it with a JSON Pointer
//! (`/items/0/name`) or a dotted path (`items.0.name`), and report its type.

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Largest accepted input, in bytes.
pub const MAX_JSON_BYTES: usize = 5 * 1024 * 1024;

/// The `json_parse` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonParse;

#[async_trait]
impl Tool for JsonParse {
    fn name(&self) -> &str {
        "json_parse"
    }

    fn description(&self) -> &str {
        "Parse a JSON text and return the value (or the part selected by `path`, a JSON Pointer \
         like /items/0/name or a dotted path like items.0.name) with its type. Errors give the line \
         and column."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "json": {"type": "string", "description": "the JSON text"},
                "path": {"type": "string", "description": "optional: /a/0/b or a.0.b"}
            },
            "required": ["json"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, _ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let text = input.get("json").and_then(Value::as_str).ok_or_else(|| {
            ToolError::InvalidInput("`json` (a string holding JSON text) is required".into())
        })?;
        if text.len() > MAX_JSON_BYTES {
            return Err(ToolError::InvalidInput(format!(
                "`json` is larger than {MAX_JSON_BYTES} bytes"
            )));
        }
        let value: Value = serde_json::from_str(text).map_err(|e| {
            ToolError::InvalidInput(format!(
                "not valid JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        let (path, selected) = match input.get("path").and_then(Value::as_str) {
            None | Some("") => (None, value),
            Some(p) => {
                let pointer = to_pointer(p);
                let found = value.pointer(&pointer).cloned().ok_or_else(|| {
                    ToolError::InvalidInput(format!(
                        "path {p:?} does not exist in the parsed value"
                    ))
                })?;
                (Some(p.to_string()), found)
            }
        };
        Ok(ToolOutput::json(
            json!({"path": path, "type": type_name(&selected), "value": selected}),
        ))
    }
}

/// `a.b.0` and `/a/b/0` both become the JSON Pointer `/a/b/0` (`~` and `/` escaped for dotted paths).
fn to_pointer(p: &str) -> String {
    if p.starts_with('/') {
        return p.to_string();
    }
    p.trim_start_matches('$')
        .trim_start_matches('.')
        .split('.')
        .filter(|s| !s.is_empty())
        .map(|seg| format!("/{}", seg.replace('~', "~0").replace('/', "~1")))
        .collect()
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn parses_and_selects() {
        let ctx = ToolContext::new("t", std::env::temp_dir());
        let doc = r#"{"items":[{"name":"a/b"},{"name":"c"}]}"#;
        let out = JsonParse
            .execute(&ctx, json!({"json": doc, "path": "items.1.name"}))
            .await
            .unwrap();
        assert_eq!(
            out.data.unwrap(),
            json!({"path": "items.1.name", "type": "string", "value": "c"})
        );
        let out = JsonParse
            .execute(&ctx, json!({"json": doc, "path": "/items/0"}))
            .await
            .unwrap();
        assert_eq!(out.data.unwrap()["value"], json!({"name": "a/b"}));
        let err = JsonParse
            .execute(&ctx, json!({"json": "{\n  \"a\": ,}"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = JsonParse
            .execute(&ctx, json!({"json": doc, "path": "items.5"}))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }
}
