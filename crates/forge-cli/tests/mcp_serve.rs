//! `forge mcp serve` with real counterparts: the official MCP Python SDK (PyPI `mcp` 2.x) as the
//! client of the real forge binary over stdio and over streamable HTTP, driving Debian's Chromium
//! through the real egress proxy against a loopback site; the HTTP bearer-token rule on a
//! non-loopback bind; the probe port (`--probe-port`: /healthz, /readyz); and `npx @modelcontextprotocol/inspector --cli` listing forge's tools.
//!
//! Skips (with a message) when Chromium, python3 with `mcp`, or npx is missing; fails instead when
//! FORGE_REQUIRE_BROWSER=1 (CI installs everything).

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use forge_testkit::mcp::RawSession;
use forge_testkit::site::{Response, Site};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn browser_available() -> bool {
    forge_testkit::require_browser("forge mcp serve with a browser agent").is_some()
}

fn python_sdk() -> bool {
    forge_testkit::require(
        forge_testkit::python_has("import mcp, uvicorn"),
        "python3 with the MCP SDK (`mcp` 2.x) not found; run scripts/install-deps.sh python",
    )
}

fn client_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/mcp_serve_client.py")
}

fn forge() -> Command {
    forge_testkit::forge!()
}

/// A loopback site: `/` shows `token` and the Cookie header it got; `/set?v=X` sets cookie `v=X`;
/// `/slow` never answers (closes after 60 s). Bounded: at most 500 connections.
fn serve_site(token: String) -> SocketAddr {
    Site::builder()
        .max_connections(500)
        .start(move |r| {
            if r.path.starts_with("/slow") {
                return Response::raw(Vec::new()).delayed(Duration::from_secs(60));
            }
            let cookie = r
                .head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("cookie")
                        .then(|| v.trim().to_string())
                })
                .unwrap_or_else(|| "none".into());
            if let Some(v) = r.path.strip_prefix("/set?v=") {
                Response::bare(
                    200,
                    format!("<!doctype html><title>Set</title><p>cookie set to {v}</p>"),
                )
                .header("content-type", "text/html")
                .header("set-cookie", &format!("v={v}; Path=/"))
            } else if r.path == "/" {
                Response::bare(200, format!("<!doctype html><title>Token page {token}</title><h1>The secret word is {token}</h1><p>cookies: [{cookie}]</p>"))
                    .header("content-type", "text/html")
            } else {
                Response::bare(404, "not found").header("content-type", "text/html")
            }
        })
        .addr
}

/// A browser agent whose skill allowlists `site` (and only it).
fn write_browser_agent(dir: &Path, site: SocketAddr) -> PathBuf {
    std::fs::create_dir_all(dir.join("skills/look")).unwrap();
    std::fs::write(
        dir.join("skills/look/SKILL.md"),
        format!(
            "---\nname: look\ndescription: Look at the test page.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{site}\"]\n---\nOpen the page.\n"
        ),
    )
    .unwrap();
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        "agent_id: look-agent\nversion: 0.1.0\negress:\n  mode: allowlist\n",
    )
    .unwrap();
    cfg
}

fn unique_token() -> String {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    format!("w{:x}", n ^ ((std::process::id() as u64) << 20))
}

async fn output(mut cmd: Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("run the command"))
        .await
        .unwrap()
}

fn last_json(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with(['{', '[']))
        .unwrap_or_else(|| panic!("no JSON line in: {text}"));
    serde_json::from_str(line).unwrap()
}

