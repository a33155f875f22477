//! `forge run` serving A2A: loopback by default with no token; bound to another address it
//! generates `.forge/runtime.token`, prints it, and refuses `POST /` without it (the card and
//! /healthz stay public). Traffic in this test goes to 127.0.0.1 only.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

// Stops the server when the test ends, however it ends (SIGTERM first, so Chromium goes too).
use forge_testkit::cli::Terminating as Server;

fn start(dir: &std::path::Path, host: &str) -> (Server, Vec<String>) {
    std::fs::write(
        dir.join("forge.yaml"),
        "agent_id: served\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    std::fs::write(dir.join("s.yaml"), "turns:\n  - text: hello from forge\n").unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .current_dir(dir)
        .args([
            "run",
            "--host",
            host,
            "--port",
            "0",
            "--audit-file",
            "audit.ndjson",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut reader = BufReader::new(server.0.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    lines.push(first);
    if host != "127.0.0.1" {
        let mut second = String::new();
        reader.read_line(&mut second).unwrap();
        lines.push(second);
    }
    (server, lines)
}

fn port_of(line: &str) -> u16 {
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("a URL");
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

fn request(port: u16, raw: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (
        status,
        out.split_once("\r\n\r\n")
            .map(|x| x.1.to_string())
            .unwrap_or_default(),
    )
}

fn send(port: u16, token: Option<&str>) -> (u16, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"role":"user","messageId":"m","parts":[{"kind":"text","text":"hi"}]}}}"#;
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    request(
        port,
        &format!("POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\n{auth}content-length: {}\r\n\r\n{body}", body.len()),
    )
}

#[test]
fn loopback_needs_no_token() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, lines) = start(dir.path(), "127.0.0.1");
    assert!(
        lines[0].contains("over A2A on http://127.0.0.1:"),
        "{}",
        lines[0]
    );
    let (status, body) = send(port_of(&lines[0]), None);
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v["result"]["status"]["message"]["parts"][0]["text"],
        "hello from forge"
    );
    assert!(
        !dir.path().join(".forge/runtime.token").exists(),
        "no token file on loopback"
    );
}

#[test]
fn another_address_requires_the_generated_token() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, lines) = start(dir.path(), "0.0.0.0");
    let token_file = dir.path().join(".forge/runtime.token");
    let token = std::fs::read_to_string(&token_file)
        .expect("token generated")
        .trim()
        .to_string();
    assert_eq!(token.len(), 64);
    assert!(
        lines[1].contains("bearer token required") && lines[1].contains(&token),
        "printed at start: {}",
        lines[1]
    );
    let port = port_of(&lines[0]);

    assert_eq!(send(port, None).0, 401);
    assert_eq!(send(port, Some("not-the-token")).0, 401);
    let (status, body) = send(port, Some(&token));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hello from forge"));

    let (status, card) = request(
        port,
        "GET /.well-known/agent-card.json HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n",
    );
    assert_eq!(status, 200);
    assert!(card.contains("\"securitySchemes\""));
    assert_eq!(
        request(
            port,
            "GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
        .0,
        200
    );

    let audit = std::fs::read_to_string(dir.path().join("audit.ndjson")).unwrap();
    assert!(
        !audit.contains(&token),
        "the token never reaches the audit log"
    );
}

#[test]
fn an_operator_token_from_the_environment_is_used_and_not_written() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: served\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "turns:\n  - text: hello from forge\n",
    )
    .unwrap();
    let token = "operator-token-0123456789abcdef";
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .current_dir(dir.path())
        .env("FORGE_RUNTIME_TOKEN", token)
        .args(["run", "--host", "0.0.0.0", "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut reader = BufReader::new(server.0.stdout.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    reader.read_line(&mut first).unwrap();
    reader.read_line(&mut second).unwrap();
    assert!(
        second.contains("FORGE_RUNTIME_TOKEN") && !second.contains(token),
        "not echoed: {second}"
    );
    assert!(!dir.path().join(".forge/runtime.token").exists());
    let port = port_of(&first);
    assert_eq!(send(port, None).0, 401);
    assert_eq!(send(port, Some(token)).0, 200);
}

#[test]
fn a_corrupt_or_unreachable_state_store_stops_forge_run_with_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: served\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.yaml"), "turns:\n  - text: hi\n").unwrap();
    std::fs::create_dir_all(dir.path().join(".forge")).unwrap();
    let db = dir.path().join(".forge").join("state.db");
    std::fs::write(&db, vec![0x5au8; 4096]).unwrap();
    let run = |env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_forge"));
        c.current_dir(dir.path())
            .args(["run", "--port", "0"])
            .env_remove("FORGE_STATE_URL");
        for (k, v) in env {
            c.env(k, v);
        }
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: the error comes at start; a server that did start is stopped by the guard.
        let mut guard = Server(child);
        for _ in 0..300 {
            if let Ok(Some(_)) = guard.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = guard.0.try_wait().unwrap().expect("forge run exited");
        let mut err = String::new();
        guard
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, err)
    };
    let (status, err) = run(&[]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&db.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains("move it aside"), "says the fix: {err}");
    assert!(!err.contains("panicked"), "{err}");
    // An unreachable PostgreSQL: named without its password.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://forge:Sekrit-pw-1@127.0.0.1:{port}/forge");
    let (status, err) = run(&[("FORGE_STATE_URL", url.as_str())]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(
        !err.contains("Sekrit-pw-1"),
        "the password stays out: {err}"
    );
    assert!(err.contains("running and reachable"), "{err}");
}
