//! `forge run` driving the real browser (Debian's Chromium) through the real egress proxy against
//! loopback pages: the bundled example with the scripted model (--demo-site), the same kind of
//! agent with a fake OpenAI server and a fake Anthropic server playing the model (two-step tool
//! calling), and an A2A task cancelled while its browser call is in flight (its browser session is
//! closed). Skips when no Chromium is installed; fails instead when FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use forge_testkit::llm as fake_llm;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use fake_llm::{Reply, Responder};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use fixture_agents::copy_dir;
use forge_testkit::agents as fixture_agents;
use forge_testkit::site::{Response, Site};

fn browser_available() -> bool {
    forge_testkit::require_browser("forge run with a browser agent").is_some()
}

fn forge() -> Command {
    forge_testkit::forge!()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run forge"))
        .await
        .unwrap()
}

fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A loopback site: `/` shows `token` in its title and body; `/slow` never answers (closes after
/// 60 s); `/c` says which cookie it got and sets one. Bounded: at most 200 connections.
fn serve_site(token: String) -> std::net::SocketAddr {
    Site::builder()
        .max_connections(200)
        .start(move |r| {
            let path = r.path.as_str();
            if path.starts_with("/slow") {
                return Response::raw(Vec::new()).delayed(Duration::from_secs(60));
            }
            if path == "/c" {
                // Says which cookie the browser sent, and sets one: two visits from one
                // browser context show the first visit's cookie on the second.
                let cookie = r
                    .head
                    .lines()
                    .find_map(|l| {
                        l.strip_prefix("cookie: ")
                            .or_else(|| l.strip_prefix("Cookie: "))
                    })
                    .unwrap_or("none")
                    .trim()
                    .to_string();
                return Response::bare(
                    200,
                    format!("<!doctype html><title>Cookie page</title><p>cookie before: {cookie}</p>"),
                )
                .header("content-type", "text/html")
                .header("set-cookie", "visits=1; Path=/");
            }
            if path == "/" {
                Response::bare(200, format!("<!doctype html><title>Token page {token}</title><h1>The secret word is {token}</h1><a href=\"/slow\">slow</a>"))
                    .header("content-type", "text/html")
            } else {
                Response::bare(404, "not found").header("content-type", "text/html")
            }
        })
        .addr
}

/// A browser agent whose skill allowlists `site` (and only it).
fn write_browser_agent(dir: &Path, site: std::net::SocketAddr, model_yaml: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("skills/look")).unwrap();
    std::fs::write(
        dir.join("skills/look/SKILL.md"),
        format!(
            "---\nname: look\ndescription: Look at the test page.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{site}\"]\n    trust_hints:\n      network: true\n    guardrails:\n      deny_output:\n        - pattern: \"BEGIN PRIVATE KEY\"\n          action: block\n---\nOpen the page and report the secret word.\n"
        ),
    )
    .unwrap();
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!("agent_id: look-agent\nversion: 0.1.0\n{model_yaml}egress:\n  mode: allowlist\n"),
    )
    .unwrap();
    cfg
}

