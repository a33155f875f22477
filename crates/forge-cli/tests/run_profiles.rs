//! Login profiles end to end (issue 22, point 5): real `forge run` processes serving A2A, a fake
//! OpenAI server playing the model, real Chromium through the real egress proxy, two loopback
//! sites. Task 1 (A2A `metadata.forge.profile: portal`) logs in with `browser_fill {secret}`; the
//! portal sets a session cookie, and local storage, and a second site (another loopback port)
//! sets a cookie of its own. Task 2, in a **new forge process**, is logged in on its first
//! navigation without any fill, its page finds the local storage, and the other site's cookie was
//! not restored. The state database holds no cookie value in plaintext (raw bytes of the file and
//! its WAL). A wrong key and no key are clear errors. The same over PostgreSQL with two replicas:
//! replica B uses the profile replica A saved.

// Test: prints diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_llm::{Reply, Responder};
use forge_testkit::cli::Terminating as Server;
use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Request, Response, Site};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USER: &str = "alice.p5w2";
const PASSWORD: &str = "Pw7k3NqR8sT";
/// The portal's session cookie value (random-looking, so finding it in a file means a leak).
const SESSION: &str = "sessZ9q4Xk2Lm7Vb";
/// The other site's cookie value.
const TRACKER: &str = "trkQ2w8Ej5Hn1Pd";
/// What the portal keeps in local storage.
const PREF: &str = "prefU6y1Ta9Wc3Ro";
const KEY: &str = "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12";
const OTHER_KEY: &str = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";

fn cookie_has(r: &Request, pair: &str) -> bool {
    r.headers
        .get("cookie")
        .is_some_and(|c| c.split(';').any(|kv| kv.trim() == pair))
}

fn portal(r: &Request) -> Response {
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/login") => Response::html(
            r#"<!doctype html><title>Portal login</title>
<form method=post action="/login">
<label for=u>Username</label> <input id=u name=u autocomplete=username>
<label for=p>Password</label> <input id=p name=p type=password autocomplete=current-password>
<button type=submit>Sign in</button></form>"#,
        ),
        ("POST", "/login") => {
            let body = String::from_utf8_lossy(&r.body).to_string();
            let ok = body.contains(&format!("u={USER}")) && body.contains(&format!("p={PASSWORD}"));
            match ok {
                true => Response::html(format!(
                    "<!doctype html><title>Welcome</title><p>Signed in</p><script>localStorage.setItem('portal_pref', '{PREF}')</script>"
                ))
                .header("set-cookie", &format!("sid={SESSION}; Path=/; HttpOnly")),
                false => Response::html("<!doctype html><title>Denied</title><p>wrong login</p>"),
            }
        }
        ("GET", "/home") => match cookie_has(r, &format!("sid={SESSION}")) {
            // The page says whether the storage came back, never the value.
            true => Response::html(format!(
                "<!doctype html><title>Home</title><p>logged in as alice</p><p id=ls>checking</p><script>document.getElementById('ls').textContent = localStorage.getItem('portal_pref') === '{PREF}' ? 'storage restored' : 'storage missing'</script>"
            )),
            false => Response::html("<!doctype html><title>Home</title><p>logged out</p>"),
        },
        _ => Response::not_found(),
    }
}

fn other(r: &Request) -> Response {
    match r.path.as_str() {
        "/set" => Response::html("<!doctype html><title>Other</title><p>tracker set</p>")
            .header("set-cookie", &format!("tracker={TRACKER}; Path=/")),
        "/show" => Response::html(format!(
            "<!doctype html><title>Other</title><p>tracker cookie: {}</p>",
            if cookie_has(r, &format!("tracker={TRACKER}")) {
                "present"
            } else {
                "absent"
            }
        )),
        _ => Response::not_found(),
    }
}

/// The ref on the first line of `obs` that mentions `needle`.
fn ref_of(obs: &str, needle: &str) -> Option<String> {
    obs.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_string)
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

fn nav(id: &str, url: String) -> Reply {
    Reply::Json(
        200,
        vec![],
        fake_llm::openai_tool_calls(&[(id, "browser_navigate", json!({ "url": url }))]),
    )
}

/// Task 1's model: log in with the secrets, visit the other site (it sets its cookie), check it.
fn login_model(portal: &Site, other: &Site) -> Responder {
    let (login, set, show) = (portal.url("/login"), other.url("/set"), other.url("/show"));
    Arc::new(move |i, req| {
        let last = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
        match i {
            0 => nav("c1", login.clone()),
            1 => {
                let (Some(u), Some(p)) =
                    (ref_of(&last, "\"Username\""), ref_of(&last, "\"Password\""))
                else {
                    return Reply::Json(
                        200,
                        vec![],
                        fake_llm::openai_text(&format!("no form: {last}")),
                    );
                };
                Reply::Json(
                    200,
                    vec![],
                    fake_llm::openai_tool_calls(&[
                        (
                            "c2",
                            "browser_fill",
                            json!({"ref": u, "secret": "portal_user"}),
                        ),
                        (
                            "c3",
                            "browser_fill",
                            json!({"ref": p, "secret": "portal_password", "submit": true}),
                        ),
                    ]),
                )
            }
            2 => nav("c4", set.clone()),
            3 => nav("c5", show.clone()),
            _ => Reply::Json(
                200,
                vec![],
                fake_llm::openai_text(&format!("task 1 done: {last}")),
            ),
        }
    })
}

