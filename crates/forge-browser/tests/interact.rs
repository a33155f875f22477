//! Interaction tools for real (pointer paths, wait_for, drag, upload): Chromium through the real
//! egress proxy against loopback pages written for these tests. One Chromium is shared by the
//! tests in this file; each test uses its own session key (its own browser context).

use std::sync::OnceLock;

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    server: Site,
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

/// A menu whose item's word is already on the page (in the heading) before it opens.
const DELAYED_SAME_WORD: &str = r#"<!doctype html><html><head><title>Plans</title></head><body>
<h1>Pricing and plans</h1>
<button id=open onclick="setTimeout(() => { document.getElementById('menu').hidden = false; }, 300)">Open menu</button>
<ul id=menu hidden role=menu><li role=menuitem>Pricing</li></ul>
</body></html>"#;

/// A mouse-driven drop whose target starts below the fold (the drag must scroll to fit both ends).
const FAR_DROP: &str = r#"<!doctype html><html><head><title>Far drop</title></head><body style="margin:0">
<div id=src style="position:absolute;top:300px;left:40px;width:120px;height:40px;background:#ccc">Card</div>
<div id=dst style="position:absolute;top:950px;left:40px;width:200px;height:80px;background:#eee">Drop here</div>
<div style="height:2400px"></div>
<p id=out style="position:fixed;top:0;right:0">none</p>
<script>
let held = false;
document.getElementById('src').addEventListener('mousedown', (e) => { if (e.isTrusted) held = true; });
document.addEventListener('mouseup', (e) => {
  const over = document.getElementById('dst').contains(document.elementFromPoint(e.clientX, e.clientY));
  if (held && e.isTrusted && over) document.getElementById('out').textContent = 'dropped';
  held = false;
});
</script></body></html>"#;

/// A sortable list driven by mouse events (no HTML5 drag-and-drop): the held item is moved
/// past each item whose middle the pointer crosses.
const SORTABLE: &str = r#"<!doctype html><html><head><title>Sortable</title><style>
#list{list-style:none;padding:0;margin:20px;width:220px;user-select:none}
#list li{height:30px;line-height:30px;margin:2px 0;background:#eef;padding-left:8px}
</style></head><body>
<ul id=list><li>One</li><li>Two</li><li>Three</li><li>Four</li></ul>
<p id=order></p>
<script>
const list = document.getElementById('list');
let held = null;
function show() { document.getElementById('order').textContent = 'order: ' + Array.from(list.children).map((li) => li.textContent).join(','); }
show();
list.addEventListener('mousedown', (e) => { held = e.target.closest('li'); e.preventDefault(); });
document.addEventListener('mousemove', (e) => {
  if (!held || !(e.buttons & 1)) return;
  for (const li of list.children) {
    if (li === held) continue;
    const r = li.getBoundingClientRect();
    if (e.clientY > r.top && e.clientY < r.bottom) { if (e.clientY > r.top + r.height / 2) li.after(held); else li.before(held); break; }
  }
});
document.addEventListener('mouseup', () => { if (held) { held = null; show(); } });
</script></body></html>"#;

