//! The loopback HTTP/1.1 forward proxy that puts a program (Chromium, skill scripts, anything honouring
//! `HTTP_PROXY`) under the egress policy.
//!
//! - Binds 127.0.0.1 only (ephemeral port by default); never another interface.
//! - Absolute-form `http://` requests are routed by the URI authority (Host is rewritten to it),
//!   hop-by-hop headers and client-sent `Proxy-*`, `Forwarded`, `X-Forwarded-*` are stripped, redirects
//!   are passed back, never followed. Origin-form and non-http schemes are refused (400).
//! - `CONNECT host:port` (authority-form only, no body) becomes a blind tunnel to the validated address.
//! - Every decision goes through [`Connector`] (resolve once, validate all answers, dial a validated
//!   address) and is reported to the [`EgressObserver`] once the request or tunnel has finished.
//!
//! Status codes: policy refusal 403 (header `x-forge-egress-reason`: `blocked-host`, `blocked-ip`,
//! `blocked-port`), malformed 400 (`malformed`), over-long target 414, too many tunnels 429 with
//! `Retry-After`, upstream failure 502 (`upstream-error`), DNS/connect/response timeout 504
//! (`timeout`). Oversized or too many headers get 431 and slow headers are cut off, both by hyper
//! (with a timer set on the builder, without which hyper's header timeout does nothing).

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::accept::{self, AcceptOptions, OverCap};
use crate::connect::{ConnectLimits, Connector, Dialer, TcpDialer, Validated};
use crate::error::EgressError;
use crate::host::{normalize_host, split_authority, NormalHost};
use crate::policy::{EgressPolicy, Kind};
use crate::pool::{Pool, PoolLimits};
use crate::refusal::EgressRefusal;
use crate::resolve::{Resolver, SystemResolver};
use crate::thread::ProxyThread;

/// The response header naming why the proxy refused a request.
pub const REASON_HEADER: &str = "x-forge-egress-reason";

/// Limits of the proxy. Defaults suit a browser on a developer machine.
#[derive(Debug, Clone)]
pub struct ProxyLimits {
    /// Time a client has to send the complete request head (slowloris protection).
    pub header_read_timeout: Duration,
    /// Maximum size of the request head (request line and headers); past it: 431.
    pub max_header_bytes: usize,
    /// Maximum number of request headers; past it: 431.
    pub max_headers: usize,
    /// Maximum length of the request target; past it: 414.
    pub max_target_len: usize,
    /// A tunnel with no traffic in either direction for this long is closed.
    pub idle_tunnel_timeout: Duration,
    /// Concurrent CONNECT tunnels; past it: 429 with `Retry-After`.
    pub max_tunnels: usize,
    /// Concurrent client connections; past it new connections get 503 and are closed.
    pub max_connections: usize,
    /// DNS lookup time limit (504 past it).
    pub dns_timeout: Duration,
    /// TCP connect time limit (504 past it).
    pub connect_timeout: Duration,
    /// Time the upstream has to answer a forwarded request with a response head (504 past it).
    pub upstream_response_timeout: Duration,
    /// On shutdown, time in-flight plain HTTP exchanges get to finish before they are dropped.
    pub shutdown_grace: Duration,
    /// An idle keep-alive upstream connection (plain HTTP) is closed after this long unused.
    pub pool_idle_timeout: Duration,
    /// Idle keep-alive upstream connections kept in total (0: no reuse, a connection per request).
    pub pool_max_idle: usize,
    /// Idle keep-alive upstream connections kept per policy decision (host, port, rule). Sized for
    /// a proxy many clients share (`forge egress serve`, 50 keep-alive clients of one host): below
    /// the number of clients busy with one host at once, most requests would pay a new upstream
    /// connection (dial, handshake, close).
    pub pool_max_idle_per_host: usize,
}

impl Default for ProxyLimits {
    fn default() -> Self {
        ProxyLimits {
            header_read_timeout: Duration::from_secs(10),
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_target_len: 8 * 1024,
            idle_tunnel_timeout: Duration::from_secs(120),
            max_tunnels: 256,
            max_connections: 1024,
            dns_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
            upstream_response_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(2),
            pool_idle_timeout: Duration::from_secs(30),
            pool_max_idle: 256,
            pool_max_idle_per_host: 64,
        }
    }
}

/// What happened to a request or tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The policy allowed it and the upstream was reached.
    Allowed,
    /// The policy refused it (403).
    Blocked,
    /// The request was malformed (400/414).
    Malformed,
    /// Allowed by policy, but DNS, connect or the upstream failed (502/504), or the tunnel limit was
    /// reached (429).
    Failed,
}

