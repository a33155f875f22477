//! The live view and the hand-off page of `forge run` (issue 24, points 2 and 3).
//!
//! Routes (all served from the binary; no external asset):
//! - `GET /ui/tasks/{id}/live`: a read-only page showing the task's current tab live;
//!   `GET /ui/tasks/{id}/live/frames`: the frames as `multipart/x-mixed-replace` JPEG (an `<img>`
//!   shows it without script). Same rules as the API: without a server token the Host must name
//!   loopback, with one the bearer token must match.
//! - `GET /handoff/t/{token}`: the one-time link of a hand-off (`browser_handoff`). The first use
//!   trades the token for a visitor secret kept in an `HttpOnly`, `SameSite=Strict` cookie scoped
//!   to `/handoff/{id}/` and redirects there; any later use answers 410.
//! - `GET /handoff/{id}/` (the page: live view, controls, Done/Cancel), `GET /handoff/{id}/frames`,
//!   `POST /handoff/{id}/input` (`{"type": "click"|"move"|"wheel"|"key"|"text", ...}`),
//!   `POST /handoff/{id}/done` (`{"note": "..."}`), `POST /handoff/{id}/cancel`: the cookie's
//!   secret is required; POSTs must be JSON and, when they carry an `Origin`, come from this
//!   server's own origin. Without a server token the Host must name loopback here too.
//!
//! [`attach`] makes the task store the hand-offs' observer: a hand-off puts its task in A2A
//! `input-required` with the link in the status message, and back to `working` when it ends; the
//! audit log gets `handoff_start` and `handoff_end` (the hand-off id, never the token).

use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};

use forge_browser::{BrowserManager, HandoffEnd, HandoffEvent, LiveInput, LiveTab};

use super::store::{lock, State, TaskStore};
use super::wire::agent_message;
use crate::audit::{events, rfc3339_now};

type Body = BoxBody<Bytes, Infallible>;

/// Longest a frame stream stays open.
const STREAM_LIMIT: Duration = Duration::from_secs(3600);
/// A frame stream re-sends the last frame after this long without a new one (keeps it open
/// through proxies and shows a page that does not change).
const RESEND_AFTER: Duration = Duration::from_secs(10);
/// Largest JSON body of the hand-off's POSTs.
const MAX_POST: usize = 16 * 1024;
const COOKIE: &str = "forge_handoff";

/// Whether `path` is one of this module's routes.
pub(super) fn owns(path: &str) -> bool {
    path.starts_with("/handoff/")
        || (path.starts_with("/ui/tasks/")
            && (path.ends_with("/live") || path.ends_with("/live/frames")))
}

/// Make `store` the observer of its agent's hand-offs (no-op for an agent without a browser).
pub(super) fn attach(store: &Arc<TaskStore>) {
    let Some(manager) = manager(store) else {
        return;
    };
    let weak: Weak<TaskStore> = Arc::downgrade(store);
    manager
        .handoffs()
        .set_observer(Arc::new(move |ev: &HandoffEvent<'_>| {
            let Some(store) = weak.upgrade() else {
                return false;
            };
            on_event(&store, ev)
        }));
}

/// The context id (the browser session key) and base URL of task `task`, if the store has it.
fn task_view(store: &TaskStore, task: &str) -> Option<(String, String)> {
    lock(&store.inner)
        .tasks
        .get(task)
        .map(|e| (e.context_id.clone(), e.base_url.clone()))
}

fn is_final(store: &TaskStore, task: &str) -> bool {
    lock(&store.inner)
        .tasks
        .get(task)
        .is_none_or(|e| e.state.is_final())
}

/// Put unfinished task `task` in `state` with a status message (`text` and `data` parts).
/// False when the task is unknown or already ended.
fn publish_status(store: &TaskStore, task: &str, state: State, text: &str, data: Value) -> bool {
    let mut shown = false;
    store.publish(task, |e| {
        if e.state.is_final() {
            return vec![];
        }
        shown = true;
        e.state = state;
        e.status_message = Some(agent_message(
            task,
            &e.context_id,
            vec![
                json!({"kind": "text", "text": text}),
                json!({"kind": "data", "data": data}),
            ],
        ));
        e.status_time = rfc3339_now();
        let mut ev = TaskStore::status_event(task, e, false);
        ev["metadata"] =
            json!({"forge": e.status_message.as_ref().map(|m| m["parts"][1]["data"].clone())});
        vec![ev]
    });
    shown
}

fn manager(store: &TaskStore) -> Option<Arc<BrowserManager>> {
    store.agent.sessions.as_ref().and_then(|s| s.browser())
}

