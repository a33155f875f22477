//! The MCP client: a tool source. [`connect`] reaches one server (streamable HTTP through the
//! egress client, or a confined stdio child), lists its tools, keeps those its filter lets through
//! and wraps each as a forge [`Tool`] named `<server>__<tool>` with the server's description and
//! input schema.
//!
//! A call's result becomes a [`ToolOutput`]: the text content items joined by newlines, fenced as
//! outside content (`source=mcp server=<name> tool=<tool>`), and the structured content as `data`.
//! A result with `isError: true` becomes [`ToolError::Failed`] with the server's message (fenced
//! too). Every request (initialize, list, call) is bounded by the server's timeout; a cancelled
//! [`ToolContext`] sends `notifications/cancelled` to the server (rmcp does on drop of the call).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::Mutex;

use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::EgressPolicy;
use forge_tools::{fence, Tool, ToolContext, ToolError, ToolOutput};

use crate::child::{self, ChildGuard};
use crate::error::McpError;
use crate::http_client::EgressHttp;

/// How to reach a server.
#[derive(Debug, Clone)]
pub enum ServerTransport {
    /// Streamable HTTP at `url`, with `Authorization: Bearer <bearer>` when given.
    Http { url: String, bearer: Option<String> },
    /// A child process: `command args`, environment exactly `env` (see [`child::stdio_env`]),
    /// working directory `cwd` (the agent dir) when given.
    Stdio {
        command: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
        cwd: Option<PathBuf>,
        /// Run it confined (its own network namespace, only the proxy reachable); `None`:
        /// proxy variables only.
        confine: Option<forge_egress::confine::Confiner>,
    },
}

/// One server, as the runtime resolved it from forge.yaml `mcp.servers` (tokens and environment
/// values already looked up).
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The slug; tools become `<name>__<tool>`.
    pub name: String,
    pub transport: ServerTransport,
    /// Tool names let through (`*` for all).
    pub allow: Vec<String>,
    /// Tool names never let through (wins over `allow`).
    pub deny: Vec<String>,
    /// Time limit of each request (initialize, list, call).
    pub timeout: Duration,
}

impl ServerSpec {
    fn allows(&self, tool: &str) -> bool {
        !self.deny.iter().any(|d| d == tool) && self.allow.iter().any(|a| a == "*" || a == tool)
    }

    /// Where the server is, for messages: its URL or its command.
    pub fn location(&self) -> String {
        match &self.transport {
            ServerTransport::Http { url, .. } => url.clone(),
            ServerTransport::Stdio { command, .. } => format!("stdio command {command}"),
        }
    }
}

/// What the HTTP transport needs from the runtime: the one egress policy and the client options
/// (resolver, dialer, root store, observer) the agent's egress client uses. forge builds its own
/// client from them with `max_redirects: 0` and the server's timeout.
#[derive(Clone)]
pub struct EgressDeps {
    pub policy: Arc<EgressPolicy>,
    pub options: ClientOptions,
}

/// A tool of the server that the filter left out, and why (for `forge tool list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTool {
    /// The server's name for it.
    pub tool: String,
    pub reason: String,
}

/// A connected server: its tools and the connection they share.
pub struct McpConnection {
    conn: Arc<Conn>,
    tools: Vec<Arc<McpTool>>,
    skipped: Vec<SkippedTool>,
}

impl std::fmt::Debug for McpConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpConnection")
            .field("server", &self.conn.spec.name)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

struct Conn {
    spec: ServerSpec,
    peer: Peer<RoleClient>,
    service: Mutex<Option<RunningService<RoleClient, ()>>>,
    child: Mutex<Option<ChildGuard>>,
}

impl McpConnection {
    /// The server's name.
    pub fn name(&self) -> &str {
        &self.conn.spec.name
    }

