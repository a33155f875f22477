//! Secrets by reference end to end: `forge run` (a real process) serving A2A, a fake OpenAI
//! server playing the model, real Chromium through the real egress proxy, and a loopback portal.
//! The model logs in with `browser_fill {ref, secret}`; the portal gets the right values and the
//! login succeeds; the portal's answer echoes both values, and the model sees the names instead.
//! The values appear in none of: every request body the fake model received, forge's stdout and
//! stderr, the audit log, the agent directory (state database with its WAL, files directory,
//! everything else), the A2A response, each checked on raw bytes.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use fake_llm::{Reply, Responder};
use forge_testkit::llm as fake_llm;
use forge_testkit::site::{Request, Response, Site};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const USER: &str = "alice.k7q3";
const PASSWORD: &str = "Pw9x2LmQ4vZ";

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

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
            let field = |k: &str| {
                body.split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                    .unwrap_or("")
                    .to_string()
            };
            let (u, p) = (field("u"), field("p"));
            let ok = u == USER && p == PASSWORD;
            // A careless portal: it echoes both values back.
            Response::html(format!(
                "<!doctype html><title>{}</title><p>{} user {u} with password {p}</p>",
                if ok { "Welcome" } else { "Denied" },
                if ok {
                    "Signed in as"
                } else {
                    "wrong password for"
                }
            ))
        }
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

/// Every file under `dir` (bounded: at most 10,000), with its bytes.
fn files_under(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if out.len() >= 10_000 {
                return out;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(t) if t.is_file() => {
                    if let Ok(b) = std::fs::read(&p) {
                        out.push((p, b));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

async fn rpc_raw(url: &str, body: Value) -> Vec<u8> {
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let mut s = tokio::net::TcpStream::connect(&addr)
        .await
        .expect("connect");
    let payload = body.to_string();
    let req = format!("POST / HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}", payload.len());
    s.write_all(req.as_bytes()).await.expect("send");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(120), s.read_to_end(&mut buf))
        .await
        .expect("answer within 120 s")
        .expect("read");
    buf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_by_secret_reference_leaks_the_values_nowhere() {
    if forge_testkit::require_browser("forge run logging in with secrets").is_none() {
        return;
    }
    let site = Site::builder().max_connections(100).start(portal);
    let origin = format!("http://{}", site.addr);
    let login = format!("{origin}/login");
    let respond: Responder = Arc::new(move |i, req| {
        let last = fake_llm::openai_last_tool_result(&req.body).unwrap_or_default();
        match i {
            0 => Reply::Json(
                200,
                vec![],
                fake_llm::openai_tool_calls(&[("c1", "browser_navigate", json!({"url": login}))]),
            ),
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
            _ => Reply::Json(
                200,
                vec![],
                fake_llm::openai_text(&format!("After login: {last}")),
            ),
        }
    });
    let fake = fake_llm::start(respond).await;

    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("skills/login")).expect("mkdir");
    std::fs::write(
        dir.path().join("skills/login/SKILL.md"),
        format!("---\nname: login\ndescription: Log in to the portal.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{}\"]\n---\nLog in with the portal secrets.\n", site.addr),
    )
    .expect("skill");
    let cfg = dir.path().join("forge.yaml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id: portal-agent\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-fake\n  base_url: {}/v1\negress:\n  mode: allowlist\nsecrets:\n  portal_user: {{from: \"env:PORTAL_U\", origins: [\"{origin}\"]}}\n  portal_password: {{from: \"env:PORTAL_P\", origins: [\"{origin}\"]}}\n",
            fake.base()
        ),
    )
    .expect("forge.yaml");
    let audit = dir.path().join("audit.ndjson");
    let stderr_path = dir.path().join("stderr.txt");
    // Variable names without KEY/TOKEN/PASSWORD: the audit log's own environment scrubber must
    // not be what keeps the values out.
    let child = forge_testkit::forge!()
        .env("OPENAI_API_KEY", "sk-test-secrets-0000")
        .env("PORTAL_U", USER)
        .env("PORTAL_P", PASSWORD)
        .arg("run")
        .arg("--config")
        .arg(&cfg)
        .args(["--port", "0", "--audit-file"])
        .arg(&audit)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(&stderr_path).expect("stderr file"),
        ))
        .spawn()
        .expect("spawn forge");
    let mut server = Server(child);
    let mut stdout = server.0.stdout.take().expect("stdout");
    let (first, stdout) = tokio::task::spawn_blocking(move || {
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while line.len() < 4096 && stdout.read(&mut b).map(|n| n == 1).unwrap_or(false) {
            line.push(b[0]);
            if b[0] == b'\n' {
                break;
            }
        }
        (String::from_utf8_lossy(&line).to_string(), stdout)
    })
    .await
    .expect("first line");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| {
            panic!(
                "no URL printed: {first:?}; stderr: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            )
        })
        .to_string();

    let msg = json!({"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "log in to the portal"}]});
    let a2a = rpc_raw(
        &url,
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg, "configuration": {"blocking": true}}}),
    )
    .await;
    let a2a_text = String::from_utf8_lossy(&a2a).to_string();

    // The login happened with the right values, typed into the page.
    let got: String = site
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).to_string())
        .collect();
    assert!(
        got.contains(&format!("u={USER}")) && got.contains(&format!("p={PASSWORD}")),
        "the portal did not get the values: {got}\nA2A: {a2a_text}"
    );
    assert!(
        a2a_text.contains("Signed in as"),
        "the login did not succeed: {a2a_text}"
    );
    // The echo page reached the model with the names.
    assert!(
        a2a_text.contains("(secret portal_password)") && a2a_text.contains("(secret portal_user)"),
        "the echoed values are not shown as names: {a2a_text}"
    );

    drop(server); // SIGTERM: forge stops, flushes and closes its files.
    let mut rest = Vec::new();
    tokio::task::spawn_blocking(move || {
        let mut s = stdout;
        let _ = s.read_to_end(&mut rest);
        rest
    })
    .await
    .map(|r| {
        for v in [USER, PASSWORD] {
            assert!(!contains(&r, v), "stdout holds {v}");
        }
    })
    .expect("stdout");

    assert!(
        fake.count() >= 3,
        "the model was asked {} times",
        fake.count()
    );
    for i in 0..fake.count() {
        let body = fake.request(i).body.to_string();
        for v in [USER, PASSWORD] {
            assert!(!body.contains(v), "model request {i} holds {v}: {body}");
        }
    }
    for v in [USER, PASSWORD] {
        assert!(!contains(&a2a, v), "the A2A response holds {v}");
        assert!(!contains(first.as_bytes(), v), "stdout holds {v}");
    }
    // The whole agent directory: forge.yaml, the audit log, stderr, .forge (the state database
    // and its WAL, the files directories, the runtime token).
    let files = files_under(dir.path());
    assert!(
        files
            .iter()
            .any(|(p, _)| p.to_string_lossy().contains("state.db")),
        "no state database under {}: {:?}",
        dir.path().display(),
        files.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    for (p, bytes) in &files {
        for v in [USER, PASSWORD] {
            assert!(!contains(bytes, v), "{} holds {v}", p.display());
        }
    }
    let audit_text = std::fs::read_to_string(&audit).expect("audit log");
    assert!(
        audit_text.contains("\"secret_use\"") && audit_text.contains("portal_password"),
        "no secret_use event in the audit log"
    );
}
