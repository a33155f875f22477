//! The watch page (`/ui`) served by `forge run`'s A2A server (and `forge mcp serve --transport
//! http`): the tasks, live and recent, and per task its timeline of model turns and tool calls,
//! its egress decisions, screenshots and files, its result and whether the audit log verifies.
//! Its egress ledger is also served as HAR 1.2 at `GET /tasks/{id}/egress`.
//!
//! - ui/tap.rs: the per-task record of audit events (and tool arguments) the page reads.
//! - ui/ledger.rs: the `task_egress` audit event, one per egress decision made for a task.
//! - ui/har.rs: the ledger as HAR 1.2 (also `forge audit har`).
//! - ui/assets/: the page (HTML, CSS, JS), compiled into the binary; no CDN.
//!
//! Access (the same rules as the API, [`forge_egress::inbound`]): with a server token, every
//! `/ui` route but the stylesheet needs it, as `Authorization: Bearer` or as the `forge_token`
//! cookie that `/ui?token=…` or the login form sets (`HttpOnly; SameSite=Strict; Path=/`; the
//! URL is then cleaned by a redirect); without one, the `Host` must name loopback. A request a
//! browser sends from a page of another origin is refused (403) either way. Data routes answer
//! JSON; the event stream is Server-Sent Events, at most [`tap::MAX_WATCHERS`] at once, with a
//! comment line every [`HEARTBEAT`].

pub(crate) mod har;
pub(crate) mod ledger;
pub(crate) mod tap;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};

use crate::agent_loop::LoopEvent;
use crate::audit::AuditLog;

pub use har::{har_from_audit, HarError};

type Body = BoxBody<Bytes, Infallible>;

/// The cookie holding the server token.
pub(crate) const COOKIE: &str = "forge_token";
/// Interval of the event stream's comment lines.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(15);

const INDEX_HTML: &str = include_str!("ui/assets/index.html");
const LOGIN_HTML: &str = include_str!("ui/assets/login.html");
const APP_JS: &str = include_str!("ui/assets/app.js");
const APP_CSS: &str = include_str!("ui/assets/app.css");

/// The page's CSP: everything from this origin only, no inline script or style, no framing.
const CSP: &str = "default-src 'self'; img-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// What the watch page shows, from the server that serves it: the A2A task store, or an MCP
/// host's sessions.
pub(crate) trait WatchSource: Send + Sync {
    /// The audit log (its tap holds every task's events).
    fn audit(&self) -> &AuditLog;
    /// One row per task, most recent first: `id`, `state`, `prompt`, `createdMs`, `updated`,
    /// `durationMs`, `steps`, `replica`, `status` (the last status text).
    fn rows(&self) -> Vec<Value>;
    /// The row of one task plus `result` (the result object, once ended) and `artifacts`
    /// (`[{name, url, mimeType}]`, files served by the artifact route).
    fn task(&self, id: &str) -> Option<Value>;
}

/// The watch page of `forge mcp serve --transport http`: one row per MCP session (or `forge tool`
/// run) the audit log has events of; no prompt, no result, no files (MCP has no task objects).
pub(crate) struct McpSessions(pub AuditLog);

impl McpSessions {
    fn row(&self, id: &str) -> Option<Value> {
        let t = self.0.tap().events(id)?;
        let calls = t
            .events
            .iter()
            .filter(|e| {
                matches!(
                    e.get("event").and_then(Value::as_str),
                    Some("tool_exec" | "mcp_tool_call")
                )
            })
            .count();
        let time = |e: Option<&Value>| {
            e.and_then(|e| e.get("time"))
                .cloned()
                .unwrap_or(Value::Null)
        };
        Some(json!({
            "id": id,
            "state": "session",
            "final": false,
            "prompt": "MCP session",
            "status": format!("{calls} tool calls"),
            "started": time(t.events.first()),
            "updated": time(t.events.last()),
            "durationMs": null,
            "steps": calls,
            "replica": "this server",
        }))
    }
}

