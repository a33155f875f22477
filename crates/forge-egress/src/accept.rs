//! The bounded accept loop of forge's HTTP servers (the A2A server, the MCP HTTP server, the egress
//! proxy): one copy, with what differs as parameters.
//!
//! - [`accept_loop`]: accept until `stop`, at most `conns` connections served at once (a permit is
//!   taken when a connection is accepted and released when its task ends); a connection over the
//!   cap is closed at once, optionally after a fixed answer (the proxy's 503); a failed accept
//!   (EMFILE and friends) backs off 50 ms instead of spinning.
//! - [`serve_http1`]: one HTTP/1.1 connection with a header-read timeout (slowloris protection;
//!   hyper needs a timer for it to act) and, when `stop` fires, a graceful shutdown that gives
//!   in-flight exchanges a grace period. The proxy serves its connections itself (upgrades,
//!   header limits, policy generations).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// What a connection over the cap gets before it is closed.
#[derive(Debug, Clone, Copy)]
pub enum OverCap {
    /// Nothing: it is closed at once.
    Close,
    /// These bytes, written without waiting (e.g. a `503` with `Retry-After`).
    Answer(&'static [u8]),
}

/// How an [`accept_loop`] runs.
#[derive(Clone)]
pub struct AcceptOptions {
    /// Starts the log line of a failed accept (`"mcp:"`, `"a2a:"`, `"egress proxy"`).
    pub log_prefix: &'static str,
    /// Connections served at once; one semaphore can cap several listeners together.
    pub conns: Arc<Semaphore>,
    /// What a connection over the cap gets.
    pub over_cap: OverCap,
    /// Set `TCP_NODELAY` on accepted connections.
    pub nodelay: bool,
    /// Where connection tasks run: a tracker the server waits on at shutdown, or (`None`) plain
    /// `tokio::spawn`.
    pub tracker: Option<TaskTracker>,
}

/// Accept connections on `listener` until `stop` is cancelled, each served by `serve` in its own
/// task while it holds one of `options.conns`' permits.
pub async fn accept_loop<F, Fut>(
    listener: TcpListener,
    options: AcceptOptions,
    stop: CancellationToken,
    serve: F,
) where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => r,
        };
        let (sock, _peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!("{} accept failed: {e}", options.log_prefix);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = options.conns.clone().try_acquire_owned() else {
            if let OverCap::Answer(bytes) = options.over_cap {
                let _ = sock.try_write(bytes);
            }
            drop(sock);
            continue;
        };
        if options.nodelay {
            let _ = sock.set_nodelay(true);
        }
        let conn = serve(sock);
        let task = async move {
            conn.await;
            drop(permit);
        };
        match &options.tracker {
            Some(t) => {
                t.spawn(task);
            }
            None => {
                tokio::spawn(task);
            }
        }
    }
}

/// Serve one HTTP/1.1 connection: the request head must arrive within `header_read_timeout`;
/// when `stop` is cancelled the connection shuts down gracefully, in-flight exchanges getting
/// `grace` to finish.
pub async fn serve_http1<S>(
    stream: TcpStream,
    svc: S,
    header_read_timeout: Duration,
    stop: CancellationToken,
    grace: Duration,
) where
    S: HttpService<Incoming>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::ResBody: 'static,
    <S::ResBody as Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(grace, conn).await;
        }
    }
}
