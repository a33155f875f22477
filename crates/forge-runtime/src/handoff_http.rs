//! The hand-off page's routes (`browser_handoff`, docs/browser.md "Hand-off to a person"),
//! served by both servers that can show it: the A2A server of `forge run` (a2a/live.rs) and
//! `forge mcp serve --transport http` (runner.rs, through forge-mcp's extra routes). One piece for
//! both: given the agent's browser manager, the server token (if any) and a request under
//! `/handoff/`, the response. Telling a person that they are needed (A2A `input-required`, an MCP
//! notification) is the hand-offs' observer's job, not the routes'.
//!
//! - `GET /handoff/t/{token}`: the one-time link. The first use trades the token for a visitor
//!   secret kept in an `HttpOnly`, `SameSite=Strict` cookie scoped to `/handoff/{id}/` and
//!   redirects there; any later use answers 410.
//! - `GET /handoff/{id}/` (the page: live view, controls, Done/Cancel), `GET /handoff/{id}/frames`,
//!   `POST /handoff/{id}/input` (`{"type": "click"|"move"|"wheel"|"key"|"text", ...}`),
//!   `POST /handoff/{id}/done` (`{"note": "..."}`), `POST /handoff/{id}/cancel`: the cookie's
//!   secret is required; POSTs must be JSON and, when they carry an `Origin`, come from this
//!   server's own origin. Without a server token the Host must name loopback here too.
//!
//! Also the pieces the live view shares (a2a/live.rs): [`mjpeg`], [`page`], [`text`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::Value;

use forge_browser::{BrowserManager, HandoffEnd, LiveInput, LiveTab};

pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Longest a frame stream stays open.
const STREAM_LIMIT: Duration = Duration::from_secs(3600);
/// A frame stream re-sends the last frame after this long without a new one (keeps it open
/// through proxies and shows a page that does not change).
const RESEND_AFTER: Duration = Duration::from_secs(10);
/// Largest JSON body of the hand-off's POSTs.
const MAX_POST: usize = 16 * 1024;
const COOKIE: &str = "forge_handoff";

/// Whether `path` is a hand-off route.
pub(crate) fn owns(path: &str) -> bool {
    path.starts_with("/handoff/")
}

/// The extra routes of `forge mcp serve --transport http`: the hand-off routes when the agent has
/// a browser (`manager`), then `watch` (the watch page), each with the server's `token`.
pub(crate) fn mcp_routes(
    manager: Option<Arc<BrowserManager>>,
    token: Option<String>,
    watch: Option<forge_mcp::ExtraRoutes>,
) -> Option<forge_mcp::ExtraRoutes> {
    let Some(manager) = manager else {
        return watch;
    };
    Some(Arc::new(move |req: Request<Incoming>| {
        let manager = manager.clone();
        let token = token.clone();
        let watch = watch.clone();
        Box::pin(async move {
            if owns(req.uri().path()) {
                return Ok(handle(Some(manager), token.as_deref(), req).await);
            }
            match watch {
                Some(w) => w(req).await,
                None => Err(req),
            }
        })
    }))
}

