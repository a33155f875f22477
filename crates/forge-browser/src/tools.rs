//! The eleven `browser_*` tools (forge-tools [`Tool`]s) over a shared [`BrowserManager`].
//!
//! Every page-derived byte in a result is inside the untrusted-content fence; the line before
//! the fence is forge's own status (what happened), with no page text in it.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::network::{
    EventLoadingFailed, EventRequestWillBeSent, EventResponseReceived, ResourceType,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, ClientNavigationDisposition,
    EventFrameRequestedNavigation, EventFrameStartedLoading, EventFrameStoppedLoading,
    GetNavigationHistoryParams, NavigateParams, NavigateToHistoryEntryParams,
    Viewport as ClipViewport,
};
use chromiumoxide::Page;
use forge_tools::fence;
use forge_tools::{Tool, ToolContext, ToolError, ToolOutput};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::manager::{BrowserError, BrowserManager, Session, SessionState};
use crate::observe::{self, PageError};

/// Default observation budget in characters.
pub const DEFAULT_BUDGET: usize = 6000;
/// Largest `max_chars` accepted.
const MAX_BUDGET: usize = 40_000;

/// Options for the browser tools (from the agent's browser view).
#[derive(Debug, Clone, Default)]
pub struct BrowserToolOptions {
    /// Allow filling password, card and one-time-code fields (`allow_sensitive_fill`).
    pub allow_sensitive_fill: bool,
}

/// An error inside a browser action, turned into a [`ToolError`] at the end.
#[derive(Debug)]
pub enum ActionError {
    Browser(BrowserError),
    Timeout(Duration),
    Tool(ToolError),
}

impl From<BrowserError> for ActionError {
    fn from(e: BrowserError) -> Self {
        ActionError::Browser(e)
    }
}
impl From<ToolError> for ActionError {
    fn from(e: ToolError) -> Self {
        ActionError::Tool(e)
    }
}
impl From<PageError> for ActionError {
    fn from(e: PageError) -> Self {
        ActionError::Tool(ToolError::Failed(format!("browser: {e}")))
    }
}
impl From<chromiumoxide::error::CdpError> for ActionError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        ActionError::Browser(BrowserError::Cdp(e.to_string()))
    }
}
impl From<ActionError> for ToolError {
    fn from(e: ActionError) -> Self {
        match e {
            ActionError::Browser(b) => ToolError::Failed(b.to_string()),
            ActionError::Timeout(d) => ToolError::Timeout(d),
            ActionError::Tool(t) => t,
        }
    }
}

type R<T> = Result<T, ActionError>;

