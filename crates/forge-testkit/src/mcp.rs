//! A raw MCP-over-HTTP client for tests of `forge mcp serve --transport http`: each request is
//! its own connection to 127.0.0.1 carrying the `mcp-session-id` header, enough to tell sessions
//! apart and to call tools without an SDK (the SDK interop tests use the official Python client).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One raw MCP-over-HTTP session (initialize, initialized, tools/call), enough to tell sessions
/// apart: each request is its own connection carrying the `mcp-session-id` header.
pub struct RawSession {
    /// The port of `forge mcp serve --transport http` on 127.0.0.1.
    pub port: u16,
    /// The session's `mcp-session-id`.
    pub id: String,
    next: u64,
}

/// The bytes of an MCP POST of `body` to /mcp on 127.0.0.1:`port` (with `session` when given),
/// on a connection the server closes after its answer.
pub fn request_bytes(port: u16, session: Option<&str>, body: &str) -> String {
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-06-18\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(s) = session {
        req.push_str(&format!("mcp-session-id: {s}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    req
}

/// POST `body` to /mcp (with `session` when given); returns the head and the de-chunked body.
pub async fn post(port: u16, session: Option<&str>, body: &str) -> (String, String) {
    let req = request_bytes(port, session, body);
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to forge mcp serve");
    s.write_all(req.as_bytes())
        .await
        .expect("write the MCP request");
    let mut resp = Vec::new();
    tokio::time::timeout(Duration::from_secs(90), s.read_to_end(&mut resp))
        .await
        .expect("an MCP answer within 90 s")
        .expect("read the MCP answer");
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head");
    let head = String::from_utf8_lossy(&resp[..split]).into_owned();
    let mut raw = resp[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = Vec::new();
        while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
            let size_text = String::from_utf8_lossy(&raw[..eol]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or(0);
            if size == 0 || raw.len() < eol + 2 + size {
                break;
            }
            out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
            raw.drain(..eol + 2 + size + 2);
        }
        raw = out;
    }
    (head, String::from_utf8_lossy(&raw).into_owned())
}

/// The JSON-RPC answer with `id` in an MCP response body (plain JSON or SSE `data:` lines).
pub fn rpc_answer(body: &str, id: u64) -> Value {
    body.lines()
        .map(|l| l.strip_prefix("data:").unwrap_or(l).trim())
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("no answer {id} in {body}"))
}

/// The `mcp-session-id` of an answer's head; panics naming the head when it has none.
pub fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no mcp-session-id in {head}"))
}

impl RawSession {
    /// Initialize a session (and send `notifications/initialized`).
    pub async fn open(port: u16) -> Self {
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        let (head, body) = post(port, None, init).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
        let id = session_id(&head);
        let (head, _) = post(
            port,
            Some(&id),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        )
        .await;
        assert!(head.starts_with("HTTP/1.1 202"), "{head}");
        Self { port, id, next: 2 }
    }

    /// Send request `method` with `params`; returns the whole JSON-RPC answer.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let req =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let (head, body) = post(self.port, Some(&self.id), &req.to_string()).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
        rpc_answer(&body, id)
    }

    /// Call tool `name`; returns the `result` object (content, isError, structuredContent).
    pub async fn call(&mut self, name: &str, args: Value) -> Value {
        let answer = self
            .request(
                "tools/call",
                serde_json::json!({"name": name, "arguments": args}),
            )
            .await;
        answer["result"].clone()
    }
}
