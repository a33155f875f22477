//! The Anthropic Messages provider (`POST {base_url}/v1/messages` with `tools`, `tool_use` and
//! `tool_result` content blocks).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{
    host_of, send_with_retry, status_error, ChatRequest, ChatResponse, Message, ModelHttp,
    Provider, ProviderError, RetryPolicy, ToolCall, Usage,
};

/// The API version header forge speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` sent with every request (the API requires one).
pub const MAX_TOKENS: u64 = 4096;

/// An Anthropic model.
pub struct Anthropic {
    model: String,
    url: url::Url,
    key: Option<String>,
    http: Arc<dyn ModelHttp>,
    retry: RetryPolicy,
}

impl Anthropic {
    /// A provider for `model` at `base_url` (without `/v1`).
    pub fn new(
        model: &str,
        base_url: url::Url,
        key: Option<String>,
        http: Arc<dyn ModelHttp>,
        retry: RetryPolicy,
    ) -> Self {
        let mut base = base_url.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        // Accept a base URL given with or without the trailing /v1.
        let path = if base.ends_with("/v1/") {
            "messages"
        } else {
            "v1/messages"
        };
        let url = url::Url::parse(&base)
            .and_then(|b| b.join(path))
            .unwrap_or(base_url);
        Self {
            model: model.to_string(),
            url,
            key,
            http,
            retry,
        }
    }

    /// The request body for `req`.
    pub fn body(&self, req: &ChatRequest) -> Value {
        let mut messages: Vec<Value> = Vec::new();
        for m in &req.messages {
            match m {
                Message::User(t) => {
                    messages.push(json!({"role": "user", "content": [{"type": "text", "text": t}]}))
                }
                Message::Assistant { text, tool_calls } => {
                    let mut content = Vec::new();
                    if !text.is_empty() {
                        content.push(json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        let input = if c.arguments.is_object() {
                            c.arguments.clone()
                        } else {
                            json!({"_raw": c.arguments})
                        };
                        content.push(
                            json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                        );
                    }
                    messages.push(json!({"role": "assistant", "content": content}));
                }
                Message::ToolResults(results) => {
                    let content: Vec<Value> = results
                        .iter()
                        .map(|r| json!({"type": "tool_result", "tool_use_id": r.call_id, "content": r.content, "is_error": r.is_error}))
                        .collect();
                    messages.push(json!({"role": "user", "content": content}));
                }
            }
        }
        let mut body = json!({"model": self.model, "max_tokens": MAX_TOKENS, "system": req.system, "messages": messages});
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
                .collect();
        }
        body
    }

    fn parse(&self, body: &[u8]) -> Result<ChatResponse, ProviderError> {
        let bad = |detail: String| ProviderError::BadResponse {
            provider: "anthropic".into(),
            detail,
        };
        let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
        let content = v
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("no content array".into()))?;
        let mut text = String::new();
        let mut tool_calls = Vec::new();
        for block in content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(block.get("text").and_then(Value::as_str).unwrap_or(""));
                }
                Some("tool_use") => {
                    let id = block
                        .get("id")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("tool_use without id".into()))?;
                    let name = block
                        .get("name")
                        .and_then(Value::as_str)
                        .ok_or_else(|| bad("tool_use without name".into()))?;
                    let arguments = block.get("input").cloned().unwrap_or_else(|| json!({}));
                    tool_calls.push(ToolCall {
                        id: id.to_string(),
                        name: name.to_string(),
                        arguments,
                    });
                }
                _ => {}
            }
        }
        let usage = v.get("usage").map(|u| Usage {
            input_tokens: u.get("input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        });
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: usage.unwrap_or_default(),
            stop_reason: v
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            attempts: 0,
            served_by: None,
        })
    }
}

#[async_trait]
impl Provider for Anthropic {
    fn name(&self) -> &str {
        "anthropic"
    }
    fn model(&self) -> &str {
        &self.model
    }
    fn host(&self) -> Option<String> {
        Some(host_of(&self.url))
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ProviderError> {
        let mut headers = vec![
            ("content-type".to_string(), "application/json".to_string()),
            (
                "anthropic-version".to_string(),
                ANTHROPIC_VERSION.to_string(),
            ),
        ];
        if let Some(k) = &self.key {
            headers.push(("x-api-key".into(), k.clone()));
        }
        let body = serde_json::to_vec(&self.body(req))
            .map_err(|e| ProviderError::Config(e.to_string()))?;
        let (reply, attempts) = send_with_retry(
            &*self.http,
            "anthropic",
            &self.retry,
            &self.url,
            &headers,
            body,
            cancel,
        )
        .await?;
        let host = host_of(&self.url);
        match reply.status {
            200..=299 => {
                let mut r = self.parse(&reply.body)?;
                r.attempts = attempts;
                Ok(r)
            }
            _ => Err(status_error(
                &reply,
                "anthropic",
                &self.model,
                host,
                "ANTHROPIC_API_KEY",
                is_model_error,
            )),
        }
    }
}

/// Anthropic answers an unknown model with `not_found_error` and a message naming the model.
fn is_model_error(body: &[u8]) -> bool {
    let t = String::from_utf8_lossy(body).to_ascii_lowercase();
    (t.contains("not_found_error") || t.contains("invalid_request_error")) && t.contains("model")
}
