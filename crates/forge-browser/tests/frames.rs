//! Cross-origin iframes for real: a page on 127.0.0.1 embedding a frame from 127.0.0.2 (another
//! site, so Chromium's site isolation puts it in its own renderer, an `iframe` target) and one
//! from 127.0.0.1 on another port (cross-origin, same site: same renderer). All through the real
//! egress proxy; one Chromium shared by the tests in this file, confined in its own network
//! namespace where the machine allows it.

use std::sync::OnceLock;

use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    top: Site,
    site: Site,
    _same: Site,
}

/// The pages the embedded servers serve (the same for both frame servers).
fn frame_page(path: &str) -> Response {
    let html = match path.split('?').next().unwrap_or(path) {
        "/pay.html" => {
            r#"<!doctype html><title>Pay frame</title>
<button id=pay onclick="document.getElementById('out').textContent = 'paid ' + (++window.n)">Pay now</button>
<label for=nm>Card holder</label><input id=nm> <label for=pw>PIN</label><input id=pw type=password>
<p id=out>unpaid</p><p id=echo>typed:</p><div id=lis>Listener in frame</div>
<script>document.getElementById('lis').addEventListener('click', (e) => { e.target.textContent = 'Listener ran'; }); window.n = 0; document.getElementById('nm').addEventListener('input', (e) => { document.getElementById('echo').textContent = 'typed:' + e.target.value; });</script>
<div style="height:2000px"></div><button onclick="this.textContent = 'Far clicked'">Far button</button>"#
        }
        "/same.html" => {
            r#"<!doctype html><title>Same site frame</title><button onclick="this.textContent = 'Same site clicked'">Same site button</button><span id=sl>Same site listener</span><script>document.getElementById('sl').addEventListener('click', (e) => { e.target.textContent = 'Same site listener ran'; });</script>"#
        }
        "/other.html" => "<!doctype html><title>Other frame page</title><p>the frame moved on</p>",
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn top_page(path: &str, site: &str, same: &str) -> Response {
    let html = match path.split('?').next().unwrap_or(path) {
        "/top.html" => format!(
            r#"<!doctype html><title>Shop</title><h1>Checkout</h1><button>Top button</button>
<iframe src="{site}/pay.html" title="Payment" width="420" height="220"></iframe>
<iframe src="{same}/same.html" title="Same site" width="300" height="80"></iframe>
<p>Below the frames.</p>"#
        ),
        "/covered.html" => format!(
            r#"<!doctype html><title>Covered</title>
<div style="position:relative"><iframe src="{site}/pay.html" title="Payment" width="420" height="220"></iframe>
<div id=banner style="position:absolute;left:0;top:0;width:440px;height:240px;background:#fff">Cookie banner</div></div>"#
        ),
        "/plain.html" => "<!doctype html><title>Plain</title><p>No frames here.</p>".to_string(),
        // A frame whose same-origin URL redirects to another site.
        "/redirected.html" => r#"<!doctype html><title>Redirected</title><iframe src="/go" title="Moved" width="420" height="220"></iframe>"#.to_string(),
        "/go" => {
            return Response::with(302, "text/plain", "moved").header("Location", &format!("{site}/pay.html"))
        }
        "/low.html" => format!(
            r#"<!doctype html><title>Low</title><div style="height:1500px">Spacer</div>
<iframe src="{site}/pay.html" title="Payment" width="420" height="220"></iframe>"#
        ),
        _ => return Response::not_found(),
    };
    Response::html(html)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let site = Site::start_on("127.0.0.2:0", |r: &Request| frame_page(&r.path));
        let same = Site::start(|r: &Request| frame_page(&r.path));
        let (s, m) = (
            format!("http://{}", site.addr),
            format!("http://{}", same.addr),
        );
        let top = Site::start(move |r: &Request| top_page(&r.path, &s, &m));
        // Confined where the machine allows it (forge's default), so the frames' second CDP
        // connection goes through the DevTools relay into Chromium's namespace.
        let b = Shared::start(
            "forge-browser frame tests",
            &[top.entry(), site.entry(), same.entry()],
            Confine::WhereAvailable,
        )?;
        Some(Fixture {
            b,
            top,
            site,
            _same: same,
        })
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

    /// The browser's targets of type `iframe` (seen from the session's tab).
    fn iframe_targets(&self, session: &str) -> Vec<String> {
        self.b.rt.block_on(async {
            let page = self
                .b
                .manager
                .active_page(session)
                .await
                .expect("session has a tab");
            let t = page
                .execute(GetTargetsParams::default())
                .await
                .expect("Target.getTargets");
            t.result
                .target_infos
                .into_iter()
                .filter(|t| t.r#type == "iframe")
                .map(|t| t.url)
                .collect()
        })
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

#[test]
fn an_out_of_process_frame_is_walked_clicked_and_filled() {
    let Some(f) = fixture() else { return };
    let s = "oopif";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/top.html")}),
    );
    // Site isolation is on: the 127.0.0.2 frame is its own target; the same-site one is not.
    let iframes = f.iframe_targets(s);
    let site = format!("http://{}", f.site.addr);
    assert!(
        iframes.iter().any(|u| u.starts_with(&site)),
        "the 127.0.0.2 frame must be out of process: {iframes:?}"
    );
    assert!(
        !iframes.iter().any(|u| u.contains("/same.html")),
        "the same-site frame stays in process: {iframes:?}"
    );
    assert!(
        obs.contains(&format!("f1: iframe \"Payment\" cross-origin {site}\n")),
        "{obs}"
    );
    assert!(!obs.contains("content not walked"), "{obs}");
    let pay = ref_of(&obs, "button \"Pay now\"");
    assert!(
        pay.starts_with("f1e"),
        "frame-qualified ref like a same-origin frame's: {pay}"
    );
    let name = ref_of(&obs, "textbox \"Card holder\"");
    assert!(name.starts_with("f1e"), "{name}");
    // In reading order: the frame's elements come after the top button, before the next frame.
    let at = |needle: &str| {
        obs.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {obs}"))
    };
    assert!(at("\"Top button\"") < at("\"Pay now\""), "{obs}");
    assert!(at("\"Pay now\"") < at("\"Same site button\""), "{obs}");
    assert!(obs.contains("[frame f1] "), "frame text: {obs}");
    assert!(obs.contains("unpaid"), "{obs}");
    // The far button is in the frame but out of the page's view.
    assert!(
        !obs.lines().any(|l| l.contains("button \"Far button\"")),
        "only in-view elements listed: {obs}"
    );

    // A JS click listener inside the frame makes its element interactive there too.
    let lis = ref_of(&obs, "clickable \"Listener in frame\"");
    assert!(lis.starts_with("f1e"), "{lis}");
    let ran = f.ok(s, "browser_click", json!({"ref": lis}));
    assert!(ran.contains("Listener ran"), "{ran}");

    let clicked = f.ok(s, "browser_click", json!({"ref": pay}));
    assert!(clicked.starts_with(&format!("clicked {pay}")), "{clicked}");
    assert!(
        clicked.contains("paid 1"),
        "the frame's button ran: {clicked}"
    );
    let again = f.ok(s, "browser_click", json!({"ref": pay}));
    assert!(again.contains("paid 2"), "refs stay valid: {again}");

    let filled = f.ok(
        s,
        "browser_fill",
        json!({"ref": name, "value": "Ada Lovelace"}),
    );
    assert!(
        filled.starts_with(&format!("filled {name} (12 chars)")),
        "{filled}"
    );
    assert!(
        filled.contains("value=\"Ada Lovelace\""),
        "the observation shows the frame field's value: {filled}"
    );
    assert!(
        filled.contains("typed:Ada Lovelace"),
        "the frame saw real input events: {filled}"
    );
}

#[test]
fn a_same_site_cross_origin_frame_is_walked_and_clicked() {
    let Some(f) = fixture() else { return };
    let s = "samesite";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/top.html")}),
    );
    assert!(
        obs.contains("f2: iframe \"Same site\" cross-origin http://127.0.0.1:"),
        "{obs}"
    );
    let b = ref_of(&obs, "button \"Same site button\"");
    assert!(b.starts_with("f2e"), "{b}");
    let clicked = f.ok(s, "browser_click", json!({"ref": b}));
    assert!(
        clicked.contains("button \"Same site clicked\""),
        "{clicked}"
    );
    let l = ref_of(&clicked, "clickable \"Same site listener\"");
    assert!(l.starts_with("f2e"), "{l}");
    let ran = f.ok(s, "browser_click", json!({"ref": l}));
    assert!(ran.contains("Same site listener ran"), "{ran}");
}

#[test]
fn a_frame_redirected_to_another_site_is_walked_not_called_unreachable() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "redirected",
        "browser_navigate",
        json!({"url": f.top.url("/redirected.html")}),
    );
    // Its URL is same-origin, but it went cross-origin: Chromium still gives it a window, so
    // it is not taken for a frame the engine does not expose.
    assert!(!obs.contains("not reachable"), "{obs}");
    assert!(obs.contains("iframe \"Moved\" cross-origin"), "{obs}");
    assert!(obs.contains("button \"Pay now\""), "{obs}");
}

#[test]
fn a_covered_frame_is_not_clicked_through() {
    let Some(f) = fixture() else { return };
    let s = "covered";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/covered.html")}),
    );
    let pay = ref_of(&obs, "button \"Pay now\"");
    let err = f
        .call(s, "browser_click", json!({"ref": pay}))
        .expect_err("a covered frame button must not be clicked");
    let msg = err.to_string();
    assert!(msg.contains("covers its centre"), "{msg}");
    assert!(msg.contains("div#banner"), "names the cover: {msg}");
    // browser_state walks the out-of-process frame (browser_extract reads the top document only).
    let st = f.ok(s, "browser_state", json!({}));
    assert!(st.contains("unpaid"), "the frame's text is observed: {st}");
    assert!(!st.contains("paid 1"), "{st}");
}

