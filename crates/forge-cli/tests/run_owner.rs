//! One owner per SQLite store (issue 20, point 4), with real `forge run` processes on one agent
//! directory: while the first serves a long task, a second `forge run` refuses to start, naming
//! the first (pid, address) and the fix, and the first task completes (it is not failed
//! "interrupted by restart"). After the first is killed with SIGKILL, a new `forge run` starts at
//! once (the owner's process is gone) and marks the task it left running failed "interrupted by
//! restart". On PostgreSQL the second `forge run` is a replica instead, and the first task still
//! completes. Traffic goes to 127.0.0.1 only; every wait is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

fn spawn(dir: &std::path::Path) -> Server {
    spawn_on(dir, None)
}

/// `forge run` in `dir` on the store at `state_url` (default: the agent's SQLite file).
fn spawn_on(dir: &std::path::Path, state_url: Option<&str>) -> Server {
    let mut c = forge_testkit::forge!();
    c.current_dir(dir)
        .args(["run", "--port", "0"])
        .env_remove("FORGE_STATE_URL");
    if let Some(u) = state_url {
        c.env("FORGE_STATE_URL", u);
    }
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Server(child)
}

fn write_slow_agent(dir: &std::path::Path) {
    std::fs::write(
        dir.join("forge.yaml"),
        "agent_id: owner\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    // Every task answers after 4 s: long enough to start a second forge meanwhile.
    std::fs::write(
        dir.join("s.yaml"),
        "turns:\n  - delay_ms: 4000\n    text: done slowly\n",
    )
    .unwrap();
}

/// The port `forge run` prints on its first line (`... http://127.0.0.1:PORT/`).
fn port_of(server: &mut Server) -> u16 {
    let mut reader = BufReader::new(server.0.stdout.take().unwrap());
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("a URL on the first line: {first:?}"));
    // Keep reading stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = reader.read_to_string(&mut sink);
    });
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn rpc(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(
        format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (_, payload) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    serde_json::from_str(payload).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Send `text` without waiting for the task; its id.
fn start_task(port: u16, text: &str) -> String {
    let r = rpc(
        port,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": {"role": "user", "messageId": forge_state::new_id(), "parts": [{"kind": "text", "text": text}]},
            "configuration": {"blocking": false}}}),
    );
    r["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {r}"))
        .to_string()
}

fn task(port: u16, id: &str) -> Value {
    rpc(
        port,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": id}}),
    )["result"]
        .clone()
}

/// The task once it is final (polled for at most `limit`).
fn wait_final(port: u16, id: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let t = task(port, id);
        let state = t["status"]["state"].as_str().unwrap_or("").to_string();
        if ["completed", "failed", "canceled", "rejected"].contains(&state.as_str()) {
            return t;
        }
        assert!(Instant::now() < deadline, "task {id} still {state}: {t}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait (bounded) for a process to exit; its status and stderr.
fn exit_of(server: &mut Server, limit: Duration) -> (std::process::ExitStatus, String) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = server.0.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "still running after {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    server
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status, err)
}

#[test]
fn a_second_forge_run_on_one_store_refuses_and_the_first_task_completes() {
    let dir = tempfile::tempdir().unwrap();
    write_slow_agent(dir.path());
    let mut first = spawn(dir.path());
    let port = port_of(&mut first);
    let long = start_task(port, "take your time");
    assert_eq!(task(port, &long)["status"]["state"], "working");

    let mut second = spawn(dir.path());
    let (status, err) = exit_of(&mut second, Duration::from_secs(20));
    assert_eq!(status.code(), Some(1), "the second refuses to start: {err}");
    let pid = first.0.id().to_string();
    assert!(
        err.contains(&format!("pid {pid} ")),
        "names the owner's pid: {err}"
    );
    assert!(
        err.contains(&format!("127.0.0.1:{port}")),
        "names the owner's address: {err}"
    );
    assert!(
        err.contains("stop that process") && err.contains("state.url"),
        "says the fix: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let done = wait_final(port, &long, Duration::from_secs(30));
    assert_eq!(done["status"]["state"], "completed", "{done}");
    assert_eq!(
        done["status"]["message"]["parts"][0]["text"], "done slowly",
        "{done}"
    );

    // The owner dies with a task running (SIGKILL: no lease handed back). A new forge on this
    // host sees the owner's process is gone, starts at once and fails the task it left.
    let cut = start_task(port, "this one is cut");
    assert_eq!(task(port, &cut)["status"]["state"], "working");
    first.0.kill().unwrap();
    first.0.wait().unwrap();
    let started = Instant::now();
    let mut third = spawn(dir.path());
    let port3 = port_of(&mut third);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "no wait for the lease to expire: {:?}",
        started.elapsed()
    );
    let t = task(port3, &cut);
    assert_eq!(t["status"]["state"], "failed", "{t}");
    assert_eq!(
        t["status"]["message"]["parts"][0]["text"], "interrupted by restart",
        "{t}"
    );
    let kept = task(port3, &long);
    assert_eq!(kept["status"]["state"], "completed", "{kept}");
}

/// PostgreSQL is shared: a second `forge run` on the same database starts as another replica,
/// and the first one's running task still completes (the second's start fails only tasks whose
/// owner's lease has expired). Real PostgreSQL (forge-testkit's starter).
#[test]
fn a_second_forge_run_on_postgres_is_a_replica_and_the_first_task_completes() {
    let pg = forge_testkit::pg::PgServer::start();
    let dir = tempfile::tempdir().unwrap();
    write_slow_agent(dir.path());
    let mut first = spawn_on(dir.path(), Some(&pg.url));
    let port = port_of(&mut first);
    let long = start_task(port, "take your time");
    assert_eq!(task(port, &long)["status"]["state"], "working");
    let mut second = spawn_on(dir.path(), Some(&pg.url));
    let port2 = port_of(&mut second);
    assert_ne!(port, port2);
    // The second replica sees the task as the first runs it, and then as it ended.
    assert_eq!(task(port2, &long)["status"]["state"], "working");
    let done = wait_final(port, &long, Duration::from_secs(30));
    assert_eq!(done["status"]["state"], "completed", "{done}");
    let seen = wait_final(port2, &long, Duration::from_secs(10));
    assert_eq!(seen["status"]["state"], "completed", "{seen}");
}
