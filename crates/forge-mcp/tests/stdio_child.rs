//! Real processes on both sides (this test has its own `main`, so it can be a stdio MCP server:
//! run with `FORGE_MCP_TEST_STDIO_HOST=1` it serves the test host on stdin/stdout and nothing else
//! reaches stdout).
//!
//! Checks, each against a real counterpart:
//! 1. forge-mcp's client spawns this binary as a stdio server: cleared environment (an API key in
//!    the parent's environment is absent in the child), own process group, killed on shutdown.
//! 2. The official Python SDK (`mcp` 2.x) as a client of forge-mcp's server over stdio and over
//!    streamable HTTP: tools listed, a call, `isError` with the message, cancellation reaching the
//!    server (tests/py/mcp_interop.py).
//! 3. The SDK's MCPServer as a server for forge-mcp's client: over streamable HTTP behind a bearer
//!    check (`srv__echo` registered and called, a tool outside `allow` absent, a wrong token
//!    fails naming the server) and over stdio (no API keys in its environment).
//!
//! Without python3 and the `mcp` package, 2 and 3 are skipped with a message, unless
//! FORGE_REQUIRE_MCP_SDK=1 (then they fail).
// Printing is allowed here (test output: diagnostics of the child and the Python side).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::{wait_for, TestHost};
use forge_egress::client::ClientOptions;
use forge_egress::EgressPolicy;
use forge_mcp::{
    connect, serve_http, serve_stdio, EgressDeps, HttpOptions, ServeOptions, ServerSpec,
    ServerTransport,
};
use forge_tools::ToolContext;
use serde_json::{json, Value};

const HOST_ENV: &str = "FORGE_MCP_TEST_STDIO_HOST";

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("a tokio runtime");
    if std::env::var_os(HOST_ENV).is_some() {
        let dir = tempfile::tempdir().expect("temp dir");
        let host = TestHost::new(dir.path().to_path_buf());
        if let Err(e) = rt.block_on(serve_stdio(host, ServeOptions::default())) {
            eprintln!("stdio host: {e}");
            std::process::exit(1);
        }
        return;
    }
    // A secret in the parent's environment that no stdio server may see.
    std::env::set_var("OPENAI_API_KEY", "sk-test-parent-secret");
    rt.block_on(async {
        rust_client_spawns_a_confined_stdio_server().await;
        eprintln!("ok: rust client <-> stdio child (cleared env, process group killed)");
        match python_sdk() {
            Some(py) => {
                python_client_of_forge_server(&py).await;
                python_servers_for_forge_client(&py).await;
            }
            // CI sets FORGE_REQUIRE_BROWSER=1 (scripts/test.sh): there, as with
            // FORGE_REQUIRE_MCP_SDK=1, a missing SDK fails instead of skipping.
            None => forge_testkit::skip_unless_required_by(
                "FORGE_REQUIRE_MCP_SDK",
                "Python MCP SDK interop (python3 with the `mcp` package not found; run scripts/install-deps.sh python)",
            ),
        }
    });
    eprintln!("stdio_child: all checks passed");
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/mcp_interop.py")
}

fn python_sdk() -> Option<String> {
    forge_testkit::python_has("import mcp.server.mcpserver, uvicorn").then(|| "python3".to_string())
}

fn ctx() -> ToolContext {
    ToolContext::new("t", std::env::temp_dir())
}