#[test]
fn a_frame_below_the_fold_is_scrolled_to_for_a_click() {
    let Some(f) = fixture() else { return };
    let s = "low";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/low.html")}),
    );
    assert!(
        !obs.lines().any(|l| l.contains("\"Pay now\"")),
        "below the fold, not listed as in view: {obs}"
    );
    let obs = f.ok(s, "browser_state", json!({"scroll": 1}));
    let pay = ref_of(&obs, "button \"Pay now\"");
    // Scroll back up: the click must bring the frame (and the button) into view itself.
    let up = f.ok(s, "browser_state", json!({"scroll": -1}));
    assert!(
        !up.lines().any(|l| l.contains("\"Pay now\"")),
        "back above the fold, not in view: {up}"
    );
    let clicked = f.ok(s, "browser_click", json!({"ref": pay}));
    assert!(clicked.contains("paid 1"), "{clicked}");
}

#[test]
fn a_ref_into_a_frame_that_went_away_is_stale() {
    let Some(f) = fixture() else { return };
    let s = "stale";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/top.html")}),
    );
    let pay = ref_of(&obs, "button \"Pay now\"");
    f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/plain.html")}),
    );
    let err = f
        .call(s, "browser_click", json!({"ref": pay}))
        .expect_err("old frame ref");
    assert!(err.to_string().contains("stale ref"), "{err}");
}

