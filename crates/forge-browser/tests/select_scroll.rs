//! `browser_select_text` and `browser_scroll` for real: Chromium through the real egress proxy
//! against loopback pages written for these tests. One Chromium is shared by the tests in this
//! file (each test uses its own session key, so its own browser context).

use std::sync::OnceLock;

use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    server: Site,
}

const PARA: &str = "The quick brown fox jumps over the lazy dog. A second fox sleeps.";

fn page(path: &str) -> Response {
    let path = path.split('?').next().unwrap_or(path);
    let html = match path {
        "/select.html" => format!(
            r#"<!doctype html><html><head><title>Select text</title>
<style>body{{font:16px sans-serif}} #nosel{{user-select:none}}</style></head><body>
<p id="para">{PARA}</p>
<p id="nosel">You cannot select this sentence.</p>
<label for="field">Paste here</label> <input id="field">
<p id="seen">mouseup saw nothing</p>
<p id="changes">no selectionchange</p>
<p id="copied">no copy event</p>
<p id="pasted">no paste event</p>
<script>
document.addEventListener('mouseup', () => {{
  const s = getSelection();
  document.getElementById('seen').textContent = 'mouseup saw [' + s.toString() + '] at ' + s.anchorOffset;
}});
let n = 0;
document.addEventListener('selectionchange', () => {{ document.getElementById('changes').textContent = 'selectionchange ' + (++n); }});
document.addEventListener('copy', () => {{ document.getElementById('copied').textContent = 'copy event fired'; }});
document.addEventListener('paste', (e) => {{ document.getElementById('pasted').textContent = 'paste event (trusted ' + e.isTrusted + ') saw [' + e.clipboardData.getData('text/plain') + ']'; }});
</script></body></html>"#
        ),
        "/long-select.html" => {
            let mut s = String::from(
                "<!doctype html><title>Long selection</title><h1>Top</h1><div id=\"long\">",
            );
            for i in 0..80 {
                s.push_str(&format!(
                    "<p>Line {i} of a text taller than the window.</p>"
                ));
            }
            s.push_str("</div><p id=\"seen\">mouseup saw nothing</p><script>document.addEventListener('mouseup', () => { document.getElementById('seen').textContent = 'mouseup saw ' + getSelection().toString().length + ' chars'; });</script>");
            s
        }
        "/covered-select.html" => format!(
            r#"<!doctype html><title>Covered</title><p id="para">{PARA}</p>
<div style="position:fixed;left:0;top:0;width:100%;height:100%;background:#fff">Cookie wall</div>"#
        ),
        "/terms.html" => {
            let mut s = String::from(
                r#"<!doctype html><title>Terms</title><h1>Terms of service</h1>
<div id="terms" style="height:150px;overflow:auto;border:1px solid #000">"#,
            );
            for i in 1..=40 {
                s.push_str(&format!("<p>Clause {i}: the service is provided as is.</p>"));
                if i == 3 {
                    s.push_str("<p>See the <a href=\"#privacy\">privacy policy</a>.</p>");
                }
            }
            s.push_str(r#"</div>
<button id="accept" disabled onclick="document.getElementById('result').textContent='Accepted the terms'">Accept</button>
<p id="result">Not accepted</p>
<p id="wheels">wheel events: 0</p>
<script>
const t = document.getElementById('terms');
let w = 0;
t.addEventListener('wheel', () => { document.getElementById('wheels').textContent = 'wheel events: ' + (++w); }, {passive: true});
t.addEventListener('scroll', () => { if (t.scrollTop + t.clientHeight >= t.scrollHeight - 2) document.getElementById('accept').disabled = false; });
</script>"#);
            s
        }
        "/list.html" => r#"<!doctype html><title>Long list</title><h1>Inbox</h1>
<ul id="list" style="height:240px;overflow:auto;margin:0;padding:0;list-style:none"></ul>
<p id="shown">list shows items 0-7</p>
<p id="picked">nothing picked</p>
<script>
const list = document.getElementById('list');
let n = 0;
// Items load 20 at a time when the list is scrolled near its end (like a feed or a chat).
function more() {
  for (let i = 0; i < 20 && n < 120; i++, n++) {
    const li = document.createElement('li');
    li.style.height = '30px';
    const b = document.createElement('button');
    b.textContent = 'Item ' + n;
    b.onclick = () => { document.getElementById('picked').textContent = 'picked ' + b.textContent; };
    li.appendChild(b);
    list.appendChild(li);
  }
}
more();
list.addEventListener('scroll', () => {
  if (list.scrollTop + list.clientHeight >= list.scrollHeight - 60) more();
  const first = Math.ceil(list.scrollTop / 30), last = Math.floor((list.scrollTop + list.clientHeight) / 30) - 1;
  document.getElementById('shown').textContent = 'list shows items ' + first + '-' + last;
});
</script>"#
            .to_string(),
        "/nowheel.html" => {
            let mut s = String::from(
                r#"<!doctype html><title>No wheel</title>
<div id="box" style="height:200px;overflow:auto">"#,
            );
            for i in 0..60 {
                s.push_str(&format!("<p>Row {i}</p>"));
            }
            s.push_str(r#"</div><p id="at">box at 0</p>
<div style="position:relative;height:200px"><div id="covered" style="height:200px;overflow:auto">"#);
            for i in 0..60 {
                s.push_str(&format!("<p>Covered row {i}</p>"));
            }
            s.push_str(r#"</div><div style="position:absolute;left:0;top:50px;width:100%;height:100px;background:#ccc">Overlay</div></div>
<script>
const box = document.getElementById('box');
let cancelled = 0;
box.addEventListener('wheel', (e) => { e.preventDefault(); cancelled++; }, {passive: false});
box.addEventListener('scroll', () => { document.getElementById('at').textContent = 'box at ' + Math.round(box.scrollTop) + ' after ' + cancelled + ' cancelled wheel events'; });
</script>"#);
            s
        }
        _ => {
            return Response::not_found()
        }
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r: &Request| page(&r.path));
        let b = Shared::start(
            "forge-browser select/scroll tests",
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
}

/// The ref on the observation line that contains `needle`.
fn ref_of(obs: &str, needle: &str) -> String {
    let line = obs
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{obs}"));
    line.split_whitespace().next().expect("ref").to_string()
}

/// The first line (forge's status, outside the fence).
fn status(out: &str) -> &str {
    out.lines().next().unwrap_or("")
}

#[test]
fn select_text_selects_a_phrase_with_real_mouse_events() {
    let Some(f) = fixture() else { return };
    let s = "select";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/select.html")}),
    );
    let out = f.ok(
        s,
        "browser_select_text",
        json!({"selector": "#para", "text": "brown  fox\njumps"}),
    );
    assert!(
        status(&out).starts_with("selected 15 chars of text in e")
            && status(&out).contains("mouse drag"),
        "{out}"
    );
    // The selected text is page-derived: it is inside a fence, not in the status line.
    assert!(!status(&out).contains("brown"), "{out}");
    let fenced = out
        .split("UNTRUSTED_CONTENT_START")
        .nth(1)
        .expect("a fence after the status");
    assert!(
        fenced.contains("selected text: \"brown fox jumps\""),
        "{out}"
    );
    // The page's own mouseup handler saw the selection, and selectionchange fired.
    let at = PARA.find("brown").expect("in PARA");
    assert!(
        out.contains(&format!("mouseup saw [brown fox jumps] at {at}")),
        "{out}"
    );
    assert!(out.contains("selectionchange "), "{out}");

    // The second "fox", not the first.
    let out = f.ok(
        s,
        "browser_select_text",
        json!({"selector": "#para", "text": "fox", "occurrence": 2}),
    );
    assert!(status(&out).contains("(occurrence 2 of 2)"), "{out}");
    let second = PARA.rfind("fox").expect("in PARA");
    assert!(
        out.contains(&format!("mouseup saw [fox] at {second}")),
        "{out}"
    );

    // The whole element by default.
    let out = f.ok(s, "browser_select_text", json!({"selector": "#para"}));
    assert!(
        status(&out).starts_with(&format!("selected {} chars", PARA.len())),
        "{out}"
    );
    assert!(out.contains(&format!("mouseup saw [{PARA}] at 0")), "{out}");
}

#[test]
fn select_text_errors_say_what_is_there() {
    let Some(f) = fixture() else { return };
    let s = "select-errors";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/select.html")}),
    );
    let err = f
        .call(
            s,
            "browser_select_text",
            json!({"selector": "#para", "text": "fox", "occurrence": 3}),
        )
        .expect_err("only two foxes");
    let msg = err.to_string();
    assert!(
        msg.contains("occurrence 3 was asked for") && msg.contains("only 2 time(s)"),
        "{msg}"
    );
    let err = f
        .call(
            s,
            "browser_select_text",
            json!({"selector": "#para", "text": "purple elephant"}),
        )
        .expect_err("not there");
    let msg = err.to_string();
    assert!(
        msg.contains("is not in e") && msg.contains("0 occurrences"),
        "{msg}"
    );
    // The element's text is page-derived: fenced.
    assert!(
        msg.contains("UNTRUSTED_CONTENT_START") && msg.contains("The quick brown"),
        "{msg}"
    );
    let err = f
        .call(
            s,
            "browser_select_text",
            json!({"selector": "#para", "text": "BROWN FOX"}),
        )
        .expect_err("case differs");
    assert!(
        err.to_string().contains("1 when ignoring upper/lower case"),
        "{err}"
    );
    let field = ref_of(&obs, "textbox \"Paste here\"");
    let err = f
        .call(s, "browser_select_text", json!({"ref": field}))
        .expect_err("a form field");
    assert!(err.to_string().contains("is a form field"), "{err}");
    let err = f
        .call(s, "browser_select_text", json!({"selector": "#nope"}))
        .expect_err("no such element");
    assert!(err.to_string().contains("no element matches"), "{err}");
    let err = f
        .call(s, "browser_select_text", json!({"text": "fox"}))
        .expect_err("no target");
    assert!(matches!(err, ToolError::InvalidInput(_)), "{err}");

    // user-select: none: the drag happens, and the result says the page selected nothing.
    let out = f.ok(s, "browser_select_text", json!({"selector": "#nosel"}));
    assert!(
        status(&out).contains("the page's selection is empty afterwards"),
        "{out}"
    );

    // A cover over the text: refused, naming the cover inside a fence.
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/covered-select.html")}),
    );
    let err = f
        .call(
            s,
            "browser_select_text",
            json!({"selector": "#para", "text": "lazy"}),
        )
        .expect_err("covered");
    let msg = err.to_string();
    assert!(
        msg.contains("another element covers the start of the text") && msg.contains("Cookie wall"),
        "{msg}"
    );
}

#[test]
fn select_text_taller_than_the_window_extends_with_a_shift_click() {
    let Some(f) = fixture() else { return };
    let s = "select-long";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/long-select.html")}),
    );
    let out = f.ok(s, "browser_select_text", json!({"selector": "#long"}));
    assert!(
        status(&out).starts_with("selected ") && status(&out).contains("shift-click"),
        "{out}"
    );
    // All 80 lines, as the page's own mouseup handler counted them.
    let chars: usize = status(&out)
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("selected N chars");
    assert!(chars > 80 * 38, "{out}");
    assert!(out.contains("selected text: \"Line 0 of a text"), "{out}");
    let seen = f.ok(s, "browser_extract", json!({"selector": "#seen"}));
    assert!(
        seen.contains(&format!("mouseup saw {chars} chars")),
        "{seen}"
    );
}

