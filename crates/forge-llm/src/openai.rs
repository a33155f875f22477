//! The OpenAI Chat Completions provider (`POST {base_url}/chat/completions` with `tools`). Also
//! serves every OpenAI-compatible server (Ollama, vLLM, llama.cpp server, OpenRouter) through
//! `base_url`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{
    host_of, send_with_retry, status_error, ChatRequest, ChatResponse, Message, ModelHttp,
    Provider, ProviderError, RetryPolicy, ToolCall, Usage,
};

/// An OpenAI-compatible chat model.
pub struct OpenAi {
    name: String,
    model: String,
    url: url::Url,
    key: Option<String>,
    key_var: &'static str,
    http: Arc<dyn ModelHttp>,
    retry: RetryPolicy,
}

impl OpenAi {
    /// `name` is the provider name shown in messages (`openai`, `ollama`); `key_var` the variable
    /// named in a 401 error.
    pub fn new(
        name: &str,
        model: &str,
        base_url: url::Url,
        key: Option<String>,
        key_var: &'static str,
        http: Arc<dyn ModelHttp>,
        retry: RetryPolicy,
    ) -> Self {
        let mut base = base_url.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        // Joining a relative path onto a URL ending in '/' cannot fail.
        let url = url::Url::parse(&base)
            .and_then(|b| b.join("chat/completions"))
            .unwrap_or(base_url);
        Self {
            name: name.to_string(),
            model: model.to_string(),
            url,
            key,
            key_var,
            http,
            retry,
        }
    }

    /// The request body for `req` (public for tests and debugging).
    pub fn body(&self, req: &ChatRequest) -> Value {
        let mut messages = vec![json!({"role": "system", "content": req.system})];
        for m in &req.messages {
            match m {
                Message::User(t) => messages.push(json!({"role": "user", "content": t})),
                Message::Assistant { text, tool_calls } => {
                    let mut msg = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                    if !tool_calls.is_empty() {
                        msg["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| {
                                let args = match &c.arguments {
                                    Value::String(s) => s.clone(),
                                    v => v.to_string(),
                                };
                                json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": args}})
                            })
                            .collect();
                    }
                    messages.push(msg);
                }
                Message::ToolResults(results) => {
                    for r in results {
                        messages.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
                    }
                }
            }
        }
        let mut body = json!({"model": self.model, "messages": messages});
        if !req.tools.is_empty() {
            body["tools"] = req
                .tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.input_schema}}))
                .collect();
        }
        body
    }

    fn parse(&self, body: &[u8]) -> Result<ChatResponse, ProviderError> {
        let bad = |detail: String| ProviderError::BadResponse {
            provider: self.name.clone(),
            detail,
        };
        let v: Value = serde_json::from_slice(body).map_err(|e| bad(format!("not JSON: {e}")))?;
        let choice = v
            .get("choices")
            .and_then(|c| c.get(0))
            .ok_or_else(|| bad("no choices[0] in the response".into()))?;
        let msg = choice
            .get("message")
            .ok_or_else(|| bad("no choices[0].message".into()))?;
        let text = msg
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut tool_calls = Vec::new();
        for (i, c) in msg
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let f = c
                .get("function")
                .ok_or_else(|| bad("tool call without function".into()))?;
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("tool call without name".into()))?;
            let arguments = match f.get("arguments") {
                Some(Value::String(s)) if s.trim().is_empty() => json!({}),
                Some(Value::String(s)) => {
                    serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone()))
                }
                Some(v @ Value::Object(_)) => v.clone(),
                _ => json!({}),
            };
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("call_{i}"));
            tool_calls.push(ToolCall {
                id,
                name: name.to_string(),
                arguments,
            });
        }
        let usage = v.get("usage").map(|u| Usage {
            input_tokens: u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: u
                .get("completion_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0),
        });
        Ok(ChatResponse {
            text,
            tool_calls,
            usage: usage.unwrap_or_default(),
            stop_reason: choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            attempts: 0,
            served_by: None,
        })
    }
}

#[async_trait]
impl Provider for OpenAi {
    fn name(&self) -> &str {
        &self.name
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
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(k) = &self.key {
            headers.push(("authorization".into(), format!("Bearer {k}")));
        }
        let body = serde_json::to_vec(&self.body(req))
            .map_err(|e| ProviderError::Config(e.to_string()))?;
        let (reply, attempts) = send_with_retry(
            &*self.http,
            &self.name,
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
                &self.name,
                &self.model,
                host,
                self.key_var,
                is_model_error,
            )),
        }
    }
}

/// Whether an error body says the model does not exist (OpenAI `model_not_found`, Ollama
/// `model "x" not found`, vLLM `The model `x` does not exist`).
fn is_model_error(body: &[u8]) -> bool {
    let t = String::from_utf8_lossy(body).to_ascii_lowercase();
    t.contains("model_not_found")
        || (t.contains("model")
            && (t.contains("not found")
                || t.contains("does not exist")
                || t.contains("unknown model")))
}
