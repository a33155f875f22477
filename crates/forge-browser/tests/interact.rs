//! Interaction tools for real (pointer paths, wait_for, drag, upload): Chromium through the real
//! egress proxy against loopback pages written for these tests. One Chromium is shared by the
//! tests in this file; each test uses its own session key (its own browser context).

mod common;

use std::sync::{Arc, OnceLock};

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use common::*;
use forge_browser::{browser_tools, BrowserManager, BrowserToolOptions};
use forge_tools::{Tool, ToolContext, ToolError};
use serde_json::{json, Value};

struct Fixture {
    rt: tokio::runtime::Runtime,
    server: TestServer,
    manager: Arc<BrowserManager>,
    _proxy: forge_egress::proxy::ProxyHandle,
    files: tempfile::TempDir,
    _tmp: tempfile::TempDir,
}

/// A jQuery-UI-style autocomplete: typing opens a menu with the first item active; the first
/// pointer position seen over the menu after it opens is ignored (as jQuery UI's menu ignores a
/// hover whose position equals the last one it recorded), so only a pointer that really moves
/// over an item activates it; a click selects the active item.
const AUTOCOMPLETE: &str = r#"<!doctype html><html><head><title>Autocomplete</title>
<style>
body{margin:0;padding:40px;font:16px sans-serif}
#menu{position:absolute;list-style:none;margin:0;padding:0;border:1px solid #888;width:220px;background:#fff}
#menu li{padding:4px 8px;height:22px;cursor:pointer}
#menu li.active{background:#39f;color:#fff}
#far{margin-top:320px}
</style></head><body>
<label for=city>City</label> <input id=city autocomplete=off>
<ul id=menu hidden></ul>
<p id=out>picked: none</p>
<p id=far>Somewhere else</p>
<script>
const input = document.getElementById('city'), menu = document.getElementById('menu'), out = document.getElementById('out');
const names = ['Amsterdam', 'Athens', 'Austin', 'Avignon', 'Antwerp'];
let active = null, armed = false, guardAt = null;
function activate(li) { for (const x of menu.children) x.classList.toggle('active', x === li); active = li; }
input.addEventListener('input', () => {
  menu.textContent = '';
  for (const n of names) { const li = document.createElement('li'); li.textContent = n; menu.appendChild(li); }
  const r = input.getBoundingClientRect();
  menu.style.left = (r.left + scrollX) + 'px';
  menu.style.top = (r.bottom + scrollY) + 'px';
  menu.hidden = false;
  out.textContent = 'picked: none';
  activate(menu.firstElementChild);
  armed = true; guardAt = null;
});
function hover(e) {
  const li = e.target.closest('li');
  if (!li || menu.hidden) return;
  if (armed) { armed = false; guardAt = [e.clientX, e.clientY]; return; }
  if (guardAt && guardAt[0] === e.clientX && guardAt[1] === e.clientY) return;
  activate(li);
}
menu.addEventListener('mouseover', hover);
menu.addEventListener('mousemove', hover);
menu.addEventListener('click', () => {
  if (!active) return;
  input.value = active.textContent;
  out.textContent = 'picked: ' + active.textContent;
  menu.hidden = true;
});
</script></body></html>"#;

/// Widgets that react 300 ms after the action.
const DELAYED: &str = r#"<!doctype html><html><head><title>Delayed</title></head><body>
<button id=open onclick="setTimeout(() => { document.getElementById('menu').hidden = false; }, 300)">Open menu</button>
<ul id=menu hidden><li>Delayed menu item</li></ul>
<button id=undo onclick="const b = this; setTimeout(() => b.remove(), 300)">Undo toast</button>
<p style="margin-top:200px"><button id=tip onmouseenter="const b = this; setTimeout(() => { b.style.display = 'none'; }, 300)">Fading tip</button></p>
<input id=field aria-label="Field">
</body></html>"#;

fn page(path: &str) -> Response {
    let path = path.split('?').next().unwrap_or(path);
    let html = match path {
        "/autocomplete.html" => AUTOCOMPLETE.to_string(),
        "/delayed.html" => DELAYED.to_string(),
        _ => {
            return Response {
                status: 404,
                content_type: "text/plain".into(),
                headers: vec![],
                body: b"not found".to_vec(),
            }
        }
    };
    Response::html(html)
}

