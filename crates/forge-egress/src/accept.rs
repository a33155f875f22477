//! The bounded accept loop of forge's HTTP servers (the A2A server, the MCP HTTP server, the egress
//! proxy): one copy, with what differs as parameters.
//!
//! - [`accept_loop`]: accept until `stop`, at most `conns` connections served at once (a permit is
//!   taken when a connection is accepted and released when its task ends); a connection over the
//!   cap is closed at once, optionally after a fixed answer (the proxy's 503); a failed accept
//!   (EMFILE and friends) backs off 50 ms instead of spinning.
//! - [`accept_http`]: the A2A and MCP HTTP servers' loop. A connection counts against the
//!   request cap (`conns`) only once its request head has arrived: until then it waits in a
//!   [`HeadGate`] (its own, larger budget, a per-peer-IP cap, and a head timeout), so idle and
//!   slowloris connections cannot take the slots real requests need. The proxy keeps
//!   [`accept_loop`]: it serves only the agent's own processes (loopback, or the confinement's
//!   entry), answers 503 over its cap so those clients retry, and reads its heads itself.
//! - [`serve_http1`]: one HTTP/1.1 connection with a header-read timeout (slowloris protection;
//!   hyper needs a timer for it to act) and, when `stop` fires, a graceful shutdown that gives
//!   in-flight exchanges a grace period. The proxy serves its connections itself (upgrades,
//!   header limits, policy generations).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::service::HttpService;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
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

/// Listen backlog of [`bind`]: a flood's connections, closed together at their head timeout,
/// come back together; with the usual 1,024 the kernel drops some handshakes (and a probe or
/// a real request among them waits a SYN retransmit, 1 s). The kernel caps it at `somaxconn`.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Bind a listener on `addr` (`SO_REUSEADDR` as `TcpListener::bind` sets it) with a backlog of
/// [`LISTEN_BACKLOG`]. Must run inside a tokio runtime.
pub fn bind(addr: std::net::SocketAddr) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Connections waiting for their request head, at most, by default (all peers together).
pub const HEAD_WAITING: usize = 4096;
/// Connections one peer IP may have waiting for a request head, by default. High enough that a
/// flood of 1,200 head-less connections from one address (or a NAT's) still leaves that address
/// room for a real request; the global budget still bounds the whole.
pub const HEAD_WAITING_PER_IP: usize = 2048;
/// How long a connection may take to send its request head, by default.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest request head read before the connection is handed on (hyper then applies its own
/// limits to the rest).
const HEAD_READ_MAX: usize = 64 * 1024;

#[derive(Default)]
struct Waiting {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// The budget of connections still waiting for their request head: a total, a per-peer-IP cap
/// and a head timeout. Cheap to clone (shared state).
#[derive(Clone)]
pub struct HeadGate {
    total: usize,
    per_ip: usize,
    timeout: Duration,
    waiting: Arc<Mutex<Waiting>>,
    refused_total: Arc<AtomicU64>,
    refused_per_ip: Arc<AtomicU64>,
    timed_out: Arc<AtomicU64>,
}

impl std::fmt::Debug for HeadGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadGate")
            .field("total", &self.total)
            .field("per_ip", &self.per_ip)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Default for HeadGate {
    fn default() -> Self {
        Self::new(HEAD_WAITING, HEAD_WAITING_PER_IP, HEAD_TIMEOUT)
    }
}

/// A connection's place in a [`HeadGate`], given back when dropped.
struct WaitSlot {
    gate: HeadGate,
    ip: IpAddr,
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut w = self.gate.lock();
        w.total = w.total.saturating_sub(1);
        if let Some(n) = w.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                w.per_ip.remove(&self.ip);
            }
        }
    }
}

impl HeadGate {
    /// At most `total` connections waiting for a head, at most `per_ip` of them from one peer
    /// address, each given `timeout` to send it.
    pub fn new(total: usize, per_ip: usize, timeout: Duration) -> Self {
        Self {
            total,
            per_ip,
            timeout,
            waiting: Arc::default(),
            refused_total: Arc::default(),
            refused_per_ip: Arc::default(),
            timed_out: Arc::default(),
        }
    }

    /// The head timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Connections waiting for their head now.
    pub fn waiting(&self) -> usize {
        self.lock().total
    }

    /// Connections closed at accept because the total budget was full.
    pub fn refused_total(&self) -> u64 {
        self.refused_total.load(Ordering::Relaxed)
    }

    /// Connections closed at accept because their peer IP was at its cap.
    pub fn refused_per_ip(&self) -> u64 {
        self.refused_per_ip.load(Ordering::Relaxed)
    }