#[test]
fn keys_reach_the_frame_and_its_protected_fields_stay_protected() {
    let Some(f) = fixture() else { return };
    let s = "keys";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/top.html")}),
    );
    let name = ref_of(&obs, "textbox \"Card holder\"");
    let pin = ref_of(&obs, "textbox \"PIN\"");
    assert!(pin.starts_with("f1e"), "{pin}");
    assert!(
        obs.contains("type=password value=\"\" fill-protected"),
        "{obs}"
    );
    let pressed = f.ok(s, "browser_press", json!({"ref": name, "key": "z"}));
    assert!(
        pressed.contains("typed:z"),
        "the key reached the frame's field: {pressed}"
    );
    let err = f
        .call(s, "browser_fill", json!({"ref": pin, "value": "1234"}))
        .expect_err("a password field in a frame is protected");
    assert!(err.to_string().contains("sensitive field"), "{err}");
    let err = f
        .call(s, "browser_press", json!({"ref": pin, "key": "1"}))
        .expect_err("pressing keys into it is refused too");
    assert!(err.to_string().contains("sensitive field"), "{err}");
    // Not even a key to the field that already has focus inside the frame.
    let err = f
        .call(s, "browser_press", json!({"key": "2"}))
        .expect_err("focus still in the frame's password field");
    assert!(err.to_string().contains("type=password"), "{err}");
    let st = f.ok(s, "browser_state", json!({}));
    assert!(
        st.contains("type=password value=\"\" fill-protected"),
        "nothing was typed: {st}"
    );
}