fn invalid(msg: impl Into<String>) -> ActionError {
    ActionError::Tool(ToolError::InvalidInput(msg.into()))
}
fn failed(msg: impl Into<String>) -> ActionError {
    ActionError::Tool(ToolError::Failed(msg.into()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Navigate,
    State,
    Click,
    Fill,
    Select,
    Press,
    Hover,
    Back,
    Tabs,
    Extract,
    Screenshot,
}

const ALL: [Kind; 11] = [
    Kind::Navigate,
    Kind::State,
    Kind::Click,
    Kind::Fill,
    Kind::Select,
    Kind::Press,
    Kind::Hover,
    Kind::Back,
    Kind::Tabs,
    Kind::Extract,
    Kind::Screenshot,
];

/// One browser tool.
pub struct BrowserTool {
    kind: Kind,
    manager: Arc<BrowserManager>,
    options: BrowserToolOptions,
}

/// The browser tools over `manager`, in a fixed order.
pub fn browser_tools(
    manager: Arc<BrowserManager>,
    options: BrowserToolOptions,
) -> Vec<Arc<dyn Tool>> {
    ALL.iter()
        .map(|k| {
            Arc::new(BrowserTool {
                kind: *k,
                manager: manager.clone(),
                options: options.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

fn target_props() -> serde_json::Map<String, Value> {
    let v = json!({
        "ref": {"type": "string", "description": "Element ref from the latest observation, e.g. \"e12\" or \"f1e3\"."},
        "selector": {"type": "string", "description": "CSS selector (first match in the top document), when there is no ref."}
    });
    v.as_object().cloned().unwrap_or_default()
}

fn schema(props: serde_json::Map<String, Value>, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

#[async_trait]
impl Tool for BrowserTool {
    fn name(&self) -> &str {
        match self.kind {
            Kind::Navigate => "browser_navigate",
            Kind::State => "browser_state",
            Kind::Click => "browser_click",
            Kind::Fill => "browser_fill",
            Kind::Select => "browser_select",
            Kind::Press => "browser_press",
            Kind::Hover => "browser_hover",
            Kind::Back => "browser_back",
            Kind::Tabs => "browser_tabs",
            Kind::Extract => "browser_extract",
            Kind::Screenshot => "browser_screenshot",
        }
    }

    fn description(&self) -> &str {
        match self.kind {
            Kind::Navigate => "Open a URL in the browser tab and return the final URL, HTTP status, title and an observation of the page (interactive elements with refs like e12, then page text).",
            Kind::State => "Observe the current page again (optionally scroll by pages, scroll an element into view, or use a larger character budget).",
            Kind::Click => "Click an element (by ref from the latest observation, or CSS selector) with a real mouse click; says whether it navigated, opened a tab or a dialog, and returns a fresh observation.",
            Kind::Fill => "Type a value into a text field (by ref or selector) with real key events, replacing its content; submit=true presses Enter afterwards. Password and payment fields are refused unless the agent allows them.",
            Kind::Select => "Choose an option (by label or value; a list for multi-selects) in a <select> element.",
            Kind::Press => "Press a key or chord (Enter, Tab, Escape, ArrowDown, Control+A, ...), optionally after focusing an element.",
            Kind::Hover => "Move the mouse over an element (menus, tooltips) and return a fresh observation.",
            Kind::Back => "Go back one page in the tab's history.",
            Kind::Tabs => "List the session's tabs, switch to one, open a new one or close one.",
            Kind::Extract => "Get the page's readable text (markdown-like), its links, or the HTML of one element (selector required), paginated with offset.",
            Kind::Screenshot => "Save a PNG screenshot (viewport, full page, or one element) to the agent's files; returns the file's name, path and size, not the image.",
        }
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        let mut req: Vec<&str> = Vec::new();
        match self.kind {
            Kind::Navigate => {
                p.insert(
                    "url".into(),
                    json!({"type": "string", "description": "http(s) URL to open."}),
                );
                p.insert("wait_for".into(), json!({"type": "string", "description": "Wait until this text appears or this CSS selector matches."}));
                p.insert("timeout_ms".into(), json!({"type": "integer", "minimum": 1, "description": "Navigation time limit in ms (default 45000)."}));
                req.push("url");
            }
            Kind::State => {
                p.insert("max_chars".into(), json!({"type": "integer", "minimum": 500, "maximum": MAX_BUDGET, "description": "Observation budget (default 6000)."}));
                p.insert("scroll".into(), json!({"type": "number", "description": "Scroll by this many pages first (negative is up)."}));
                p.insert(
                    "scroll_to".into(),
                    json!({"type": "string", "description": "Scroll this ref into view first."}),
                );
            }
            Kind::Click => {
                p = target_props();
                p.insert(
                    "button".into(),
                    json!({"type": "string", "enum": ["left", "right", "middle"]}),
                );
                p.insert(
                    "click_count".into(),
                    json!({"type": "integer", "minimum": 1, "maximum": 3}),
                );
                p.insert("force".into(), json!({"type": "boolean", "description": "Click even when another element covers the target's centre."}));
            }
            Kind::Fill => {
                p = target_props();
                p.insert("value".into(), json!({"type": "string"}));
                p.insert(
                    "submit".into(),
                    json!({"type": "boolean", "description": "Press Enter after typing."}),
                );
                req.push("value");
            }
            Kind::Select => {
                p = target_props();
                p.insert("option".into(), json!({"description": "Option label or value, or a list of them for a multi-select.", "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}));
                req.push("option");
            }
            Kind::Press => {
                p.insert("key".into(), json!({"type": "string", "description": "Key or chord: Enter, Tab, Escape, Backspace, ArrowDown, PageDown, Control+A, Shift+Tab, a single character."}));
                p.insert(
                    "ref".into(),
                    json!({"type": "string", "description": "Focus this element first."}),
                );
                req.push("key");
            }
            Kind::Hover => {
                p = target_props();
            }
            Kind::Back => {}
            Kind::Tabs => {
                p.insert("action".into(), json!({"type": "string", "enum": ["list", "switch", "close", "new"], "description": "Default list."}));
                p.insert("tab".into(), json!({"type": "string", "description": "Tab id (t2) for switch/close; close defaults to the active tab."}));
            }
            Kind::Extract => {
                p.insert("selector".into(), json!({"type": "string", "description": "Limit to this element (required for mode=html)."}));
                p.insert("mode".into(), json!({"type": "string", "enum": ["text", "links", "html"], "description": "Default text."}));
                p.insert("max_chars".into(), json!({"type": "integer", "minimum": 200, "maximum": MAX_BUDGET, "description": "Page size (default 8000)."}));
                p.insert("offset".into(), json!({"type": "integer", "minimum": 0, "description": "Start at this character (from a previous 'pass offset=N' line)."}));
            }
            Kind::Screenshot => {
                p.insert(
                    "selector".into(),
                    json!({"type": "string", "description": "Only this element."}),
                );
                p.insert("full_page".into(), json!({"type": "boolean"}));
                p.insert("filename".into(), json!({"type": "string", "description": "File name (a .png name inside the agent's files dir)."}));
            }
        }
        schema(p, &req)
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        if !input.is_object() && !input.is_null() {
            return Err(ToolError::InvalidInput(
                "the input must be a JSON object".into(),
            ));
        }
        let nav_kind = matches!(
            self.kind,
            Kind::Navigate | Kind::Back | Kind::Click | Kind::Fill | Kind::Press
        );
        let cfg = self.manager.config();
        let mut limit = match ctx.timeout {
            Some(t) => t.min(cfg.max_timeout),
            None if nav_kind => cfg.navigation_timeout,
            None => cfg.action_timeout,
        };
        if self.kind == Kind::Navigate {
            if let Some(ms) = input.get("timeout_ms").and_then(Value::as_u64) {
                limit = Duration::from_millis(ms).min(cfg.max_timeout);
            }
        }
        let session_key = if ctx.session_key.is_empty() {
            "default"
        } else {
            ctx.session_key.as_str()
        };
        let work = async {
            let session = self.manager.session(session_key).await?;
            let running = session.running.clone();
            self.manager
                .guard(&running, limit, self.run(&session, ctx, &input, limit))
                .await
        };
        tokio::select! {
            r = work => r.map_err(ToolError::from),
            _ = ctx.cancel.cancelled() => Err(ToolError::Cancelled),
        }
    }
}

/// A navigation watcher: subscribe before acting, then ask what happened.
struct NavWatch {
    started: futures::stream::BoxStream<'static, String>,
    stopped: futures::stream::BoxStream<'static, String>,
    responses: chromiumoxide::listeners::EventStream<EventResponseReceived>,
    failures: chromiumoxide::listeners::EventStream<EventLoadingFailed>,
    requests: chromiumoxide::listeners::EventStream<EventRequestWillBeSent>,
    frame: String,
}

#[derive(Default, Debug)]
struct NavOutcome {
    navigated: bool,
    finished: bool,
    status: Option<i64>,
    blocked: Option<String>,
    failed: Option<String>,
}

impl NavWatch {
    async fn new(page: &Page) -> R<Self> {
        let frame = observe::main_frame(page).await?.as_ref().to_string();
        // "r:<frame>" when a same-tab navigation is requested (fires while the click is being
        // handled), "s:<frame>" when loading starts.
        let requested = page
            .event_listener::<EventFrameRequestedNavigation>()
            .await?
            .filter(|e| {
                futures::future::ready(matches!(
                    e.disposition,
                    ClientNavigationDisposition::CurrentTab
                ))
            })
            .map(|e| format!("r:{}", e.frame_id.as_ref()));
        let loading = page
            .event_listener::<EventFrameStartedLoading>()
            .await?
            .map(|e| format!("s:{}", e.frame_id.as_ref()));
        let started = futures::stream::select(requested, loading).boxed();
        let stopped = page
            .event_listener::<EventFrameStoppedLoading>()
            .await?
            .map(|e| e.frame_id.as_ref().to_string())
            .boxed();
        Ok(Self {
            started,
            stopped,
            responses: page.event_listener::<EventResponseReceived>().await?,
            failures: page.event_listener::<EventLoadingFailed>().await?,
            requests: page.event_listener::<EventRequestWillBeSent>().await?,
            frame,
        })
    }

    /// Wait up to `quick` for a main-frame navigation to start; if it does, wait up to `limit`
    /// for it to finish, collecting the document's status and any egress refusal.
    async fn settle(
        &mut self,
        mgr: &BrowserManager,
        quick: Duration,
        limit: Duration,
    ) -> NavOutcome {
        let mut out = NavOutcome::default();
        let mut deadline = tokio::time::Instant::now() + quick;
        let mut requested = false;
        loop {
            tokio::select! {
                // Events already received come first, also when `quick` is zero.
                biased;
                f = self.started.next() => match f {
                    Some(f) if f == format!("s:{}", self.frame) => { out.navigated = true; break; }
                    Some(f) if f == format!("r:{}", self.frame) && !requested => {
                        // Requested: give the load up to 3 s to start (it may be cancelled).
                        requested = true;
                        deadline = tokio::time::Instant::now() + Duration::from_secs(3);
                    }
                    Some(_) => continue,
                    None => return out,
                },
                _ = tokio::time::sleep_until(deadline) => return out,
            }
        }
        let deadline = tokio::time::Instant::now() + limit;
        let mut urls: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        loop {
            tokio::select! {
                f = self.stopped.next() => match f {
                    Some(f) if f == self.frame => { out.finished = true; break; }
                    Some(_) => {}
                    None => break,
                },
                Some(r) = self.requests.next() => {
                    if r.r#type == Some(ResourceType::Document) && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str()) {
                        urls.insert(r.request_id.as_ref().to_string(), r.request.url.clone());
                    }
                }
                Some(r) = self.responses.next() => {
                    if r.r#type == ResourceType::Document && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str()) {
                        out.status = Some(r.response.status);
                        if let Some(code) = egress_reason(&r.response.headers) {
                            out.blocked = blocked_from_code(mgr, &r.response.url, r.response.status, &code);
                        }
                    }
                }
                Some(f) = self.failures.next() => {
                    if f.r#type == ResourceType::Document {
                        if let Some(url) = urls.get(f.request_id.as_ref()) {
                            let url = url.clone();
                            out.failed = Some(f.error_text.clone());
                            if let Some(b) = blocked_from_error(mgr, &url, &f.error_text) {
                                out.blocked = Some(b);
                            }
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        // Drain what already arrived (responses can come before stoppedLoading is read).
        while let Some(Some(r)) = self.responses.now_or_never_opt() {
            if r.r#type == ResourceType::Document
                && r.frame_id.as_ref().map(|f| f.as_ref()) == Some(self.frame.as_str())
            {
                out.status = Some(r.response.status);
                if let Some(code) = egress_reason(&r.response.headers) {
                    out.blocked = blocked_from_code(mgr, &r.response.url, r.response.status, &code);
                }
            }
        }
        out
    }
}

trait NowOrNever {
    type Out;
    fn now_or_never_opt(&mut self) -> Option<Option<Self::Out>>;
}
impl<S: futures::Stream + Unpin> NowOrNever for S {
    type Out = S::Item;
    fn now_or_never_opt(&mut self) -> Option<Option<S::Item>> {
        futures::FutureExt::now_or_never(self.next())
    }
}

/// The proxy's refusal reason from a response's headers, if it is one.
fn egress_reason(
    headers: &chromiumoxide::cdp::browser_protocol::network::Headers,
) -> Option<String> {
    let obj = headers.inner().as_object()?;
    obj.iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-forge-egress-reason"))
        .and_then(|(_, v)| v.as_str())
        .map(|s| s.trim().to_string())
}

/// The message for a plain-HTTP refusal (403 with the reason header carrying a short code), or
/// None when the header cannot be the proxy's. Any server can send that header itself (and over
/// HTTPS only the server can), so its text is never echoed: with a refusal log, only a refusal
/// the proxy recorded counts; without one, only the proxy's own codes.
fn blocked_from_code(mgr: &BrowserManager, url: &str, status: i64, code: &str) -> Option<String> {
    let parsed = url::Url::parse(url).ok()?;
    if status != 403 || parsed.scheme() != "http" {
        return None;
    }
    let bare = parsed.host_str()?.to_string();
    if let Some(log) = mgr.refusals() {
        return log
            .recent(&bare, Duration::from_secs(30))
            .map(|reason| strip_prefix(&reason));
    }
    match code {
        "blocked-host" => Some(format!("{bare} is not in this agent's allowlist")),
        "blocked-port" | "blocked-ip" => Some(format!(
            "{} was refused by the egress proxy ({code})",
            host_of(url)
        )),
        _ => None,
    }
}

fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        })
        .unwrap_or_else(|| url.to_string())
}

/// A blocked-by-egress message for a failed document load, when the failure is the proxy's refusal.
fn blocked_from_error(mgr: &BrowserManager, url: &str, error_text: &str) -> Option<String> {
    let host = host_of(url);
    let bare = url::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or(host.clone());
    if let Some(log) = mgr.refusals() {
        if let Some(reason) = log.recent(&bare, Duration::from_secs(30)) {
            return Some(strip_prefix(&reason));
        }
    }
    if error_text.contains("ERR_TUNNEL_CONNECTION_FAILED") {
        if mgr.refusals().is_some() {
            return None; // the proxy did not record a refusal: some other tunnel failure.
        }
        return Some(format!(
            "{bare} is not in this agent's allowlist (the egress proxy refused the connection)"
        ));
    }
    None
}

fn strip_prefix(reason: &str) -> String {
    reason
        .trim()
        .trim_start_matches("blocked by egress policy:")
        .trim()
        .to_string()
}

fn str_arg<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

fn target_args(input: &Value) -> R<Value> {
    let r = str_arg(input, "ref")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let s = str_arg(input, "selector")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match (r, s) {
        (Some(r), _) => Ok(json!({"ref": r})),
        (None, Some(s)) => Ok(json!({"selector": s})),
        (None, None) => Err(invalid(
            "give `ref` (from the latest observation, e.g. \"e12\") or `selector` (CSS)",
        )),
    }
}

impl BrowserTool {
    async fn run(
        &self,
        session: &Arc<Session>,
        ctx: &ToolContext,
        input: &Value,
        limit: Duration,
    ) -> R<ToolOutput> {
        let mut st = session.state.lock().await;
        let new_before = session.sync_tabs(&mut st).await;
        let _ = new_before;
        if st.tabs.is_empty() {
            session.new_tab(&mut st).await?;
        }
        match self.kind {
            Kind::Navigate => self.navigate(&mut st, input, limit).await,
            Kind::State => self.state(&mut st, input).await,
            Kind::Click => self.click(session, &mut st, input, limit).await,
            Kind::Fill => self.fill(session, &mut st, input, limit).await,
            Kind::Select => self.select(&mut st, input).await,
            Kind::Press => self.press(session, &mut st, input, limit).await,
            Kind::Hover => self.hover(&mut st, input).await,
            Kind::Back => self.back(&mut st, limit).await,
            Kind::Tabs => self.tabs(session, &mut st, input).await,
            Kind::Extract => self.extract(&mut st, input).await,
            Kind::Screenshot => self.screenshot(&mut st, ctx, input).await,
        }
    }

    fn page(st: &SessionState) -> R<Page> {
        st.active_tab()
            .map(|t| t.page.clone())
            .ok_or_else(|| failed("this session has no open tab; call browser_navigate"))
    }

    /// `status` (forge's words) followed by the fenced observation of the active tab.
    async fn observed(&self, st: &SessionState, status: String, budget: usize) -> R<ToolOutput> {
        let tab = st.active_tab().ok_or_else(|| failed("no open tab"))?;
        let obs = observe::observe(&tab.page).await?;
        let mut body = observe::render(&obs, budget);
        let dialogs: Vec<String> =
            std::mem::take(&mut *tab.dialogs.lock().unwrap_or_else(|p| p.into_inner()));
        if !dialogs.is_empty() {
            body.push_str("\ndialogs: ");
            body.push_str(&dialogs.join("; "));
        }
        if st.tabs.len() > 1 {
            body.push_str(&format!(
                "\ntabs: {} open (browser_tabs to list or switch)",
                st.tabs.len()
            ));
        }
        let text = format!(
            "{status}\n{}",
            fence::wrap(&format!("source=browser tab={}", tab.id), &body)
        );
        Ok(ToolOutput {
            text,
            data: Some(json!({"tab": tab.id, "status": status})),
        })
    }

    async fn stale(&self, st: &SessionState, what: &str, r: &Value) -> ActionError {
        let reference = r
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let selector = r
            .get("selector")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let head = match what {
            "stale" => format!("stale ref {reference}: that element is no longer on the page (it was removed or the page changed). Use a ref from this fresh observation:"),
            "bad-ref" => format!("{reference:?} is not a ref; refs look like e12 or f1e3. Current observation:"),
            "no-match" => format!("no element matches selector {selector:?}. Current observation:"),
            "bad-selector" => format!("{selector:?} is not a valid CSS selector. Current observation:"),
            other => format!("cannot use that element ({other}). Current observation:"),
        };
        match self.observed(st, head.clone(), DEFAULT_BUDGET).await {
            Ok(o) => failed(o.text),
            Err(_) => failed(head),
        }
    }

    async fn navigate(
        &self,
        st: &mut SessionState,
        input: &Value,
        limit: Duration,
    ) -> R<ToolOutput> {
        let raw = str_arg(input, "url")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("`url` is required"))?;
        let url = url::Url::parse(raw).map_err(|e| {
            invalid(format!(
                "{raw:?} is not a URL ({e}); give an absolute http(s) URL"
            ))
        })?;
        if url.scheme() != "http" && url.scheme() != "https" {
            return Err(invalid(format!(
                "only http and https URLs can be opened, not {}:",
                url.scheme()
            )));
        }
        let t0 = tokio::time::Instant::now();
        let page = Self::page(st)?;
        let mut watch = NavWatch::new(&page).await?;
        let nav = page
            .execute(NavigateParams::new(url.as_str()))
            .await?
            .result;
        if let Some(err) = nav.error_text.filter(|e| !e.is_empty()) {
            if let Some(b) = blocked_from_error(&self.manager, url.as_str(), &err) {
                return Err(ActionError::Tool(ToolError::Blocked(b)));
            }
            // Let the error page settle, then report.
            return Err(failed(format!("navigation to {url} failed: {err}")));
        }
        let out = watch
            .settle(&self.manager, Duration::from_secs(2), limit * 3 / 5)
            .await;
        if let Some(b) = out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(strip_prefix(&b))));
        }
        observe::wait_ready(&page, limit / 5).await?;
        let mut note = String::new();
        if let Some(w) = str_arg(input, "wait_for").filter(|s| !s.is_empty()) {
            // Leave time for the observation inside the call's limit.
            let deadline = t0
                + limit
                    .saturating_sub(Duration::from_millis(1500))
                    .max(limit / 2);
            loop {
                let v = observe::call(&page, "waitCheck", &json!({"waitFor": w})).await?;
                if v.get("found")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
                {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    note = " (wait_for did not appear before the time limit)".into();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let status = match out.status {
            Some(s) => format!("navigated: HTTP {s}{note}"),
            None => format!("navigated{note}"),
        };
        self.observed(st, status, DEFAULT_BUDGET).await
    }

    async fn state(&self, st: &mut SessionState, input: &Value) -> R<ToolOutput> {
        let page = Self::page(st)?;
        let budget = input
            .get("max_chars")
            .and_then(Value::as_u64)
            .map(|n| (n as usize).clamp(500, MAX_BUDGET))
            .unwrap_or(DEFAULT_BUDGET);
        if let Some(r) = str_arg(input, "scroll_to").filter(|s| !s.is_empty()) {
            let v = observe::call(&page, "scrollTo", &json!({"ref": r})).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(self.stale(st, e, &json!({"ref": r})).await);
            }
        }
        if let Some(p) = input.get("scroll").and_then(Value::as_f64) {
            if p != 0.0 {
                observe::call(&page, "scrollBy", &json!({"pages": p.clamp(-50.0, 50.0)})).await?;
            }
        }
        self.observed(st, "observation:".into(), budget).await
    }

    async fn point(&self, st: &SessionState, page: &Page, target: &Value) -> R<(f64, f64, Value)> {
        let v = observe::call(page, "point", target).await?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            if e == "not-visible" {
                let r = v.get("ref").and_then(Value::as_str).unwrap_or("");
                return Err(failed(format!("{r} is not visible (hidden or zero-size), so it cannot be used; browser_state shows what is visible")));
            }
            return Err(self.stale(st, e, target).await);
        }
        let x = v.get("x").and_then(Value::as_f64).unwrap_or(0.0);
        let y = v.get("y").and_then(Value::as_f64).unwrap_or(0.0);
        Ok((x, y, v))
    }

    async fn click(
        &self,
        session: &Arc<Session>,
        st: &mut SessionState,
        input: &Value,
        limit: Duration,
    ) -> R<ToolOutput> {
        let target = target_args(input)?;
        let page = Self::page(st)?;
        let (x, y, info) = self.point(st, &page, &target).await?;
        let r = info
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let force = input.get("force").and_then(Value::as_bool).unwrap_or(false);
        if let Some(cover) = info
            .get("cover")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            if !force {
                let msg = format!(
                    "did not click {r}: another element covers its centre; the click would hit that instead. Close or scroll past the cover (often a banner or dialog), or pass force=true. The cover: {}",
                    fence::wrap("source=browser", cover)
                );
                return Err(failed(msg));
            }
        }
        let button = match str_arg(input, "button").unwrap_or("left") {
            "left" => MouseButton::Left,
            "right" => MouseButton::Right,
            "middle" => MouseButton::Middle,
            other => {
                return Err(invalid(format!(
                    "button must be left, right or middle, not {other:?}"
                )))
            }
        };
        let count = input
            .get("click_count")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .clamp(1, 3);
        // A same-tab link or submit button gets a longer window for its navigation to start; the
        // wait ends as soon as it does.
        let nav_likely = info
            .get("navLikely")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let quick = if nav_likely {
            Duration::from_millis(1000)
        } else {
            Duration::ZERO
        };
        let mut watch = NavWatch::new(&page).await?;
        mouse(&page, DispatchMouseEventType::MouseMoved, x, y, None, 0).await?;
        for c in 1..=count {
            mouse(
                &page,
                DispatchMouseEventType::MousePressed,
                x,
                y,
                Some(button.clone()),
                c,
            )
            .await?;
            mouse(
                &page,
                DispatchMouseEventType::MouseReleased,
                x,
                y,
                Some(button.clone()),
                c,
            )
            .await?;
        }
        if !nav_likely {
            // A navigation the click starts is announced while the page handles it or in the work
            // it queues (0 ms timers, promise jobs): let that run, then look, with no fixed wait.
            observe::let_page_run(&page, Duration::from_millis(500)).await;
        }
        let out = watch.settle(&self.manager, quick, limit * 3 / 5).await;
        let mut what = self.outcome(session, st, &out, &page, limit).await?;
        if what.is_empty() {
            what = "no navigation".into();
        }
        let status = format!("clicked {r}: {what}");
        self.observed(st, status, DEFAULT_BUDGET).await
    }

    /// Describe what an action led to, and switch to a tab it opened.
    async fn outcome(
        &self,
        session: &Arc<Session>,
        st: &mut SessionState,
        out: &NavOutcome,
        page: &Page,
        limit: Duration,
    ) -> R<String> {
        if let Some(b) = &out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(strip_prefix(b))));
        }
        let mut parts = Vec::new();
        if out.navigated {
            observe::wait_ready(page, limit / 5).await?;
            match (out.status, &out.failed) {
                (_, Some(f)) => parts.push(format!("navigation failed ({f})")),
                (Some(s), _) => parts.push(format!("navigated (HTTP {s})")),
                (None, _) => parts.push("navigated".to_string()),
            }
        }
        let new_tabs = session.sync_tabs(st).await;
        if let Some(last) = new_tabs.last() {
            let i = st.tabs.iter().position(|t| &t.id == last);
            // A tab that showed a dialog before forge attached to it (the dialog event was
            // never seen, so never answered) cannot run anything: switching to it would make
            // this call and every later one wait out their time limit.
            let answers = match i {
                Some(i) => matches!(
                    tokio::time::timeout(
                        Duration::from_secs(3),
                        observe::call(&st.tabs[i].page, "ready", &Value::Null),
                    )
                    .await,
                    Ok(Ok(_))
                ),
                None => false,
            };
            match i {
                Some(i) if answers => {
                    st.active = i;
                    observe::wait_ready(
                        &st.tabs[i].page,
                        (limit / 5).min(Duration::from_secs(10)),
                    )
                    .await?;
                    parts.push(format!(
                        "opened new tab {} (now active; browser_tabs to switch back)",
                        new_tabs.join(", ")
                    ));
                }
                _ => parts.push(format!(
                    "opened new tab {}, but it does not respond (it may be blocked on a dialog it showed while opening), so the active tab is still {}; close it with browser_tabs action=close tab={last}",
                    new_tabs.join(", "),
                    st.active_tab().map(|t| t.id.as_str()).unwrap_or("?")
                )),
            }
        }
        let dialogs = page_dialog_count(st, page);
        if dialogs > 0 {
            parts.push(format!(
                "{dialogs} dialog(s) opened and were answered (see dialogs below)"
            ));
        }
        Ok(parts.join("; "))
    }

    async fn fill(
        &self,
        session: &Arc<Session>,
        st: &mut SessionState,
        input: &Value,
        limit: Duration,
    ) -> R<ToolOutput> {
        let mut target = target_args(input)?;
        let value = input
            .get("value")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("`value` (a string) is required"))?;
        let page = Self::page(st)?;
        target["allowSensitive"] = json!(self.options.allow_sensitive_fill);
        let v = observe::call(&page, "prepareFill", &target).await?;
        let r = v
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(match e {
                "sensitive" => ActionError::Tool(ToolError::Failed(format!(
                    "refused to fill {r}: it is a sensitive field ({}). forge does not type into password, payment-card or one-time-code fields by default. To allow it, the agent's browser skill must opt in with `allow_sensitive_fill: true` under `metadata.forge.guardrails.browser` in its SKILL.md (see docs/browser.md, \"Fill safety\"); otherwise ask the user to complete this field.",
                    v.get("why").and_then(Value::as_str).unwrap_or("sensitive")
                ))),
                "not-editable" => failed(format!("{r} is not a text field; use browser_click for buttons, checkboxes and radios, browser_select for <select>")),
                "disabled" => failed(format!("{r} is disabled or read-only")),
                other => self.stale(st, other, &target).await,
            });
        }
        if !v.get("focused").and_then(Value::as_bool).unwrap_or(false) {
            // The keys would go to whatever has focus instead (possibly a protected field).
            return Err(failed(format!("could not focus {r} (hidden, inert or not focusable), so nothing was typed; browser_state shows what is visible")));
        }
        if v.get("hadValue").and_then(Value::as_bool).unwrap_or(false) {
            key(&page, &KeyPress::named("Backspace", 0)?).await?;
        }
        let mut after_enter = false;
        for (n, ch) in value.chars().enumerate() {
            if after_enter {
                // Enter can submit and load another page (whose focused field may be protected):
                // type on only while the target still has focus.
                let v = observe::call(&page, "stillFocused", &json!({"ref": r})).await?;
                if v.get("focused").and_then(Value::as_bool) != Some(true) {
                    return Err(failed(format!("stopped after {n} of {} chars: {r} lost focus after a newline (Enter) in the value; the rest was not typed. Use submit=true to press Enter after the value", value.chars().count())));
                }
            }
            if ch == '\n' {
                key(&page, &KeyPress::named("Enter", 0)?).await?;
                after_enter = true;
            } else if ch == '\t' {
                // As text: a Tab key event would move focus to the next field and type the rest
                // of the value there.
                page.execute(InsertTextParams::new("\t")).await?;
            } else {
                key(&page, &KeyPress::char(ch)).await?;
            }
        }
        let after = observe::call(&page, "valueOf", &json!({"ref": r})).await?;
        let len = after.get("length").and_then(Value::as_u64).unwrap_or(0);
        let want = value.chars().count() as u64;
        let mut status = format!("filled {r} ({want} chars)");
        if len != want {
            status.push_str(&format!(
                "; the field now holds {len} chars (the page changed or limited the value)"
            ));
        }
        if input
            .get("submit")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            let mut watch = NavWatch::new(&page).await?;
            key(&page, &KeyPress::named("Enter", 0)?).await?;
            let out = watch
                .settle(&self.manager, Duration::from_millis(500), limit * 3 / 5)
                .await;
            let what = self.outcome(session, st, &out, &page, limit).await?;
            status.push_str(&format!(
                "; pressed Enter: {}",
                if what.is_empty() {
                    "no navigation"
                } else {
                    &what
                }
            ));
        }
        self.observed(st, status, DEFAULT_BUDGET).await
    }

    async fn select(&self, st: &mut SessionState, input: &Value) -> R<ToolOutput> {
        let mut target = target_args(input)?;
        let options: Vec<String> = match input.get("option") {
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => {
                return Err(invalid(
                    "`option` (a label or value, or a list of them) is required",
                ))
            }
        };
        if options.is_empty() {
            return Err(invalid("`option` must not be empty"));
        }
        let page = Self::page(st)?;
        target["options"] = json!(options);
        let v = observe::call(&page, "selectOption", &target).await?;
        let r = v
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(match e {
                "no-option" => {
                    let avail: Vec<String> = v.get("available").and_then(Value::as_array).map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default();
                    ActionError::Tool(ToolError::InvalidInput(format!(
                        "{r} has no option {:?} (matched by label or value). Its options: {}",
                        v.get("option").and_then(Value::as_str).unwrap_or(""),
                        fence::wrap("source=browser", &avail.join("\n"))
                    )))
                }
                "option-disabled" => failed(format!("that option of {r} is disabled")),
                "not-select" => failed(format!("{r} is not a <select>; for custom dropdowns click the control, then click the option")),
                "not-multiple" => invalid(format!("{r} allows one option only; give a single `option`")),
                "disabled" => failed(format!("{r} is disabled")),
                other => self.stale(st, other, &target).await,
            });
        }
        let n = v
            .get("selected")
            .and_then(Value::as_array)
            .map(Vec::len)
            .unwrap_or(0);
        self.observed(st, format!("selected {n} option(s) in {r}"), DEFAULT_BUDGET)
            .await
    }

    async fn press(
        &self,
        session: &Arc<Session>,
        st: &mut SessionState,
        input: &Value,
        limit: Duration,
    ) -> R<ToolOutput> {
        let k = str_arg(input, "key")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("`key` is required (e.g. Enter, Tab, Control+A)"))?;
        let press = KeyPress::parse(k)?;
        let page = Self::page(st)?;
        if let Some(r) = str_arg(input, "ref").filter(|s| !s.is_empty()) {
            let t = json!({"ref": r});
            let v = observe::call(&page, "focusRef", &t).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(self.stale(st, e, &t).await);
            }
        }
        if !self.options.allow_sensitive_fill && !press.edits_nothing() {
            // Pressing keys one by one must not do what browser_fill refuses.
            let v = observe::call(&page, "focusSensitivity", &Value::Null).await?;
            if let Some(why) = v
                .get("sensitive")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
            {
                return Err(failed(format!(
                    "refused to press {k}: the focused field is a sensitive field ({why}). forge does not type into password, payment-card or one-time-code fields by default. To allow it, the agent's browser skill must opt in with `allow_sensitive_fill: true` under `metadata.forge.guardrails.browser` in its SKILL.md (see docs/browser.md, \"Fill safety\"); otherwise ask the user to complete this field."
                )));
            }
        }
        let mut watch = NavWatch::new(&page).await?;
        // Enter often submits a form; give its navigation time to start.
        let quick = if press.key == "Enter" {
            Duration::from_millis(300)
        } else {
            Duration::ZERO
        };
        key(&page, &press).await?;
        if quick.is_zero() {
            // As for a click: let the work the key queued run, then look, with no fixed wait.
            observe::let_page_run(&page, Duration::from_millis(500)).await;
        }
        let out = watch.settle(&self.manager, quick, limit * 3 / 5).await;
        let what = self.outcome(session, st, &out, &page, limit).await?;
        self.observed(
            st,
            format!(
                "pressed {k}{}",
                if what.is_empty() {
                    String::new()
                } else {
                    format!(": {what}")
                }
            ),
            DEFAULT_BUDGET,
        )
        .await
    }

    async fn hover(&self, st: &mut SessionState, input: &Value) -> R<ToolOutput> {
        let target = target_args(input)?;
        let page = Self::page(st)?;
        let (x, y, info) = self.point(st, &page, &target).await?;
        let r = info
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        mouse(&page, DispatchMouseEventType::MouseMoved, x, y, None, 0).await?;
        settle_frames(&page).await;
        self.observed(st, format!("hovering over {r}"), DEFAULT_BUDGET)
            .await
    }

    async fn back(&self, st: &mut SessionState, limit: Duration) -> R<ToolOutput> {
        let page = Self::page(st)?;
        let hist = page
            .execute(GetNavigationHistoryParams::default())
            .await?
            .result;
        let idx = hist.current_index;
        if idx <= 0 {
            return Err(failed("there is no previous page in this tab's history"));
        }
        let Some(entry) = hist.entries.get((idx - 1) as usize) else {
            return Err(failed("there is no previous page in this tab's history"));
        };
        let mut watch = NavWatch::new(&page).await?;
        page.execute(NavigateToHistoryEntryParams::new(entry.id))
            .await?;
        let out = watch
            .settle(&self.manager, Duration::from_millis(1000), limit * 3 / 5)
            .await;
        if let Some(b) = out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(strip_prefix(&b))));
        }
        observe::wait_ready(&page, limit / 5).await?;
        self.observed(st, "went back one page".into(), DEFAULT_BUDGET)
            .await
    }

    async fn tabs(
        &self,
        session: &Arc<Session>,
        st: &mut SessionState,
        input: &Value,
    ) -> R<ToolOutput> {
        let action = str_arg(input, "action").unwrap_or("list");
        let find = |st: &SessionState, id: &str| -> R<usize> {
            let id = id.trim();
            st.tabs
                .iter()
                .position(|t| t.id == id || t.id == format!("t{id}"))
                .ok_or_else(|| {
                    invalid(format!(
                        "no tab {id:?}; browser_tabs with action=list shows the tab ids"
                    ))
                })
        };
        let status = match action {
            "list" => "tabs:".to_string(),
            "switch" => {
                let id = str_arg(input, "tab")
                    .ok_or_else(|| invalid("`tab` (a tab id like t2) is required for switch"))?;
                st.active = find(st, id)?;
                let _ = st.tabs[st.active].page.bring_to_front().await;
                format!("switched to {}", st.tabs[st.active].id)
            }
            "close" => {
                let idx = match str_arg(input, "tab") {
                    Some(id) => find(st, id)?,
                    None => st.active,
                };
                let id = st.tabs[idx].id.clone();
                session.close_tab(st, idx).await;
                if st.tabs.is_empty() {
                    session.new_tab(st).await?;
                }
                format!("closed {id}; active tab is {}", st.tabs[st.active].id)
            }
            "new" => {
                session.new_tab(st).await?;
                format!("opened {} (blank; now active)", st.tabs[st.active].id)
            }
            other => {
                return Err(invalid(format!(
                    "action must be list, switch, close or new, not {other:?}"
                )))
            }
        };
        let mut listing = String::new();
        for (i, t) in st.tabs.iter().enumerate() {
            // Bounded: a tab blocked on a dialog answers nothing.
            let quick = Duration::from_secs(2);
            let title = tokio::time::timeout(quick, t.page.get_title())
                .await
                .ok()
                .and_then(|r| r.ok().flatten())
                .unwrap_or_else(|| "(not responding)".into());
            let url = tokio::time::timeout(quick, t.page.url())
                .await
                .ok()
                .and_then(|r| r.ok().flatten())
                .unwrap_or_default();
            listing.push_str(&format!(
                "{}{} {:?} {}\n",
                t.id,
                if i == st.active { " (active)" } else { "" },
                title.chars().take(80).collect::<String>(),
                url
            ));
        }
        let ids: Vec<&str> = st.tabs.iter().map(|t| t.id.as_str()).collect();
        let text = format!(
            "{status} {}\n{}",
            ids.join(", "),
            fence::wrap("source=browser tabs", &listing)
        );
        Ok(ToolOutput {
            text,
            data: Some(json!({"tabs": ids, "active": st.tabs[st.active].id})),
        })
    }

    async fn extract(&self, st: &mut SessionState, input: &Value) -> R<ToolOutput> {
        let page = Self::page(st)?;
        let mode = str_arg(input, "mode").unwrap_or("text");
        if !matches!(mode, "text" | "links" | "html") {
            return Err(invalid(format!(
                "mode must be text, links or html, not {mode:?}"
            )));
        }
        let selector = str_arg(input, "selector").filter(|s| !s.is_empty());
        let v = observe::call(
            &page,
            "extract",
            &json!({"mode": mode, "selector": selector}),
        )
        .await?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(match e {
                "html-needs-selector" => invalid("mode=html needs a `selector` naming one element (the whole page's HTML is never returned)"),
                "html-whole-page" => invalid("mode=html returns one element's HTML, not the whole page; pick a narrower selector"),
                "no-match" => failed(format!("no element matches selector {:?}", selector.unwrap_or(""))),
                "bad-selector" => invalid(format!("{:?} is not a valid CSS selector", selector.unwrap_or(""))),
                other => failed(format!("extract failed: {other}")),
            });
        }
        let content = v.get("content").and_then(Value::as_str).unwrap_or("");
        let max = input
            .get("max_chars")
            .and_then(Value::as_u64)
            .map(|n| (n as usize).clamp(200, MAX_BUDGET))
            .unwrap_or(8000);
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
        let total = content.chars().count();
        if offset > total {
            return Err(invalid(format!(
                "offset {offset} is past the end ({total} chars)"
            )));
        }
        let chunk: String = content.chars().skip(offset).take(max).collect();
        let end = offset + chunk.chars().count();
        let url = page.url().await.ok().flatten().unwrap_or_default();
        let mut text = format!("extract mode={mode}: chars {offset}..{end} of {total}\n");
        text.push_str(&fence::wrap(&format!("source=browser url={url}"), &chunk));
        if end < total {
            text.push_str(&format!(
                "\n{} more chars: pass offset={end} for more",
                total - end
            ));
        }
        Ok(ToolOutput {
            text,
            data: Some(json!({"mode": mode, "offset": offset, "end": end, "total": total})),
        })
    }

    async fn screenshot(
        &self,
        st: &mut SessionState,
        ctx: &ToolContext,
        input: &Value,
    ) -> R<ToolOutput> {
        let page = Self::page(st)?;
        let full = input
            .get("full_page")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let selector = str_arg(input, "selector").filter(|s| !s.is_empty());
        let bytes = if let Some(sel) = selector {
            let v = observe::call(&page, "rect", &json!({"selector": sel})).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(match e {
                    "no-match" => failed(format!("no element matches selector {sel:?}")),
                    _ => invalid(format!("{sel:?} is not a valid CSS selector")),
                });
            }
            let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            if f("width") <= 0.0 || f("height") <= 0.0 {
                return Err(failed(format!("the element {sel:?} has no visible area")));
            }
            let params = CaptureScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Png)
                .clip(ClipViewport {
                    x: f("x"),
                    y: f("y"),
                    width: f("width"),
                    height: f("height"),
                    scale: 1.0,
                })
                .capture_beyond_viewport(true)
                .build();
            page.screenshot(params).await?
        } else {
            page.screenshot(
                chromiumoxide::page::ScreenshotParams::builder()
                    .format(CaptureScreenshotFormat::Png)
                    .full_page(full)
                    .build(),
            )
            .await?
        };
        let name = screenshot_name(str_arg(input, "filename"), &ctx.files_dir)?;
        std::fs::create_dir_all(&ctx.files_dir)
            .map_err(|e| failed(format!("cannot create {}: {e}", ctx.files_dir.display())))?;
        let path = ctx.files_dir.join(&name);
        std::fs::write(&path, &bytes)
            .map_err(|e| failed(format!("cannot write {}: {e}", path.display())))?;
        Ok(ToolOutput::json(json!({
            "filename": name,
            "mime_type": "image/png",
            "path": path.display().to_string(),
            "size_bytes": bytes.len(),
        })))
    }
}

