//! The one way in: [`Runner::start`] on fixture agents and on small agents written by the tests.
//! What it assembles (tools and reasons; a proxy only when something needs it), calls through its
//! [`ToolRunner`] (fence, audit `tool_exec`, progress, cancellation, sessions), egress refusals
//! through the runner's clients (one policy value for tools and model), the model host allowed only
//! when a model is started, `run_once` against a fake LLM, startup errors, and `shutdown` stopping
//! the proxy listener and Chromium.

// Test: prints skip notes (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_runtime::AuditLog;
use forge_runtime::{egress_policy, ProgressFn, ToolSource};
use forge_runtime::{AuditTarget, ModelChoice, RunError, Runner, RunnerOptions, StartError};
use forge_skills::Agent;
use forge_tools::ToolError;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use fixture_agents::fixture_copy;
use forge_testkit::agents as fixture_agents;
use forge_testkit::site::{Canary, Response, Site};

use forge_testkit::llm as fake_llm;

/// A private copy of a fixture agent.
fn agent_copy(name: &str) -> (tempfile::TempDir, Agent) {
    let dir = fixture_copy(name);
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

/// An agent written by the test: forge.yaml text and (skill name, SKILL.md text) pairs.
fn agent_from(yaml: &str, skills: &[(&str, &str)]) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("forge.yaml"), yaml).unwrap();
    for (name, text) in skills {
        let d = dir.path().join("skills").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), text).unwrap();
    }
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

/// An in-memory audit log and a way to read its events back.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn events(&self) -> Vec<Value> {
        String::from_utf8(self.0.lock().unwrap().clone())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// A loopback site answering `body` as HTML (and counting connections).
/// Bounded: stops after 20 connections or when the test process ends.
fn serve(body: &'static str) -> (u16, Site) {
    let site = Site::builder()
        .max_connections(20)
        .start(move |_| Response::with(200, "text/html", body));
    (site.port(), site)
}

