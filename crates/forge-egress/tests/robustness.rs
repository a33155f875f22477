//! Robustness of the proxy under hostile or heavy clients: slow headers, oversized headers, long
//! targets, the tunnel and connection limits, idle and half-closed tunnels, DNS time-outs, shutdown.

mod common;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::*;
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyHandle, ProxyLimits, ProxyOptions, REASON_HEADER};
use forge_egress::resolve::{Resolver, StaticResolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn start(entries: Vec<String>, limits: ProxyLimits) -> (SocketAddr, ProxyHandle) {
    let opts = ProxyOptions {
        limits,
        resolver: Arc::new(StaticResolver::new()),
        ..Default::default()
    };
    EgressProxy::serve(Arc::new(EgressPolicy::allowlist(entries).unwrap()), opts)
        .await
        .unwrap()
}

/// Echo server: writes back whatever it reads; on EOF writes `got N bytes` and closes.
async fn echo_upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut total = 0usize;
                let mut buf = [0u8; 4096];
                loop {
                    match tokio::time::timeout(STEP, s.read(&mut buf)).await {
                        Ok(Ok(0)) => break,
                        Ok(Ok(n)) => {
                            total += n;
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                        _ => return,
                    }
                }
                let _ = s.write_all(format!("got {total} bytes").as_bytes()).await;
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

/// Read until EOF or error, bounded by STEP; true when the peer closed.
async fn closed_by_peer(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 1024];
    let mut all = Vec::new();
    let r = tokio::time::timeout(STEP, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => all.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    // Closed (possibly after hyper's own 408) rather than left hanging.
    r.is_ok() && (all.is_empty() || all.starts_with(b"HTTP/1.1 408"))
}

async fn echo_round(t: &mut TcpStream, msg: &[u8]) -> Vec<u8> {
    t.write_all(msg).await.unwrap();
    let mut got = vec![0u8; msg.len()];
    tokio::time::timeout(STEP, t.read_exact(&mut got))
        .await
        .unwrap()
        .unwrap();
    got
}

#[tokio::test]
async fn slow_headers_are_cut_off_and_others_are_served() {
    let up = http_upstream().await;
    let limits = ProxyLimits {
        header_read_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (proxy, handle) = start(vec![format!("127.0.0.1:{}", up.port())], limits).await;
    let mut slow = TcpStream::connect(proxy).await.unwrap();
    slow.write_all(b"GET http://127.0.0.1/ HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let ok = get_via(proxy, &format!("http://127.0.0.1:{}/", up.port()), "x").await;
    assert_eq!(ok.status, 200, "a well-behaved client is served meanwhile");
    assert!(
        closed_by_peer(&mut slow).await,
        "slow client is disconnected at the header timeout"
    );
    handle.shutdown().await;
}

#[tokio::test]
async fn oversized_or_too_many_headers_get_431() {
    let limits = ProxyLimits {
        max_header_bytes: 8 * 1024,
        max_headers: 20,
        ..Default::default()
    };
    let (proxy, handle) = start(vec!["example.com".into()], limits).await;
    let big = format!(
        "GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\nX-Big: {}\r\n\r\n",
        "a".repeat(16 * 1024)
    );
    assert_eq!(raw(proxy, &big).await.status, 431);
    let mut many = String::from("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n");
    for i in 0..50 {
        many.push_str(&format!("X-H{i}: v\r\n"));
    }
    many.push_str("\r\n");
    assert_eq!(raw(proxy, &many).await.status, 431);
    handle.shutdown().await;
}

#[tokio::test]
async fn over_long_request_target_gets_414() {
    let limits = ProxyLimits {
        max_target_len: 1024,
        ..Default::default()
    };
    let (proxy, handle) = start(vec!["example.com".into()], limits).await;
    let r = get_via(
        proxy,
        &format!("http://example.com/{}", "a".repeat(2000)),
        "example.com",
    )
    .await;
    assert_eq!(r.status, 414);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("malformed"));
    handle.shutdown().await;
}

#[tokio::test]
async fn tunnels_up_to_the_limit_then_429_without_harming_the_others() {
    let echo = echo_upstream().await;
    let entry = format!("127.0.0.1:{}", echo.port());
    let limits = ProxyLimits {
        max_tunnels: 3,
        ..Default::default()
    };
    let (proxy, handle) = start(vec![entry.clone()], limits).await;
    let mut tunnels = Vec::new();
    for _ in 0..3 {
        let (r, t) = connect_via(proxy, &entry).await;
        assert_eq!(r.status, 200);
        tunnels.push(t.unwrap());
    }
    let (r, t) = connect_via(proxy, &entry).await;
    assert_eq!(r.status, 429);
    assert!(t.is_none());
    assert_eq!(r.header("retry-after").as_deref(), Some("1"));
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("too-many-tunnels"));
    for (i, t) in tunnels.iter_mut().enumerate() {
        let msg = format!("tunnel {i} still works");
        assert_eq!(echo_round(t, msg.as_bytes()).await, msg.as_bytes());
    }
    // Closing one frees a slot (released asynchronously: retry a bounded number of times).
    drop(tunnels.pop());
    let mut reopened = false;
    for _ in 0..100 {
        let (r, _t) = connect_via(proxy, &entry).await;
        if r.status == 200 {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened, "a freed tunnel slot can be used again");
    handle.shutdown().await;
}

#[tokio::test]
async fn connections_past_the_limit_are_refused_promptly() {
    let limits = ProxyLimits {
        max_connections: 2,
        ..Default::default()
    };
    let (proxy, handle) = start(vec!["example.com".into()], limits).await;
    let _a = TcpStream::connect(proxy).await.unwrap();
    let _b = TcpStream::connect(proxy).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut c = TcpStream::connect(proxy).await.unwrap();
    let r = tokio::time::timeout(STEP, read_response(&mut c))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(r.status, 503);
    handle.shutdown().await;
}

#[tokio::test]
async fn half_closed_tunnel_still_delivers_the_reply() {
    let echo = echo_upstream().await;
    let entry = format!("127.0.0.1:{}", echo.port());
    let (proxy, handle) = start(vec![entry.clone()], ProxyLimits::default()).await;
    let (_, t) = connect_via(proxy, &entry).await;
    let mut t = t.unwrap();
    t.write_all(b"0123456789").await.unwrap();
    t.shutdown().await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(STEP, t.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(out, b"0123456789got 10 bytes");
    handle.shutdown().await;
}

#[tokio::test]
async fn idle_tunnels_are_closed() {
    let echo = echo_upstream().await;
    let entry = format!("127.0.0.1:{}", echo.port());
    let limits = ProxyLimits {
        idle_tunnel_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (proxy, handle) = start(vec![entry.clone()], limits).await;
    let (_, t) = connect_via(proxy, &entry).await;
    let mut t = t.unwrap();
    assert_eq!(echo_round(&mut t, b"ping").await, b"ping");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(STEP, t.read(&mut buf))
        .await
        .expect("closed within the step limit");
    assert!(
        matches!(n, Ok(0) | Err(_)),
        "idle tunnel closed by the proxy: {n:?}"
    );
    handle.shutdown().await;
}

struct NeverResolves;

#[async_trait]
impl Resolver for NeverResolves {
    async fn resolve(&self, _host: &str) -> io::Result<Vec<std::net::IpAddr>> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn dns_timeout_gives_504() {
    let opts = ProxyOptions {
        resolver: Arc::new(NeverResolves),
        limits: ProxyLimits {
            dns_timeout: Duration::from_millis(200),
            ..Default::default()
        },
        ..Default::default()
    };
    let (proxy, handle) = EgressProxy::serve(
        Arc::new(EgressPolicy::allowlist(["example.com"]).unwrap()),
        opts,
    )
    .await
    .unwrap();
    let r = get_via(proxy, "http://example.com/", "example.com").await;
    assert_eq!(r.status, 504);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("timeout"));
    let (r, _) = connect_via(proxy, "example.com:443").await;
    assert_eq!(r.status, 504);
    handle.shutdown().await;
}

#[tokio::test]
async fn shutdown_closes_tunnels_and_the_listener() {
    let echo = echo_upstream().await;
    let entry = format!("127.0.0.1:{}", echo.port());
    let (proxy, handle) = start(vec![entry.clone()], ProxyLimits::default()).await;
    let (_, t) = connect_via(proxy, &entry).await;
    let mut t = t.unwrap();
    assert_eq!(echo_round(&mut t, b"before").await, b"before");
    let mut idle_client = TcpStream::connect(proxy).await.unwrap();
    tokio::time::timeout(STEP, handle.shutdown())
        .await
        .expect("shutdown finishes");
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(STEP, t.read(&mut buf)).await.unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "tunnel closed: {n:?}");
    let n = tokio::time::timeout(STEP, idle_client.read(&mut buf))
        .await
        .unwrap();
    assert!(matches!(n, Ok(0) | Err(_)), "idle connection closed: {n:?}");
    assert!(TcpStream::connect(proxy).await.is_err(), "listener is gone");
}

#[tokio::test]
async fn upstream_that_never_answers_gives_504() {
    // Accepts and reads, never answers.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let keep = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let limits = ProxyLimits {
        upstream_response_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let (proxy, handle) = start(vec![format!("127.0.0.1:{port}")], limits).await;
    let r = get_via(proxy, &format!("http://127.0.0.1:{port}/"), "x").await;
    assert_eq!(r.status, 504);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("timeout"));
    handle.shutdown().await;
    keep.abort();
}

#[tokio::test]
async fn request_bodies_are_streamed_to_the_upstream_and_counted() {
    let up = http_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let observer = Arc::new(Collect::default());
    let opts = ProxyOptions {
        observer: Some(observer.clone()),
        resolver: Arc::new(StaticResolver::new()),
        ..Default::default()
    };
    let (proxy, handle) = EgressProxy::serve(
        Arc::new(EgressPolicy::allowlist([entry.as_str()]).unwrap()),
        opts,
    )
    .await
    .unwrap();
    let r = raw(
        proxy,
        &format!(
            "POST http://{entry}/submit HTTP/1.1\r\nHost: {entry}\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world"
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.body.contains("body=hello world"), "{}", r.body);
    let d = observer.wait_for(1).await;
    assert_eq!(d[0].method, "POST");
    assert_eq!(d[0].bytes_up, 11);
    assert_eq!(d[0].bytes_down, r.body.len() as u64);
    handle.shutdown().await;
}