impl WatchSource for McpSessions {
    fn audit(&self) -> &AuditLog {
        &self.0
    }

    fn rows(&self) -> Vec<Value> {
        self.0
            .tap()
            .task_ids()
            .iter()
            .filter_map(|id| self.row(id))
            .collect()
    }

    fn task(&self, id: &str) -> Option<Value> {
        let mut v = self.row(id)?;
        v["result"] = Value::Null;
        v["artifacts"] = json!([]);
        Some(v)
    }
}

/// The watch page's routes for an MCP HTTP server (forge-mcp's extra routes).
pub(crate) fn mcp_routes(audit: AuditLog, token: Option<String>) -> forge_mcp::ExtraRoutes {
    let source: Arc<dyn WatchSource> = Arc::new(McpSessions(audit));
    Arc::new(move |req| {
        let source = source.clone();
        let token = token.clone();
        Box::pin(async move { handle(source, token.as_deref(), req).await })
    })
}

/// Record a progress event of the agent loop for the page (tool arguments redacted, then the
/// audit scrubber), never in the log file.
pub(crate) fn record_progress(audit: &AuditLog, task_id: &str, ev: &LoopEvent) {
    match ev {
        LoopEvent::ToolStart {
            call_id,
            name,
            arguments,
        } => audit.watch_only(
            task_id,
            "tool_start",
            json!({"tool": name, "call_id": call_id, "arguments": redact_arguments(name, arguments)}),
        ),
        LoopEvent::Thought(t) => audit.watch_only(
            task_id,
            "thought",
            json!({"text": t.chars().take(4000).collect::<String>()}),
        ),
        LoopEvent::ModelCall { .. } | LoopEvent::ToolEnd { .. } => {
            // The audit log's llm_call and tool_exec carry these, with durations.
        }
    }
}

/// Longest argument string shown (the rest is counted).
const MAX_ARGUMENT_CHARS: usize = 2000;

/// Argument members whose names suggest a credential, and what a fill or type tool types, are
/// replaced: forge cannot tell from the arguments whether the field was a sensitive one.
pub(crate) fn redact_arguments(tool: &str, args: &Value) -> Value {
    fn secret_key(k: &str) -> bool {
        let k = k.to_ascii_lowercase();
        [
            "password",
            "passwd",
            "secret",
            "token",
            "apikey",
            "api_key",
            "auth",
            "credential",
            "cookie",
            "otp",
            "cvv",
            "card",
        ]
        .iter()
        .any(|w| k.contains(w))
    }
    fn walk(v: &mut Value, typed: bool) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    let typed_value = typed && matches!(k.as_str(), "text" | "value" | "values");
                    if secret_key(k) || typed_value {
                        let n = match &*x {
                            Value::String(s) => s.chars().count(),
                            other => other.to_string().chars().count(),
                        };
                        *x = json!(format!("[redacted: {n} chars]"));
                    } else {
                        walk(x, typed);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, typed)),
            // Long values (a file's content) are shortened: the page shows calls, not payloads.
            Value::String(s) if s.chars().count() > MAX_ARGUMENT_CHARS => {
                let n = s.chars().count();
                let head: String = s.chars().take(MAX_ARGUMENT_CHARS).collect();
                *s = format!("{head}… [{} more chars]", n - MAX_ARGUMENT_CHARS);
            }
            _ => {}
        }
    }
    let typed = tool.contains("fill") || tool.contains("type") || tool.contains("press");
    let mut out = args.clone();
    walk(&mut out, typed);
    out
}

fn full(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

fn json_response(status: StatusCode, v: &Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}

fn see_other(location: &'static str, cookie: Option<String>) -> Response<Body> {
    let mut r = full(StatusCode::SEE_OTHER, "text/plain", "see /ui\n");
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    if let Some(c) = cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        r.headers_mut().insert(header::SET_COOKIE, c);
    }
    r
}

