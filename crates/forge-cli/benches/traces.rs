//! Tracing cost bench (issue 24, point 4): the same scripted task run over A2A by a real
//! `forge run`, with tracing off (no OTEL variables) and on (OTLP/HTTP to a loopback receiver, a
//! testkit `Site`). A task is 2 model turns (the scripted model, no delay) and 3 `http_request`
//! calls to loopback sites (2 allowed, 1 refused): 9 spans. Each round starts one server per
//! mode, warms it with 10 tasks, then sends `--tasks` (default 200) blocking `message/send`
//! requests one after another with a `traceparent`, and reads: client latency per task (p50,
//! p95, mean), forge's CPU per task (its threads' on-CPU time from /proc, before and after the
//! measured tasks) and, for "on", the spans the receiver got after shutdown. Rounds alternate
//! off/on (`--rounds`, default 3) so machine noise hits both.
//!
//! ```text
//! cargo bench -p forge-cli --bench traces -- --tasks 200 --rounds 3
//! ```

// A bench program reports on its own output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use forge_testkit::site::{Response, Site};
use forge_testkit::squid::proc_cpu;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Args {
    tasks: usize,
    rounds: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        tasks: 200,
        rounds: 3,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = || -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{k} needs a number"))
        };
        match k.as_str() {
            "--tasks" => a.tasks = num()?.clamp(1, 100_000),
            "--rounds" => a.rounds = num()?.clamp(1, 100),
            // cargo bench passes --bench.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

struct Server(std::process::Child);

impl Server {
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.0.id().to_string())
            .status();
        for _ in 0..300 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn write_agent(dir: &Path, a: &Site, b: &Site, refused: &Site) -> std::path::PathBuf {
    let script = format!(
        "turns:\n  - tool_calls:\n      - {{name: http_request, arguments: {{url: \"{}\"}}}}\n      - {{name: http_request, arguments: {{url: \"{}\"}}}}\n      - {{name: http_request, arguments: {{url: \"{}\"}}}}\n  - text: \"checked\"\n",
        a.url("/"),
        b.url("/"),
        refused.url("/")
    );
    std::fs::write(dir.join("s.yaml"), script).expect("write script");
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id: bench-agent\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\negress:\n  mode: allowlist\n  allowed_domains:\n    - \"{}\"\n    - \"{}\"\n",
            a.entry(),
            b.entry()
        ),
    )
    .expect("write forge.yaml");
    cfg
}

async fn start(cfg: &Path, otlp: Option<&str>) -> (Server, String) {
    let mut cmd = forge_testkit::forge!();
    for k in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SDK_DISABLED",
    ] {
        cmd.env_remove(k);
    }
    if let Some(e) = otlp {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", e);
    }
    cmd.arg("run")
        .arg("--config")
        .arg(cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(cfg.with_file_name("audit.ndjson"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server = Server(cmd.spawn().expect("spawn forge run"));
    let stdout = server.0.stdout.take().expect("stdout");
    let first = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        let _ = BufReader::new(stdout).read_line(&mut l);
        l
    })
    .await
    .expect("join");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("forge run printed no URL: {first:?}"))
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    (server, url)
}

/// One blocking task; its latency. Panics unless it completed.
async fn task(addr: &str, n: usize) -> Duration {
    let payload = serde_json::json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message": {"kind": "message", "role": "user", "messageId": format!("m{n}"), "parts": [{"kind": "text", "text": "check"}]}, "configuration": {"blocking": true}}}).to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    let t0 = Instant::now();
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    s.write_all(req.as_bytes()).await.expect("send");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf))
        .await
        .expect("answer within 60 s")
        .expect("read");
    let took = t0.elapsed();
    let text = String::from_utf8_lossy(&buf);
    assert!(
        text.contains("\"completed\""),
        "task {n} did not complete: {text}"
    );
    took
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("traces bench: {e}");
            std::process::exit(2);
        }
    };
    let a = Site::builder()
        .max_connections(1_000_000)
        .start(|_| Response::text("a"));
    let b = Site::builder()
        .max_connections(1_000_000)
        .start(|_| Response::text("b"));
    let refused = Site::start(|_| Response::text("never"));
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = write_agent(dir.path(), &a, &b, &refused);
    println!(
        "{} tasks per run, 9 spans per task (2 model, 3 tool, 3 egress, 1 task)",
        args.tasks
    );
    println!("round | tracing | p50 µs | p95 µs | mean µs | forge CPU µs/task | spans received");
    // Per mode: its name, then p50, mean and CPU per task of each round (µs).
    type Rounds = (&'static str, Vec<f64>, Vec<f64>, Vec<f64>);
    let mut summary: Vec<Rounds> = vec![
        ("off", vec![], vec![], vec![]),
        ("on", vec![], vec![], vec![]),
    ];
    for round in 1..=args.rounds {
        for (mode, row) in summary.iter_mut().enumerate() {
            let rx = Site::builder()
                .max_connections(1_000_000)
                .start(|_| Response::bytes(200, "application/x-protobuf", Vec::<u8>::new()));
            let endpoint = format!("http://{}", rx.addr);
            let (mut server, addr) = start(&cfg, (mode == 1).then_some(endpoint.as_str())).await;
            for n in 0..10 {
                task(&addr, n).await;
            }
            let pid = server.0.id();
            let cpu0 = proc_cpu(pid);
            let mut lat = Vec::with_capacity(args.tasks);
            for n in 0..args.tasks {
                lat.push(task(&addr, 100 + n).await);
            }
            let cpu = proc_cpu(pid).saturating_sub(cpu0);
            server.stop();
            let exports = rx.requests();
            let spans: usize = exports
                .iter()
                .filter_map(|r| ExportTraceServiceRequest::decode(r.body.as_slice()).ok())
                .flat_map(|e| e.resource_spans)
                .flat_map(|r| r.scope_spans)
                .map(|s| s.spans.len())
                .sum();
            lat.sort();
            let mean = lat.iter().sum::<Duration>() / lat.len() as u32;
            let cpu_per = cpu / args.tasks as u32;
            println!(
                "{round} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {}",
                row.0,
                us(pct(&lat, 0.5)),
                us(pct(&lat, 0.95)),
                us(mean),
                us(cpu_per),
                if mode == 1 {
                    format!("{spans} in {} requests", exports.len())
                } else {
                    "-".into()
                }
            );
            row.1.push(us(pct(&lat, 0.5)));
            row.2.push(us(mean));
            row.3.push(us(cpu_per));
        }
    }
    let med = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(|x, y| x.total_cmp(y));
        s[s.len() / 2]
    };
    for (name, p50, mean, cpu) in &summary {
        println!(
            "median over rounds, tracing {name}: p50 {:.0} µs, mean {:.0} µs, CPU {:.0} µs/task",
            med(p50),
            med(mean),
            med(cpu)
        );
    }
}
