//! The proxy's keep-alive pool of upstream connections, end to end on loopback: reuse for the same
//! decision, never across decisions (two host names on one address), no reuse after a response that
//! was not read to its end, and a fresh connection when the upstream closed the pooled one.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use common::*;
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, Outcome, ProxyHandle, ProxyOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Copy)]
enum Mode {
    /// Keep-alive, small body.
    KeepAlive,
    /// Keep-alive, a body of this many bytes.
    Big(usize),
    /// A small response, then the upstream closes the connection (no `Connection: close` header).
    CloseAfterEach,
}

/// Requests seen by the upstream: (connection number, Host header, path).
type Seen = Arc<Mutex<Vec<(usize, String, String)>>>;

async fn upstream(mode: Mode) -> (SocketAddr, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let s2 = seen.clone();
    tokio::spawn(async move {
        let mut conn_no = 0;
        while let Ok((mut s, _)) = l.accept().await {
            conn_no += 1;
            let id = conn_no;
            let seen = s2.clone();
            tokio::spawn(async move {
                // Bounded: at most 100 requests per connection in these tests.
                for _ in 0..100 {
                    let Ok(Ok(head)) = tokio::time::timeout(STEP, read_head(&mut s)).await else {
                        return;
                    };
                    let mut lines = head.split("\r\n");
                    let path = lines
                        .next()
                        .and_then(|l| l.split(' ').nth(1))
                        .unwrap_or("")
                        .to_string();
                    let host = lines
                        .filter_map(|l| l.split_once(':'))
                        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
                        .map(|(_, v)| v.trim().to_string())
                        .unwrap_or_default();
                    seen.lock().unwrap().push((id, host, path.clone()));
                    let body = match mode {
                        Mode::Big(n) => vec![b'x'; n],
                        _ => format!("conn {id} path {path}").into_bytes(),
                    };
                    let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                    if s.write_all(head.as_bytes()).await.is_err()
                        || s.write_all(&body).await.is_err()
                    {
                        return;
                    }
                    if matches!(mode, Mode::CloseAfterEach) {
                        let _ = s.shutdown().await;
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

async fn start(entries: &[String]) -> (SocketAddr, ProxyHandle, LoopbackDialer, Arc<Collect>) {
    let dialer = LoopbackDialer::default();
    let observer = Arc::new(Collect::default());
    let opts = ProxyOptions {
        observer: Some(observer.clone()),
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let policy = EgressPolicy::allowlist(entries.iter().map(String::as_str)).unwrap();
    let (addr, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    (addr, handle, dialer, observer)
}

/// One keep-alive GET on an open client connection to the proxy.
async fn get(client: &mut TcpStream, url: &str) -> Resp {
    tokio::time::timeout(STEP, async {
        client
            .write_all(format!("GET {url} HTTP/1.1\r\nHost: ignored.example\r\n\r\n").as_bytes())
            .await
            .unwrap();
        read_response(client).await.unwrap()
    })
    .await
    .expect("proxy answered within the step limit")
}

#[tokio::test]
async fn sequential_requests_for_one_decision_share_one_upstream_connection() {
    let (up, seen) = upstream(Mode::KeepAlive).await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, dialer, obs) = start(std::slice::from_ref(&entry)).await;
    let mut c1 = TcpStream::connect(proxy).await.unwrap();
    for i in 0..5 {
        let r = get(&mut c1, &format!("http://{entry}/{i}")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, format!("conn 1 path /{i}"));
    }
    // Another client connection to the proxy reuses the same upstream connection too.
    let mut c2 = TcpStream::connect(proxy).await.unwrap();
    let r = get(&mut c2, &format!("http://{entry}/other")).await;
    assert_eq!(r.body, "conn 1 path /other");
    assert_eq!(dialer.attempts(), 1, "one dial for six requests");
    assert_eq!(seen.lock().unwrap().len(), 6);
    // Every request is still a decision of its own, reported with the address it used.
    let ds = obs.wait_for(6).await;
    assert_eq!(ds.len(), 6);
    for d in &ds {
        assert_eq!(d.outcome, Outcome::Allowed);
        assert_eq!(d.chosen, Some(up));
        assert_eq!(d.host, "127.0.0.1");
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn two_host_names_on_one_address_never_share_a_connection() {
    let (up, seen) = upstream(Mode::KeepAlive).await;
    let port = up.port();
    let entries = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    let (proxy, handle, _dialer, _) = start(&entries).await;
    let mut c = TcpStream::connect(proxy).await.unwrap();
    for i in 0..6 {
        let host = if i % 2 == 0 { "127.0.0.1" } else { "localhost" };
        let r = get(&mut c, &format!("http://{host}:{port}/{i}")).await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6);
    let mut hosts_by_conn: std::collections::HashMap<usize, Vec<String>> = Default::default();
    for (conn, host, _) in &seen {
        hosts_by_conn.entry(*conn).or_default().push(host.clone());
    }
    assert_eq!(
        hosts_by_conn.len(),
        2,
        "one connection per host name: {seen:?}"
    );
    for hosts in hosts_by_conn.values() {
        assert!(hosts.iter().all(|h| h == &hosts[0]), "{seen:?}");
        assert_eq!(hosts.len(), 3);
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn a_response_not_read_to_its_end_does_not_leave_its_connection_for_reuse() {
    let big = 4 * 1024 * 1024;
    let (up, seen) = upstream(Mode::Big(big)).await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, dialer, _) = start(std::slice::from_ref(&entry)).await;
    // Read the head and a few bytes of a large body, then go away.
    let mut c = TcpStream::connect(proxy).await.unwrap();
    c.write_all(format!("GET http://{entry}/big HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = tokio::time::timeout(STEP, read_head(&mut c))
        .await
        .unwrap()
        .unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let mut some = [0u8; 1024];
    tokio::time::timeout(STEP, c.read_exact(&mut some))
        .await
        .unwrap()
        .unwrap();
    drop(c);
    // The next request gets a complete response over a new upstream connection.
    let mut c = TcpStream::connect(proxy).await.unwrap();
    let r = get(&mut c, &format!("http://{entry}/again")).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), big);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_ne!(
        seen[0].0, seen[1].0,
        "not the connection of the abandoned response"
    );
    assert_eq!(dialer.attempts(), 2);
    handle.shutdown().await;
}

#[tokio::test]
async fn an_upstream_that_closes_after_each_response_still_answers_every_request() {
    let (up, seen) = upstream(Mode::CloseAfterEach).await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, _dialer, obs) = start(std::slice::from_ref(&entry)).await;
    let mut c = TcpStream::connect(proxy).await.unwrap();
    for i in 0..5 {
        let r = get(&mut c, &format!("http://{entry}/{i}")).await;
        assert_eq!(r.status, 200, "request {i}: {r:?}");
        assert!(r.body.ends_with(&format!("path /{i}")), "{}", r.body);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    let conns: std::collections::HashSet<usize> = seen.iter().map(|s| s.0).collect();
    assert_eq!(
        conns.len(),
        5,
        "a closed connection is never reused: {seen:?}"
    );
    let ds = obs.wait_for(5).await;
    assert!(ds.iter().all(|d| d.outcome == Outcome::Allowed), "{ds:?}");
    handle.shutdown().await;
}
