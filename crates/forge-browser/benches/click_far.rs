//! Click -> observation from a far pointer start, next to the bare-CDP floor, in one run (issue
//! 21, point 1). Real Chromium through the real egress proxy; the corpus's order form
//! (`playwright/evals/fill-form.html`), its "Full Name" textbox (`#name`).
//!
//! `cargo bench -p forge-browser --bench click_far -- /work/shared/corpus` (the corpus dir may
//! also be given as FORGE_CORPUS). Prints a markdown table to stdout. Timed, median of 20 each:
//! - forge, far start: every run in a fresh session (a fresh tab, whose pointer forge starts at
//!   0,0, the top-left corner), navigated to the form untimed, then `browser_click` on the field
//!   until its result (status and observation) is back;
//! - forge, near start: 20 clicks in a row on the same field (the pointer already there);
//! - forge, far start in a warm tab: in that same tab, 20 more, each after an untimed
//!   `browser_hover` on the page's heading (`h1`, above the form), so the approach travels from
//!   there (agent-browser's "pointer moved to 0,0 first" leg, in forge);
//! - bare CDP, in the same browser (a session of its own): one move straight to the field's
//!   centre, press, release (each awaited), then `Accessibility.getFullAXTree` (a bare
//!   observation);
//! - agent-browser (Vercel Labs' CLI), only when `AGENT_BROWSER` names its binary (never needed by
//!   tests or CI): the same page from the same loopback server, `open <url>` untimed, then timed
//!   `click "#name"` followed by `snapshot` (two CLI calls, as an agent makes them: its click ->
//!   observation). Far start: a fresh `--session` (a new browser) every run; near start: 20 in
//!   a row in one session; far start in a warm session: `mouse move 0 0` (untimed) before each
//!   of 20 more in that session; far start in a fresh tab of the running browser (forge's far
//!   start): `tab new <url>` and `wait "#name"` (untimed) before each of 20 more, `tab
//!   close` after. Its browser is `AGENT_BROWSER_EXECUTABLE_PATH` if set, else
//!   /usr/bin/chromium; its state (sockets, config) lives in a temp HOME.
// Printing is allowed here (a figures run: its results are its output).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use forge_browser::{browser_tools, BrowserToolOptions};
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::{Tool, ToolContext};
use serde_json::{json, Value};

const RUNS: usize = 20;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

