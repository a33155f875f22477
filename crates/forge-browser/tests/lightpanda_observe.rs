//! The observation on Lightpanda for what the engines bench (`benches/engines.rs`) found on the
//! shared corpus: an open shadow root failed the whole observation (Lightpanda's ShadowRoot has no
//! `elementFromPoint`), its synthetic boxes called links "clipped by its container", and with
//! nothing known to be in view every long page's list filled the budget; a same-origin frame
//! whose document Lightpanda does not expose was called cross-origin. The real Lightpanda
//! binary, confined where the machine allows, through the real egress proxy, loopback pages.
// Printing is allowed here (test output: skip notices and diagnostics).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use forge_browser::EngineKind;
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use serde_json::json;

fn page(path: &str) -> Response {
    let html = match path {
        // The corpus's playwright/shadow.html, in short: the body hosts an open shadow root.
        "/shadow.html" => r#"<!doctype html><title>Shadow page</title><script>
window.addEventListener('DOMContentLoaded', () => {
  const root = document.body.attachShadow({mode: 'open'});
  const h1 = document.createElement('h1');
  h1.textContent = 'Inside the shadow root';
  const b = document.createElement('button');
  b.textContent = 'Shadow button';
  root.appendChild(h1);
  root.appendChild(b);
});
</script><body></body>"#
            .to_string(),
        // Links in a 20 px tall overflow-hidden box, then many more links.
        "/long.html" => {
            let mut s = String::from(
                "<!doctype html><title>Long page</title><h1>Long page</h1><div style=\"overflow:hidden;height:20px\">",
            );
            for i in 0..20 {
                s.push_str(&format!("<p><a href=\"/boxed/{i}\">Boxed link {i}</a></p>"));
            }
            s.push_str("</div>");
            for i in 0..300 {
                s.push_str(&format!("<p><a href=\"/far/{i}\">Far link {i}</a></p>"));
            }
            s
        }
        // A same-origin frame (the corpus's playwright/frames pages, in short).
        "/framed.html" => r#"<!doctype html><title>Framed page</title><p>Outer text.</p><iframe src="/inner.html" name="inner"></iframe>"#.to_string(),
        "/inner.html" => "<!doctype html><title>Inner</title><p>Inner frame text.</p>".to_string(),
        _ => return Response::not_found(),
    };
    Response::html(html)
}

#[test]
fn shadow_roots_long_pages_and_frames_observe_on_lightpanda() {
    let server = Site::start(|r: &Request| page(r.path.split('?').next().unwrap_or("")));
    let Some(b) = Shared::start_engine(
        "forge-browser lightpanda_observe",
        &[server.entry()],
        Confine::WhereAvailable,
        EngineKind::Lightpanda,
    ) else {
        return;
    };
    let ctx = b.context("lp-observe");

    // An open shadow root: its controls are listed, and the observation does not fail.
    let shadow = b
        .run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": server.url("/shadow.html")}),
        )
        .expect("observe a page with an open shadow root");
    assert!(shadow.contains("button \"Shadow button\""), "{shadow}");

    // A long page: a quarter of the budget listed, the rest counted. (Dropping the synthetic
    // boxes' "clipped by its container" is checked by render.rs's unit test: this page does not
    // make Lightpanda 1.0.2 claim it, the corpus's readability pages do.)
    let long = b
        .run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": server.url("/long.html")}),
        )
        .expect("navigate to the long page");
    assert!(long.contains("layout: none on this engine"), "{long}");
    assert!(long.contains("link \"Boxed link 0\""), "{long}");
    assert!(
        long.contains("more not listed (browser_state with a larger max_chars to see them)"),
        "{long}"
    );
    assert!(!long.contains("Far link 299"), "{long}");
    assert!(long.len() < 4500, "{} bytes:\n{long}", long.len());
    let all = b
        .run_tool(&ctx, "browser_state", json!({"max_chars": 40000}))
        .expect("state with room for every element");
    assert!(all.contains("link \"Far link 299\" -> /far/299"), "{all}");
    assert!(!all.contains("more not listed"), "{all}");

    // A same-origin frame is never called cross-origin: its content is read, or the observation
    // says its document is not reachable.
    let framed = b
        .run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": server.url("/framed.html")}),
        )
        .expect("navigate to the framed page");
    assert!(framed.contains("iframe \"inner\" same-origin"), "{framed}");
    assert!(!framed.contains("cross-origin"), "{framed}");
    assert!(
        framed.contains("Inner frame text.")
            || framed.contains("(its document is not reachable on this engine)"),
        "{framed}"
    );
    b.rt.block_on(b.manager.close_session("lp-observe"));
}
