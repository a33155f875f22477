//! The shipped egress proxy measured as users run it: `forge egress serve` started as a process (the
//! real `forge` binary cargo built for this bench), and the proxy inside a running agent (`forge run`
//! serving A2A, with a `cli_execute` tool so that it starts its proxy; the address comes from its
//! `forge: egress proxy on http://...` line), side by side with direct requests and, when `squid` is
//! on PATH or in /usr/sbin, squid (one process, no cache, no access log). Never a test dependency.
//!
//! Run: `cargo bench -p forge-cli --bench proxy_shipped` (release profile). Prints a markdown table
//! for docs/benchmarks.md. Everything runs on loopback.
//!
//! - The upstream is a hyper server in this process answering every request with a 1 KiB body, on
//!   a thread and single-threaded runtime of its own (like a server process: a request to it wakes
//!   it, as a real server is woken). "direct" is the load sent to it without a proxy. The row
//!   "direct, one runtime" sends it to a second upstream on the load's own runtime, where client and
//!   server hand over without ever sleeping (the baseline of the earlier runs in docs/benchmarks.md).
//! - "wake round trip": the p50 of a one-byte ping-pong between this process and a child process
//!   over loopback TCP with blocking I/O (each round trip wakes two sleeping threads). A proxy at
//!   one connection adds two such wakes per request (its own, on the request and on the answer),
//!   so this is the machine's floor for "added p50" of any proxy process.
//! - The plain rows run forge as shipped (its default spin while a request waits for its upstream;
//!   forge-egress thread.rs). `FORGE_PROXY_BENCH_SPIN_US=N` (default 0: the spin off; `none`
//!   leaves them out) adds `forge egress serve` and `forge run` with `FORGE_PROXY_SPIN_US=N`.
//! - Load: in-process hyper clients on keep-alive connections through the proxy: 1 connection
//!   (sequential requests) and 50 connections (each sequential, all at once). Reported: requests per
//!   second, p50/p99 latency, direct p50 (no proxy), and the proxy's CPU per request (the sum over
//!   its threads of `/proc/PID/task/TID/schedstat` on-CPU time, before and after; nanosecond
//!   resolution, where `/proc/PID/stat` utime+stime only counts 10 ms ticks).
//! - Rounds interleave direct, serve, run and squid so that load changes on the shared machine hit
//!   all alike; each figure is the median over rounds.
//! - `forge egress serve` writes its per-request log line to a file (as a service manager's log
//!   capture would); `forge run` writes its audit log (one hash-chained event per request) to a file.
//!
//! `FORGE_PROXY_BENCH_QUICK=1` runs fewer rounds and requests (a smoke run, not for the record).

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use forge_testkit::squid::proc_cpu;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

/// The upstream's response body: 1 KiB.
const BODY: [u8; 1024] = [b'x'; 1024];
/// Keep-alive connections of the concurrent load.
const CONNS: usize = 50;

struct Plan {
    rounds: usize,
    /// Requests of the one-connection run.
    seq: usize,
    /// Requests of the 50-connection run (over all connections).
    par: usize,
}

fn plan() -> Plan {
    if std::env::var("FORGE_PROXY_BENCH_QUICK").is_ok_and(|v| v == "1") {
        Plan {
            rounds: 2,
            seq: 500,
            par: 5_000,
        }
    } else {
        Plan {
            rounds: 5,
            seq: 3_000,
            par: 30_000,
        }
    }
}

// ---------------------------------------------------------------- processes under measurement

/// squid (testkit's reference proxy) as a measured proxy process.
fn spawn_squid() -> Option<ProxyProc> {
    let sq = forge_testkit::squid::start()?;
    Some(ProxyProc {
        name: "squid",
        addr: sq.addr,
        child: sq.child,
        _dir: sq.dir,
    })
}