    /// Connections closed because their head did not arrive in time.
    pub fn timed_out(&self) -> u64 {
        self.timed_out.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        // A panic while holding this lock leaves plain counters behind: still usable.
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn enter(&self, ip: IpAddr) -> Option<WaitSlot> {
        let mut w = self.lock();
        if w.total >= self.total {
            self.refused_total.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let n = w.per_ip.entry(ip).or_insert(0);
        if *n >= self.per_ip {
            self.refused_per_ip.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *n += 1;
        w.total += 1;
        drop(w);
        Some(WaitSlot {
            gate: self.clone(),
            ip,
        })
    }
}

/// An accepted connection whose request head has been read: the head is replayed to the reader
/// first, then the socket's further bytes.
pub struct HeadConn {
    head: Vec<u8>,
    pos: usize,
    stream: TcpStream,
}

impl HeadConn {
    /// The underlying socket.
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

impl AsyncRead for HeadConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.pos < this.head.len() {
            let n = (this.head.len() - this.pos).min(buf.remaining());
            buf.put_slice(&this.head[this.pos..this.pos + n]);
            this.pos += n;
            if this.pos == this.head.len() {
                this.head = Vec::new();
                this.pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for HeadConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Whether `buf` holds a complete request head (an empty line after the request line and
/// headers; bare LF line ends count too, as hyper accepts them).
fn head_complete(buf: &[u8], from: usize) -> bool {
    let start = from.saturating_sub(3);
    let tail = &buf[start..];
    tail.windows(2).any(|w| w == b"\n\n") || tail.windows(3).any(|w| w == b"\n\r\n")
}

/// Read until the request head is complete (or [`HEAD_READ_MAX`] bytes are in); `None` when
/// the peer closed first or the read failed.
async fn read_head(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        let from = buf.len();
        buf.extend_from_slice(&chunk[..n]);
        // Leading empty lines before the request line are allowed (and skipped by hyper).
        let skipped = buf
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        if skipped < buf.len() && head_complete(&buf[skipped..], from.saturating_sub(skipped)) {
            return Some(buf);
        }
        if buf.len() >= HEAD_READ_MAX {
            return Some(buf);
        }
    }
}

/// Accept HTTP/1.1 connections on `listener` until `stop` is cancelled. A new connection waits
/// in `gate` (closed at once when the gate's total or its peer's share is full, or when its head
/// does not arrive within the gate's timeout); once its head is in, it takes one of
/// `options.conns`' permits (over the cap: `options.over_cap`) and is served by `serve`, the
/// head replayed, holding the permit until it ends.
pub async fn accept_http<F, Fut>(
    listener: TcpListener,
    options: AcceptOptions,
    gate: HeadGate,
    stop: CancellationToken,
    serve: F,
) where
    F: Fn(HeadConn) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let serve = Arc::new(serve);
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            r = listener.accept() => r,
        };
        let (mut sock, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!("{} accept failed: {e}", options.log_prefix);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = gate.enter(peer.ip()) else {
            drop(sock);
            continue;
        };
        if options.nodelay {
            let _ = sock.set_nodelay(true);
        }
        let serve = serve.clone();
        let conns = options.conns.clone();
        let over_cap = options.over_cap;
        let stop = stop.clone();
        let gate = gate.clone();
        let task = async move {
            let head = tokio::select! {
                _ = stop.cancelled() => return,
                r = tokio::time::timeout(gate.timeout, read_head(&mut sock)) => r,
            };
            let head = match head {
                Ok(Some(h)) => h,
                Ok(None) => return,
                Err(_) => {
                    gate.timed_out.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            drop(slot);
            let Ok(permit) = conns.try_acquire_owned() else {
                if let OverCap::Answer(bytes) = over_cap {
                    let _ = sock.try_write(bytes);
                }
                return;
            };
            serve(HeadConn {
                head,
                pos: 0,
                stream: sock,
            })
            .await;
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

/// What a connection that has sent its head gets when every request slot is taken: a `503`
/// with `Retry-After`, then the connection is closed.
pub const BUSY_503: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: text/plain\r\ncontent-length: 25\r\nconnection: close\r\n\r\nbusy: too many requests\r\n";

/// Serve one HTTP/1.1 connection: the request head must arrive within `header_read_timeout`;
/// when `stop` is cancelled the connection shuts down gracefully, in-flight exchanges getting
/// `grace` to finish.
pub async fn serve_http1<S, I>(
    stream: I,
    svc: S,
    header_read_timeout: Duration,
    stop: CancellationToken,
    grace: Duration,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
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
