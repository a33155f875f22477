//! Hand-off to a person for real: an agent served over A2A (`Runner::serve_a2a`, the fake
//! OpenAI server from forge-testkit as its model) opens a loopback page that asks for a one-time
//! code and calls `browser_handoff`. The task goes `input-required` with a one-time link; the
//! test's "person" is a second Chromium (forge-testkit's shared fixture, driven with forge's own
//! browser tools) that opens the link, sees a frame, clicks the picture of the field, types the
//! code the test computed and presses Done. The task completes, the page's server saw the code,
//! the model got "the person finished: <note>", the link is refused a second time and the audit
//! log names the hand-off (never its token). A hand-off left alone times out with a clear error
//! the model sees.

use std::io::Write;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use forge_runtime::{AuditLog, AuditTarget, ModelChoice, Runner, RunnerOptions, ServeOptions};
use forge_skills::Agent;
use forge_testkit::browser::{Confine, Shared};
use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Response, Site};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The test's browser skill; `{hint}` is its `timeout_hint` line (or nothing).
const SKILL: &str = "---\nname: web-browse-test\ndescription: Browse the test site.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: []\n{hint}---\n# Browse\nUse the browser tools; call browser_handoff when a person is needed.\n";

/// A page that asks for a one-time code: its field fills the whole viewport, so a click
/// anywhere on the picture of the tab lands in it; Enter submits to /verify.
const CODE_PAGE: &str = r#"<!doctype html><html><head><title>Second factor</title>
<style>body{margin:0} #code{position:fixed;left:0;top:0;width:100vw;height:100vh;font-size:40px;border:0;margin:0;padding:0}</style>
</head><body><form action="/verify"><input id=code name=code aria-label="One-time code" placeholder="Enter the code we sent you"></form></body></html>"#;

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buf").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("buf")).into_owned()
    }
}

fn agent(model_base: &str, handoff_timeout: &str, hint: &str) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().expect("tmp");
    let yaml = format!(
        "agent_id: handoff\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: fake-model\n  base_url: {model_base}/v1\negress:\n  mode: allowlist\n  allowed_domains: []\nbrowser:\n  handoff_timeout: {handoff_timeout}\n"
    );
    std::fs::write(dir.path().join("forge.yaml"), yaml).expect("forge.yaml");
    let d = dir.path().join("skills/web-browse-test");
    std::fs::create_dir_all(&d).expect("skill dir");
    std::fs::write(d.join("SKILL.md"), SKILL.replace("{hint}", hint)).expect("SKILL.md");
    let agent = Agent::load(dir.path().join("forge.yaml")).expect("agent loads");
    (dir, agent)
}

fn env() -> forge_runtime::EnvFn {
    Arc::new(|k| (k == "OPENAI_API_KEY").then(|| "sk-test-handoff".to_string()))
}

/// The model: navigate to `url` (`navigations` times: the first may have to wait for Chromium
/// to launch), hand off, then answer with the last tool result it got.
fn model_script(url: String, navigations: usize) -> fake_llm::Responder {
    Arc::new(move |i, req| {
        let body = if i < navigations {
            fake_llm::openai_tool_calls(&[(
                &format!("n{i}"),
                "browser_navigate",
                json!({"url": url}),
            )])
        } else if i == navigations {
            fake_llm::openai_tool_calls(&[(
                "h1",
                "browser_handoff",
                json!({"reason": "enter the one-time code sent to the user's phone"}),
            )])
        } else {
            let last = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
            fake_llm::openai_text(&format!("model saw: {last}"))
        };
        fake_llm::Reply::Json(200, vec![], body)
    })
}

