//! The HTTP side of the A2A server (hyper, HTTP/1.1): routing, the bearer-token check, request
//! limits, JSON-RPC 2.0 framing and Server-Sent Events for `message/stream`.
//!
//! Routes: `GET /.well-known/agent-card.json` (and `/.well-known/agent.json`), `GET /healthz`
//! (liveness: the process answers), `GET /readyz` (readiness: 503 while draining or at the browser
//! session cap), `POST /` (JSON-RPC), `GET /artifacts/{task_id}/{name}` (a file a task wrote, with
//! the same authentication as `POST /`; no listing, plain file names only). Limits: request bodies up to [`MAX_BODY`] (413 beyond), a
//! [`HEAD_TIMEOUT`] for each request head, at most [`MAX_CONNECTIONS`] connections served at once
//! (a connection takes a slot once its request head is in; until then it waits in a
//! [`HeadGate`] with its own budget and per-peer-IP cap, so idle connections cannot starve real
//! requests). [`serve_probe`] serves `/healthz` and `/readyz` on a port of their own.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc::unbounded_channel, Semaphore};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use forge_egress::accept::{
    accept_http, serve_http1, AcceptOptions, HeadGate, OverCap, BUSY_503, HEAD_TIMEOUT,
};

use super::files::ArtifactReadError;
use super::forward;
use super::scheduler::Accepted;
use super::store::TaskStore;
use super::v1;
use super::wire::RpcError;

/// Largest request body accepted.
pub(crate) const MAX_BODY: usize = 1 << 20;
/// Connections served at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;
/// Interval of SSE keep-alive comments on an otherwise idle stream.
pub(crate) const SSE_KEEPALIVE: Duration = Duration::from_secs(15);

type Body = BoxBody<Bytes, Infallible>;

struct Shared {
    store: Arc<TaskStore>,
    card: Value,
    token: Option<String>,
}

/// A running server.
pub struct ServerHandle {
    /// The address it listens on.
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    join: JoinHandle<()>,
}

impl ServerHandle {
    /// Stop accepting, cancel running tasks and wait for the accept loop to end.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        let _ = self.join.await;
    }

    /// A token that stops the server when cancelled.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Wait until the server stops (after its shutdown token is cancelled).
    pub async fn wait(self) {
        let _ = self.join.await;
    }
}

/// Serve A2A on `listener`. `card` is the agent card JSON; `token`, when set, is required as
/// `Authorization: Bearer <token>` on `POST /`.
pub fn serve(
    listener: TcpListener,
    store: Arc<TaskStore>,
    card: Value,
    token: Option<String>,
) -> std::io::Result<ServerHandle> {
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    super::live::attach(&store);
    let shared = Arc::new(Shared { store, card, token });
    let stop = shutdown.clone();
    let options = AcceptOptions {
        log_prefix: "a2a:",
        conns: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        over_cap: OverCap::Answer(BUSY_503),
        nodelay: false,
        tracker: None,
    };
    let join = tokio::spawn(async move {
        let serving = shared.clone();
        let serving_stop = stop.clone();
        accept_http(
            listener,
            options,
            HeadGate::default(),
            stop.clone(),
            move |stream| {
                let shared = serving.clone();
                let svc = service_fn(move |req| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(handle(shared, req).await) }
                });
                serve_http1(
                    stream,
                    svc,
                    HEAD_TIMEOUT,
                    serving_stop.clone(),
                    Duration::from_secs(2),
                )
            },
        )
        .await;
        shared.store.cancel_all();
    });
    Ok(ServerHandle {
        addr,
        shutdown,
        join,
    })
}

/// Serve `/healthz` and `/readyz` (the store's readiness: not ready while draining or at the
/// browser session cap) on `listener`, a port of their own, until `stop` is cancelled.
pub(crate) fn serve_probe(
    listener: TcpListener,
    store: Arc<TaskStore>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    let ready: forge_egress::probe::ReadyCheck = Arc::new(move || {
        let store = store.clone();
        Box::pin(async move { store.ready().await })
    });
    tokio::spawn(forge_egress::probe::serve(listener, ready, stop))
}

fn full(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    if let Ok(v) = header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, e: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": e.code, "message": e.message}})
}