/// One proxy decision, reported to the observer when the request or tunnel has finished.
#[derive(Debug, Clone)]
pub struct Decision {
    /// `CONNECT` or the HTTP method of an absolute-form request.
    pub method: String,
    /// The normalised host (or the raw input when malformed).
    pub host: String,
    pub port: u16,
    /// Every address the lookup returned.
    pub resolved: Vec<IpAddr>,
    /// The address dialed.
    pub chosen: Option<SocketAddr>,
    pub outcome: Outcome,
    /// The rule that allowed it, or why it was refused or failed.
    pub reason: DecisionReason,
    /// The status the proxy answered with (200 for an established tunnel).
    pub status: u16,
    /// Bytes from the client to the upstream (request body, or tunnel bytes).
    pub bytes_up: u64,
    /// Bytes from the upstream to the client (response body, or tunnel bytes).
    pub bytes_down: u64,
    /// From the request head to the end of the exchange or tunnel.
    pub duration: Duration,
}

/// Why a decision went the way it did; Display is the text audit events show.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecisionReason {
    /// Allowed: the rule that decided (for a tunnel or a redirect, with how it ended).
    Allowed(String),
    /// The policy refused it (403), or its host is malformed (400).
    Refused(EgressRefusal),
    /// Not a policy refusal: a malformed proxy request, a limit, or a failure after the policy
    /// allowed it (DNS, connect, upstream, time-out).
    Failed(String),
}

impl DecisionReason {
    /// The policy refusal, if this is one.
    pub fn refusal(&self) -> Option<&EgressRefusal> {
        match self {
            DecisionReason::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// The reason for a failed or refused request.
    pub fn of_error(e: &EgressError) -> DecisionReason {
        match e {
            EgressError::Blocked(r) => DecisionReason::Refused(r.clone()),
            other => DecisionReason::Failed(other.to_string()),
        }
    }
}

impl std::fmt::Display for DecisionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecisionReason::Allowed(s) | DecisionReason::Failed(s) => f.write_str(s),
            DecisionReason::Refused(r) => write!(f, "{r}"),
        }
    }
}

/// Receives every decision (the runtime writes audit events from them).
pub trait EgressObserver: Send + Sync {
    fn on_decision(&self, decision: &Decision);
}

/// How to run the proxy.
#[derive(Clone)]
pub struct ProxyOptions {
    pub observer: Option<Arc<dyn EgressObserver>>,
    pub resolver: Arc<dyn Resolver>,
    pub dialer: Arc<dyn Dialer>,
    pub limits: ProxyLimits,
    /// Port on 127.0.0.1; 0 picks an ephemeral port.
    pub listen_port: u16,
    /// Serve on this thread of its own instead of the caller's runtime (what `forge egress serve`
    /// and `forge run` do: see thread.rs for why). `None`: the tasks are spawned on the runtime
    /// [`EgressProxy::serve_on`] is called from.
    pub thread: Option<ProxyThread>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            observer: None,
            resolver: Arc::new(SystemResolver),
            dialer: Arc::new(TcpDialer),
            limits: ProxyLimits::default(),
            listen_port: 0,
            thread: None,
        }
    }
}

/// A running proxy. Dropping it stops accepting and closes everything (like [`ProxyHandle::shutdown`]
/// without waiting).
pub struct ProxyHandle {
    addr: SocketAddr,
    cancel: CancellationToken,
    tracker: TaskTracker,
    accept: Option<tokio::task::JoinHandle<()>>,
    shared: Arc<Shared>,
}

impl ProxyHandle {
    /// The listening address (always 127.0.0.1).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serve `policy` from now on, which must be this proxy's policy narrowed further (a
    /// conversation's browser scope, narrowed by a later task): every open client connection
    /// and tunnel ends (they were decided under the wider policy) and pooled upstream
    /// connections are closed, so the next request is decided under `policy`.
    pub fn narrow_to(&self, policy: Arc<EgressPolicy>) {
        {
            let mut c = self
                .shared
                .connector
                .write()
                .unwrap_or_else(|p| p.into_inner());
            let mut next = (**c).clone();
            next.policy = policy;
            *c = Arc::new(next);
        }
        let old = std::mem::replace(
            &mut *self
                .shared
                .generation
                .write()
                .unwrap_or_else(|p| p.into_inner()),
            self.shared.cancel.child_token(),
        );
        old.cancel();
        // Everything idle counts as expired a year from now.
        self.shared
            .pool
            .sweep(Instant::now() + Duration::from_secs(365 * 24 * 3600));
    }

    /// The proxy URL for `HTTP_PROXY`/`--proxy-server`: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A token that stops the proxy when cancelled.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Stop accepting, close tunnels, give in-flight HTTP exchanges the grace period, and wait until
    /// every connection task has ended.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(a) = self.accept.take() {
            let _ = a.await;
        }
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Number of live connection and tunnel tasks (0 after shutdown).
    pub fn live_tasks(&self) -> usize {
        self.tracker.len()
    }

    /// A way to serve more listeners (e.g. inside a confined child's namespace) with this proxy.
    pub fn entry(&self) -> ProxyEntry {
        ProxyEntry {
            shared: self.shared.clone(),
        }
    }
}

/// Serves extra listeners with the same policy, limits, observer and shared connection and tunnel
/// caps as the proxy it came from ([`ProxyHandle::entry`]); stops with it.
#[derive(Clone)]
pub struct ProxyEntry {
    shared: Arc<Shared>,
}