fn unique_token() -> String {
    let n: u64 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    format!("w{:x}", n ^ (std::process::id() as u64) << 20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bundled_example_runs_end_to_end_with_the_scripted_model() {
    if !browser_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/browse-agent");
    copy_dir(&example, dir.path());
    let audit = dir.path().join("audit.ndjson");
    let mut c = forge();
    c.current_dir(dir.path())
        .args([
            "run",
            "--once",
            "Which shelf is Dune on?",
            "--demo-site",
            "site",
            "--audit-file",
        ])
        .arg(&audit);
    let out = run(c).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    // The shelf comes from the page's own script (computed in Chromium from the submitted form).
    assert!(stdout.contains("\"Dune\" is on shelf C-7"), "{stdout}");
    assert!(
        stdout.contains("blocked by egress policy: example.com is not in this agent's allowlist"),
        "{stdout}"
    );
    let shot = stdout
        .lines()
        .map(str::trim)
        .find(|l| l.ends_with(".png"))
        .expect("the screenshot path is printed");
    let png = std::fs::read(shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert!(Path::new(shot).starts_with(
        dir.path()
            .join(".forge/files")
            .canonicalize()
            .unwrap_or(dir.path().join(".forge/files"))
    ));

    let ev = audit_events(&audit);
    let names: Vec<&str> = ev.iter().map(|e| e["event"].as_str().unwrap()).collect();
    for want in [
        "session_start",
        "browser_session_open",
        "browser_launch",
        "browser_session_close",
        "session_end",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    assert!(ev.iter().any(|e| e["event"] == "egress_blocked"
        && e["host"] == "example.com"
        && e["via"] == "proxy"));
    assert!(ev
        .iter()
        .any(|e| e["event"] == "egress_allowed" && e["host"] == "127.0.0.1"));
    let mut v = forge();
    v.arg("audit").arg("verify").arg(&audit);
    assert!(run(v).await.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_openai_model_drives_the_browser_in_two_steps() {
    if !browser_available() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let respond: Responder = Arc::new(move |i, req| match i {
        0 => Reply::Json(
            200,
            vec![],
            fake_llm::openai_tool_calls(&[(
                "call_nav",
                "browser_navigate",
                json!({"url": format!("http://{site}/")}),
            )]),
        ),
        _ => {
            let r = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
            Reply::Json(200, vec![], fake_llm::openai_text(&format!("I saw: {r}")))
        }
    });
    let fake = fake_llm::start(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        &format!(
            "model:\n  provider: openai\n  name: gpt-fake\n  base_url: {}/v1\n",
            fake.base()
        ),
    );
    let mut c = forge();
    c.env("OPENAI_API_KEY", "sk-test-browser-0000")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "What is the secret word?"]);
    let out = run(c).await;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("The secret word is {token}")),
        "the page content came back through the browser: {stdout}"
    );
    assert!(
        stdout.contains("UNTRUSTED_CONTENT_START"),
        "page content reaches the model fenced"
    );
    assert_eq!(fake.count(), 2);
    let tools = fake.request(0).body["tools"].as_array().unwrap().clone();
    assert!(
        tools
            .iter()
            .any(|t| t["function"]["name"] == "browser_navigate"),
        "browser tools are offered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fake_anthropic_model_drives_the_browser_in_two_steps() {
    if !browser_available() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let respond: Responder = Arc::new(move |i, req| match i {
        0 => Reply::Json(
            200,
            vec![],
            fake_llm::anthropic_tool_use(&[(
                "toolu_nav",
                "browser_navigate",
                json!({"url": format!("http://{site}/")}),
            )]),
        ),
        _ => {
            let r = fake_llm::anthropic_last_tool_result(&req.body).unwrap_or_default();
            Reply::Json(
                200,
                vec![],
                fake_llm::anthropic_text(&format!("I saw: {r}")),
            )
        }
    });
    let fake = fake_llm::start(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        &format!(
            "model:\n  provider: anthropic\n  name: claude-fake\n  base_url: {}\n",
            fake.base()
        ),
    );
    let mut c = forge();
    c.env("ANTHROPIC_API_KEY", "sk-ant-test-0000")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "What is the secret word?"]);
    let out = run(c).await;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("The secret word is {token}")),
        "{stdout}"
    );
    assert_eq!(fake.count(), 2);
}

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

