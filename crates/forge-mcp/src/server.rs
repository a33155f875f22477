//! The server adapter: an rmcp `ServerHandler` over a [`ToolHost`] (forge-runtime implements it
//! with the agent's `ToolRunner`), served over stdio ([`serve_io`], [`serve_stdio`]) or
//! streamable HTTP ([`serve_http`]).
//!
//! Rules it keeps:
//! - One host session per MCP session: opened on the first tool call, closed when the MCP session
//!   ends (the stdio connection closes; an HTTP `Mcp-Session-Id` is deleted or expires).
//! - Tool failures are results with `isError: true` carrying the tool's message, never protocol
//!   errors; an unknown tool name is such a result too.
//! - Results carry the text as the model would see it (already fenced by the tool) and
//!   `structuredContent` when the tool's data is a JSON object. `browser_screenshot` also returns
//!   the PNG it wrote as image content when it is at most [`ServeOptions::image_cap_bytes`].
//! - `notifications/cancelled` cancels the token the host's call runs with.
//! - With a progress token, a call longer than [`ServeOptions::progress_interval`] sends a
//!   progress notification every interval until it ends.
//! - A call can tell the client's user something while it runs ([`UserNotice`], through
//!   [`ToolHost::call_with_notices`]: a hand-off's link): sent at once as a URL-mode
//!   `elicitation/create` when the client declared `elicitation.url`, else as a
//!   `notifications/message` (level `notice`, data `{"event", "message", "url", "id"}`) and, with a
//!   progress token, a progress notification whose message is the notice; either way added as a
//!   text block to the call's final result.
//! - HTTP: see [`serve_http`] for the bind, token, Host and Origin rules.
//! - Protocol versions up to 2025-11-25 are offered (not 2026-07-28, which drops sessions), so a
//!   client's calls share one host session.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    RequestParamsMeta, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{OnceCell, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use forge_egress::accept::{
    accept_http, serve_http1, AcceptOptions, HeadGate, OverCap, BUSY_503, HEAD_TIMEOUT,
};
use forge_tools::{ToolError, ToolOutput};

use crate::error::McpError;

/// A host session (one per MCP session): a forge session key.
pub type SessionKey = String;

/// A tool as MCP clients see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
}

/// Something a running call needs the client's user to see now (a hand-off's link): the call
/// cannot finish until a person acts on it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserNotice {
    /// What it is (`handoff`).
    pub event: String,
    /// An id for it (a hand-off's id).
    pub id: String,
    /// One or two sentences for the person.
    pub message: String,
    /// The page the person should open.
    pub url: String,
}

/// Where a call sends its [`UserNotice`]s (bounded: [`MAX_NOTICES`] per call are delivered).
pub type Notices = tokio::sync::mpsc::Sender<UserNotice>;

/// Notices a call can have queued at once.
pub const MAX_NOTICES: usize = 8;

/// What the MCP server exposes: forge-runtime implements this over the agent's `ToolRunner`.
#[async_trait]
pub trait ToolHost: Send + Sync + 'static {
    /// The tools, with the names, descriptions and schemas `forge tool describe` shows.
    fn tools(&self) -> Vec<ToolInfo>;
    /// The `initialize` instructions (which hosts the policy allows, ...).
    fn instructions(&self) -> String;
    /// Start a session (a browser context, ...); called on an MCP session's first tool call.
    async fn open_session(&self) -> SessionKey;
    /// End a session; called once when its MCP session ends.
    async fn close_session(&self, key: SessionKey);
    /// Run one call. `cancel` is cancelled by `notifications/cancelled` (or the session ending).
    async fn call(
        &self,
        session: &SessionKey,
        name: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, ToolError>;
    /// [`ToolHost::call`], with `notices` for what the client's user must see while it runs
    /// (see [`UserNotice`]). By default the notices are not used.
    async fn call_with_notices(
        &self,
        session: &SessionKey,
        name: &str,
        args: Value,
        cancel: CancellationToken,
        notices: Notices,
    ) -> Result<ToolOutput, ToolError> {
        drop(notices);
        self.call(session, name, args, cancel).await
    }
}