impl ProxyEntry {
    /// Accept on `listener` (non-blocking, e.g. one bound inside a child's network namespace) until
    /// the returned guard is dropped or the proxy shuts down.
    pub fn serve_listener(&self, listener: std::net::TcpListener) -> io::Result<ListenerGuard> {
        listener.set_nonblocking(true)?;
        // Registered with the runtime the proxy serves on.
        let _on = self.shared.thread.as_ref().map(|t| t.handle().enter());
        let listener = TcpListener::from_std(listener)?;
        let stop = self.shared.cancel.child_token();
        self.shared
            .spawn(accept_loop(listener, self.shared.clone(), stop.clone()));
        Ok(ListenerGuard { stop })
    }
}

/// Stops serving an extra listener when dropped (connections already accepted go on).
pub struct ListenerGuard {
    stop: CancellationToken,
}

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

struct Shared {
    /// Policy, resolver, dialer and limits; replaced whole by [`ProxyHandle::narrow_to`].
    connector: std::sync::RwLock<Arc<Connector>>,
    /// Cancelled when the policy narrows: connections and tunnels opened under the wider one end.
    /// A child of `cancel`.
    generation: std::sync::RwLock<CancellationToken>,
    /// Keep-alive upstream connections of the plain-HTTP path (see pool.rs for the rules).
    pool: Pool<UpstreamSender>,
    limits: ProxyLimits,
    observer: Option<Arc<dyn EgressObserver>>,
    tunnels: Arc<Semaphore>,
    /// Client connections over every listener (the main one and [`ProxyEntry`] ones).
    conns: Arc<Semaphore>,
    cancel: CancellationToken,
    tracker: TaskTracker,
    /// The thread the proxy serves on, when it has one of its own (kept running while the proxy
    /// lives).
    thread: Option<ProxyThread>,
}

impl Shared {
    /// Spawn a tracked task on the proxy's runtime (its own thread, or the caller's runtime).
    /// Tasks already running on it spawn with `tracker.spawn` directly.
    fn spawn<F>(&self, task: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        match &self.thread {
            Some(t) => self.tracker.spawn_on(task, t.handle()),
            None => self.tracker.spawn(task),
        }
    }

    fn connector(&self) -> Arc<Connector> {
        self.connector
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn generation(&self) -> CancellationToken {
        self.generation
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn report(&self, d: Decision) {
        match d.outcome {
            Outcome::Allowed => {
                tracing::debug!(host = %d.host, port = d.port, reason = %d.reason, "egress allowed")
            }
            _ => {
                tracing::info!(host = %d.host, port = d.port, reason = %d.reason, status = d.status, "egress refused or failed")
            }
        }
        if let Some(o) = &self.observer {
            o.on_decision(&d);
        }
    }
}

/// The proxy itself.
pub struct EgressProxy;

impl EgressProxy {
    /// Bind 127.0.0.1:`listen_port` and serve until the handle is shut down or dropped.
    pub async fn serve(
        policy: Arc<EgressPolicy>,
        options: ProxyOptions,
    ) -> io::Result<(SocketAddr, ProxyHandle)> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, options.listen_port)).await?;
        Self::serve_on(listener, policy, options)
    }

    /// Serve on a listener the caller bound (`options.listen_port` is ignored): a per-task
    /// listener with a narrowed policy ([`EgressPolicy::narrow`]), or a listener inside a
    /// network namespace. Whoever can connect to it gets `policy`, so bind it where only the
    /// intended client reaches it (127.0.0.1, or an address inside the client's namespace).
    pub fn serve_on(
        listener: TcpListener,
        policy: Arc<EgressPolicy>,
        options: ProxyOptions,
    ) -> io::Result<(SocketAddr, ProxyHandle)> {
        let addr = listener.local_addr()?;
        // On a thread of its own: the listener moves to that runtime's reactor.
        let listener = match &options.thread {
            Some(t) => {
                let std_listener = listener.into_std()?;
                let _on = t.handle().enter();
                TcpListener::from_std(std_listener)?
            }
            None => listener,
        };
        let cancel = CancellationToken::new();
        let tracker = TaskTracker::new();
        let limits = options.limits.clone();
        let shared = Arc::new(Shared {
            connector: std::sync::RwLock::new(Arc::new(Connector {
                policy,
                resolver: options.resolver,
                dialer: options.dialer,
                limits: ConnectLimits {
                    dns_timeout: limits.dns_timeout,
                    connect_timeout: limits.connect_timeout,
                },
            })),
            generation: std::sync::RwLock::new(cancel.child_token()),
            pool: Pool::new(PoolLimits {
                idle_timeout: limits.pool_idle_timeout,
                max_idle: limits.pool_max_idle,
                max_idle_per_decision: limits.pool_max_idle_per_host,
            }),
            tunnels: Arc::new(Semaphore::new(limits.max_tunnels)),
            conns: Arc::new(Semaphore::new(limits.max_connections)),
            limits,
            observer: options.observer,
            cancel: cancel.clone(),
            tracker: tracker.clone(),
            thread: options.thread,
        });
        let sweep = sweep_pool(shared.clone());
        let accept = accept_loop(listener, shared.clone(), cancel.clone());
        let accept = match &shared.thread {
            Some(t) => {
                t.handle().spawn(sweep);
                t.handle().spawn(accept)
            }
            None => {
                tokio::spawn(sweep);
                tokio::spawn(accept)
            }
        };
        Ok((
            addr,
            ProxyHandle {
                addr,
                cancel,
                tracker,
                accept: Some(accept),
                shared,
            },
        ))
    }
}