async fn rust_client_spawns_a_confined_stdio_server() {
    let exe = std::env::current_exe().expect("current exe");
    let spec = ServerSpec {
        name: "child".into(),
        transport: ServerTransport::Stdio {
            command: exe.display().to_string(),
            args: vec![],
            env: vec![(HOST_ENV.into(), "1".into())],
            cwd: None,
            confine: None,
        },
        allow: vec!["env_names".into(), "echo".into()],
        deny: vec![],
        timeout: Duration::from_secs(20),
    };
    let conn = connect(spec, None).await.expect("stdio server connects");
    let mut names: Vec<_> = conn.tools().iter().map(|t| t.name().to_string()).collect();
    names.sort();
    assert_eq!(names, ["child__echo", "child__env_names"]);
    let env = conn
        .tools()
        .into_iter()
        .find(|t| t.name() == "child__env_names")
        .expect("env_names");
    let out = env
        .execute(&ctx(), json!({}))
        .await
        .expect("env_names runs");
    assert_eq!(
        out.data,
        Some(json!({"names": [HOST_ENV]})),
        "the child saw more than its listed environment"
    );
    let pid = conn.child_pid().await.expect("a child pid") as i32;
    // Its own process group: the group id is its pid.
    // SAFETY: getpgid has no memory-safety preconditions.
    assert_eq!(unsafe { libc::getpgid(pid) }, pid);
    conn.shutdown().await;
    // SAFETY: kill with signal 0 only checks for existence.
    let gone = wait_for(
        Duration::from_secs(5),
        || unsafe { libc::kill(pid, 0) } != 0,
    )
    .await;
    assert!(gone, "the stdio server {pid} survived shutdown");

    // Confined (where the machine offers a namespace): the same server in a network namespace
    // of its own, still speaking MCP over its pipes.
    let kind = match forge_egress::confine::availability() {
        forge_egress::confine::Availability::Namespace(k) => k,
        forge_egress::confine::Availability::ProxyOnly(why) => {
            eprintln!("SKIPPED: confined stdio server (no network namespace here: {why})");
            return;
        }
    };
    let (_, proxy) = forge_egress::proxy::EgressProxy::serve(
        Arc::new(EgressPolicy::new(forge_egress::EgressSettings::default()).expect("deny-all")),
        forge_egress::proxy::ProxyOptions::default(),
    )
    .await
    .expect("proxy");
    let spec = ServerSpec {
        name: "boxed".into(),
        transport: ServerTransport::Stdio {
            command: exe.display().to_string(),
            args: vec![],
            env: vec![(HOST_ENV.into(), "1".into())],
            cwd: None,
            confine: Some(forge_egress::confine::Confiner::new(proxy.entry(), kind)),
        },
        allow: vec!["echo".into()],
        deny: vec![],
        timeout: Duration::from_secs(20),
    };
    let conn = connect(spec, None)
        .await
        .expect("confined stdio server connects");
    assert_eq!(conn.tools().len(), 1);
    let pid = conn.child_pid().await.expect("a child pid");
    use std::os::unix::fs::MetadataExt;
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .expect("ns")
        .ino();
    let ours = std::fs::metadata("/proc/self/ns/net").expect("ns").ino();
    assert_ne!(
        theirs, ours,
        "the confined stdio server shares forge's namespace"
    );
    conn.shutdown().await;
    proxy.shutdown().await;
    eprintln!("ok: confined stdio server in its own network namespace");
}