fn page_dialog_count(st: &SessionState, page: &Page) -> usize {
    st.tabs
        .iter()
        .find(|t| t.page.target_id() == page.target_id())
        .map(|t| t.dialogs.lock().unwrap_or_else(|p| p.into_inner()).len())
        .unwrap_or(0)
}

/// A safe file name for a screenshot inside `dir`: the last path component, `.png`, not existing.
fn screenshot_name(requested: Option<&str>, dir: &std::path::Path) -> R<String> {
    let base = match requested.map(str::trim).filter(|s| !s.is_empty()) {
        Some(r) => {
            let last = std::path::Path::new(r)
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or("");
            let clean: String = last
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            let clean = clean.trim_start_matches('.').to_string();
            if clean.is_empty() {
                return Err(invalid(format!(
                    "{r:?} is not a usable file name; use letters, digits, - _ ."
                )));
            }
            if clean.to_ascii_lowercase().ends_with(".png") {
                clean
            } else {
                format!("{clean}.png")
            }
        }
        None => "screenshot.png".to_string(),
    };
    if !dir.join(&base).exists() {
        return Ok(base);
    }
    let stem = base.trim_end_matches(".png").to_string();
    for i in 2..10_000 {
        let n = format!("{stem}-{i}.png");
        if !dir.join(&n).exists() {
            return Ok(n);
        }
    }
    Err(failed("too many screenshots with that name"))
}

