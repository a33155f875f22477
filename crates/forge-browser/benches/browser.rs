//! Browser figures for docs/benchmarks.md: observation size vs a naive accessibility-tree dump,
//! navigate/click/fill round trips, cold start, memory. Real Chromium through the real proxy.
//!
//! `cargo bench -p forge-browser --bench browser -- /work/shared/corpus`
//! (the corpus dir may also be given as FORGE_CORPUS). Prints a markdown report to stdout.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use common::*;
use forge_browser::{browser_tools, BrowserManager, BrowserToolOptions};
use forge_tools::{Tool, ToolContext};
use serde_json::{json, Value};

fn static_server_handler(root: PathBuf) -> Handler {
    Arc::new(move |r: &Request| {
        let rel = r
            .path
            .split('?')
            .next()
            .unwrap_or("/")
            .trim_start_matches('/');
        let path = root.join(rel);
        if rel.contains("..") || !path.starts_with(&root) {
            return Response {
                status: 403,
                content_type: "text/plain".into(),
                headers: vec![],
                body: b"no".to_vec(),
            };
        }
        match std::fs::read(&path) {
            Ok(body) => {
                let ct = match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
                    "html" => "text/html; charset=utf-8",
                    "js" => "text/javascript",
                    "css" => "text/css",
                    "png" => "image/png",
                    "json" => "application/json",
                    _ => "application/octet-stream",
                };
                Response {
                    status: 200,
                    content_type: ct.into(),
                    headers: vec![],
                    body,
                }
            }
            Err(_) => Response {
                status: 404,
                content_type: "text/plain".into(),
                headers: vec![],
                body: b"not found".to_vec(),
            },
        }
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn tool(m: &Arc<BrowserManager>, name: &str) -> Arc<dyn Tool> {
    browser_tools(m.clone(), BrowserToolOptions::default())
        .into_iter()
        .find(|t| t.name() == name)
        .expect("tool")
}

/// Kilobytes of a /proc status-like field.
fn proc_kb(pid: i32, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// Sum of PSS and RSS (kB) over the processes of group `pgid`.
fn group_memory(pgid: i32) -> (u64, u64, usize) {
    let (mut pss, mut rss, mut n) = (0, 0, 0);
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r.to_string()) else {
                continue;
            };
            let pgrp: i32 = rest
                .split_whitespace()
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            if pgrp == pgid {
                pss += proc_kb(pid, "smaps_rollup", "Pss:");
                rss += proc_kb(pid, "status", "VmRSS:");
                n += 1;
            }
        }
    }
    (pss, rss, n)
}

/// A naive accessibility-tree dump of the active page: one line per non-ignored node,
/// `role "name"`, without indentation.
async fn naive_ax_dump(m: &Arc<BrowserManager>, session: &str) -> usize {
    let mut best = 0;
    if let Some(p) = m.active_page(session).await {
        let Ok(tree) = p.execute(GetFullAxTreeParams::default()).await else {
            return 0;
        };
        let nodes = &tree.result.nodes;
        let mut depth = std::collections::HashMap::new();
        let mut out = String::new();
        for n in nodes {
            let d = n
                .parent_id
                .as_ref()
                .and_then(|p| depth.get(p.inner()).copied())
                .map(|d: usize| d + 1)
                .unwrap_or(0);
            depth.insert(n.node_id.inner().clone(), d);
            if n.ignored {
                continue;
            }
            let role = n
                .role
                .as_ref()
                .and_then(|r| r.value.as_ref())
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let name = n
                .name
                .as_ref()
                .and_then(|r| r.value.as_ref())
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let _ = d;
            out.push_str(&role);
            if !name.is_empty() {
                out.push_str(&format!(" {name:?}"));
            }
            out.push('\n');
        }
        best = best.max(out.len());
    }
    best
}

fn main() {
    let corpus = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("FORGE_CORPUS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpus"));
    if browser_or_skip("browser bench").is_none() {
        return;
    }
    if !corpus.join("readability").is_dir() {
        eprintln!(
            "SKIPPED browser bench: no corpus at {} (pass its path)",
            corpus.display()
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(&corpus));
}