/// One agent-browser CLI call in `session`: its stdout, or why it failed. Bounded: a call that
/// has not answered in 60 s is an error (the waiting thread is left behind; the run ends soon).
fn ab(bin: &Path, home: &Path, session: &str, args: &[&str]) -> Result<String, String> {
    let chromium = std::env::var("AGENT_BROWSER_EXECUTABLE_PATH")
        .unwrap_or_else(|_| "/usr/bin/chromium".to_string());
    let child = Command::new(bin)
        .arg("--session")
        .arg(session)
        .args(args)
        .env("HOME", home)
        .env("AGENT_BROWSER_EXECUTABLE_PATH", chromium)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .map_err(|_| format!("agent-browser {args:?} did not answer in 60 s"))?
        .map_err(|e| format!("agent-browser {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "agent-browser {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// agent-browser's click -> observation (`click "#name"`, then `snapshot`), in ms, far start
/// (a fresh session each run) and near start (one session), each checked: the snapshot must list
/// the field and, after each leg, the field must hold the focus (the click took effect).
fn agent_browser_leg(bin: &Path, url: &str) -> Result<[Vec<f64>; 4], String> {
    let home = tempfile::tempdir().map_err(|e| format!("temp HOME: {e}"))?;
    let home = home.path();
    let timed = |session: &str| -> Result<f64, String> {
        let t = Instant::now();
        ab(bin, home, session, &["click", "#name"])?;
        let snap = ab(bin, home, session, &["snapshot"])?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        if !snap.contains("textbox \"Full Name") {
            return Err(format!("agent-browser's snapshot lacks the field: {snap}"));
        }
        Ok(ms)
    };
    let focused = |session: &str| -> Result<(), String> {
        let id = ab(bin, home, session, &["eval", "document.activeElement.id"])?;
        if id.trim() != "\"name\"" {
            return Err(format!(
                "after agent-browser's clicks the focus is on {id:?}, not #name"
            ));
        }
        Ok(())
    };
    let run = || -> Result<[Vec<f64>; 4], String> {
        let (mut far, mut near, mut corner, mut tab) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Warm-up (the binary, Chromium's first start, caches).
        ab(bin, home, "abwarm", &["open", url])?;
        timed("abwarm")?;
        ab(bin, home, "abwarm", &["close"])?;
        for i in 0..RUNS {
            let session = format!("abfar{i}");
            ab(bin, home, &session, &["open", url])?;
            far.push(timed(&session)?);
            focused(&session)?;
            ab(bin, home, &session, &["close"])?;
        }
        ab(bin, home, "abnear", &["open", url])?;
        timed("abnear")?;
        for _ in 0..RUNS {
            near.push(timed("abnear")?);
        }
        focused("abnear")?;
        for _ in 0..RUNS {
            // Far start in a warm session: the pointer sent to the top-left corner, untimed.
            ab(bin, home, "abnear", &["mouse", "move", "0", "0"])?;
            corner.push(timed("abnear")?);
        }
        focused("abnear")?;
        for _ in 0..RUNS {
            // Far start in a fresh tab of the running browser (forge's far start): a new tab
            // on the page (untimed), the timed click and snapshot, then the tab closed.
            ab(bin, home, "abnear", &["tab", "new", url])?;
            // `tab new` may answer before the page has loaded (forge's far leg waits for the
            // load in its untimed navigation).
            ab(bin, home, "abnear", &["wait", "#name"])?;
            tab.push(timed("abnear")?);
            focused("abnear")?;
            ab(bin, home, "abnear", &["tab", "close"])?;
        }
        Ok([far, near, corner, tab])
    };
    let result = run();
    // Every session's browser and daemon go, whatever happened above.
    let _ = ab(bin, home, "abnear", &["close", "--all"]);
    result
}

fn main() {
    let corpus = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .or_else(|| std::env::var("FORGE_CORPUS").ok())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpus"));
    let form = corpus.join("playwright/evals/fill-form.html");
    let Ok(html) = std::fs::read(&form) else {
        eprintln!("skipped: no {} (pass the corpus dir)", form.display());
        return;
    };
    let server = Site::start(move |r: &Request| {
        if r.path.split('?').next() == Some("/fill-form.html") {
            Response::bytes(200, "text/html; charset=utf-8", html.clone())
        } else {
            Response::not_found()
        }
    });
    let Some(b) = Shared::start("click_far bench", &[server.entry()], Confine::No) else {
        return;
    };
    let url = server.url("/fill-form.html");
    let url_ab = url.clone();
    let tool = |name: &str| -> Arc<dyn Tool> {
        browser_tools(b.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    };
    let (nav, click, hover) = (
        tool("browser_navigate"),
        tool("browser_click"),
        tool("browser_hover"),
    );
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let m = b.manager.clone();
    let files = b.files.path().to_path_buf();
    let (far, near, warm, bare) = b.rt.block_on(async move {
        let (mut far, mut near, mut warm, mut bare) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        // Warm-up (Chromium's first page, caches).
        let ctx = ToolContext::new("warm", &files);
        nav.execute(&ctx, json!({"url": url})).await.expect("warm nav");
        click
            .execute(&ctx, json!({"selector": "#name"}))
            .await
            .expect("warm click");
        m.close_session("warm").await;
        for i in 0..RUNS {
            let session = format!("far{i}");
            let ctx = ToolContext::new(&session, &files);
            nav.execute(&ctx, json!({"url": url})).await.expect("nav");
            let t = Instant::now();
            let out = click
                .execute(&ctx, json!({"selector": "#name"}))
                .await
                .expect("far click");
            far.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(out.text.contains("Full Name"), "observed: {}", out.text);
            m.close_session(&session).await;
        }
        let ctx = ToolContext::new("near", &files);
        nav.execute(&ctx, json!({"url": url})).await.expect("nav");
        click
            .execute(&ctx, json!({"selector": "#name"}))
            .await
            .expect("first click");
        for _ in 0..RUNS {
            let t = Instant::now();
            click
                .execute(&ctx, json!({"selector": "#name"}))
                .await
                .expect("near click");
            near.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        // Far start in a warm tab (the field already focused, as in agent-browser's 0,0 leg):
        // the pointer sent to the page's heading first (untimed `browser_hover`), then the click.
        for _ in 0..RUNS {
            hover
                .execute(&ctx, json!({"selector": "h1"}))
                .await
                .expect("hover away");
            let t = Instant::now();
            click
                .execute(&ctx, json!({"selector": "#name"}))
                .await
                .expect("warm far click");
            warm.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let ctx = ToolContext::new("bare", &files);
        nav.execute(&ctx, json!({"url": url})).await.expect("nav");
        let page = m.active_page("bare").await.expect("bare page");
        let c: Value = page
            .evaluate("(() => { const r = document.querySelector('#name').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()")
            .await
            .expect("centre")
            .into_value()
            .expect("json");
        let (x, y) = (c[0].as_f64().unwrap_or(0.0), c[1].as_f64().unwrap_or(0.0));
        for _ in 0..RUNS {
            let t = Instant::now();
            for (kind, button) in [
                (DispatchMouseEventType::MouseMoved, None),
                (DispatchMouseEventType::MousePressed, Some(MouseButton::Left)),
                (DispatchMouseEventType::MouseReleased, Some(MouseButton::Left)),
            ] {
                let mut p = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
                if let Some(btn) = button {
                    p = p.button(btn).buttons(1).click_count(1);
                }
                page.execute(p.build().expect("mouse params"))
                    .await
                    .expect("mouse");
            }
            let tree = page
                .execute(GetFullAxTreeParams::default())
                .await
                .expect("ax tree");
            bare.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(!tree.result.nodes.is_empty());
        }
        (far, near, warm, bare)
    });
    let load_ab = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let agent_browser = std::env::var_os("AGENT_BROWSER")
        .map(PathBuf::from)
        .map(|bin| agent_browser_leg(&bin, &url_ab));
    println!("load average at the start: {}", load.trim());
    println!();
    println!("| click -> observation, fill-form.html `#name` (median of {RUNS}) | ms |");
    println!("|---|---|");
    println!(
        "| forge, pointer starting at 0,0 (a fresh tab) | {:.1} |",
        median(&mut far.clone())
    );
    println!(
        "| forge, pointer already on the field | {:.1} |",
        median(&mut near.clone())
    );
    println!(
        "| forge, the same tab, pointer moved to the page's heading first (untimed) | {:.1} |",
        median(&mut warm.clone())
    );
    println!(
        "| bare CDP: one move, press, release, then Accessibility.getFullAXTree | {:.1} |",
        median(&mut bare.clone())
    );
    match agent_browser {
        None => println!("(agent-browser: not measured; set AGENT_BROWSER to its binary)"),
        Some(Err(e)) => println!("(agent-browser failed: {e})"),
        Some(Ok([far, near, corner, tab])) => {
            println!(
                "| agent-browser, a fresh session each run: `click \"#name\"` then `snapshot` | {:.1} |",
                median(&mut far.clone())
            );
            println!(
                "| agent-browser, the same session, 20 in a row | {:.1} |",
                median(&mut near.clone())
            );
            println!(
                "| agent-browser, the same session, pointer moved to 0,0 first (untimed) | {:.1} |",
                median(&mut corner.clone())
            );
            println!(
                "| agent-browser, the same session, a new tab on the page first (untimed) | {:.1} |",
                median(&mut tab.clone())
            );
            println!();
            println!(
                "load average before the agent-browser leg: {}",
                load_ab.trim()
            );
        }
    }
}
