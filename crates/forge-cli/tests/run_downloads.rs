//! A download clicked inside an A2A task is an artifact a client fetches over HTTP (issue 23,
//! point 1): a real `forge run` whose scripted model opens a loopback page and clicks its
//! `<a download>` link, real Chromium through the real egress proxy; the task's artifacts hold
//! the file, and `/artifacts/...` serves exactly the bytes the site served. Traffic goes to
//! 127.0.0.1 only; every wait is bounded. Skips without Chromium; fails instead under
//! `FORGE_REQUIRE_BROWSER=1`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use forge_testkit::site::{Response, Site};
use serde_json::{json, Value};

// Stops the server when the test ends, however it ends (SIGTERM, then kill).
use forge_testkit::cli::Terminating as Server;

/// One HTTP request to the server: (status, body bytes).
fn http(port: u16, head: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(90))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP answer");
    let status = String::from_utf8_lossy(&out[..split])
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out[split + 4..].to_vec())
}

fn rpc(port: u16, body: &Value) -> Value {
    let body = body.to_string();
    let head = format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let (_, payload) = http(port, &head, body.as_bytes());
    serde_json::from_slice(&payload)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&payload)))
}

/// Bytes that are not text (every byte value), distinct from anything else served.
fn report() -> Vec<u8> {
    (0..20_000u32)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(11))
        .collect()
}

#[test]
fn a_clicked_download_is_an_a2a_artifact_with_exactly_the_served_bytes() {
    if forge_testkit::gates::require_browser("forge run downloads test").is_none() {
        return;
    }
    let site = Site::start(|r| {
        match r.path.as_str() {
        "/page.html" => Response::html(
            "<!doctype html><title>Reports</title><a id=\"csv\" href=\"/files/report.bin\" download=\"report.bin\">Report</a>",
        ),
        "/files/report.bin" => Response::bytes(200, "application/octet-stream", report()),
        _ => Response::not_found(),
    }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("skills/reports")).unwrap();
    std::fs::write(
        dir.path().join("skills/reports/SKILL.md"),
        format!(
            "---\nname: reports\ndescription: Fetch the report.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    egress_domains: [\"{}\"]\n---\nFetch the report.\n",
            site.entry()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("s.yaml"),
        format!(
            "turns:\n  - tool_calls:\n      - {{name: browser_navigate, arguments: {{url: \"{}\"}}}}\n  - tool_calls:\n      - {{name: browser_click, arguments: {{selector: \"#csv\"}}}}\n  - text: \"CLICK[{{{{result:browser_click}}}}]\"\n",
            site.url("/page.html")
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: reports\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\negress:\n  mode: allowlist\nbrowser:\n  downloads: {max_bytes: 1MiB, max_files: 5}\n",
    )
    .unwrap();
    let child = forge_testkit::forge!()
        .current_dir(dir.path())
        .args(["run", "--port", "0"])
        .env_remove("FORGE_STATE_URL")
        .env_remove("FORGE_PUBLIC_URL")
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
            "role": "user", "messageId": "dl-1", "contextId": "ctx-downloads",
            "parts": [{"kind": "text", "text": "fetch the report"}]}}}),
    );
    let task = &r["result"];
    assert_eq!(task["status"]["state"], "completed", "{r}");
    let answer = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let answer = if answer.is_empty() {
        r.to_string()
    } else {
        answer
    };
    assert!(
        answer.contains("downloaded: report.bin (20 KB, application/octet-stream)"),
        "{answer}"
    );
    // The task's artifacts name the file by an /artifacts/ URL.
    let uris: Vec<String> = task["artifacts"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|a| a["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["file"]["uri"].as_str().map(str::to_string))
        .collect();
    let uri = uris
        .iter()
        .find(|u| u.ends_with("report.bin"))
        .unwrap_or_else(|| panic!("no artifact for the download: {uris:?} in {r}"));
    let path = uri
        .find("/artifacts/")
        .map(|i| &uri[i..])
        .unwrap_or_else(|| panic!("not an /artifacts/ URL: {uri}"));
    let (status, bytes) = http(
        port,
        &format!("GET {path} HTTP/1.0\r\nhost: 127.0.0.1\r\n\r\n"),
        &[],
    );
    assert_eq!(status, 200, "{path}");
    assert_eq!(bytes, report(), "the artifact is exactly the served file");
}