/// `http://HOST/` from the request's `Host` header when that is a plain `host[:port]`: the address
/// the client actually used (a server bound to 0.0.0.0 does not know it otherwise).
fn request_base_url(headers: &http::HeaderMap) -> Option<String> {
    let h = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)?;
    let plain = !h.is_empty()
        && h.len() <= 255
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    plain.then(|| format!("http://{h}/"))
}

/// The card with its `url` taken from the request's `Host` header when that is a plain
/// `host[:port]` (so a server bound to 0.0.0.0 advertises the address clients actually used).
fn card_for(card: &Value, headers: &http::HeaderMap) -> Value {
    match request_base_url(headers) {
        Some(base) => {
            let mut c = card.clone();
            let url = json!(base);
            if let Some(ifaces) = c
                .get_mut("supportedInterfaces")
                .and_then(Value::as_array_mut)
            {
                for i in ifaces {
                    i["url"] = url.clone();
                }
            }
            c["url"] = url;
            c
        }
        _ => card.clone(),
    }
}

/// Whether the body is declared as JSON (`application/json`, parameters allowed).
fn is_json(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// The refusal for a request that fails the rule of `POST /`: without a token the Host must name
/// loopback (no DNS rebinding); with one, the bearer token must match. `None`: allowed.
fn refuse_unauthorized(shared: &Shared, headers: &http::HeaderMap) -> Option<Response<Body>> {
    if shared.token.is_none() && !forge_egress::inbound::host_is_loopback(headers) {
        return Some(json_response(
            StatusCode::FORBIDDEN,
            &json!({"error": "this agent serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost"}),
        ));
    }
    if let Some(expected) = &shared.token {
        if !forge_egress::inbound::bearer_matches(headers, expected) {
            let mut r = json_response(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "a bearer token is required: send Authorization: Bearer <token> with the token from .forge/runtime.token"}),
            );
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            return Some(r);
        }
    }
    None
}

