//! Keep-alive pool of upstream HTTP/1.1 connections for the proxy's plain-HTTP path, so that a
//! browser fetching many small resources from one host does not pay a TCP handshake per request.
//!
//! Invariants (each tested by name below, with real sockets):
//! - A connection is keyed by the policy decision that opened it ([`Allowed`]: the normalised host,
//!   the port, the rule that allowed it and whether loopback was acceptable) and carries the validated
//!   address it was dialed to. It is only handed to a request whose own decision is equal, so it is
//!   never shared across decisions, in particular never between two host names that resolve to the
//!   same IP (`never_shared_across_decisions`).
//! - A connection is checked in only after an exchange that ended cleanly (response fully read, no
//!   error; the caller's duty), and at checkout the pool hands out only one that hyper reports open
//!   and ready for a new request (`closed_or_busy_connections_are_not_handed_out`).
//! - Idle connections expire after `idle_timeout` (`expired_connections_are_not_handed_out`,
//!   `sweep_closes_expired_connections`).
//! - At most `max_idle` connections are kept, at most `max_idle_per_decision` per decision; past
//!   either bound the oldest is closed (`pool_is_bounded`).
//!
//! The pool belongs to one proxy and so to one policy value: a listener serving another policy needs
//! its own pool.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::policy::Allowed;

/// Whether a pooled connection can carry another request right now.
pub(crate) trait Reusable {
    fn reusable(&self) -> bool;
}

impl<B> Reusable for hyper::client::conn::http1::SendRequest<B> {
    fn reusable(&self) -> bool {
        // Ready means hyper's dispatcher finished the previous exchange and asked for the next
        // request; a connection the upstream closed, or one still busy, is neither.
        !self.is_closed() && self.is_ready()
    }
}

/// Bounds of the pool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PoolLimits {
    pub idle_timeout: Duration,
    pub max_idle: usize,
    pub max_idle_per_decision: usize,
}

struct Entry<C> {
    addr: SocketAddr,
    conn: C,
    since: Instant,
}

struct Idle<C> {
    by_decision: HashMap<Allowed, Vec<Entry<C>>>,
    total: usize,
}

/// Idle upstream connections, by decision.
pub(crate) struct Pool<C> {
    idle: Mutex<Idle<C>>,
    limits: PoolLimits,
}

