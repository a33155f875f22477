//! forge's egress proxy side by side with direct loopback transfers and, when it is installed, squid,
//! in one harness.
//!
//! Run: `cargo bench -p forge-egress --bench proxy` (release profile). Prints markdown tables for
//! docs/benchmarks.md. Everything runs on loopback.
//!
//! - The proxy runs in a child process (this binary run again with `FORGE_PROXY_BENCH_CHILD=1`, on a
//!   tokio runtime with one worker), so that its CPU time and memory are read from `/proc/PID` exactly
//!   as squid's are. squid (`squid -N`, one process, no cache, no logs) is started on a temporary
//!   config when `squid` is on PATH or in /usr/sbin; otherwise its column says so.
//! - Small requests: sequential GETs on one keep-alive client connection to a hyper server with a
//!   16-byte body; per-request latency percentiles, requests per second, proxy CPU per request.
//!   Direct, forge and squid runs are interleaved so that load changes hit all three alike.
//! - CONNECT: a 100 MiB body through a tunnel vs the same transfer direct.
//! - Idle tunnels: `FORGE_PROXY_BENCH_TUNNELS` (default 1000) tunnels held open to an echo server;
//!   the proxy's RSS growth per tunnel right after the CONNECT, and after one echo through each
//!   tunnel followed by 1.5 s of idleness, plus the pipes the proxy holds open per idle tunnel.
//!
//! `FORGE_PROXY_BENCH_QUICK=1` runs fewer rounds (a smoke run, not for the record).

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
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
use forge_egress::proxy::{EgressProxy, ProxyLimits, ProxyOptions};
use forge_testkit::squid::proc_cpu;

const ENV_CHILD: &str = "FORGE_PROXY_BENCH_CHILD";
const ENV_ALLOW: &str = "FORGE_PROXY_BENCH_ALLOW";
const BULK_BYTES: u64 = 100 * 1024 * 1024;
const BODY: &[u8] = b"ok, a small body";

struct Plan {
    runs: usize,
    requests: usize,
    tunnels: usize,
}

fn plan() -> Plan {
    let quick = std::env::var("FORGE_PROXY_BENCH_QUICK").is_ok_and(|v| v == "1");
    let tunnels = std::env::var("FORGE_PROXY_BENCH_TUNNELS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 200 } else { 1000 });
    Plan {
        runs: if quick { 2 } else { 7 },
        requests: if quick { 500 } else { 3000 },
        tunnels,
    }
}

// ---------------------------------------------------------------- the proxy child process

/// The child: serve the proxy on the allowlist from the environment, print the address, run until
/// stdin closes.
fn child_main() {
    let entries: Vec<String> = std::env::var(ENV_ALLOW)
        .unwrap_or_default()
        .split(',')
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("egress-proxy")
        .enable_all()
        .build()
        .expect("bench child runtime");
    let (addr, handle) = rt.block_on(async {
        let policy = EgressPolicy::allowlist(entries.iter().map(String::as_str)).expect("policy");
        let options = ProxyOptions {
            limits: ProxyLimits {
                max_tunnels: 16_384,
                max_connections: 16_384,
                ..ProxyLimits::default()
            },
            ..ProxyOptions::default()
        };
        EgressProxy::serve(Arc::new(policy), options)
            .await
            .expect("proxy")
    });
    println!("{addr}");
    std::io::stdout().flush().ok();
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    rt.block_on(handle.shutdown());
}

/// A proxy process under measurement.
struct ProxyProc {
    name: &'static str,
    addr: SocketAddr,
    child: std::process::Child,
    _dir: Option<tempfile::TempDir>,
}

impl ProxyProc {
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        // Our own child, by its id.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// squid (testkit's reference proxy) as a measured proxy process.
fn spawn_squid() -> Option<ProxyProc> {
    let sq = forge_testkit::squid::start()?;
    Some(ProxyProc {
        name: "squid",
        addr: sq.addr,
        child: sq.child,
        _dir: Some(sq.dir),
    })
}

fn spawn_forge(entries: &[String]) -> ProxyProc {
    let exe = std::env::current_exe().expect("bench binary path");
    let mut child = Command::new(exe)
        .env(ENV_CHILD, "1")
        .env(ENV_ALLOW, entries.join(","))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the proxy child");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("proxy child address");
    let addr = line
        .trim()
        .parse()
        .expect("proxy child printed its address");
    ProxyProc {
        name: "forge",
        addr,
        child,
        _dir: None,
    }
}

/// Resident set size of a process in KiB, from /proc/PID/status.
fn proc_rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Pipes a process holds open.
fn proc_pipes(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("pipe:"))
        })
        .count()
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------- endpoints