async fn mouse(
    page: &Page,
    kind: DispatchMouseEventType,
    x: f64,
    y: f64,
    button: Option<MouseButton>,
    count: i64,
) -> R<()> {
    let mut b = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
    if let Some(btn) = button {
        let buttons = match btn {
            MouseButton::Left => 1,
            MouseButton::Right => 2,
            MouseButton::Middle => 4,
            _ => 0,
        };
        b = b.button(btn).buttons(buttons).click_count(count);
    }
    page.execute(b.build().map_err(failed)?).await?;
    Ok(())
}

/// Wait two animation frames (bounded), so hover/click effects are painted before observing.
async fn settle_frames(page: &Page) {
    let _ = tokio::time::timeout(
        Duration::from_millis(200),
        observe::call(page, "ready", &Value::Null),
    )
    .await;
}

/// A key press: key name, code, virtual key code, text, modifiers and editing commands.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyPress {
    pub key: String,
    pub code: String,
    pub key_code: i64,
    pub text: Option<String>,
    pub modifiers: i64,
    pub commands: Vec<String>,
}

const ALT: i64 = 1;
const CTRL: i64 = 2;
const META: i64 = 4;
const SHIFT: i64 = 8;

impl KeyPress {
    /// A character typed as text.
    pub fn char(c: char) -> Self {
        let s = c.to_string();
        let def = chromiumoxide::keys::get_key_definition(&s);
        KeyPress {
            key: s.clone(),
            code: def.map(|d| d.code.to_string()).unwrap_or_default(),
            key_code: def.map(|d| d.key_code).unwrap_or(0),
            text: Some(s),
            modifiers: 0,
            commands: Vec::new(),
        }
    }