async fn rpc(url: &str, body: Value) -> Value {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let payload = body.to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("answer within 30 s")
        .unwrap();
    let t = String::from_utf8_lossy(&buf).to_string();
    serde_json::from_str(t.split_once("\r\n\r\n").unwrap().1).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_an_a2a_task_stops_its_browser_call_and_closes_its_session() {
    if !browser_available() {
        return;
    }
    let site = serve_site(unique_token());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/slow\", timeout_ms: 60000}}}}\n  - text: never\n"),
    )
    .unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    let audit = dir.path().join("audit.ndjson");
    let child = forge()
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(&audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        BufReader::new(stdout).read_line(&mut l).unwrap();
        l
    })
    .await
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("URL printed")
        .to_string();

    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "open the slow page"}]});
    let sent = rpc(&url, json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": false}}})).await;
    let task_id = sent["result"]["id"]
        .as_str()
        .expect("a task id")
        .to_string();
    // Wait (bounded) until the browser call is in flight.
    let mut in_flight = false;
    for _ in 0..600 {
        let got = rpc(
            &url,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}),
        )
        .await;
        let parts = got["result"]["status"]["message"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if parts
            .iter()
            .any(|p| p["data"]["event"] == "tool_start" && p["data"]["tool"] == "browser_navigate")
        {
            in_flight = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(in_flight, "browser_navigate started");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cancelled = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": task_id}}),
    )
    .await;
    assert_eq!(
        cancelled["result"]["status"]["state"], "canceled",
        "stopped within the cancel wait: {cancelled}"
    );

    let ev = audit_events(&audit);
    let mine = |name: &str| {
        ev.iter()
            .any(|e| e["event"] == name && e["task_id"] == task_id.as_str())
    };
    assert!(mine("browser_session_open"), "session opened");
    // The session is the conversation's (its contextId); a cancelled task closes it.
    let context_id = cancelled["result"]["contextId"].as_str().unwrap_or("");
    assert!(
        ev.iter().any(|e| e["event"] == "browser_session_close"
            && e["task_id"] == task_id.as_str()
            && e["session"] == context_id
            && e["reason"] == "canceled"),
        "session closed after the cancel"
    );
    assert!(ev.iter().any(|e| e["event"] == "session_end"
        && e["task_id"] == task_id.as_str()
        && e["status"] == "canceled"));
}

/// A raw HTTP exchange with the server: (status, body).
async fn http_raw(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let payload = body.map(Value::to_string).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("answer within 30 s")
        .unwrap();
    let t = String::from_utf8_lossy(&buf).to_string();
    let status = t
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        status,
        t.split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default(),
    )
}

