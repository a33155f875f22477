//! The browser tools on Lightpanda (issue 26): the real Lightpanda binary (`FORGE_LIGHTPANDA_BIN`
//! or `lightpanda` on PATH; scripts/install-deps.sh installs the PyPI wheel's), confined where
//! the machine allows, through the real egress proxy, against loopback pages. Lightpanda serves
//! one session per process, so each test here is one session's script of tool calls, and the
//! tests run one at a time (a lock).
// Printing is allowed here (test output: skip notices and diagnostics).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::sync::{Mutex, OnceLock};

use forge_browser::EngineKind;
use forge_testkit::browser::*;
use forge_testkit::site::{Canary, Request, Response, Site};
use serde_json::json;

struct Fixture {
    b: Shared,
    server: Site,
    canary: Canary,
    blocked_port: u16,
}

fn page(path: &str, canary: &str) -> Response {
    let html = match path.split('?').next().unwrap_or(path) {
        "/form.html" => r#"<!doctype html><html><head><title>Form page</title></head><body>
<h1>Sign up</h1>
<form action="/target.html" method="get">
<label for="email">Email</label> <input id="email" name="email" type="email">
<label>Country <select name="country"><option value="fr">France</option><option value="de">Germany</option></select></label>
<button type="submit">Create account</button>
</form>
<p>Visible paragraph text.</p>
<a href="/target.html">Go to target</a>
<input id="echo" aria-label="Echo">
<pre id="log"></pre>
<script>
const echo = document.getElementById('echo');
echo.addEventListener('keydown', (e) => { document.getElementById('log').textContent += 'keydown:' + e.key + ' '; });
</script>
</body></html>"#
            .to_string(),
        // A page whose script keeps Lightpanda's one thread busy for 8 s (CDP answers wait).
        "/busy.html" => "<!doctype html><title>Busy page</title><p>Busy done.</p><script>const end = Date.now() + 8000; while (Date.now() < end) {}</script>".to_string(),
        "/target.html" => "<!doctype html><title>Target page</title><h1>You arrived</h1><p>Target text.</p>".to_string(),
        "/canary.html" => format!(
            r#"<!doctype html><title>Canary page</title><p>Leaks tried.</p>
<img src="{canary}/img.png">
<script>
try {{ fetch('{canary}/fetch'); }} catch (e) {{}}
try {{ new WebSocket('{ws}/ws'); }} catch (e) {{}}
try {{ navigator.sendBeacon('{canary}/beacon', 'x'); }} catch (e) {{}}
try {{ new Worker('{canary}/worker.js'); }} catch (e) {{}}
try {{ new EventSource('{canary}/events'); }} catch (e) {{}}
</script>"#,
            ws = canary.replace("http://", "ws://")
        ),
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let canary = Canary::start();
        let canary_url = canary.url("").trim_end_matches('/').to_string();
        let server = Site::start(move |r: &Request| page(&r.path, &canary_url));
        let blocked = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let blocked_port = blocked.local_addr().expect("addr").port();
        drop(blocked);
        let b = Shared::start_engine(
            "forge-browser lightpanda tests",
            &[server.entry()],
            Confine::WhereAvailable,
            EngineKind::Lightpanda,
        )?;
        Some(Fixture {
            b,
            server,
            canary,
            blocked_port,
        })
    })
    .as_ref()
}

/// One test at a time: Lightpanda serves one session per process.
/// Sessions of a test that failed before closing its own are closed first.
fn one_at_a_time(f: &Fixture) -> std::sync::MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    let guard = L.lock().unwrap_or_else(|p| p.into_inner());
    for key in ["lp-read", "lp-act", "lp-refuse", "lp-busy"] {
        f.b.rt.block_on(f.b.manager.close_session(key));
    }
    guard
}