/// Decode `%XX` escapes of one path segment; `None` for a bad escape or bytes that are not UTF-8.
fn percent_decode(seg: &str) -> Option<String> {
    let b = seg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = seg.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `GET /artifacts/{task_id}/{name}`: the bytes of a file a task wrote. `rest` is the path after
/// `/artifacts/`. Exactly two segments; no listing; a name that could leave the task's files
/// (`/`, `\`, `..`, NUL, also when percent-encoded) is refused with 400.
async fn artifact(shared: &Shared, rest: &str) -> Response<Body> {
    let not_found = || {
        full(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: artifacts are served at /artifacts/{task_id}/{file name}; there is no listing\n",
        )
    };
    let mut segs = rest.split('/');
    let (Some(task), Some(name), None) = (segs.next(), segs.next(), segs.next()) else {
        // `..` as a segment of its own ends up here too: refuse it by name.
        if rest.split('/').any(|s| s == ".." || s == ".") {
            return full(
                StatusCode::BAD_REQUEST,
                "text/plain",
                "refused: an artifact path names one task and one plain file name, never `..`\n",
            );
        }
        return not_found();
    };
    if task.is_empty() || name.is_empty() {
        return not_found();
    }
    let (Some(task), Some(name)) = (percent_decode(task), percent_decode(name)) else {
        return full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            "refused: the artifact path has a bad %-escape\n",
        );
    };
    match shared.store.artifact(&task, &name).await {
        Ok((mime, bytes)) => {
            let mut r = full(StatusCode::OK, &mime, bytes);
            let h = r.headers_mut();
            // The bytes are the agent's output, possibly from a web page: never sniffed, never
            // run as a page of this origin, not cached by shared caches.
            h.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                header::HeaderValue::from_static("nosniff"),
            );
            h.insert(
                header::CONTENT_SECURITY_POLICY,
                header::HeaderValue::from_static("default-src 'none'; sandbox"),
            );
            h.insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("private, no-store"),
            );
            r
        }
        Err(ArtifactReadError::BadName(n)) => full(
            StatusCode::BAD_REQUEST,
            "text/plain",
            format!("refused: {n:?} is not a plain file name (no `/`, `\\`, `..` or NUL)\n"),
        ),
        Err(ArtifactReadError::NotFound) => not_found(),
        Err(ArtifactReadError::Unavailable(why)) => full(
            StatusCode::GONE,
            "text/plain",
            format!("the artifact cannot be served: {why}\n"),
        ),
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    // The live view (`/ui/tasks/{id}/live`) and the hand-off pages first: the watch page's
    // module below answers every other `/ui/...` path (with a 404 for ones it does not know).
    let path = req.uri().path().to_string();
    if super::live::owns(&path) {
        return super::live::handle(&shared.store, shared.token.as_deref(), req).await;
    }
    // The watch page (`/ui`, `/tasks/{id}/egress`): its own module, the same access rules.
    let req = match crate::ui::handle(shared.store.clone(), shared.token.as_deref(), req).await {
        Ok(r) => return r,
        Err(req) => req,
    };
    if let Some(rest) = path.strip_prefix("/artifacts/") {
        if req.method() != Method::GET {
            return full(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "method not allowed\n",
            );
        }
        // The watch page shows screenshots inline: its cookie stands for the bearer token.
        let page = shared
            .token
            .as_deref()
            .is_some_and(|t| crate::ui::artifact_cookie_ok(req.headers(), t));
        if let Some(refusal) = refuse_unauthorized(&shared, req.headers()).filter(|_| !page) {
            return refusal;
        }
        return artifact(&shared, rest).await;
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, "/.well-known/agent-card.json" | "/.well-known/agent.json") => {
            json_response(StatusCode::OK, &card_for(&shared.card, req.headers()))
        }
        (&Method::GET, "/healthz") => json_response(StatusCode::OK, &json!({"status": "ok"})),
        (&Method::GET, "/readyz") => match shared.store.ready().await {
            Ok(()) => json_response(StatusCode::OK, &json!({"status": "ready"})),
            Err(why) => json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({"status": "not ready", "reason": why}),
            ),
        },
        (&Method::POST, "/") => {
            // Without a token the server trusts loopback. A web page in the user's browser is
            // on loopback too: it can send a cross-site "simple" POST (text/plain or a form
            // type, no CORS preflight) or reach the port under a DNS-rebinding name. So without
            // a token the Host must name loopback, and every POST must be JSON.
            if shared.token.is_none() && !forge_egress::inbound::host_is_loopback(req.headers()) {
                if let Some(refusal) = refuse_unauthorized(&shared, req.headers()) {
                    return refusal;
                }
            }
            if !is_json(req.headers()) {
                return json_response(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    &json!({"error": "send JSON-RPC with Content-Type: application/json"}),
                );
            }
            if let Some(refusal) = refuse_unauthorized(&shared, req.headers()) {
                return refusal;
            }
            let base_url = request_base_url(req.headers());
            // A caller's W3C `traceparent`: the tasks this request starts continue its trace.
            let parent = crate::telemetry::parent_from_headers(req.headers());
            let from = Inbound {
                forwarded: req.headers().contains_key(forward::FORWARDED_HEADER),
                host: req
                    .headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_string),
            };
            let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return json_response(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        &json!({"error": format!("request body larger than {MAX_BODY} bytes or unreadable")}),
                    )
                }
            };
            crate::telemetry::with_parent(parent, rpc(shared, &body, base_url, &from)).await
        }
        (
            _,
            "/"
            | "/healthz"
            | "/readyz"
            | "/.well-known/agent-card.json"
            | "/.well-known/agent.json",
        ) => full(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n",
        ),
        _ => full(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: this is an A2A agent; see /.well-known/agent-card.json\n",
        ),
    }
}

/// How a JSON-RPC request came in (for forwarding it to another replica).
struct Inbound {
    /// Another replica sent it on ([`forward::FORWARDED_HEADER`]): it is never forwarded again.
    forwarded: bool,
    /// The client's `Host`, passed on so the owner builds artifact URIs the client can use.
    host: Option<String>,
}

