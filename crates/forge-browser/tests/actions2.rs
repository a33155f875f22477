//! Actions, round 2 (issue 21): the pointer's approach against a jQuery-UI-1.12-style
//! autocomplete that replays a stale hover, clicks aimed outside nested controls, drags that
//! reorder sortable lists both ways and grab-only handles moved `by` an offset, HTML5
//! drag-and-drop that starts every time, long drags, and type-aware fills of date, time and
//! colour inputs. Real Chromium through the real egress proxy; the pages are the widget
//! benchmark's own (`benches/widgets/`), served from loopback. One Chromium is shared by the
//! tests in this file; each test uses its own session key (its own browser context).

use std::path::PathBuf;
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

/// A page of `benches/widgets/` (html, js, svg), or 404.
fn page(path: &str) -> Response {
    let rel = path
        .split('?')
        .next()
        .unwrap_or(path)
        .trim_start_matches('/');
    if rel.is_empty() || rel.contains('/') || rel.contains("..") {
        return Response::not_found();
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/widgets");
    let Ok(body) = std::fs::read(dir.join(rel)) else {
        return Response::not_found();
    };
    let ct = match rel.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript",
        "svg" => "image/svg+xml",
        _ => "application/octet-stream",
    };
    Response::bytes(200, ct, body)
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r: &Request| page(&r.path));
        let b = Shared::start(
            "forge-browser actions (round 2) tests",
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

    fn open(&self, session: &str, page: &str) -> String {
        self.ok(
            session,
            "browser_navigate",
            json!({"url": self.server.url(&format!("/{page}"))}),
        )
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

    /// The page's own verdict (`benchVerdict()`, from trusted events only).
    fn verdict(&self, session: &str) -> String {
        self.eval(session, "benchVerdict()")
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The centre of the first element matching `sel` (viewport px), read in the page.
    fn centre(&self, session: &str, sel: &str) -> (f64, f64) {
        let c = self.eval(
            session,
            &format!(
                "(() => {{ const r = document.querySelector({}).getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()",
                json!(sel)
            ),
        );
        (c[0].as_f64().expect("x"), c[1].as_f64().expect("y"))
    }

    /// A bare CDP click: one jump to (x, y), press, release (the control case).
    fn jump_click(&self, session: &str, (x, y): (f64, f64)) {
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

/// The ref on the first observation line that contains `needle`.
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
fn autocomplete_replaying_a_stale_hover_still_gets_the_clicked_item() {
    let Some(f) = fixture() else { return };
    let s = "replay";
    f.open(s, "autocomplete-replay.html");
    // Control: the pointer rests where item 1 will appear (on the Remember checkbox), the menu
    // opens under it, and a one-jump click on item 3 selects item 1 (the jump's mousemove
    // replays the stale hover), so the page really behaves like jQuery UI 1.12.
    f.ok(s, "browser_click", json!({"selector": "#rem"}));
    f.ok(
        s,
        "browser_fill",
        json!({"selector": "#country", "value": "ge"}),
    );
    let third = f.centre(s, "#menu li:nth-child(3)");
    f.jump_click(s, third);
    let chosen = f.eval(s, "document.getElementById('country').value");
    assert_eq!(
        chosen,
        json!("Georgia"),
        "the control click: {}",
        f.eval(s, "eventLog()")
    );

    for i in 0..10 {
        // Back to where item 1 appears (the checkbox), then the menu opens under the pointer.
        f.ok(s, "browser_click", json!({"selector": "#rem"}));
        let obs = f.ok(
            s,
            "browser_fill",
            json!({"selector": "#country", "value": if i % 2 == 0 { "ge" } else { "Ge" }}),
        );
        let item = ref_of(&obs, "\"Algeria\"");
        let obs = f.ok(s, "browser_click", json!({"ref": item}));
        let chosen = f.eval(s, "document.getElementById('country').value");
        assert_eq!(
            chosen,
            json!("Algeria"),
            "round {i}: {}\nevents: {}",
            status(&obs),
            f.eval(s, "eventLog()")
        );
    }
    // Remember was toggled 11 times: ticked.
    assert_eq!(f.verdict(s), "solved");
}

#[test]
fn a_header_click_sorts_instead_of_focusing_its_nested_filter_box() {
    let Some(f) = fixture() else { return };
    let s = "header-filter";
    let obs = f.open(s, "header-filter.html");
    // Control: the header's centre is inside its filter box (a click there would focus it).
    let hit = f.eval(
        s,
        "(() => { const h = document.querySelectorAll('.col')[1]; const r = h.getBoundingClientRect(); const e = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); return e.tagName; })()",
    );
    assert_eq!(hit, json!("INPUT"), "the centre is on the filter box");
    let age = f.eval(s, "(() => { const h = document.querySelectorAll('.col')[1]; h.id = 'agecol'; return h.id; })()");
    assert_eq!(age, json!("agecol"));
    let obs2 = f.ok(s, "browser_click", json!({"selector": "#agecol"}));
    assert_eq!(f.verdict(s), "solved", "{}\n{obs}", status(&obs2));
    let focused = f.eval(s, "document.activeElement.tagName");
    assert_ne!(focused, json!("INPUT"), "the filter box was not focused");
    assert!(obs2.contains("sorted by Age ascending"), "{obs2}");
}

/// The ref of the element line that ends with the name `name` (`e4 clickable "Alpha"`).
fn item_ref(obs: &str, name: &str) -> String {
    let tail = format!(" \"{name}\"");
    obs.lines()
        .map(str::trim)
        .find(|l| l.starts_with('e') && l.ends_with(&tail))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no element line for {name:?} in:\n{obs}"))
        .to_string()
}

#[test]
fn a_jquery_ui_like_sortable_reorders_down_and_up_and_says_how() {
    let Some(f) = fixture() else { return };
    let s = "sortable-both";
    let obs = f.open(s, "sortable-both.html");
    // Down: Alpha onto Delta (released past Delta's midpoint, moving down).
    let (a, d) = (item_ref(&obs, "Alpha"), item_ref(&obs, "Delta"));
    let obs = f.ok(s, "browser_drag", json!({"from": a, "to": d}));
    let order = f.eval(
        s,
        "[...document.querySelectorAll('#list li')].map((l) => l.textContent).join(',')",
    );
    assert_eq!(order, json!("Bravo,Charlie,Delta,Alpha,Echo"), "{obs}");
    assert!(
        status(&obs).contains("list order changed: the item moved from position 1 to 4 of 5"),
        "{}",
        status(&obs)
    );
    assert!(
        obs.contains("list order before: \"Alpha\", \"Bravo\", \"Charlie\", \"Delta\", \"Echo\"")
            && obs.contains(
                "list order after: \"Bravo\", \"Charlie\", \"Delta\", \"Alpha\", \"Echo\""
            ),
        "{obs}"
    );
    // The order's words are page text: inside the fence, not in forge's status line.
    assert!(!status(&obs).contains("Bravo"), "{}", status(&obs));
    // Up: Echo onto the first item.
    let (e, b) = (item_ref(&obs, "Echo"), item_ref(&obs, "Bravo"));
    let obs = f.ok(s, "browser_drag", json!({"from": e, "to": b}));
    assert_eq!(f.verdict(s), "solved", "{obs}");
    assert!(
        status(&obs).contains("from position 5 to 1 of 5"),
        "{}",
        status(&obs)
    );
    // A drag onto itself changes nothing, and says so.
    let c = item_ref(&obs, "Charlie");
    let obs = f.ok(
        s,
        "browser_drag",
        json!({"from": c, "by": {"x": 0, "y": 2}}),
    );
    assert!(
        status(&obs).contains("list order unchanged (5 items)"),
        "{}",
        status(&obs)
    );
}

#[test]
fn a_sortablejs_like_html5_list_reorders_on_twenty_drags_in_a_row() {
    let Some(f) = fixture() else { return };
    let s = "sortable-html5";
    f.open(s, "sortable-html5.html");
    for i in 0..20 {
        // Alternate: the first item to the bottom, then the last item back to the top.
        let before = f.eval(
            s,
            "[...document.querySelectorAll('#list li')].map((l) => l.textContent)",
        );
        let names: Vec<String> = before
            .as_array()
            .expect("names")
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect();
        let obs = f.ok(s, "browser_state", json!({}));
        let (from, to, want) = if i % 2 == 0 {
            let mut w = names[1..].to_vec();
            w.push(names[0].clone());
            (&names[0], &names[names.len() - 1], w)
        } else {
            let mut w = vec![names[names.len() - 1].clone()];
            w.extend_from_slice(&names[..names.len() - 1]);
            (&names[names.len() - 1], &names[0], w)
        };
        let obs = f.ok(
            s,
            "browser_drag",
            json!({"from": item_ref(&obs, from), "to": item_ref(&obs, to)}),
        );
        assert!(
            status(&obs).contains("HTML5 drag-and-drop"),
            "{i}: {}",
            status(&obs)
        );
        let after = f.eval(
            s,
            "[...document.querySelectorAll('#list li')].map((l) => l.textContent)",
        );
        assert_eq!(after, json!(want), "drag {i}: {}", status(&obs));
    }
}

#[test]
fn date_time_and_colour_inputs_are_set_exactly_and_bad_formats_refused() {
    let Some(f) = fixture() else { return };
    let s = "typed";
    let obs = f.open(s, "typed-fields.html");
    let field = |obs: &str, label: &str| ref_of(obs, &format!("\"{label}\""));
    // A malformed date is refused before anything changes, naming the expected format.
    let d = field(&obs, "Event date");
    match f.call(s, "browser_fill", json!({"ref": d, "value": "06/03/1961"})) {
        Err(ToolError::InvalidInput(m)) => {
            assert!(m.contains("yyyy-mm-dd") && m.contains("date field"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.eval(s, "document.getElementById('date').value"),
        json!("")
    );
    let cases = [
        ("Event date", "2025-04-14", "date", "2025-04-14"),
        ("Start time", "09:30", "time", "09:30"),
        ("Reminder", "2025-04-13 18:00", "dtl", "2025-04-13T18:00"),
        ("Billing month", "2025-04", "month", "2025-04"),
        ("Sprint week", "2025-W16", "week", "2025-W16"),
        ("Label colour", "#1E90FF", "color", "#1e90ff"),
    ];
    let mut obs = obs;
    for (label, value, id, want) in cases {
        let r = field(&obs, label);
        obs = f.ok(s, "browser_fill", json!({"ref": r, "value": value}));
        assert!(
            status(&obs).contains(&format!("the page reads back {want}")),
            "{label}: {}",
            status(&obs)
        );
        assert_eq!(
            f.eval(s, &format!("document.getElementById('{id}').value")),
            json!(want),
            "{label}"
        );
    }
    assert_eq!(f.verdict(s), "solved", "{obs}");
    // A value the field cannot hold (a date the month does not have) is refused too.
    let d = field(&obs, "Event date");
    match f.call(s, "browser_fill", json!({"ref": d, "value": "2025-02-30"})) {
        Err(ToolError::InvalidInput(m)) => assert!(m.contains("yyyy-mm-dd"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.eval(s, "document.getElementById('date').value"),
        json!("2025-04-14")
    );
}

#[test]
fn a_drag_longer_than_the_viewport_scrolls_on_the_way() {
    let Some(f) = fixture() else { return };
    let want: Vec<String> = (2..=40)
        .map(|i| format!("Item {i}"))
        .chain(["Item 1".to_string()])
        .collect();
    // The page's own auto-scroll (pointer held at the edge), then a page that has none (the
    // mouse wheel).
    for (s, page) in [
        ("long-auto", "sortable-long.html"),
        ("long-wheel", "sortable-long.html?wheel"),
    ] {
        // Item 1's ref from the first observation, Item 40's after scrolling down to it (a ref
        // stays valid while its element is on the page).
        let obs = f.open(s, page);
        let from = item_ref(&obs, "Item 1");
        let obs = f.ok(s, "browser_state", json!({"scroll": 3}));
        let to = item_ref(&obs, "Item 40");
        let obs = f.ok(s, "browser_drag", json!({"from": from, "to": to}));
        assert!(
            status(&obs).contains("scrolling the page on the way"),
            "{s}: {}",
            status(&obs)
        );
        let order = f.eval(
            s,
            "[...document.querySelectorAll('#list li')].map((l) => l.textContent)",
        );
        assert_eq!(order, json!(want), "{s}: {}", status(&obs));
        assert_eq!(f.verdict(s), "solved", "{s}");
        assert!(
            status(&obs).contains("from position 1 to 40 of 40"),
            "{s}: {}",
            status(&obs)
        );
    }
}

#[test]
fn long_drags_scroll_inner_boxes_and_native_drags_on_the_way() {
    let Some(f) = fixture() else { return };
    let items: Vec<String> = (1..=40).map(|i| format!("Item {i}")).collect();
    let want: Vec<String> = items[1..35]
        .iter()
        .chain([&items[0]])
        .chain(&items[35..])
        .cloned()
        .collect();
    // A mouse-driven sortable in an inner scroll box (its own auto-scroll at the box's edge, then
    // one without: the wheel or forge scrolls the box); a native HTML5 list longer than the
    // window, and the same in an inner box (forge scrolls, as a browser does in a native drag).
    for (s, page, mode) in [
        (
            "box-auto",
            "sortable-box.html",
            "mouse, scrolling the page on the way",
        ),
        (
            "box-wheel",
            "sortable-box.html?wheel",
            "mouse, scrolling the page on the way",
        ),
        (
            "html5-long",
            "html5-long.html",
            "HTML5 drag-and-drop, scrolling on the way",
        ),
        (
            "html5-box",
            "html5-long.html?box",
            "HTML5 drag-and-drop, scrolling on the way",
        ),
    ] {
        let obs = f.open(s, page);
        let from = item_ref(&obs, "Item 1");
        let obs = f.ok(
            s,
            "browser_drag",
            json!({"from": from, "to": "#list li:nth-child(35)"}),
        );
        assert!(status(&obs).contains(mode), "{s}: {}", status(&obs));
        let order = f.eval(
            s,
            "[...document.querySelectorAll('#list li')].map((l) => l.textContent)",
        );
        assert_eq!(order, json!(want), "{s}: {}", status(&obs));
        assert_eq!(f.verdict(s), "solved", "{s}");
    }
}

#[test]
fn a_grip_dragged_by_an_offset_reports_its_container_resized() {
    let Some(f) = fixture() else { return };
    let s = "grip";
    let obs = f.open(s, "resize.html");
    let grip = ref_of(&obs, "\"Drag to resize\"");
    let obs = f.ok(
        s,
        "browser_drag",
        json!({"from": grip, "by": {"x": 240, "y": 0}}),
    );
    assert_eq!(f.verdict(s), "solved", "{obs}");
    assert!(
        status(&obs).contains("its container resized from 202x152 to 442x152 px"),
        "{}",
        status(&obs)
    );
}