    /// The server's tools that passed the filter, as forge tools (`<server>__<tool>`).
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools
            .iter()
            .map(|t| t.clone() as Arc<dyn Tool>)
            .collect()
    }

    /// The server's tools that the filter left out, with the reason.
    pub fn skipped(&self) -> &[SkippedTool] {
        &self.skipped
    }

    /// The stdio child's process id (its process group id), if this is a stdio server.
    pub async fn child_pid(&self) -> Option<u32> {
        self.conn.child.lock().await.as_ref().and_then(|c| c.id())
    }

    /// Close the session and, for stdio, kill the child's process group. Tools still held
    /// fail afterwards with a message saying the server was shut down.
    pub async fn shutdown(&self) {
        if let Some(mut s) = self.conn.service.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), s.close()).await;
        }
        if let Some(c) = self.conn.child.lock().await.take() {
            c.kill().await;
        }
    }
}

/// Connect to `spec`, list its tools and wrap those its filter allows. `egress` is required for
/// http servers. Fails (naming the server, where it is and the cause) when the server cannot be
/// reached, refuses the token, or the listing fails; the runtime decides what a failure means
/// (startup error for `required: true`, absent tools with the reason otherwise).
pub async fn connect(
    spec: ServerSpec,
    egress: Option<&EgressDeps>,
) -> Result<McpConnection, McpError> {
    let fail = |cause: String| McpError::Connect {
        server: spec.name.clone(),
        location: spec.location(),
        cause,
    };
    let (service, child) = match &spec.transport {
        ServerTransport::Http { url, bearer } => {
            let Some(deps) = egress else {
                return Err(fail(
                    "no egress client was given for an http MCP server".into(),
                ));
            };
            let options = ClientOptions {
                max_redirects: 0,
                timeout: spec.timeout,
                ..deps.options.clone()
            };
            let client = Arc::new(EgressClient::new(deps.policy.clone(), options));
            let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(token) = bearer {
                cfg = cfg.auth_header(token.clone());
            }
            let transport =
                StreamableHttpClientTransport::with_client(EgressHttp::new(client), cfg);
            let svc = tokio::time::timeout(spec.timeout, ().serve(transport))
                .await
                .map_err(|_| fail(format!("no answer to initialize within {:?}", spec.timeout)))?
                .map_err(|e| fail(describe_init_error(&e.to_string())))?;
            (svc, None)
        }
        ServerTransport::Stdio {
            command,
            args,
            env,
            cwd,
            confine,
        } => {
            let (guard, stdout, stdin) = child::spawn(
                &spec.name,
                command,
                args,
                env,
                cwd.as_deref(),
                confine.as_ref(),
            )
            .map_err(|e| fail(format!("cannot start {command}: {e}")))?;
            let svc = match tokio::time::timeout(spec.timeout, ().serve((stdout, stdin))).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    guard.kill().await;
                    return Err(fail(format!(
                        "the process did not complete the MCP handshake: {e} (its stderr is in the log)"
                    )));
                }
                Err(_) => {
                    guard.kill().await;
                    return Err(fail(format!(
                        "no answer to initialize within {:?} (its stderr is in the log)",
                        spec.timeout
                    )));
                }
            };
            (svc, Some(guard))
        }
    };
    let peer = service.peer().clone();
    let conn = Arc::new(Conn {
        spec: spec.clone(),
        peer: peer.clone(),
        service: Mutex::new(Some(service)),
        child: Mutex::new(child),
    });
    let listed = match tokio::time::timeout(spec.timeout, peer.list_all_tools()).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            close(&conn).await;
            return Err(fail(format!("tools/list failed: {e}")));
        }
        Err(_) => {
            close(&conn).await;
            return Err(fail(format!(
                "tools/list got no answer within {:?}",
                spec.timeout
            )));
        }
    };
    let mut tools = Vec::new();
    let mut skipped = Vec::new();
    for t in listed {
        let remote = t.name.to_string();
        if !spec.allows(&remote) {
            let reason = if spec.deny.contains(&remote) {
                format!("denied by mcp.servers[{}].tools.deny", spec.name)
            } else {
                format!("not in mcp.servers[{}].tools.allow", spec.name)
            };
            skipped.push(SkippedTool {
                tool: remote,
                reason,
            });
            continue;
        }
        tools.push(Arc::new(McpTool {
            name: format!("{}__{}", spec.name, remote),
            description: t
                .description
                .as_deref()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{remote} (from MCP server {})", spec.name)),
            schema: Value::Object((*t.input_schema).clone()),
            remote,
            conn: conn.clone(),
        }));
    }
    Ok(McpConnection {
        conn,
        tools,
        skipped,
    })
}