async fn rpc(
    shared: Arc<Shared>,
    body: &Bytes,
    base_url: Option<String>,
    from: &Inbound,
) -> Response<Body> {
    let null = Value::Null;
    let req: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return json_response(
                StatusCode::OK,
                &rpc_error(
                    &null,
                    &RpcError {
                        code: -32700,
                        message: format!("Parse error: {e}"),
                    },
                ),
            )
        }
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let invalid = |m: &str| {
        json_response(
            StatusCode::OK,
            &rpc_error(
                &id,
                &RpcError {
                    code: -32600,
                    message: m.to_string(),
                },
            ),
        )
    };
    if !req.is_object() {
        return invalid("Invalid Request: batches are not supported; send one JSON-RPC object");
    }
    if req.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("Invalid Request: jsonrpc must be \"2.0\"");
    }
    let Some(wire_method) = req.get("method").and_then(Value::as_str) else {
        return invalid("Invalid Request: no method");
    };
    // A2A 1.0 names are served by the same code through the translation layer in `v1`.
    let v1_method = v1::method_v03(wire_method).map(|m| (wire_method, m));
    let (method, params) = match v1_method {
        Some((name, m)) => (
            m,
            v1::params_from_v1(name, req.get("params").unwrap_or(&Value::Null)),
        ),
        None => (
            wire_method,
            req.get("params").cloned().unwrap_or(Value::Null),
        ),
    };
    let v1_name = v1_method.map(|(name, _)| name);
    let store = &shared.store;
    let history_length = |p: &Value| {
        p.get("historyLength")
            .and_then(Value::as_u64)
            .or_else(|| {
                p.get("configuration")
                    .and_then(|c| c.get("historyLength"))
                    .and_then(Value::as_u64)
            })
            .map(|n| n as usize)
    };
    let result: Result<Value, RpcError> = match method {
        "message/send" => {
            let msg = params.get("message").cloned().unwrap_or(Value::Null);
            if let Some(ctx) = msg.get("contextId").and_then(Value::as_str) {
                if let Some(r) = forward_to_owner(&shared, ctx, body, from).await {
                    return r;
                }
                store.preload_context(ctx).await;
            }
            let blocking = params
                .get("configuration")
                .and_then(|c| c.get("blocking"))
                .and_then(Value::as_bool)
                .unwrap_or(true);
            let claimed = match store.accept(&msg).await {
                Ok(Accepted::Run(claimed)) => claimed,
                Ok(Accepted::Earlier(task_id)) => {
                    // Accepted before (here or on another replica): its task, never a second run.
                    if blocking {
                        if let Some(done) = store.done_of(&task_id) {
                            store.wait(done).await;
                        }
                    }
                    let r = store
                        .get_or_load(&task_id, history_length(&params))
                        .await
                        .map_err(|_| earlier_unknown(&msg, &task_id));
                    return match (r, v1_name) {
                        (Ok(t), Some(name)) => json_response(
                            StatusCode::OK,
                            &rpc_result(&id, v1::result_to_v1(name, &t)),
                        ),
                        (Ok(t), None) => json_response(StatusCode::OK, &rpc_result(&id, t)),
                        (Err(e), _) => rpc_error_response(&id, &e),
                    };
                }
                Err(e) => return rpc_error_response(&id, &e),
            };
            match store.start_as(&msg, None, base_url.clone(), claimed.clone()) {
                Ok((task_id, done)) => {
                    if blocking {
                        store.wait(done).await;
                    }
                    // The answer goes out once the task (its end, for a blocking send) is in the
                    // state store: a crash right after it loses nothing the client was told, and
                    // every replica of a fleet knows the task id the client now holds.
                    store.flush().await;
                    store.get(&task_id, history_length(&params))
                }
                Err(e) => {
                    if let Some(t) = &claimed {
                        store.unaccept(&msg, t).await;
                    }
                    Err(e)
                }
            }
        }
        "message/stream" => {
            let msg = params.get("message").cloned().unwrap_or(Value::Null);
            if let Some(ctx) = msg.get("contextId").and_then(Value::as_str) {
                if let Some(r) = forward_to_owner(&shared, ctx, body, from).await {
                    return r;
                }
                store.preload_context(ctx).await;
            }
            let (tx, rx) = unbounded_channel::<Value>();
            let claimed = match store.accept(&msg).await {
                Ok(Accepted::Run(claimed)) => claimed,
                Ok(Accepted::Earlier(task_id)) => {
                    // Accepted before: stream that task (from memory or the store), never rerun.
                    return match store.subscribe(&task_id, tx.clone()) {
                        Ok(()) => sse(id, rx, v1_name.is_some()),
                        Err(_) => match store.stream_from_store(&task_id, tx).await {
                            Ok(()) => sse(id, rx, v1_name.is_some()),
                            Err(_) => rpc_error_response(&id, &earlier_unknown(&msg, &task_id)),
                        },
                    };
                }
                Err(e) => return rpc_error_response(&id, &e),
            };
            return match store.start_as(&msg, Some(tx), base_url.clone(), claimed.clone()) {
                Ok(_) => sse(id, rx, v1_name.is_some()),
                Err(e) => {
                    if let Some(t) = &claimed {
                        store.unaccept(&msg, t).await;
                    }
                    rpc_error_response(&id, &e)
                }
            };
        }
        "tasks/get" => match params.get("id").and_then(Value::as_str) {
            Some(tid) => store.get_or_load(tid, history_length(&params)).await,
            None => Err(RpcError::invalid_params(
                "params.id (the task id) is required",
            )),
        },
        "tasks/cancel" => match params.get("id").and_then(Value::as_str) {
            Some(tid) => store.cancel(tid).await,
            None => Err(RpcError::invalid_params(
                "params.id (the task id) is required",
            )),
        },
        m if m.starts_with("tasks/pushNotificationConfig/") => Err(RpcError {
            code: -32003,
            message: "Push notifications are not supported by this agent".into(),
        }),
        "tasks/resubscribe" => {
            let Some(tid) = params.get("id").and_then(Value::as_str) else {
                return json_response(
                    StatusCode::OK,
                    &rpc_error(
                        &id,
                        &RpcError::invalid_params("params.id (the task id) is required"),
                    ),
                );
            };
            let (tx, rx) = unbounded_channel::<Value>();
            return match store.subscribe(tid, tx.clone()) {
                Ok(()) => sse(id, rx, v1_name.is_some()),
                // A task of an earlier run or of another replica: from the state store.
                Err(e) => match store.stream_from_store(tid, tx).await {
                    Ok(()) => sse(id, rx, v1_name.is_some()),
                    Err(_) => json_response(StatusCode::OK, &rpc_error(&id, &e)),
                },
            };
        }
        "agent/getAuthenticatedExtendedCard" => Err(RpcError {
            code: -32004,
            message: format!("{method} is not supported by this agent"),
        }),
        other => Err(RpcError {
            code: -32601,
            message: format!(
                "Method not found: {other} (supported: message/send, message/stream, tasks/get, \
                 tasks/cancel, tasks/resubscribe, and the A2A 1.0 names SendMessage, \
                 SendStreamingMessage, GetTask, CancelTask, SubscribeToTask)"
            ),
        }),
    };
    let v = match (result, v1_name) {
        (Ok(r), Some(name)) => rpc_result(&id, v1::result_to_v1(name, &r)),
        (Ok(r), None) => rpc_result(&id, r),
        (Err(e), _) => return rpc_error_response(&id, &e),
    };
    json_response(StatusCode::OK, &v)
}