impl<C: Reusable> Pool<C> {
    pub(crate) fn new(limits: PoolLimits) -> Self {
        Pool {
            idle: Mutex::new(Idle {
                by_decision: HashMap::new(),
                total: 0,
            }),
            limits,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle<C>> {
        // A poisoned lock still holds a consistent map (no code panics while holding it).
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest idle connection opened under exactly this decision, if one is still usable.
    /// Expired or unusable connections met on the way are dropped (closed).
    pub(crate) fn checkout(&self, allowed: &Allowed, now: Instant) -> Option<(SocketAddr, C)> {
        let mut dropped = Vec::new();
        let found = {
            let mut idle = self.lock();
            let list = idle.by_decision.get_mut(allowed)?;
            let mut found = None;
            while let Some(e) = list.pop() {
                if now.saturating_duration_since(e.since) >= self.limits.idle_timeout
                    || !e.conn.reusable()
                {
                    dropped.push(e);
                    continue;
                }
                found = Some((e.addr, e.conn));
                break;
            }
            let empty = list.is_empty();
            if empty {
                idle.by_decision.remove(allowed);
            }
            idle.total -= dropped.len() + usize::from(found.is_some());
            found
        };
        drop(dropped);
        found
    }

    /// Keep `conn` (dialed to `addr` under `allowed`) for a later request. The caller checks in only
    /// a connection whose last exchange ended cleanly.
    pub(crate) fn checkin(&self, allowed: Allowed, addr: SocketAddr, conn: C, now: Instant) {
        if self.limits.max_idle == 0 || self.limits.max_idle_per_decision == 0 {
            return;
        }
        let mut evicted = Vec::new();
        {
            let mut idle = self.lock();
            let list = idle.by_decision.entry(allowed).or_default();
            if list.len() >= self.limits.max_idle_per_decision {
                evicted.push(list.remove(0));
            }
            list.push(Entry {
                addr,
                conn,
                since: now,
            });
            idle.total = idle.total + 1 - evicted.len();
            while idle.total > self.limits.max_idle {
                // Evict the oldest entry overall (lists are in check-in order, oldest first).
                let oldest = idle
                    .by_decision
                    .iter()
                    .filter_map(|(k, v)| v.first().map(|e| (e.since, k.clone())))
                    .min_by_key(|(since, _)| *since)
                    .map(|(_, k)| k);
                let Some(k) = oldest else { break };
                if let Some(list) = idle.by_decision.get_mut(&k) {
                    evicted.push(list.remove(0));
                    if list.is_empty() {
                        idle.by_decision.remove(&k);
                    }
                    idle.total -= 1;
                }
            }
        }
        drop(evicted);
    }

    /// Close every expired or unusable idle connection; returns how many were closed.
    pub(crate) fn sweep(&self, now: Instant) -> usize {
        let mut dropped = Vec::new();
        {
            let mut idle = self.lock();
            let timeout = self.limits.idle_timeout;
            idle.by_decision.retain(|_, list| {
                let mut i = 0;
                while i < list.len() {
                    let e = &list[i];
                    if now.saturating_duration_since(e.since) >= timeout || !e.conn.reusable() {
                        dropped.push(list.remove(i));
                    } else {
                        i += 1;
                    }
                }
                !list.is_empty()
            });
            idle.total -= dropped.len();
        }
        let n = dropped.len();
        drop(dropped);
        n
    }

    /// Idle connections held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::NormalHost;
    use bytes::Bytes;
    use http_body_util::Empty;
    use hyper::client::conn::http1::SendRequest;
    use hyper_util::rt::TokioIo;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    type Conn = SendRequest<Empty<Bytes>>;

    const STEP: Duration = Duration::from_secs(10);

    /// A loopback server answering `200 ok` with keep-alive; counts accepted connections and
    /// connections it saw closed by the peer.
    struct Upstream {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
        closed: Arc<AtomicUsize>,
    }

    async fn upstream() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(AtomicUsize::new(0));
        let (a, c) = (accepted.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let c = c.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut head = Vec::new();
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => {
                                c.fetch_add(1, Ordering::SeqCst);
                                return;
                            }
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                        while let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                            head.drain(..end + 4);
                            let r = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if s.write_all(r).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        Upstream {
            addr,
            accepted,
            closed,
        }
    }

    /// A real hyper connection to `addr` that has completed one exchange (so it is ready).
    async fn connection(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).await.unwrap();
        let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
            .await
            .unwrap();
        tokio::spawn(conn);
        exchange(&mut tx).await;
        tx
    }

    async fn exchange(tx: &mut Conn) {
        use http_body_util::BodyExt;
        let req = http::Request::builder()
            .uri("/")
            .header("host", "t")
            .body(Empty::new())
            .unwrap();
        let resp = tokio::time::timeout(STEP, tx.send_request(req))
            .await
            .unwrap()
            .unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok");
        tokio::time::timeout(STEP, tx.ready())
            .await
            .unwrap()
            .unwrap();
    }

    fn decision(host: &str, port: u16, rule: &str, loopback_ok: bool) -> Allowed {
        Allowed {
            host: NormalHost::Name(host.into()),
            port,
            rule: rule.into(),
            loopback_ok,
        }
    }

    fn limits() -> PoolLimits {
        PoolLimits {
            idle_timeout: Duration::from_secs(30),
            max_idle: 8,
            max_idle_per_decision: 4,
        }
    }

    async fn wait_closed(up: &Upstream, n: usize) {
        for _ in 0..400 {
            if up.closed.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "upstream saw {} closed connections, expected {n}",
            up.closed.load(Ordering::SeqCst)
        );
    }

    #[tokio::test]
    async fn never_shared_across_decisions() {
        let up = upstream().await;
        let pool: Pool<Conn> = Pool::new(limits());
        let now = Instant::now();
        let a = decision("a.test", up.addr.port(), "entry `a.test`", true);
        pool.checkin(a.clone(), up.addr, connection(up.addr).await, now);
        // Same address and port, but another host, another rule, or another loopback verdict:
        // each is another decision and gets nothing.
        for other in [
            decision("b.test", up.addr.port(), "entry `a.test`", true),
            decision("a.test", up.addr.port(), "entry `*.test`", true),
            decision("a.test", up.addr.port(), "entry `a.test`", false),
            decision("a.test", up.addr.port() ^ 1, "entry `a.test`", true),
        ] {
            assert!(pool.checkout(&other, now).is_none(), "{other:?}");
        }
        assert_eq!(pool.len(), 1);
        let (addr, mut c) = pool.checkout(&a, now).expect("same decision reuses");
        assert_eq!(addr, up.addr);
        exchange(&mut c).await;
        assert_eq!(
            up.accepted.load(Ordering::SeqCst),
            1,
            "one upstream connection"
        );
        assert_eq!(pool.len(), 0);
    }

    #[tokio::test]
    async fn expired_connections_are_not_handed_out() {
        let up = upstream().await;
        let pool: Pool<Conn> = Pool::new(limits());
        let a = decision("a.test", up.addr.port(), "r", true);
        let t0 = Instant::now();
        pool.checkin(a.clone(), up.addr, connection(up.addr).await, t0);
        let later = t0 + limits().idle_timeout;
        assert!(pool.checkout(&a, later).is_none());
        assert_eq!(pool.len(), 0);
        wait_closed(&up, 1).await;
    }

    #[tokio::test]
    async fn sweep_closes_expired_connections() {
        let up = upstream().await;
        let pool: Pool<Conn> = Pool::new(limits());
        let t0 = Instant::now();
        let a = decision("a.test", up.addr.port(), "r", true);
        let b = decision("b.test", up.addr.port(), "r", true);
        pool.checkin(a.clone(), up.addr, connection(up.addr).await, t0);
        pool.checkin(
            b.clone(),
            up.addr,
            connection(up.addr).await,
            t0 + Duration::from_secs(20),
        );
        assert_eq!(pool.sweep(t0 + Duration::from_secs(10)), 0);
        assert_eq!(pool.sweep(t0 + Duration::from_secs(31)), 1);
        assert_eq!(pool.len(), 1);
        wait_closed(&up, 1).await;
        assert!(pool.checkout(&a, t0 + Duration::from_secs(31)).is_none());
        assert!(pool.checkout(&b, t0 + Duration::from_secs(31)).is_some());
    }

    #[tokio::test]
    async fn pool_is_bounded() {
        let up = upstream().await;
        let pool: Pool<Conn> = Pool::new(PoolLimits {
            idle_timeout: Duration::from_secs(30),
            max_idle: 3,
            max_idle_per_decision: 2,
        });
        let t0 = Instant::now();
        let a = decision("a.test", up.addr.port(), "r", true);
        let b = decision("b.test", up.addr.port(), "r", true);
        // Per decision: a third connection for `a` closes the oldest of `a`.
        for i in 0..3 {
            let at = t0 + Duration::from_millis(i);
            pool.checkin(a.clone(), up.addr, connection(up.addr).await, at);
        }
        assert_eq!(pool.len(), 2);
        wait_closed(&up, 1).await;
        // In total: two more for `b` push the total past 3, the oldest overall (of `a`) goes.
        for i in 3..5 {
            let at = t0 + Duration::from_millis(i);
            pool.checkin(b.clone(), up.addr, connection(up.addr).await, at);
        }
        assert_eq!(pool.len(), 3);
        wait_closed(&up, 2).await;
        let now = t0 + Duration::from_millis(10);
        assert!(pool.checkout(&a, now).is_some());
        assert!(pool.checkout(&a, now).is_none());
        assert!(pool.checkout(&b, now).is_some());
        assert!(pool.checkout(&b, now).is_some());
        assert!(pool.checkout(&b, now).is_none());
        assert_eq!(up.accepted.load(Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn closed_or_busy_connections_are_not_handed_out() {
        let up = upstream().await;
        let pool: Pool<Conn> = Pool::new(limits());
        let now = Instant::now();
        let a = decision("a.test", up.addr.port(), "r", true);
        // Busy: a request is in flight and its response not read.
        let mut busy = connection(up.addr).await;
        let req = http::Request::builder()
            .uri("/")
            .header("host", "t")
            .body(Empty::new())
            .unwrap();
        let pending = busy.send_request(req);
        assert!(!busy.is_ready());
        pool.checkin(a.clone(), up.addr, busy, now);
        assert!(
            pool.checkout(&a, now).is_none(),
            "a busy connection is not reused"
        );
        drop(pending);
        // Closed: the upstream end went away.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let dead_addr = l.local_addr().unwrap();
        let (s, accepted) = tokio::join!(TcpStream::connect(dead_addr), l.accept());
        let (tx, conn): (Conn, _) = hyper::client::conn::http1::handshake(TokioIo::new(s.unwrap()))
            .await
            .unwrap();
        let task = tokio::spawn(conn);
        drop(accepted.unwrap());
        let _ = tokio::time::timeout(STEP, task).await;
        assert!(tx.is_closed());
        pool.checkin(a.clone(), dead_addr, tx, now);
        assert!(
            pool.checkout(&a, now).is_none(),
            "a closed connection is not reused"
        );
        assert_eq!(pool.len(), 0);
    }
}