/// Every process descended from `pid` (by walking /proc's parent links).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised command name.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|x| x.parse::<u32>().ok());
        if let Some(pp) = ppid {
            parent_of.push((p, pp));
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while i < out.len() && i < 10_000 {
        let cur = out[i];
        out.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == cur)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    out.remove(0);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_refuses_new_tasks_interrupts_the_running_one_and_leaves_no_chromium() {
    if !browser_available() {
        return;
    }
    let site = serve_site(unique_token());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/slow\", timeout_ms: 60000}}}}\n  - text: never\n"),
    )
    .unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    let audit = dir.path().join("audit.ndjson");
    let stderr_path = dir.path().join("stderr.txt");
    let child = forge()
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(&audit)
        .env("FORGE_DRAIN_SECONDS", "2")
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(&stderr_path).unwrap()))
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let pid = server.0.id();
    let stdout = server.0.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        BufReader::new(stdout).read_line(&mut l).unwrap();
        l
    })
    .await
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("URL printed")
        .to_string();
    let (status, body) = http_raw(&url, "GET", "/readyz", None).await;
    assert_eq!(status, 200, "ready before the drain: {body}");

    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "open the slow page"}]});
    let sent = rpc(&url, json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": false}}})).await;
    let task_id = sent["result"]["id"]
        .as_str()
        .expect("a task id")
        .to_string();
    let mut in_flight = false;
    for _ in 0..600 {
        let got = rpc(
            &url,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}),
        )
        .await;
        let parts = got["result"]["status"]["message"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if parts
            .iter()
            .any(|p| p["data"]["event"] == "tool_start" && p["data"]["tool"] == "browser_navigate")
        {
            in_flight = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(in_flight, "browser_navigate started");
    // Chromium runs under forge now.
    let mut chromium = Vec::new();
    for _ in 0..100 {
        chromium = descendants(pid);
        if !chromium.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!chromium.is_empty(), "Chromium processes under forge");

    assert!(Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap()
        .success());
    // Draining: not ready, and a new message gets a retryable 503.
    let mut refused = None;
    for _ in 0..100 {
        let (status, body) = http_raw(&url, "GET", "/readyz", None).await;
        if status == 503 {
            assert!(body.contains("draining"), "{body}");
            let msg2 = json!({"kind": "message", "role": "user", "messageId": "m2", "parts": [{"kind": "text", "text": "another"}]});
            let req = json!({"jsonrpc": "2.0", "id": 5, "method": "message/send", "params": {"message": msg2}});
            refused = Some(http_raw(&url, "POST", "/", Some(&req)).await);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = refused.expect("readyz turned 503 after SIGTERM");
    assert_eq!(status, 503, "{body}");
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["error"]["code"], -32050, "{body}");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("retry"),
        "{body}"
    );
    // The process ends by itself after the 2 s grace (bounded wait: 30 s).
    let mut exited = None;
    for _ in 0..300 {
        if let Ok(Some(st)) = server.0.try_wait() {
            exited = Some(st);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = exited.expect("forge exited after the drain");
    assert!(st.success(), "{st:?}");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(
        stderr.contains("1 of 1 running task(s) did not finish"),
        "{stderr}"
    );
    let ev = audit_events(&audit);
    assert!(
        ev.iter().any(|e| e["event"] == "task_interrupted"
            && e["task_id"] == task_id.as_str()
            && e["reason"] == "interrupted by shutdown"),
        "the interruption is audited"
    );
    assert!(
        !ev.iter()
            .any(|e| e["event"] == "session_start" && e["task_id"] != task_id.as_str()),
        "the refused message started no task"
    );
    for p in &chromium {
        assert!(
            !std::path::Path::new(&format!("/proc/{p}")).exists()
                || std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .map(|s| s.contains(") Z "))
                    .unwrap_or(true),
            "Chromium process {p} is still alive after forge exited"
        );
    }
}

/// `forge run --port 0` on `cfg`, with stderr to `stderr_path`; returns the server and its URL.
async fn serve_agent(cfg: &Path, audit: &Path, stderr_path: &Path) -> (Server, String) {
    serve_agent_with(cfg, audit, stderr_path, &[]).await
}

/// [`serve_agent`] with extra environment variables.
async fn serve_agent_with(
    cfg: &Path,
    audit: &Path,
    stderr_path: &Path,
    env: &[(&str, &str)],
) -> (Server, String) {
    let mut cmd = forge();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .arg("run")
        .arg("--config")
        .arg(cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(std::fs::File::create(stderr_path).unwrap()))
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let first = tokio::task::spawn_blocking(move || {
        let mut l = String::new();
        BufReader::new(stdout).read_line(&mut l).unwrap();
        l
    })
    .await
    .unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| {
            panic!(
                "no URL printed: {first:?}; stderr: {}",
                std::fs::read_to_string(stderr_path).unwrap_or_default()
            )
        })
        .to_string();
    (server, url)
}

/// The throwaway dirs of the Chromium processes under `pid` (their `--user-data-dir` is
/// `<dir>/profile`): every process of that browser names its dir on its command line (the
/// browser, zygotes, renderers, GPU and utility processes, and the crash handlers, which run
/// detached with parent 1), and no process of another run does.
fn browser_dirs(pid: u32) -> Vec<String> {
    let mut dirs = Vec::new();
    for p in descendants(pid) {
        let Ok(cmd) = std::fs::read(format!("/proc/{p}/cmdline")) else {
            continue;
        };
        for arg in cmd.split(|b| *b == 0) {
            let arg = String::from_utf8_lossy(arg);
            if let Some(d) = arg.strip_prefix("--user-data-dir=") {
                let d = d.trim_end_matches("/profile").to_string();
                if !dirs.contains(&d) {
                    dirs.push(d);
                }
            }
        }
    }
    dirs
}

/// Processes (not zombies) whose command line names one of `dirs`.
fn processes_of(dirs: &[String]) -> Vec<i32> {
    let mut out = Vec::new();
    for d in dirs {
        out.extend(forge_testkit::browser::processes_mentioning(&format!(
            "{d}/"
        )));
    }
    out
}

/// `ps`-style lines for `pids`, for failure messages.
fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            format!("{p}: {}", cmd.chars().take(160).collect::<String>())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// SIGKILL forge, as a crash would (forge cannot clean up), and assert that its Chromium (every
/// process of it, found by its throwaway dir) is gone within 2 s: the parent-death signal forge
/// sets on the browser process takes it down, and its children follow. Whatever is still there
/// then is killed (a failing test must not leave browsers running) and named in the failure.
/// Returns how many browser dirs forge had.
fn kill_9(server: &mut Server) -> usize {
    let dirs = browser_dirs(server.0.id());
    let _ = server.0.kill();
    let _ = server.0.wait();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut left = processes_of(&dirs);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_of(&dirs);
    }
    let seen = describe(&left);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "{} Chromium process(es) outlived a kill -9 of forge by 2 s:\n{seen}",
        left.len()
    );
    dirs.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_never_outlives_forge_killed_with_sigkill_20_times() {
    if !browser_available() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/\"}}}}\n  - text: \"the page says {{{{result:browser_navigate}}}}\"\n"),
    )
    .unwrap();
    let audit = dir.path().join("audit.ndjson");
    let stderr_path = dir.path().join("stderr.txt");
    let started = std::time::Instant::now();
    let mut all_dirs = Vec::new();
    for cycle in 0..20 {
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "20 cycles take well under 10 minutes; at cycle {cycle} after {:?}",
            started.elapsed()
        );
        let (server, url) = serve_agent(&cfg, &audit, &stderr_path).await;
        let msg = json!({"kind": "message", "role": "user", "messageId": format!("m{cycle}"), "contextId": format!("ctx-{cycle}"), "parts": [{"kind": "text", "text": "look"}]});
        let done = rpc(
            &url,
            json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}}),
        )
        .await;
        assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
        assert!(
            done.to_string().contains(&token),
            "the page was opened: {done}"
        );
        // The conversation's session keeps the page open: a renderer runs under forge.
        let pid = server.0.id();
        let mut renderer = false;
        for _ in 0..100 {
            renderer = descendants(pid).iter().any(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains("--type=renderer"))
                    .unwrap_or(false)
            });
            if renderer {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(renderer, "a page is open in cycle {cycle}");
        all_dirs.extend(browser_dirs(pid));
        let n = tokio::task::spawn_blocking(move || {
            let mut server = server;
            kill_9(&mut server)
        })
        .await
        .unwrap();
        assert_eq!(n, 1, "one Chromium under forge in cycle {cycle}");
    }
    // Nothing of the 20 runs is left, nor came back.
    let left = processes_of(&all_dirs);
    assert!(
        left.is_empty(),
        "left after 20 kill -9:\n{}",
        describe(&left)
    );
    assert_eq!(all_dirs.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_kill_9_and_a_task_cut_off_is_failed_interrupted_by_restart() {
    if !browser_available() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    let audit = dir.path().join("audit.ndjson");
    let stderr_path = dir.path().join("stderr.txt");

    // Run 1: a task that finishes with a screenshot; then forge is killed with SIGKILL.
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/\"}}}}\n  - tool_calls:\n      - {{name: browser_screenshot, arguments: {{}}}}\n  - text: \"the page says {{{{result:browser_navigate}}}}\"\n"),
    )
    .unwrap();
    let (mut server, url) = serve_agent(&cfg, &audit, &stderr_path).await;
    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "contextId": "ctx-kept", "parts": [{"kind": "text", "text": "look and shoot"}]});
    let done = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}}),
    )
    .await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    let finished_id = done["result"]["id"].as_str().unwrap().to_string();
    let artifacts_before = done["result"]["artifacts"].clone();
    assert!(
        artifacts_before.to_string().contains(".png"),
        "a screenshot artifact: {artifacts_before}"
    );
    kill_9(&mut server);

    // Run 2: a task that blocks in a browser call; forge is killed with SIGKILL mid-call.
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/slow\", timeout_ms: 60000}}}}\n  - text: never\n"),
    )
    .unwrap();
    let (mut server, url) = serve_agent(&cfg, &audit, &stderr_path).await;
    let msg = json!({"kind": "message", "role": "user", "messageId": "m2", "parts": [{"kind": "text", "text": "open the slow page"}]});
    let sent = rpc(&url, json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": false}}})).await;
    let cut_id = sent["result"]["id"].as_str().unwrap().to_string();
    let mut in_flight = false;
    for _ in 0..600 {
        let got = rpc(
            &url,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": cut_id}}),
        )
        .await;
        if got["result"]["status"]["message"]["parts"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["data"]["event"] == "tool_start"))
        {
            in_flight = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(in_flight, "the browser call started");
    // The finished task of run 1 is served by run 2 from the store.
    let old = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": finished_id}}),
    )
    .await;
    assert_eq!(old["result"]["status"]["state"], "completed", "{old}");
    // Give the writer a moment to store the "working" state, as a crash at any time would.
    tokio::time::sleep(Duration::from_millis(300)).await;
    kill_9(&mut server);

    // Run 3: both tasks are there.
    let (server, url) = serve_agent(&cfg, &audit, &stderr_path).await;
    let old = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"id": finished_id}}),
    )
    .await;
    let t = &old["result"];
    assert_eq!(t["status"]["state"], "completed", "{old}");
    assert!(
        t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap()
            .contains(&token),
        "the answer quotes the page: {old}"
    );
    let history = t["history"].as_array().unwrap();
    assert_eq!(
        history.first().unwrap()["parts"][0]["text"],
        "look and shoot"
    );
    assert!(history.len() >= 2, "question and answer: {old}");
    assert_eq!(t["artifacts"], artifacts_before, "the artifacts are kept");
    assert_eq!(t["contextId"], "ctx-kept");
    let cut = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/get", "params": {"id": cut_id}}),
    )
    .await;
    assert_eq!(cut["result"]["status"]["state"], "failed", "{cut}");
    assert_eq!(
        cut["result"]["status"]["message"]["parts"][0]["text"], "interrupted by restart",
        "{cut}"
    );
    // The screenshot's bytes are in the store too.
    let store = forge_state::SqlStore::open(&forge_state::StoreLocation::Sqlite(
        dir.path().join(".forge").join("state.db"),
    ))
    .await
    .unwrap();
    let name = artifacts_before
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| {
            a["parts"][0]["file"]["name"]
                .as_str()
                .filter(|n| n.ends_with(".png"))
        })
        .unwrap()
        .to_string();
    use forge_state::StateStore;
    let png = store
        .artifact(&finished_id, &name)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(&png.bytes[..4], b"\x89PNG");
    assert_eq!(png.mime_type, "image/png");
    store.close().await;
    drop(server);
}