/// The error for a message accepted before as task `task_id` whose task is in no replica's memory
/// and not (yet) in the store: the replica that accepted it stopped before recording it. The
/// message is not run a second time; the client sends a new one.
fn earlier_unknown(msg: &Value, task_id: &str) -> RpcError {
    let mid = msg.get("messageId").and_then(Value::as_str).unwrap_or("");
    RpcError {
        code: -32603,
        message: format!(
            "Internal error: message {mid} was accepted before as task {task_id}, whose state is not known (the replica that took it may have stopped before recording it); it is not run a second time; send it again with a new messageId to retry"
        ),
    }
}

/// A JSON-RPC error; a draining server answers it with HTTP 503 and `Retry-After: 1`, so load
/// balancers and HTTP clients retry the message on another replica.
fn rpc_error_response(id: &Value, e: &RpcError) -> Response<Body> {
    if e.code != super::wire::DRAINING {
        return json_response(StatusCode::OK, &rpc_error(id, e));
    }
    let mut r = json_response(StatusCode::SERVICE_UNAVAILABLE, &rpc_error(id, e));
    r.headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    r
}

/// When another live replica holds the browser of conversation `ctx`: its answer to this request
/// (forwarded there, relayed back as it comes). `None`: run the task here (no fleet, the browser
/// is here or nowhere, the request was forwarded already, or the owner is gone or unreachable, in
/// which case the task's result says that its browser session is new).
async fn forward_to_owner(
    shared: &Shared,
    ctx: &str,
    body: &Bytes,
    from: &Inbound,
) -> Option<Response<Body>> {
    if from.forwarded {
        return None;
    }
    let (owner, address) = shared.store.browser_owner_elsewhere(ctx).await?;
    let me = shared.store.replica_id().unwrap_or_default();
    match forward::forward(
        &address,
        shared.token.as_deref(),
        &me,
        from.host.as_deref(),
        body.clone(),
    )
    .await
    {
        Ok(resp) => {
            tracing::info!(context = ctx, replica = %owner, "message forwarded to the replica holding its browser");
            Some(relay(resp))
        }
        Err(e) => {
            shared.store.browser_lost(
                ctx,
                &format!(
                    "the browser session of this conversation is on replica {owner}, which could not be reached ({e}); this task started a new browser session here, without the pages, tabs and cookies of earlier messages"
                ),
            );
            None
        }
    }
}