    fn named(name: &str, modifiers: i64) -> R<Self> {
        let def = chromiumoxide::keys::get_key_definition(name)
            .ok_or_else(|| invalid(format!("unknown key {name:?}; use names like Enter, Tab, Escape, Backspace, ArrowDown, PageDown, Home, F5, or a single character")))?;
        let printable = def
            .text
            .map(str::to_string)
            .or_else(|| (def.key.chars().count() == 1).then(|| def.key.to_string()));
        let text = if modifiers & (CTRL | META | ALT) != 0 {
            None
        } else {
            printable
        };
        Ok(KeyPress {
            key: def.key.to_string(),
            code: def.code.to_string(),
            key_code: def.key_code,
            text,
            modifiers,
            commands: Vec::new(),
        })
    }

    /// Whether this key only moves focus, the caret or the page, submits or deletes, and so can
    /// put no text into a field (typing, paste and every other key can).
    fn edits_nothing(&self) -> bool {
        matches!(
            self.key.as_str(),
            "Tab"
                | "Enter"
                | "Escape"
                | "ArrowUp"
                | "ArrowDown"
                | "ArrowLeft"
                | "ArrowRight"
                | "Home"
                | "End"
                | "PageUp"
                | "PageDown"
                | "Backspace"
                | "Delete"
        ) && self.commands.iter().all(|c| c != "paste")
    }

