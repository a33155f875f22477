//! A fake LLM vendor for tests: a real HTTP/1.1 server on 127.0.0.1 (plain tokio, no framework)
//! that records every request and answers each from a responder closure, so tests can play the
//! OpenAI or Anthropic API, including tool-call turns, 429s and 401s. Used by the forge-runtime
//! and forge-cli tests (`forge_testkit::llm`). Moved here from forge-runtime/tests/providers_support.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What the fake answers.
pub enum Reply {
    /// Status, extra headers, JSON body.
    Json(u16, Vec<(String, String)>, Value),
    /// Never answer (the connection stays open until the test ends).
    Hang,
}

pub type Responder = Arc<dyn Fn(usize, &Recorded) -> Reply + Send + Sync>;

pub struct FakeLlm {
    pub addr: std::net::SocketAddr,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeLlm {
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
    pub fn request(&self, i: usize) -> Recorded {
        self.requests.lock().unwrap()[i].clone()
    }
}

/// Start the fake; `respond(i, request)` answers the i-th request (0-based).
pub async fn start(respond: Responder) -> FakeLlm {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let requests: Arc<Mutex<Vec<Recorded>>> = Arc::default();
    let reqs = requests.clone();
    tokio::spawn(async move {
        // Bounded: a test never makes more than a few hundred requests.
        for _ in 0..500 {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let reqs = reqs.clone();
            let respond = respond.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let head_end = loop {
                    let n =
                        match tokio::time::timeout(Duration::from_secs(30), sock.read(&mut chunk))
                            .await
                        {
                            Ok(Ok(n)) if n > 0 => n,
                            _ => return,
                        };
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                    if buf.len() > 1 << 20 {
                        return;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let mut lines = head.split("\r\n");
                let first = lines.next().unwrap_or("");
                let mut parts = first.split(' ');
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let headers: Vec<(String, String)> = lines
                    .filter_map(|l| {
                        l.split_once(':')
                            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                    })
                    .collect();
                let len: usize = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, v)| v.parse().ok())
                    .unwrap_or(0);
                while buf.len() < head_end + len {
                    let n =
                        match tokio::time::timeout(Duration::from_secs(30), sock.read(&mut chunk))
                            .await
                        {
                            Ok(Ok(n)) if n > 0 => n,
                            _ => return,
                        };
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body: Value =
                    serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
                let rec = Recorded {
                    method,
                    path,
                    headers,
                    body,
                };
                let idx = {
                    let mut r = reqs.lock().unwrap();
                    r.push(rec.clone());
                    r.len() - 1
                };
                match respond(idx, &rec) {
                    Reply::Json(status, extra, v) => {
                        let body = v.to_string();
                        let mut resp = format!(
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                            body.len()
                        );
                        for (k, v) in extra {
                            resp.push_str(&format!("{k}: {v}\r\n"));
                        }
                        resp.push_str("\r\n");
                        resp.push_str(&body);
                        let _ = sock.write_all(resp.as_bytes()).await;
                        let _ = sock.shutdown().await;
                    }
                    Reply::Hang => {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                }
            });
        }
    });
    FakeLlm { addr, requests }
}

/// An OpenAI chat completion carrying tool calls.
pub fn openai_tool_calls(calls: &[(&str, &str, Value)]) -> Value {
    let tc: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": tc}, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    })
}

/// An OpenAI chat completion with final text.
pub fn openai_text(text: &str) -> Value {
    serde_json::json!({
        "id": "chatcmpl-2", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
    })
}

/// An Anthropic message carrying tool_use blocks.
pub fn anthropic_tool_use(calls: &[(&str, &str, Value)]) -> Value {
    let content: Vec<Value> = calls
        .iter()
        .map(|(id, name, input)| serde_json::json!({"type": "tool_use", "id": id, "name": name, "input": input}))
        .collect();
    serde_json::json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "fake", "content": content,
        "stop_reason": "tool_use", "usage": {"input_tokens": 12, "output_tokens": 8}
    })
}

/// An Anthropic message with final text.
pub fn anthropic_text(text: &str) -> Value {
    serde_json::json!({
        "id": "msg_2", "type": "message", "role": "assistant", "model": "fake",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 30, "output_tokens": 6}
    })
}

/// The content of the latest OpenAI `tool` message in a request body.
pub fn openai_last_tool_result(body: &Value) -> Option<String> {
    body["messages"]
        .as_array()?
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str().map(str::to_string))
}

/// The content of the latest Anthropic `tool_result` block in a request body.
pub fn anthropic_last_tool_result(body: &Value) -> Option<String> {
    body["messages"].as_array()?.iter().rev().find_map(|m| {
        m["content"]
            .as_array()?
            .iter()
            .rev()
            .find(|b| b["type"] == "tool_result")
            .and_then(|b| b["content"].as_str().map(str::to_string))
    })
}
