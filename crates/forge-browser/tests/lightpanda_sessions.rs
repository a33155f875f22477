//! Lightpanda, one process per session (issue 26): Lightpanda keeps one browser context per CDP
//! connection, so each session gets a Lightpanda process of its own (same confinement), ended
//! with the session. Real Lightpanda, real proxy, loopback pages; fails instead of skipping
//! under FORGE_REQUIRE_BROWSER=1 (via `Shared::start_engine`).
// Printing is allowed here (test output: skip notices and diagnostics).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use forge_browser::EngineKind;
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use serde_json::json;

struct Fixture {
    b: Shared,
    server: Site,
}

fn page(path: &str) -> Response {
    let html = match path.split('?').next().unwrap_or(path) {
        "/one.html" => "<!doctype html><title>Page one</title><p>First session text.</p>",
        "/two.html" => "<!doctype html><title>Page two</title><p>Second session text.</p>",
        // Keeps its Lightpanda process's one thread busy for 15 s (its CDP answers wait).
        "/busy.html" => "<!doctype html><title>Busy page</title><p>Busy done.</p><script>const end = Date.now() + 15000; while (Date.now() < end) {}</script>",
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r: &Request| page(&r.path));
        let b = Shared::start_engine(
            "forge-browser lightpanda sessions",
            &[server.entry()],
            Confine::WhereAvailable,
            EngineKind::Lightpanda,
        )?;
        Some(Fixture { b, server })
    })
    .as_ref()
}

/// The tests share one manager; each uses its own session keys, one test at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|p| p.into_inner())
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn two_sessions_at_once_each_have_their_own_process_which_ends_with_it() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time();
    let (a, b) = (f.b.context("lp-two-a"), f.b.context("lp-two-b"));
    let nav_a =
        f.b.run_tool(
            &a,
            "browser_navigate",
            json!({"url": f.server.url("/one.html")}),
        )
        .expect("session a navigates");
    assert!(nav_a.contains("First session text."), "{nav_a}");
    let nav_b =
        f.b.run_tool(
            &b,
            "browser_navigate",
            json!({"url": f.server.url("/two.html")}),
        )
        .expect("a second session while the first is open");
    assert!(nav_b.contains("Second session text."), "{nav_b}");
    // Each session kept its own page (separate browser contexts in separate processes).
    let state_a =
        f.b.run_tool(&a, "browser_state", json!({}))
            .expect("state a");
    assert!(
        state_a.contains("Page one") && !state_a.contains("Page two"),
        "{state_a}"
    );
    let state_b =
        f.b.run_tool(&b, "browser_state", json!({}))
            .expect("state b");
    assert!(
        state_b.contains("Page two") && !state_b.contains("Page one"),
        "{state_b}"
    );
    let pid_a = f.b.rt.block_on(f.b.manager.session_pid("lp-two-a"));
    let pid_b = f.b.rt.block_on(f.b.manager.session_pid("lp-two-b"));
    let (Some(pid_a), Some(pid_b)) = (pid_a, pid_b) else {
        panic!("both sessions have a process: {pid_a:?} {pid_b:?}");
    };
    assert_ne!(pid_a, pid_b, "one Lightpanda process per session");
    assert!(alive(pid_a) && alive(pid_b));
    assert_eq!(f.b.rt.block_on(f.b.manager.session_count()), 2);

    // Closing a session ends its process (gone from /proc when close returns); the other lives.
    assert!(f.b.rt.block_on(f.b.manager.close_session("lp-two-a")));
    assert!(!alive(pid_a), "session a's Lightpanda {pid_a} is gone");
    assert!(alive(pid_b), "session b's Lightpanda {pid_b} still runs");
    let again =
        f.b.run_tool(&b, "browser_state", json!({}))
            .expect("b still works");
    assert!(again.contains("Page two"), "{again}");
    assert!(f.b.rt.block_on(f.b.manager.close_session("lp-two-b")));
    assert!(!alive(pid_b), "session b's Lightpanda {pid_b} is gone");
    assert_eq!(f.b.rt.block_on(f.b.manager.session_count()), 0);
}