#[test]
fn selected_text_copies_and_pastes_with_key_chords() {
    let Some(f) = fixture() else { return };
    let s = "select-copy";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/select.html")}),
    );
    let field = ref_of(&obs, "textbox \"Paste here\"");
    let out = f.ok(
        s,
        "browser_select_text",
        json!({"selector": "#para", "text": "lazy dog"}),
    );
    assert!(status(&out).starts_with("selected 8 chars"), "{out}");
    let out = f.ok(s, "browser_press", json!({"key": "Control+C"}));
    assert!(out.contains("copy event fired"), "{out}");
    let out = f.ok(
        s,
        "browser_press",
        json!({"key": "Control+V", "ref": field}),
    );
    assert!(
        out.contains("textbox \"Paste here\" value=\"lazy dog\""),
        "{out}"
    );
}

#[test]
fn sessions_do_not_share_the_clipboard() {
    let Some(f) = fixture() else { return };
    let (a, b) = ("clip-a", "clip-b");
    let url = f.server.url("/select.html");
    let obs_a = f.ok(a, "browser_navigate", json!({"url": url}));
    let obs_b = f.ok(b, "browser_navigate", json!({"url": url}));
    let field_a = ref_of(&obs_a, "textbox \"Paste here\"");
    let field_b = ref_of(&obs_b, "textbox \"Paste here\"");
    // Session A copies a phrase.
    f.ok(
        a,
        "browser_select_text",
        json!({"selector": "#para", "text": "lazy dog"}),
    );
    let out = f.ok(a, "browser_press", json!({"key": "Control+C"}));
    assert!(status(&out).contains("copied 8 chars"), "{out}");
    assert!(out.contains("copy event fired"), "{out}");
    // Session B pastes: a real paste happens, with nothing of A's text.
    let out = f.ok(
        b,
        "browser_press",
        json!({"key": "Control+V", "ref": field_b}),
    );
    assert!(
        out.contains("textbox \"Paste here\" value=\"\""),
        "A's copy leaked into B:\n{out}"
    );
    let seen = f.ok(b, "browser_extract", json!({"selector": "#pasted"}));
    assert!(seen.contains("paste event (trusted true) saw []"), "{seen}");
    // B's own copy and paste work, and do not change A's clipboard.
    f.ok(
        b,
        "browser_select_text",
        json!({"selector": "#para", "text": "quick brown fox"}),
    );
    let out = f.ok(b, "browser_press", json!({"key": "Control+C"}));
    assert!(status(&out).contains("copied 15 chars"), "{out}");
    let out = f.ok(
        b,
        "browser_press",
        json!({"key": "Control+V", "ref": field_b}),
    );
    assert!(
        out.contains("textbox \"Paste here\" value=\"quick brown fox\""),
        "{out}"
    );
    let out = f.ok(
        a,
        "browser_press",
        json!({"key": "Control+V", "ref": field_a}),
    );
    assert!(
        out.contains("textbox \"Paste here\" value=\"lazy dog\""),
        "{out}"
    );
    let seen = f.ok(a, "browser_extract", json!({"selector": "#pasted"}));
    assert!(
        seen.contains("paste event (trusted true) saw [lazy dog]"),
        "{seen}"
    );
    // A cut takes the selected text out of the field into A's clipboard only.
    let out = f.ok(
        a,
        "browser_press",
        json!({"key": "Control+A", "ref": field_a}),
    );
    assert!(out.contains("value=\"lazy dog\""), "{out}");
    let out = f.ok(a, "browser_press", json!({"key": "Control+X"}));
    assert!(status(&out).contains("cut 8 chars"), "{out}");
    assert!(!out.contains("value=\"lazy dog\""), "{out}");
    let out = f.ok(
        b,
        "browser_press",
        json!({"key": "Control+V", "ref": field_b}),
    );
    assert!(
        out.contains("textbox \"Paste here\" value=\"quick brown foxquick brown fox\""),
        "A's cut leaked into B:\n{out}"
    );
    let seen = f.ok(b, "browser_extract", json!({"selector": "#pasted"}));
    assert!(
        seen.contains("paste event (trusted true) saw [quick brown fox]"),
        "{seen}"
    );
    f.ok(
        a,
        "browser_press",
        json!({"key": "Shift+Insert", "ref": field_a}),
    );
    let seen = f.ok(a, "browser_extract", json!({"selector": "#pasted"}));
    assert!(
        seen.contains("paste event (trusted true) saw [lazy dog]"),
        "{seen}"
    );
}