/// HTML5 drag-and-drop between two zones (draggable card, dataTransfer carries its id).
const DND: &str = r#"<!doctype html><html><head><title>Zones</title><style>
.zone{display:inline-block;vertical-align:top;width:200px;height:120px;border:2px dashed #888;margin:20px}
#card{width:80px;height:40px;background:#fc6;margin:10px}
</style></head><body>
<div id=zoneA class=zone><div id=card draggable=true>Card</div></div><div id=zoneB class=zone>Drop here</div>
<p id=log>log:</p>
<script>
const card = document.getElementById('card'), b = document.getElementById('zoneB'), log = document.getElementById('log');
card.addEventListener('dragstart', (e) => { e.dataTransfer.setData('text/plain', 'card'); e.dataTransfer.effectAllowed = 'move'; log.textContent += ' dragstart'; });
b.addEventListener('dragenter', (e) => { e.preventDefault(); log.textContent += ' dragenter'; });
b.addEventListener('dragover', (e) => { e.preventDefault(); });
b.addEventListener('drop', (e) => { e.preventDefault(); const id = e.dataTransfer.getData('text/plain'); b.appendChild(document.getElementById(id)); log.textContent += ' drop:' + id; });
</script></body></html>"#;

/// A textarea with a resize grip at its bottom-right corner that follows the mouse.
const RESIZE: &str = r#"<!doctype html><html><head><title>Resize</title></head><body style="margin:30px">
<div id=wrap style="position:relative;display:inline-block">
<textarea id=ta aria-label=Notes style="box-sizing:border-box;width:200px;height:80px;resize:none;display:block"></textarea>
<div id=grip style="position:absolute;right:0;bottom:0;width:14px;height:14px;background:#888;cursor:se-resize"></div>
</div>
<script>
const ta = document.getElementById('ta'), grip = document.getElementById('grip');
let start = null;
grip.addEventListener('mousedown', (e) => { start = { x: e.clientX, y: e.clientY, w: ta.offsetWidth, h: ta.offsetHeight }; e.preventDefault(); });
document.addEventListener('mousemove', (e) => { if (!start) return; ta.style.width = (start.w + e.clientX - start.x) + 'px'; ta.style.height = (start.h + e.clientY - start.y) + 'px'; });
document.addEventListener('mouseup', () => { start = null; });
</script></body></html>"#;

/// A custom slider: a div handle on a 300 px track that follows mousemove (value 0..100).
const SLIDER: &str = r#"<!doctype html><html><head><title>Slider</title></head><body>
<div id=track style="position:relative;width:300px;height:10px;background:#ccc;margin:60px">
<div id=handle style="position:absolute;left:0;top:-5px;width:20px;height:20px;margin-left:-10px;background:#36c;border-radius:10px"></div>
</div>
<p id=value>value: 0</p>
<script>
const handle = document.getElementById('handle'), value = document.getElementById('value');
let grab = null;
handle.addEventListener('mousedown', (e) => { grab = { x: e.clientX, left: handle.offsetLeft + 10 }; e.preventDefault(); });
document.addEventListener('mousemove', (e) => {
  if (!grab) return;
  const left = Math.max(0, Math.min(300, grab.left + e.clientX - grab.x));
  handle.style.left = left + 'px';
  value.textContent = 'value: ' + Math.round(left / 3);
});
document.addEventListener('mouseup', () => { grab = null; });
</script></body></html>"#;

/// A file input that shows the picked file's name, size and content.
const UPLOAD: &str = r#"<!doctype html><html><head><title>Upload</title></head><body>
<label for=f>Attachment</label> <input type=file id=f>
<p id=info>no file</p>
<script>
document.getElementById('f').addEventListener('change', (e) => {
  const file = e.target.files[0];
  const info = document.getElementById('info');
  info.textContent = 'got ' + file.name + ' ' + file.size + ' bytes';
  file.text().then((t) => { info.textContent += ' content ' + t; });
});
</script></body></html>"#;

fn page(path: &str) -> Response {
    let path = path.split('?').next().unwrap_or(path);
    let html = match path {
        "/autocomplete.html" => AUTOCOMPLETE.to_string(),
        "/delayed.html" => DELAYED.to_string(),
        "/delayed-same-word.html" => DELAYED_SAME_WORD.to_string(),
        "/sortable.html" => SORTABLE.to_string(),
        "/far-drop.html" => FAR_DROP.to_string(),
        "/dnd.html" => DND.to_string(),
        "/resize.html" => RESIZE.to_string(),
        "/slider.html" => SLIDER.to_string(),
        "/upload.html" => UPLOAD.to_string(),
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r: &Request| page(&r.path));
        let b = Shared::start(
            "forge-browser interaction tests",
            &[server.entry()],
            Confine::No,
        )?;
        Some(Fixture { b, server })
    })
    .as_ref()
}

