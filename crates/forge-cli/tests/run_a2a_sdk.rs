//! Interoperability: `forge run` serves A2A and the official A2A Python SDK (`a2a-sdk`, installed
//! by `scripts/install-deps.sh python`) resolves the card, sends a task, reads it back with
//! get_task, and streams a second task whose events include the tool progress, once over A2A 1.0
//! (the SDK's current protocol) and once over A2A 0.3 (the SDK's compat transport).
//! Skips with a message when python3 or the SDK is missing; fails instead when
//! `FORGE_REQUIRE_BROWSER=1` (CI, which installs everything).

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

fn sdk_available() -> bool {
    forge_testkit::python_has("import a2a.client, httpx")
}

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

fn parts_text(msg: &Value) -> String {
    msg["parts"]
        .as_array()
        .map(|p| {
            p.iter()
                .filter_map(|x| x["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

#[test]
fn the_a2a_python_sdk_talks_to_forge_run() {
    if !forge_testkit::require(
        sdk_available(),
        "a2a-sdk for python3 is not installed (run scripts/install-deps.sh python)",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: sdk-calc\nversion: 2.0.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        "turns:\n  - tool_calls:\n      - {name: math_calculate, arguments: {expression: \"19*3\"}}\n  - text: \"The calculator says {{result:math_calculate}}\"\n",
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_forge"))
        .arg("run")
        .arg("--config")
        .arg(dir.path().join("forge.yaml"))
        .args(["--port", "0"])
        .arg("--audit-file")
        .arg(dir.path().join("audit.ndjson"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start forge run");
    let mut server = Server(child);
    let stdout = server.0.stdout.take().unwrap();
    let mut first = String::new();
    BufReader::new(stdout).read_line(&mut first).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("forge prints its URL")
        .to_string();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "binds loopback by default: {first}"
    );

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_a2a_sdk_client.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&url)
        .arg("what is 19*3?")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "sdk client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("the client prints JSON");

    assert_eq!(seen["card_name"], "sdk-calc");
    assert_eq!(seen["interfaces"], serde_json::json!(["1.0", "0.3"]));
    for protocol in ["v1", "v03"] {
        let run = &seen[protocol];
        let task = &run["send"];
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{protocol}: {task}"
        );
        let answer = parts_text(&task["status"]["message"]);
        assert!(
            answer.starts_with("The calculator says") && answer.contains("57"),
            "{protocol}: {answer}"
        );
        assert_eq!(run["get"]["id"], task["id"], "{protocol}");
        assert_eq!(
            run["get"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{protocol}"
        );
        assert_eq!(
            parts_text(&run["get"]["artifacts"][0]),
            answer,
            "{protocol}"
        );

        let stream = run["stream"].as_array().unwrap();
        assert!(
            stream[0].get("task").is_some(),
            "{protocol}: the stream starts with the task"
        );
        let progress: Vec<&Value> = stream
            .iter()
            .filter_map(|e| e["statusUpdate"]["status"]["message"]["parts"].as_array())
            .flatten()
            .filter_map(|p| p.get("data"))
            .filter(|d| d["tool"] == "math_calculate")
            .collect();
        assert_eq!(
            progress
                .iter()
                .map(|d| d["event"].as_str().unwrap())
                .collect::<Vec<_>>(),
            vec!["tool_start", "tool_end"],
            "{protocol}"
        );
        let last = stream.last().unwrap();
        assert_eq!(
            last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{protocol}: {last}"
        );
        assert!(
            parts_text(&last["statusUpdate"]["status"]["message"]).contains("57"),
            "{protocol}"
        );
    }
}