/// One HTTP/1.1 request to `addr`: (status, head, body).
async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// [`http`] with `host` as the Host header and extra headers.
async fn http_as(
    addr: std::net::SocketAddr,
    host: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    extra: &[(&str, &str)],
) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let extra: String = extra.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let req = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("an answer within 30 s")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// Read a frame stream until its first JPEG part has begun (at most 20 s): the response head.
async fn first_frame(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut buf = Vec::new();
    let jpeg_start = |b: &[u8]| {
        b.windows(4).any(|w| w == b"\r\n\r\n")
            && b.windows(18).any(|w| w == b"Content-Type: imag")
            && b.windows(2).any(|w| w == [0xFF, 0xD8])
    };
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut chunk = [0u8; 8192];
        while !jpeg_start(&buf) {
            let n = s.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the stream ended before a frame");
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("a JPEG frame within 20 s");
    let text = String::from_utf8_lossy(&buf).into_owned();
    text.split("\r\n\r\n").next().unwrap_or("").to_string()
}

async fn rpc(addr: std::net::SocketAddr, method: &str, params: Value) -> Value {
    let (status, _, body) = http(
        addr,
        "POST",
        "/",
        Some(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).expect("json");
    v["result"].clone()
}

/// Start a task (non-blocking) and return its id.
async fn start_task(addr: std::net::SocketAddr, text: &str) -> String {
    let msg = json!({"kind": "message", "role": "user", "messageId": format!("m-{text}"), "parts": [{"kind": "text", "text": text}]});
    let task = rpc(
        addr,
        "message/send",
        json!({"message": msg, "configuration": {"blocking": false}}),
    )
    .await;
    task["id"].as_str().expect("a task id").to_string()
}

/// Poll the task until `pred` holds (at most 90 s).
async fn wait_task(
    addr: std::net::SocketAddr,
    id: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    for _ in 0..900 {
        let t = rpc(addr, "tasks/get", json!({"id": id})).await;
        if pred(&t) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} never reached: {what}");
}

/// The test's code: computed from the site's port, so no two runs share one.
/// The hand-off agent (its model script navigating `navigations` times, `handoff_timeout`,
/// skill line `hint`) allowed to reach `site_port`, running and serving A2A on loopback, its
/// audit log to `audit` when given.
async fn serve_agent(
    site_port: u16,
    navigations: usize,
    handoff_timeout: &str,
    hint: &str,
    audit: Option<AuditTarget>,
) -> (
    fake_llm::FakeLlm,
    tempfile::TempDir,
    Runner,
    forge_runtime::A2aServer,
) {
    let fake = fake_llm::start(model_script(
        format!("http://127.0.0.1:{site_port}/"),
        navigations,
    ))
    .await;
    let (dir, agent) = agent(&fake.base(), handoff_timeout, hint);
    let mut options = RunnerOptions {
        allow: vec![format!("127.0.0.1:{site_port}")],
        model: Some(ModelChoice::default()),
        env: env(),
        ..Default::default()
    };
    if let Some(audit) = audit {
        options.audit = audit;
    }
    let runner = Runner::start(&agent, options).await.expect("runner");
    let server = runner
        .serve_a2a(ServeOptions {
            host: IpAddr::from([127, 0, 0, 1]),
            port: 0,
            probe_port: None,
        })
        .await
        .expect("serve");
    (fake, dir, runner, server)
}

fn code_for(port: u16) -> String {
    format!("{:06}", (u64::from(port) * 7919 + 12345) % 1_000_000)
}

#[test]
fn a_person_opens_the_link_types_the_code_presses_done_and_the_task_completes() {
    let site = Site::start(|r| {
        if r.path.starts_with("/verify") {
            Response::html("<title>Verified</title><p>Code accepted</p>")
        } else {
            Response::html(CODE_PAGE)
        }
    });
    let code = code_for(site.port());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let audit = Buf::default();
    let (fake, runner, server, _dir) = {
        let audit = audit.clone();
        let port = site.port();
        match rt.block_on(async move {
            forge_testkit::require_browser("handoff: agent side")?;
            let (fake, dir, runner, server) = serve_agent(
                port,
                1,
                "10m",
                "",
                Some(AuditTarget::Log(AuditLog::to_writer(Box::new(audit)))),
            )
            .await;
            Some((fake, runner, server, dir))
        }) {
            Some(v) => v,
            None => return,
        }
    };
    let addr = server.addr;
    let (id, link) = rt.block_on(async {
        let id = start_task(addr, "log in to the site").await;
        let t = wait_task(addr, &id, "input-required", |t| {
            t["status"]["state"] == "input-required"
        })
        .await;
        let data = &t["status"]["message"]["parts"][1]["data"];
        assert_eq!(data["event"], "handoff", "{t}");
        let text = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(text.contains("enter the one-time code"), "{text}");
        (id, data["url"].as_str().expect("a link").to_string())
    });
    assert!(
        link.starts_with(&format!("http://{addr}/handoff/t/")),
        "{link}"
    );

    rt.block_on(async {
        // A watcher's live view: the same rules as the API (a foreign Host is refused), and
        // its stream brings JPEG frames.
        let (status, _, _) = http_as(
            addr,
            "evil.example",
            "GET",
            &format!("/ui/tasks/{id}/live"),
            None,
            &[],
        )
        .await;
        assert_eq!(status, 403, "a foreign Host is refused");
        let (status, _, body) = http(addr, "GET", &format!("/ui/tasks/{id}/live"), None).await;
        assert_eq!(status, 200);
        assert!(body.contains("src=\"live/frames\""), "{body}");
        let head = first_frame(addr, &format!("/ui/tasks/{id}/live/frames")).await;
        assert!(head.contains("multipart/x-mixed-replace"), "{head}");
        // The hand-off's routes need the cookie the link gives.
        let (status, _, _) = http_as(
            addr,
            &addr.to_string(),
            "POST",
            "/handoff/h-0000000000000000/done",
            Some(&json!({})),
            &[],
        )
        .await;
        assert_eq!(status, 403, "no cookie, no hand-off");
        let (status, _, _) = http_as(
            addr,
            "evil.example",
            "GET",
            link.trim_start_matches(&format!("http://{addr}")),
            None,
            &[],
        )
        .await;
        assert_eq!(
            status, 403,
            "a foreign Host cannot redeem the link (and did not use it up)"
        );
    });

    // The person: a second Chromium whose proxy lets it reach the A2A server only.
    let person = Shared::start(
        "handoff: the person's browser",
        &[format!("127.0.0.1:{}", addr.port())],
        Confine::WhereAvailable,
    )
    .expect("the browser gate passed above");
    let ctx = person.context("person");
    let seen = person
        .run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": link, "wait_for": "showing the tab live"}),
        )
        .expect("the hand-off page opens");
    assert!(seen.contains("A person is needed"), "{seen}");
    assert!(
        seen.contains("showing the tab live"),
        "a frame arrived: {seen}"
    );
    // While the person works, the link is spent: a second visitor is refused.
    let (status, _, body) = rt.block_on(http(
        addr,
        "GET",
        link.trim_start_matches(&format!("http://{addr}")),
        None,
    ));
    assert_eq!(status, 410, "{body}");
    person
        .run_tool(&ctx, "browser_click", json!({"selector": "#screen"}))
        .expect("click the picture of the field");
    for c in code.chars() {
        person
            .run_tool(&ctx, "browser_press", json!({"key": c.to_string()}))
            .expect("type a digit");
    }
    person
        .run_tool(&ctx, "browser_press", json!({"key": "Enter"}))
        .expect("submit the code");
    // The agent's page submitted the code to its server (the person's input reached the tab).
    let want = format!("/verify?code={code}");
    let mut saw = false;
    for _ in 0..100 {
        if site.paths.lock().expect("paths").iter().any(|p| p == &want) {
            saw = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        saw,
        "the site saw {want}: {:?}",
        site.paths.lock().expect("paths")
    );
    person
        .run_tool(
            &ctx,
            "browser_fill",
            json!({"selector": "#note", "value": "code entered"}),
        )
        .expect("note");
    let done = person
        .run_tool(
            &ctx,
            "browser_click",
            json!({"selector": "#done", "wait_for": {"text": "the agent carries on"}}),
        )
        .expect("Done");
    assert!(done.contains("the agent carries on"), "{done}");

    let audit_text = rt.block_on(async {
        let t = wait_task(addr, &id, "completed", |t| {
            t["status"]["state"] == "completed"
        })
        .await;
        let answer = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            answer.contains("the person finished: code entered"),
            "the model got the note: {answer}"
        );
        assert!(
            answer.contains("Code accepted"),
            "and a fresh observation of the tab: {answer}"
        );
        // The same link a second time: refused.
        let path = link.trim_start_matches(&format!("http://{addr}"));
        let (status, _, body) = http(addr, "GET", path, None).await;
        assert_eq!(status, 410, "{body}");
        assert!(body.contains("used already"), "{body}");
        server.shutdown().await;
        runner.shutdown().await;
        audit.text()
    });
    assert!(fake.count() >= 3);
    let token = link.rsplit('/').next().expect("token");
    assert!(
        !audit_text.contains(token),
        "the audit log never holds the token"
    );
    let events: Vec<Value> = audit_text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let start = events
        .iter()
        .find(|e| e["event"] == "handoff_start")
        .expect("handoff_start audited");
    let end = events
        .iter()
        .find(|e| e["event"] == "handoff_end")
        .expect("handoff_end audited");
    let hid = start["fields"]["handoff"]
        .as_str()
        .or(start["handoff"].as_str())
        .expect("the hand-off id");
    assert!(hid.starts_with("h-"), "{start}");
    let f = if end["fields"].is_object() {
        &end["fields"]
    } else {
        end
    };
    assert_eq!(f["outcome"], "done", "{end}");
    assert_eq!(f["finished_by"], hid, "{end}");
    assert!(f["duration_ms"].as_u64().is_some(), "{end}");
}

#[test]
fn a_handoff_left_alone_times_out_with_an_error_the_model_sees() {
    let site = Site::start(|_| Response::html(CODE_PAGE));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        if forge_testkit::require_browser("handoff timeout").is_none() {
            return;
        }
        // A 2 s timeout_hint (meant for actions) does not cut the 4 s hand-off short.
        let (_fake, _dir, runner, server) =
            serve_agent(site.port(), 2, "4s", "    timeout_hint: 2\n", None).await;
        let addr = server.addr;
        let id = start_task(addr, "log in").await;
        let t = wait_task(addr, &id, "input-required", |t| {
            t["status"]["state"] == "input-required"
        })
        .await;
        let link = t["status"]["message"]["parts"][1]["data"]["url"]
            .as_str()
            .expect("link")
            .to_string();
        let t = wait_task(addr, &id, "completed", |t| {
            t["status"]["state"] == "completed"
        })
        .await;
        let answer = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            answer.contains("nobody finished the hand-off within 4 s")
                && answer.contains("browser.handoff_timeout"),
            "the model saw the time-out: {answer}"
        );
        // The link of an ended hand-off is refused.
        let path = link.trim_start_matches(&format!("http://{addr}"));
        let (status, _, _) = http(addr, "GET", path, None).await;
        assert_eq!(status, 410);
        server.shutdown().await;
        runner.shutdown().await;
    });
}

