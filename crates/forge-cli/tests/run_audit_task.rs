//! Guardrail audit events of an A2A task name the task (issue 20, point 6): a real `forge run`
//! whose scripted model calls `cli_execute` with a command a skill's `deny_commands` blocks; the
//! audit log's `guardrail_check` line has `task_id` = the A2A task's id and `context_id` = its
//! conversation. Traffic goes to 127.0.0.1 only; every wait is bounded.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

fn rpc(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s.write_all(
        format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (_, payload) = out.split_once("\r\n\r\n").expect("an HTTP answer");
    serde_json::from_str(payload).unwrap_or_else(|e| panic!("{e}: {out}"))
}

const SKILL: &str = r#"---
name: guarded
description: Runs echo, never a recursive delete.
metadata:
  forge:
    requires:
      bins: [echo]
    guardrails:
      deny_commands:
        - pattern: '(?i)\brm\s+-rf\b'
          message: recursive deletes are not allowed
---
# Guarded
"#;

#[test]
fn a_guardrail_hit_inside_an_a2a_task_is_audited_with_the_task_id_and_the_context_id() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: guarded\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [echo]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("skills").join("guarded")).unwrap();
    std::fs::write(
        dir.path().join("skills").join("guarded").join("SKILL.md"),
        SKILL,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "turns:\n  - tool_calls:\n      - name: cli_execute\n        arguments: {binary: echo, args: [\"rm -rf /\"]}\n  - text: refused as expected\n",
    )
    .unwrap();
    let child = forge_testkit::forge!()
        .current_dir(dir.path())
        .args(["run", "--port", "0", "--audit-file", "audit.ndjson"])
        .env_remove("FORGE_STATE_URL")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Server(child);
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let port: u16 = forge_testkit::cli::url_port(&first);

    let r = rpc(
        port,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
            "role": "user", "messageId": "guard-1", "contextId": "ctx-guarded",
            "parts": [{"kind": "text", "text": "clean up"}]}}}),
    );
    let task = &r["result"];
    assert_eq!(task["status"]["state"], "completed", "{r}");
    let task_id = task["id"].as_str().expect("a task id");
    assert_ne!(task_id, "ctx-guarded");

    // The audit line is written when the hit happens; read until it is there (bounded).
    let audit = dir.path().join("audit.ndjson");
    let deadline = Instant::now() + Duration::from_secs(10);
    let hit = loop {
        let text = std::fs::read_to_string(&audit).unwrap_or_default();
        let found = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["event"] == "guardrail_check");
        if let Some(e) = found {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "no guardrail_check in the audit log: {text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(hit["action"], "blocked", "{hit}");
    assert_eq!(hit["tool"], "cli_execute", "{hit}");
    assert_eq!(hit["task_id"], task_id, "the task's id: {hit}");
    assert_eq!(hit["context_id"], "ctx-guarded", "its conversation: {hit}");
}