async fn run_python(py: &str, args: &[&str]) -> Value {
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(py)
            .arg(script())
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python finished within 60 s")
    .expect("python runs");
    assert!(
        out.status.success(),
        "python {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("one JSON line")
}

fn check_python_report(v: &Value, how: &str) {
    let tools = v["tools"].as_array().expect("tools");
    assert!(tools.len() >= 6, "{how}: {v}");
    assert!(
        v["fail_text"]
            .as_str()
            .is_some_and(|t| t.contains("host evil.example")),
        "{how}: {v}"
    );
    assert!(v["cancelled_on_server"].as_u64() >= Some(1), "{how}: {v}");
    let sessions = v["sessions"].as_array().expect("sessions");
    assert!(
        sessions.len() == 2 && sessions[0] == sessions[1],
        "{how}: two calls of one MCP session must share one host session: {v}"
    );
    assert_ne!(v["protocol"], "2026-07-28", "{how}: {v}");
    assert!(
        v["instructions"]
            .as_str()
            .is_some_and(|t| t.contains("Allowed hosts")),
        "{how}: {v}"
    );
    eprintln!(
        "ok: python SDK client over {how} (protocol {})",
        v["protocol"]
    );
}

async fn python_client_of_forge_server(py: &str) {
    let exe = std::env::current_exe().expect("current exe");
    let v = run_python(py, &["client-stdio", &exe.display().to_string()]).await;
    check_python_report(&v, "stdio");
    assert_eq!(v["echo_structured"]["echo"], "from python", "{v}");

    let dir = tempfile::tempdir().expect("temp dir");
    let host = TestHost::new(dir.path().to_path_buf());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let handle = serve_http(
        listener,
        host.clone(),
        ServeOptions::default(),
        HttpOptions::default(),
    )
    .expect("serve");
    let url = format!("http://127.0.0.1:{}/mcp", handle.addr.port());
    let v = run_python(py, &["client-http", &url]).await;
    check_python_report(&v, "streamable HTTP");
    // The SDK ends its session on exit: the host session is closed.
    assert!(
        wait_for(Duration::from_secs(5), || !host.closed().is_empty()).await,
        "the HTTP session's host session was not closed"
    );
    handle.shutdown().await;
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

async fn python_servers_for_forge_client(py: &str) {
    // Streamable HTTP behind a bearer check.
    let port = free_port();
    let mut server = tokio::process::Command::new(py)
        .arg(script())
        .args(["server-http", &port.to_string(), "good-token"])
        .kill_on_drop(true)
        .spawn()
        .expect("python server starts");
    let entry = format!("127.0.0.1:{port}");
    let url = format!("http://{entry}/mcp");
    let up = wait_for(Duration::from_secs(20), || {
        std::net::TcpStream::connect(&entry).is_ok()
    })
    .await;
    assert!(up, "the Python MCP server did not start on {entry}");
    let deps = EgressDeps {
        policy: Arc::new(EgressPolicy::allowlist([entry.clone()]).expect("policy")),
        options: ClientOptions::default(),
    };
    let spec = |token: &str| ServerSpec {
        name: "srv".into(),
        transport: ServerTransport::Http {
            url: url.clone(),
            bearer: Some(token.into()),
        },
        allow: vec!["echo".into()],
        deny: vec![],
        timeout: Duration::from_secs(20),
    };
    let conn = connect(spec("good-token"), Some(&deps))
        .await
        .expect("connects");
    let names: Vec<_> = conn.tools().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["srv__echo"], "secret must be absent");
    assert_eq!(conn.skipped()[0].tool, "secret");
    let out = conn.tools()[0]
        .execute(&ctx(), json!({"text": "hi"}))
        .await
        .expect("echo");
    assert!(
        out.text.contains("py echo: hi") && out.text.contains("server=srv"),
        "{}",
        out.text
    );
    conn.shutdown().await;
    let err = connect(spec("wrong-token"), Some(&deps)).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("MCP server srv") && msg.contains(&url) && msg.contains("401"),
        "{msg}"
    );
    let _ = server.kill().await;
    eprintln!("ok: forge client -> python MCPServer over streamable HTTP (bearer, allow filter)");

    // stdio: the SDK server sees only what forge passes.
    let spec = ServerSpec {
        name: "pystdio".into(),
        transport: ServerTransport::Stdio {
            command: py.into(),
            args: vec![script().display().to_string(), "server-stdio".into()],
            env: forge_mcp::child::stdio_env(
                &["PATH".into()],
                &|k| std::env::var(k).ok(),
                Some("http://127.0.0.1:9"),
            ),
            cwd: None,
            confine: None,
        },
        allow: vec!["*".into()],
        deny: vec![],
        timeout: Duration::from_secs(30),
    };
    let conn = connect(spec, None)
        .await
        .expect("python stdio server connects");
    let tool = conn.tools().into_iter().next().expect("env_keys");
    assert_eq!(tool.name(), "pystdio__env_keys");
    let out = tool
        .execute(&ctx(), json!({}))
        .await
        .expect("env_keys runs");
    // The fenced text holds the comma-separated names (the fence's own lines come first).
    let line = out
        .text
        .lines()
        .find(|l| l.contains("PATH"))
        .expect("a line of names");
    let keys: Vec<String> = line.split(',').map(str::to_string).collect();
    assert!(!keys.iter().any(|k| k.contains("API_KEY")), "{keys:?}");
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "PATH"] {
        assert!(keys.contains(&k.to_string()), "{k} missing: {keys:?}");
    }
    conn.shutdown().await;
    eprintln!("ok: forge client -> python MCPServer over stdio (no API keys in its environment: {keys:?})");
}