    /// Parse `Enter`, `a`, `Control+A`, `Shift+Tab`, `Control+Shift+ArrowLeft`.
    pub fn parse(spec: &str) -> R<Self> {
        let parts: Vec<&str> = if spec == "+" {
            vec!["+"]
        } else {
            spec.split('+').map(str::trim).collect()
        };
        let (last, mods) = parts.split_last().ok_or_else(|| invalid("empty key"))?;
        let mut m = 0;
        for p in mods {
            m |= match p.to_ascii_lowercase().as_str() {
                "control" | "ctrl" => CTRL,
                "shift" => SHIFT,
                "alt" | "option" => ALT,
                "meta" | "cmd" | "command" | "super" => META,
                other => {
                    return Err(invalid(format!(
                        "unknown modifier {other:?} in {spec:?}; use Control, Shift, Alt or Meta"
                    )))
                }
            };
        }
        let mut name = last.to_string();
        if name.chars().count() == 1 {
            let c = name.chars().next().unwrap_or(' ');
            if m & SHIFT != 0 {
                name = c.to_ascii_uppercase().to_string()
            } else if m & (CTRL | META | ALT) != 0 {
                name = c.to_ascii_lowercase().to_string()
            }
        } else {
            // Accept common spellings.
            name = match name.to_ascii_lowercase().as_str() {
                "esc" => "Escape".into(),
                "return" => "Enter".into(),
                "space" => " ".into(),
                "del" => "Delete".into(),
                "up" => "ArrowUp".into(),
                "down" => "ArrowDown".into(),
                "left" => "ArrowLeft".into(),
                "right" => "ArrowRight".into(),
                _ => name,
            };
        }
        let mut k = Self::named(&name, m)?;
        if m & (CTRL | META) != 0 {
            let cmd = match k.key.to_ascii_lowercase().as_str() {
                "a" => Some("selectAll"),
                "c" => Some("copy"),
                "x" => Some("cut"),
                "v" => Some("paste"),
                "z" if m & SHIFT != 0 => Some("redo"),
                "z" => Some("undo"),
                "y" => Some("redo"),
                _ => None,
            };
            k.commands = cmd.into_iter().map(str::to_string).collect();
        }
        Ok(k)
    }
}