/// How results are shaped and progress is reported.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Largest PNG returned as image content by `browser_screenshot` (default 1 MiB); a larger
    /// one is left out, with a note in the text saying where the file is.
    pub image_cap_bytes: u64,
    /// Progress notifications: the first after this long, then every interval (default 1 s).
    pub progress_interval: Duration,
    /// `serverInfo.name` / `version` (default `forge` and this crate's version).
    pub server_name: String,
    pub server_version: String,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            image_cap_bytes: 1024 * 1024,
            progress_interval: Duration::from_secs(1),
            server_name: "forge".into(),
            server_version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The tool whose result carries a PNG as image content.
pub const SCREENSHOT_TOOL: &str = "browser_screenshot";

/// One MCP session's host session: opened lazily, closed once.
struct SessionSlot {
    host: Arc<dyn ToolHost>,
    key: OnceCell<SessionKey>,
    closed: std::sync::atomic::AtomicBool,
    /// Cancelled when the session ends: stops calls still running.
    ended: CancellationToken,
}

impl SessionSlot {
    async fn key(&self) -> &SessionKey {
        self.key.get_or_init(|| self.host.open_session()).await
    }

    async fn close(&self) {
        self.ended.cancel();
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(k) = self.key.get() {
            self.host.close_session(k.clone()).await;
        }
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        self.ended.cancel();
        if self.closed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(k) = self.key.take() {
            let host = self.host.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move { host.close_session(k).await });
            }
        }
    }
}

/// The rmcp handler for one MCP session.
struct Handler {
    host: Arc<dyn ToolHost>,
    opts: Arc<ServeOptions>,
    slot: Arc<SessionSlot>,
}

impl Handler {
    fn new(host: Arc<dyn ToolHost>, opts: Arc<ServeOptions>) -> Self {
        Self {
            slot: Arc::new(SessionSlot {
                host: host.clone(),
                key: OnceCell::new(),
                closed: Default::default(),
                ended: CancellationToken::new(),
            }),
            host,
            opts,
        }
    }
}

fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// The MCP result for a host result (see the module rules).
pub fn to_call_result(
    name: &str,
    result: Result<ToolOutput, ToolError>,
    opts: &ServeOptions,
) -> CallToolResult {
    let out = match result {
        Ok(o) => o,
        Err(e) => return error_result(e.to_string()),
    };
    let mut content = vec![ContentBlock::text(out.text.clone())];
    if name == SCREENSHOT_TOOL {
        match screenshot_image(out.data.as_ref(), opts.image_cap_bytes) {
            Ok(Some(img)) => content.push(img),
            Ok(None) => {}
            Err(note) => content.push(ContentBlock::text(note)),
        }
    }
    let mut r = CallToolResult::success(content);
    if let Some(Value::Object(m)) = out.data {
        r.structured_content = Some(Value::Object(m));
    }
    r
}

/// The PNG a screenshot result points at, as image content; `Err` with a note when it is too big
/// or unreadable.
fn screenshot_image(data: Option<&Value>, cap: u64) -> Result<Option<ContentBlock>, String> {
    let Some(d) = data else { return Ok(None) };
    let (Some(path), Some("image/png")) = (
        d.get("path").and_then(Value::as_str),
        d.get("mime_type").and_then(Value::as_str),
    ) else {
        return Ok(None);
    };
    // The immutable copy forge captured when the tool returned, when there is one: the bytes
    // served are the ones the tool made, whatever happened to `path` since.
    let read_from = d
        .get("artifact_path")
        .and_then(Value::as_str)
        .unwrap_or(path);
    let meta = std::fs::metadata(read_from)
        .map_err(|e| format!("[the screenshot {path} could not be read for image content: {e}]"))?;
    if meta.len() > cap {
        return Err(format!(
            "[the screenshot is {} bytes, above the image content limit of {cap} bytes; it is saved at {path}]",
            meta.len()
        ));
    }
    let bytes = std::fs::read(read_from)
        .map_err(|e| format!("[the screenshot {path} could not be read for image content: {e}]"))?;
    if bytes.len() as u64 > cap || !bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Err(format!(
            "[the file {path} is not a PNG within the limit; no image content]"
        ));
    }
    Ok(Some(ContentBlock::image(
        base64::engine::general_purpose::STANDARD.encode(&bytes),
        "image/png",
    )))
}

fn schema_object(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => match json!({"type": "object"}) {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        },
    }
}