/// Sends BULK_BYTES to every connection after reading one byte.
async fn source() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
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

/// Echoes what it reads (the idle-tunnel target).
async fn echo() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

async fn http_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            s.set_nodelay(true).ok();
            tokio::spawn(async move {
                let svc = service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(BODY))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

// ---------------------------------------------------------------- measurements

/// Read to EOF; returns (bytes, reads that returned data).
async fn drain(mut s: TcpStream) -> (u64, u64) {
    let mut buf = vec![0u8; 256 * 1024];
    let (mut total, mut reads) = (0u64, 0u64);
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return (total, reads),
            Ok(n) => {
                total += n as u64;
                reads += 1;
            }
        }
    }
}

/// CONNECT through `proxy`; returns the stream after a 200 head.
async fn connect(proxy: SocketAddr, target: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).ok();
    s.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    // Bounded: a CONNECT answer head is far below 16 KiB.
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16384 {
        s.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 200") || head.starts_with(b"HTTP/1.0 200"),
        "{}",
        String::from_utf8_lossy(&head)
    );
    s
}

async fn bulk(via: Option<SocketAddr>, src: SocketAddr) -> (Duration, u64) {
    let t = Instant::now();
    let mut s = match via {
        Some(p) => connect(p, src).await,
        None => {
            let s = TcpStream::connect(src).await.unwrap();
            s.set_nodelay(true).ok();
            s
        }
    };
    s.write_all(b"g").await.unwrap();
    let (bytes, reads) = drain(s).await;
    assert_eq!(bytes, BULK_BYTES);
    (t.elapsed(), reads)
}

/// Sequential requests on one keep-alive connection to `conn_to`, with `uri` as request target.
/// Returns the elapsed time and each request's latency.
async fn requests(conn_to: SocketAddr, uri: &str, n: usize) -> (Duration, Vec<Duration>) {
    let s = TcpStream::connect(conn_to).await.unwrap();
    s.set_nodelay(true).ok();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut lat = Vec::with_capacity(n);
    let t = Instant::now();
    for _ in 0..n {
        let t0 = Instant::now();
        let req = Request::builder()
            .uri(uri)
            .header("host", "bench")
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.ready().await.unwrap();
        let resp = sender.send_request(req).await.unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], BODY);
        lat.push(t0.elapsed());
    }
    (t.elapsed(), lat)
}

fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[derive(Default)]
struct HttpResult {
    rps: Vec<f64>,
    lat: Vec<Duration>,
    cpu: Duration,
}

fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit on a zeroed struct we own; no other preconditions.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn main() {
    if std::env::var(ENV_CHILD).is_ok_and(|v| v == "1") {
        child_main();
        return;
    }
    // `cargo bench` passes `--bench`; nothing else is understood.
    let plan = plan();
    raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (src, web, echo_addr) =
        rt.block_on(async { (source().await, http_server().await, echo().await) });
    let entries: Vec<String> = [src, web, echo_addr]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let load_before = loadavg();
    let forge = spawn_forge(&entries);
    let squid = spawn_squid();
    if squid.is_none() {
        eprintln!("squid not found (apt-get install -y squid): its column is left out");
    }
    let proxies: Vec<&ProxyProc> = std::iter::once(&forge).chain(squid.as_ref()).collect();

    rt.block_on(async {
        // ---- small requests, interleaved
        let direct_uri = "/".to_string();
        let proxied_uri = format!("http://{web}/");
        requests(web, &direct_uri, plan.requests / 5).await;
        for p in &proxies {
            requests(p.addr, &proxied_uri, plan.requests / 5).await;
        }
        let mut direct = HttpResult::default();
        let mut via: Vec<HttpResult> = proxies.iter().map(|_| HttpResult::default()).collect();
        for _ in 0..plan.runs {
            let (t, lat) = requests(web, &direct_uri, plan.requests).await;
            direct.rps.push(plan.requests as f64 / t.as_secs_f64());
            direct.lat.extend(lat);
            for (p, r) in proxies.iter().zip(via.iter_mut()) {
                let c0 = proc_cpu(p.pid());
                let (t, lat) = requests(p.addr, &proxied_uri, plan.requests).await;
                r.cpu += proc_cpu(p.pid()).saturating_sub(c0);
                r.rps.push(plan.requests as f64 / t.as_secs_f64());
                r.lat.extend(lat);
            }
        }
        direct.lat.sort();
        let d_rps = median(direct.rps.clone());
        let (d50, d99) = (percentile(&direct.lat, 0.5), percentile(&direct.lat, 0.99));
        println!("Small GETs: {} runs x {} sequential requests on one keep-alive connection; load average before: {load_before}", plan.runs, plan.requests);
        println!();
        let best = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
        let d_best = best(&direct.rps);
        println!("| | req/s (median run) | vs direct | req/s (best run) | p50 latency | p99 latency | added p50 | added p99 | proxy CPU per request |");
        println!("|---|---|---|---|---|---|---|---|---|");
        println!("| direct | {d_rps:.0} | 100% | {d_best:.0} | {:.0} µs | {:.0} µs | | | |", us(d50), us(d99));
        let mut forge_rps = (0.0, 0.0);
        for (p, r) in proxies.iter().zip(via.iter_mut()) {
            r.lat.sort();
            let rps = median(r.rps.clone());
            if p.name == "forge" {
                forge_rps = (rps, best(&r.rps));
            }
            let (p50, p99) = (percentile(&r.lat, 0.5), percentile(&r.lat, 0.99));
            println!(
                "| {} | {rps:.0} | {:.0}% | {:.0} | {:.0} µs | {:.0} µs | +{:.0} µs | +{:.0} µs | {:.1} µs |",
                p.name,
                rps / d_rps * 100.0,
                best(&r.rps),
                us(p50),
                us(p99),
                us(p50.saturating_sub(d50)),
                us(p99.saturating_sub(d99)),
                us(r.cpu) / (plan.runs * plan.requests) as f64,
            );
        }
        if let Some(sq) = proxies.iter().zip(via.iter()).find(|(p, _)| p.name == "squid") {
            println!();
            println!(
                "forge / squid request rate: {:.2}x (median runs), {:.2}x (best runs); CPU per request: {:.2}x less",
                forge_rps.0 / median(sq.1.rps.clone()),
                forge_rps.1 / best(&sq.1.rps),
                sq.1.cpu.as_secs_f64() / via[0].cpu.as_secs_f64().max(1e-12)
            );
        }

        // ---- CONNECT bulk, interleaved
        bulk(None, src).await;
        for p in &proxies {
            bulk(Some(p.addr), src).await;
        }
        let me = std::process::id();
        let mut d = Vec::new();
        let mut d_cpu = Duration::ZERO;
        let mut d_reads = 0u64;
        // Per proxy: throughputs, proxy CPU, CPU of all parties (endpoints + proxy), sink reads.
        let mut v: Vec<(Vec<f64>, Duration, Duration, u64)> = proxies
            .iter()
            .map(|_| (Vec::new(), Duration::ZERO, Duration::ZERO, 0))
            .collect();
        let mib = BULK_BYTES as f64 / (1024.0 * 1024.0);
        for _ in 0..plan.runs {
            let c0 = proc_cpu(me);
            let (t, reads) = bulk(None, src).await;
            d.push(mib / t.as_secs_f64());
            d_reads += reads;
            d_cpu += proc_cpu(me).saturating_sub(c0);
            for (p, r) in proxies.iter().zip(v.iter_mut()) {
                let (c0, e0) = (proc_cpu(p.pid()), proc_cpu(me));
                let (t, reads) = bulk(Some(p.addr), src).await;
                r.0.push(mib / t.as_secs_f64());
                let proxy_cpu = proc_cpu(p.pid()).saturating_sub(c0);
                r.1 += proxy_cpu;
                r.2 += proxy_cpu + proc_cpu(me).saturating_sub(e0);
                r.3 += reads;
            }
        }
        let d_tp = median(d);
        let gib = BULK_BYTES as f64 * plan.runs as f64 / (1u64 << 30) as f64;
        let per_gib = |c: Duration| c.as_secs_f64() * 1000.0 / gib;
        println!();
        println!("CONNECT: {mib:.0} MiB body, {} runs (median)", plan.runs);
        println!();
        let kib_per_read = |reads: u64| (BULK_BYTES * plan.runs as u64) as f64 / 1024.0 / reads.max(1) as f64;
        println!("| | MiB/s | vs direct | proxy CPU per GiB | CPU per GiB, all parties | bytes per read at the sink |");
        println!("|---|---|---|---|---|---|");
        println!("| direct | {d_tp:.0} | 100% | | {:.0} ms | {:.0} KiB |", per_gib(d_cpu), kib_per_read(d_reads));
        for (p, r) in proxies.iter().zip(v) {
            let tp = median(r.0);
            println!(
                "| {} | {tp:.0} | {:.0}% | {:.0} ms | {:.0} ms | {:.0} KiB |",
                p.name,
                tp / d_tp * 100.0,
                per_gib(r.1),
                per_gib(r.2),
                kib_per_read(r.3)
            );
        }
    });
    // ---- idle tunnels, on fresh proxy processes (memory freed by the runs above would otherwise
    // be reused and hide the growth)
    drop(squid);
    drop(forge);
    let fresh: Vec<ProxyProc> = std::iter::once(spawn_forge(&entries))
        .chain(spawn_squid())
        .collect();
    println!();
    println!(
        "Idle tunnels: {} tunnels held open to an echo server (fresh proxy processes)",
        plan.tunnels
    );
    println!();
    println!("| | RSS per tunnel, just opened | RSS per tunnel, after one echo + 1.5 s idle | open pipes per idle tunnel |");
    println!("|---|---|---|---|");
    rt.block_on(async {
        for p in &fresh {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let rss0 = proc_rss_kib(p.pid());
            let pipes0 = proc_pipes(p.pid());
            let mut open = Vec::with_capacity(plan.tunnels);
            for _ in 0..plan.tunnels {
                open.push(connect(p.addr, echo_addr).await);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let rss1 = proc_rss_kib(p.pid());
            for t in &mut open {
                t.write_all(b"ping").await.unwrap();
                let mut back = [0u8; 4];
                t.read_exact(&mut back).await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let rss2 = proc_rss_kib(p.pid());
            let pipes = proc_pipes(p.pid()).saturating_sub(pipes0);
            let n = plan.tunnels as f64;
            println!(
                "| {} | {:.1} KiB | {:.1} KiB | {:.2} |",
                p.name,
                rss1.saturating_sub(rss0) as f64 / n,
                rss2.saturating_sub(rss0) as f64 / n,
                pipes as f64 / n
            );
            drop(open);
        }
    });
    println!();
    println!("load average after: {}", loadavg());
    drop(fresh);
}
