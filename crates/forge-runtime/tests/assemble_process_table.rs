//! "Optional means zero cost", checked in the process table: an agent with no browser skill (and no
//! cli_execute or scripts) opens no listening socket and starts no Chromium, even after tool calls.
//! The same two checks are run against agents that do need them (positive controls), so neither
//! check can pass by construction. This file holds one test so no other test shares the process.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use forge_runtime::{assemble, AssembleOptions};
use forge_skills::Agent;
use forge_testkit::site::{Response, Site};
use serde_json::json;

use fixture_agents::fixture_copy;
use forge_testkit::agents as fixture_agents;

fn load(name: &str) -> (tempfile::TempDir, Agent) {
    let dir = fixture_copy(name);
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

/// TCP ports this process is listening on (from /proc/self/fd and /proc/net/tcp{,6}).
fn own_listening_ports() -> HashSet<u16> {
    let mut inodes = HashSet::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(target) = std::fs::read_link(e.path()) {
            let t = target.to_string_lossy().to_string();
            if let Some(n) = t.strip_prefix("socket:[").and_then(|r| r.strip_suffix(']')) {
                inodes.insert(n.to_string());
            }
        }
    }
    let mut ports = HashSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() > 9 && cols[3] == "0A" && inodes.contains(cols[9]) {
                if let Some(port) = cols[1]
                    .rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
                {
                    ports.insert(port);
                }
            }
        }
    }
    ports
}

/// Processes descended from this test process whose command line mentions Chromium.
fn chromium_descendants() -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut parent: HashMap<u32, u32> = HashMap::new();
    let mut cmd: HashMap<u32, String> = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the `(comm)`: state ppid ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let ppid = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        parent.insert(pid, ppid);
        let c = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmd.insert(pid, String::from_utf8_lossy(&c).replace('\0', " "));
    }
    let mut out = Vec::new();
    for (&pid, c) in &cmd {
        if !c.to_ascii_lowercase().contains("chrom") {
            continue;
        }
        let mut p = pid;
        // Bounded walk up the tree.
        for _ in 0..64 {
            match parent.get(&p) {
                Some(&pp) if pp == me => {
                    out.push((pid, c.clone()));
                    break;
                }
                Some(&pp) if pp > 1 => p = pp,
                _ => break,
            }
        }
    }
    out
}

/// A loopback site serving one small page (at most 20 connections).
fn page_server() -> u16 {
    Site::builder()
        .max_connections(20)
        .start(|_| {
            Response::bare(
                200,
                "<html><head><title>t</title></head><body><p>hello</p></body></html>",
            )
            .header("content-type", "text/html")
        })
        .port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_browser_skill_means_no_listener_and_no_chromium() {
    let baseline = own_listening_ports();
    assert!(
        chromium_descendants().is_empty(),
        "no Chromium before the test"
    );

    // The agent without a browser skill, used for real.
    let (_d, agent) = load("tools-plain");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let ctx = tools.context("task-1");
    tools
        .execute("math_calculate", json!({"expression": "1+1"}), &ctx)
        .await
        .unwrap();
    tools
        .execute(
            "file_create",
            json!({"filename": "n.txt", "content": "x"}),
            &ctx,
        )
        .await
        .unwrap();
    let err = tools
        .execute("http_request", json!({"url": "http://127.0.0.1:9/"}), &ctx)
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("blocked by egress policy"),
        "{err}"
    );
    assert!(tools.proxy_addr().is_none());
    assert!(tools.browser().is_none());
    assert!(tools
        .registry()
        .list()
        .iter()
        .all(|t| !t.name().starts_with("browser_")));
    assert_eq!(own_listening_ports(), baseline, "no listener was opened");
    assert!(chromium_descendants().is_empty(), "no Chromium was started");
    tools.shutdown().await;

    // Positive control for the socket check: cli_execute starts the proxy, and it shows up.
    let (_d2, agent) = load("tools-cli");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let port = tools.proxy_addr().expect("proxy").port();
    assert!(
        own_listening_ports().contains(&port),
        "the check sees a real listener"
    );
    tools.shutdown().await;
    assert!(
        !own_listening_ports().contains(&port),
        "the proxy stopped listening at shutdown"
    );

    // Positive control for the process check: a browser agent, one call, Chromium is our child.
    if forge_testkit::require_browser("the Chromium positive control").is_none() {
        return;
    }
    let site = page_server();
    let (_d3, agent) = load("tools-browser");
    let opts = AssembleOptions {
        cli_egress_entries: vec![format!("127.0.0.1:{site}")],
        ..Default::default()
    };
    let tools = assemble(&agent, opts).await.unwrap();
    assert!(
        chromium_descendants().is_empty(),
        "assembly alone launches nothing"
    );
    let ctx = tools.context("task-2");
    let out = tools
        .execute(
            "browser_navigate",
            json!({"url": format!("http://127.0.0.1:{site}/")}),
            &ctx,
        )
        .await
        .unwrap();
    assert!(out.text.contains("hello"), "{}", out.text);
    assert!(
        !chromium_descendants().is_empty(),
        "the check sees a real Chromium"
    );
    tools.shutdown().await;
    // Shutdown ends Chromium; allow a bounded moment for the kernel to reap.
    let mut left = chromium_descendants();
    for _ in 0..50 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        left = chromium_descendants();
    }
    assert!(left.is_empty(), "Chromium left behind: {left:?}");
}
