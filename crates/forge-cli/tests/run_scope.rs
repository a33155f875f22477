//! Per-task scope, budgets and the result object, end to end (the real binary, the scripted
//! model, real loopback sites, the real egress client, proxy and Chromium):
//! - `forge run --once --format json` prints the result object; `--task-host` narrows
//!   `http_request` to one of two allowlisted sites (the other is refused, listed in `blocked`,
//!   and its server sees no request); an entry outside the agent's policy exits 2 naming it;
//!   `--max-steps 2` on a 5-step script ends `incomplete` with 2 steps.
//! - Over A2A, two concurrent tasks with different `metadata.forge.allowed_hosts` each reach
//!   their own site in the browser and are refused the other (blocked list; the other site's
//!   server sees no page request from it); the `result` artifact's data part carries the
//!   navigations; a scope entry outside the policy is JSON-RPC -32602 naming it.
//! - `browser_task` with a fake model (a fake OpenAI server answering the sub-agent by its system
//!   prompt) returns the sub-task's result object, and the page's text never reaches the calling
//!   model's conversation.
//!   The browser tests skip without Chromium, and fail instead when FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Response, Site};

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn forge() -> Command {
    forge_testkit::forge!()
}

async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run forge"))
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn browser_available() -> bool {
    forge_testkit::require_browser("forge run with a browser agent").is_some()
}

/// A loopback site answering `/` with a page naming `name` (the requests for `/` are its
/// `hits_for("/")`). Bounded: at most 200 connections.
fn serve_site(name: &'static str) -> (SocketAddr, Site) {
    let site = Site::builder().max_connections(200).start(move |r| {
        if r.path == "/" {
            Response::with(
                200,
                "text/html",
                format!("<!doctype html><title>Site {name}</title><h1>This is site {name}</h1>"),
            )
        } else {
            Response::with(404, "text/html", "not found")
        }
    });
    (site.addr, site)
}

/// An agent allowlisting both sites, with the scripted model playing `script`; `browser` adds
/// a skill that requires the browser.
fn write_agent(dir: &Path, sites: &[SocketAddr], script: &str, browser: bool) -> PathBuf {
    std::fs::write(dir.join("s.yaml"), script).unwrap();
    write_agent_with_model(
        dir,
        sites,
        "model:\n  provider: scripted\n  name: s.yaml\n",
        browser,
    )
}