/// Kills the child when dropped (a failing test must not leave forge running).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `forge mcp serve --transport http` with `args`; its first stdout line gives the URL.
fn start_http(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> (Killed, String, Vec<String>) {
    let mut c = forge();
    c.current_dir(cwd)
        .args(["mcp", "serve", "--transport", "http", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("start forge mcp serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let first = lines
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("forge mcp serve printed nothing"));
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {first:?}"))
        .to_string();
    let mut rest = Vec::new();
    // A token line follows for a non-loopback bind; read it without blocking forever.
    if args.contains(&"0.0.0.0") {
        if let Some(Ok(l)) = lines.next() {
            rest.push(l);
        }
    }
    (Killed(child), url, rest)
}

fn check_session(out: &Value, token: &str, site: SocketAddr) {
    let tools: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for want in ["browser_navigate", "browser_screenshot", "http_request"] {
        assert!(tools.contains(&want), "{want} missing from {tools:?}");
    }
    let instructions = out["instructions"].as_str().unwrap();
    assert!(
        instructions.contains(&site.to_string())
            && instructions.contains("Every other host is refused"),
        "{instructions}"
    );
    let nav = &out["navigate"];
    assert_eq!(nav["is_error"], false, "{nav}");
    let text = nav["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("The secret word is {token}")),
        "{text}"
    );
    assert!(
        text.contains("<<<UNTRUSTED_CONTENT_START") && text.contains("<<<UNTRUSTED_CONTENT_END"),
        "not fenced: {text}"
    );
    let blocked = &out["blocked"];
    assert_eq!(blocked["is_error"], true, "{blocked}");
    assert!(
        blocked["text"].as_str().unwrap().contains(
            "blocked by egress policy: not-allowed.example is not in this agent's allowlist"
        ),
        "{blocked}"
    );
    let shot = &out["screenshot"];
    assert_eq!(shot["is_error"], false, "{shot}");
    let images = shot["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{shot}");
    assert_eq!(images[0]["mime"], "image/png");
    assert!(images[0]["len"].as_u64().unwrap() > 100, "{shot}");
    // The slow call reported progress (every second) before it was cancelled.
    let progress = out["progress"].as_array().unwrap();
    assert!(!progress.is_empty(), "no progress notification: {out}");
    assert!(
        progress[0]
            .as_str()
            .unwrap_or("")
            .contains("browser_navigate running"),
        "{progress:?}"
    );
    // The cancelled slow call returned at the cancellation, and the session went on promptly.
    assert!(out.get("slow_not_cancelled").is_none(), "{out}");
    let cancel = out["cancel_returned_after_s"].as_f64().unwrap();
    assert!(cancel < 10.0, "cancel took {cancel}s");
    assert_eq!(out["after_cancel"]["is_error"], false, "{out}");
    assert!(
        out["after_cancel_s"].as_f64().unwrap() < 30.0,
        "the session was stuck after the cancellation: {out}"
    );
}

fn audit_events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_browser_over_stdio() {
    if !browser_available() || !python_sdk() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(dir.path(), site);
    let audit = dir.path().join("audit.ndjson");
    let mut c = Command::new("python3");
    c.arg(client_script())
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_forge"))
        .arg(&cfg)
        .arg(&audit)
        .arg(format!("http://{site}"))
        .env_remove("FORGE_RUNTIME_TOKEN");
    let out = output(c).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    let seen = last_json(&out.stdout);
    check_session(&seen, &token, site);
    // The calls went through the ToolRunner path: audited with the MCP session as task id, the
    // refusal by the proxy, the cancelled call as cancelled (closing the host session when an MCP session ends is tested in forge-mcp's tests/mcp.rs).
    let ev = audit_events(&audit);
    let execs: Vec<&Value> = ev.iter().filter(|e| e["event"] == "tool_exec").collect();
    assert!(execs.len() >= 5, "{ev:?}");
    assert!(execs
        .iter()
        .all(|e| e["task_id"].as_str().unwrap().starts_with("mcp-")));
    assert!(
        execs
            .iter()
            .any(|e| e["tool"] == "browser_navigate" && e["error_kind"] == "cancelled"),
        "{execs:?}"
    );
    assert!(ev.iter().any(|e| e["event"] == "egress_blocked"
        && e["host"] == "not-allowed.example"
        && e["via"] == "proxy"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_drives_the_browser_over_http_with_separate_sessions() {
    if !browser_available() || !python_sdk() {
        return;
    }
    let token = unique_token();
    let site = serve_site(token.clone());
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(dir.path(), site);
    let audit = dir.path().join("audit.ndjson");
    let (_server, url, _) = start_http(
        dir.path(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--audit-file",
            audit.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let mut c = Command::new("python3");
    c.arg(client_script())
        .arg("http")
        .arg(&url)
        .arg(format!("http://{site}"));
    let out = output(c).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "client failed: {stderr}");
    let seen = last_json(&out.stdout);
    check_session(&seen, &token, site);
    // Session A set a cookie and sees it; session B (another browser context) does not.
    let a = seen["a_page"]["text"].as_str().unwrap();
    let b = seen["b_page"]["text"].as_str().unwrap();
    assert!(a.contains("cookies: [v=alpha]"), "{a}");
    assert!(b.contains("cookies: [none]"), "{b}");
    let ev = audit_events(&audit);
    let sessions: std::collections::BTreeSet<&str> = ev
        .iter()
        .filter(|e| e["event"] == "tool_exec")
        .filter_map(|e| e["task_id"].as_str())
        .collect();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
}

/// An agent without the browser (fast to start).
fn write_plain_agent(dir: &Path) -> PathBuf {
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        "agent_id: plain\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [example.org]\n",
    )
    .unwrap();
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_requires_the_bearer_token() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_plain_agent(dir.path());
    // A bad FORGE_RUNTIME_TOKEN refuses to start (before binding anything).
    let mut c = forge();
    c.current_dir(dir.path())
        .args([
            "mcp",
            "serve",
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--port",
            "0",
            "--config",
        ])
        .arg(&cfg)
        .env("FORGE_RUNTIME_TOKEN", "short");
    let out = output(c).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("FORGE_RUNTIME_TOKEN must be at least 16")
    );

    // Without FORGE_RUNTIME_TOKEN: the token of .forge/runtime.token (generated), required on every
    // request. Traffic goes to 127.0.0.1 only (the server listens on all addresses).
    let (_server, url, rest) = start_http(
        dir.path(),
        &["--host", "0.0.0.0", "--config", cfg.to_str().unwrap()],
        &[],
    );
    let port = forge_testkit::cli::url_port(&url);
    let line = rest.first().cloned().unwrap_or_default();
    assert!(line.contains("bearer token required (from"), "{line}");
    let file_token = std::fs::read_to_string(dir.path().join(".forge/runtime.token")).unwrap();
    let file_token = file_token.trim();
    assert!(line.ends_with(file_token), "{line}");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let post = |auth: Option<String>| {
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
            init.len()
        );
        if let Some(t) = auth {
            req.push_str(&format!("authorization: Bearer {t}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(init);
        req
    };
    let send = |req: String| async move {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        let mut resp = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut resp)).await;
        String::from_utf8_lossy(&resp).into_owned()
    };
    let r = send(post(None)).await;
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = send(post(Some("wrong-token-0123456789".into()))).await;
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = send(post(Some(file_token.to_string()))).await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(
        r.contains("example.org"),
        "instructions name the allowed host: {r}"
    );
}

fn interop_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../forge-mcp/tests/py/mcp_interop.py")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// An agent using the Python SDK's servers: `srv` (streamable HTTP at `url`, bearer from
/// SRV_TOKEN, `required`), and `pyfiles` (stdio, only PATH passed through).
fn write_mcp_agent(dir: &Path, url: &str, required: bool) -> PathBuf {
    let cfg = dir.join("forge.yaml");
    std::fs::write(
        &cfg,
        format!(
            "agent_id: mcp-user\nversion: 0.1.0\negress:\n  mode: allowlist\nmcp:\n  servers:\n    - name: srv\n      transport: http\n      url: {url}\n      auth: {{ type: bearer, token_env: SRV_TOKEN }}\n      tools: {{ allow: [echo] }}\n      timeout: 20s\n      required: {required}\n    - name: pyfiles\n      transport: stdio\n      command: python3\n      args: [\"{}\", server-stdio]\n      env: [PATH]\n      tools: {{ allow: [\"*\"] }}\n      timeout: 30s\n",
            interop_script().display()
        ),
    )
    .unwrap();
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_of_forge_yaml_become_confined_tools() {
    if !python_sdk() {
        return;
    }
    let port = free_port();
    let server = Command::new("python3")
        .arg(interop_script())
        .args(["server-http", &port.to_string(), "good-token-123"])
        .stdout(Stdio::null())
        .spawn()
        .expect("the Python MCP server starts");
    let _server = Killed(server);
    let entry = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&entry).is_err() {
        assert!(
            Instant::now() < deadline,
            "the Python MCP server did not start on {entry}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("http://{entry}/mcp");
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_mcp_agent(dir.path(), &url, true);

    // forge tool list: srv__echo present (source mcp, the server named), srv__secret absent
    // (outside allow), the stdio server's tool present.
    let mut c = forge();
    c.args(["tool", "list", "--format", "json", "--config"])
        .arg(&cfg)
        .env("SRV_TOKEN", "good-token-123");
    let out = output(c).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool = |n: &str| {
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} not listed: {list}"))
    };
    let echo = tool("srv__echo");
    assert_eq!(echo["present"], true);
    assert_eq!(echo["source"], "mcp");
    assert!(echo["reason"].as_str().unwrap().contains(&url), "{echo}");
    let secret = tool("srv__secret");
    assert_eq!(secret["present"], false);
    assert!(secret["reason"]
        .as_str()
        .unwrap()
        .contains("not in mcp.servers[srv].tools.allow"));
    assert_eq!(tool("pyfiles__env_keys")["present"], true);
    assert_eq!(
        list["egress_added_by_forge"],
        serde_json::json!([{"host": entry, "why": "mcp server srv"}]),
        "{list}"
    );

    // forge tool call srv__echo: the server's answer, fenced as outside content.
    let mut c = forge();
    c.args([
        "tool",
        "call",
        "srv__echo",
        "--args",
        r#"{"text":"hi"}"#,
        "--config",
    ])
    .arg(&cfg)
    .env("SRV_TOKEN", "good-token-123");
    let out = output(c).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = last_json(&out.stdout);
    let text = r["text"].as_str().unwrap();
    assert!(
        text.contains("py echo: hi") && text.contains("server=srv"),
        "{r}"
    );

    // The stdio server, started by forge, sees no API keys (forge's own environment has one).
    let mut c = forge();
    c.args(["tool", "call", "pyfiles__env_keys", "--config"])
        .arg(&cfg)
        .env("SRV_TOKEN", "good-token-123")
        .env("OPENAI_API_KEY", "sk-test-must-not-leak");
    let out = output(c).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = last_json(&out.stdout);
    let text = r["text"].as_str().unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("PATH"))
        .unwrap_or_else(|| panic!("{r}"));
    let keys: Vec<&str> = line.split(',').collect();
    assert!(
        !keys
            .iter()
            .any(|k| k.contains("API_KEY") || k.contains("TOKEN")),
        "{keys:?}"
    );
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "PATH"] {
        assert!(keys.contains(&k), "{k} missing: {keys:?}");
    }

    // MCP both ways: an MCP client (the SDK) calls srv__echo through `forge mcp serve`; the call
    // is audited as mcp_tool_call.
    let audit = dir.path().join("audit.ndjson");
    let mut c = Command::new("python3");
    c.arg(client_script())
        .arg("call-stdio")
        .arg(env!("CARGO_BIN_EXE_forge"))
        .arg(&cfg)
        .arg(&audit)
        .args([
            "srv__echo",
            r#"{"text":"both ways"}"#,
            r#"{"SRV_TOKEN":"good-token-123"}"#,
        ]);
    let out = output(c).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = last_json(&out.stdout);
    assert!(
        r["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "srv__echo"),
        "{r}"
    );
    assert_eq!(r["result"]["is_error"], false, "{r}");
    assert!(
        r["result"]["text"]
            .as_str()
            .unwrap()
            .contains("py echo: both ways"),
        "{r}"
    );
    let ev = audit_events(&audit);
    assert!(
        ev.iter()
            .any(|e| e["event"] == "mcp_tool_call" && e["tool"] == "srv__echo" && e["ok"] == true),
        "{ev:?}"
    );
    assert!(!ev
        .iter()
        .any(|e| e["event"] == "tool_exec" && e["tool"] == "srv__echo"));
    assert!(
        !std::fs::read_to_string(&audit)
            .unwrap()
            .contains("good-token-123"),
        "the token reached the audit log"
    );

    // denied_tools applies to MCP tools like to any other.
    let denied = dir.path().join("denied.yaml");
    std::fs::write(
        &denied,
        std::fs::read_to_string(&cfg)
            .unwrap()
            .replace("allow: [echo]", "allow: [\"*\"]")
            .replace("egress:\n", "denied_tools: [srv__secret]\negress:\n"),
    )
    .unwrap();
    let mut c = forge();
    c.args(["tool", "list", "--format", "json", "--config"])
        .arg(&denied)
        .env("SRV_TOKEN", "good-token-123");
    let out = output(c).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "srv__secret")
        .cloned()
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(secret["present"], false, "{secret}");
    assert!(
        secret["reason"]
            .as_str()
            .unwrap()
            .contains("denied by denied_tools of forge.yaml"),
        "{secret}"
    );

    // The server's host is in the policy, added by forge like the model host.
    let mut c = forge();
    c.args(["egress", "check", "--config"]).arg(&cfg).arg(&url);
    let out = output(c).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mcp server srv"), "{stdout}");

    // A wrong token fails the required server at startup, naming it, its URL and the cause.
    let mut c = forge();
    c.args(["tool", "list", "--config"])
        .arg(&cfg)
        .env("SRV_TOKEN", "wrong-token-456");
    let out = output(c).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mcp.servers[srv] is required")
            && stderr.contains(&url)
            && stderr.contains("401"),
        "{stderr}"
    );

    // Not required: the agent starts; the server's tools are absent with the cause.
    let cfg = write_mcp_agent(dir.path(), &url, false);
    let mut c = forge();
    c.args(["tool", "list", "--config"])
        .arg(&cfg)
        .env("SRV_TOKEN", "wrong-token-456");
    let out = output(c).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("srv__*"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.contains("absent") && line.contains("mcp") && line.contains("401"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_inspector_cli_lists_forges_tools() {
    if !forge_testkit::require(
        forge_testkit::program_runs("npx", &["--version"]),
        "npx not found; install node and npm (scripts/install-deps.sh node)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_plain_agent(dir.path());
    let mut c = Command::new("npx");
    // The inspector takes `--config` itself: forge runs in the agent dir (default forge.yaml).
    assert!(cfg.ends_with("forge.yaml"));
    c.current_dir(dir.path())
        .args([
            "-y",
            "@modelcontextprotocol/inspector",
            "--cli",
            env!("CARGO_BIN_EXE_forge"),
            "mcp",
            "serve",
        ])
        .args(["--method", "tools/list"]);
    let out = output(c).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && (stderr.contains("ENOTFOUND") || stderr.contains("EAI_AGAIN")) {
        forge_testkit::skip(&format!(
            "npx could not fetch @modelcontextprotocol/inspector (no registry access): {stderr}"
        ));
        return;
    }
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in ["http_request", "web_fetch", "math_calculate"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
}

/// Two MCP HTTP sessions of one `forge mcp serve` each have their own workspace: session 2's
/// upload of session 1's file fails and its error lists only session 2's files, its file_create of
/// the same name writes its own file, and session 1's bytes stay as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_http_sessions_cannot_see_upload_or_overwrite_each_others_files() {
    if !browser_available() {
        return;
    }
    let site = Site::builder()
        .max_connections(200)
        .start(|_| {
            Response::bare(
                200,
                "<!doctype html><title>Upload</title><form><input type=file id=f name=f></form>",
            )
            .header("content-type", "text/html")
        })
        .addr;
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_browser_agent(dir.path(), site);
    let (_server, url, _) = start_http(dir.path(), &["--config", cfg.to_str().unwrap()], &[]);
    let port = forge_testkit::cli::url_port(&url);
    let mut one = RawSession::open(port).await;
    let mut two = RawSession::open(port).await;
    assert_ne!(one.id, two.id);

    let secret = "session one's secret bytes";
    let r = one
        .call(
            "file_create",
            serde_json::json!({"filename": "secret.txt", "content": secret}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");
    let path_one = PathBuf::from(r["structuredContent"]["path"].as_str().expect("path"));
    let r = one
        .call(
            "file_create",
            serde_json::json!({"filename": "only-one.txt", "content": "x"}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");
    let r = two
        .call(
            "file_create",
            serde_json::json!({"filename": "mine.txt", "content": "two"}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");

    // Session 2 cannot upload session 1's file, and the error lists only its own files.
    let r = two
        .call(
            "browser_navigate",
            serde_json::json!({"url": format!("http://{site}/")}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");
    let r = two
        .call(
            "browser_upload",
            serde_json::json!({"selector": "#f", "filename": "secret.txt"}),
        )
        .await;
    let text = r.to_string();
    assert_eq!(r["isError"], true, "{text}");
    assert!(
        text.contains("mine.txt"),
        "its own files are listed: {text}"
    );
    assert!(!text.contains("only-one.txt"), "{text}");
    assert!(!text.contains(secret), "{text}");

    // Session 2 writing the same name writes its own file; session 1's bytes are unchanged.
    let r = two
        .call(
            "file_create",
            serde_json::json!({"filename": "secret.txt", "content": "two"}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");
    let path_two = PathBuf::from(r["structuredContent"]["path"].as_str().expect("path"));
    assert_ne!(path_one.parent(), path_two.parent());
    assert_eq!(std::fs::read_to_string(&path_one).unwrap(), secret);
    // Its upload of "secret.txt" is its own 3-byte file.
    let r = two
        .call(
            "browser_upload",
            serde_json::json!({"selector": "#f", "filename": "secret.txt"}),
        )
        .await;
    let text = r.to_string();
    assert_ne!(r["isError"], true, "{text}");
    assert!(text.contains("(3 bytes)"), "{text}");
    assert_eq!(std::fs::read_to_string(&path_one).unwrap(), secret);
}

/// `GET path` on `addr` (loopback); the whole answer.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_port_serves_healthz_and_readyz() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_plain_agent(dir.path());
    let mut c = forge();
    c.current_dir(dir.path())
        .args([
            "mcp",
            "serve",
            "--transport",
            "http",
            "--port",
            "0",
            "--probe-port",
            "0",
            "--config",
        ])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = Killed(c.spawn().expect("start forge mcp serve"));
    let stdout = child.0.stdout.take().expect("piped stdout");
    let lines: Vec<String> = BufReader::new(stdout)
        .lines()
        .take(2)
        .map(Result::unwrap)
        .collect();
    assert!(
        lines[0].contains("over MCP on http://127.0.0.1:"),
        "{lines:?}"
    );
    let probe: SocketAddr = lines[1]
        .strip_prefix("forge: probes (/healthz, /readyz) on http://")
        .and_then(|r| r.strip_suffix('/'))
        .unwrap_or_else(|| panic!("no probe line: {lines:?}"))
        .parse()
        .unwrap();
    assert!(
        probe.ip().is_loopback(),
        "bound like the main listener: {probe}"
    );
    let h = get(probe, "/healthz").await;
    assert!(
        h.starts_with("HTTP/1.1 200") && h.ends_with(r#"{"status":"ok"}"#),
        "{h}"
    );
    let r = get(probe, "/readyz").await;
    assert!(
        r.starts_with("HTTP/1.1 200") && r.ends_with(r#"{"status":"ready"}"#),
        "{r}"
    );
    let other = get(probe, "/mcp").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
}

/// The form skills as MCP tools (issue 25): an agent with the browser lists
/// `learn_form_schema` and `execute_form_batch`; learning returns the schema, a batch submits its
/// row once through the real form and returns the results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_form_skills_are_mcp_tools_of_an_agent_with_the_browser() {
    if !forge_testkit::require(browser_available(), "Chromium is missing") {
        return;
    }
    let site = Site::start(|r| {
        match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/signup") => Response::html(
            "<!doctype html><title>Sign up</title><form id=signup action=/submit method=post><label for=n>Name</label><input id=n name=name required><button>Go</button></form>",
        ),
        ("POST", "/submit") => Response::html("<!doctype html><title>Thanks</title><p>Saved</p>"),
        _ => Response::not_found(),
    }
    });
    let dir = tempfile::tempdir().unwrap();
    write_browser_agent(dir.path(), site.addr);
    let (_server, url, _) = start_http(dir.path(), &[], &[]);
    let port = forge_testkit::cli::url_port(&url);
    let mut s = RawSession::open(port).await;
    let listed = s.request("tools/list", serde_json::json!({})).await;
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"learn_form_schema") && names.contains(&"execute_form_batch"),
        "{names:?}"
    );
    let entry = site.entry();
    let learned = s
        .call(
            "learn_form_schema",
            serde_json::json!({"url": site.url("/signup"), "allowedHosts": [entry]}),
        )
        .await;
    assert_ne!(learned["isError"], true, "{learned}");
    let text = learned["content"][0]["text"].as_str().unwrap_or("");
    let schema: Value = serde_json::from_str(text).expect("the schema JSON");
    assert_eq!(schema["slug"], "signup");
    let ran = s
        .call(
            "execute_form_batch",
            serde_json::json!({"schema": "signup", "rows": [{"name": "Mia"}], "allowedHosts": [entry]}),
        )
        .await;
    assert_ne!(ran["isError"], true, "{ran}");
    assert!(
        ran["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("1 rows: 1 done"),
        "{ran}"
    );
    let posts: Vec<String> = site
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert_eq!(posts, vec!["name=Mia".to_string()]);
}

/// `GET path` on loopback port `port` with extra header lines; the whole answer.
async fn get_with(port: u16, path: &str, extra: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let host = if extra.to_ascii_lowercase().contains("host:") {
        String::new()
    } else {
        format!("Host: 127.0.0.1:{port}\r\n")
    };
    s.write_all(
        format!("GET {path} HTTP/1.1\r\n{host}{extra}Connection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

/// `forge mcp serve --transport http` serves the watch page beside /mcp: its sessions are listed
/// with their tool calls; the page's rules hold there too (a foreign Host or Origin is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_transport_serves_the_watch_page_for_its_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write_plain_agent(dir.path());
    let audit = dir.path().join("audit.ndjson");
    let (_server, url, _) = start_http(
        dir.path(),
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--audit-file",
            audit.to_str().unwrap(),
        ],
        &[],
    );
    let port = forge_testkit::cli::url_port(&url);
    let mut one = RawSession::open(port).await;
    let r = one
        .call(
            "file_create",
            serde_json::json!({"filename": "seen.txt", "content": "watch me"}),
        )
        .await;
    assert_ne!(r["isError"], true, "{r}");

    let page = get_with(port, "/ui", "").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("<script src=\"/ui/app.js\""), "{page}");
    let rows = get_with(port, "/ui/api/tasks", "").await;
    assert!(rows.starts_with("HTTP/1.1 200"), "{rows}");
    let rows: Value = serde_json::from_str(rows.split_once("\r\n\r\n").unwrap().1).unwrap();
    let rows = rows["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["steps"], 1, "{rows:?}");
    let id = rows[0]["id"].as_str().unwrap();
    let detail = get_with(port, &format!("/ui/api/tasks/{id}"), "").await;
    let detail: Value = serde_json::from_str(detail.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert!(
        detail["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "tool_exec" && e["tool"] == "file_create" && e["ok"] == true),
        "{detail}"
    );
    assert_eq!(detail["audit"]["verified"], true, "{detail}");
    for path in ["/ui", "/ui/api/tasks", "/ui/api/events"] {
        let foreign_host = get_with(port, path, &format!("Host: evil.test:{port}\r\n")).await;
        assert!(
            foreign_host.starts_with("HTTP/1.1 403"),
            "{path}: {foreign_host}"
        );
        let foreign_origin = get_with(port, path, "Origin: http://evil.test\r\n").await;
        assert!(
            foreign_origin.starts_with("HTTP/1.1 403"),
            "{path}: {foreign_origin}"
        );
    }
    // /mcp keeps its own rules and other paths stay unknown.
    let other = get_with(port, "/nothing", "").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
}