/// Task 2's model: open the portal's home, then the other site; answer with both pages.
fn reuse_model(portal: &Site, other: &Site) -> Responder {
    let (home, show) = (portal.url("/home"), other.url("/show"));
    let seen = Arc::new(Mutex::new(String::new()));
    Arc::new(move |i, req| {
        let last = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
        match i {
            0 => nav("c1", home.clone()),
            1 => {
                *seen.lock().unwrap_or_else(|p| p.into_inner()) = last;
                nav("c2", show.clone())
            }
            _ => {
                let home = seen.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Reply::Json(
                    200,
                    vec![],
                    fake_llm::openai_text(&format!("HOME: {home}\nOTHER: {last}")),
                )
            }
        }
    })
}

fn write_agent(dir: &Path, model_base: &str, portal: &Site, other: &Site) {
    std::fs::create_dir_all(dir.join("skills/login")).expect("mkdir");
    std::fs::write(
        dir.join("skills/login/SKILL.md"),
        format!("---\nname: login\ndescription: Log in to the portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{}\", \"{}\"]\n---\nLog in with the portal secrets; later tasks use the portal profile.\n", portal.addr, other.addr),
    )
    .expect("skill");
    let origin = format!("http://{}", portal.addr);
    std::fs::write(
        dir.join("forge.yaml"),
        format!(
            "agent_id: portal-agent\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-fake\n  base_url: {model_base}/v1\negress:\n  mode: allowlist\nsecrets:\n  portal_user: {{from: \"env:PORTAL_U\", origins: [\"{origin}\"]}}\n  portal_password: {{from: \"env:PORTAL_P\", origins: [\"{origin}\"]}}\nbrowser:\n  profiles:\n    portal: {{origins: [\"{origin}\"]}}\n"
        ),
    )
    .expect("forge.yaml");
}

/// A `forge` command in `dir` with the key, the secrets, the model key and the store.
fn forge_cmd(dir: &Path, model_base: &str, key: Option<&str>, state_url: Option<&str>) -> Command {
    let mut c = forge_testkit::forge!();
    c.current_dir(dir)
        .env("OPENAI_API_KEY", "sk-test-profiles-0000")
        .env("PORTAL_U", USER)
        .env("PORTAL_P", PASSWORD)
        .env("FORGE_MODEL_BASE_URL_UNUSED", model_base)
        .env_remove("FORGE_PROFILE_KEY")
        .env_remove("FORGE_PROFILE_KEY_FILE")
        .env_remove("FORGE_STATE_URL");
    if let Some(k) = key {
        c.env("FORGE_PROFILE_KEY", k);
    }
    if let Some(u) = state_url {
        c.env("FORGE_STATE_URL", u);
    }
    c
}

/// `forge run` serving A2A; returns the server and its base URL.
fn serve(
    dir: &Path,
    model_base: &str,
    state_url: Option<&str>,
    audit: &Path,
    name: &str,
) -> (Server, String) {
    let stderr = std::fs::File::create(dir.join(format!("{name}.stderr"))).expect("stderr file");
    let child = forge_cmd(dir, model_base, Some(KEY), state_url)
        .args(["run", "--port", "0", "--audit-file"])
        .arg(audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        .spawn()
        .expect("spawn forge");
    let mut server = Server(child);
    let mut reader = BufReader::new(server.0.stdout.take().expect("stdout"));
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| {
            panic!(
                "no URL printed: {first:?}; stderr: {}",
                std::fs::read_to_string(dir.join(format!("{name}.stderr"))).unwrap_or_default()
            )
        })
        .to_string();
    // Keep reading stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
    (server, url)
}

async fn send(url: &str, text: &str, profile: &str) -> Value {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let msg = json!({"kind": "message", "role": "user", "messageId": forge_state::new_id(), "parts": [{"kind": "text", "text": text}], "metadata": {"forge": {"profile": profile}}});
    let payload = json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": true}}}).to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("send");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), s.read_to_end(&mut buf))
        .await
        .expect("answer within 120 s")
        .expect("read");
    let text = String::from_utf8_lossy(&buf).to_string();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
    serde_json::from_str(body).unwrap_or_else(|_| json!({"raw": text}))
}