impl ServerHandler for Handler {
    /// Every known version except 2026-07-28 and later, which have no sessions (SEP-2567): forge
    /// keeps one host session (browser context) per MCP session, so clients negotiate a version
    /// that has them.
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Owned(
            ProtocolVersion::KNOWN_VERSIONS
                .iter()
                .filter(|v| **v < ProtocolVersion::V_2026_07_28)
                .cloned()
                .collect(),
        )
    }

    #[allow(deprecated)] // enable_logging: see tell_user
    fn get_info(&self) -> ServerConfig {
        // Logging: the notices of running calls (a hand-off's link) are log messages.
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
        .with_instructions(self.host.instructions());
        info.server_info = Implementation::new(
            self.opts.server_name.clone(),
            self.opts.server_version.clone(),
        );
        info
    }

    /// Accepted; forge sends only notices a user must see (level `notice`), whatever the level.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools = self
            .host
            .tools()
            .into_iter()
            .map(|t| rmcp::model::Tool::new(t.name, t.description, schema_object(t.input_schema)))
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        let known = self.host.tools();
        if !known.iter().any(|t| t.name == name) {
            let names: Vec<_> = known.iter().map(|t| t.name.as_str()).collect();
            return Ok(error_result(format!(
                "unknown tool \"{name}\"; this agent's tools are: {}",
                names.join(", ")
            ))
            .into());
        }
        let progress = context
            .meta
            .get_progress_token()
            .or_else(|| request.progress_token());
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let cancel = context.ct.child_token();
        let ended = self.slot.ended.clone();
        let session = self.slot.key().await.clone();
        let (notices, mut notes_rx) = tokio::sync::mpsc::channel(MAX_NOTICES);
        let call = self
            .host
            .call_with_notices(&session, &name, args, cancel.clone(), notices);
        tokio::pin!(call);
        let start = Instant::now();
        let interval = self.opts.progress_interval;
        let mut next = tokio::time::Instant::now() + interval;
        let mut told: Vec<UserNotice> = Vec::new();
        let mut notes_open = true;
        let result = loop {
            tokio::select! {
                r = &mut call => break r,
                n = notes_rx.recv(), if notes_open => match n {
                    Some(n) => {
                        tell_user(&context, progress.as_ref(), &start, &n).await;
                        told.push(n);
                    }
                    None => notes_open = false,
                },
                _ = ended.cancelled(), if !cancel.is_cancelled() => {
                    // The session ended: cancel the call and let it finish promptly.
                    cancel.cancel();
                }
                _ = tokio::time::sleep_until(next), if progress.is_some() => {
                    next += interval;
                    if let Some(token) = &progress {
                        let secs = start.elapsed().as_secs_f64();
                        let p = ProgressNotificationParam::new(token.clone(), secs.floor())
                            .with_message(format!("{name} running for {secs:.0}s"));
                        if let Err(e) = context.peer.notify_progress(p).await {
                            tracing::debug!("mcp: progress notification not sent: {e}");
                        }
                    }
                }
            }
        };
        let mut r = to_call_result(&name, result, &self.opts);
        for n in &told {
            r.content.push(ContentBlock::text(format!(
                "[told the user while the call ran: {}]",
                n.message
            )));
        }
        Ok(r.into())
    }
}

/// How long the answer to a URL elicitation is awaited (only logged; the hand-off has its own
/// timeout).
const ELICIT_ANSWER_WAIT: Duration = Duration::from_secs(3600);

/// Whether the client declared URL-mode elicitation (`capabilities.elicitation.url`).
fn url_elicitation(context: &RequestContext<RoleServer>) -> bool {
    context.peer.peer_info().is_some_and(|i| {
        i.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|e| e.url.is_some())
    })
}