/// Why a request may not use the page; `html` picks the login page over JSON for a 401.
fn refusal(token: Option<&str>, headers: &HeaderMap, html: bool) -> Option<Response<Body>> {
    if forge_egress::inbound::origin_is_foreign(headers) {
        return Some(json_response(
            StatusCode::FORBIDDEN,
            &json!({"error": "refused: the request comes from a page of another origin; open the watch page itself"}),
        ));
    }
    match token {
        None if !forge_egress::inbound::host_is_loopback(headers) => Some(json_response(
            StatusCode::FORBIDDEN,
            &json!({"error": "this agent serves loopback clients without a token: the Host header must be 127.0.0.1, [::1] or localhost"}),
        )),
        None => None,
        Some(t) => {
            if forge_egress::inbound::bearer_matches(headers, t)
                || forge_egress::inbound::cookie_matches(headers, COOKIE, t)
            {
                return None;
            }
            let mut r = if html {
                full(
                    StatusCode::UNAUTHORIZED,
                    "text/html; charset=utf-8",
                    LOGIN_HTML,
                )
            } else {
                json_response(
                    StatusCode::UNAUTHORIZED,
                    &json!({"error": "the server token is required: open /ui?token=<token> once (the token is in .forge/runtime.token), or send Authorization: Bearer <token>"}),
                )
            };
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Some(r)
        }
    }
}

/// Whether `req` is the artifact route's and carries the watch page's cookie with `token`
/// (screenshots and files inline in the page); the route's other rules still apply.
pub(crate) fn artifact_cookie_ok(headers: &HeaderMap, token: &str) -> bool {
    !forge_egress::inbound::origin_is_foreign(headers)
        && forge_egress::inbound::cookie_matches(headers, COOKIE, token)
}

fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/")
}