pub(crate) fn full(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

pub(crate) fn text(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    full(
        status,
        "text/plain; charset=utf-8",
        format!("{}\n", msg.into()),
    )
}

/// Whether the request's `Origin`, when it has one, is this server's own (`http://{Host}`).
fn same_origin(headers: &http::HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    !host.is_empty()
        && (origin.eq_ignore_ascii_case(&format!("http://{host}"))
            || origin.eq_ignore_ascii_case(&format!("https://{host}")))
}

fn cookie_secret(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Serve a hand-off route (see the module doc) with `manager`, the agent's browser (`None`: the
/// agent has none) and `token`, the server's bearer token if it has one.
pub(crate) async fn handle(
    manager: Option<Arc<BrowserManager>>,
    token: Option<&str>,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    // Hand-off routes: the one-time link replaces the bearer token, the Host rule stays.
    if token.is_none() && !forge_egress::inbound::host_is_loopback(req.headers()) {
        return text(
            StatusCode::FORBIDDEN,
            "this agent serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost",
        );
    }
    let Some(manager) = manager else {
        return text(StatusCode::NOT_FOUND, "this agent has no browser");
    };
    let rest = path.strip_prefix("/handoff/").unwrap_or("");
    if let Some(one_time) = rest.strip_prefix("t/") {
        if req.method() != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
        }
        return match manager.handoffs().redeem(one_time) {
            Ok(visit) => {
                let mut r = text(StatusCode::SEE_OTHER, "opening the hand-off");
                let h = r.headers_mut();
                if let Ok(v) = HeaderValue::from_str(&format!("/handoff/{}/", visit.id)) {
                    h.insert(header::LOCATION, v);
                }
                if let Ok(v) = HeaderValue::from_str(&format!(
                    "{COOKIE}={}; Path=/handoff/{}/; HttpOnly; SameSite=Strict",
                    visit.secret, visit.id
                )) {
                    h.insert(header::SET_COOKIE, v);
                }
                h.insert(
                    header::REFERRER_POLICY,
                    HeaderValue::from_static("no-referrer"),
                );
                r
            }
            Err(why) => text(StatusCode::GONE, why.to_string()),
        };
    }
    let (id, action) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(secret) = cookie_secret(req.headers()) else {
        return text(
            StatusCode::FORBIDDEN,
            "open the hand-off from its link in the task's status message (this browser has no hand-off cookie)",
        );
    };
    let tab = match manager.handoffs().visit(id, &secret) {
        Ok(t) => t,
        Err(why) => return text(StatusCode::FORBIDDEN, why.to_string()),
    };
    match (req.method().clone(), action) {
        (Method::GET, "") => handoff_page(&manager, id),
        (Method::GET, "frames") => {
            let handoffs = manager.handoffs().clone();
            let (id, secret) = (id.to_string(), secret.clone());
            mjpeg(tab, move || handoffs.visit(&id, &secret).is_ok())
        }
        (Method::POST, "input" | "done" | "cancel") => {
            if !same_origin(req.headers()) {
                return text(
                    StatusCode::FORBIDDEN,
                    "refused: a request from another origin",
                );
            }
            let json_body = req
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(';').next())
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"));
            if !json_body {
                return text(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send JSON with Content-Type: application/json",
                );
            }
            let action = action.to_string();
            let body = match Limited::new(req.into_body(), MAX_POST).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => {
                    return text(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("the body is larger than {MAX_POST} bytes"),
                    )
                }
            };
            let v: Value = match serde_json::from_slice(&body) {
                Ok(v) => v,
                Err(e) => {
                    return text(
                        StatusCode::BAD_REQUEST,
                        format!("the body is not JSON: {e}"),
                    )
                }
            };
            match action.as_str() {
                "input" => match input_of(&v) {
                    Ok(ev) => match tab.input(ev).await {
                        Ok(()) => full(StatusCode::OK, "application/json", "{\"ok\":true}"),
                        Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
                    },
                    Err(e) => text(StatusCode::BAD_REQUEST, e),
                },
                other => {
                    let end = if other == "done" {
                        HandoffEnd::Done(
                            v.get("note")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                        )
                    } else {
                        HandoffEnd::Cancelled
                    };
                    match manager.handoffs().finish(id, &secret, end) {
                        Ok(()) => full(StatusCode::OK, "application/json", "{\"ok\":true}"),
                        Err(why) => text(StatusCode::GONE, why.to_string()),
                    }
                }
            }
        }
        (_, "" | "frames" | "input" | "done" | "cancel") => {
            text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
        }
        _ => text(StatusCode::NOT_FOUND, "not found"),
    }
}