/// The position `a/bpx` in a status line, as (a, b).
fn position(status: &str) -> (u64, u64) {
    let part = status
        .split(" to ")
        .nth(1)
        .or_else(|| status.split(" at ").nth(1))
        .unwrap_or_else(|| panic!("no position in {status:?}"));
    let part = part.split("px").next().unwrap_or("");
    let (a, b) = part
        .split_once('/')
        .unwrap_or_else(|| panic!("no a/b in {status:?}"));
    let n = |s: &str| s.replace(',', "").trim().parse::<u64>().expect("number");
    (n(a), n(b))
}

#[test]
fn scroll_a_terms_box_to_the_end_enables_accept() {
    let Some(f) = fixture() else { return };
    let s = "scroll-terms";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/terms.html")}),
    );
    assert!(obs.contains("button \"Accept\" disabled"), "{obs}");
    // The page itself fits the window: scrolling it is a clear error.
    let err = f
        .call(s, "browser_scroll", json!({}))
        .expect_err("the page does not scroll");
    assert!(
        err.to_string()
            .contains("the page does not scroll vertically"),
        "{err}"
    );
    let out = f.ok(
        s,
        "browser_scroll",
        json!({"selector": "#terms", "to": "bottom"}),
    );
    let st = status(&out);
    assert!(
        st.starts_with("scrolled e") && st.contains("(at bottom) with the mouse wheel"),
        "{out}"
    );
    let (at, max) = position(st);
    assert!(at == max && max > 1000, "{st}");
    assert!(out.contains("button \"Accept\"\n"), "Accept enabled: {out}");
    assert!(
        !out.contains("wheel events: 0"),
        "the page saw wheel events: {out}"
    );
    let out = f.ok(
        s,
        "browser_scroll",
        json!({"selector": "#terms", "to": "bottom"}),
    );
    assert!(status(&out).contains("is already at the bottom"), "{out}");
    let out = f.ok(
        s,
        "browser_click",
        json!({"ref": ref_of(&out, "button \"Accept\"")}),
    );
    assert!(out.starts_with("clicked e"), "{out}");
    // The page's text after the click (the observation's text excerpt is budgeted and the long
    // terms come first, so read the result element itself).
    let res = f.ok(s, "browser_extract", json!({"selector": "#result"}));
    assert!(res.contains("Accepted the terms"), "{res}");

    // Again, by pages, from a link inside the box (its nearest scrollable ancestor is the box).
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/terms.html")}),
    );
    let link = ref_of(&obs, "link \"privacy policy\"");
    let mut last = 0;
    let mut done = false;
    for _ in 0..40 {
        let out = f.ok(s, "browser_scroll", json!({"ref": link}));
        let st = status(&out).to_string();
        assert!(st.contains("with the mouse wheel"), "{st}");
        let (at, max) = position(&st);
        assert!(at > last, "moved down: {st}");
        // 90% of the 150px box per page (its border excluded).
        assert!(at - last <= 140, "about one page: {st}");
        last = at;
        if at == max {
            assert!(st.contains("(at bottom)"), "{st}");
            assert!(out.contains("button \"Accept\"\n"), "{out}");
            done = true;
            break;
        }
    }
    assert!(done, "reached the bottom within 40 pages");
    let out = f.ok(s, "browser_scroll", json!({"ref": link, "to": "top"}));
    assert!(status(&out).contains("up to 0/"), "{out}");
    assert!(status(&out).contains("(at top)"), "{out}");
}

