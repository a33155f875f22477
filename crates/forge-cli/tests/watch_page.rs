//! The watch page in real Chromium: `forge run` (bound to 0.0.0.0, so with a token) runs a
//! browser task driven by a fake OpenAI server (navigate to a loopback page, try a host outside
//! the allowlist, take a screenshot, answer). A second Chromium (the watcher's, started by the
//! testkit browser fixture, its traffic through a real egress proxy that allows only the forge
//! server) opens `/ui?token=…`: the URL is cleaned, the token is kept in an HttpOnly cookie, the
//! task is listed; keyboard alone opens it; its timeline shows the tool calls and the refused
//! host with its rule, the screenshot is inline, the audit log verifies. Screenshots of the page
//! at 1280 and 390 px go to target/test-artifacts/. A second, slow task appears and finishes on
//! the open page without a reload. Every request the page made went to forge. The task's ledger
//! (`GET /tasks/{id}/egress`) is HAR 1.2 by a schema written here from the spec, lists the
//! allowed and the refused host with their decisions, and `forge audit har` exports the same.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
use chromiumoxide::cdp::browser_protocol::input::{DispatchKeyEventParams, DispatchKeyEventType};
use chromiumoxide::cdp::browser_protocol::network::{EnableParams, EventRequestWillBeSent};
use chromiumoxide::page::ScreenshotParams;
use chromiumoxide::Page;
use fake_llm::{Reply, Responder};
use forge_testkit::browser::{Confine, Shared};
use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Canary, Response, Site};
use futures::StreamExt;
use serde_json::{json, Value};

const TOKEN: &str = "watch-page-test-token-0123456789abcdef";

static FIXTURE: OnceLock<Option<Shared>> = OnceLock::new();

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

fn artifacts_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let d = target.join("test-artifacts");
    std::fs::create_dir_all(&d).expect("target/test-artifacts");
    d
}

/// One HTTP/1.1 exchange with the server on loopback: (status, body).
fn http(port: u16, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let payload = body.map(Value::to_string).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).expect("write");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read the answer");
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

fn send(port: u16, text: &str, blocking: bool) -> Value {
    let msg = json!({"kind": "message", "role": "user", "messageId": format!("m-{text}"), "parts": [{"kind": "text", "text": text}]});
    let (status, body) = http(
        port,
        "POST",
        "/",
        Some(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": blocking}}}),
        ),
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("JSON-RPC answer")
}

async fn eval<T: serde::de::DeserializeOwned>(page: &Page, js: &str) -> T {
    page.evaluate(js)
        .await
        .unwrap_or_else(|e| panic!("evaluate {js}: {e}"))
        .into_value()
        .unwrap_or_else(|e| panic!("value of {js}: {e}"))
}

/// Evaluate `js` until it is true: up to 600 tries, 100 ms apart.
async fn wait_for(page: &Page, js: &str, what: &str) {
    for _ in 0..600 {
        if page
            .evaluate(js)
            .await
            .ok()
            .and_then(|r| r.into_value::<bool>().ok())
            .unwrap_or(false)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let body: String = eval(page, "document.body ? document.body.innerText : ''").await;
    panic!("{what}: never true ({js}); the page says:\n{body}");
}

async fn viewport(page: &Page, width: i64, height: i64, mobile: bool) {
    page.execute(SetDeviceMetricsOverrideParams::new(
        width, height, 1.0, mobile,
    ))
    .await
    .expect("set the viewport");
}

async fn key(page: &Page, key: &str, code: i64) {
    for t in [DispatchKeyEventType::KeyDown, DispatchKeyEventType::KeyUp] {
        let mut p = DispatchKeyEventParams::new(t.clone());
        p.key = Some(key.into());
        p.code = Some(key.into());
        p.windows_virtual_key_code = Some(code);
        p.native_virtual_key_code = Some(code);
        if key == "Enter" && t == DispatchKeyEventType::KeyDown {
            p.text = Some("\r".into());
        }
        page.execute(p).await.expect("a key event");
    }
}

async fn shoot(page: &Page, name: &str, width: i64, height: i64, mobile: bool) -> PathBuf {
    viewport(page, width, height, mobile).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let png = page
        .screenshot(ScreenshotParams::builder().full_page(true).build())
        .await
        .expect("a screenshot of the watch page");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let path = artifacts_dir().join(name);
    std::fs::write(&path, &png).expect("save the screenshot");
    // Full-page capture changes the metrics; the test's viewport comes back.
    viewport(page, width, height, mobile).await;
    path
}

/// A JSON Schema subset (type, required, properties, items, enum, minimum) checker: the errors.
fn check(schema: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            _ => false,
        };
        if !ok {
            errors.push(format!("{at}: not {t}: {v}"));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errors.push(format!("{at}: {v} not one of {e:?}"));
        }
    }
    if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if n < min {
            errors.push(format!("{at}: {n} < {min}"));
        }
    }
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let k = r.as_str().unwrap_or("");
        if v.get(k).is_none() {
            errors.push(format!("{at}: required member {k} missing"));
        }
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (k, s) in props {
            if let Some(x) = v.get(k) {
                check(s, x, &format!("{at}.{k}"), errors);
            }
        }
    }
    if let (Some(items), Some(a)) = (schema.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(items, x, &format!("{at}[{i}]"), errors);
        }
    }
}