fn write_agent_with_model(
    dir: &Path,
    sites: &[SocketAddr],
    model_yaml: &str,
    browser: bool,
) -> PathBuf {
    let domains: Vec<String> = sites.iter().map(|s| format!("    - \"{s}\"\n")).collect();
    if browser {
        std::fs::create_dir_all(dir.join("skills/look")).unwrap();
        std::fs::write(
            dir.join("skills/look/SKILL.md"),
            "---\nname: look\ndescription: Look at the test pages.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n---\nOpen the pages.\n",
        )
        .unwrap();
    }
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id: scope-agent\nversion: 0.1.0\n{model_yaml}egress:\n  mode: allowlist\n  allowed_domains:\n{}",
            domains.concat()
        ),
    )
    .unwrap();
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_hosts_narrow_http_request_and_the_json_result_lists_the_refusal() {
    let (a, a_hits) = serve_site("A");
    let (b, b_hits) = serve_site("B");
    let dir = tempfile::tempdir().unwrap();
    let script = format!(
        "turns:\n  - tool_calls:\n      - {{name: http_request, arguments: {{url: \"http://{a}/\"}}}}\n      - {{name: http_request, arguments: {{url: \"http://{b}/\"}}}}\n  - text: \"checked both\"\n"
    );
    let cfg = write_agent(dir.path(), &[a, b], &script, false);
    let audit = dir.path().join("audit.ndjson");
    let mut c = forge();
    c.arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "check the sites", "--format", "json"])
        .args(["--task-host", &a.to_string()])
        .arg("--audit-file")
        .arg(&audit);
    let out = run(c).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let r: Value = serde_json::from_str(text(&out.stdout).trim()).expect("one JSON document");
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["answer"], "checked both");
    assert_eq!(r["steps"], 2);
    assert!(r["seconds"].as_f64().is_some(), "{r}");
    assert_eq!(
        r["blocked"],
        json!([{"host": b.to_string(), "tool": "http_request"}]),
        "{r}"
    );
    assert_eq!(r["navigations"], json!([]));
    assert_eq!(r["artifacts"], json!([]));
    assert_eq!(a_hits.hits_for("/"), 1, "the task reached its own site");
    assert_eq!(b_hits.hits_for("/"), 0, "the other site saw no request");
    // The audit log's session_end carries the same object.
    let log = std::fs::read_to_string(&audit).unwrap();
    let end: Value = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["event"] == "session_end")
        .expect("session_end");
    assert_eq!(end["result"]["blocked"], r["blocked"]);
    assert_eq!(end["result"]["status"], "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_host_outside_the_agent_policy_exits_2_naming_it() {
    let (a, _) = serve_site("A");
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_agent(dir.path(), &[a], "turns:\n  - text: never\n", false);
    let mut c = forge();
    c.arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "x", "--task-host", &a.to_string()])
        .args(["--task-host", "evil.example"]);
    let out = run(c).await;
    assert_eq!(out.status.code(), Some(2), "stderr: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("--task-host[1] value \"evil.example\"")
            && err.contains("does not allow evil.example"),
        "{err}"
    );
    assert!(text(&out.stdout).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_steps_2_on_a_5_step_script_is_incomplete_with_2_steps() {
    let dir = tempfile::tempdir().unwrap();
    let mut script = "turns:\n".to_string();
    for i in 0..5 {
        script.push_str(&format!("  - text: \"after {i}\"\n    tool_calls:\n      - {{name: math_calculate, arguments: {{expression: \"1+{i}\"}}}}\n"));
    }
    script.push_str("  - text: all done\n");
    let cfg = write_agent(dir.path(), &[], &script, false);
    let mut c = forge();
    c.arg("run").arg("--config").arg(&cfg).args([
        "--once",
        "count",
        "--max-steps",
        "2",
        "--format",
        "json",
    ]);
    let out = run(c).await;
    assert!(out.status.success(), "stderr: {}", text(&out.stderr));
    let r: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(r["status"], "incomplete", "{r}");
    assert_eq!(r["steps"], 2);
    assert_eq!(r["answer"], "after 2");
    // Text format: the answer on stdout, the one-line summary on stderr.
    let mut c = forge();
    c.arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "count", "--max-steps", "2"]);
    let out = run(c).await;
    assert_eq!(text(&out.stdout).trim(), "after 2");
    assert!(
        text(&out.stderr).contains("forge: incomplete in 2 steps"),
        "{}",
        text(&out.stderr)
    );
    // Over the cap: exit 2 naming the flag and the cap.
    let mut c = forge();
    c.arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "count", "--max-steps", "151"]);
    let out = run(c).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("tasks.max_steps_cap: 150"),
        "{}",
        text(&out.stderr)
    );
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
    tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut buf))
        .await
        .expect("answer within 60 s")
        .unwrap();
    let t = String::from_utf8_lossy(&buf).to_string();
    serde_json::from_str(t.split_once("\r\n\r\n").unwrap().1).unwrap()
}