#[test]
fn a_busy_page_in_one_session_does_not_stall_or_kill_another() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time();
    let (busy_ctx, other) = (f.b.context("lp-busy-a"), f.b.context("lp-busy-b"));
    for (ctx, path) in [(&busy_ctx, "/one.html"), (&other, "/two.html")] {
        f.b.run_tool(ctx, "browser_navigate", json!({"url": f.server.url(path)}))
            .expect("a first page in each session");
    }
    let launches = f.b.manager.launch_count();
    let busy_pid = f.b.rt.block_on(f.b.manager.session_pid("lp-busy-a"));
    let busy_hits = f.server.hits_for("/busy.html");

    let done = Arc::new(AtomicBool::new(false));
    let result = std::thread::scope(|s| {
        let busy = s.spawn(|| {
            let r = f.b.run_tool(
                &busy_ctx,
                "browser_navigate",
                json!({"url": f.server.url("/busy.html")}),
            );
            done.store(true, Ordering::SeqCst);
            r
        });
        // Until the busy page was fetched (bounded: 400 x 25 ms).
        for _ in 0..400 {
            if f.server.hits_for("/busy.html") > busy_hits || done.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        assert!(
            f.server.hits_for("/busy.html") > busy_hits,
            "the busy page was requested"
        );
        // The other session works while the busy call is in flight.
        let nav =
            f.b.run_tool(
                &other,
                "browser_navigate",
                json!({"url": f.server.url("/one.html")}),
            )
            .expect("the other session navigates during the busy call");
        assert!(nav.contains("First session text."), "{nav}");
        let state =
            f.b.run_tool(&other, "browser_state", json!({}))
                .expect("the other session observes during the busy call");
        assert!(state.contains("Page one"), "{state}");
        let overlapped = !done.load(Ordering::SeqCst);
        (busy.join().expect("the busy call's thread"), overlapped)
    });
    let (busy, overlapped) = result;
    assert!(
        overlapped,
        "the other session's calls finished while the busy call was still running"
    );
    let busy = busy.expect("the busy page loads once its script ends");
    assert!(busy.contains("Busy done."), "{busy}");
    assert_eq!(
        f.b.manager.launch_count(),
        launches,
        "no process was relaunched (no crash)"
    );
    assert_eq!(
        f.b.rt.block_on(f.b.manager.session_pid("lp-busy-a")),
        busy_pid,
        "the busy session kept its process"
    );
    for key in ["lp-busy-a", "lp-busy-b"] {
        f.b.rt.block_on(f.b.manager.close_session(key));
    }
}

#[test]
fn a_dead_lightpanda_is_named_in_what_the_session_is_told() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time();
    let ctx = f.b.context("lp-crash");
    f.b.run_tool(
        &ctx,
        "browser_navigate",
        json!({"url": f.server.url("/one.html")}),
    )
    .expect("a first page");
    let Some(pid) = f.b.rt.block_on(f.b.manager.session_pid("lp-crash")) else {
        panic!("the session has a process");
    };
    // SAFETY: a plain kill(2) of the Lightpanda process this test's manager started.
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    // The next call either runs in a fresh process and carries the crash notice, or (when it
    // reached the dying process first) fails saying so; both name the engine that died.
    let msg = match f.b.run_tool(&ctx, "browser_state", json!({})) {
        Ok(text) => text,
        Err(e) => e.to_string(),
    };
    assert!(
        msg.contains("restarted after a crash (Lightpanda ")
            || msg.starts_with("Lightpanda ") && msg.contains("the call was aborted"),
        "{msg}"
    );
    assert!(!msg.contains("Chromium"), "{msg}");
    f.b.rt.block_on(f.b.manager.close_session("lp-crash"));
}