/// The value of query parameter `name` of `query`.
fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    url::form_urlencoded::parse(query?.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

fn is_ui_path(path: &str) -> bool {
    path == "/ui"
        || path.starts_with("/ui/")
        || (path.starts_with("/tasks/") && path.ends_with("/egress"))
}

/// Serve `req` when it is one of the page's routes; `None` for any other path.
pub(crate) async fn handle(
    source: Arc<dyn WatchSource>,
    token: Option<&str>,
    req: Request<Incoming>,
) -> Result<Response<Body>, Request<Incoming>> {
    let path = req.uri().path().to_string();
    if !is_ui_path(&path) {
        return Err(req);
    }
    Ok(route(source, token, req, &path).await)
}

async fn route(
    source: Arc<dyn WatchSource>,
    token: Option<&str>,
    req: Request<Incoming>,
    path: &str,
) -> Response<Body> {
    let method = req.method().clone();
    let headers = req.headers().clone();
    // The stylesheet holds no data: the login page uses it too.
    if path == "/ui/app.css" && method == Method::GET {
        return full(StatusCode::OK, "text/css; charset=utf-8", APP_CSS);
    }
    if path == "/ui/login" {
        if method != Method::POST {
            return full(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "POST the login form\n",
            );
        }
        if let Some(r) = refusal(None, &headers, true).filter(|_| token.is_none()) {
            return r;
        }
        if forge_egress::inbound::origin_is_foreign(&headers) {
            return json_response(
                StatusCode::FORBIDDEN,
                &json!({"error": "refused: the login form was posted from another origin"}),
            );
        }
        let Some(expected) = token else {
            return see_other("/ui", None);
        };
        let body = match Limited::new(req.into_body(), 4096).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return full(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "text/plain",
                    "login form too large\n",
                )
            }
        };
        let given = url::form_urlencoded::parse(&body)
            .find(|(k, _)| k == "token")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_default();
        let mut h = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&format!("Bearer {given}")) {
            h.insert(header::AUTHORIZATION, v);
        }
        if forge_egress::inbound::bearer_matches(&h, expected) {
            return see_other("/ui", Some(set_cookie(expected)));
        }
        return full(
            StatusCode::UNAUTHORIZED,
            "text/html; charset=utf-8",
            LOGIN_HTML,
        );
    }
    // `/ui?token=…`: checked like a bearer token, kept in the cookie, then the URL is cleaned.
    if path == "/ui" && method == Method::GET {
        if let (Some(expected), Some(given)) = (token, query_param(req.uri().query(), "token")) {
            if forge_egress::inbound::origin_is_foreign(&headers) {
                return json_response(
                    StatusCode::FORBIDDEN,
                    &json!({"error": "refused: the request comes from a page of another origin"}),
                );
            }
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {given}")) {
                h.insert(header::AUTHORIZATION, v);
            }
            if forge_egress::inbound::bearer_matches(&h, expected) {
                return see_other("/ui", Some(set_cookie(expected)));
            }
            return full(
                StatusCode::UNAUTHORIZED,
                "text/html; charset=utf-8",
                LOGIN_HTML,
            );
        }
    }
    let html = path == "/ui" || path == "/ui/";
    if let Some(r) = refusal(token, &headers, html) {
        return r;
    }
    if method != Method::GET {
        return full(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "method not allowed\n",
        );
    }
    match path {
        "/ui" | "/ui/" => full(StatusCode::OK, "text/html; charset=utf-8", INDEX_HTML),
        "/ui/app.js" => full(StatusCode::OK, "text/javascript; charset=utf-8", APP_JS),
        "/ui/api/tasks" => json_response(StatusCode::OK, &json!({"tasks": source.rows()})),
        "/ui/api/events" => events(&source),
        p => {
            if let Some(id) = p.strip_prefix("/ui/api/tasks/") {
                return match detail(&source, id).await {
                    Some(v) => json_response(StatusCode::OK, &v),
                    None => json_response(
                        StatusCode::NOT_FOUND,
                        &json!({"error": format!("no task {id} is known here")}),
                    ),
                };
            }
            if let Some(id) = p
                .strip_prefix("/tasks/")
                .and_then(|r| r.strip_suffix("/egress"))
            {
                if id.is_empty() || id.contains('/') {
                    return json_response(
                        StatusCode::NOT_FOUND,
                        &json!({"error": "the ledger is at /tasks/{task_id}/egress"}),
                    );
                }
                let Some(t) = source.audit().tap().events(id) else {
                    return json_response(
                        StatusCode::NOT_FOUND,
                        &json!({"error": format!("no task {id} is known here")}),
                    );
                };
                let doc = har::har(id, &t.events);
                let mut r = full(StatusCode::OK, "application/json", doc.to_string());
                let name = format!(
                    "attachment; filename=\"forge-egress-{}.har\"",
                    id.chars()
                        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
                        .collect::<String>()
                );
                if let Ok(v) = HeaderValue::from_str(&name) {
                    r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
                }
                return r;
            }
            json_response(
                StatusCode::NOT_FOUND,
                &json!({"error": "not found: the watch page is at /ui"}),
            )
        }
    }
}

/// One task for the page: its row, result and files, its recorded events and the audit check.
async fn detail(source: &Arc<dyn WatchSource>, id: &str) -> Option<Value> {
    let tap = source.audit().tap().events(id);
    let mut v = match (source.task(id), &tap) {
        (Some(v), _) => v,
        (None, Some(_)) => json!({"id": id, "state": "unknown"}),
        (None, None) => return None,
    };
    let tap = tap.unwrap_or_default();
    v["events"] = json!(tap.events);
    v["eventsDropped"] = json!(tap.dropped);
    v["audit"] = audit_check(source.audit(), &tap.events).await;
    v["egressHar"] = json!(format!("/tasks/{id}/egress"));
    Some(v)
}