async fn run(corpus: &Path) {
    let server = TestServer::start(static_server_handler(corpus.to_path_buf())).await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let files = tmp.path().join("files");

    // Cold start: a fresh manager each time, from the first tool call to its observation.
    let mut cold = Vec::new();
    let mut launch = Vec::new();
    for _ in 0..3 {
        let m = Arc::new(manager(addr, log.clone(), tmp.path()));
        let ctx = ToolContext::new("cold", &files);
        let t = Instant::now();
        tool(&m, "browser_navigate")
            .execute(
                &ctx,
                json!({"url": server.url("/playwright/input/button.html")}),
            )
            .await
            .expect("cold nav");
        cold.push(ms(t.elapsed()));
        launch.push(ms(m.launch_duration().await.unwrap_or_default()));
        m.shutdown().await;
    }

    let m = Arc::new(manager(addr, log.clone(), tmp.path()));
    let ctx = ToolContext::new("bench", &files);
    let nav = tool(&m, "browser_navigate");
    let state = tool(&m, "browser_state");

    // Observation size on the readability pages vs the naive dump.
    let mut names: Vec<String> = std::fs::read_dir(corpus.join("readability"))
        .expect("readability dir")
        .flatten()
        .filter(|e| e.path().join("source.html").exists())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let mut rows = Vec::new();
    let (mut obs_sizes, mut naive_sizes, mut nav_times) = (Vec::new(), Vec::new(), Vec::new());
    for name in &names {
        let url = server.url(&format!("/readability/{name}/source.html"));
        let t = Instant::now();
        let r = nav.execute(&ctx, json!({"url": url})).await;
        let took = ms(t.elapsed());
        let Ok(_) = r else {
            rows.push(format!(
                "| {name} | failed: {} | | |",
                r.err().map(|e| e.to_string()).unwrap_or_default()
            ));
            continue;
        };
        let o = state.execute(&ctx, json!({})).await.expect("state").text;
        let o2 = state.execute(&ctx, json!({})).await.expect("state").text;
        let body = |s: &str| {
            s.split_once("instructions.]\n")
                .map(|(_, b)| {
                    b.rsplit_once("\n<<<")
                        .map(|(a, _)| a.to_string())
                        .unwrap_or_default()
                })
                .unwrap_or_default()
        };
        assert_eq!(body(&o), body(&o2), "{name}: observation is deterministic");
        let naive = naive_ax_dump(&m, "bench").await;
        rows.push(format!(
            "| {name} | {} | {} | {:.0} |",
            o.len(),
            naive,
            took
        ));
        obs_sizes.push(o.len() as f64);
        naive_sizes.push(naive as f64);
        nav_times.push(took);
    }
    let obs_max = obs_sizes.iter().cloned().fold(0.0, f64::max);
    let naive_max = naive_sizes.iter().cloned().fold(0.0, f64::max);

    // Round trips on small local pages.
    let mut nav_small = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        nav.execute(
            &ctx,
            json!({"url": server.url("/playwright/input/button.html")}),
        )
        .await
        .expect("nav");
        nav_small.push(ms(t.elapsed()));
    }
    let click = tool(&m, "browser_click");
    let mut clicks = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        click
            .execute(&ctx, json!({"selector": "button"}))
            .await
            .expect("click");
        clicks.push(ms(t.elapsed()));
    }
    nav.execute(
        &ctx,
        json!({"url": server.url("/playwright/input/textarea.html")}),
    )
    .await
    .expect("nav");
    let fill = tool(&m, "browser_fill");
    let mut fills = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        fill.execute(
            &ctx,
            json!({"selector": "textarea", "value": "hello world"}),
        )
        .await
        .expect("fill");
        fills.push(ms(t.elapsed()));
    }
    let mut states = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        state.execute(&ctx, json!({})).await.expect("state");
        states.push(ms(t.elapsed()));
    }
    // Memory with the last readability page and the small pages loaded in one session.
    nav.execute(
        &ctx,
        json!({"url": server.url("/readability/wikipedia/source.html")}),
    )
    .await
    .expect("nav");
    let pid = m.browser_pid().await.expect("pid") as i32;
    let (pss, rss, nproc) = group_memory(pid);
    let self_rss = proc_kb(std::process::id() as i32, "status", "VmRSS:");

    println!(
        "### Observation size (readability pages, bytes of the browser_state result incl. fence)\n"
    );
    println!("| page | observation | naive AX dump | navigate ms |\n|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    println!(
        "\nobservation median {:.0} B, max {:.0} B; naive dump median {:.0} B, max {:.0} B; navigate median {:.0} ms\n",
        median(&mut obs_sizes),
        obs_max,
        median(&mut naive_sizes),
        naive_max,
        median(&mut nav_times)
    );
    println!("### Round trips (median, tool call to returned observation)\n");
    println!("| what | median ms |\n|---|---|");
    println!("| cold start: first browser_navigate on a fresh manager (launch + context + load + observation), 3 runs | {:.0} |", median(&mut cold));
    println!(
        "| of which Chromium spawn to CDP connected | {:.0} |",
        median(&mut launch)
    );
    println!(
        "| browser_navigate, small local page (10) | {:.1} |",
        median(&mut nav_small)
    );
    println!(
        "| browser_click, button without navigation (20) | {:.1} |",
        median(&mut clicks)
    );
    println!(
        "| browser_fill, 11 chars into a textarea (20) | {:.1} |",
        median(&mut fills)
    );
    println!(
        "| browser_state, small page (20) | {:.1} |",
        median(&mut states)
    );
    println!("\n### Memory\n");
    println!(
        "forge process (this bench) RSS {} MB; Chromium {} processes: PSS {} MB (RSS sum {} MB)",
        self_rss / 1024,
        nproc,
        pss / 1024,
        rss / 1024
    );
    m.shutdown().await;
}
