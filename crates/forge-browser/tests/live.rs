//! The live view of a tab for real (Chromium through the real egress proxy, a loopback page):
//! no screencast runs while nobody watches; a watcher gets JPEG frames no wider than 1280 px;
//! a person's click and typing, given in frame coordinates, reach the page's field; when the
//! last watcher leaves the screencast stops and page changes make no frames.

use std::sync::OnceLock;
use std::time::Duration;

use forge_browser::{LiveInput, LiveTab};
use forge_testkit::browser::*;
use forge_testkit::site::{Response, Site};
use serde_json::json;

struct Fixture {
    b: Shared,
    server: Site,
}

/// A form with a field at a known place (left 100, top 100, 200 x 30 CSS px); Enter submits it.
const FORM: &str = r#"<!doctype html><html><head><title>Code</title>
<style>body{margin:0} #code{position:absolute;left:100px;top:100px;width:200px;height:30px;margin:0;border:1px solid #333;padding:0}</style>
</head><body><form action="/submit"><input id=code name=code aria-label="Code"></form></body></html>"#;

const ANIMATED: &str = r#"<!doctype html><html><head><title>Moving</title></head><body>
<p id=t>0</p><script>let n = 0; setInterval(() => { document.getElementById('t').textContent = ++n; }, 50);</script>
</body></html>"#;

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let server = Site::start(|r| {
            let path = r.path.split('?').next().unwrap_or("");
            match path {
                "/" => Response::html(FORM),
                "/moving" => Response::html(ANIMATED),
                "/submit" => Response::html("<title>Got it</title><p>thanks</p>"),
                _ => Response::not_found(),
            }
        });
        let b = Shared::start(
            "live view tests",
            &[format!("127.0.0.1:{}", server.addr.port())],
            Confine::WhereAvailable,
        )?;
        Some(Fixture { b, server })
    })
    .as_ref()
}

async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 10 s: {what}");
}

/// The next frame (after `rx` saw the current one), within 20 s.
async fn next_frame(
    rx: &mut tokio::sync::watch::Receiver<Option<std::sync::Arc<forge_browser::Frame>>>,
) -> std::sync::Arc<forge_browser::Frame> {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(f) = rx.borrow_and_update().clone() {
                return f;
            }
            rx.changed().await.expect("the live tab is alive");
        }
    })
    .await
    .expect("a frame within 20 s")
}