#[test]
fn scroll_a_lazy_list_by_pages_until_a_far_item_shows_then_click_it() {
    let Some(f) = fixture() else { return };
    let s = "scroll-list";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/list.html")}),
    );
    assert!(!obs.contains("Item 80"), "not loaded yet: {obs}");
    let first = ref_of(&obs, "button \"Item 0\"");
    let mut shown = String::new();
    let mut found = false;
    for _ in 0..40 {
        let out = f.ok(s, "browser_scroll", json!({"ref": first, "amount": "page"}));
        assert!(status(&out).contains("with the mouse wheel"), "{out}");
        shown = f.ok(s, "browser_extract", json!({"selector": "#shown"}));
        let range = shown
            .split("list shows items ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|r| r.split_once('-'))
            .map(|(a, b)| (a.parse::<u32>(), b.parse::<u32>()));
        if let Some((Ok(a), Ok(b))) = range {
            if a <= 80 && 80 <= b {
                found = true;
                break;
            }
        }
    }
    assert!(found, "item 80 scrolled into the list's view: {shown}");
    let obs = f.ok(s, "browser_state", json!({}));
    let item = ref_of(&obs, "button \"Item 80\"");
    let out = f.ok(s, "browser_click", json!({"ref": item}));
    assert!(out.contains("picked Item 80"), "{out}");
}

