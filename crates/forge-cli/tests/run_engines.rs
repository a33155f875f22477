//! Two engines in one agent (issue 26): a reading skill on Lightpanda (`requires.browser_engine:
//! lightpanda`) and a form skill on Chromium, driven by `forge run` with a fake OpenAI server
//! playing the model. Each browser call goes to its skill's engine: the loopback site records
//! each request's User-Agent, and Lightpanda's differs from Chromium's. A tool the chosen engine
//! cannot serve is an error naming the skill, the engine and the fix; `forge tool list` says
//! which engine serves what. The same routing holds for `forge tool call` and for an MCP client
//! of `forge mcp serve`. Real Chromium, real Lightpanda, real proxy; fails instead of skipping
//! under FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use forge_testkit::cli::Terminating;
use forge_testkit::llm::{self as fake_llm, Reply, Responder};
use forge_testkit::mcp::RawSession;
use forge_testkit::site::{Response, Site};
use serde_json::{json, Value};

fn engines_available(test: &str) -> bool {
    forge_testkit::require_browser(test).is_some()
        && forge_testkit::require_lightpanda(test).is_some()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

async fn run(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run forge"))
        .await
        .expect("join")
}

/// The User-Agent a [`ua_site`] saw for each path.
type Seen = Arc<Mutex<HashMap<String, String>>>;

/// A loopback site that records the User-Agent of each path it serves. Bounded: 60 connections.
fn ua_site() -> (Site, Seen) {
    let seen: Seen = Arc::default();
    let rec = seen.clone();
    let site = Site::builder().max_connections(60).start(move |r| {
        let ua = r.headers.get("user-agent").cloned().unwrap_or_default();
        if let Ok(mut m) = rec.lock() {
            m.entry(r.path.clone()).or_insert(ua);
        }
        Response::html(format!(
            "<!doctype html><title>Page {}</title><h1>served {}</h1>",
            r.path, r.path
        ))
    });
    (site, seen)
}

/// An agent with `reader` (Lightpanda, its own choice) and `former` (forge.yaml's default,
/// chromium), both allowlisting `sites`.
fn write_agent(dir: &Path, sites: &[&str], model_yaml: &str) -> std::path::PathBuf {
    let site = sites.join("\", \"");
    for (name, engine) in [
        ("former", ""),
        ("reader", "      browser_engine: lightpanda\n"),
    ] {
        std::fs::create_dir_all(dir.join("skills").join(name)).expect("skill dir");
        std::fs::write(
            dir.join("skills").join(name).join("SKILL.md"),
            format!(
                "---\nname: {name}\ndescription: The {name} skill.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n{engine}    egress_domains: [\"{site}\"]\n---\nUse the browser.\n"
            ),
        )
        .expect("write SKILL.md");
    }
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!("agent_id: two-engines\nversion: 0.1.0\n{model_yaml}egress:\n  mode: allowlist\n"),
    )
    .expect("write forge.yaml");
    cfg
}

/// The two-engine agent (see [`write_agent`]) allowed a fresh [`ua_site`], for callers that
/// call its tools directly (no model is asked): the site, what it saw, the agent's directory and
/// its forge.yaml.
fn agent_without_model_calls() -> (Site, Seen, tempfile::TempDir, std::path::PathBuf) {
    let (site, seen) = ua_site();
    let host = format!("127.0.0.1:{}", site.port());
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = write_agent(
        dir.path(),
        &[&host],
        "model:\n  provider: openai\n  name: gpt-fake\n",
    );
    (site, seen, dir, cfg)
}

