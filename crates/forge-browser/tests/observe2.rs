//! Observation round 2 (issue 21 points 3-7, issue 20 point 6a): blocked frame schemes, text
//! blocks with refs, rows that are controls, grab-only controls, names and state, frames and
//! horizontal scrollers. Real Chromium through the real egress proxy against a loopback server;
//! one Chromium shared by the tests in this file (each test has its own session).

use std::sync::OnceLock;
use std::time::Duration;

use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    server: Site,
    /// Another site (127.0.0.2): its frames are out of process.
    other: Site,
}

fn page(path: &str) -> Response {
    let html = match path.split('?').next().unwrap_or(path) {
        "/file-frame.html" => {
            r#"<!doctype html><title>File frame</title><h1>Has a file frame</h1>
<iframe src="file:///etc/passwd" title="Local file"></iframe><p>After the frame.</p>"#
        }
        "/schemes.html" => {
            r#"<!doctype html><title>Schemes</title><h1>Odd schemes</h1>
<iframe src="view-source:http://127.0.0.1/" title="Source"></iframe>
<iframe src="chrome://version" title="Chrome page"></iframe><p>After the frames.</p>"#
        }
        "/redirect-frame.html" => {
            r#"<!doctype html><title>Redirect frame</title><h1>Frame that redirects</h1>
<iframe src="/to-file" title="Redirected"></iframe><p>After the frame.</p>"#
        }
        "/hang.html" => {
            return Response::html("<!doctype html><p>late</p>").delayed(Duration::from_secs(20));
        }
        "/plain.html" => "<!doctype html><title>Plain</title><p>Plain page.</p>",
        "/text.html" => {
            r#"<!doctype html><title>Text runs</title>
<div id=a>Some words</div><button onclick="this.textContent = 'Sent'">Submit</button>
<div><span>Alice</span> <b>wrote</b> this</div>
<span>Loose span text</span>
<button><div>Inner div of a button</div></button>
<div>Intro words<div>Nested words</div></div>
<p id=out>nothing selected</p>
<script>document.addEventListener('selectionchange', () => { const t = String(getSelection()); if (t) document.getElementById('out').textContent = 'selected: ' + t; });</script>"#
        }
        "/mail-rows2.html" => {
            r#"<!doctype html><title>Mail</title>
<style>.item{display:flex;gap:10px;padding:6px;cursor:pointer;width:600px}.star,.trash{display:inline-block;width:20px;height:20px;border:1px solid #999}.from{font-weight:bold;width:100px}</style>
<div id=list>
<div class=item onclick="document.getElementById('log').textContent = 'opened ' + this.dataset.f" data-f=Alice><span class=from>Alice</span><span class=subj>Lunch on Friday?</span><span class=star onclick="event.stopPropagation(); document.getElementById('log').textContent = 'starred Alice'"></span><span class=trash onclick="event.stopPropagation()"></span></div>
<div class=item onclick="document.getElementById('log').textContent = 'opened ' + this.dataset.f" data-f=Bruno><span class=from>Bruno</span><span class=subj>Invoice 42</span><span class=star onclick="event.stopPropagation(); document.getElementById('log').textContent = 'starred Bruno'"></span><span class=trash onclick="event.stopPropagation()"></span></div>
</div>
<div id=card onclick="void 0" style="cursor:pointer;width:300px;border:1px solid #ccc"><b>Weekly report ready</b><button>Open</button><button>Share</button></div>
<p id=log>nothing yet</p>"#
        }
        "/handles.html" => {
            r#"<!doctype html><title>Handles</title>
<div id=wrap style="position:relative;width:300px;height:100px;margin:20px"><textarea id=ta aria-label="Notes" style="width:300px;height:100px;resize:none;box-sizing:border-box"></textarea>
<div class="ui-resizable-handle ui-resizable-e" style="position:absolute;right:-5px;top:0;width:7px;height:100%;cursor:e-resize"></div>
<div class="ui-resizable-handle ui-resizable-se" style="position:absolute;right:1px;bottom:1px;width:12px;height:12px;cursor:se-resize"></div></div>
<div style="display:flex;height:80px;width:500px"><div style="width:200px">Left pane</div><div class="gutter gutter-horizontal" style="width:8px;cursor:col-resize;background:#ccc"></div><div>Right pane</div></div>
<p id=size>100</p>
<script>
const se = document.querySelector('.ui-resizable-se'), wrap = document.getElementById('wrap'), ta = document.getElementById('ta');
let start = null;
se.addEventListener('mousedown', (e) => { start = {x: e.clientX, y: e.clientY, w: wrap.offsetWidth, h: wrap.offsetHeight}; e.preventDefault(); });
document.addEventListener('mousemove', (e) => { if (!start) return; const w = start.w + e.clientX - start.x, h = start.h + e.clientY - start.y; wrap.style.width = ta.style.width = w + 'px'; wrap.style.height = ta.style.height = h + 'px'; });
document.addEventListener('mouseup', () => { if (start) document.getElementById('size').textContent = 'height ' + wrap.offsetHeight; start = null; });
</script>"#
        }
        "/state.html" => {
            r#"<!doctype html><title>State</title>
<style>.cb::part(base){}</style>
<x-check id=c1>Weekly digest</x-check>
<x-select id=s1></x-select>
<div style="position:relative;width:300px;height:20px;background:#eee;margin:10px"><div class=noUi-handle role=slider tabindex=0 aria-valuenow="30.00" aria-valuetext="30" aria-valuemin="0.00" aria-valuemax="100.00" style="position:absolute;left:90px;width:20px;height:20px;background:#36c"></div></div>
<div role=grid style="width:400px">
<div role=row><div role=columnheader aria-sort=ascending onclick="void 0" style="cursor:pointer">Name</div></div>
<div style="position:relative;height:90px">
<div role=row style="position:absolute;top:0;transform:translateY(60px)"><button>Open Ann</button></div>
<div role=row style="position:absolute;top:0;transform:translateY(30px)"><button>Open Bob</button></div>
<div role=row style="position:absolute;top:0;transform:translateY(0px)"><button>Open Cid</button></div>
</div></div>
<div class=tabulator role=grid style="width:400px">
<div class=tabulator-headers role=row style="display:flex"><div role=columnheader style="position:relative;width:120px">Who<div class=tabulator-col-resize-handle style="position:absolute;right:0;top:0;width:5px;height:100%;cursor:ew-resize"></div></div><div role=columnheader style="position:relative;width:120px">City</div></div>
<div class=tabulator-row role=row onclick="void 0" style="display:flex"><div role=gridcell style="position:relative;width:120px">Alice<div class=tabulator-col-resize-handle style="position:absolute;right:0;top:0;width:5px;height:100%;cursor:ew-resize"></div></div><div role=gridcell style="position:relative;width:120px">Paris<div class=tabulator-col-resize-handle style="position:absolute;right:0;top:0;width:5px;height:100%;cursor:ew-resize"></div></div></div>
<div class=tabulator-row role=row onclick="void 0" style="display:flex"><div role=gridcell style="position:relative;width:120px">Bruno<div class=tabulator-col-resize-handle style="position:absolute;right:0;top:0;width:5px;height:100%;cursor:ew-resize"></div></div><div role=gridcell style="position:relative;width:120px">Lyon<div class=tabulator-col-resize-handle style="position:absolute;right:0;top:0;width:5px;height:100%;cursor:ew-resize"></div></div></div>
</div>
<div class=swiper style="width:300px;overflow:hidden;margin:10px"><div class=swiper-wrapper style="display:flex"><div class=swiper-slide style="flex:0 0 300px"><button>Slide one button</button></div><div class=swiper-slide style="flex:0 0 300px"><button>Slide two button</button></div></div></div>
<script>
customElements.define('x-check', class extends HTMLElement { constructor() { super(); this.attachShadow({mode: 'open'}).innerHTML = '<label part=base style="position:relative;display:inline-flex"><input type=checkbox style="position:absolute;opacity:0;width:16px;height:16px;margin:0"><span style="display:inline-block;width:16px;height:16px;border:1px solid #333"></span><div><slot></slot></div></label>'; } });
customElements.define('x-select', class extends HTMLElement { constructor() { super(); this.attachShadow({mode: 'open'}).innerHTML = '<div style="position:relative;width:200px;height:30px"><div role=combobox tabindex=0 aria-expanded=false aria-label="Toppings" style="width:200px;height:30px;border:1px solid #999"></div><div class=select__tags style="position:absolute;left:0;top:0;width:200px;height:30px">Ham</div></div>'; } });
</script>"#
        }
        "/xf-top.html" => {
            r#"<!doctype html><title>Frames top</title><h1>Frames</h1>
<iframe src="{{OTHER}}/xf-inner.html" title="Other site" width="400" height="150"></iframe>
<iframe src="/same-inner.html" title="Same site" width="400" height="100"></iframe>"#
        }
        "/xf-inner.html" => {
            r#"<!doctype html><title>Inner</title><p id=secret>Inner frame text 42</p><a href="/x">Inner link</a>
<button id=btn onclick="this.textContent = 'Inner pressed'">Inner button</button>"#
        }
        "/same-inner.html" => {
            r#"<!doctype html><title>Same</title><p id=s>Same frame words</p><button id=sb onclick="this.textContent = 'Same pressed'">Same button</button>"#
        }
        "/carousel.html" => {
            r#"<!doctype html><title>Carousel</title><h1>Featured</h1>
<div id=track aria-label="Featured items" style="display:flex;gap:10px;width:450px;overflow-x:auto;overflow-y:hidden">
<button style="flex:0 0 200px">Card 1</button><button style="flex:0 0 200px">Card 2</button><button style="flex:0 0 200px">Card 3</button><button style="flex:0 0 200px">Card 4</button><button style="flex:0 0 200px">Card 5</button><button style="flex:0 0 200px">Card 6</button>
</div>"#
        }
        "/nest-top.html" => {
            r#"<!doctype html><title>Nest top</title><h1>Nested frames</h1>
<iframe src="{{OTHER}}/nest-outer.html" title="Outer" width="500" height="260"></iframe>"#
        }
        "/nest-outer.html" => {
            r#"<!doctype html><title>Outer</title><button onclick="this.textContent = 'Outer pressed'">Outer button</button>
<iframe src="/nest-deep.html" title="Deep" width="400" height="120"></iframe>"#
        }
        "/nest-deep.html" => {
            r#"<!doctype html><title>Deep</title><p>Deep frame text</p><button onclick="this.textContent = 'Deep pressed'">Deep button</button>"#
        }
        "/to-file" => {
            return Response::bare(302, "").header("Location", "file:///etc/passwd");
        }
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let other = Site::start_on("127.0.0.2:0", |r: &Request| page(&r.path));
        let o = format!("http://{}", other.addr);
        let server = Site::start(move |r: &Request| {
            let mut resp = page(&r.path);
            resp.body = String::from_utf8_lossy(&resp.body)
                .replace("{{OTHER}}", &o)
                .into_bytes();
            resp
        });
        let b = Shared::start(
            "forge-browser observe2 tests",
            &[server.entry(), other.entry()],
            Confine::WhereAvailable,
        )?;
        Some(Fixture { b, server, other })
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

    fn open(&self, session: &str, path: &str) -> String {
        self.ok(
            session,
            "browser_navigate",
            json!({"url": self.server.url(path)}),
        )
    }
}

/// Navigating to `path` succeeds (before the fix it failed after 30 s with "Request timed out",
/// waiting for the blocked frame's load), and its observation lists a blocked frame and the text
/// after it. No wall-clock assert: the navigation's own failure is the signal.
fn returns_with_blocked_frame(session: &str, path: &str, frames: usize) {
    let Some(f) = fixture() else { return };
    let obs = f.open(session, path);
    assert!(obs.starts_with("navigated: HTTP 200"), "{obs}");
    let blocked = obs.lines().filter(|l| l.contains("blocked")).count();
    assert_eq!(blocked, frames, "blocked frames listed:\n{obs}");
    assert!(obs.contains("After the frame"), "{obs}");
}

#[test]
fn a_file_frame_does_not_stall_navigate() {
    returns_with_blocked_frame("file-frame", "/file-frame.html", 1);
}

#[test]
fn view_source_and_chrome_frames_do_not_stall_navigate() {
    returns_with_blocked_frame("schemes", "/schemes.html", 2);
}

#[test]
fn a_frame_redirected_to_a_file_does_not_stall_navigate() {
    returns_with_blocked_frame("redirect-frame", "/redirect-frame.html", 1);
}

#[test]
fn a_navigation_after_one_cut_off_at_a_hanging_host_is_fast() {
    let Some(f) = fixture() else { return };
    let s = "after-hang";
    f.open(s, "/plain.html");
    let cut = f.call(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/hang.html"), "timeout_ms": 2000}),
    );
    assert!(cut.is_err(), "a 20 s response within 2 s: {cut:?}");
    // The next navigation is given its own time limit (the tool's `timeout_ms`, not a wall-clock
    // assert): before the fix it stayed queued behind the cut-off load for 18-29 s, so it failed
    // this limit.
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/plain.html"), "timeout_ms": 10000}),
    );
    assert!(obs.contains("Plain page."), "{obs}");
}

/// The ref at the start of the line containing `needle` (a text or element line).
fn ref_of(obs: &str, needle: &str) -> String {
    let line = obs
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{obs}"));
    line.split_whitespace().next().expect("ref").to_string()
}

#[test]
fn div_and_span_text_runs_get_refs_and_end_before_the_next_control() {
    let Some(f) = fixture() else { return };
    let s = "text-runs";
    let obs = f.open(s, "/text.html");
    let text = obs.split("\ntext:\n").nth(1).expect("text section");
    assert!(
        text.lines().any(|l| l.ends_with(r#" div "Some words""#)),
        "{obs}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.contains("Some words") && l.contains("Submit")),
        "{obs}"
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with(r#" div "Alice wrote this""#)),
        "{obs}"
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with(r#" span "Loose span text""#)),
        "{obs}"
    );
    assert!(
        text.lines().any(|l| l.ends_with(r#" div "Intro words""#)),
        "{obs}"
    );
    assert!(
        text.lines().any(|l| l.ends_with(r#" div "Nested words""#)),
        "{obs}"
    );
    // Text inside a listed control is its name, not a text run.
    assert!(
        !text.lines().any(|l| l.contains(r#"div "Inner div"#)),
        "{obs}"
    );
    let r = ref_of(text, "Some words");
    assert!(r.starts_with('e'), "{r}");
    f.ok(s, "browser_select_text", json!({"ref": r, "text": "words"}));
    let obs = f.ok(s, "browser_state", json!({}));
    assert!(obs.contains("selected: words"), "{obs}");
}

#[test]
fn a_row_that_is_a_control_is_named_by_its_own_text() {
    let Some(f) = fixture() else { return };
    let s = "row-controls";
    let obs = f.open(s, "/mail-rows2.html");
    for (who, subj) in [("Alice", "Lunch on Friday?"), ("Bruno", "Invoice 42")] {
        let line = obs
            .lines()
            .find(|l| l.contains(who) && l.contains("(row)"))
            .unwrap_or_else(|| panic!("no row line for {who}:\n{obs}"));
        assert!(line.contains(subj), "{line}\n{obs}");
        assert!(
            line.contains("clickable") || line.contains("button"),
            "{line}"
        );
    }
    // The star of Bruno's row is listed under Bruno's row line, indented; clicking it stars
    // Bruno's mail (the row click does not happen).
    let lines: Vec<&str> = obs.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("Bruno") && l.contains("(row)"))
        .expect("Bruno's row");
    let star = lines[at + 1..]
        .iter()
        .take_while(|l| l.starts_with("  "))
        .find(|l| l.contains("star"))
        .unwrap_or_else(|| panic!("no star under Bruno's row:\n{obs}"));
    let r = star.split_whitespace().next().expect("ref");
    let after = f.ok(s, "browser_click", json!({"ref": r}));
    assert!(after.contains("starred Bruno"), "{after}");
    // A card that is a control with two controls in it is named by its own text.
    let card = obs
        .lines()
        .find(|l| l.contains("Weekly report ready"))
        .unwrap_or_else(|| panic!("no card line:\n{obs}"));
    assert!(
        card.split_whitespace().nth(1) == Some("clickable"),
        "{card}"
    );
}

#[test]
fn resize_handles_and_splitters_are_listed_and_dragged_by_ref() {
    let Some(f) = fixture() else { return };
    let s = "handles";
    let obs = f.open(s, "/handles.html");
    let handles: Vec<&str> = obs
        .lines()
        .filter(|l| l.contains(r#"handle hint="resize handle""#))
        .collect();
    assert_eq!(handles.len(), 3, "{obs}");
    // The corner handle is the second (document order): drag it 60 px down.
    let r = handles[1].split_whitespace().next().expect("ref");
    f.ok(
        s,
        "browser_drag",
        json!({"from": r, "by": {"x": 40, "y": 60}}),
    );
    let obs = f.ok(s, "browser_state", json!({}));
    let h: i64 = obs
        .split("height ")
        .nth(1)
        .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no height in:\n{obs}"));
    assert!((150..=170).contains(&h), "height {h}:\n{obs}");
}

#[test]
fn names_through_slots_own_parts_sliders_sort_screen_order_and_clips() {
    let Some(f) = fixture() else { return };
    let obs = f.open("state", "/state.html");
    let line = |needle: &str| -> &str {
        obs.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{obs}"))
    };
    let cb = line("checkbox");
    assert!(cb.contains(r#""Weekly digest""#), "{cb}");
    assert!(!cb.contains("covered"), "{cb}");
    // The slotted text names the checkbox; it is not a text run of its own as well.
    assert!(!obs.contains(r#"x-check "Weekly digest""#), "{obs}");
    let combo = line(r#"combobox "Toppings""#);
    assert!(!combo.contains("covered"), "{combo}");
    let slider = line("slider");
    assert!(slider.contains(r#"value="30""#), "{slider}");
    assert!(slider.contains(r#"range="0.00-100.00""#), "{slider}");
    assert!(line(r#""Name""#).contains("sorted ascending"), "{obs}");
    let pos = |n: &str| obs.find(n).unwrap_or_else(|| panic!("{n} missing:\n{obs}"));
    assert!(
        pos("Open Cid") < pos("Open Bob") && pos("Open Bob") < pos("Open Ann"),
        "{obs}"
    );
    // Tabulator-like rows: named by their cells, no resize handle per cell; the header's
    // handle is listed.
    assert!(line(r#""Alice Paris""#).contains("clickable"), "{obs}");
    assert!(line(r#""Bruno Lyon""#).contains("clickable"), "{obs}");
    assert_eq!(obs.matches("resize handle").count(), 1, "{obs}");
    assert!(
        line("Slide two button").contains("[clipped by its container]"),
        "{obs}"
    );
    assert!(!line("Slide one button").contains("clipped"), "{obs}");
}

#[test]
fn extract_and_selectors_read_frames_named_by_their_frame_number() {
    let Some(f) = fixture() else { return };
    let _ = &f.other;
    let s = "frame-selectors";
    let obs = f.open(s, "/xf-top.html");
    let frame = |needle: &str| -> String {
        obs.lines()
            .find(|l| l.contains("iframe") && l.contains(needle))
            .and_then(|l| l.split(':').next())
            .unwrap_or_else(|| panic!("no frame line {needle:?}:\n{obs}"))
            .to_string()
    };
    let (other, same) = (frame("Other site"), frame("Same site"));
    let text = f.ok(s, "browser_extract", json!({"frame": other}));
    assert!(text.contains("Inner frame text 42"), "{text}");
    assert!(!text.contains("Frames"), "the top page's text: {text}");
    let links = f.ok(
        s,
        "browser_extract",
        json!({"frame": other, "mode": "links"}),
    );
    assert!(links.contains("Inner link"), "{links}");
    let html = f.ok(
        s,
        "browser_extract",
        json!({"frame": same, "mode": "html", "selector": "#s"}),
    );
    assert!(html.contains("Same frame words"), "{html}");
    let after = f.ok(
        s,
        "browser_click",
        json!({"selector": "#btn", "frame": other}),
    );
    assert!(after.contains("Inner pressed"), "{after}");
    let after = f.ok(
        s,
        "browser_click",
        json!({"selector": "#sb", "frame": same}),
    );
    assert!(after.contains("Same pressed"), "{after}");
    let err = f.call(s, "browser_extract", json!({"frame": "f9"}));
    assert!(err.is_err(), "{err:?}");
}

#[test]
fn a_horizontal_scroll_container_is_listed_and_scrolls_by_ref() {
    let Some(f) = fixture() else { return };
    let s = "carousel";
    let obs = f.open(s, "/carousel.html");
    let line = obs
        .lines()
        .find(|l| l.contains("scrollable") && l.contains("Featured items"))
        .unwrap_or_else(|| panic!("no carousel line:\n{obs}"));
    assert!(line.contains("scroll x 0/"), "{line}");
    assert!(line.contains("more items to the right"), "{line}");
    let card1 = obs
        .lines()
        .find(|l| l.contains(r#"button "Card 1""#))
        .unwrap_or_else(|| panic!("Card 1 not listed:\n{obs}"));
    assert!(!card1.contains("scrolled out"), "{card1}");
    let r = line.split_whitespace().next().expect("ref");
    let after = f.ok(
        s,
        "browser_scroll",
        json!({"ref": r, "direction": "right", "amount": 1000}),
    );
    let obs = f.ok(s, "browser_state", json!({}));
    let card6 = obs
        .lines()
        .find(|l| l.contains(r#"button "Card 6""#))
        .unwrap_or_else(|| panic!("Card 6 not listed after {after}:\n{obs}"));
    assert!(!card6.contains("scrolled out"), "{card6}\n{obs}");
    assert!(obs.contains("to the left"), "{obs}");
}

#[test]
fn a_frame_nested_in_a_cross_origin_frame_is_walked_and_clicked() {
    let Some(f) = fixture() else { return };
    let s = "nested-frames";
    let obs = f.open(s, "/nest-top.html");
    let deep = obs
        .lines()
        .find(|l| l.contains(r#"button "Deep button""#))
        .unwrap_or_else(|| panic!("the nested frame's button is not listed:\n{obs}"));
    let r = deep.split_whitespace().next().expect("ref");
    assert!(
        r.starts_with('f') && r[1..].contains('f'),
        "a nested frame ref: {r}"
    );
    let frame = &r[..r.rfind('e').expect("e")];
    assert!(
        obs.lines()
            .any(|l| l.starts_with(&format!("{frame}: iframe \"Deep\""))),
        "{obs}"
    );
    let after = f.ok(s, "browser_click", json!({"ref": r}));
    assert!(after.contains("Deep pressed"), "{after}");
    assert!(!after.contains("Outer pressed"), "{after}");
}