fn env(vars: &[(&str, &str)]) -> forge_runtime::EnvFn {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Arc::new(move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
}

const CLI_AGENT: &str = "agent_id: sleeper\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [sleep]\negress:\n  mode: allowlist\n  allowed_domains: []\n";

#[tokio::test]
async fn a_plain_agent_starts_without_a_proxy_and_calls_tools_through_the_runner() {
    let (_d, agent) = agent_copy("tools-plain");
    let audit = Buf::default();
    let runner = Runner::start(
        &agent,
        RunnerOptions {
            audit: AuditTarget::Log(AuditLog::to_writer(Box::new(audit.clone()))),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // Optional means zero cost: no cli_execute, script or browser, so no proxy listener.
    assert!(runner.proxy_addr().is_none());
    assert!(runner.assembled().browser().is_none());
    assert!(runner.model().is_none() && runner.agent_loop().is_none());
    assert_eq!(runner.agent_id(), "tools-plain");
    let tools = runner.tools();
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        [
            "http_request",
            "file_create",
            "datetime_now",
            "json_parse",
            "math_calculate"
        ]
    );
    for spec in tools.specs() {
        assert!(!spec.description.is_empty(), "{}", spec.name);
        assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
    }
    let web_fetch = runner
        .tool_reasons()
        .iter()
        .find(|r| r.name == "web_fetch")
        .unwrap();
    assert!(!web_fetch.present && web_fetch.reason.contains("denied_tools"));
    assert!(runner
        .tool_reasons()
        .iter()
        .filter(|r| r.source == ToolSource::Browser)
        .all(|r| !r.present));

    let out = tools
        .call(
            "s1",
            "math_calculate",
            json!({"expression": "6*7"}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["result"], 42);
    // denied_tools holds on this path too.
    let err = tools
        .call(
            "s1",
            "web_fetch",
            json!({"url": "https://example.com/"}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidInput(_)), "{err}");
    let execs: Vec<Value> = audit
        .events()
        .into_iter()
        .filter(|e| e["event"] == "tool_exec")
        .collect();
    assert_eq!(execs.len(), 2, "{execs:?}");
    assert_eq!(execs[0]["tool"], "math_calculate");
    assert_eq!(execs[0]["ok"], true);
    assert_eq!(execs[0]["task_id"], "s1");
    assert_eq!(execs[1]["tool"], "web_fetch");
    assert_eq!(execs[1]["ok"], false);
    assert_eq!(execs[1]["error_kind"], "invalid_input");
    runner.shutdown().await;
}

#[tokio::test]
async fn egress_refusals_come_from_the_one_policy_for_tools_and_the_runner_client() {
    let (site, site_hits) = serve("<html><body>hello from upstream</body></html>");
    let canary_site = Canary::start();
    let canary = canary_site.port();
    let (_d, agent) = agent_copy("tools-plain");
    let audit = Buf::default();
    let runner = Runner::start(
        &agent,
        RunnerOptions {
            allow: vec![format!("127.0.0.1:{site}")],
            audit: AuditTarget::Log(AuditLog::to_writer(Box::new(audit.clone()))),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    // One policy value: the tools' client consults exactly the runner's policy.
    assert!(Arc::ptr_eq(
        runner.egress_client().policy(),
        runner.egress_policy()
    ));
    let tools = runner.tools();
    let ok = tools
        .call(
            "s1",
            "http_request",
            json!({"url": format!("http://127.0.0.1:{site}/")}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert!(ok.text.contains("hello from upstream"), "{}", ok.text);
    assert!(
        ok.text.contains("<<<UNTRUSTED_CONTENT_START id="),
        "outside content is fenced: {}",
        ok.text
    );
    assert_eq!(site_hits.hits(), 1);
    let err = tools
        .call(
            "s1",
            "http_request",
            json!({"url": format!("http://127.0.0.1:{canary}/")}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Blocked(_)), "{err}");
    assert!(
        err.to_string().starts_with("blocked by egress policy: "),
        "{err}"
    );
    let direct = runner
        .egress_client()
        .get(&format!("http://127.0.0.1:{canary}/"))
        .await
        .expect_err("the runner's client refuses what the policy refuses");
    assert!(
        direct.to_string().starts_with("blocked by egress policy: "),
        "{direct}"
    );
    canary_site.assert_untouched("the one egress policy (tools and the runner's client)");
    // The decisions are audited (the client's observer), the refusal included.
    let events = audit.events();
    assert!(events
        .iter()
        .any(|e| e["event"] == "egress_blocked" && e["via"] == "client"));
    assert!(events
        .iter()
        .any(|e| e["event"] == "egress_allowed" && e["via"] == "client"));
    runner.shutdown().await;
}

#[tokio::test]
async fn run_once_reaches_the_model_through_the_same_policy_and_a_tools_only_start_does_not_allow_it(
) {
    let respond: fake_llm::Responder = Arc::new(|i, _req| {
        if i == 0 {
            fake_llm::Reply::Json(
                200,
                vec![],
                fake_llm::openai_tool_calls(&[(
                    "call_1",
                    "math_calculate",
                    json!({"expression": "6*7"}),
                )]),
            )
        } else {
            fake_llm::Reply::Json(200, vec![], fake_llm::openai_text("forty-two"))
        }
    });
    let fake = fake_llm::start(respond).await;
    let yaml = format!(
        "agent_id: modelled\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: fake-model\n  base_url: {}/v1\negress:\n  mode: allowlist\n  allowed_domains: []\n",
        fake.base()
    );
    let (_d, agent) = agent_from(&yaml, &[]);
    let runner = Runner::start(
        &agent,
        RunnerOptions {
            model: Some(ModelChoice::default()),
            env: env(&[("OPENAI_API_KEY", "sk-test-runner")]),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let model_client = runner.model_client().expect("a model client").clone();
    assert!(Arc::ptr_eq(model_client.policy(), runner.egress_policy()));
    assert_eq!(runner.model().unwrap().name, "fake-model");
    let outcome = runner
        .run_once("what is 6*7?", CancellationToken::new(), None)
        .await
        .unwrap();
    assert_eq!(outcome.answer, "forty-two");
    assert_eq!(fake.count(), 2);
    // The tool result went back to the model.
    let result = fake_llm::openai_last_tool_result(&fake.request(1).body).unwrap();
    assert!(result.contains("42"), "{result}");
    runner.shutdown().await;

    // Started for its tools only, the same agent has no model and no model host in its policy.
    let tools_only = Runner::start(&agent, RunnerOptions::default())
        .await
        .unwrap();
    assert!(matches!(
        tools_only
            .run_once("hi", CancellationToken::new(), None)
            .await,
        Err(RunError::NoModel)
    ));
    let err = tools_only
        .tools()
        .call(
            "s",
            "http_request",
            json!({"url": format!("{}/v1/models", fake.base())}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Blocked(_)), "{err}");
    assert_eq!(fake.count(), 2, "the fake was not contacted");
    tools_only.shutdown().await;
}

#[tokio::test]
async fn a_model_without_an_api_key_is_a_start_error() {
    let (_d, agent) = agent_copy("tools-plain");
    let err = Runner::start(
        &agent,
        RunnerOptions {
            model: Some(ModelChoice::default()),
            env: env(&[]),
            ..Default::default()
        },
    )
    .await
    .err()
    .expect("no OPENAI_API_KEY");
    assert!(matches!(err, StartError::Model(_)), "{err}");
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
}

#[tokio::test]
async fn progress_is_reported_for_slow_calls_and_cancel_stops_a_call() {
    let (_d, agent) = agent_from(CLI_AGENT, &[]);
    let runner = Runner::start(&agent, RunnerOptions::default())
        .await
        .unwrap();
    let session = runner.tools().open_session("mcp-1");
    assert_eq!(session.key(), "mcp-1");
    let reports = Arc::new(Mutex::new(Vec::new()));
    let r2 = reports.clone();
    let progress: ProgressFn = Arc::new(move |p| r2.lock().unwrap().push(p));
    let out = session
        .call(
            "cli_execute",
            json!({"binary": "sleep", "args": ["1.6"]}),
            CancellationToken::new(),
            Some(progress.clone()),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["exit_code"], 0);
    let got = reports.lock().unwrap().clone();
    assert!(!got.is_empty(), "a 1.6 s call reports progress");
    assert!(got
        .iter()
        .all(|p| p.tool == "cli_execute" && p.session_key == "mcp-1"));
    assert!(got[0].elapsed >= Duration::from_millis(900), "{got:?}");

    // A fast call reports nothing.
    reports.lock().unwrap().clear();
    session
        .call(
            "cli_execute",
            json!({"binary": "sleep", "args": ["0"]}),
            CancellationToken::new(),
            Some(progress),
        )
        .await
        .unwrap();
    assert!(reports.lock().unwrap().is_empty());

    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        c2.cancel();
    });
    let started = Instant::now();
    let err = session
        .call(
            "cli_execute",
            json!({"binary": "sleep", "args": ["20"]}),
            cancel,
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Cancelled), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    session.close().await;
    runner.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_the_proxy_listener_and_later_calls_are_refused() {
    let (_d, agent) = agent_from(CLI_AGENT, &[]);
    let runner = Runner::start(&agent, RunnerOptions::default())
        .await
        .unwrap();
    let addr = runner
        .proxy_addr()
        .expect("cli_execute gets the egress proxy");
    tokio::net::TcpStream::connect(addr)
        .await
        .expect("the proxy listens");
    let kept = runner.tools();
    runner.shutdown().await;
    let refused =
        tokio::time::timeout(Duration::from_secs(5), tokio::net::TcpStream::connect(addr))
            .await
            .expect("connect answers promptly");
    assert!(refused.is_err(), "the proxy listener is closed");
    let err = kept
        .call(
            "s",
            "cli_execute",
            json!({"binary": "sleep", "args": ["0"]}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("shut down"), "{err}");
}

#[tokio::test]
async fn the_browser_agent_browses_in_sessions_and_shutdown_stops_chromium_and_the_proxy() {
    if forge_testkit::require_browser(
        "the_browser_agent_browses_in_sessions_and_shutdown_stops_chromium_and_the_proxy",
    )
    .is_none()
    {
        return;
    }
    let (site, _hits) =
        serve("<html><head><title>Shelf finder</title></head><body><h1>Shelves</h1></body></html>");
    let (_d, agent) = agent_copy("tools-browser");
    let runner = Runner::start(
        &agent,
        RunnerOptions {
            allow: vec![format!("127.0.0.1:{site}")],
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let proxy = runner.proxy_addr().expect("the browser gets the proxy");
    let browser = runner.assembled().browser().unwrap().manager().clone();
    assert_eq!(browser.launch_count(), 0, "Chromium starts lazily");
    let tools = runner.tools();
    assert!(tools.specs().iter().any(|s| s.name == "browser_navigate"));
    assert!(!tools.specs().iter().any(|s| s.name == "browser_hover"));
    let out = tools
        .call(
            "session-a",
            "browser_navigate",
            json!({"url": format!("http://127.0.0.1:{site}/")}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert!(out.text.contains("Shelf finder"), "{}", out.text);
    assert!(out.text.contains("<<<UNTRUSTED_CONTENT_START id="));
    assert_eq!(browser.launch_count(), 1);
    // Refused through the proxy: a host outside the policy.
    let err = tools
        .call(
            "session-a",
            "browser_navigate",
            json!({"url": "http://not-allowed.example/"}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("blocked by egress policy"),
        "{err}"
    );
    // A second session gets its own browser context; closing one leaves the other.
    let session_b = tools.open_session("session-b");
    session_b
        .call(
            "browser_navigate",
            json!({"url": format!("http://127.0.0.1:{site}/")}),
            CancellationToken::new(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(browser.session_count().await, 2);
    tools.close_session("session-a").await;
    assert_eq!(browser.session_count().await, 1);
    session_b.close().await;
    assert_eq!(browser.session_count().await, 0);
    assert_eq!(browser.launch_count(), 1, "one Chromium for every session");
    let pid = browser.browser_pid().await.expect("Chromium runs");
    runner.shutdown().await;
    assert!(browser.browser_pid().await.is_none(), "Chromium stopped");
    // The process is gone (reaped) within a few seconds.
    let gone = (0..50).any(|_| {
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
            && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true);
        if alive {
            std::thread::sleep(Duration::from_millis(100));
        }
        !alive
    });
    assert!(gone, "Chromium pid {pid} still alive after shutdown");
    assert!(
        tokio::net::TcpStream::connect(proxy).await.is_err(),
        "the proxy listener is closed"
    );
}

/// Chromium killed between two calls: the next call of the session says so once, and the audit
/// log (the runner's crash observer) has a `browser_crash` event in its verified chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_crash_between_calls_is_in_the_audit_log_and_said_once() {
    if forge_testkit::require_browser(
        "a_browser_crash_between_calls_is_in_the_audit_log_and_said_once",
    )
    .is_none()
    {
        return;
    }
    let (site, _hits) = serve("<html><head><title>Crash site</title></head><body>x</body></html>");
    let (_d, agent) = agent_copy("tools-browser");
    let audit = Buf::default();
    let runner = Runner::start(
        &agent,
        RunnerOptions {
            allow: vec![format!("127.0.0.1:{site}")],
            audit: AuditTarget::Log(AuditLog::to_writer(Box::new(audit.clone()))),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let browser = runner.assembled().browser().unwrap().manager().clone();
    let tools = runner.tools();
    let call = |name: &'static str, input: Value| {
        let tools = tools.clone();
        async move {
            tools
                .call("task-1", name, input, CancellationToken::new(), None)
                .await
        }
    };
    call(
        "browser_navigate",
        json!({"url": format!("http://127.0.0.1:{site}/")}),
    )
    .await
    .unwrap();
    let pid = browser.browser_pid().await.expect("Chromium runs");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success(), "kill -KILL {pid}");
    let mut noticed = false;
    for _ in 0..200 {
        if browser.browser_pid().await.is_none() {
            noticed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(noticed, "the manager never saw Chromium die");
    let out = call("browser_state", json!({})).await.unwrap();
    assert!(
        out.text.contains("the browser restarted after a crash"),
        "{}",
        out.text
    );
    let again = call("browser_state", json!({})).await.unwrap();
    assert!(
        !again.text.contains("restarted after a crash"),
        "{}",
        again.text
    );
    runner.shutdown().await;
    let events = audit.events();
    let crashes: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "browser_crash")
        .collect();
    assert_eq!(crashes.len(), 1, "{events:?}");
    assert_eq!(crashes[0]["pid"], json!(pid));
    assert_eq!(crashes[0]["sessions"], json!(["task-1"]));
    assert_eq!(crashes[0]["relaunching"], json!(true));
    assert!(crashes[0]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    // Two Chromium starts and a page each time, and the log of this quiet agent has no refused
    // request (Chromium's own start-up requests to Google are stopped in the browser), while the
    // proxy's decisions do reach it (the page's requests were allowed and audited).
    let blocked: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "egress_blocked")
        .collect();
    assert!(blocked.is_empty(), "{blocked:?}");
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "egress_allowed" && e["via"] == "proxy"),
        "{events:?}"
    );
    let text = String::from_utf8(audit.0.lock().unwrap().clone()).unwrap();
    let summary = forge_runtime::verify_audit(std::io::Cursor::new(text)).expect("verifies");
    assert!(
        summary
            .counts
            .iter()
            .any(|(name, n)| name == "browser_crash" && *n == 1),
        "{:?}",
        summary.counts
    );
}

#[test]
fn a_policy_error_names_the_file_that_holds_the_value() {
    let (d, agent) = agent_from(
        "agent_id: a\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_private_cidrs:\n    - 10.20.0.1/16\n",
        &[],
    );
    let err = egress_policy(Some(&agent), &[], &[]).unwrap_err();
    assert_eq!(err.error.field, "egress.allowed_private_cidrs");
    assert_eq!(err.error.value, "10.20.0.1/16");
    let file = err.file.clone().expect("forge.yaml holds the value");
    assert_eq!(
        file.canonicalize().unwrap(),
        d.path().join("forge.yaml").canonicalize().unwrap()
    );
    // The Runner builds its policy with the same function and fails the same way.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start = rt
        .block_on(Runner::start(&agent, RunnerOptions::default()))
        .err()
        .expect("the policy is invalid");
    assert!(matches!(start, StartError::Assemble(_)), "{start}");
    assert!(
        start.to_string().contains("forge.yaml") && start.to_string().contains(&err.error.why),
        "{start}"
    );
    // A bad --allow entry has no file.
    let err = egress_policy(Some(&agent), &[], &["https://example.com/path".to_string()]);
    assert!(err.is_err());
    // No agent: deny-all plus the command line's entries.
    let p = egress_policy(None, &[], &["example.com".to_string()]).unwrap();
    assert_eq!(p.entries().len(), 1);
    let bad = egress_policy(None, &[], &["https://example.com/path".to_string()]).unwrap_err();
    assert_eq!(bad.error.field, "--allow");
    assert!(bad.file.is_none());
}