/// Another replica's response, passed on: status, headers (but hop-by-hop ones) and body as it
/// streams (an SSE stream stays a stream).
fn relay(resp: Response<Incoming>) -> Response<Body> {
    let (mut parts, body) = resp.into_parts();
    // The body passes unchanged, so a Content-Length stays true; framing is this hop's own.
    for h in [header::CONNECTION, header::TRANSFER_ENCODING] {
        parts.headers.remove(h);
    }
    let stream = futures::stream::unfold(body, |mut body| async move {
        // Bounded by the peer: the stream ends when its body ends or fails.
        match body.frame().await {
            Some(Ok(f)) => Some((Ok::<_, Infallible>(f), body)),
            _ => None,
        }
    });
    Response::from_parts(parts, BodyExt::boxed(StreamBody::new(stream)))
}

/// A Server-Sent Events response: each event is `data: <JSON-RPC response>\n\n`.
fn sse(id: Value, rx: tokio::sync::mpsc::UnboundedReceiver<Value>, v1: bool) -> Response<Body> {
    let stream = futures::stream::unfold((rx, id), move |(mut rx, id)| async move {
        // A comment line every SSE_KEEPALIVE while a long tool runs keeps intermediaries from
        // closing an idle stream; clients ignore comments.
        let line = match tokio::time::timeout(SSE_KEEPALIVE, rx.recv()).await {
            Ok(ev) => {
                let ev = ev?;
                let ev = if v1 { v1::event_to_v1(&ev) } else { ev };
                format!("data: {}\n\n", rpc_result(&id, ev))
            }
            Err(_) => ": keep-alive\n\n".to_string(),
        };
        Some((
            Ok::<_, Infallible>(Frame::data(Bytes::from(line))),
            (rx, id),
        ))
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-cache"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::percent_decode;
    use crate::a2a::files::is_servable_name;

    #[test]
    fn artifact_names_that_could_leave_the_task_are_not_servable() {
        for ok in ["shot-1.png", "report final.pdf", "ä.txt"] {
            assert!(is_servable_name(ok), "{ok}");
        }
        for bad in [
            "",
            "..",
            "a/b.png",
            "a\\b.png",
            "x..y",
            "nul\0.png",
            &"a".repeat(256),
        ] {
            assert!(!is_servable_name(bad), "{bad:?}");
        }
        assert_eq!(percent_decode("a%20b.png").as_deref(), Some("a b.png"));
        assert_eq!(percent_decode("..%2f..%2fx").as_deref(), Some("../../x"));
        assert_eq!(percent_decode("%2e%2e").as_deref(), Some(".."));
        for broken in ["%", "%2", "%zz", "%ff", "%é1"] {
            assert_eq!(percent_decode(broken), None, "{broken}");
        }
    }
}