async fn close(conn: &Conn) {
    if let Some(mut s) = conn.service.lock().await.take() {
        let _ = tokio::time::timeout(Duration::from_secs(5), s.close()).await;
    }
    if let Some(c) = conn.child.lock().await.take() {
        c.kill().await;
    }
}

fn describe_init_error(e: &str) -> String {
    if e.contains("Auth required") || e.contains("authorization required") {
        format!("the server refused the credentials (HTTP 401): check the token variable; {e}")
    } else {
        e.to_string()
    }
}

/// One tool of an MCP server, as a forge tool.
struct McpTool {
    name: String,
    description: String,
    schema: Value,
    remote: String,
    conn: Arc<Conn>,
}

#[async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let args = match input {
            Value::Object(m) => m,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidInput(format!(
                    "{} takes a JSON object, not {other}",
                    self.name
                )))
            }
        };
        if self.conn.service.lock().await.is_none() {
            return Err(ToolError::Failed(format!(
                "the MCP server {} was shut down; its tools are no longer available",
                self.conn.spec.name
            )));
        }
        // A task narrowed by its caller (allowed_hosts) reaches an HTTP server only when its
        // scope names it: the connection is the agent's, so the task's scope is checked here.
        if let (ServerTransport::Http { url, .. }, Some(client)) =
            (&self.conn.spec.transport, &ctx.egress)
        {
            if let Err(r) = client.policy().check_scope_strict(url) {
                // The observers hear of it; the error the model sees names the server.
                let _ = client.refuse(url, r.clone());
                return Err(ToolError::Blocked(
                    r.within(format!("MCP server {}", self.conn.spec.name)),
                ));
            }
        }
        let limit = match ctx.timeout {
            Some(t) => t.min(self.conn.spec.timeout),
            None => self.conn.spec.timeout,
        };
        let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(args);
        let call = self.conn.peer.call_tool(params);
        // Dropping `call` (cancel or timeout) makes rmcp send notifications/cancelled.
        let result = tokio::select! {
            r = call => r,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            _ = tokio::time::sleep(limit) => return Err(ToolError::Timeout(limit)),
        };
        let result = result.map_err(|e| {
            ToolError::Failed(format!(
                "calling {} on MCP server {} ({}) failed: {e}",
                self.remote,
                self.conn.spec.name,
                self.conn.spec.location()
            ))
        })?;
        self.to_output(result)
    }
}

impl McpTool {
    fn note(&self) -> String {
        format!(
            "source=mcp server={} tool={}",
            self.conn.spec.name, self.remote
        )
    }

    fn to_output(&self, r: CallToolResult) -> Result<ToolOutput, ToolError> {
        let text = content_text(&r.content);
        if r.is_error == Some(true) {
            let msg = if text.trim().is_empty() {
                "the tool reported an error without a message".to_string()
            } else {
                text
            };
            return Err(ToolError::Failed(format!(
                "MCP server {} reported an error from {}:\n{}",
                self.conn.spec.name,
                self.remote,
                fence::wrap(&self.note(), &msg)
            )));
        }
        let data = r.structured_content.clone();
        let shown = if text.is_empty() {
            data.as_ref().map(|d| d.to_string()).unwrap_or_default()
        } else {
            text
        };
        Ok(ToolOutput {
            text: fence::wrap(&self.note(), &shown),
            data,
        })
    }
}

/// The text of a result's content items, joined by newlines; non-text items are described.
fn content_text(items: &[ContentBlock]) -> String {
    let mut parts = Vec::new();
    for c in items {
        match c {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(i) => parts.push(format!(
                "[image content: {}, {} base64 bytes, not shown]",
                i.mime_type,
                i.data.len()
            )),
            ContentBlock::Resource(_) => parts.push("[embedded resource, not shown]".into()),
            ContentBlock::ResourceLink(l) => parts.push(format!("[resource link: {}]", l.uri)),
            _ => parts.push("[content item of another kind, not shown]".into()),
        }
    }
    parts.join("\n")
}