use forge_testkit::pg;

/// Read a `tasks/resubscribe` SSE stream from `url` until an event with `"final":true` (or 30 s);
/// returns the `result` objects in order.
async fn resubscribe(url: &str, task_id: &str) -> Vec<Value> {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let payload = json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/resubscribe", "params": {"id": task_id}}).to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut chunk = vec![0u8; 8192];
    while tokio::time::Instant::now() < deadline {
        let n = match tokio::time::timeout(Duration::from_secs(1), s.read(&mut chunk)).await {
            Ok(Ok(0)) => break,
            Ok(Ok(n)) => n,
            Ok(Err(_)) => break,
            Err(_) => continue,
        };
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf).to_string();
        got = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .map(|v| v["result"].clone())
            .collect();
        if got.iter().any(|r| r["final"] == true) {
            break;
        }
    }
    if got.is_empty() {
        // Say what came back instead (an error answer, a refused connection) in the failure.
        got.push(json!({"raw": String::from_utf8_lossy(&buf)}));
    }
    got
}

/// Poll `tasks/get` on `url` until the task's status message shows a tool call started.
async fn wait_in_flight(url: &str, task_id: &str) {
    for _ in 0..600 {
        let got = rpc(
            url,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task_id}}),
        )
        .await;
        if got["result"]["status"]["message"]["parts"]
            .as_array()
            .is_some_and(|ps| ps.iter().any(|p| p["data"]["event"] == "tool_start"))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never started its tool call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_on_postgres_share_tasks_cancel_and_resubscribe() {
    if !browser_available() {
        return;
    }
    let pg = pg::PgServer::start();
    let site = serve_site(unique_token());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/slow\", timeout_ms: 60000}}}}\n  - text: never\n"),
    )
    .unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    let env = [("FORGE_STATE_URL", pg.url.as_str())];
    let (_a, url_a) = serve_agent_with(
        &cfg,
        &dir.path().join("audit-a.ndjson"),
        &dir.path().join("stderr-a.txt"),
        &env,
    )
    .await;
    let (_b, url_b) = serve_agent_with(
        &cfg,
        &dir.path().join("audit-b.ndjson"),
        &dir.path().join("stderr-b.txt"),
        &env,
    )
    .await;
    assert_ne!(url_a, url_b);
    let start_on_a = |n: u32| {
        let url_a = url_a.clone();
        async move {
            let msg = json!({"kind": "message", "role": "user", "messageId": format!("m{n}"), "parts": [{"kind": "text", "text": "open the slow page"}]});
            let sent = rpc(&url_a, json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": false}}})).await;
            sent["result"]["id"]
                .as_str()
                .expect("a task id")
                .to_string()
        }
    };

    // A task sent to A is read from B.
    let t1 = start_on_a(1).await;
    wait_in_flight(&url_a, &t1).await;
    let on_b = rpc(
        &url_b,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": t1}}),
    )
    .await;
    assert_eq!(on_b["result"]["id"], t1.as_str(), "{on_b}");
    assert_eq!(on_b["result"]["status"]["state"], "working", "{on_b}");
    // tasks/cancel sent to B stops A's browser call.
    let cancelled = rpc(
        &url_b,
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": t1}}),
    )
    .await;
    assert_eq!(
        cancelled["result"]["status"]["state"], "canceled",
        "B's cancel reached A: {cancelled}"
    );
    let on_a = rpc(
        &url_a,
        json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": t1}}),
    )
    .await;
    assert_eq!(on_a["result"]["status"]["state"], "canceled", "{on_a}");

    // tasks/resubscribe on B streams A's running task to its end.
    let t2 = start_on_a(5).await;
    wait_in_flight(&url_a, &t2).await;
    let url_b2 = url_b.clone();
    let t2b = t2.clone();
    let stream = tokio::spawn(async move { resubscribe(&url_b2, &t2b).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let cancelled = rpc(
        &url_a,
        json!({"jsonrpc": "2.0", "id": 6, "method": "tasks/cancel", "params": {"id": t2}}),
    )
    .await;
    assert_eq!(cancelled["result"]["status"]["state"], "canceled");
    let events = stream.await.unwrap();
    assert_eq!(
        events.first().map(|t| t["id"].clone()),
        Some(json!(t2)),
        "{events:?}"
    );
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(
        last["final"], true,
        "the stream reached the end: {events:?}"
    );
    assert_eq!(last["status"]["state"], "canceled", "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_continued_on_another_replica_is_forwarded_to_its_browser() {
    if !browser_available() {
        return;
    }
    let pg = pg::PgServer::start();
    let site = serve_site(unique_token());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!("turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{site}/c\"}}}}\n  - text: \"{{{{result:browser_navigate|inner}}}}\"\n"),
    )
    .unwrap();
    let cfg = write_browser_agent(
        dir.path(),
        site,
        "model:\n  provider: scripted\n  name: s.yaml\n",
    );
    let env = [("FORGE_STATE_URL", pg.url.as_str())];
    let audit_a = dir.path().join("audit-a.ndjson");
    let audit_b = dir.path().join("audit-b.ndjson");
    let (_a, url_a) =
        serve_agent_with(&cfg, &audit_a, &dir.path().join("stderr-a.txt"), &env).await;
    let (_b, url_b) =
        serve_agent_with(&cfg, &audit_b, &dir.path().join("stderr-b.txt"), &env).await;
    let send = |url: String, n: u32| async move {
        let msg = json!({"kind": "message", "role": "user", "messageId": format!("m{n}"), "contextId": "ctx-forwarded", "parts": [{"kind": "text", "text": "open the cookie page"}]});
        rpc(
            &url,
            json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {"message": msg}}),
        )
        .await
    };
    let answer = |v: &Value| {
        v["result"]["artifacts"]
            .as_array()
            .and_then(|a| a.iter().find(|a| a["name"] == "answer"))
            .map(|a| a["parts"][0]["text"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    // The first message opens the conversation's browser on A: no cookie yet.
    let first = send(url_a.clone(), 1).await;
    assert_eq!(first["result"]["status"]["state"], "completed", "{first}");
    assert!(answer(&first).contains("cookie before: none"), "{first}");
    // The second, sent to B, runs on A in the same browser context: the first visit's cookie.
    let second = send(url_b.clone(), 2).await;
    assert_eq!(second["result"]["status"]["state"], "completed", "{second}");
    assert!(
        answer(&second).contains("cookie before: visits=1"),
        "the second message reached the first one's browser: {second}"
    );
    let t2 = second["result"]["id"].as_str().unwrap().to_string();
    let started_on = |path: &Path| {
        audit_events(path)
            .iter()
            .any(|e| e["event"] == "session_start" && e["task_id"] == t2.as_str())
    };
    assert!(started_on(&audit_a), "A ran the forwarded task");
    assert!(!started_on(&audit_b), "B did not run it");
}