fn result_of(task: &Value) -> Value {
    task["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "result"))
        .map(|x| x["parts"][0]["data"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_a2a_tasks_each_reach_only_their_own_site_in_the_browser() {
    if !browser_available() {
        return;
    }
    let (a, a_hits) = serve_site("A");
    let (b, b_hits) = serve_site("B");
    let dir = tempfile::tempdir().unwrap();
    // Both tasks play the same script: open A, then B, then answer.
    let script = format!(
        "turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{a}/\"}}}}\n  - delay_ms: 300\n    tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"http://{b}/\"}}}}\n  - text: \"visited\"\n"
    );
    let cfg = write_agent(dir.path(), &[a, b], &script, true);
    let child = forge()
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(dir.path().join("audit.ndjson"))
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

    // A scope entry outside the agent's policy: -32602 naming it; no task starts.
    let bad = json!({"kind": "message", "role": "user", "messageId": "m0", "parts": [{"kind": "text", "text": "x"}], "metadata": {"forge": {"allowed_hosts": [a.to_string(), "127.0.0.1:9"]}}});
    let got = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": bad}}),
    )
    .await;
    assert_eq!(got["error"]["code"], -32602, "{got}");
    let msg = got["error"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("metadata.forge.allowed_hosts[1] value \"127.0.0.1:9\""),
        "{msg}"
    );

    let send = |id: u64, host: SocketAddr| {
        let url = url.clone();
        async move {
            let m = json!({"kind": "message", "role": "user", "messageId": format!("m{id}"), "parts": [{"kind": "text", "text": "visit the sites"}], "metadata": {"forge": {"allowed_hosts": [host.to_string()], "max_steps": 5}}});
            rpc(&url, json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {"message": m, "configuration": {"blocking": true}}})).await
        }
    };
    let (ta, tb) = tokio::join!(send(2, a), send(3, b));
    let (ra, rb) = (result_of(&ta["result"]), result_of(&tb["result"]));
    assert_eq!(ra["status"], "done", "{ta}");
    assert_eq!(rb["status"], "done", "{tb}");
    // Each task's pages: its own site loaded (200); the other was refused by its proxy.
    let nav_ok = |r: &Value, site: SocketAddr| {
        r["navigations"].as_array().is_some_and(|n| {
            n.iter()
                .any(|x| x["url"] == format!("http://{site}/") && x["status"] == 200)
        })
    };
    assert!(nav_ok(&ra, a), "task A reached site A: {ra}");
    assert!(nav_ok(&rb, b), "task B reached site B: {rb}");
    assert!(!nav_ok(&ra, b), "task A never loaded site B: {ra}");
    assert!(!nav_ok(&rb, a), "task B never loaded site A: {rb}");
    assert_eq!(
        ra["blocked"],
        json!([{"host": b.to_string(), "tool": "browser_navigate"}]),
        "{ra}"
    );
    assert_eq!(
        rb["blocked"],
        json!([{"host": a.to_string(), "tool": "browser_navigate"}]),
        "{rb}"
    );
    assert_eq!(
        (ra["steps"].as_u64(), rb["steps"].as_u64()),
        (Some(2), Some(2))
    );
    // Each site served its page once: to its own task only.
    assert_eq!(a_hits.hits_for("/"), 1, "site A saw only task A");
    assert_eq!(b_hits.hits_for("/"), 1, "site B saw only task B");

    // Task A's conversation keeps its browser, and its scope: a later message in it asking for
    // another scope is refused (naming both) rather than given a browser outside the first; one
    // asking for none browses in the conversation's scope (B stays refused, never widened).
    let ctx = ta["result"]["contextId"]
        .as_str()
        .expect("a contextId")
        .to_string();
    let in_ctx = |id: u64, forge: Value| {
        let (url, ctx) = (url.clone(), ctx.clone());
        async move {
            let m = json!({"kind": "message", "role": "user", "messageId": format!("m{id}"), "contextId": ctx, "parts": [{"kind": "text", "text": "visit the sites again"}], "metadata": {"forge": forge}});
            rpc(&url, json!({"jsonrpc": "2.0", "id": id, "method": "message/send", "params": {"message": m}})).await
        }
    };
    let other = in_ctx(4, json!({"allowed_hosts": [b.to_string()]})).await;
    let r = result_of(&other["result"]);
    assert_eq!(r["status"], "failed", "{other}");
    assert!(
        r["answer"]
            .as_str()
            .is_some_and(|t| t.contains("keeps the scope of its first task")
                && t.contains(&a.to_string())
                && t.contains(&b.to_string())),
        "{other}"
    );
    let same = in_ctx(5, json!({})).await;
    let r = result_of(&same["result"]);
    assert_eq!(r["status"], "done", "{same}");
    assert_eq!(
        r["blocked"],
        json!([{"host": b.to_string(), "tool": "browser_navigate"}]),
        "the conversation's scope still holds in its browser: {same}"
    );
    assert_eq!(
        b_hits.hits_for("/"),
        1,
        "site B never saw task A's conversation"
    );

    // A conversation opened with both sites, narrowed by its next task to A: the same browser
    // (its proxy narrowed in place) now loads A and is refused B.
    let both = json!({"kind": "message", "role": "user", "messageId": "m6", "parts": [{"kind": "text", "text": "visit both"}], "metadata": {"forge": {"allowed_hosts": [a.to_string(), b.to_string()]}}});
    let wide = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 6, "method": "message/send", "params": {"message": both}}),
    )
    .await;
    let r = result_of(&wide["result"]);
    assert_eq!(r["status"], "done", "{wide}");
    assert!(
        nav_ok(&r, a) && nav_ok(&r, b),
        "both sites load at first: {wide}"
    );
    let (a_before, b_before) = (a_hits.hits_for("/"), b_hits.hits_for("/"));
    let ctx2 = wide["result"]["contextId"]
        .as_str()
        .expect("a contextId")
        .to_string();
    let narrow = json!({"kind": "message", "role": "user", "messageId": "m7", "contextId": ctx2, "parts": [{"kind": "text", "text": "visit again"}], "metadata": {"forge": {"allowed_hosts": [a.to_string()]}}});
    let narrowed = rpc(
        &url,
        json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": {"message": narrow}}),
    )
    .await;
    let r = result_of(&narrowed["result"]);
    assert_eq!(r["status"], "done", "{narrowed}");
    assert_eq!(
        r["blocked"],
        json!([{"host": b.to_string(), "tool": "browser_navigate"}]),
        "the narrowed conversation is refused B: {narrowed}"
    );
    assert_eq!(a_hits.hits_for("/"), a_before + 1, "A loads once more");
    assert_eq!(
        b_hits.hits_for("/"),
        b_before,
        "B saw nothing after the narrowing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_task_returns_only_the_result_and_the_page_stays_out_of_the_caller() {
    use fake_llm::{openai_last_tool_result, openai_text, openai_tool_calls, Reply, Responder};
    if !browser_available() {
        return;
    }
    let (a, a_hits) = serve_site("A");
    let site_url = format!("http://{a}/");
    let u = site_url.clone();
    let responder: Responder = Arc::new(move |_, r| {
        let system = r.body["messages"][0]["content"].as_str().unwrap_or("");
        let has_tool = r.body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|x| x["role"] == "tool"));
        let body = if system.contains("browser sub-agent") {
            if has_tool {
                openai_text("found the heading")
            } else {
                openai_tool_calls(&[("c1", "browser_navigate", json!({"url": u}))])
            }
        } else if has_tool {
            openai_text(&format!(
                "RESULT {}",
                openai_last_tool_result(&r.body).unwrap_or_default()
            ))
        } else {
            openai_tool_calls(&[(
                "p1",
                "browser_task",
                json!({"intent": "read the heading", "url": u, "allowed_hosts": [a.to_string()], "max_steps": 3}),
            )])
        };
        Reply::Json(200, vec![], body)
    });
    let fake = fake_llm::start(responder).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_agent_with_model(
        dir.path(),
        &[a],
        &format!(
            "model:\n  provider: openai\n  name: gpt-fake\n  base_url: {}/v1\nbrowser:\n  task_model:\n    provider: openai\n    name: gpt-sub\n",
            fake.base()
        ),
        true,
    );
    let mut c = forge();
    c.env("OPENAI_API_KEY", "sk-test-0000")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", "What does the page say?"]);
    let out = run(c).await;
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        text(&out.stderr)
    );
    let json_text = stdout
        .trim()
        .strip_prefix("RESULT ")
        .unwrap_or_else(|| panic!("{stdout}"));
    let r: Value = serde_json::from_str(json_text).expect("the tool result is the result object");
    assert_eq!(r["status"], "done", "{r}");
    assert_eq!(r["answer"], "found the heading");
    assert_eq!(r["steps"], 1);
    assert_eq!(r["navigations"], json!([{"url": site_url, "status": 200}]));
    assert_eq!(a_hits.hits_for("/"), 1);
    // The page's text reached the sub-agent's model, never the caller's.
    let (mut sub_saw, mut caller_saw) = (false, false);
    for i in 0..fake.count() {
        let req = fake.request(i);
        let sub = req.body["messages"][0]["content"]
            .as_str()
            .unwrap_or("")
            .contains("browser sub-agent");
        let saw = req.body.to_string().contains("This is site A");
        // browser.task_model: the sub-agent runs on its own model, the caller on the agent's.
        let model = req.body["model"].as_str().unwrap_or("").to_string();
        if sub {
            sub_saw |= saw;
            assert_eq!(
                model, "gpt-sub",
                "the sub-agent's model is browser.task_model"
            );
        } else {
            caller_saw |= saw;
            assert_eq!(model, "gpt-fake", "the caller's model is the agent's");
        }
    }
    assert!(sub_saw, "the sub-agent saw the page");
    assert!(!caller_saw, "the calling model never saw the page");
}
