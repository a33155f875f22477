//! Browser figures for docs/benchmarks.md: observation size vs a naive accessibility-tree dump,
//! navigate/click/fill round trips, cold start, memory and process count. Real Chromium through
//! the real proxy, side by side with a bare-CDP floor measured in the same run (Chromium launched
//! with only `--headless=new --remote-debugging-port=0`, one page, `Runtime.evaluate`), and a
//! breakdown of forge's click path timed here (the product carries no timing code).
//!
//! `cargo bench -p forge-browser --bench browser -- /work/shared/corpus`
//! (the corpus dir may also be given as FORGE_CORPUS). Prints a markdown report to stdout.
// Printing is allowed here (a figures run: its results are its output).
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::page::CreateIsolatedWorldParams;
use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::{Browser, Page};
use forge_browser::{observe, BrowserManager};
use forge_testkit::browser::*;
use forge_testkit::site::Site;
use forge_tools::ToolContext;
use futures::StreamExt;
use serde_json::{json, Value};

use common::{
    all_pids, corpus_dir, fenced, median, ms, proc_kb, readability_pages, stat_fields,
    static_server_handler, tool,
};

/// Sum of PSS and RSS (kB) over the processes of group `pgid`.
fn group_memory(pgid: i32) -> (u64, u64, usize) {
    let (mut pss, mut rss, mut n) = (0, 0, 0);
    for pid in all_pids() {
        let pgrp: i32 = stat_fields(pid)
            .and_then(|f| f.get(2).and_then(|s| s.parse().ok()))
            .unwrap_or(0);
        if pgrp == pgid {
            pss += proc_kb(pid, "smaps_rollup", "Pss:");
            rss += proc_kb(pid, "status", "VmRSS:");
            n += 1;
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

/// A bare Chromium: launched with the minimal flags, connected over CDP, nothing else.
struct Bare {
    browser: Browser,
    pgid: i32,
    _dir: tempfile::TempDir,
    handler: tokio::task::JoinHandle<()>,
    child: tokio::process::Child,
}

impl Bare {
    async fn launch(binary: &Path) -> (Bare, Duration) {
        let dir = tempfile::tempdir().expect("bare profile dir");
        let t = Instant::now();
        let mut cmd = tokio::process::Command::new(binary);
        cmd.arg("--headless=new")
            .arg("--remote-debugging-port=0")
            .arg(format!("--user-data-dir={}", dir.path().display()))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // The same sandbox rule as forge (root or container: no sandbox).
        let root = unsafe { libc::geteuid() } == 0;
        if root || Path::new("/.dockerenv").exists() || Path::new("/run/.containerenv").exists() {
            cmd.arg("--no-sandbox");
        }
        let mut child = cmd.spawn().expect("spawn bare chromium");
        let pgid = child.id().expect("pid") as i32;
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
        let ws = tokio::time::timeout(Duration::from_secs(20), async {
            while let Ok(Some(l)) = lines.next_line().await {
                if let Some(ws) = l.strip_prefix("DevTools listening on ") {
                    return Some(ws.trim().to_string());
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .expect("bare chromium DevTools address");
        // Keep draining stderr so Chromium never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (browser, mut h) = Browser::connect(ws).await.expect("bare connect");
        let handler = tokio::spawn(async move { while h.next().await.is_some() {} });
        let connected = t.elapsed();
        (
            Bare {
                browser,
                pgid,
                _dir: dir,
                handler,
                child,
            },
            connected,
        )
    }

    async fn close(mut self) {
        unsafe {
            libc::killpg(self.pgid, libc::SIGKILL);
        }
        let _ = self.child.wait().await;
        self.handler.abort();
    }
}

async fn eval(page: &Page, expr: &str) -> Value {
    page.execute(
        EvaluateParams::builder()
            .expression(expr)
            .return_by_value(true)
            .build()
            .expect("eval params"),
    )
    .await
    .expect("evaluate")
    .result
    .result
    .value
    .clone()
    .unwrap_or(Value::Null)
}

async fn mouse_click(page: &Page, x: f64, y: f64) {
    for (t, b) in [
        (DispatchMouseEventType::MouseMoved, None),
        (
            DispatchMouseEventType::MousePressed,
            Some(MouseButton::Left),
        ),
        (
            DispatchMouseEventType::MouseReleased,
            Some(MouseButton::Left),
        ),
    ] {
        let mut p = DispatchMouseEventParams::builder().r#type(t).x(x).y(y);
        if let Some(b) = b {
            p = p.button(b).click_count(1);
        }
        page.execute(p.build().expect("mouse params"))
            .await
            .expect("mouse");
    }
}

async fn mouse_click_pipelined(page: &Page, x: f64, y: f64) {
    let p = |t, b: Option<MouseButton>| {
        let mut p = DispatchMouseEventParams::builder().r#type(t).x(x).y(y);
        if let Some(b) = b {
            p = p.button(b).click_count(1);
        }
        p.build().expect("mouse params")
    };
    let (a, b, c) = futures::join!(
        page.execute(p(DispatchMouseEventType::MouseMoved, None)),
        page.execute(p(
            DispatchMouseEventType::MousePressed,
            Some(MouseButton::Left)
        )),
        page.execute(p(
            DispatchMouseEventType::MouseReleased,
            Some(MouseButton::Left)
        )),
    );
    a.and(b).and(c).expect("mouse");
}

/// The input of forge's click when the pointer is already there (the approach's last two points,
/// then the click): a move 1 px short, waited for, then the move onto the point, press and
/// release sent without waiting for each ack.
async fn mouse_click_two_moves(page: &Page, x: f64, y: f64) {
    let p = |t, b: Option<MouseButton>, x: f64| {
        let mut p = DispatchMouseEventParams::builder().r#type(t).x(x).y(y);
        if let Some(b) = b {
            p = p.button(b).click_count(1);
        }
        p.build().expect("mouse params")
    };
    page.execute(p(DispatchMouseEventType::MouseMoved, None, x - 1.0))
        .await
        .expect("mouse");
    let (a, b, c) = futures::join!(
        page.execute(p(DispatchMouseEventType::MouseMoved, None, x)),
        page.execute(p(
            DispatchMouseEventType::MousePressed,
            Some(MouseButton::Left),
            x
        )),
        page.execute(p(
            DispatchMouseEventType::MouseReleased,
            Some(MouseButton::Left),
            x
        )),
    );
    a.and(b).and(c).expect("mouse");
}

/// A small observation-like read done by the bare floor after each click: the form's controls.
const BARE_READ: &str = "[...document.querySelectorAll('input,select,textarea,button')].map(e => e.tagName + '#' + e.id + '=' + (e.value || '') + (document.activeElement === e ? '*' : '')).join('\\n')";

/// Processes of group `pgid` by kind (`browser`, `renderer`, `gpu-process`, `utility <sub>`...).
fn group_kinds(pgid: i32) -> Vec<String> {
    let mut kinds = Vec::new();
    for pid in all_pids() {
        let pgrp: i32 = stat_fields(pid)
            .and_then(|f| f.get(2).and_then(|s| s.parse().ok()))
            .unwrap_or(0);
        if pgrp != pgid {
            continue;
        }
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let args: Vec<String> = cmd
            // Chromium rewrites its argv into one space-separated string: split on both.
            .split(|b| *b == 0 || *b == b' ')
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect();
        let mut kind = args
            .iter()
            .find_map(|a| a.strip_prefix("--type="))
            .unwrap_or("browser")
            .to_string();
        if let Some(sub) = args
            .iter()
            .find_map(|a| a.strip_prefix("--utility-sub-type="))
        {
            kind.push(' ');
            kind.push_str(sub.rsplit('.').next().unwrap_or(sub));
        }
        if args.iter().any(|a| a == "--top-chrome-webui") {
            kind.push_str(" (webui)");
        }
        kinds.push(kind);
    }
    kinds.sort();
    kinds
}

fn kinds_summary(kinds: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < kinds.len() {
        let n = kinds[i..].iter().take_while(|k| **k == kinds[i]).count();
        out.push(if n > 1 {
            format!("{n}x {}", kinds[i])
        } else {
            kinds[i].clone()
        });
        i += n;
    }
    out.join(", ")
}

/// The bare-CDP floor: cold start (spawn, connect, one page, load, one evaluate), click ->
/// evaluate on the form page, and the process count with that page loaded.
struct Floor {
    cold: Vec<f64>,
    connect: Vec<f64>,
    click: Vec<f64>,
    kinds: Vec<String>,
    rss_kb: u64,
}

async fn bare_floor(binary: &Path, small: &str, form: &str) -> Floor {
    let (mut cold, mut connect) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let t = Instant::now();
        let (bare, c) = Bare::launch(binary).await;
        let page = bare.browser.new_page(small).await.expect("bare page");
        let _ = page.wait_for_navigation().await;
        eval(&page, "document.title").await;
        cold.push(ms(t.elapsed()));
        connect.push(ms(c));
        bare.close().await;
    }
    let (bare, _) = Bare::launch(binary).await;
    let page = bare.browser.new_page(form).await.expect("bare page");
    let _ = page.wait_for_navigation().await;
    let at = eval(
        &page,
        "(() => { const r = document.querySelector('#name').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()",
    )
    .await;
    let x = at[0].as_f64().unwrap_or(0.0);
    let y = at[1].as_f64().unwrap_or(0.0);
    let mut click = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        mouse_click(&page, x, y).await;
        let v = eval(&page, BARE_READ).await;
        assert!(
            v.as_str().is_some_and(|s| s.contains("#name=*")),
            "bare click focused #name: {v}"
        );
        click.push(ms(t.elapsed()));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let kinds = group_kinds(bare.pgid);
    let (_, rss_kb, _) = group_memory(bare.pgid);
    bare.close().await;
    Floor {
        cold,
        connect,
        click,
        kinds,
        rss_kb,
    }
}

/// Where forge's click -> observation time goes: each step of the click path timed on its own
/// (20 runs each, median), on the active page of `session`.
async fn click_breakdown(m: &Arc<BrowserManager>, session: &str) -> Vec<(String, f64)> {
    let page = m.active_page(session).await.expect("active page");
    let mut rows = Vec::new();
    let mut time = |name: &str, v: &mut Vec<f64>| rows.push((name.to_string(), median(v)));
    let n = 20;
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        page.execute(GetTargetsParams::default())
            .await
            .expect("targets");
        v.push(ms(t.elapsed()));
    }
    time("Target.getTargets (tab sync, twice per click)", &mut v);
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        observe::main_frame(&page).await.expect("frame");
        v.push(ms(t.elapsed()));
    }
    time("main-frame lookup", &mut v);
    let frame = observe::main_frame(&page).await.expect("frame");
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        page.execute(
            CreateIsolatedWorldParams::builder()
                .frame_id(frame.clone())
                .world_name("forge-bench")
                .build()
                .expect("params"),
        )
        .await
        .expect("world");
        v.push(ms(t.elapsed()));
    }
    time(
        "Page.createIsolatedWorld (what an uncached call adds)",
        &mut v,
    );
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        observe::call(&page, "ready", &Value::Null)
            .await
            .expect("ready");
        v.push(ms(t.elapsed()));
    }
    time(
        "observe::call(ready) (one library call, cached world)",
        &mut v,
    );
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        observe::call(&page, "point", &json!({"selector": "#name"}))
            .await
            .expect("point");
        v.push(ms(t.elapsed()));
    }
    time("observe::call(point)", &mut v);
    let p = observe::call(&page, "point", &json!({"selector": "#name"}))
        .await
        .expect("point");
    let (x, y) = (
        p["x"].as_f64().unwrap_or(0.0),
        p["y"].as_f64().unwrap_or(0.0),
    );
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        mouse_click(&page, x, y).await;
        v.push(ms(t.elapsed()));
    }
    time("mouse move + press + release", &mut v);
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        mouse_click_pipelined(&page, x, y).await;
        v.push(ms(t.elapsed()));
    }
    time(
        "mouse move + press + release, sent without waiting for each ack",
        &mut v,
    );
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        mouse_click_two_moves(&page, x, y).await;
        v.push(ms(t.elapsed()));
    }
    time(
        "forge's click input: move 1 px short (acked), then move + press + release sent together",
        &mut v,
    );
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        observe::observe(&page).await.expect("observe");
        v.push(ms(t.elapsed()));
    }
    time(
        "observe::observe (listener marks + observe; the world is cached)",
        &mut v,
    );
    let obs = observe::observe(&page).await.expect("observe");
    let mut v = Vec::new();
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(observe::render(&obs, 6000));
        v.push(ms(t.elapsed()));
    }
    time("render", &mut v);
    rows
}

