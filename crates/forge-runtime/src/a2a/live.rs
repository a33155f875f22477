//! The live view and the hand-off page of `forge run` (issue 24, points 2 and 3).
//!
//! Routes (all served from the binary; no external asset):
//! - `GET /ui/tasks/{id}/live`: a read-only page showing the task's current tab live;
//!   `GET /ui/tasks/{id}/live/frames`: the frames as `multipart/x-mixed-replace` JPEG (an `<img>`
//!   shows it without script). Same rules as the API: without a server token the Host must name
//!   loopback, with one the bearer token must match.
//! - `/handoff/...`: the hand-off page's routes, served by crate::handoff_http (shared with
//!   `forge mcp serve --transport http`).
//!
//! [`attach`] makes the task store the hand-offs' observer: a hand-off puts its task in A2A
//! `input-required` with the link in the status message, and back to `working` when it ends; the
//! audit log gets `handoff_start` and `handoff_end` (the hand-off id, never the token).

use std::sync::{Arc, Weak};

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{json, Value};

use forge_browser::{BrowserManager, HandoffEnd, HandoffEvent};

use super::store::{lock, State, TaskStore};
use super::wire::agent_message;
use crate::audit::{events, rfc3339_now};
use crate::handoff_http::{escape, mjpeg, page, text, Body};

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
            ..
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
            ..
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
    crate::handoff_http::handle(manager(store), token, req).await
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
