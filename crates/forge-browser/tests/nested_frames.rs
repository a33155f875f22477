//! Frames nested inside cross-origin frames, for real: a page on 127.0.0.1 embeds a frame from
//! 127.0.0.2, which embeds a frame from 127.0.0.3 (an out-of-process frame inside an
//! out-of-process frame), which embeds a frame from 127.0.0.1 on another port (cross-origin to
//! its parent again, same site as the top page). Every level is walked by the observation and
//! driven by click, fill, select and extract, by ref and by selector with `frame`. All through
//! the real egress proxy and one real Chromium.

use std::sync::OnceLock;

use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::ToolError;
use serde_json::{json, Value};

struct Fixture {
    b: Shared,
    top: Site,
    mid: Site,
    inner: Site,
    deep: Site,
}

/// A frame document named `label`, embedding `child` (a URL) when given.
fn level(label: &str, child: Option<String>) -> Response {
    let frame = child
        .map(|c| {
            format!(r#"<iframe src="{c}" title="{label} child" width="560" height="330"></iframe>"#)
        })
        .unwrap_or_default();
    Response::html(format!(
        r#"<!doctype html><title>{label}</title><p id=words>{label} words here</p>
<button id=b onclick="this.textContent = '{label} pressed ' + (++window.n)">{label} button</button>
<label for=t>{label} name</label><input id=t>
<label for=s>{label} size</label><select id=s><option value=s>Small</option><option value=l>Large</option></select>
<p id=echo>echo:</p>
<script>window.n = 0; const e = document.getElementById('echo');
document.getElementById('t').addEventListener('input', (ev) => {{ e.textContent = 'echo:' + ev.target.value; }});
document.getElementById('s').addEventListener('change', (ev) => {{ e.textContent = 'chose:' + ev.target.value; }});</script>
{frame}"#
    ))
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let deep = Site::start(|r: &Request| match r.path.as_str() {
            "/deep.html" => level("Deep", None),
            _ => Response::not_found(),
        });
        let d = deep.url("/deep.html");
        let inner = Site::start_on("127.0.0.3:0", move |r: &Request| match r.path.as_str() {
            "/inner.html" => level("Inner", Some(d.clone())),
            _ => Response::not_found(),
        });
        let i = inner.url("/inner.html");
        let mid = Site::start_on("127.0.0.2:0", move |r: &Request| match r.path.as_str() {
            "/mid.html" => level("Mid", Some(i.clone())),
            _ => Response::not_found(),
        });
        let m = mid.url("/mid.html");
        let top = Site::start(move |r: &Request| match r.path.as_str() {
            "/top.html" => level("Top", Some(m.clone())),
            _ => Response::not_found(),
        });
        let b = Shared::start(
            "forge-browser nested frame tests",
            &[top.entry(), mid.entry(), inner.entry(), deep.entry()],
            Confine::WhereAvailable,
        )?;
        Some(Fixture {
            b,
            top,
            mid,
            inner,
            deep,
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

    /// The URLs of the browser's `iframe` targets (out-of-process frames).
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

/// The frame line's name (`f1f1`) of the frame titled `title`.
fn frame_of(obs: &str, title: &str) -> String {
    obs.lines()
        .find(|l| l.contains(": iframe") && l.contains(title))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no frame line {title:?}:\n{obs}"))
        .trim()
        .to_string()
}

#[test]
fn frames_nested_in_out_of_process_frames_are_walked_and_driven() {
    let Some(f) = fixture() else { return };
    let s = "nested";
    let obs = f.ok(
        s,
        "browser_navigate",
        json!({"url": f.top.url("/top.html")}),
    );
    // The 127.0.0.2 and 127.0.0.3 frames, and the 127.0.0.1 frame inside the 127.0.0.3 one, are
    // each their own target: three levels of out-of-process frames.
    let targets = f.iframe_targets(s);
    for site in [&f.mid, &f.inner, &f.deep] {
        let origin = format!("http://{}", site.addr);
        assert!(
            targets.iter().any(|u| u.starts_with(&origin)),
            "{origin} must be an out-of-process frame: {targets:?}"
        );
    }
    assert!(!obs.contains("content not walked"), "{obs}");
    // Frame lines: each level named by the path of frame numbers, with its real origin.
    let (mid, inner, deep) = (
        frame_of(&obs, "\"Top child\""),
        frame_of(&obs, "\"Mid child\""),
        frame_of(&obs, "\"Inner child\""),
    );
    assert_eq!(mid, "f1", "{obs}");
    assert_eq!(inner, "f1f1", "{obs}");
    assert_eq!(deep, "f1f1f1", "{obs}");
    assert!(
        obs.contains(&format!(
            "f1f1: iframe \"Mid child\" cross-origin http://{}",
            f.inner.addr
        )),
        "{obs}"
    );
    // Each level's controls, with refs carrying the frame path, in reading order.
    for (label, path) in [
        ("Top", ""),
        ("Mid", "f1"),
        ("Inner", "f1f1"),
        ("Deep", "f1f1f1"),
    ] {
        let r = ref_of(&obs, &format!("button \"{label} button\""));
        assert!(
            r.starts_with(&format!("{path}e")),
            "{label}'s button ref {r} must start with {path}e:\n{obs}"
        );
    }
    let at = |needle: &str| {
        obs.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {obs}"))
    };
    assert!(at("\"Mid button\"") < at("\"Inner button\""), "{obs}");
    assert!(at("\"Inner button\"") < at("\"Deep button\""), "{obs}");
    let deep_text = obs
        .find("[frame f1f1f1] ")
        .unwrap_or_else(|| panic!("{obs}"));
    assert!(
        obs[deep_text..].contains("f1f1f1e1 p \"Deep words here\""),
        "the frame's text blocks carry frame refs: {obs}"
    );

    // Click, fill and select by ref, three out-of-process frames deep.
    let deep_btn = ref_of(&obs, "button \"Deep button\"");
    let out = f.ok(s, "browser_click", json!({"ref": deep_btn}));
    assert!(out.starts_with(&format!("clicked {deep_btn}")), "{out}");
    assert!(
        out.contains("Deep pressed 1"),
        "the deep frame's button ran: {out}"
    );
    assert!(!out.contains("Inner pressed"), "{out}");
    let inner_btn = ref_of(&out, "\"Inner button\"");
    let out = f.ok(s, "browser_click", json!({"ref": inner_btn}));
    assert!(out.contains("Inner pressed 1"), "{out}");

    let inner_name = ref_of(&out, "textbox \"Inner name\"");
    assert!(inner_name.starts_with("f1f1e"), "{inner_name}");
    let out = f.ok(
        s,
        "browser_fill",
        json!({"ref": inner_name, "value": "Grace"}),
    );
    assert!(
        out.starts_with(&format!("filled {inner_name} (5 chars)")),
        "{out}"
    );
    assert!(
        out.contains("echo:Grace"),
        "the inner frame saw real input: {out}"
    );

    let deep_size = ref_of(&out, "\"Deep size\"");
    let out = f.ok(
        s,
        "browser_select",
        json!({"ref": deep_size, "option": "Large"}),
    );
    assert!(out.contains("selected=\"Large\""), "{out}");
    assert!(
        out.contains("chose:l"),
        "the deep frame saw the change: {out}"
    );

    // Extract and selectors with a nested frame's name.
    let text = f.ok(s, "browser_extract", json!({"frame": inner}));
    assert!(text.contains("Inner words here"), "{text}");
    assert!(!text.contains("Mid words here"), "only that frame: {text}");
    let html = f.ok(
        s,
        "browser_extract",
        json!({"frame": deep, "mode": "html", "selector": "#words"}),
    );
    assert!(html.contains("Deep words here"), "{html}");
    let out = f.ok(s, "browser_click", json!({"selector": "#b", "frame": deep}));
    assert!(out.contains("Deep pressed 2"), "{out}");
    let out = f.ok(s, "browser_click", json!({"selector": "#b", "frame": mid}));
    assert!(out.contains("Mid pressed 1"), "{out}");
    let err = f.call(s, "browser_extract", json!({"frame": "f1f1f9"}));
    assert!(err.is_err(), "a nested frame that is not there: {err:?}");
}