async fn key(page: &Page, k: &KeyPress) -> R<()> {
    let mut down = DispatchKeyEventParams::builder()
        .r#type(if k.text.is_some() {
            DispatchKeyEventType::KeyDown
        } else {
            DispatchKeyEventType::RawKeyDown
        })
        .key(k.key.clone())
        .modifiers(k.modifiers);
    if !k.code.is_empty() {
        down = down.code(k.code.clone());
    }
    if k.key_code != 0 {
        down = down
            .windows_virtual_key_code(k.key_code)
            .native_virtual_key_code(k.key_code);
    }
    if let Some(t) = &k.text {
        down = down.text(t.clone()).unmodified_text(t.clone());
    }
    if !k.commands.is_empty() {
        down = down.commands(k.commands.clone());
    }
    page.execute(down.build().map_err(failed)?).await?;
    let mut up = DispatchKeyEventParams::builder()
        .r#type(DispatchKeyEventType::KeyUp)
        .key(k.key.clone())
        .modifiers(k.modifiers);
    if !k.code.is_empty() {
        up = up.code(k.code.clone());
    }
    if k.key_code != 0 {
        up = up
            .windows_virtual_key_code(k.key_code)
            .native_virtual_key_code(k.key_code);
    }
    page.execute(up.build().map_err(failed)?).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_chords_parse() {
        let k = KeyPress::parse("Control+A").expect("chord");
        assert_eq!(
            (k.key.as_str(), k.modifiers, k.text.clone()),
            ("a", CTRL, None)
        );
        assert_eq!(k.commands, vec!["selectAll".to_string()]);
        let e = KeyPress::parse("Enter").expect("enter");
        assert_eq!((e.key_code, e.text.as_deref()), (13, Some("\r")));
        let t = KeyPress::parse("Shift+Tab").expect("shift tab");
        assert_eq!((t.key.as_str(), t.modifiers), ("Tab", SHIFT));
        assert!(KeyPress::parse("Hyper+Q").is_err());
        assert!(KeyPress::parse("NotAKey").is_err());
    }

    #[test]
    fn screenshot_names_stay_inside_the_files_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            screenshot_name(Some("../../etc/passwd"), dir.path()).expect("name"),
            "passwd.png"
        );
        assert_eq!(
            screenshot_name(Some("shot.PNG"), dir.path()).expect("name"),
            "shot.PNG"
        );
        assert_eq!(
            screenshot_name(None, dir.path()).expect("name"),
            "screenshot.png"
        );
        std::fs::write(dir.path().join("screenshot.png"), b"x").expect("write");
        assert_eq!(
            screenshot_name(None, dir.path()).expect("name"),
            "screenshot-2.png"
        );
        assert!(screenshot_name(Some("..."), dir.path()).is_err());
    }

    #[test]
    fn schemas_are_objects_and_names_unique() {
        let mgr = Arc::new(BrowserManager::new(crate::BrowserConfig::default()));
        let tools = browser_tools(mgr, BrowserToolOptions::default());
        let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), 11);
        for t in &tools {
            assert_eq!(t.input_schema()["type"], "object", "{}", t.name());
            assert!(!t.description().is_empty());
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 11);
    }
}