fn answer(v: &Value) -> String {
    v["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string())
}

/// Task 1 on `first`, task 2 on `second` (a new process), and what both showed.
async fn two_tasks(
    dir: &Path,
    portal: &Site,
    other: &Site,
    state_url: Option<&str>,
    both_running: bool,
) -> (String, String) {
    let fake1 = fake_llm::start(login_model(portal, other)).await;
    write_agent(dir, &fake1.base(), portal, other);
    let audit1 = dir.join("audit1.ndjson");
    let (a, url_a) = serve(dir, &fake1.base(), state_url, &audit1, "a");
    let r1 = send(&url_a, "log in to the portal", "portal").await;
    let a1 = answer(&r1);
    assert_eq!(r1["result"]["status"]["state"], "completed", "{r1}");
    assert!(
        a1.contains("tracker cookie: present"),
        "task 1 set the other site's cookie: {a1}"
    );
    let posts = portal
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(posts, 1, "task 1 logged in once");
    let audit_text = std::fs::read_to_string(&audit1).unwrap_or_default();
    assert!(
        audit_text.contains("\"profile_save\"") && audit_text.contains("\"saved\":true"),
        "task 1 saved the profile: {}",
        audit_text
            .lines()
            .filter(|l| l.contains("profile"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let a_kept = match both_running {
        true => Some(a),
        false => {
            drop(a);
            None
        }
    };

    // Task 2: a new forge process, a model that never fills anything.
    let fake2 = fake_llm::start(reuse_model(portal, other)).await;
    write_agent(dir, &fake2.base(), portal, other);
    let audit2 = dir.join("audit2.ndjson");
    let (b, url_b) = serve(dir, &fake2.base(), state_url, &audit2, "b");
    let r2 = send(&url_b, "open the portal home", "portal").await;
    let a2 = answer(&r2);
    assert_eq!(r2["result"]["status"]["state"], "completed", "{r2}");
    assert_eq!(
        portal
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        1,
        "task 2 did not log in again"
    );
    let audit_text = std::fs::read_to_string(&audit2).unwrap_or_default();
    let load = audit_text
        .lines()
        .find(|l| l.contains("\"profile_load\""))
        .unwrap_or_else(|| panic!("no profile_load in task 2's audit log"));
    assert!(
        load.contains("\"cookies\":1"),
        "only the portal's cookie was restored: {load}"
    );
    for v in [SESSION, TRACKER, PREF, USER, PASSWORD] {
        assert!(
            !contains(audit_text.as_bytes(), v),
            "the audit log holds {v}"
        );
    }
    drop(b);
    drop(a_kept);
    (a1, a2)
}

/// One MCP session over stdio on `forge mcp serve --profile portal`: navigate to `url`, return
/// the tool result's text (bounded: 90 s for each answer).
fn mcp_navigate(dir: &Path, model_base: &str, url: &str) -> String {
    use std::io::Write;
    let mut child = Server(
        forge_cmd(dir, model_base, Some(KEY), None)
            .args(["mcp", "serve", "--profile", "portal", "--audit-file"])
            .arg(dir.join("audit-mcp.ndjson"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("forge mcp serve"),
    );
    let mut stdin = child.0.stdin.take().expect("stdin");
    let stdout = child.0.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let answer = |id: u64| -> Value {
        for _ in 0..1000 {
            let line = rx
                .recv_timeout(Duration::from_secs(90))
                .expect("an MCP answer within 90 s");
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if v["id"] == json!(id) {
                    return v;
                }
            }
        }
        panic!("no MCP answer with id {id}");
    };
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").expect("write");
        stdin.flush().expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "profiles-test", "version": "1"}}}),
    );
    answer(1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "browser_navigate", "arguments": {"url": url}}}),
    );
    let v = answer(2);
    drop(stdin);
    v.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_saved_by_one_process_logs_the_next_in_and_keeps_only_its_origins() {
    if forge_testkit::require_browser("login profiles across forge processes").is_none() {
        return;
    }
    let portal = Site::builder().max_connections(100).start(portal);
    let other = Site::builder().max_connections(100).start(other);
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, a2) = two_tasks(dir.path(), &portal, &other, None, false).await;
    assert!(
        a2.contains("logged in as alice"),
        "task 2 is logged in on its first navigation: {a2}"
    );
    assert!(
        a2.contains("storage restored"),
        "task 2 found the local storage: {a2}"
    );
    assert!(
        a2.contains("tracker cookie: absent"),
        "the other origin's cookie was not restored: {a2}"
    );
    // The portal's /home request of task 2 carried the session cookie and not the tracker.
    let home = portal
        .requests()
        .into_iter()
        .find(|r| r.path == "/home")
        .expect("task 2 opened /home");
    assert!(
        cookie_has(&home, &format!("sid={SESSION}")),
        "{}",
        home.head
    );
    assert!(!contains(home.head.as_bytes(), TRACKER), "{}", home.head);

    // The store: no cookie or storage value in plaintext, in the database or its WAL.
    let forge_dir = dir.path().join(".forge");
    let mut checked = 0;
    for e in std::fs::read_dir(&forge_dir).expect(".forge").flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with("state.db") {
            let bytes = std::fs::read(e.path()).expect("read");
            for v in [SESSION, TRACKER, PREF] {
                assert!(!contains(&bytes, v), "{name} holds {v} in plaintext");
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 1,
        "no state database under {}",
        forge_dir.display()
    );

    // `forge profile list` names it with its origin and size, and no value.
    let fake = fake_llm::start(Arc::new(|_, _| {
        Reply::Json(200, vec![], fake_llm::openai_text("unused"))
    }))
    .await;
    let out = forge_cmd(dir.path(), &fake.base(), None, None)
        .args(["profile", "list"])
        .output()
        .expect("forge profile list");
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{listed}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        listed.contains("portal")
            && listed.contains(&format!("http://{}", portal.addr))
            && listed.contains("bytes"),
        "{listed}"
    );
    for v in [SESSION, TRACKER, PREF] {
        assert!(!listed.contains(v), "forge profile list prints {v}");
    }

    // A wrong key: a clear error naming the profile and the fix; the model is never asked.
    let out = forge_cmd(dir.path(), &fake.base(), Some(OTHER_KEY), None)
        .args([
            "run",
            "--once",
            "open the portal home",
            "--profile",
            "portal",
        ])
        .output()
        .expect("forge run --once");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("login profile `portal` was saved with profile key")
            && text.contains("FORGE_PROFILE_KEY")
            && text.contains("forge profile delete portal"),
        "{text}"
    );
    // No key: refused before anything starts, never run unencrypted.
    let out = forge_cmd(dir.path(), &fake.base(), None, None)
        .args([
            "run",
            "--once",
            "open the portal home",
            "--profile",
            "portal",
        ])
        .output()
        .expect("forge run --once");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("no profile key is set") && text.contains("openssl rand -hex 32"),
        "{text}"
    );
    assert_eq!(fake.count(), 0, "the model was never asked");

    // `forge mcp serve --profile portal`: an MCP session's browser is logged in too.
    let mcp_text = mcp_navigate(dir.path(), &fake.base(), &portal.url("/home"));
    assert!(mcp_text.contains("logged in as alice"), "{mcp_text}");

    // Deleted, the next task starts logged out.
    let out = forge_cmd(dir.path(), &fake.base(), None, None)
        .args(["profile", "delete", "portal"])
        .output()
        .expect("forge profile delete");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = forge_cmd(dir.path(), &fake.base(), None, None)
        .args(["profile", "list"])
        .output()
        .expect("forge profile list");
    assert!(String::from_utf8_lossy(&out.stdout).contains("not saved yet"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_replica_b_uses_the_profile_replica_a_saved() {
    if forge_testkit::require_browser("login profiles across PostgreSQL replicas").is_none() {
        return;
    }
    let pg = forge_testkit::pg::PgServer::start();
    let portal = Site::builder().max_connections(100).start(portal);
    let other = Site::builder().max_connections(100).start(other);
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, a2) = two_tasks(dir.path(), &portal, &other, Some(&pg.url), true).await;
    assert!(
        a2.contains("logged in as alice"),
        "replica B is logged in: {a2}"
    );
    assert!(a2.contains("storage restored"), "{a2}");
    assert!(a2.contains("tracker cookie: absent"), "{a2}");
}

/// A profile whose origin the egress policy does not allow stops startup, naming the profile,
/// the origin and the fix (the same check as `forge skills audit`).
#[test]
fn a_profile_origin_outside_the_policy_stops_startup() {
    if forge_testkit::require_browser("login profile origins checked at start").is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("skills/web")).expect("mkdir");
    std::fs::write(
        dir.path().join("skills/web/SKILL.md"),
        "---\nname: web\ndescription: Browse.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"127.0.0.1:4711\"]\n---\nBrowse.\n",
    )
    .expect("skill");
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-fake\n  base_url: http://127.0.0.1:9/v1\negress:\n  mode: allowlist\nbrowser:\n  profiles:\n    portal: {origins: [\"http://127.0.0.1:4711\", \"http://127.0.0.1:4712\"]}\n",
    )
    .expect("forge.yaml");
    let out = forge_cmd(dir.path(), "unused", Some(KEY), None)
        .args(["run", "--once", "hi", "--profile", "portal"])
        .output()
        .expect("forge run --once");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("browser.profiles.portal")
            && text.contains("http://127.0.0.1:4712")
            && !text.contains("http://127.0.0.1:4711,")
            && text.contains("egress.allowed_domains"),
        "{text}"
    );
}