/// Send `n` to the client now: as a URL-mode elicitation when the client declared it, else a
/// log message (level `notice`) and, with a progress token, a progress notification carrying it. Logging is marked deprecated in rmcp (SEP-2577) but is
/// what clients of the protocol versions forge offers show to a user.
#[allow(deprecated)]
async fn tell_user(
    context: &RequestContext<RoleServer>,
    progress: Option<&rmcp::model::ProgressToken>,
    start: &Instant,
    n: &UserNotice,
) {
    if url_elicitation(context) {
        let req = rmcp::model::ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(
            rmcp::model::ElicitRequestParams::UrlElicitationParams {
                meta: None,
                message: n.message.clone(),
                url: n.url.clone(),
                elicitation_id: n.id.clone(),
            },
        ));
        // Sent from the call's own task, so rmcp routes it on the call's stream (SEP-2260); the
        // answer (accept, decline, cancel) only says whether the client showed it: the person
        // finishes on the page, and the hand-off's own timeout bounds the wait.
        match context
            .peer
            .send_request_with_option(req, rmcp::service::PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => {
                let id = n.id.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(ELICIT_ANSWER_WAIT, handle.await_response()).await {
                        Ok(Ok(r)) => tracing::debug!("mcp: elicitation {id} answered: {r:?}"),
                        Ok(Err(e)) => tracing::debug!("mcp: elicitation {id} failed: {e}"),
                        Err(_) => tracing::debug!("mcp: elicitation {id} not answered"),
                    }
                });
                return;
            }
            Err(e) => {
                tracing::debug!("mcp: URL elicitation not sent ({e}); sending notifications");
            }
        }
    }
    let data = json!({"event": n.event, "id": n.id, "message": n.message, "url": n.url});
    let sent = context
        .peer
        .notify_logging_message(
            rmcp::model::LoggingMessageNotificationParam::new(
                rmcp::model::LoggingLevel::Notice,
                data,
            )
            .with_logger("forge"),
        )
        .await;
    if let Err(e) = sent {
        tracing::debug!("mcp: notice not sent as a log message: {e}");
    }
    if let Some(token) = progress {
        let p =
            ProgressNotificationParam::new(token.clone(), start.elapsed().as_secs_f64().floor())
                .with_message(n.message.clone());
        if let Err(e) = context.peer.notify_progress(p).await {
            tracing::debug!("mcp: notice not sent as progress: {e}");
        }
    }
}

/// Serve MCP on a byte stream pair (stdio, a pipe, a socket) until the client disconnects, then
/// close the host session.
pub async fn serve_io<R, W>(
    host: Arc<dyn ToolHost>,
    opts: ServeOptions,
    read: R,
    write: W,
) -> Result<(), McpError>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let handler = Handler::new(host, Arc::new(opts));
    let slot = handler.slot.clone();
    let running = handler
        .serve((read, write))
        .await
        .map_err(|e| McpError::Io {
            addr: "stdio".into(),
            message: format!("MCP handshake failed: {e}"),
        })?;
    let _ = running.waiting().await;
    slot.close().await;
    Ok(())
}

/// Serve MCP on this process's stdin/stdout (nothing else may write to stdout).
pub async fn serve_stdio(host: Arc<dyn ToolHost>, opts: ServeOptions) -> Result<(), McpError> {
    serve_io(host, opts, tokio::io::stdin(), tokio::io::stdout()).await
}

/// HTTP serving options.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Required as `Authorization: Bearer <token>` on every request when set; required to be set
    /// for a non-loopback bind.
    pub token: Option<String>,
    /// Browser origins allowed to call (exact `scheme://host[:port]`); a request carrying any
    /// other `Origin` is refused with 403. Default none: non-browser clients send no Origin.
    pub allowed_origins: Vec<String>,
}

/// The MCP endpoint path.
pub const MCP_PATH: &str = "/mcp";
/// Connections served at once (a connection takes a slot once its request head is in; until
/// then it waits in the accept loop's [`HeadGate`], so idle connections cannot take them).
pub const MAX_CONNECTIONS: usize = 64;

/// A running HTTP server.
pub struct HttpServerHandle {
    /// The address it listens on (the MCP endpoint is `http://<addr>/mcp`).
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    join: JoinHandle<()>,
}

