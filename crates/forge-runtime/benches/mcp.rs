//! What the MCP layer adds (run: `cargo bench -p forge-runtime --bench mcp`).
//!
//! 1. The bytes of `tools/list` as an MCP client receives them (the JSON-RPC result), for the
//!    browser family and for every tool, on the `fixtures/agents/tools-browser` agent.
//! 2. The time per call of `math_calculate` (a cheap tool) through the ToolRunner directly, as
//!    `forge tool call` does, and through the MCP server (forge's ToolHost over the ToolRunner,
//!    rmcp server and client, an in-process byte pipe): the difference is what MCP adds.
//!
//! Figures go to docs/benchmarks.md ("MCP").

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::time::{Duration, Instant};

use forge_runtime::{Runner, RunnerOptions};
use forge_skills::Agent;
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read fixture").flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).expect("copy fixture file");
        }
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path().join("tools-browser");
    copy_dir(&repo.join("fixtures/agents/tools-browser"), &dir);
    // The fixture's skill denies browser_hover (for the tool-list tests); measure the whole family.
    let skill = dir.join("skills/shelf-reader/SKILL.md");
    let text = std::fs::read_to_string(&skill).expect("fixture skill");
    std::fs::write(
        &skill,
        text.replace("    denied_tools: [browser_hover]\n", ""),
    )
    .expect("write fixture skill");
    let agent = Agent::load(dir.join("forge.yaml")).expect("fixture agent loads");
    let runner = Runner::start(&agent, RunnerOptions::default())
        .await
        .expect("the agent starts (Chromium must be installed; it is not launched)");

    // The MCP server on one end of an in-process pipe, rmcp's client on the other.
    let (server_io, client_io) = tokio::io::duplex(1 << 20);
    let (sr, sw) = tokio::io::split(server_io);
    let host = runner.mcp_host();
    let server = tokio::spawn(async move {
        let _ = forge_mcp::serve_io(host, forge_mcp::ServeOptions::default(), sr, sw).await;
    });
    let client = ().serve(client_io).await.expect("MCP handshake");

    // 1. tools/list bytes.
    let tools = client.list_all_tools().await.expect("tools/list");
    let all = serde_json::to_vec(&json!({ "tools": tools })).expect("serializes");
    let browser: Vec<_> = tools
        .iter()
        .filter(|t| t.name.starts_with("browser_"))
        .collect();
    let browser_bytes = serde_json::to_vec(&json!({ "tools": browser })).expect("serializes");
    println!(
        "tools/list: browser family {} tools {} bytes; all {} tools {} bytes",
        browser.len(),
        browser_bytes.len(),
        tools.len(),
        all.len()
    );
    for t in &browser {
        println!(
            "  {:<22} {:>5} bytes",
            t.name,
            serde_json::to_vec(t).map(|v| v.len()).unwrap_or(0)
        );
    }

    // 2. Per-call time, direct vs through MCP.
    let tools_runner = runner.tools();
    let args = json!({"expression": "(2 + 3) * 7 / 5"});
    let iters = 3000;
    let mut direct = Vec::with_capacity(iters);
    let mut via_mcp = Vec::with_capacity(iters);
    let params = CallToolRequestParams::new("math_calculate")
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    for i in 0..(iters + iters / 10) {
        let t = Instant::now();
        let r = tools_runner
            .call(
                "bench",
                "math_calculate",
                args.clone(),
                CancellationToken::new(),
                None,
            )
            .await;
        let d = t.elapsed();
        assert!(r.is_ok(), "{r:?}");
        let t = Instant::now();
        let r = client.call_tool(params.clone()).await.expect("tools/call");
        let m = t.elapsed();
        assert_ne!(r.is_error, Some(true), "{r:?}");
        if i >= iters / 10 {
            direct.push(d);
            via_mcp.push(m);
        }
    }
    let (d, m) = (median(direct), median(via_mcp));
    println!("math_calculate via ToolRunner::call (forge tool call's path): median {d:.2?} ({iters} runs)");
    println!("math_calculate via MCP (rmcp client -> pipe -> forge ToolHost): median {m:.2?} ({iters} runs)");
    println!(
        "MCP layer adds: {:.2?} per call (median difference)",
        m.saturating_sub(d)
    );
    let _ = client.cancel().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    runner.shutdown().await;
}