fn on_event(store: &TaskStore, ev: &HandoffEvent<'_>) -> bool {
    match ev {
        HandoffEvent::Opened {
            id,
            task_id,
            reason,
            path,
            timeout,
        } => {
            let Some(task) = task_id else { return false };
            let Some((_, base)) = task_view(store, task) else {
                return false;
            };
            let url = format!("{base}{path}");
            let minutes = timeout.as_secs().div_ceil(60);
            let text = format!(
                "A person is needed: {reason}. Open {url} within {minutes} min (the link works once) to see the browser tab live, act in it, and press Done."
            );
            let data = json!({"event": "handoff", "handoffId": id, "url": url, "reason": reason, "expiresInSeconds": timeout.as_secs()});
            if !publish_status(store, task, State::InputRequired, &text, data) {
                return false;
            }
            store.agent.audit.emit(
                Some(task),
                events::HANDOFF_START,
                json!({"handoff": id, "reason": reason, "timeout_s": timeout.as_secs()}),
            );
            true
        }
        HandoffEvent::Closed {
            id,
            task_id,
            end,
            opened,
            duration,
        } => {
            let Some(task) = task_id else { return true };
            let by_person = matches!(end, HandoffEnd::Done(_) | HandoffEnd::Cancelled);
            let text = format!("The hand-off ended: {}", end.as_str());
            publish_status(
                store,
                task,
                State::Working,
                &text,
                json!({"event": "handoff_end", "handoffId": id, "outcome": end.as_str()}),
            );
            store.agent.audit.emit(
                Some(task),
                events::HANDOFF_END,
                json!({
                    "handoff": id,
                    "outcome": end.as_str(),
                    "finished_by": if by_person { json!(id) } else { Value::Null },
                    "opened": opened,
                    "duration_ms": duration.as_millis() as u64,
                }),
            );
            true
        }
        _ => false,
    }
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn text(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    full(
        status,
        "text/plain; charset=utf-8",
        format!("{}\n", msg.into()),
    )
}

/// The API's rule: without a server token the Host must be loopback; with one the bearer token
/// must match, or the watch page's cookie with it (the page links the live view; same origin).
fn api_refusal(token: Option<&str>, headers: &http::HeaderMap) -> Option<Response<Body>> {
    match token {
        None if !forge_egress::inbound::host_is_loopback(headers) => Some(text(
            StatusCode::FORBIDDEN,
            "this agent serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost",
        )),
        Some(t)
            if !forge_egress::inbound::bearer_matches(headers, t)
                && !crate::ui::artifact_cookie_ok(headers, t) =>
        {
            let mut r = text(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required: send Authorization: Bearer <token> with the token from .forge/runtime.token",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Some(r)
        }
        _ => None,
    }
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

/// Serve one of this module's routes.
pub(super) async fn handle(
    store: &Arc<TaskStore>,
    token: Option<&str>,
    req: Request<Incoming>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/ui/tasks/") {
        if req.method() != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
        }
        if let Some(r) = api_refusal(token, req.headers()) {
            return r;
        }
        let (task, frames) = match rest.strip_suffix("/live/frames") {
            Some(t) => (t, true),
            None => (rest.strip_suffix("/live").unwrap_or(""), false),
        };
        return watch(store, task, frames).await;
    }
    // Hand-off routes: the one-time link replaces the bearer token, the Host rule stays.
    if token.is_none() && !forge_egress::inbound::host_is_loopback(req.headers()) {
        return text(
            StatusCode::FORBIDDEN,
            "this agent serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost",
        );
    }
    let Some(manager) = manager(store) else {
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
        (Method::GET, "") => handoff_page(store, &manager, id),
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

/// The watcher's page or frames of task `task`.
async fn watch(store: &Arc<TaskStore>, task: &str, frames: bool) -> Response<Body> {
    if task.is_empty() || task.contains('/') {
        return text(StatusCode::NOT_FOUND, "not found");
    }
    let Some((context, _)) = task_view(store, task) else {
        return text(StatusCode::NOT_FOUND, "no such task on this server");
    };
    let Some(manager) = manager(store) else {
        return text(StatusCode::NOT_FOUND, "this agent has no browser");
    };
    if !frames {
        return page(
            "forge: live view",
            &format!(
                "<h1>Task {} (live)</h1><p>The agent's browser tab as it is now. This view is read-only.</p><img id=screen src=\"live/frames\" alt=\"the task's browser tab, live\">",
                escape(task)
            ),
            None,
        );
    }
    let Some(tab) = manager.live_tab(&context).await else {
        return text(StatusCode::NOT_FOUND, "the task has no open browser tab");
    };
    let store = Arc::downgrade(store);
    let task = task.to_string();
    mjpeg(tab, move || {
        store.upgrade().is_some_and(|s| !is_final(&s, &task))
    })
}

/// Frames of `tab` as `multipart/x-mixed-replace` JPEG parts, while `alive()` and the client
/// reads; the screencast runs as long as this stream holds its receiver.
fn mjpeg(tab: Arc<LiveTab>, alive: impl Fn() -> bool + Send + Sync + 'static) -> Response<Body> {
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

fn escape(s: &str) -> String {
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
fn page(title: &str, body: &str, script: Option<&str>) -> Response<Body> {
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

fn handoff_page(store: &TaskStore, manager: &BrowserManager, id: &str) -> Response<Body> {
    let _ = store;
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