static CLEANUP: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

extern "C" fn cleanup_dirs() {
    if let Ok(mut dirs) = CLEANUP.lock() {
        for d in dirs.drain(..) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn remove_at_exit(p: &std::path::Path) {
    static HOOK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain extern "C" function without captured state.
    HOOK.call_once(|| unsafe {
        libc::atexit(cleanup_dirs);
    });
    CLEANUP.lock().expect("cleanup list").push(p.to_path_buf());
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        browser_or_skip("forge-browser interaction tests")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (server, manager, proxy, tmp) = rt.block_on(async {
            let server = TestServer::start(Arc::new(|r: &Request| page(&r.path))).await;
            let (addr, proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
            let tmp = tempfile::tempdir().expect("tmp");
            let manager = Arc::new(manager(addr, log, tmp.path()));
            (server, manager, proxy, tmp)
        });
        // The fixture is a static and never dropped: remove its temp dirs at process exit (the
        // manager kills its Chromium and removes its profile at exit on its own).
        remove_at_exit(tmp.path());
        let files = tempfile::tempdir().expect("files");
        remove_at_exit(files.path());
        Some(Fixture {
            rt,
            server,
            manager,
            _proxy: proxy,
            files,
            _tmp: tmp,
        })
    })
    .as_ref()
}

impl Fixture {
    fn tool(&self, name: &str) -> Arc<dyn Tool> {
        browser_tools(self.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    }

    fn call(&self, session: &str, name: &str, input: Value) -> Result<String, ToolError> {
        let ctx = ToolContext::new(session, self.files.path());
        let tool = self.tool(name);
        self.rt
            .block_on(async { tool.execute(&ctx, input).await.map(|o| o.text) })
    }

    fn ok(&self, session: &str, name: &str, input: Value) -> String {
        match self.call(session, name, input.clone()) {
            Ok(t) => t,
            Err(e) => panic!("{name} {input} failed: {e}"),
        }
    }

    /// Evaluate `js` in the page's own world of session `session`'s active tab (test-side
    /// inspection only; the tools never do this).
    fn eval(&self, session: &str, js: &str) -> Value {
        self.rt.block_on(async {
            let page = self
                .manager
                .active_page(session)
                .await
                .expect("session has a tab");
            page.evaluate(js)
                .await
                .expect("evaluate")
                .into_value::<Value>()
                .expect("json value")
        })
    }

    /// A bare CDP click: one jump to (x, y), press, release (what forge did before the
    /// realistic pointer), for the control case.
    fn jump_click(&self, session: &str, x: f64, y: f64) {
        self.rt.block_on(async {
            let page = self
                .manager
                .active_page(session)
                .await
                .expect("session has a tab");
            for (kind, button) in [
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
                let mut b = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
                if let Some(btn) = button {
                    b = b.button(btn).buttons(1).click_count(1);
                }
                page.execute(b.build().expect("mouse params"))
                    .await
                    .expect("mouse event");
            }
        });
    }
}

/// The page text of `#out` (read in the page, not from the observation).
fn out_text(f: &Fixture, session: &str) -> String {
    f.eval(session, "document.getElementById('out').textContent")
        .as_str()
        .unwrap_or("")
        .to_string()
}

#[test]
fn autocomplete_third_suggestion_is_picked_twenty_times_in_a_row() {
    let Some(f) = fixture() else { return };
    let s = "autocomplete";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/autocomplete.html")}),
    );
    // Control: a one-jump click on the 3rd item picks the 1st (the guard ignores the only
    // position the menu sees), so the page really has the guard.
    f.ok(
        s,
        "browser_fill",
        json!({"selector": "#city", "value": "A"}),
    );
    let c = f.eval(
        s,
        "(() => { const r = document.querySelector('#menu li:nth-child(3)').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()",
    );
    let (x, y) = (c[0].as_f64().expect("x"), c[1].as_f64().expect("y"));
    f.jump_click(s, x, y);
    assert_eq!(out_text(f, s), "picked: Amsterdam", "the control click");

    for i in 0..20 {
        if i % 2 == 1 {
            // Start the next approach from elsewhere on the page.
            f.ok(s, "browser_hover", json!({"selector": "#far"}));
        }
        f.ok(
            s,
            "browser_fill",
            json!({"selector": "#city", "value": if i % 3 == 0 { "A" } else { "At" }}),
        );
        assert_eq!(out_text(f, s), "picked: none", "menu reopened ({i})");
        let obs = f.ok(
            s,
            "browser_click",
            json!({"selector": "#menu li:nth-child(3)"}),
        );
        assert!(obs.starts_with("clicked "), "{obs}");
        assert_eq!(out_text(f, s), "picked: Austin", "round {i}: {obs}");
        assert!(obs.contains("picked: Austin"), "observed after: {obs}");
    }
}

/// The ref on the observation line that contains `needle`.
fn ref_of(obs: &str, needle: &str) -> String {
    let line = obs
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{obs}"));
    line.split_whitespace().next().expect("ref").to_string()
}

/// The status line (forge's own words, before the fenced observation).
fn status(obs: &str) -> &str {
    obs.lines().next().unwrap_or("")
}

#[test]
fn wait_for_text_on_click_waits_for_a_menu_shown_300_ms_later() {
    let Some(f) = fixture() else { return };
    let s = "wait-text";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/delayed.html")}),
    );
    assert!(!obs.contains("Delayed menu item"), "hidden at first: {obs}");
    let obs = f.ok(
        s,
        "browser_click",
        json!({"selector": "#open", "wait_for": {"text": "Delayed menu item"}}),
    );
    assert!(
        status(&obs).contains("until text \"Delayed menu item\" appeared"),
        "{obs}"
    );
    assert!(
        obs.contains("Delayed menu item"),
        "observed after the wait: {obs}"
    );
}