impl Fixture {
    fn call(&self, session: &str, name: &str, input: Value) -> Result<String, ToolError> {
        self.b.run_tool(&self.b.context(session), name, input)
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
        self.b.rt.block_on(async {
            let page = self
                .b
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
        self.b.rt.block_on(async {
            let page = self
                .b
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
fn wait_for_text_waits_for_new_text_when_the_word_is_already_on_the_page() {
    let Some(f) = fixture() else { return };
    let s = "wait-text-anew";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/delayed-same-word.html")}),
    );
    assert!(!obs.contains("menuitem"), "menu hidden at first: {obs}");
    let obs = f.ok(
        s,
        "browser_click",
        json!({"selector": "#open", "wait_for": {"text": "Pricing"}}),
    );
    // The heading's "Pricing" was there before the click; the wait lasts until the menu's own
    // item appears, so the observation shows it.
    assert!(
        status(&obs).contains("until text \"Pricing\" appeared"),
        "{obs}"
    );
    assert!(
        obs.contains("menuitem \"Pricing\""),
        "the menu item is listed: {obs}"
    );
    // The same word without any new occurrence: the wait ends at its limit and says why.
    let obs = f.ok(
        s,
        "browser_hover",
        json!({"selector": "h1", "wait_for": {"text": "Pricing and plans"}}),
    );
    assert!(
        status(&obs)
            .contains("did not appear anew (it was on the page 1 time(s) before the action)"),
        "{obs}"
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

#[test]
fn drag_reorders_a_mouse_driven_sortable_list() {
    let Some(f) = fixture() else { return };
    let s = "drag-sortable";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/sortable.html")}),
    );
    let obs = f.ok(
        s,
        "browser_drag",
        json!({"from": "#list li:nth-child(1)", "to": "#list li:nth-child(4)"}),
    );
    // 2 slow-start moves, 12 steps, the release point past Four's midpoint, one more 1 px.
    assert!(status(&obs).contains("(mouse, 16 moves)"), "{obs}");
    assert!(status(&obs).contains("moved by (+0, +"), "{obs}");
    // Dropped onto Four, moving down: it takes Four's place (issue 21: a release past the
    // target's midpoint in the direction of travel; it used to land before Four).
    let order = f.eval(s, "document.getElementById('order').textContent");
    assert_eq!(order, json!("order: Two,Three,Four,One"), "{obs}");
    assert!(obs.contains("order: Two,Three,Four,One"), "{obs}");
}

#[test]
fn drag_to_a_target_below_the_fold_scrolls_both_ends_into_view() {
    let Some(f) = fixture() else { return };
    let s = "drag-far";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/far-drop.html")}),
    );
    let before = f.eval(s, "scrollY");
    assert_eq!(before, json!(0), "starts at the top");
    let obs = f.ok(s, "browser_drag", json!({"from": "#src", "to": "#dst"}));
    let out = f.eval(s, "document.getElementById('out').textContent");
    assert_eq!(out, json!("dropped"), "{obs}");
    let after = f.eval(s, "scrollY").as_f64().unwrap_or(0.0);
    assert!(after > 0.0, "the page scrolled to fit both ends: {obs}");
}

#[test]
fn drag_html5_card_between_zones() {
    let Some(f) = fixture() else { return };
    let s = "drag-dnd";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/dnd.html")}),
    );
    let obs = f.ok(s, "browser_drag", json!({"from": "#card", "to": "#zoneB"}));
    assert!(status(&obs).contains("HTML5 drag-and-drop"), "{obs}");
    let parent = f.eval(s, "document.getElementById('card').parentElement.id");
    assert_eq!(parent, json!("zoneB"), "{obs}");
    let log = f.eval(s, "document.getElementById('log').textContent");
    assert_eq!(log, json!("log: dragstart dragenter drop:card"), "{obs}");
}

#[test]
fn drag_resize_grip_and_slider_by_offset() {
    let Some(f) = fixture() else { return };
    let s = "drag-handles";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/resize.html")}),
    );
    let size = |f: &Fixture| {
        let v = f.eval(s, "[document.getElementById('ta').offsetWidth, document.getElementById('ta').offsetHeight]");
        (v[0].as_f64().expect("w"), v[1].as_f64().expect("h"))
    };
    assert_eq!(size(f), (200.0, 80.0));
    let obs = f.ok(
        s,
        "browser_drag",
        json!({"from": "#grip", "by": {"x": 80, "y": 40}}),
    );
    assert_eq!(size(f), (280.0, 120.0), "{obs}");
    assert!(status(&obs).contains("moved by (+80, +40) px"), "{obs}");

    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/slider.html")}),
    );
    let obs = f.ok(
        s,
        "browser_drag",
        json!({"from": "#handle", "by": {"x": 150, "y": 0}, "steps": 6}),
    );
    assert!(status(&obs).contains("(mouse, 7 moves)"), "{obs}");
    assert_eq!(
        f.eval(s, "document.getElementById('value').textContent"),
        json!("value: 50"),
        "{obs}"
    );
    // Past the end of the track: the slider clamps.
    f.ok(
        s,
        "browser_drag",
        json!({"from": "#handle", "by": {"x": 400, "y": 0}}),
    );
    assert_eq!(
        f.eval(s, "document.getElementById('value').textContent"),
        json!("value: 100")
    );
    // Bad inputs are refused before anything is pressed.
    for bad in [
        json!({"from": "#handle"}),
        json!({"from": "#handle", "to": "#track", "by": {"x": 1, "y": 1}}),
        json!({"from": "#handle", "by": {"x": "far", "y": 0}}),
        json!({"from": "#handle", "by": {"x": 10, "y": 0}, "steps": 0}),
    ] {
        match f.call(s, "browser_drag", bad.clone()) {
            Err(ToolError::InvalidInput(_)) => {}
            other => panic!("{bad}: {other:?}"),
        }
    }
    match f.call(
        s,
        "browser_drag",
        json!({"from": "#nothing-here", "by": {"x": 10, "y": 0}}),
    ) {
        Err(ToolError::Failed(m)) => assert!(m.contains("no element matches selector"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn upload_puts_a_files_dir_file_into_the_input_and_refuses_others() {
    let Some(f) = fixture() else { return };
    let s = "upload";
    std::fs::write(f.b.files.path().join("note.txt"), b"hello upload").expect("write");
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, b"do not send").expect("write");
    std::os::unix::fs::symlink(&secret, f.b.files.path().join("link-out.txt")).expect("symlink");
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/upload.html")}),
    );
    for (name, why) in [
        (secret.to_str().expect("utf8").to_string(), "absolute path"),
        ("../secret.txt".to_string(), "leaves the files dir"),
        ("link-out.txt".to_string(), "symlink to a file outside"),
        ("missing.txt".to_string(), "no file \"missing.txt\""),
    ] {
        match f.call(
            s,
            "browser_upload",
            json!({"selector": "#f", "filename": name}),
        ) {
            Err(e) => assert!(e.to_string().contains(why), "{name}: {e}"),
            Ok(o) => panic!("{name} was uploaded: {o}"),
        }
    }
    assert_eq!(
        f.eval(s, "document.getElementById('f').files.length"),
        json!(0)
    );
    match f.call(
        s,
        "browser_upload",
        json!({"selector": "#info", "filename": "note.txt"}),
    ) {
        Err(ToolError::Failed(m)) => assert!(m.contains("is not a file input"), "{m}"),
        other => panic!("{other:?}"),
    }
    let obs = f.ok(
        s,
        "browser_upload",
        json!({"selector": "#f", "filename": "note.txt"}),
    );
    assert!(
        status(&obs).starts_with("uploaded note.txt (12 bytes) into e"),
        "{obs}"
    );
    let obs = f.ok(
        s,
        "browser_state",
        json!({"wait_for": {"text": "content hello upload"}}),
    );
    assert!(
        obs.contains("got note.txt 12 bytes content hello upload"),
        "{obs}"
    );
}