/// The ref (`e12`) opening the observation line that mentions `needle`.
fn ref_of(obs: &str, needle: &str) -> String {
    let line = obs
        .lines()
        .find(|l| l.contains(needle) && l.starts_with('e'))
        .unwrap_or_else(|| panic!("no element line with {needle:?} in:\n{obs}"));
    line.split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn navigate_state_extract_on_lightpanda() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time(f);
    let ctx = f.b.context("lp-read");
    let nav =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": f.server.url("/form.html")}),
        )
        .expect("navigate");
    eprintln!("{nav}");
    assert!(nav.contains("Form page"), "{nav}");
    // Nagle is off on forge's CDP connection (else a large command's tail waits ~40 ms for
    // the engine's delayed ACK; docs/benchmarks.md).
    assert_eq!(
        f.b.rt.block_on(f.b.manager.cdp_nagle_off("lp-read")),
        Some(true),
        "TCP_NODELAY on forge's CDP sockets"
    );
    assert!(nav.contains("Sign up"), "{nav}");
    let state =
        f.b.run_tool(&ctx, "browser_state", json!({}))
            .expect("state");
    assert!(state.contains("Create account"), "{state}");
    // No layout: the observation says what it cannot know instead of inventing it.
    assert!(
        state.contains("layout: none on this engine (what is in view or covered is unknown)"),
        "{state}"
    );
    assert!(!state.contains("viewport:"), "{state}");
    assert!(!state.contains("in view, reading order"), "{state}");
    assert!(state.contains("elements (reading order):"), "{state}");
    let text =
        f.b.run_tool(&ctx, "browser_extract", json!({"what": "text"}))
            .expect("extract");
    assert!(text.contains("Visible paragraph text."), "{text}");
    f.b.rt.block_on(f.b.manager.close_session("lp-read"));
}

#[test]
fn click_fill_select_press_back_on_lightpanda() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time(f);
    let ctx = f.b.context("lp-act");
    let obs =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": f.server.url("/form.html")}),
        )
        .expect("navigate");
    let email = ref_of(&obs, "Email");
    let filled =
        f.b.run_tool(
            &ctx,
            "browser_fill",
            json!({"ref": email, "value": "a@example.com"}),
        )
        .expect("fill");
    assert!(filled.contains("a@example.com"), "{filled}");
    let country = ref_of(&filled, "Country");
    let picked =
        f.b.run_tool(
            &ctx,
            "browser_select",
            json!({"ref": country, "option": "Germany"}),
        )
        .expect("select");
    assert!(picked.contains("Germany"), "{picked}");
    let echo = ref_of(&picked, "Echo");
    let pressed =
        f.b.run_tool(&ctx, "browser_press", json!({"ref": echo, "key": "x"}))
            .expect("press");
    assert!(
        pressed.contains("keydown:x"),
        "the page saw the key: {pressed}"
    );
    let link = ref_of(&pressed, "Go to target");
    let clicked =
        f.b.run_tool(&ctx, "browser_click", json!({"ref": link}))
            .expect("click");
    assert!(clicked.contains("You arrived"), "{clicked}");
    let back = f.b.run_tool(&ctx, "browser_back", json!({})).expect("back");
    assert!(back.contains("Sign up"), "{back}");
    f.b.rt.block_on(f.b.manager.close_session("lp-act"));
}

#[test]
fn refusals_and_the_canary_on_lightpanda() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time(f);
    let ctx = f.b.context("lp-refuse");
    let http =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": format!("http://127.0.0.1:{}/", f.blocked_port)}),
        )
        .expect_err("a port outside the allowlist is refused");
    assert!(
        http.to_string().starts_with("blocked by egress policy"),
        "{http}"
    );
    let https =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": "https://not-allowed.example/"}),
        )
        .expect_err("an HTTPS host outside the allowlist is refused");
    assert!(
        https.to_string().starts_with("blocked by egress policy"),
        "{https}"
    );
    let obs =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": f.server.url("/canary.html")}),
        )
        .expect("the canary page loads");
    assert!(obs.contains("Leaks tried."), "{obs}");
    f.b.rt.block_on(f.b.manager.close_session("lp-refuse"));
    f.canary.assert_untouched(
        "Lightpanda page leaks (img, fetch, WebSocket, beacon, worker, EventSource)",
    );
}

#[test]
fn a_busy_page_is_not_taken_for_a_dead_engine() {
    let Some(f) = fixture() else { return };
    let _one = one_at_a_time(f);
    let ctx = f.b.context("lp-busy");
    f.b.run_tool(
        &ctx,
        "browser_navigate",
        json!({"url": f.server.url("/target.html")}),
    )
    .expect("a first page");
    let launches = f.b.manager.launch_count();
    // The 8 s loop blocks Lightpanda's CDP answers far past Chromium's 3 s liveness ping: with
    // that ping the engine would be killed and the call would fail as a crash.
    let busy =
        f.b.run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": f.server.url("/busy.html")}),
        )
        .expect("the busy page loads once its script ends");
    assert!(busy.contains("Busy done."), "{busy}");
    let state =
        f.b.run_tool(&ctx, "browser_state", json!({}))
            .expect("state");
    assert!(state.contains("Busy page"), "{state}");
    assert_eq!(
        f.b.manager.launch_count(),
        launches,
        "the same Lightpanda served every call (no crash, no relaunch)"
    );
    f.b.rt.block_on(f.b.manager.close_session("lp-busy"));
}