#[test]
fn wait_for_gone_ms_and_its_limits() {
    let Some(f) = fixture() else { return };
    let s = "wait-gone";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/delayed.html")}),
    );
    // Removed 300 ms after the click.
    let undo = ref_of(&obs, "Undo toast");
    let obs = f.ok(
        s,
        "browser_click",
        json!({"ref": undo, "wait_for": {"gone": undo}}),
    );
    assert!(
        status(&obs).contains(&format!("until {undo} was gone")),
        "{obs}"
    );
    assert!(!obs.contains("Undo toast"), "{obs}");
    // Hidden (display:none) 300 ms after the pointer enters it.
    let tip = ref_of(&obs, "Fading tip");
    let obs = f.ok(
        s,
        "browser_hover",
        json!({"ref": tip, "wait_for": {"gone": tip}}),
    );
    assert!(
        status(&obs).contains(&format!("until {tip} was gone")),
        "{obs}"
    );
    assert!(!obs.contains("Fading tip"), "{obs}");
    // A fixed pause on press and fill.
    let obs = f.ok(
        s,
        "browser_press",
        json!({"key": "Tab", "wait_for": {"ms": 150}}),
    );
    assert!(status(&obs).contains("waited 150 ms"), "{obs}");
    let obs = f.ok(
        s,
        "browser_fill",
        json!({"selector": "#field", "value": "x", "wait_for": {"ms": 10}}),
    );
    assert!(status(&obs).contains("waited 10 ms"), "{obs}");
    // A condition never met: bounded, and said so.
    let obs = f.ok(
        s,
        "browser_state",
        json!({"wait_for": {"text": "this text never appears"}}),
    );
    assert!(
        status(&obs).contains("(the wait_for limit) but text \"this text never appears\" did not appear; observed anyway"),
        "{obs}"
    );
    // Bad inputs are refused before acting.
    for bad in [
        json!({"ms": 6000}),
        json!({"ms": 10, "text": "a"}),
        json!({"text": ""}),
        json!("soon"),
        json!({"until": "x"}),
    ] {
        match f.call(s, "browser_state", json!({"wait_for": bad.clone()})) {
            Err(ToolError::InvalidInput(m)) => assert!(m.contains("wait_for"), "{m}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    match f.call(
        s,
        "browser_state",
        json!({"wait_for": {"gone": "nonsense"}}),
    ) {
        Err(ToolError::InvalidInput(m)) => assert!(m.contains("needs a ref"), "{m}"),
        other => panic!("{other:?}"),
    }
}