/// Whether the audit file verifies (forge audit verify's checker) and holds this task's events
/// unchanged (each one's hash is the hash of the line with its sequence number). A check resumes
/// after the lines the last one verified once their bytes hash as they did then
/// ([`crate::audit::verify_file_since`]), so a view costs a hash of the file, not a parse of it.
async fn audit_check(audit: &AuditLog, events: &[Value]) -> Value {
    let Some(path) = audit.file().map(std::path::Path::to_path_buf) else {
        return json!({"verified": null, "why": "the audit log is not a file (it goes to stderr); run with --audit-file to check it here"});
    };
    let wanted: std::collections::HashMap<u64, String> = events
        .iter()
        .filter_map(|e| {
            Some((
                e.get("seq")?.as_u64()?,
                e.get("hash")?.as_str()?.to_string(),
            ))
        })
        .collect();
    let shown = path.display().to_string();
    let since = audit.verified();
    let checked = tokio::task::spawn_blocking(move || {
        // A poisoned lock only means a check panicked; it had taken the record first, so none
        // is left and the next check is a whole one.
        let mut since = since.lock().unwrap_or_else(|p| p.into_inner());
        let c = crate::audit::verify_file_since(&path, &wanted, &mut since);
        tracing::debug!("audit file check: {} line(s) parsed", c.parsed);
        (c.result, c.found, wanted.len())
    })
    .await;
    match checked {
        Ok((Ok(s), found, of)) => {
            json!({"verified": found == of, "file": shown, "lines": s.events, "taskEventsInLog": found, "taskEvents": of, "why": if found == of { String::new() } else { format!("{} of this task's {of} events are not in the log as recorded", of - found) }})
        }
        Ok((Err(e), _, of)) => {
            json!({"verified": false, "file": shown, "taskEvents": of, "why": e.to_string()})
        }
        Err(e) => {
            json!({"verified": null, "file": shown, "why": format!("the check did not run: {e}")})
        }
    }
}

/// The page's event stream: `event: task` with the id of each task that changed.
fn events(source: &Arc<dyn WatchSource>) -> Response<Body> {
    let tap = source.audit().tap().clone();
    let Ok(permit) = tap.watchers.clone().try_acquire_owned() else {
        let mut r = json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": format!("{} watch pages are open already; close one or retry", tap::MAX_WATCHERS)}),
        );
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return r;
    };
    let rx = tap.subscribe();
    let first = futures::stream::once(async {
        Ok::<_, Infallible>(Frame::data(Bytes::from_static(
            b"retry: 2000\nevent: hello\ndata: {}\n\n",
        )))
    });
    let rest = futures::stream::unfold((rx, permit), |(mut rx, permit)| async move {
        let line = match tokio::time::timeout(HEARTBEAT, rx.recv()).await {
            Ok(Ok(id)) => format!("event: task\ndata: {}\n\n", json!({"id": id})),
            // Missed some: the page reloads everything.
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {
                "event: resync\ndata: {}\n\n".to_string()
            }
            Ok(Err(tokio::sync::broadcast::error::RecvError::Closed)) => return None,
            Err(_) => ": heartbeat\n\n".to_string(),
        };
        Some((Ok(Frame::data(Bytes::from(line))), (rx, permit)))
    });
    use futures::StreamExt;
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(first.chain(rest))));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_and_credential_members_are_redacted() {
        let a = redact_arguments("browser_fill", &json!({"ref": "e3", "text": "hunter22"}));
        assert_eq!(a, json!({"ref": "e3", "text": "[redacted: 8 chars]"}));
        let b = redact_arguments(
            "http_request",
            &json!({"url": "https://x.test/", "headers": {"Authorization": "Bearer abc"}, "text": "kept"}),
        );
        assert_eq!(b["headers"]["Authorization"], "[redacted: 10 chars]");
        assert_eq!(b["text"], "kept");
        assert_eq!(b["url"], "https://x.test/");
        let long = redact_arguments("file_create", &json!({"content": "y".repeat(2010)}));
        assert!(long["content"]
            .as_str()
            .is_some_and(|c| c.ends_with("… [10 more chars]")));
    }
}
