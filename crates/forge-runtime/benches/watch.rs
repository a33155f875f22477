//! What the watch page costs a task (issue 24: "the cost of the watch page ... on a task (CPU,
//! latency) with nobody watching and with one watcher"). Run: `cargo bench -p forge-runtime
//! --bench watch`.
//!
//! An A2A server on loopback (real sockets) over the scripted model: each task is one model
//! turn with a `file_create` call, then the answer (two model turns, one tool call, ~10 audit
//! events and the page's record of them). Tasks are sent one after another with blocking
//! `message/send`. Three cases, each after a warm-up: the page's record only (nobody watching),
//! one watcher doing what the page does (an open event stream; on each `task` event it fetches
//! the task list and the task's detail, which verifies the audit file), and the audit log off
//! the file (to tell the verification apart), and one watcher with an audit file that already
//! holds 100,000 events (a server that has run a while). Printed: per-task latency (median, p90) and the
//! process's CPU time per task (user + system, getrusage; it includes the watcher's own reads);
//! after each case with an audit file, the median time of one view of a task's detail (its
//! audit check included) with nothing else running.

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forge_llm::scripted::Scripted;
use forge_runtime::{agent_card, serve_a2a, AgentLoop, AuditLog, CardInfo, LoopConfig, TaskStore};
use forge_tools::Registry;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TASKS: usize = 300;
const WARMUP: usize = 30;

fn cpu() -> Duration {
    // SAFETY: getrusage writes into the struct it is given; RUSAGE_SELF is always valid.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Events already in the audit file before the server starts, in the long-log cases (a server
/// that has run for a while: the watch page checks the whole file on each task view).
const EARLIER_EVENTS: usize = 100_000;

async fn serve(dir: &std::path::Path, file_audit: bool, earlier: usize) -> SocketAddr {
    let script = dir.join("s.yaml");
    let mut turns = String::from("turns:\n");
    for _ in 0..(TASKS + WARMUP) {
        turns.push_str("  - tool_calls:\n      - {name: file_create, arguments: {filename: note.txt, content: \"hello\"}}\n  - text: done\n");
    }
    std::fs::write(&script, turns).expect("script");
    let mut reg = Registry::new();
    reg.register(Arc::new(forge_tools::builtins::file_create::FileCreate));
    let audit = if file_audit {
        if earlier > 0 {
            let before = AuditLog::open_file(&dir.join("audit.ndjson")).expect("audit file");
            for i in 0..earlier {
                before.emit(None, "tool_exec", json!({"tool": "file_create", "i": i}));
            }
        }
        AuditLog::open_file(&dir.join("audit.ndjson")).expect("audit file")
    } else {
        AuditLog::to_writer(Box::new(std::io::sink()))
    };
    let agent = Arc::new(AgentLoop {
        provider: Arc::new(Scripted::load(&script).expect("script")),
        tools: Arc::new(reg),
        system_prompt: "bench".into(),
        audit,
        config: LoopConfig::default(),
        files_dir: dir.join("files"),
        egress: None,
        sessions: None,
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let info = CardInfo {
        name: "b".into(),
        description: "b".into(),
        version: "0.1.0".into(),
        skills: vec![],
    };
    let card = agent_card(&info, &format!("http://{addr}/"), false);
    // Kept running until the process ends (a bench binary).
    std::mem::forget(serve_a2a(listener, TaskStore::new(agent), card, None).expect("serve"));
    addr
}

async fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("answer")
        .expect("read");
    String::from_utf8_lossy(&buf).into_owned()
}

/// Send task `n`; its id.
async fn task(addr: SocketAddr, n: usize) -> String {
    let msg = json!({"kind": "message", "role": "user", "messageId": format!("m{n}"), "parts": [{"kind": "text", "text": "write"}]});
    let body =
        json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message": msg}})
            .to_string();
    let out = http(addr, "POST", "/", &body).await;
    assert!(out.contains("\"completed\""), "{out}");
    let json = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: Value = serde_json::from_str(json).unwrap_or(Value::Null);
    v["result"]["id"].as_str().unwrap_or_default().to_string()
}

/// A watcher doing what the page does; returns the number of detail fetches made.
fn watch(addr: SocketAddr, stop: Arc<AtomicBool>, fetches: Arc<AtomicU64>) {
    tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        let req = format!("GET /ui/api/events HTTP/1.1\r\nhost: {addr}\r\n\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut buf = vec![0u8; 65536];
        let mut pending = String::new();
        while !stop.load(Ordering::SeqCst) {
            let n = match tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => n,
                Ok(_) => return,
                Err(_) => continue,
            };
            pending.push_str(&String::from_utf8_lossy(&buf[..n]));
            while let Some(i) = pending.find("\n\n") {
                let ev: String = pending.drain(..i + 2).collect();
                // The body is chunked: a chunk-size line may precede the event.
                if let Some((_, data)) = ev.split_once("event: task\ndata: ") {
                    let v: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
                    if let Some(id) = v["id"].as_str() {
                        let _ = http(addr, "GET", "/ui/api/tasks", "").await;
                        let _ = http(addr, "GET", &format!("/ui/api/tasks/{id}"), "").await;
                        fetches.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }
    });
}

async fn case(name: &str, file_audit: bool, watcher: bool, earlier: usize) {
    let dir = tempfile::tempdir().expect("tmp");
    let addr = serve(dir.path(), file_audit, earlier).await;
    for i in 0..WARMUP {
        task(addr, i).await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let fetches = Arc::new(AtomicU64::new(0));
    if watcher {
        watch(addr, stop.clone(), fetches.clone());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let cpu0 = cpu();
    let t0 = Instant::now();
    let mut lat = Vec::with_capacity(TASKS);
    let mut last = String::new();
    for i in 0..TASKS {
        let t = Instant::now();
        last = task(addr, WARMUP + i).await;
        lat.push(t.elapsed());
    }
    let wall = t0.elapsed();
    let cpu_used = cpu() - cpu0;
    stop.store(true, Ordering::SeqCst);
    lat.sort();
    println!(
        "{name:<44} latency median {:>8.2?} p90 {:>8.2?}  CPU/task {:>8.2?}  wall {:>7.2?}  detail fetches {}",
        lat[TASKS / 2],
        lat[TASKS * 9 / 10],
        cpu_used / TASKS as u32,
        wall,
        fetches.load(Ordering::SeqCst)
    );
    // One view of the last task's detail (its audit check included), with nothing else running.
    if file_audit && !last.is_empty() {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut views = Vec::with_capacity(DETAIL_VIEWS);
        let mut lines = 0;
        for _ in 0..DETAIL_VIEWS {
            let t = Instant::now();
            let out = http(addr, "GET", &format!("/ui/api/tasks/{last}"), "").await;
            views.push(t.elapsed());
            let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b);
            let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            assert_eq!(v["audit"]["verified"], true, "{out}");
            lines = v["audit"]["lines"].as_u64().unwrap_or(0);
        }
        views.sort();
        println!(
            "{:<44} one detail view (audit check of {lines} lines): median {:>8.2?}",
            "",
            views[DETAIL_VIEWS / 2]
        );
    }
}

/// Detail views timed after each case with an audit file.
const DETAIL_VIEWS: usize = 21;

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        for round in 0..2 {
            println!("round {round}");
            case("audit file, nobody watching", true, false, 0).await;
            case("audit file, one watcher", true, true, 0).await;
            case("audit to a sink, one watcher", false, true, 0).await;
            case(
                "audit file of 100,000 earlier events, one watcher",
                true,
                true,
                EARLIER_EVENTS,
            )
            .await;
        }
    });
}