fn main() {
    let corpus = corpus_dir();
    let Some(binary) = forge_testkit::require_browser("browser bench") else {
        return;
    };
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
    rt.block_on(run(&corpus, &binary));
}

async fn run(corpus: &Path, binary: &Path) {
    let server = Site::serve(static_server_handler(corpus.to_path_buf()));
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let files = tmp.path().join("files");

    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let small_url = server.url("/playwright/input/button.html");
    let form_url = server.url("/playwright/evals/fill-form.html");
    // The floor first, on a quiet browser-free machine state.
    let floor = bare_floor(binary, &small_url, &form_url).await;

    // Cold start: a fresh manager each time, from the first tool call to its observation.
    let mut cold = Vec::new();
    let mut launch = Vec::new();
    let mut forge_kinds = Vec::new();
    let mut forge_rss = 0;
    for i in 0..3 {
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
        if i == 2 {
            // Processes with the form page loaded in one session (as the floor counts them).
            tool(&m, "browser_navigate")
                .execute(&ctx, json!({"url": form_url}))
                .await
                .expect("form nav");
            tokio::time::sleep(Duration::from_millis(500)).await;
            let pid = m.browser_pid().await.expect("pid") as i32;
            forge_kinds = group_kinds(pid);
            forge_rss = group_memory(pid).1;
        }
        m.shutdown().await;
    }

    let m = Arc::new(manager(addr, log.clone(), tmp.path()));
    let ctx = ToolContext::new("bench", &files);
    let nav = tool(&m, "browser_navigate");
    let state = tool(&m, "browser_state");

    // Observation size on the readability pages vs the naive dump.
    let names = readability_pages(corpus);
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
        assert!(
            !fenced(&o).is_empty(),
            "{name}: an observation in the fence: {o}"
        );
        assert_eq!(
            fenced(&o),
            fenced(&o2),
            "{name}: observation is deterministic"
        );
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
    // Click -> observation on the corpus's order form (a text field: focus, no navigation).
    nav.execute(&ctx, json!({"url": form_url}))
        .await
        .expect("form nav");
    let mut form_clicks = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let out = click
            .execute(&ctx, json!({"selector": "#name"}))
            .await
            .expect("form click");
        form_clicks.push(ms(t.elapsed()));
        assert!(
            out.text.contains("Full Name"),
            "observation lists the field"
        );
    }
    let breakdown = click_breakdown(&m, "bench").await;
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
    println!("### Side by side with the bare-CDP floor (same run)\n");
    println!("machine load (/proc/loadavg at start): {}", load.trim());
    println!("\n| what | forge | bare CDP |\n|---|---|---|");
    println!(
        "| click -> observation on playwright/evals/fill-form.html, #name (20 runs, median ms) | {:.1} | {:.1} |",
        median(&mut form_clicks),
        median(&mut floor.click.clone())
    );
    println!(
        "| cold start to first observation of playwright/input/button.html (3 runs, median ms) | {:.0} | {:.0} |",
        median(&mut cold.clone()),
        median(&mut floor.cold.clone())
    );
    println!(
        "| of which spawn to CDP connected (ms) | {:.0} | {:.0} |",
        median(&mut launch.clone()),
        median(&mut floor.connect.clone())
    );
    println!(
        "| Chromium processes with the form page loaded | {} | {} |",
        forge_kinds.len(),
        floor.kinds.len()
    );
    println!(
        "| their summed RSS (MB) | {} | {} |",
        forge_rss / 1024,
        floor.rss_kb / 1024
    );
    println!("\nforge processes: {}", kinds_summary(&forge_kinds));
    println!("bare processes: {}", kinds_summary(&floor.kinds));
    println!("\n### forge click path, step by step (fill-form.html, 20 runs each, median ms)\n");
    println!("| step | ms |\n|---|---|");
    for (name, v) in &breakdown {
        println!("| {name} | {v:.2} |");
    }
    println!();
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