#[test]
fn a_watched_tab_streams_frames_takes_input_and_stops_when_nobody_watches() {
    let Some(f) = fixture() else { return };
    let base = format!("http://127.0.0.1:{}", f.server.addr.port());
    let ctx = f.b.context("live-1");
    f.b.run_tool(&ctx, "browser_navigate", json!({"url": format!("{base}/")}))
        .expect("navigate");
    let m = f.b.manager.clone();
    f.b.rt.block_on(async move {
        let starts0 = m.screencast_starts();
        let tab: std::sync::Arc<LiveTab> = m.live_tab("live-1").await.expect("a live tab");
        // Nobody watches: no screencast started, no frame arrived.
        assert_eq!(m.screencast_starts(), starts0);
        assert_eq!(tab.frames_received(), 0);
        assert!(!tab.is_casting());

        let mut rx = tab.subscribe();
        let frame = next_frame(&mut rx).await;
        assert_eq!(&frame.jpeg[..2], &[0xFF, 0xD8], "a JPEG");
        let (fw, fh) = frame.size;
        assert!(fw > 0 && fw <= 1280 && fh > 0, "frame size {fw}x{fh}");
        assert_eq!(m.screencast_starts(), starts0 + 1);
        let (vw, vh) = frame.viewport;
        assert!(vw > 0.0 && vh > 0.0);

        // A person clicks the field's middle (in frame pixels) and types a code, then Enter.
        let (x, y) = (200.0 / vw * f64::from(fw), 115.0 / vh * f64::from(fh));
        tab.input(LiveInput::Click {
            x,
            y,
            frame_w: f64::from(fw),
            frame_h: f64::from(fh),
        })
        .await
        .expect("click");
        tab.input(LiveInput::Text("731905".into()))
            .await
            .expect("type");
        tab.input(LiveInput::Key("Enter".into()))
            .await
            .expect("enter");
        // A point outside the frame is refused, not clamped.
        let err = tab
            .input(LiveInput::Click {
                x: f64::from(fw) + 10.0,
                y: 1.0,
                frame_w: f64::from(fw),
                frame_h: f64::from(fh),
            })
            .await
            .expect_err("outside the frame");
        assert!(err.to_string().contains("not inside"), "{err}");

        // The last watcher leaves: the screencast stops.
        drop(rx);
        wait_until("the screencast stops", || !tab.is_casting()).await;
    });
    // Enter's form submission is a navigation of its own: under load its request can reach the
    // server after the input calls returned, so wait for it (bounded) before reading the paths.
    for _ in 0..200 {
        let seen = f
            .server
            .paths
            .lock()
            .expect("paths")
            .iter()
            .any(|p| p.starts_with("/submit"));
        if seen {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let paths = f.server.paths.lock().expect("paths").clone();
    assert!(
        paths.iter().any(|p| p == "/submit?code=731905"),
        "the page's server saw the typed code: {paths:?}"
    );

    // Nobody watches: a page that changes twenty times a second makes no frames.
    let m = f.b.manager.clone();
    let tab =
        f.b.rt
            .block_on(async { m.live_tab("live-1").await.expect("tab") });
    let (frames, starts) = (tab.frames_received(), m.screencast_starts());
    f.b.run_tool(
        &ctx,
        "browser_navigate",
        json!({"url": format!("{base}/moving")}),
    )
    .expect("navigate");
    f.b.run_tool(&ctx, "browser_state", json!({"wait_for": {"ms": 1000}}))
        .expect("a second of the moving page");
    let tab =
        f.b.rt
            .block_on(async { m.live_tab("live-1").await.expect("tab") });
    assert_eq!(tab.frames_received(), frames, "no frames while unwatched");
    assert_eq!(
        m.screencast_starts(),
        starts,
        "no screencast while unwatched"
    );
    // Watched again, the moving page streams several frames.
    f.b.rt.block_on(async {
        let mut rx = tab.subscribe();
        let a = next_frame(&mut rx).await.seq;
        rx.changed().await.expect("alive");
        let b = next_frame(&mut rx).await.seq;
        assert!(b > a, "frames keep coming: {a} then {b}");
    });
    assert_eq!(m.screencast_starts(), starts + 1);
}

#[test]
fn browser_handoff_fails_at_once_where_no_server_shows_the_page() {
    let Some(f) = fixture() else { return };
    let ctx = f.b.context("live-2");
    // No page yet: nothing to hand over.
    let err =
        f.b.run_tool(
            &ctx,
            "browser_handoff",
            json!({"reason": "solve the CAPTCHA"}),
        )
        .expect_err("no page");
    assert!(err.to_string().contains("browser_navigate first"), "{err}");
    let base = format!("http://127.0.0.1:{}", f.server.addr.port());
    f.b.run_tool(&ctx, "browser_navigate", json!({"url": format!("{base}/")}))
        .expect("navigate");
    // A manager nobody serves hand-off pages for (no observer): a clear error, no wait.
    let err =
        f.b.run_tool(
            &ctx,
            "browser_handoff",
            json!({"reason": "solve the CAPTCHA"}),
        )
        .expect_err("nobody can be reached");
    assert!(
        err.to_string()
            .contains("no server shows hand-off pages here"),
        "{err}"
    );
    assert_eq!(f.b.manager.handoffs().waiting(), 0);
    let err =
        f.b.run_tool(&ctx, "browser_handoff", json!({"reason": "  "}))
            .expect_err("a reason is needed");
    assert!(err.to_string().contains("give `reason`"), "{err}");
}