/// Close idle upstream connections past their idle time even when no request comes.
async fn sweep_pool(shared: Arc<Shared>) {
    let tick = (shared.limits.pool_idle_timeout / 2).max(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = shared.cancel.cancelled() => return,
            _ = tokio::time::sleep(tick) => {}
        }
        shared.pool.sweep(Instant::now());
    }
}

/// Serve `listener` through the shared accept loop (`accept.rs`): the connection cap is the
/// proxy's own, shared by every listener of this proxy; over it, a 503 with `Retry-After`.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stop: CancellationToken) {
    let options = AcceptOptions {
        log_prefix: "egress proxy",
        conns: shared.conns.clone(),
        over_cap: OverCap::Answer(
            b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
        ),
        nodelay: true,
        tracker: Some(shared.tracker.clone()),
    };
    accept::accept_loop(listener, options, stop, move |sock| {
        serve_connection(sock, shared.clone())
    })
    .await;
}

/// The decisions of a client connection's forwarded requests, reported to the observer after the
/// response has been handed to the client rather than before (see [`serve_connection`]).
#[derive(Clone, Default)]
struct Deferred(Arc<std::sync::Mutex<Vec<Decision>>>);

impl Deferred {
    fn push(&self, d: Decision) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(d);
    }

    /// Report what has gathered, in order.
    fn drain(&self, shared: &Shared) {
        let ready = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        for d in ready {
            shared.report(d);
        }
    }
}

/// Reports a connection's gathered decisions when its task ends, however it ends (dropped by the
/// runtime included), so that every decision still reaches the observer.
struct DrainOnDrop {
    deferred: Deferred,
    shared: Arc<Shared>,
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        self.deferred.drain(&self.shared);
    }
}