/// A proxy process under measurement; killed (by its own id) when dropped.
struct ProxyProc {
    name: &'static str,
    addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for ProxyProc {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Read stdout lines (at most 20, each bounded by the process writing it) until one carries
/// `marker` followed by `http://ADDR`.
fn address_line(child: &mut Child, marker: &str) -> SocketAddr {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut reader = BufReader::new(stdout);
    for _ in 0..20 {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        if let Some(rest) = line.split(marker).nth(1) {
            let url = rest
                .trim()
                .trim_start_matches("http://")
                .trim_end_matches('/');
            let addr = url.parse().expect("an address after the marker");
            // Keep reading (and discarding) stdout so the process never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while reader.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return addr;
        }
    }
    panic!("no line with {marker:?} on the process's stdout");
}

/// `FORGE_PROXY_SPIN_US` for a forge process: `spin` µs, or unset (the shipped default).
fn set_spin(cmd: &mut Command, spin: Option<u64>) {
    match spin {
        Some(us) => cmd.env("FORGE_PROXY_SPIN_US", us.to_string()),
        None => cmd.env_remove("FORGE_PROXY_SPIN_US"),
    };
}

fn forge_bin() -> &'static str {
    env!("CARGO_BIN_EXE_forge")
}

/// The `FORGE_PROXY_SPIN_US` of the extra rows (`FORGE_PROXY_BENCH_SPIN_US`: a number of µs,
/// default 0 (the spin off, against the shipped default of the plain rows); `none`: no extra rows).
fn spin_us() -> Option<u64> {
    match std::env::var("FORGE_PROXY_BENCH_SPIN_US") {
        Ok(v) if v.trim() == "none" => None,
        Ok(v) => Some(v.trim().parse().unwrap_or(0)),
        Err(_) => Some(0),
    }
}

/// `forge egress serve --allow 127.0.0.1:PORT` in an empty directory (deny-all plus the upstream).
fn spawn_serve(upstream: SocketAddr, extra: &[&str]) -> ProxyProc {
    spawn_serve_with(upstream, extra, None)
}

/// The same with `FORGE_PROXY_SPIN_US=spin` (`None`: unset, the shipped default).
fn spawn_serve_with(upstream: SocketAddr, extra: &[&str], spin: Option<u64>) -> ProxyProc {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = std::fs::File::create(dir.path().join("serve.log")).expect("log file");
    let mut cmd = Command::new(forge_bin());
    set_spin(&mut cmd, spin);
    let mut child = cmd
        .current_dir(dir.path())
        .args(["egress", "serve", "--allow", &upstream.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn forge egress serve");
    let addr = address_line(&mut child, "proxy listening on ");
    ProxyProc {
        name: if spin.is_some() {
            "forge egress serve, spin set"
        } else {
            "forge egress serve"
        },
        addr,
        child,
        _dir: dir,
    }
}

/// `forge run` serving A2A for an agent with `cli_execute` (so its proxy runs) and the upstream
/// allowed; audit log to a file.
fn spawn_run(upstream: SocketAddr, spin: Option<u64>) -> ProxyProc {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: proxy-bench\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n\
         tools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [echo]\n",
    )
    .expect("forge.yaml");
    std::fs::write(dir.path().join("s.yaml"), "turns:\n  - text: done\n").expect("s.yaml");
    let log = std::fs::File::create(dir.path().join("run.log")).expect("log file");
    let mut cmd = Command::new(forge_bin());
    set_spin(&mut cmd, spin);
    let mut child = cmd
        .current_dir(dir.path())
        .args([
            "run",
            "--port",
            "0",
            "--allow",
            &upstream.to_string(),
            "--audit-file",
            "audit.ndjson",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn forge run");
    let addr = address_line(&mut child, "forge: egress proxy on ");
    ProxyProc {
        name: if spin.is_some() {
            "forge run (agent proxy), spin set"
        } else {
            "forge run (agent proxy)"
        },
        addr,
        child,
        _dir: dir,
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------- upstream and load

/// The upstream on a thread of its own with a single-threaded runtime (it lives as long as the
/// bench process).
fn upstream_thread() -> SocketAddr {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("upstream".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("upstream runtime");
            rt.block_on(async move {
                tx.send(upstream().await)
                    .expect("send the upstream address");
                std::future::pending::<()>().await;
            });
        })
        .expect("upstream thread");
    rx.recv().expect("the upstream address")
}

/// The upstream served on the current runtime.
async fn upstream() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind upstream");
    let addr = l.local_addr().expect("upstream address");
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            s.set_nodelay(true).ok();
            tokio::spawn(async move {
                let svc = service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(&BODY))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// `n` sequential requests on one keep-alive connection to `conn_to`; each request's latency.
async fn one_conn(conn_to: SocketAddr, uri: String, n: usize) -> Vec<Duration> {
    let s = TcpStream::connect(conn_to).await.expect("connect");
    s.set_nodelay(true).ok();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t0 = Instant::now();
        let req = Request::builder()
            .uri(uri.as_str())
            .header("host", "bench")
            .body(Empty::<Bytes>::new())
            .expect("request");
        sender.ready().await.expect("connection ready");
        let resp = sender.send_request(req).await.expect("response");
        assert_eq!(resp.status(), 200, "through {conn_to}");
        let body = resp.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(body.len(), BODY.len());
        lat.push(t0.elapsed());
    }
    lat
}

/// One measurement: requests per second, sorted latencies, CPU of the proxy per request.
struct Run {
    rps: f64,
    lat: Vec<Duration>,
    cpu_per_req: Option<Duration>,
}

/// `total` requests over `conns` connections at once (each sequential) to `conn_to`.
async fn load(conn_to: SocketAddr, uri: &str, conns: usize, total: usize, pid: Option<u32>) -> Run {
    let cpu0 = pid.map(proc_cpu);
    let t = Instant::now();
    let per = total / conns;
    let tasks: Vec<_> = (0..conns)
        .map(|_| tokio::spawn(one_conn(conn_to, uri.to_string(), per)))
        .collect();
    let mut lat = Vec::with_capacity(total);
    for task in tasks {
        lat.extend(task.await.expect("load task"));
    }
    let elapsed = t.elapsed();
    let cpu_per_req = pid
        .zip(cpu0)
        .map(|(p, c0)| proc_cpu(p).saturating_sub(c0) / lat.len() as u32);
    lat.sort();
    Run {
        rps: lat.len() as f64 / elapsed.as_secs_f64(),
        lat,
        cpu_per_req,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Medians over rounds of one target at one concurrency.
#[derive(Default)]
struct Figures {
    rps: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    cpu: Vec<f64>,
}

impl Figures {
    fn add(&mut self, r: &Run) {
        self.rps.push(r.rps);
        self.p50.push(us(percentile(&r.lat, 0.5)));
        self.p99.push(us(percentile(&r.lat, 0.99)));
        if let Some(c) = r.cpu_per_req {
            self.cpu.push(us(c));
        }
    }
}

/// Set in the child process of [`wake_round_trip`]: the address to connect to and echo on.
const ECHO_ENV: &str = "FORGE_PROXY_BENCH_ECHO";
/// Round trips of the ping-pong.
const PINGS: usize = 2_000;

/// The child's side: echo each byte back, until the parent closes (at most [`PINGS`] + 100).
fn echo_child(addr: &str) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the parent");
    s.set_nodelay(true).ok();
    let mut b = [0u8; 1];
    for _ in 0..PINGS + 100 {
        if s.read_exact(&mut b).is_err() || s.write_all(&b).is_err() {
            return;
        }
    }
}

/// p50 of a one-byte round trip to a child process over loopback TCP, blocking I/O on both sides.
fn wake_round_trip() -> Duration {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind ping");
    let addr = l.local_addr().expect("ping address");
    let mut child = Command::new(std::env::current_exe().expect("this bench"))
        .env(ECHO_ENV, addr.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the echo child");
    let (mut s, _) = l.accept().expect("the echo child connects");
    s.set_nodelay(true).ok();
    let mut b = [7u8; 1];
    let mut lat = Vec::with_capacity(PINGS);
    for _ in 0..PINGS {
        let t = Instant::now();
        s.write_all(&b).expect("ping");
        s.read_exact(&mut b).expect("pong");
        lat.push(t.elapsed());
    }
    drop(s);
    let _ = child.wait();
    lat.sort();
    percentile(&lat, 0.5)
}

fn main() {
    if let Ok(addr) = std::env::var(ECHO_ENV) {
        echo_child(&addr);
        return;
    }
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing special: a quick pass
    // either way is fine, the plan comes from the environment.
    let plan = plan();
    let spin = spin_us();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("bench runtime");
    rt.block_on(async move {
        let up = upstream_thread();
        let up_local = upstream().await;
        let mut procs = vec![spawn_serve(up, &[]), spawn_run(up, None)];
        if spin.is_some() {
            procs.push(spawn_serve_with(up, &[], spin));
            procs.push(spawn_run(up, spin));
        }
        match spawn_squid() {
            Some(s) => procs.push(s),
            None => eprintln!("squid: not found on PATH or in /usr/sbin; no squid column"),
        }
        let uri = format!("http://{up}/one-kib");
        // Warm-up: a few requests through each (pooled upstream connections, lazy init).
        for p in &procs {
            load(p.addr, &uri, CONNS, CONNS * 20, None).await;
        }
        load(up, "/one-kib", CONNS, CONNS * 20, None).await;

        load(up_local, "/one-kib", CONNS, CONNS * 20, None).await;
        let wake_before = wake_round_trip();

        let names: Vec<&str> = ["direct", "direct, one runtime"]
            .into_iter()
            .chain(procs.iter().map(|p| p.name))
            .collect();
        let mut seq: Vec<Figures> = names.iter().map(|_| Figures::default()).collect();
        let mut par: Vec<Figures> = names.iter().map(|_| Figures::default()).collect();
        let load_before = loadavg();
        for _ in 0..plan.rounds {
            seq[0].add(&load(up, "/one-kib", 1, plan.seq, None).await);
            par[0].add(&load(up, "/one-kib", CONNS, plan.par, None).await);
            seq[1].add(&load(up_local, "/one-kib", 1, plan.seq, None).await);
            par[1].add(&load(up_local, "/one-kib", CONNS, plan.par, None).await);
            for (i, p) in procs.iter().enumerate() {
                let pid = Some(p.child.id());
                seq[i + 2].add(&load(p.addr, &uri, 1, plan.seq, pid).await);
                par[i + 2].add(&load(p.addr, &uri, CONNS, plan.par, pid).await);
            }
        }
        let load_after = loadavg();
        let wake_after = wake_round_trip();

        println!(
            "\n{} rounds; 1 conn: {} requests, {CONNS} conns: {} requests; 1 KiB bodies; \
             load average before {load_before}, after {load_after}; {} CPUs\n",
            plan.rounds,
            plan.seq,
            plan.par,
            std::thread::available_parallelism().map_or(0, |n| n.get())
        );
        println!(
            "wake round trip (one byte to a child process and back, loopback TCP, blocking I/O): \
             p50 {:.0} µs before the rounds, {:.0} µs after\n",
            us(wake_before),
            us(wake_after)
        );
        if let Some(spin) = spin {
            println!(
                "plain rows: the shipped spin default; \"spin set\" rows: FORGE_PROXY_SPIN_US={spin}\n"
            );
        }
        println!("| path | conns | req/s | p50 µs | p99 µs | added p50 µs | proxy CPU/req µs |");
        println!("|---|---|---|---|---|---|---|");
        for (figs, conns) in [(&seq, 1), (&par, CONNS)] {
            let direct_p50 = median(figs[0].p50.clone());
            for (name, f) in names.iter().zip(figs.iter()) {
                let p50 = median(f.p50.clone());
                let cpu = if f.cpu.is_empty() {
                    "-".to_string()
                } else {
                    format!("{:.1}", median(f.cpu.clone()))
                };
                println!(
                    "| {name} | {conns} | {:.0} | {p50:.0} | {:.0} | {} | {cpu} |",
                    median(f.rps.clone()),
                    median(f.p99.clone()),
                    if name.starts_with("direct") {
                        "-".to_string()
                    } else {
                        format!("{:+.0}", p50 - direct_p50)
                    },
                );
            }
        }
        drop(procs);
    });
}