#[test]
fn scroll_falls_back_when_wheel_events_are_cancelled_or_covered() {
    let Some(f) = fixture() else { return };
    let s = "scroll-fallback";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/nowheel.html")}),
    );
    let out = f.ok(s, "browser_scroll", json!({"selector": "#box"}));
    let st = status(&out);
    assert!(
        st.contains("wheel events did not move it")
            && st.contains("so forge set its scroll position directly"),
        "{out}"
    );
    let (at, _) = position(st);
    assert_eq!(at, 180, "one page of the 200px box: {st}");
    // The page cancelled at least one real wheel event, then saw the scroll.
    let seen = out
        .split("box at 180 after ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("the page reported the scroll: {out}"));
    assert!(seen >= 1, "{out}");

    let out = f.ok(
        s,
        "browser_scroll",
        json!({"selector": "#covered", "to": "bottom"}),
    );
    let st = status(&out);
    assert!(
        st.contains("another element covers its visible centre") && st.contains("(at bottom)"),
        "{out}"
    );
}

#[test]
fn scroll_the_page_by_pages_and_back_to_the_top() {
    let Some(f) = fixture() else { return };
    let s = "scroll-page";
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.server.url("/long-select.html")}),
    );
    let out = f.ok(s, "browser_scroll", json!({}));
    let st = status(&out);
    assert!(
        st.starts_with("scrolled the page down to ") && st.contains("with the mouse wheel"),
        "{out}"
    );
    let (at, _) = position(st);
    assert_eq!(at, 720, "90% of the 800px window: {st}");
    assert!(out.contains("viewport: 1280x800, scrolled 720 of"), "{out}");
    let out = f.ok(
        s,
        "browser_scroll",
        json!({"direction": "up", "amount": 500}),
    );
    assert!(
        status(&out).starts_with("scrolled the page up to 220/"),
        "{out}"
    );
    let out = f.ok(s, "browser_scroll", json!({"to": "top"}));
    assert!(status(&out).contains("(at top)"), "{out}");
    let err = f
        .call(s, "browser_scroll", json!({"direction": "left"}))
        .expect_err("nothing to scroll sideways");
    assert!(
        err.to_string().contains("does not scroll sideways"),
        "{err}"
    );
    let err = f
        .call(s, "browser_scroll", json!({"amount": "lots"}))
        .expect_err("bad amount");
    assert!(matches!(err, ToolError::InvalidInput(_)), "{err}");
}