/// `forge run --once PROMPT` for an agent (see [`write_agent`]) allowed `sites`, its model the
/// fake OpenAI server at `base`.
async fn run_once(dir: &Path, sites: &[&str], base: &str, prompt: &str) -> Output {
    let cfg = write_agent(
        dir,
        sites,
        &format!("model:\n  provider: openai\n  name: gpt-fake\n  base_url: {base}/v1\n"),
    );
    let mut c = forge_testkit::forge!();
    c.env("OPENAI_API_KEY", "sk-test-engines-0000")
        .env_remove("FORGE_BROWSER_ENGINE")
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--once", prompt]);
    run(c).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_browser_call_goes_to_its_skills_engine() {
    if !engines_available("each_browser_call_goes_to_its_skills_engine") {
        return;
    }
    let (site, seen) = ua_site();
    let host = format!("127.0.0.1:{}", site.port());
    let calls: Vec<(&str, Value)> = vec![
        (
            "browser_navigate",
            json!({"url": site.url("/by-reader"), "skill": "reader"}),
        ),
        (
            "browser_navigate",
            json!({"url": site.url("/by-former"), "skill": "former"}),
        ),
        ("browser_screenshot", json!({"skill": "reader"})),
        ("browser_navigate", json!({"url": site.url("/by-default")})),
        (
            "browser_navigate",
            json!({"url": site.url("/reader-again"), "skill": "reader"}),
        ),
    ];
    let n = calls.len();
    let results: Arc<Mutex<Vec<String>>> = Arc::default();
    let rec = results.clone();
    let respond: Responder = Arc::new(move |i, req| {
        if i > 0 {
            let r = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
            if let Ok(mut v) = rec.lock() {
                v.push(r);
            }
        }
        match calls.get(i) {
            Some((tool, args)) => Reply::Json(
                200,
                vec![],
                fake_llm::openai_tool_calls(&[(&format!("call_{i}"), tool, args.clone())]),
            ),
            None => Reply::Json(200, vec![], fake_llm::openai_text("done")),
        }
    });
    let fake = fake_llm::start(respond).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_once(
        dir.path(),
        &[&host],
        &fake.base(),
        "Read with one engine, fill with the other.",
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(
        fake.count(),
        n + 1,
        "every scripted call was made: {stdout}"
    );

    // The model was offered a `skill` argument naming both browser skills.
    let tools = fake.request(0).body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let nav = tools
        .iter()
        .find(|t| t["function"]["name"] == "browser_navigate")
        .expect("browser_navigate offered");
    assert_eq!(
        nav["function"]["parameters"]["properties"]["skill"]["enum"],
        json!(["former", "reader"]),
        "{nav}"
    );

    let results = results.lock().expect("results").clone();
    assert_eq!(results.len(), n, "{results:?}");
    for i in [0, 1, 3, 4] {
        assert!(results[i].contains("served /"), "call {i}: {}", results[i]);
    }
    let shot = &results[2];
    assert!(
        shot.contains("skill reader runs on lightpanda")
            && shot.contains("no screenshots")
            && shot.contains("(former)")
            && shot.contains("browser_engine: chromium"),
        "the screenshot error names the skill, the engine and the fix: {shot}"
    );

    // Which process served each call: Lightpanda's User-Agent differs from Chromium's.
    let seen = seen.lock().expect("seen").clone();
    let ua = |p: &str| seen.get(p).cloned().unwrap_or_default();
    for p in ["/by-reader", "/reader-again"] {
        assert!(
            ua(p).contains("Lightpanda"),
            "{p} served by Lightpanda: {seen:?}"
        );
    }
    for p in ["/by-former", "/by-default"] {
        let u = ua(p);
        assert!(
            u.contains("Chrome") && !u.contains("Lightpanda"),
            "{p} served by Chromium: {seen:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_list_says_which_engine_serves_what() {
    if !engines_available("tool_list_says_which_engine_serves_what") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = write_agent(
        dir.path(),
        &["127.0.0.1:9"],
        "model:\n  provider: openai\n  name: gpt-fake\n",
    );
    let mut c = forge_testkit::forge!();
    c.env_remove("FORGE_BROWSER_ENGINE")
        .args(["tool", "list", "--format", "json", "--config"])
        .arg(&cfg);
    let out = run(c).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let tools = v["tools"].as_array().cloned().unwrap_or_default();
    let reason = |n: &str| {
        let t = tools
            .iter()
            .find(|t| t["name"] == n)
            .cloned()
            .unwrap_or_default();
        assert_eq!(t["present"], true, "{n}: {t}");
        t["reason"].as_str().unwrap_or_default().to_string()
    };
    let nav = reason("browser_navigate");
    assert!(
        nav.contains("Chromium") && nav.contains("for skill former, the default"),
        "{nav}"
    );
    assert!(
        nav.contains("Lightpanda") && nav.contains("for skill reader"),
        "{nav}"
    );
    let shot = reason("browser_screenshot");
    assert!(shot.contains("for skill former"), "{shot}");
    assert!(
        shot.contains("not for skill reader (lightpanda cannot serve it)"),
        "{shot}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_task_for_a_skill_runs_its_sub_agent_on_that_skills_engine() {
    if !engines_available("browser_task_for_a_skill_runs_its_sub_agent_on_that_skills_engine") {
        return;
    }
    let (site, seen) = ua_site();
    let host = format!("127.0.0.1:{}", site.port());
    let (sub_url, bad_url) = (site.url("/sub-reader"), site.url("/never"));
    // Allowlisted by the agent, outside the sub-task's allowed_hosts.
    let (outside, outside_seen) = ua_site();
    let outside_host = format!("127.0.0.1:{}", outside.port());
    let outside_url = outside.url("/outside");
    let scope = vec![host.clone()];
    let results: Arc<Mutex<Vec<String>>> = Arc::default();
    let rec = results.clone();
    // One fake serves both loops, in order: the agent asks for browser_task with a skill its
    // engine does not have, then for reader; the sub-agent navigates without naming a skill.
    let respond: Responder = Arc::new(move |i, req| {
        if i > 0 {
            let r = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
            if let Ok(mut v) = rec.lock() {
                v.push(r);
            }
        }
        let call = |tool: &str, args: Value| {
            Reply::Json(
                200,
                vec![],
                fake_llm::openai_tool_calls(&[(&format!("call_{i}"), tool, args)]),
            )
        };
        match i {
            0 => call(
                "browser_task",
                json!({"intent": "read the page", "url": bad_url, "skill": "writer"}),
            ),
            1 => call(
                "browser_task",
                json!({"intent": "read the page", "url": sub_url, "skill": "reader", "allowed_hosts": scope}),
            ),
            2 => call("browser_navigate", json!({"url": sub_url})),
            3 => call("browser_navigate", json!({"url": outside_url})),
            4 => Reply::Json(200, vec![], fake_llm::openai_text("sub done")),
            _ => Reply::Json(200, vec![], fake_llm::openai_text("done")),
        }
    });
    let fake = fake_llm::start(respond).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = run_once(
        dir.path(),
        &[&host, &outside_host],
        &fake.base(),
        "Read it with a helper.",
    )
    .await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let tools = fake.request(0).body["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let task = tools
        .iter()
        .find(|t| t["function"]["name"] == "browser_task")
        .expect("browser_task offered");
    assert_eq!(
        task["function"]["parameters"]["properties"]["skill"]["enum"],
        json!(["former", "reader"])
    );
    let results = results.lock().expect("results").clone();
    assert!(
        results
            .first()
            .is_some_and(|r| r.contains("\"writer\"") && r.contains("former, reader")),
        "an unknown skill is refused: {results:?}"
    );
    assert!(
        results
            .get(2)
            .is_some_and(|r| r.contains("served /sub-reader")),
        "the sub-agent's call: {results:?}"
    );
    // The sub-task's scope holds on the engine its calls go to (its Lightpanda session goes
    // through the task's own proxy listener, not the agent's).
    assert!(
        results
            .get(3)
            .is_some_and(|r| r.contains("blocked by egress policy")),
        "a host outside the sub-task's allowed_hosts is refused: {results:?}"
    );
    let outside_seen = outside_seen.lock().expect("seen").clone();
    assert!(outside_seen.is_empty(), "{outside_seen:?}");
    let seen = seen.lock().expect("seen").clone();
    assert!(!seen.contains_key("/never"), "{seen:?}");
    assert!(
        seen.get("/sub-reader")
            .is_some_and(|ua| ua.contains("Lightpanda")),
        "the sub-agent's call without a skill went to reader's engine: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_tool_call_routes_by_skill_like_the_agent_loop() {
    if !engines_available("forge_tool_call_routes_by_skill_like_the_agent_loop") {
        return;
    }
    let (site, seen, dir, cfg) = agent_without_model_calls();
    let script = dir.path().join("calls.jsonl");
    let lines = [
        json!({"tool": "browser_navigate", "args": {"url": site.url("/call-reader"), "skill": "reader"}}),
        json!({"tool": "browser_navigate", "args": {"url": site.url("/call-former"), "skill": "former"}}),
        json!({"tool": "browser_state", "args": {"skill": "reader"}}),
    ];
    std::fs::write(
        &script,
        lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .expect("write script");
    let mut c = forge_testkit::forge!();
    c.env_remove("FORGE_BROWSER_ENGINE")
        .args(["tool", "call", "--script"])
        .arg(&script)
        .arg("--config")
        .arg(&cfg);
    let out = run(c).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    // The same session key on two engines: two sessions, each keeping its own page.
    let last = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or("");
    assert!(
        last.contains("/call-reader") && !last.contains("/call-former"),
        "reader's session still shows its own page: {last}"
    );
    let seen = seen.lock().expect("seen").clone();
    let ua = |p: &str| seen.get(p).cloned().unwrap_or_default();
    assert!(ua("/call-reader").contains("Lightpanda"), "{seen:?}");
    assert!(
        ua("/call-former").contains("Chrome") && !ua("/call-former").contains("Lightpanda"),
        "{seen:?}"
    );
}

/// The same routing for an MCP client of `forge mcp serve --transport http`: each browser call
/// goes to the engine of the skill it names, one MCP session keeps a page on each engine, and a
/// tool the skill's engine cannot serve is an error naming the skill, the engine and the fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_clients_browser_calls_go_to_their_skills_engine() {
    if !engines_available("an_mcp_clients_browser_calls_go_to_their_skills_engine") {
        return;
    }
    let (site, seen, dir, cfg) = agent_without_model_calls();
    let mut c = forge_testkit::forge!();
    c.env_remove("FORGE_BROWSER_ENGINE")
        .current_dir(dir.path())
        .args([
            "mcp",
            "serve",
            "--transport",
            "http",
            "--port",
            "0",
            "--config",
        ])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut server = Terminating(c.spawn().expect("start forge mcp serve"));
    let stdout = server.0.stdout.take().expect("piped stdout");
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        line
    })
    .await
    .expect("join");
    let port = forge_testkit::cli::url_port(&first);

    let mut s = RawSession::open(port).await;
    for (path, skill) in [("/mcp-reader", "reader"), ("/mcp-former", "former")] {
        let r = s
            .call(
                "browser_navigate",
                json!({"url": site.url(path), "skill": skill}),
            )
            .await;
        assert_ne!(r["isError"], true, "{skill}: {r}");
        assert!(r.to_string().contains(&format!("served {path}")), "{r}");
    }
    // One MCP session, two engines: the reader's page is still its own.
    let state = s
        .call("browser_state", json!({"skill": "reader"}))
        .await
        .to_string();
    assert!(
        state.contains("/mcp-reader") && !state.contains("/mcp-former"),
        "{state}"
    );
    let shot = s
        .call("browser_screenshot", json!({"skill": "reader"}))
        .await;
    let shot_text = shot.to_string();
    assert_eq!(shot["isError"], true, "{shot_text}");
    assert!(
        shot_text.contains("skill reader runs on lightpanda")
            && shot_text.contains("browser_engine: chromium"),
        "the error names the skill, the engine and the fix: {shot_text}"
    );
    // Which process served each call: Lightpanda's User-Agent differs from Chromium's.
    let seen = seen.lock().expect("seen").clone();
    let ua = |p: &str| seen.get(p).cloned().unwrap_or_default();
    assert!(ua("/mcp-reader").contains("Lightpanda"), "{seen:?}");
    assert!(
        ua("/mcp-former").contains("Chrome") && !ua("/mcp-former").contains("Lightpanda"),
        "{seen:?}"
    );
    drop(server);
}