#[test]
fn cancel_ends_the_handoff_with_an_error_and_a_page_of_another_origin_cannot_post() {
    let site = Site::start(|_| Response::html(CODE_PAGE));
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        if forge_testkit::require_browser("handoff cancel").is_none() {
            return;
        }
        let (_fake, _dir, runner, server) = serve_agent(site.port(), 1, "10m", "", None).await;
        let addr = server.addr;
        let id = start_task(addr, "log in").await;
        let t = wait_task(addr, &id, "input-required", |t| {
            t["status"]["state"] == "input-required"
        })
        .await;
        let data = &t["status"]["message"]["parts"][1]["data"];
        let link = data["url"].as_str().expect("link").to_string();
        let hid = data["handoffId"].as_str().expect("id").to_string();
        // Redeem the link over plain HTTP: a redirect to the hand-off page and its cookie.
        let (status, head, _) = http(
            addr,
            "GET",
            link.trim_start_matches(&format!("http://{addr}")),
            None,
        )
        .await;
        assert_eq!(status, 303, "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains(&format!("location: /handoff/{hid}/")),
            "{head}"
        );
        let cookie_line = head
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
            .expect("a cookie");
        assert!(
            cookie_line.contains("HttpOnly") && cookie_line.contains("SameSite=Strict"),
            "{cookie_line}"
        );
        let cookie = cookie_line
            .split_once(':')
            .map(|(_, v)| v.trim())
            .and_then(|v| v.split(';').next())
            .expect("name=value")
            .to_string();
        let host = addr.to_string();
        // A page of another origin cannot post, even with the person's cookie.
        let (status, _, _) = http_as(
            addr,
            &host,
            "POST",
            &format!("/handoff/{hid}/cancel"),
            Some(&json!({})),
            &[("cookie", &cookie), ("origin", "http://evil.example")],
        )
        .await;
        assert_eq!(status, 403, "another origin is refused");
        // The person's page presses Cancel.
        let origin = format!("http://{host}");
        let (status, _, body) = http_as(
            addr,
            &host,
            "POST",
            &format!("/handoff/{hid}/cancel"),
            Some(&json!({})),
            &[("cookie", &cookie), ("origin", &origin)],
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let t = wait_task(addr, &id, "completed", |t| {
            t["status"]["state"] == "completed"
        })
        .await;
        let answer = t["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(
            answer.contains("the person cancelled the hand-off"),
            "the model saw the cancel: {answer}"
        );
        // The hand-off is over: its page is gone for the person too.
        let (status, _, _) = http_as(
            addr,
            &host,
            "GET",
            &format!("/handoff/{hid}/"),
            None,
            &[("cookie", &cookie)],
        )
        .await;
        assert_eq!(status, 403);
        server.shutdown().await;
        runner.shutdown().await;
    });
}
