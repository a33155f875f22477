//! Direct loopback transfer vs the same transfer through the egress proxy.
//!
//! Run: `cargo bench -p forge-egress --bench proxy` (release profile). Prints a markdown table for
//! docs/benchmarks.md. Everything runs on loopback: a raw TCP source for CONNECT throughput, a hyper
//! HTTP/1.1 server with a small body for requests per second.

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyOptions};

const BULK_BYTES: u64 = 512 * 1024 * 1024;
const RUNS: usize = 5;
const REQUESTS: usize = 3000;

/// Sends BULK_BYTES to every connection after reading one byte.
async fn source() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            s.set_nodelay(true).ok();
            tokio::spawn(async move {
                let mut one = [0u8; 1];
                if s.read_exact(&mut one).await.is_err() {
                    return;
                }
                let chunk = vec![0u8; 256 * 1024];
                let mut left = BULK_BYTES;
                while left > 0 {
                    let n = left.min(chunk.len() as u64) as usize;
                    if s.write_all(&chunk[..n]).await.is_err() {
                        return;
                    }
                    left -= n as u64;
                }
                let _ = s.shutdown().await;
            });
        }
    });
    addr
}

async fn http_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            s.set_nodelay(true).ok();
            tokio::spawn(async move {
                let svc = service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                        b"ok, a small body",
                    ))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

async fn drain(mut s: TcpStream) -> u64 {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return total,
            Ok(n) => total += n as u64,
        }
    }
}

async fn bulk_direct(src: SocketAddr) -> Duration {
    let mut s = TcpStream::connect(src).await.unwrap();
    s.set_nodelay(true).ok();
    let t = Instant::now();
    s.write_all(b"g").await.unwrap();
    assert_eq!(drain(s).await, BULK_BYTES);
    t.elapsed()
}

async fn bulk_proxy(proxy: SocketAddr, src: SocketAddr) -> Duration {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).ok();
    let t = Instant::now();
    s.write_all(format!("CONNECT {src} HTTP/1.1\r\nHost: {src}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"));
    s.write_all(b"g").await.unwrap();
    assert_eq!(drain(s).await, BULK_BYTES);
    t.elapsed()
}

/// Sequential requests on one keep-alive connection to `conn_to`, with `uri` as request target.
async fn rps(conn_to: SocketAddr, uri: &str) -> Duration {
    let s = TcpStream::connect(conn_to).await.unwrap();
    s.set_nodelay(true).ok();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    tokio::spawn(conn);
    let t = Instant::now();
    for _ in 0..REQUESTS {
        let req = Request::builder()
            .uri(uri)
            .header("host", "bench")
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.ready().await.unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert!(resp.status().is_success());
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"ok, a small body");
    }
    t.elapsed()
}

/// CPU time (user + system) used so far by the proxy runtime's threads (Linux /proc; 0 elsewhere).
fn proxy_cpu() -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    // SAFETY: sysconf has no memory-safety preconditions.
    #[cfg(target_os = "linux")]
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    #[cfg(not(target_os = "linux"))]
    let hz = 100.0;
    let mut ticks = 0u64;
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("egress-proxy") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
        let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
        let f: Vec<&str> = after.split_whitespace().collect();
        if f.len() > 12 {
            ticks += f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        }
    }
    Duration::from_secs_f64(ticks as f64 / hz)
}

/// CPU time (user + system) of the whole process so far.
fn process_cpu() -> Duration {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage writes into the zeroed struct we pass; no other preconditions.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } == 0 {
            let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
            return tv(ru.ru_utime) + tv(ru.ru_stime);
        }
    }
    Duration::ZERO
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    // The endpoints (source, HTTP server, clients) run in one runtime, the proxy in its own runtime
    // on its own thread, as in real use where the proxied program is a separate process.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (src, web) = rt.block_on(async { (source().await, http_server().await) });
    let proxy_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("egress-proxy")
        .enable_all()
        .build()
        .unwrap();
    let (proxy, handle) = proxy_rt.block_on(async {
        let policy = EgressPolicy::allowlist([
            format!("127.0.0.1:{}", src.port()),
            format!("127.0.0.1:{}", web.port()),
        ])
        .unwrap();
        EgressProxy::serve(Arc::new(policy), ProxyOptions::default())
            .await
            .unwrap()
    });
    rt.block_on(async {
        // Warm up both paths once.
        bulk_direct(src).await;
        bulk_proxy(proxy, src).await;
        let mut direct = Vec::new();
        let mut via = Vec::new();
        let mut cpu = Duration::ZERO;
        let (mut total_direct, mut total_via) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..RUNS {
            let t0 = process_cpu();
            direct.push(bulk_direct(src).await);
            let t1 = process_cpu();
            let c0 = proxy_cpu();
            via.push(bulk_proxy(proxy, src).await);
            cpu += proxy_cpu().saturating_sub(c0);
            total_via += process_cpu().saturating_sub(t1);
            total_direct += t1.saturating_sub(t0);
        }
        // What one core running only the proxy could relay: bytes moved per proxy CPU second.
        let relay_capacity = (BULK_BYTES as f64 * RUNS as f64 / (1024.0 * 1024.0)) / cpu.as_secs_f64().max(1e-9);
        let mib = BULK_BYTES as f64 / (1024.0 * 1024.0);
        let d_tp = mib / median(direct).as_secs_f64();
        let p_tp = mib / median(via).as_secs_f64();

        rps(web, "/").await;
        rps(proxy, &format!("http://{web}/")).await;
        let mut direct = Vec::new();
        let mut via = Vec::new();
        for _ in 0..RUNS {
            direct.push(rps(web, "/").await);
            via.push(rps(proxy, &format!("http://{web}/")).await);
        }
        let d_rq = median(direct);
        let p_rq = median(via);
        let d_rps = REQUESTS as f64 / d_rq.as_secs_f64();
        let p_rps = REQUESTS as f64 / p_rq.as_secs_f64();
        let added_us = (p_rq.as_secs_f64() - d_rq.as_secs_f64()) / REQUESTS as f64 * 1e6;

        println!("| measurement | direct | through proxy | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| CONNECT throughput, {mib:.0} MiB body (median of {RUNS}) | {d_tp:.0} MiB/s | {p_tp:.0} MiB/s | {:.0}% |",
            p_tp / d_tp * 100.0
        );
        println!(
            "| small GET, sequential on one keep-alive connection ({REQUESTS} requests, median of {RUNS}) | {d_rps:.0} req/s | {p_rps:.0} req/s | {:.0}% |",
            p_rps / d_rps * 100.0
        );
        println!("| added latency per small request | | {added_us:.0} µs | |");
        println!(
            "| proxy CPU per GiB tunneled (user+system, proxy threads only) | | {:.0} ms | |",
            cpu.as_secs_f64() * 1000.0 / (BULK_BYTES as f64 * RUNS as f64 / (1u64 << 30) as f64)
        );
        let gib = BULK_BYTES as f64 * RUNS as f64 / (1u64 << 30) as f64;
        let (cd, cv) = (total_direct.as_secs_f64() * 1000.0 / gib, total_via.as_secs_f64() * 1000.0 / gib);
        println!(
            "| CPU per GiB, all parties (source, client, proxy) | {cd:.0} ms | {cv:.0} ms | {:.0}% (CPU-bound throughput ratio) |",
            cd / cv * 100.0
        );
        println!("| tunnel relay capacity of one proxy core (bytes / proxy CPU time) | | {relay_capacity:.0} MiB/s | {:.0}% of direct |", relay_capacity / d_tp * 100.0);
    });
    proxy_rt.block_on(handle.shutdown());
}