/// Serve one client connection. A forwarded request's decision (the observer's work: an audit
/// event, a log line) is reported right after hyper's poll that wrote the response, on the same
/// thread and task, instead of between reading the upstream's answer and writing it to the client:
/// the client gets its answer without waiting for the audit write, and nothing else is woken.
/// Refusals and failures are still reported before their answer is sent.
async fn serve_connection(sock: tokio::net::TcpStream, shared: Arc<Shared>) {
    crate::thread::watch_for_spin(&sock);
    // Declared before `conn`, so dropped after it: the decisions of bodies dropped with the
    // connection are reported too.
    let deferred = DrainOnDrop {
        deferred: Deferred::default(),
        shared: shared.clone(),
    };
    let io = TokioIo::new(sock);
    let s = shared.clone();
    let d = deferred.deferred.clone();
    let svc = service_fn(move |req| {
        let s = s.clone();
        let d = d.clone();
        async move { Ok::<_, Infallible>(handle(s, req, d).await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.header_read_timeout)
        .max_header_size(shared.limits.max_header_bytes)
        .keep_alive(true);
    if shared.limits.max_headers != 100 {
        builder.max_headers(shared.limits.max_headers);
    }
    let conn = builder.serve_connection(io, svc).with_upgrades();
    tokio::pin!(conn);
    let generation = shared.generation();
    tokio::select! {
        // Each poll of the connection, then the decisions it completed (hyper writes a response
        // in the poll that finished its body).
        r = std::future::poll_fn(|cx| {
            let r = std::future::Future::poll(conn.as_mut(), cx);
            deferred.deferred.drain(&shared);
            r
        }) => {
            if let Err(e) = r {
                tracing::debug!("egress proxy connection ended: {e}");
            }
        }
        // Narrowed: a kept-alive connection must not carry requests decided under the old
        // policy's pooled state; the client reconnects and is decided anew.
        _ = generation.cancelled() => {}
        _ = shared.cancel.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(shared.limits.shutdown_grace, conn).await;
        }
    }
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

fn text_response(status: StatusCode, code: &str, body: String, close: bool) -> Response<ProxyBody> {
    let mut resp = Response::new(
        Full::new(Bytes::from(body + "\n"))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(code) {
        h.insert(REASON_HEADER, v);
    }
    if status == StatusCode::TOO_MANY_REQUESTS {
        h.insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    if close {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// The fields of a decision known before the outcome.
struct Pending {
    method: String,
    host: String,
    port: u16,
    start: Instant,
}

impl Pending {
    fn finish(
        self,
        outcome: Outcome,
        reason: DecisionReason,
        status: StatusCode,
        resolved: Vec<IpAddr>,
        chosen: Option<SocketAddr>,
    ) -> Decision {
        Decision {
            method: self.method,
            host: self.host,
            port: self.port,
            resolved,
            chosen,
            outcome,
            reason,
            status: status.as_u16(),
            bytes_up: 0,
            bytes_down: 0,
            duration: self.start.elapsed(),
        }
    }
}

/// Answer a failure: refusal 403, malformed 400, timeout 504, anything else 502.
fn fail(
    shared: &Shared,
    pending: Pending,
    err: EgressError,
    resolved: Vec<IpAddr>,
    close: bool,
) -> Response<ProxyBody> {
    let (status, code, outcome) = match &err {
        EgressError::Blocked(r) if r.is_malformed() => {
            (StatusCode::BAD_REQUEST, r.code(), Outcome::Malformed)
        }
        EgressError::Blocked(r) => (StatusCode::FORBIDDEN, r.code(), Outcome::Blocked),
        e if e.is_timeout() => (StatusCode::GATEWAY_TIMEOUT, "timeout", Outcome::Failed),
        _ => (StatusCode::BAD_GATEWAY, "upstream-error", Outcome::Failed),
    };
    // The 403/400 body is the refusal's one Display, the header its code.
    let msg = err.to_string();
    let reason = DecisionReason::of_error(&err);
    shared.report(pending.finish(outcome, reason, status, resolved, None));
    text_response(status, code, msg, close)
}

fn malformed(
    shared: &Shared,
    pending: Pending,
    status: StatusCode,
    why: String,
    close: bool,
) -> Response<ProxyBody> {
    let msg = format!("malformed proxy request: {why}");
    shared.report(pending.finish(
        Outcome::Malformed,
        DecisionReason::Failed(msg.clone()),
        status,
        Vec::new(),
        None,
    ));
    text_response(status, "malformed", msg, close)
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    deferred: Deferred,
) -> Response<ProxyBody> {
    let start = Instant::now();
    let is_connect = req.method() == Method::CONNECT;
    let target_len = target_len(req.uri());
    let pending = Pending {
        method: req.method().to_string(),
        host: req
            .uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        port: 0,
        start,
    };
    if target_len > shared.limits.max_target_len {
        return malformed(
            &shared,
            pending,
            StatusCode::URI_TOO_LONG,
            format!(
                "request target longer than {} bytes",
                shared.limits.max_target_len
            ),
            is_connect,
        );
    }
    if is_connect {
        handle_connect(shared, req, pending).await
    } else {
        handle_http(shared, req, pending, deferred).await
    }
}

/// Length of the request target as sent (`scheme://authority/path?query`), without formatting it.
fn target_len(uri: &Uri) -> usize {
    uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len())
}

/// Parse and normalise the authority of a proxy request.
fn parse_target(uri: &Uri, default_port: Option<u16>) -> Result<(NormalHost, u16), String> {
    let authority = uri
        .authority()
        .ok_or_else(|| "missing authority".to_string())?;
    let (host, port) = split_authority(authority.as_str()).map_err(|m| m.to_string())?;
    let port = match (port, default_port) {
        (Some(p), _) => p,
        (None, Some(d)) => d,
        (None, None) => return Err("CONNECT target must name a port (host:port)".into()),
    };
    let host = normalize_host(host, false).map_err(|m| m.to_string())?;
    Ok((host, port))
}

async fn handle_connect(
    shared: Arc<Shared>,
    mut req: Request<Incoming>,
    mut pending: Pending,
) -> Response<ProxyBody> {
    let uri = req.uri().clone();
    if uri.scheme().is_some()
        || uri
            .path_and_query()
            .is_some_and(|p| !p.as_str().is_empty() && p.as_str() != "/")
    {
        return malformed(
            &shared,
            pending,
            StatusCode::BAD_REQUEST,
            "CONNECT needs an authority-form target (host:port)".into(),
            true,
        );
    }
    let has_body = req.headers().contains_key(TRANSFER_ENCODING)
        || req
            .headers()
            .get(CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0");
    if has_body {
        return malformed(
            &shared,
            pending,
            StatusCode::BAD_REQUEST,
            "CONNECT must not have a body".into(),
            true,
        );
    }
    let (host, port) = match parse_target(&uri, None) {
        Ok(x) => x,
        Err(why) => {
            // Distinguish policy-malformed hosts (reported as such) from framing errors: both are 400.
            return malformed(&shared, pending, StatusCode::BAD_REQUEST, why, true);
        }
    };
    pending.host = host.to_string();
    pending.port = port;
    // Cheap policy check first, so that refusals are reported as such even at the tunnel limit.
    let connector = shared.connector();
    if let Err(r) = connector.policy.check_host(&host, port, Kind::Tls) {
        return fail(&shared, pending, EgressError::Blocked(r), Vec::new(), true);
    }
    let Ok(permit) = shared.tunnels.clone().try_acquire_owned() else {
        let msg = format!(
            "too many concurrent tunnels (limit {}); retry shortly",
            shared.limits.max_tunnels
        );
        shared.report(pending.finish(
            Outcome::Failed,
            DecisionReason::Failed(msg.clone()),
            StatusCode::TOO_MANY_REQUESTS,
            Vec::new(),
            None,
        ));
        return text_response(StatusCode::TOO_MANY_REQUESTS, "too-many-tunnels", msg, true);
    };
    let validated = match connector.validate(&host, port, Kind::Tls).await {
        Ok(v) => v,
        Err((e, resolved)) => return fail(&shared, pending, e, resolved, true),
    };
    let connected = match connector.dial_validated(validated).await {
        Ok(c) => c,
        Err((e, v)) => return fail(&shared, pending, e, v.resolved, true),
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let s = shared.clone();
    let generation = shared.generation();
    shared.tracker.spawn(async move {
        let rule = connected.validated.allowed.rule.clone();
        let resolved = connected.validated.resolved.clone();
        let chosen = connected.chosen;
        let (up, down, end) = match on_upgrade.await {
            Ok(upgraded) => {
                tunnel(
                    upgraded,
                    connected.stream,
                    s.limits.idle_tunnel_timeout,
                    &generation,
                )
                .await
            }
            Err(e) => (0, 0, format!("upgrade failed: {e}")),
        };
        drop(permit);
        let mut d = pending.finish(
            Outcome::Allowed,
            DecisionReason::Allowed(format!("{rule}; tunnel {end}")),
            StatusCode::OK,
            resolved,
            Some(chosen),
        );
        d.bytes_up = up;
        d.bytes_down = down;
        s.report(d);
    });
    Response::new(
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    )
}

/// Relay bytes both ways until both sides are done, the tunnel idles out, or the proxy stops.
/// Half-close: EOF from one side shuts down the write half towards the other, the other direction
/// keeps flowing. Returns (client->upstream bytes, upstream->client bytes, how it ended).
/// On Linux, when the client side is a plain TCP socket, bytes move with splice(2) (no user-space
/// copy); bytes the client sent right after the CONNECT head are forwarded first.
async fn tunnel(
    upgraded: hyper::upgrade::Upgraded,
    upstream: tokio::net::TcpStream,
    idle: Duration,
    cancel: &CancellationToken,
) -> (u64, u64, String) {
    let epoch = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let up = Arc::new(AtomicU64::new(0));
    let down = Arc::new(AtomicU64::new(0));
    let idle_watch = async {
        let tick = (idle / 4).max(Duration::from_millis(10));
        loop {
            tokio::time::sleep(tick).await;
            let since = epoch
                .elapsed()
                .saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
            if since >= idle {
                break;
            }
        }
    };
    let relay = async {
        #[cfg(target_os = "linux")]
        let upgraded = match upgraded.downcast::<TokioIo<tokio::net::TcpStream>>() {
            Ok(parts) => {
                let client = parts.io.into_inner();
                let mut upstream = upstream;
                // `read_buf` may share hyper's whole read buffer even when empty: forward what it
                // holds and free it before the tunnel idles (that buffer was most of an idle
                // tunnel's memory).
                let early = parts.read_buf;
                if !early.is_empty() {
                    use tokio::io::AsyncWriteExt;
                    upstream.write_all(&early).await?;
                    up.fetch_add(early.len() as u64, Ordering::Relaxed);
                }
                drop(early);
                return crate::splice::relay(&client, &upstream, &up, &down, &last, epoch)
                    .await
                    .map(|()| " (zero-copy splice relay)");
            }
            Err(u) => u,
        };
        let mut a = Metered {
            inner: TokioIo::new(upgraded),
            read: up.clone(),
            last: last.clone(),
            epoch,
        };
        let mut b = Metered {
            inner: upstream,
            read: down.clone(),
            last: last.clone(),
            epoch,
        };
        tokio::io::copy_bidirectional_with_sizes(&mut a, &mut b, 64 * 1024, 64 * 1024)
            .await
            .map(|_| "")
    };
    let end = tokio::select! {
        r = relay => match r {
            Ok(how) => format!("closed{how}"),
            Err(e) => format!("ended with error: {e}"),
        },
        _ = idle_watch => format!("closed after {idle:?} idle"),
        _ = cancel.cancelled() => "closed by proxy shutdown".to_string(),
    };
    (
        up.load(Ordering::Relaxed),
        down.load(Ordering::Relaxed),
        end,
    )
}

/// Counts bytes read and records the time of the last activity.
struct Metered<T> {
    inner: T,
    read: Arc<AtomicU64>,
    last: Arc<AtomicU64>,
    epoch: Instant,
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len() - before;
        if n > 0 {
            self.read.fetch_add(n as u64, Ordering::Relaxed);
            self.last
                .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Request headers that never travel past the proxy.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    let n = name.as_str();
    matches!(
        n,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

fn connection_tokens(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Remove what never travels past the proxy from a forwarded request: hop-by-hop headers, those the
/// Connection header names, client-sent `Proxy-*`, `Forwarded`, `X-Forwarded-*`. `Host` is replaced by
/// the caller. Allocates nothing when there is nothing to remove.
fn strip_request_headers(headers: &mut HeaderMap) {
    let named = connection_tokens(headers);
    let remove: Vec<HeaderName> = headers
        .keys()
        .filter(|name| {
            let n = name.as_str();
            is_hop_by_hop(name)
                || n == "forwarded"
                || n.starts_with("proxy-")
                || n.starts_with("x-forwarded-")
                || named.iter().any(|t| t == n)
        })
        .cloned()
        .collect();
    for n in remove {
        headers.remove(&n);
    }
}

fn strip_response_headers(headers: &mut HeaderMap) {
    let named = connection_tokens(headers);
    let remove: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_hop_by_hop(n) || named.iter().any(|t| t == n.as_str()))
        .cloned()
        .collect();
    for n in remove {
        headers.remove(&n);
    }
}

/// The body type forwarded upstream, and the pooled sender of such requests.
type UpstreamBody = Counted<Incoming>;
type UpstreamSender = hyper::client::conn::http1::SendRequest<UpstreamBody>;

/// Dial a validated address and start an HTTP/1.1 client connection on it (its task ends when the
/// sender is dropped, the connection closes, or the proxy stops).
async fn open_upstream(
    shared: &Shared,
    validated: Validated,
) -> Result<(UpstreamSender, SocketAddr, Validated), (EgressError, Vec<IpAddr>)> {
    let connected = shared
        .connector()
        .dial_validated(validated)
        .await
        .map_err(|(e, v)| (e, v.resolved))?;
    let host = &connected.validated.allowed.host;
    crate::thread::watch_for_spin(&connected.stream);
    let (sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(connected.stream)).await {
            Ok(x) => x,
            Err(e) => {
                let err = EgressError::Http {
                    host: host.to_string(),
                    message: e.to_string(),
                };
                return Err((err, connected.validated.resolved));
            }
        };
    let cancel = shared.generation();
    shared.tracker.spawn(async move {
        tokio::select! {
            _ = conn => {}
            _ = cancel.cancelled() => {}
        }
    });
    Ok((sender, connected.chosen, connected.validated))
}

async fn handle_http(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    mut pending: Pending,
    deferred: Deferred,
) -> Response<ProxyBody> {
    match req.uri().scheme_str() {
        Some("http") => {}
        None => {
            return malformed(
                &shared,
                pending,
                StatusCode::BAD_REQUEST,
                "origin-form request: this is a forward proxy; send an absolute-form http:// URI, or CONNECT for https".into(),
                false,
            )
        }
        Some(other) => {
            let why = format!("scheme {other:?} is not proxied as absolute-form (only http://; use CONNECT for https)");
            return malformed(&shared, pending, StatusCode::BAD_REQUEST, why, false);
        }
    }
    let (host, port) = match parse_target(req.uri(), Some(80)) {
        Ok(x) => x,
        Err(why) => return malformed(&shared, pending, StatusCode::BAD_REQUEST, why, false),
    };
    pending.port = port;
    // The decision first (no lookup): a pooled connection opened under the same decision is reused
    // without resolving again; its address was validated for this host when it was dialed.
    let connector = shared.connector();
    let allowed = match connector.policy.check_host(&host, port, Kind::Http) {
        Ok(a) => a,
        Err(r) => {
            pending.host = host.to_string();
            return fail(&shared, pending, EgressError::Blocked(r), Vec::new(), false);
        }
    };
    pending.host = host.to_string();
    let pooled = shared.pool.checkout(&allowed, Instant::now());
    let (mut sender, mut chosen, mut allowed, mut resolved, reused) = match pooled {
        Some((addr, sender)) => (sender, addr, allowed, vec![addr.ip()], true),
        None => {
            let validated = match connector.resolve_allowed(allowed).await {
                Ok(v) => v,
                Err((e, resolved)) => return fail(&shared, pending, e, resolved, false),
            };
            match open_upstream(&shared, validated).await {
                Ok((s, addr, v)) => (s, addr, v.allowed, v.resolved, false),
                Err((e, resolved)) => return fail(&shared, pending, e, resolved, false),
            }
        }
    };

    let (mut parts, body) = req.into_parts();
    strip_request_headers(&mut parts.headers);
    let host_header = if port == 80 {
        host.authority_form()
    } else {
        format!("{}:{port}", host.authority_form())
    };
    // The client's Host never passes: it is replaced by the URI authority (a normalised name or IP
    // literal is always a valid header value; were it not, the request would go without Host).
    match HeaderValue::from_str(&host_header) {
        Ok(v) => parts.headers.insert(HOST, v),
        Err(_) => parts.headers.remove(HOST),
    };
    // The origin-form target: an absolute URI with no path (`http://host:port`, `http://host#x`,
    // `http://host?q`) still asks for `/` (RFC 9112 3.2.1); an empty target is not a request.
    let path = match parts.uri.path_and_query() {
        // `as_str()` says "/" for an empty path, but a clone keeps the empty bytes, which hyper
        // writes as they are (`GET  HTTP/1.1`): build "/" afresh.
        Some(p) if p.as_str() == "/" => http::uri::PathAndQuery::from_static("/"),
        Some(p) if p.as_str().starts_with('/') => p.clone(),
        // `?q` alone: a valid query stays valid behind a `/`, so the fallback is never taken.
        Some(p) if !p.as_str().is_empty() => {
            http::uri::PathAndQuery::try_from(format!("/{}", p.as_str()).as_str())
                .unwrap_or_else(|_| http::uri::PathAndQuery::from_static("/"))
        }
        _ => http::uri::PathAndQuery::from_static("/"),
    };
    let up_bytes = Arc::new(AtomicU64::new(0));
    let body = Counted {
        inner: body,
        count: up_bytes.clone(),
    };
    let mut out = Request::new(body);
    *out.method_mut() = parts.method;
    *out.version_mut() = Version::HTTP_11;
    *out.uri_mut() = Uri::from(path.clone());
    *out.headers_mut() = parts.headers;
    let timeout = shared.limits.upstream_response_timeout;
    let deadline = tokio::time::Instant::now() + timeout;
    // Until the answer's head is here, this thread's next work is most likely that answer.
    let awaiting = crate::thread::awaiting_upstream();
    let sent = match tokio::time::timeout_at(deadline, sender.try_send_request(out)).await {
        Ok(Err(mut e)) if reused => match e.take_message() {
            // The pooled connection closed before the request was written (the upstream's
            // keep-alive ended): the request goes out once more on a fresh, validated connection.
            Some(out) => {
                let validated = match connector.resolve_allowed(allowed).await {
                    Ok(v) => v,
                    Err((e, resolved)) => return fail(&shared, pending, e, resolved, false),
                };
                match open_upstream(&shared, validated).await {
                    Ok((s, addr, v)) => {
                        (sender, chosen, allowed, resolved) = (s, addr, v.allowed, v.resolved);
                    }
                    Err((e, resolved)) => return fail(&shared, pending, e, resolved, false),
                }
                tokio::time::timeout_at(deadline, sender.send_request(out)).await
            }
            None => Ok(Err(e.into_error())),
        },
        Ok(r) => Ok(r.map_err(|e| e.into_error())),
        Err(elapsed) => Err(elapsed),
    };
    drop(awaiting);
    let resp = match sent {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let err = EgressError::Http {
                host: host.to_string(),
                message: e.to_string(),
            };
            return fail(&shared, pending, err, resolved, false);
        }
        Err(_) => {
            let err = EgressError::Timeout {
                url: format!("http://{host_header}{path}"),
                after: timeout,
            };
            return fail(&shared, pending, err, resolved, false);
        }
    };
    let (mut rparts, rbody) = resp.into_parts();
    strip_response_headers(&mut rparts.headers);
    let status = rparts.status;
    let s = shared.clone();
    let finish = Box::new(move |down: u64, clean: bool| {
        let mut d = pending.finish(
            Outcome::Allowed,
            DecisionReason::Allowed(allowed.rule.clone()),
            status,
            resolved,
            Some(chosen),
        );
        d.bytes_up = up_bytes.load(Ordering::Relaxed);
        d.bytes_down = down;
        // Reported by the connection's task once this poll (which writes the response) is done.
        deferred.push(d);
        // Only a connection whose response was read to its end, without error, carries another
        // request; the pool checks at checkout that hyper agrees it is ready.
        if clean {
            s.pool.checkin(allowed, chosen, sender, Instant::now());
        }
    });
    let body = Observed {
        inner: rbody,
        bytes: 0,
        clean: false,
        finish: Some(finish),
    };
    Response::from_parts(rparts, body.boxed())
}

/// Counts the bytes of a body passing through.
struct Counted<B> {
    inner: B,
    count: Arc<AtomicU64>,
}

impl<B> Body for Counted<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(f))) = &r {
            if let Some(d) = f.data_ref() {
                self.count.fetch_add(d.len() as u64, Ordering::Relaxed);
            }
        }
        r
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Called once with the bytes passed and whether the body was read to its end without error.
type Finish = Box<dyn FnOnce(u64, bool) + Send + Sync>;

/// A response body that reports the decision (with byte count) when it ends or is dropped.
struct Observed<B: Body> {
    inner: B,
    bytes: u64,
    /// The upstream body was read to its end without error.
    clean: bool,
    finish: Option<Finish>,
}

impl<B> Body for Observed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    self.bytes += d.len() as u64;
                }
            }
            Poll::Ready(None) => {
                self.clean = true;
                self.end();
            }
            Poll::Ready(Some(Err(_))) => self.end(),
            Poll::Pending => {}
        }
        r
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: Body> Observed<B> {
    fn end(&mut self) {
        if let Some(f) = self.finish.take() {
            f(self.bytes, self.clean);
        }
    }
}

impl<B: Body> Drop for Observed<B> {
    fn drop(&mut self) {
        // hyper stops polling a body once it reports its end (a Content-Length body after its last
        // byte, an empty body at once), so a body at its end is complete even without `None`.
        if self.finish.is_some() && self.inner.is_end_stream() {
            self.clean = true;
        }
        self.end();
    }
}
