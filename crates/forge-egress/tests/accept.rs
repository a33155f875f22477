//! The HTTP accept loop's head gate (`accept::accept_http`): head-less connections wait in their
//! own budget with a per-peer-IP cap and a head timeout, and never take the request slots; and
//! the probe listener (`probe::serve`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use forge_egress::accept::{accept_http, serve_http1, AcceptOptions, HeadGate, OverCap, BUSY_503};
use http_body_util::Full;
use hyper::service::service_fn;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// A server answering `200 ok` to every request, with `slots` request slots and `gate`.
async fn server(slots: usize, gate: HeadGate) -> (SocketAddr, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let options = AcceptOptions {
        log_prefix: "test:",
        conns: Arc::new(Semaphore::new(slots)),
        over_cap: OverCap::Answer(BUSY_503),
        nodelay: true,
        tracker: None,
    };
    let serving = stop.clone();
    tokio::spawn(accept_http(
        listener,
        options,
        gate,
        stop.clone(),
        move |conn| {
            let svc = service_fn(|_req| async {
                Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"ok"))))
            });
            serve_http1(
                conn,
                svc,
                Duration::from_secs(5),
                serving.clone(),
                Duration::from_secs(1),
            )
        },
    ));
    (addr, stop)
}

async fn connect_from(src: &str, to: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(format!("{src}:0").parse().unwrap()).unwrap();
    s.connect(to).await.unwrap()
}

/// One `GET path` on a fresh connection from `src`; the status line.
async fn get_from(src: &str, to: SocketAddr, path: &str) -> String {
    let mut s = connect_from(src, to).await;
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the server closed `s` (EOF or reset) within `within`.
async fn closed(s: &mut TcpStream, within: Duration) -> bool {
    let mut b = [0u8; 64];
    matches!(
        tokio::time::timeout(within, s.read(&mut b)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

async fn wait_waiting(gate: &HeadGate, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while gate.waiting() != n {
        assert!(
            Instant::now() < deadline,
            "waiting {} != {n}",
            gate.waiting()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn idle_connections_do_not_take_request_slots() {
    let gate = HeadGate::new(1000, 1000, Duration::from_secs(5));
    let (addr, stop) = server(2, gate.clone()).await;
    let mut idle = Vec::new();
    for _ in 0..50 {
        idle.push(connect_from("127.0.0.1", addr).await);
    }
    wait_waiting(&gate, 50).await;
    for _ in 0..5 {
        let r = get_from("127.0.0.1", addr, "/").await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    stop.cancel();
}

#[tokio::test]
async fn the_per_ip_cap_is_hit_and_other_peers_still_get_in() {
    let gate = HeadGate::new(1000, 4, Duration::from_secs(5));
    let (addr, stop) = server(8, gate.clone()).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from("127.0.0.1", addr).await);
    }
    wait_waiting(&gate, 4).await;
    let mut fifth = connect_from("127.0.0.1", addr).await;
    assert!(closed(&mut fifth, Duration::from_secs(2)).await);
    assert_eq!(gate.refused_per_ip(), 1);
    // Another loopback address is another peer.
    let r = get_from("127.0.0.2", addr, "/").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert_eq!(gate.refused_total(), 0);
    stop.cancel();
}

#[tokio::test]
async fn the_total_budget_is_hit() {
    let gate = HeadGate::new(3, 100, Duration::from_secs(5));
    let (addr, stop) = server(8, gate.clone()).await;
    let mut idle = Vec::new();
    for src in ["127.0.0.1", "127.0.0.2", "127.0.0.3"] {
        idle.push(connect_from(src, addr).await);
    }
    wait_waiting(&gate, 3).await;
    let mut fourth = connect_from("127.0.0.4", addr).await;
    assert!(closed(&mut fourth, Duration::from_secs(2)).await);
    assert_eq!(gate.refused_total(), 1);
    // Once one of them sends its head, the budget has room again.
    drop(idle.pop());
    wait_waiting(&gate, 2).await;
    let r = get_from("127.0.0.4", addr, "/").await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    stop.cancel();
}

#[tokio::test]
async fn idle_and_slowloris_connections_are_closed_at_the_head_timeout() {
    let gate = HeadGate::new(100, 100, Duration::from_millis(400));
    let (addr, stop) = server(8, gate.clone()).await;
    let t0 = Instant::now();
    let mut idle = connect_from("127.0.0.1", addr).await;
    let mut slow = connect_from("127.0.0.1", addr).await;
    let dripping = tokio::spawn(async move {
        for b in b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " {
            if slow.write_all(&[*b]).await.is_err() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        closed(&mut slow, Duration::from_secs(3)).await
    });
    assert!(closed(&mut idle, Duration::from_secs(3)).await);
    assert!(
        dripping.await.unwrap(),
        "the slowloris connection was not closed"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
    assert_eq!(gate.timed_out(), 2);
    assert_eq!(gate.waiting(), 0);
    stop.cancel();
}

#[tokio::test]
async fn a_head_sent_in_pieces_is_replayed_whole() {
    let gate = HeadGate::new(100, 100, Duration::from_secs(5));
    let (addr, stop) = server(8, gate).await;
    let mut s = connect_from("127.0.0.1", addr).await;
    for part in [
        "GET / HT",
        "TP/1.1\r\nHost: 127.0.0.1\r",
        "\n",
        "Connection: close\r\n\r\n",
    ] {
        s.write_all(part.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("ok"),
        "{out}"
    );
    stop.cancel();
}

#[tokio::test]
async fn over_the_request_cap_a_request_gets_503() {
    let gate = HeadGate::new(100, 100, Duration::from_secs(5));
    let (addr, stop) = server(1, gate).await;
    // A keep-alive connection holds the one slot after its request.
    let mut held = connect_from("127.0.0.1", addr).await;
    held.write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut b = [0u8; 256];
    let n = held.read(&mut b).await.unwrap();
    assert!(b[..n].starts_with(b"HTTP/1.1 200"));
    let r = get_from("127.0.0.1", addr, "/").await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    stop.cancel();
}

#[tokio::test]
async fn the_probe_listener_answers_healthz_and_readyz() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let ready: forge_egress::probe::ReadyCheck =
        Arc::new(|| Box::pin(async { Err("draining \"now\"".to_string()) }));
    tokio::spawn(forge_egress::probe::serve(listener, ready, stop.clone()));
    let r = get_from("127.0.0.1", addr, "/healthz").await;
    assert!(
        r.starts_with("HTTP/1.1 200") && r.ends_with(r#"{"status":"ok"}"#),
        "{r}"
    );
    let r = get_from("127.0.0.1", addr, "/readyz").await;
    assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    assert!(
        r.ends_with(r#"{"status":"not ready","reason":"draining \"now\""}"#),
        "{r}"
    );
    let r = get_from("127.0.0.1", addr, "/").await;
    assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    stop.cancel();
}