/// HAR 1.2's required fields and types (http://www.softwareishard.com/blog/har-12-spec/).
fn har_schema() -> Value {
    let name_value = json!({"type": "array", "items": {"type": "object", "required": ["name", "value"], "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}});
    json!({
        "type": "object",
        "required": ["log"],
        "properties": {"log": {
            "type": "object",
            "required": ["version", "creator", "entries"],
            "properties": {
                "version": {"type": "string", "enum": ["1.2"]},
                "creator": {"type": "object", "required": ["name", "version"], "properties": {"name": {"type": "string"}, "version": {"type": "string"}}},
                "pages": {"type": "array"},
                "entries": {"type": "array", "items": {
                    "type": "object",
                    "required": ["startedDateTime", "time", "request", "response", "cache", "timings"],
                    "properties": {
                        "startedDateTime": {"type": "string"},
                        "time": {"type": "number", "minimum": 0},
                        "serverIPAddress": {"type": "string"},
                        "request": {"type": "object",
                            "required": ["method", "url", "httpVersion", "cookies", "headers", "queryString", "headersSize", "bodySize"],
                            "properties": {"method": {"type": "string"}, "url": {"type": "string"}, "httpVersion": {"type": "string"},
                                "cookies": name_value, "headers": name_value, "queryString": name_value,
                                "headersSize": {"type": "integer"}, "bodySize": {"type": "integer"}}},
                        "response": {"type": "object",
                            "required": ["status", "statusText", "httpVersion", "cookies", "headers", "content", "redirectURL", "headersSize", "bodySize"],
                            "properties": {"status": {"type": "integer"}, "statusText": {"type": "string"}, "httpVersion": {"type": "string"},
                                "cookies": name_value, "headers": name_value,
                                "content": {"type": "object", "required": ["size", "mimeType"], "properties": {"size": {"type": "integer"}, "mimeType": {"type": "string"}}},
                                "redirectURL": {"type": "string"}, "headersSize": {"type": "integer"}, "bodySize": {"type": "integer"}}},
                        "cache": {"type": "object"},
                        "timings": {"type": "object", "required": ["send", "wait", "receive"],
                            "properties": {"send": {"type": "number", "minimum": -1}, "wait": {"type": "number", "minimum": -1}, "receive": {"type": "number", "minimum": -1}}}
                    }
                }}
            }
        }}
    })
}

#[test]
fn the_watch_page_shows_a_browser_task_and_follows_a_running_one_in_real_chromium() {
    if forge_testkit::require_browser("the watch page in real Chromium").is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let site = Site::builder().max_connections(100).start(|r| {
        if r.path.starts_with("/slow") {
            return Response::raw(Vec::new()).delayed(Duration::from_secs(60));
        }
        Response::html("<!doctype html><title>Shelf page</title><h1>Dune is on shelf C-7</h1>")
    });
    let canary = Canary::start();
    let (site_url, canary_url) = (site.url("/"), canary.url("/"));
    let slow_url = site.url("/slow");
    let respond: Responder = Arc::new(move |i, _req| {
        let calls = |name: &str, args: Value| {
            Reply::Json(
                200,
                vec![],
                fake_llm::openai_tool_calls(&[(&format!("call_{i}"), name, args)]),
            )
        };
        match i {
            0 => calls("browser_navigate", json!({"url": site_url})),
            1 => calls("browser_screenshot", json!({"filename": "shelf.png"})),
            2 => calls("browser_navigate", json!({"url": canary_url})),
            3 => Reply::Json(200, vec![], fake_llm::openai_text("Dune is on shelf C-7.")),
            4 => calls(
                "browser_navigate",
                json!({"url": slow_url, "timeout_ms": 6000}),
            ),
            _ => Reply::Json(
                200,
                vec![],
                fake_llm::openai_text("The slow page did not answer."),
            ),
        }
    });
    let fake = rt.block_on(fake_llm::start(respond));

    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir_all(dir.path().join("skills/look")).expect("skill dir");
    std::fs::write(
        dir.path().join("skills/look/SKILL.md"),
        format!("---\nname: look\ndescription: Look at the test page.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{}\"]\n---\nOpen the page and report.\n", site.entry()),
    )
    .expect("skill");
    let cfg = dir.path().join("forge.yaml");
    std::fs::write(
        &cfg,
        format!("agent_id: watch-agent\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-fake\n  base_url: {}/v1\negress:\n  mode: allowlist\n", fake.base()),
    )
    .expect("forge.yaml");
    let audit = dir.path().join("audit.ndjson");
    let mut child = forge_testkit::forge!()
        .env("OPENAI_API_KEY", "sk-test-watch-0000")
        .env("FORGE_RUNTIME_TOKEN", TOKEN)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--host", "0.0.0.0", "--port", "0", "--audit-file"])
        .arg(&audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start forge run");
    let stdout = child.stdout.take().expect("stdout");
    let _server = Server(child);
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the first line");
    let port: u16 = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .and_then(|u| u.trim_end_matches('/').rsplit(':').next()?.parse().ok())
        .unwrap_or_else(|| panic!("a URL with a port: {first}"));
    let base = format!("http://127.0.0.1:{port}");

    // The task: navigate, a refused host, a screenshot, the answer.
    let done = send(port, "Which shelf is Dune on?", true);
    let task = &done["result"];
    assert_eq!(task["status"]["state"], "completed", "{done}");
    let id = task["id"].as_str().expect("task id").to_string();
    assert_eq!(canary.hits(), 0, "the refused host was never reached");

    // The watcher's Chromium: its own proxy allows the forge server and nothing else.
    let shared = FIXTURE
        .get_or_init(|| {
            Shared::start(
                "the watch page",
                &[format!("127.0.0.1:{port}")],
                Confine::No,
            )
        })
        .as_ref()
        .expect("the browser fixture (Chromium is installed: the gate passed)");
    let since = std::time::Instant::now();
    let requests: Arc<Mutex<Vec<String>>> = Arc::default();
    let page = shared.rt.block_on(async {
        shared
            .manager
            .session("watcher")
            .await
            .expect("a watcher session");
        let page = shared
            .manager
            .active_page("watcher")
            .await
            .expect("its page");
        page.execute(EnableParams::default())
            .await
            .expect("network events");
        let mut events = page
            .event_listener::<EventRequestWillBeSent>()
            .await
            .expect("request events");
        let seen = requests.clone();
        tokio::spawn(async move {
            // Ends when the page goes away (bounded by the test's life).
            while let Some(ev) = events.next().await {
                seen.lock().expect("requests").push(ev.request.url.clone());
            }
        });
        page
    });

    shared.rt.block_on(async {
        viewport(&page, 1280, 900, false).await;
        page.goto(format!("{base}/ui?token={TOKEN}")).await.expect("open /ui");
        let row = format!("document.querySelector('tr[data-task=\"{id}\"]') !== null");
        wait_for(&page, &row, "the task is listed").await;
        let href: String = eval(&page, "location.href").await;
        assert_eq!(href, format!("{base}/ui"), "the token left the URL");
        let cookie: String = eval(&page, "document.cookie").await;
        assert!(!cookie.contains(TOKEN), "the cookie is HttpOnly: {cookie:?}");
        let state: String = eval(&page, &format!("document.querySelector('tr[data-task=\"{id}\"] .badge').textContent")).await;
        assert_eq!(state, "completed");

        // Keyboard only: Tab to the task's link, Enter opens it.
        let focused = format!("document.activeElement && document.activeElement.getAttribute('href') === '#task/{id}'");
        let mut reached = false;
        for _ in 0..30 {
            key(&page, "Tab", 9).await;
            if eval::<bool>(&page, &focused).await {
                reached = true;
                break;
            }
        }
        assert!(reached, "Tab reaches the task's link");
        key(&page, "Enter", 13).await;
        wait_for(&page, "!document.getElementById('detail-body').hidden && document.querySelectorAll('#timeline li').length > 3", "the task opens").await;
        wait_for(&page, "document.getElementById('audit').textContent.includes('verifies')", "the audit check").await;

        let timeline: Vec<String> = eval(&page, "[...document.querySelectorAll('#timeline li')].map(li => li.textContent)").await;
        let has = |s: &str| timeline.iter().any(|t| t.contains(s));
        assert!(has("tool browser_navigate"), "{timeline:?}");
        assert!(has("tool browser_screenshot"), "{timeline:?}");
        assert!(has("model turn"), "{timeline:?}");
        assert!(has(&site.url("/")), "the navigate's arguments are shown: {timeline:?}");
        let egress: Vec<Vec<String>> = eval(&page, "[...document.querySelectorAll('#egress-rows tr')].map(tr => [...tr.cells].map(c => (c.querySelector('.host') || c).textContent))").await;
        let refused = egress
            .iter()
            .find(|r| r.first().is_some_and(|h| h == &canary.entry()))
            .unwrap_or_else(|| panic!("the refused host is listed: {egress:?}"));
        assert_eq!(refused[1], "refused", "{refused:?}");
        assert!(refused[3].starts_with("browser_navigate"), "{refused:?}");
        let allowed = egress
            .iter()
            .find(|r| r.first().is_some_and(|h| h == &site.entry()))
            .unwrap_or_else(|| panic!("the allowed host is listed: {egress:?}"));
        assert_eq!(allowed[1], "allowed", "{allowed:?}");
        // The rule shown is the one the audit log recorded for that decision.
        let log = std::fs::read_to_string(&audit).expect("audit log");
        let rule_of = |host: &str, decision: &str| {
            log.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|e| e["event"] == "task_egress" && e["task_id"] == id.as_str() && e["decision"] == decision && format!("{}:{}", e["host"].as_str().unwrap_or(""), e["port"]) == host)
                .and_then(|e| e["rule"].as_str().map(str::to_string))
                .unwrap_or_else(|| panic!("a task_egress {decision} for {host} in the audit log"))
        };
        let refused_rule = rule_of(&canary.entry(), "refused");
        assert!(!refused_rule.is_empty());
        assert_eq!(refused[2], refused_rule);
        assert!(timeline.iter().any(|t| t.contains("egress refused") && t.contains(&refused_rule)), "{timeline:?}");
        assert_eq!(allowed[2], rule_of(&site.entry(), "allowed"));

        // The screenshot is inline, loaded from forge's artifact route.
        wait_for(&page, "[...document.querySelectorAll('#artifacts img')].some(i => i.complete && i.naturalWidth > 100)", "the screenshot shows").await;
        let src: String = eval(&page, "document.querySelector('#artifacts img').getAttribute('src')").await;
        assert_eq!(src, format!("/artifacts/{id}/shelf.png"));
        let har_href: String = eval(&page, "document.getElementById('har-link').getAttribute('href')").await;
        assert_eq!(har_href, format!("/tasks/{id}/egress"));

        let wide = shoot(&page, "watch-1280.png", 1280, 900, false).await;
        let overflow: i64 = eval(&page, "document.documentElement.scrollWidth").await;
        assert!(overflow <= 1280, "no sideways scrolling at 1280 px: {overflow}");
        let narrow = shoot(&page, "watch-390.png", 390, 844, true).await;
        // What a phone shows first (the full page is long).
        let top = page
            .screenshot(ScreenshotParams::builder().build())
            .await
            .expect("a viewport screenshot");
        std::fs::write(artifacts_dir().join("watch-390-top.png"), &top).expect("save");
        let overflow: i64 = eval(&page, "document.documentElement.scrollWidth").await;
        assert!(overflow <= 390, "no sideways scrolling at 390 px: {overflow}");
        println!("watch page screenshots: {} {}", wide.display(), narrow.display());
        viewport(&page, 1280, 900, false).await;

        // A running task shows up and finishes on the open page: no reload.
        let _: bool = eval(&page, "(window.__sameDocument = true)").await;
        wait_for(&page, "document.getElementById('live').textContent === 'live'", "the event stream is open").await;
    });
    let sent = send(port, "Open the slow page", false);
    let id2 = sent["result"]["id"]
        .as_str()
        .expect("second task id")
        .to_string();
    shared.rt.block_on(async {
        let badge = format!("(document.querySelector('tr[data-task=\"{id2}\"] .badge') || {{}}).textContent");
        wait_for(&page, &format!("{badge} === 'working'"), "the running task is listed as working").await;
        let _: bool = eval(&page, &format!("(location.hash = '#task/{id2}', true)")).await;
        wait_for(&page, "[...document.querySelectorAll('#timeline li')].some(li => li.textContent.includes('tool browser_navigate') && li.textContent.includes('running'))", "the running call shows").await;
        shoot(&page, "watch-running-1280.png", 1280, 900, false).await;
        wait_for(&page, &format!("{badge} === 'completed'"), "the task finishes on the open page").await;
        wait_for(&page, "[...document.querySelectorAll('#timeline li')].some(li => li.textContent.includes('tool browser_navigate') && li.textContent.includes('failed'))", "the call's end shows").await;
        assert!(eval::<bool>(&page, "window.__sameDocument === true").await, "the page was not reloaded");
    });

    // Everything the page loaded came from forge, and its proxy refused nothing.
    let urls = requests.lock().expect("requests").clone();
    assert!(urls.iter().any(|u| u.ends_with("/ui/app.js")), "{urls:?}");
    assert!(urls.iter().any(|u| u.ends_with("/ui/app.css")), "{urls:?}");
    assert!(
        urls.iter().any(|u| u.ends_with("/ui/api/events")),
        "{urls:?}"
    );
    assert!(urls.iter().any(|u| u.contains("/artifacts/")), "{urls:?}");
    let elsewhere: Vec<&String> = urls
        .iter()
        .filter(|u| !u.starts_with(&format!("{base}/")))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "requests outside forge: {elsewhere:?}"
    );
    assert!(
        shared.log.hosts_since(since).is_empty(),
        "the watcher's proxy refused {:?}",
        shared.log.hosts_since(since)
    );

    // The ledger as HAR 1.2, from the server and from the audit log.
    let (status, body) = http(port, "GET", &format!("/tasks/{id}/egress"), None);
    assert_eq!(status, 200, "{body}");
    let har: Value = serde_json::from_str(&body).expect("HAR JSON");
    let mut errors = Vec::new();
    check(&har_schema(), &har, "$", &mut errors);
    assert!(errors.is_empty(), "not HAR 1.2: {errors:?}\n{har}");
    let entries = har["log"]["entries"].as_array().expect("entries");
    let find = |url: &str, decision: &str| {
        entries
            .iter()
            .find(|e| e["request"]["url"] == url && e["_forge"]["decision"] == decision)
            .unwrap_or_else(|| panic!("{url} {decision} in {har}"))
    };
    let ok = find(&format!("http://{}/", site.entry()), "allowed");
    assert_eq!(ok["response"]["status"], 200);
    assert!(ok["response"]["bodySize"].as_i64().unwrap_or(0) > 0, "{ok}");
    assert_eq!(ok["_forge"]["tool"], "browser_navigate");
    let no = find(&format!("http://{}/", canary.entry()), "refused");
    assert_eq!(no["response"]["status"], 403);
    assert!(
        !no["_forge"]["rule"].as_str().unwrap_or("").is_empty(),
        "{no}"
    );
    let out = forge_testkit::forge!()
        .args(["audit", "har", "--verify"])
        .arg(&audit)
        .arg(&id)
        .output()
        .expect("forge audit har");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: Value = serde_json::from_slice(&out.stdout).expect("HAR from the audit log");
    assert_eq!(
        exported["log"]["entries"], har["log"]["entries"],
        "the same ledger both ways"
    );
    let unknown = forge_testkit::forge!()
        .args(["audit", "har"])
        .arg(&audit)
        .arg("no-such-task")
        .output()
        .expect("forge audit har");
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr)
        .contains("no event in the log names task no-such-task"));
    shared.rt.block_on(async {
        shared.manager.close_session("watcher").await;
    });
}