impl HttpServerHandle {
    /// Stop accepting, end every MCP session (closing their host sessions) and wait.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.join.await;
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Wait until the server stops.
    pub async fn wait(self) {
        let _ = self.join.await;
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// The body type of [`ExtraRoutes`] responses.
pub type HttpBody = BoxBody<Bytes, Infallible>;

/// Routes served beside [`MCP_PATH`] (forge's watch page): given a request for another path,
/// the response, or the request back when the path is not theirs (then 404). They apply their
/// own access rules (the same token, Host and Origin rules).
pub type ExtraRoutes = Arc<
    dyn Fn(
            Request<Incoming>,
        )
            -> futures::future::BoxFuture<'static, Result<Response<HttpBody>, Request<Incoming>>>
        + Send
        + Sync,
>;

fn refuse(status: StatusCode, message: &str) -> Response<Body> {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": message}});
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    r
}

/// The checks every request passes before rmcp sees it; `Some` is the refusal.
fn refusal(http: &HttpOptions, req: &Request<Incoming>) -> Option<Response<Body>> {
    if req.uri().path() != MCP_PATH {
        return Some(refuse(
            StatusCode::NOT_FOUND,
            "not found: forge serves MCP at /mcp",
        ));
    }
    // DNS rebinding: a page in the user's browser can reach a loopback port under a name it
    // controls, and may send cross-site requests. Any Origin not explicitly allowed is refused,
    // and without a token the Host must name loopback (the A2A rule).
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        if !http.allowed_origins.iter().any(|a| a == o) {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                "forbidden: this MCP server does not accept requests from web pages (Origin not allowed); add the origin to the allowed origins if a browser client needs it",
            ));
        }
    }
    match &http.token {
        None => {
            if !forge_egress::inbound::host_is_loopback(req.headers()) {
                return Some(refuse(
                    StatusCode::FORBIDDEN,
                    "forbidden: this MCP server serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost",
                ));
            }
        }
        Some(expected) => {
            if !forge_egress::inbound::bearer_matches(req.headers(), expected) {
                let mut r = refuse(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required: send Authorization: Bearer <token> with the token from .forge/runtime.token or FORGE_RUNTIME_TOKEN",
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                return Some(r);
            }
        }
    }
    None
}

/// Serve MCP over streamable HTTP on `listener` at [`MCP_PATH`].
///
/// - A listener on a non-loopback address requires `http.token` ([`McpError::TokenRequired`]).
/// - With a token, every request must carry it (401 otherwise). Without one, the `Host` header must
///   name loopback (403 otherwise), as for the A2A server.
/// - A request with an `Origin` not in `http.allowed_origins` is refused (403).
/// - Each MCP session (`Mcp-Session-Id`) gets its own host session, closed when the MCP session is
///   deleted, expires, or the server shuts down.
pub fn serve_http(
    listener: TcpListener,
    host: Arc<dyn ToolHost>,
    opts: ServeOptions,
    http: HttpOptions,
) -> Result<HttpServerHandle, McpError> {
    serve_http_with(listener, host, opts, http, None)
}

/// [`serve_http`], also serving `extra` routes on paths other than [`MCP_PATH`].
pub fn serve_http_with(
    listener: TcpListener,
    host: Arc<dyn ToolHost>,
    opts: ServeOptions,
    http: HttpOptions,
    extra: Option<ExtraRoutes>,
) -> Result<HttpServerHandle, McpError> {
    let addr = listener.local_addr().map_err(|e| McpError::Io {
        addr: "listener".into(),
        message: e.to_string(),
    })?;
    if !addr.ip().is_loopback() && http.token.as_deref().is_none_or(str::is_empty) {
        return Err(McpError::TokenRequired { addr });
    }
    let shutdown = CancellationToken::new();
    let opts = Arc::new(opts);
    let config = StreamableHttpServerConfig::default()
        // forge applies its own Host/Origin rule in `refusal` (token-aware).
        .disable_allowed_hosts()
        .disable_allowed_origins()
        .with_cancellation_token(shutdown.child_token());
    let factory_host = host.clone();
    let service = StreamableHttpService::new(
        move || Ok(Handler::new(factory_host.clone(), opts.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let http = Arc::new(http);
    let stop = shutdown.clone();
    let options = AcceptOptions {
        log_prefix: "mcp:",
        conns: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        over_cap: OverCap::Answer(BUSY_503),
        nodelay: false,
        tracker: None,
    };
    let join = tokio::spawn(accept_http(
        listener,
        options,
        HeadGate::default(),
        stop.clone(),
        move |stream| {
            let service = service.clone();
            let http = http.clone();
            let stop = stop.clone();
            let extra = extra.clone();
            let svc = service_fn(move |req: Request<Incoming>| {
                let service = service.clone();
                let http = http.clone();
                let extra = extra.clone();
                async move {
                    let req = match (&extra, req.uri().path() == MCP_PATH) {
                        (Some(routes), false) => match routes(req).await {
                            Ok(r) => return Ok::<_, Infallible>(r),
                            Err(req) => req,
                        },
                        _ => req,
                    };
                    if let Some(refused) = refusal(&http, &req) {
                        return Ok::<_, Infallible>(refused);
                    }
                    Ok(service.handle(req).await)
                }
            });
            serve_http1(stream, svc, HEAD_TIMEOUT, stop, Duration::from_secs(2))
        },
    ));
    Ok(HttpServerHandle {
        addr,
        shutdown,
        join,
    })
}