/// A person's input event from its JSON form.
fn input_of(v: &Value) -> Result<LiveInput, String> {
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("`{k}` must be a number"))
    };
    let point = || -> Result<(f64, f64, f64, f64), String> {
        Ok((num("x")?, num("y")?, num("frame_w")?, num("frame_h")?))
    };
    let s = |k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("`{k}` must be a string"))
    };
    match v.get("type").and_then(Value::as_str) {
        Some("click") => {
            let (x, y, frame_w, frame_h) = point()?;
            Ok(LiveInput::Click {
                x,
                y,
                frame_w,
                frame_h,
            })
        }
        Some("move") => {
            let (x, y, frame_w, frame_h) = point()?;
            Ok(LiveInput::Move {
                x,
                y,
                frame_w,
                frame_h,
            })
        }
        Some("wheel") => {
            let (x, y, frame_w, frame_h) = point()?;
            Ok(LiveInput::Wheel {
                x,
                y,
                frame_w,
                frame_h,
                dx: num("dx")?,
                dy: num("dy")?,
            })
        }
        Some("key") => Ok(LiveInput::Key(s("key")?)),
        Some("text") => Ok(LiveInput::Text(s("text")?)),
        _ => Err("`type` must be click, move, wheel, key or text".into()),
    }
}
/// Frames of `tab` as `multipart/x-mixed-replace` JPEG parts, while `alive()` and the client
/// reads; the screencast runs as long as this stream holds its receiver.
pub(crate) fn mjpeg(
    tab: Arc<LiveTab>,
    alive: impl Fn() -> bool + Send + Sync + 'static,
) -> Response<Body> {
    let rx = tab.subscribe();
    let deadline = tokio::time::Instant::now() + STREAM_LIMIT;
    let stream = futures::stream::unfold((rx, true), move |(mut rx, first)| {
        let alive = alive(); // checked once per part
        async move {
            if !alive || tokio::time::Instant::now() > deadline {
                return None;
            }
            if !first || rx.borrow().is_none() {
                // A timeout re-sends the last frame; a closed sender ends the stream.
                if let Ok(Err(_)) = tokio::time::timeout(RESEND_AFTER, rx.changed()).await {
                    return None;
                }
            }
            let frame = rx.borrow_and_update().clone();
            let part = match frame {
                Some(f) => {
                    let mut b = format!(
                        "--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n",
                        f.jpeg.len()
                    )
                    .into_bytes();
                    b.extend_from_slice(&f.jpeg);
                    b.extend_from_slice(b"\r\n");
                    b
                }
                None => Vec::new(),
            };
            Some((
                Ok::<_, Infallible>(Frame::data(Bytes::from(part))),
                (rx, false),
            ))
        }
    });
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("multipart/x-mixed-replace; boundary=frame"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

const STYLE: &str = "body{font:16px system-ui,sans-serif;margin:0 auto;padding:12px;max-width:1300px;color:#111}\
img{display:block;max-width:100%;height:auto;border:1px solid #888;margin:8px 0;cursor:crosshair;background:#eee;min-height:60px}\
img:focus{outline:3px solid #36c}form{display:flex;gap:8px;flex-wrap:wrap;align-items:center}\
input{font:inherit;padding:4px;min-width:16em}button{font:inherit;padding:4px 14px}";

/// A page with forge's style, `body`, and `script` (run under a per-response nonce).
pub(crate) fn page(title: &str, body: &str, script: Option<&str>) -> Response<Body> {
    let nonce = hex::encode(rand::random::<[u8; 16]>());
    let script = script
        .map(|s| format!("<script nonce=\"{nonce}\">{s}</script>"))
        .unwrap_or_default();
    let html = format!(
        "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content=\"width=device-width,initial-scale=1\"><title>{}</title><style nonce=\"{nonce}\">{STYLE}</style></head><body>{body}{script}</body></html>",
        escape(title)
    );
    let mut r = full(StatusCode::OK, "text/html; charset=utf-8", html);
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!(
        "default-src 'none'; img-src 'self'; connect-src 'self'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    )) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}

const HANDOFF_JS: &str = r#"
const img = document.getElementById('screen'), status = document.getElementById('status');
let frames = 0, queue = Promise.resolve();
img.addEventListener('load', () => { frames++; status.textContent = 'showing the tab live'; });
img.addEventListener('error', () => { status.textContent = 'the live view ended'; });
function post(path, body) {
  return fetch(path, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body), credentials: 'same-origin'});
}
function send(body) { queue = queue.then(() => post('input', body)).catch(() => {}); }
function at(e) {
  const r = img.getBoundingClientRect();
  return {x: (e.clientX - r.left) * img.naturalWidth / r.width, y: (e.clientY - r.top) * img.naturalHeight / r.height,
          frame_w: img.naturalWidth, frame_h: img.naturalHeight};
}
img.addEventListener('click', (e) => { img.focus(); if (img.naturalWidth) send(Object.assign({type: 'click'}, at(e))); });
img.addEventListener('wheel', (e) => { e.preventDefault(); if (img.naturalWidth) send(Object.assign({type: 'wheel', dx: e.deltaX, dy: e.deltaY}, at(e))); }, {passive: false});
img.addEventListener('keydown', (e) => {
  e.preventDefault();
  const plain = e.key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey;
  if (plain) { send({type: 'text', text: e.key}); return; }
  const mods = (e.ctrlKey ? 'Control+' : '') + (e.altKey ? 'Alt+' : '') + (e.metaKey ? 'Meta+' : '') + (e.shiftKey && e.key.length > 1 ? 'Shift+' : '');
  if (!['Control', 'Alt', 'Meta', 'Shift'].includes(e.key)) send({type: 'key', key: mods + e.key});
});
function finish(what, body) {
  queue.then(() => post(what, body)).then((r) => {
    status.textContent = r.ok ? (what === 'done' ? 'Done: the agent carries on. You can close this page.' : 'Cancelled: the agent was told. You can close this page.') : 'This hand-off has ended.';
    for (const b of document.querySelectorAll('button')) b.disabled = true;
    img.removeAttribute('src');
  });
}
document.getElementById('finish').addEventListener('submit', (e) => { e.preventDefault(); finish('done', {note: document.getElementById('note').value}); });
document.getElementById('cancel').addEventListener('click', () => finish('cancel', {}));
"#;

fn handoff_page(manager: &BrowserManager, id: &str) -> Response<Body> {
    let reason = manager.handoffs().reason(id).unwrap_or_default();
    let body = format!(
        "<h1>A person is needed</h1><p id=reason>{}</p>\
<p>The picture below is the agent's browser tab, live. Click it, scroll on it and type while it has the focus: your input goes to that tab. Press Done when you have finished.</p>\
<img id=screen src=\"frames\" alt=\"the agent's browser tab, live; click to focus it\" tabindex=0>\
<form id=finish><label for=note>Note for the agent (optional)</label><input id=note maxlength=1000 autocomplete=off>\
<button id=done type=submit>Done</button><button id=cancel type=button>Cancel</button></form>\
<p id=status role=status aria-live=polite>waiting for the first frame</p>",
        escape(&reason)
    );
    page("forge: a person is needed", &body, Some(HANDOFF_JS))
}
