//! The `browser_*` tools (forge-tools [`Tool`]s) over a shared [`BrowserManager`], one file per
//! tool; this file holds what they share.
//!
//! Every page-derived byte in a result is inside the untrusted-content fence; the line before
//! the fence is forge's own status (what happened), with no page text in it.
//!
//! A tool is a [`BrowserAction`] (name, description, schema, `run`); [`BrowserTool`] wraps one into
//! a [`Tool`]: it picks the time limit, finds the session, runs the action under the manager's
//! crash/hang guard with the session's state locked, and honours cancellation. The action gets a
//! [`Cx`] with the session state and the shared helpers (observe, stale-ref errors, points,
//! what an action led to).
//!
//! To add a tool: a new file with a unit struct implementing [`BrowserAction`], a `mod` line
//! below and an entry in [`browser_tools`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::MouseButton;
use chromiumoxide::Page;
use forge_tools::fence;
use forge_tools::{Tool, ToolContext, ToolError, ToolOutput};
use serde_json::{json, Value};

pub use crate::error::ActionError;
use crate::error::{failed, invalid, R};
use crate::manager::{BrowserManager, Session, SessionState};
use crate::navwatch::NavOutcome;
use crate::observe;
use crate::pointer;

mod back;
pub(crate) mod click;
mod close;
mod drag;
mod extract;
pub(crate) mod fill;
mod handoff;
mod hover;
mod navigate;
mod pdf;
mod press;
mod screenshot;
mod scroll;
pub(crate) mod select;
mod select_text;
mod state;
mod tabs;
mod upload;

/// Default observation budget in characters.
pub const DEFAULT_BUDGET: usize = crate::observe::DEFAULT_BUDGET;
/// Largest `max_chars` accepted.
pub(crate) const MAX_BUDGET: usize = 40_000;

/// Options for the browser tools (from the agent's browser view).
#[derive(Debug, Clone, Default)]
pub struct BrowserToolOptions {
    /// Allow filling password, card and one-time-code fields (`allow_sensitive_fill`).
    pub allow_sensitive_fill: bool,
}

/// The browser tools over `manager` that its engine can serve, in a fixed order.
pub fn browser_tools(
    manager: Arc<BrowserManager>,
    options: BrowserToolOptions,
) -> Vec<Arc<dyn Tool>> {
    fn tool<A: BrowserAction>(
        action: A,
        manager: &Arc<BrowserManager>,
        options: &BrowserToolOptions,
    ) -> Arc<dyn Tool> {
        Arc::new(BrowserTool {
            action,
            manager: manager.clone(),
            options: options.clone(),
        })
    }
    let (m, o) = (&manager, &options);
    let engine = manager.config().engine;
    let all: Vec<Arc<dyn Tool>> = vec![
        tool(navigate::Navigate, m, o),
        tool(state::State, m, o),
        tool(click::Click, m, o),
        tool(fill::Fill, m, o),
        tool(select::Select, m, o),
        tool(press::Press, m, o),
        tool(hover::Hover, m, o),
        tool(back::Back, m, o),
        tool(tabs::Tabs, m, o),
        tool(extract::Extract, m, o),
        tool(screenshot::Screenshot, m, o),
        tool(pdf::Pdf, m, o),
        tool(drag::Drag, m, o),
        tool(select_text::SelectText, m, o),
        tool(scroll::Scroll, m, o),
        tool(upload::Upload, m, o),
        Arc::new(close::Close {
            manager: manager.clone(),
        }),
        Arc::new(handoff::Handoff {
            manager: manager.clone(),
            options: options.clone(),
        }),
    ];
    // A tool the engine cannot serve is not registered (`engine::absent_reason` says why).
    all.into_iter()
        .filter(|t| crate::engine::absent_reason(engine, t.name()).is_none())
        .collect()
}

/// `action` as a forge-tools [`Tool`] over `manager` (the form tools, `forms/`, which are not
/// among [`browser_tools`]).
pub(crate) fn wrap<A: BrowserAction>(
    action: A,
    manager: &Arc<BrowserManager>,
    options: &BrowserToolOptions,
) -> Arc<dyn Tool> {
    Arc::new(BrowserTool {
        action,
        manager: manager.clone(),
        options: options.clone(),
    })
}

/// Open `url` in the active tab as `browser_navigate` does (egress refusals, HTTP status, load),
/// without its observation, for the form tools: the status words.
pub(crate) async fn navigate_in(cx: &mut Cx<'_>, url: &str) -> R<String> {
    navigate::Navigate.act(cx, &json!({ "url": url })).await
}

/// One browser tool's own part: what the model sees of it, and what it does.
#[async_trait]
pub(crate) trait BrowserAction: Send + Sync + 'static {
    fn name(&self) -> &'static str;
    fn description(&self) -> &'static str;
    fn input_schema(&self) -> Value;
    /// Whether the action can navigate (it then gets the navigation time limit by default).
    fn navigates(&self) -> bool {
        false
    }
    /// A time limit the input asks for (capped by the config's maximum).
    fn requested_limit(&self, _input: &Value) -> Option<Duration> {
        None
    }
    /// Do it, with the session's state locked.
    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput>;
}

/// A [`BrowserAction`] as a forge-tools [`Tool`].
pub(crate) struct BrowserTool<A> {
    action: A,
    manager: Arc<BrowserManager>,
    options: BrowserToolOptions,
}

#[async_trait]
impl<A: BrowserAction> Tool for BrowserTool<A> {
    fn name(&self) -> &str {
        self.action.name()
    }

    fn description(&self) -> &str {
        self.action.description()
    }

    fn input_schema(&self) -> Value {
        self.action.input_schema()
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        if !input.is_object() && !input.is_null() {
            return Err(ToolError::InvalidInput(
                "the input must be a JSON object".into(),
            ));
        }
        let cfg = self.manager.config();
        let mut limit = match ctx.timeout {
            Some(t) => t.min(cfg.max_timeout),
            None if self.action.navigates() => cfg.navigation_timeout,
            None => cfg.action_timeout,
        };
        if let Some(asked) = self.action.requested_limit(&input) {
            limit = asked.min(cfg.max_timeout);
        }
        let session_key = if ctx.session_key.is_empty() {
            "default"
        } else {
            ctx.session_key.as_str()
        };
        let work = async {
            let session = self.manager.session(session_key).await?;
            let running = session.running.clone();
            // Downloads go into this call's workspace (`downloads.rs`).
            crate::downloads::enable(
                &running.browser,
                &session.context_id,
                &session.downloads,
                &ctx.files_dir,
            )
            .await?;
            let started = session.downloads.begun();
            let began = tokio::time::Instant::now();
            let run = async {
                let mut st = session.state.lock().await;
                session.sync_tabs(&mut st).await;
                if st.tabs.is_empty() {
                    session.new_tab(&mut st).await?;
                }
                let mut cx = Cx {
                    manager: &self.manager,
                    options: &self.options,
                    session: &session,
                    st: &mut st,
                    ctx,
                    limit,
                    routes: Default::default(),
                };
                self.action.run(&mut cx, &input).await
            };
            let r = self.manager.guard(&running, limit, run).await;
            // A download that began during the action (its settle ends when one does:
            // `NavWatch::downloads`) or whose session is still being looked up is waited for:
            // until it is counted, then until it ends (within the call's time limit), and
            // reported with the result. A call that started none waits for nothing.
            if r.is_ok() && running.downloads.assigning() {
                session
                    .downloads
                    .begun_within(&running.downloads, started, Duration::ZERO)
                    .await;
            }
            // A download that began is waited for up to WAIT_CAP (within the call's limit); a
            // longer one is reported as running, and a later `wait_for {download: true}` or any
            // browser call reports its end.
            let left = limit.saturating_sub(began.elapsed()).min(WAIT_CAP);
            session.downloads.settle(started, left).await;
            let r = match r {
                Ok(out) => Ok(with_downloads(out, &session.downloads, &ctx.secrets).await),
                Err(e) => Err(e),
            };
            // Idle time counts from the end of the last call, not its start: a call longer than
            // idle_timeout must not leave its session to be closed before the next one.
            session.touch();
            r
        };
        let r = tokio::select! {
            r = work => r.map_err(ToolError::from),
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        // After a crash, the first result of each of the dead browser's sessions says so
        // (`crash.rs`).
        let Some(notice) = self.manager.crashes().take(session_key) else {
            return r;
        };
        let (r, carried) = with_crash_notice(r, &notice);
        if !carried {
            self.manager.crashes().put_back(session_key, notice);
        }
        r
    }
}

/// `out` with the downloads finished (or failed) since the last report, and the ones still
/// running, as lines after its status line; finished files also go in its data's `files` list
/// (`{filename, mime_type, path, size_bytes}`), which the runtime captures as artifacts.
/// A finished download that is a PDF is shown as a document (title, pages, text under
/// [`crate::downloads::PDF_BUDGET`]) after its line; `browser_extract {page: N}` reads on.
async fn with_downloads(
    mut out: ToolOutput,
    d: &crate::downloads::SessionDownloads,
    secrets: &forge_tools::Secrets,
) -> ToolOutput {
    let (reports, running) = d.take();
    if reports.is_empty() && running.is_empty() {
        return out;
    }
    let (mut lines, files) = crate::downloads::describe(&reports, &running);
    for r in &reports {
        if let crate::downloads::Report::Done { filename, path, .. } = r {
            if crate::downloads::is_pdf(path) {
                match crate::downloads::pdf_text(path, 1, crate::downloads::PDF_BUDGET, secrets)
                    .await
                {
                    Ok(t) => lines.push(format!("{filename}:\n{t}")),
                    Err(why) => lines.push(format!("{filename}: {why}")),
                }
            }
        }
    }
    let lines = lines.join("\n");
    out.text = match out.text.split_once('\n') {
        Some((status, rest)) => format!("{status}\n{lines}\n{rest}"),
        None => format!("{}\n{lines}", out.text),
    };
    if !files.is_empty() {
        let mut data = match out.data.take() {
            Some(Value::Object(m)) => m,
            None => serde_json::Map::new(),
            Some(other) => {
                let mut m = serde_json::Map::new();
                m.insert("value".into(), other);
                m
            }
        };
        data.insert("files".into(), Value::Array(files));
        out.data = Some(Value::Object(data));
    }
    out
}

/// `r` with the crash `notice` first in its text (and in its data as `notice`), and whether it
/// could carry it (a timeout has no message to put it in).
fn with_crash_notice(
    r: Result<ToolOutput, ToolError>,
    notice: &str,
) -> (Result<ToolOutput, ToolError>, bool) {
    let says = |m: String| format!("notice: {notice}\n{m}");
    let r = match r {
        Ok(mut out) => {
            out.text = says(out.text);
            out.data = Some(match out.data.take() {
                Some(Value::Object(mut m)) => {
                    m.insert("notice".into(), json!(notice));
                    Value::Object(m)
                }
                None => json!({ "notice": notice }),
                Some(other) => json!({ "notice": notice, "value": other }),
            });
            Ok(out)
        }
        Err(ToolError::Failed(m)) => Err(ToolError::Failed(says(m))),
        Err(ToolError::InvalidInput(m)) => Err(ToolError::InvalidInput(says(m))),
        Err(ToolError::Blocked(r)) => {
            let reason = says(r.reason());
            Err(ToolError::Blocked(r.rewritten(reason)))
        }
        other => return (other, false),
    };
    (r, true)
}

/// What an action works with: the session (its state locked), the call's context and time
/// limit, the manager and the tool options.
pub(crate) struct Cx<'a> {
    pub(crate) manager: &'a BrowserManager,
    pub(crate) options: &'a BrowserToolOptions,
    pub(crate) session: &'a Arc<Session>,
    pub(crate) st: &'a mut SessionState,
    pub(crate) ctx: &'a ToolContext,
    pub(crate) limit: Duration,
    /// Routes to cross-origin frames, built once per call (`frames.rs`).
    pub(crate) routes: crate::frames::Routes,
}

impl Cx<'_> {
    /// The active tab's page.
    pub(crate) fn page(&self) -> R<Page> {
        self.st
            .active_tab()
            .map(|t| t.page.clone())
            .ok_or_else(|| failed("this session has no open tab; call browser_navigate"))
    }

    /// Page-library command `cmd(args)` for the element `args` names, run by the document that
    /// owns it (the top document, or a cross-origin frame's own context for a ref like `f2e5`).
    pub(crate) async fn lib(&self, page: &Page, cmd: &str, args: &Value) -> R<Value> {
        Ok(crate::frames::call(page, self.session, &self.routes, cmd, args).await?)
    }

    /// `status` (forge's words) followed by the fenced observation of the active tab.
    pub(crate) async fn observed(&self, status: String, budget: usize) -> R<ToolOutput> {
        self.observed_with(status, None, budget).await
    }

    /// [`Cx::observed`], with `page_note` (page-derived words about the action's effect, such as
    /// a list's order) first inside the fence.
    pub(crate) async fn observed_with(
        &self,
        status: String,
        page_note: Option<&str>,
        budget: usize,
    ) -> R<ToolOutput> {
        let st = &*self.st;
        let tab = st.active_tab().ok_or_else(|| failed("no open tab"))?;
        let mut obs = crate::frames::observe(&tab.page, self.session).await?;
        if !self
            .session
            .running
            .engine
            .engine()
            .can(crate::engine::Capability::Layout)
        {
            observe::forget_layout(&mut obs);
        }
        mask_secret_values(&mut obs, &self.ctx.secrets);
        let mut body = observe::render(&obs, budget);
        if let Some(n) = page_note {
            body = format!("{n}\n{body}");
        }
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

    /// The error for a ref or selector that cannot be used (`what` is the page library's error
    /// code), with a fresh observation so the model can pick again.
    pub(crate) async fn stale(&self, what: &str, r: &Value) -> ActionError {
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
            "no-frame" | "bad-frame" => "no frame with that number: `frame` names a frame line of the latest observation (\"f2\"). Current observation:".to_string(),
            other => format!("cannot use that element ({other}). Current observation:"),
        };
        match self.observed(head.clone(), DEFAULT_BUDGET).await {
            Ok(o) => failed(o.text),
            Err(_) => failed(head),
        }
    }

    /// The viewport point to act on for `target` (scrolled into view by the page library), and
    /// the library's answer (`ref`, `cover`, `navLikely`).
    pub(crate) async fn point(&self, page: &Page, target: &Value) -> R<(f64, f64, Value)> {
        let v = self.lib(page, "point", target).await?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            if e == "not-visible" {
                let r = v.get("ref").and_then(Value::as_str).unwrap_or("");
                return Err(failed(format!("{r} is not visible (hidden or zero-size), so it cannot be used; browser_state shows what is visible")));
            }
            return Err(self.stale(e, target).await);
        }
        let x = v.get("x").and_then(Value::as_f64).unwrap_or(0.0);
        let y = v.get("y").and_then(Value::as_f64).unwrap_or(0.0);
        Ok((x, y, v))
    }

    /// The target's box from a [`Cx::point`] answer (`box: {x, y, w, h}`), if it has one.
    pub(crate) fn target_box(info: &Value) -> Option<pointer::TargetBox> {
        let b = info.get("box")?;
        let n = |k: &str| b.get(k).and_then(Value::as_f64).filter(|v| v.is_finite());
        Some(pointer::TargetBox {
            x: n("x")?,
            y: n("y")?,
            w: n("w")?,
            h: n("h")?,
        })
    }

    /// Move forge's pointer in `page`'s tab from where it last was to (`x`, `y`) along
    /// intermediate points ([`pointer::approach`]), with `held` pressed when given.
    pub(crate) async fn move_pointer(
        &mut self,
        page: &Page,
        to: (f64, f64),
        held: Option<MouseButton>,
    ) -> R<()> {
        self.move_pointer_to(page, to, None, held).await
    }

    /// [`Cx::move_pointer`] onto a target whose box is known ([`pointer::approach`]: the last
    /// moves enter the box from outside).
    pub(crate) async fn move_pointer_to(
        &mut self,
        page: &Page,
        to: (f64, f64),
        target: Option<pointer::TargetBox>,
        held: Option<MouseButton>,
    ) -> R<()> {
        let from = self.pointer_at(page);
        let a = pointer::approach(from, to, target);
        self.move_quick(page, &a.quick, held.clone()).await?;
        self.move_along(page, &a.paced, held).await
    }

    /// The quick part of an approach ([`pointer::Approach::quick`]): sent together (with a held
    /// button, one by one: a drag's moves are what the page follows).
    pub(crate) async fn move_quick(
        &mut self,
        page: &Page,
        points: &[(f64, f64)],
        held: Option<MouseButton>,
    ) -> R<()> {
        if held.is_some() {
            return self.move_along(page, points, held).await;
        }
        self.unbuffer(page).await;
        let r = pointer::move_quick(page, points).await;
        if let Some(&last) = points.last() {
            self.set_pointer(page, last);
        }
        r
    }

    /// Move forge's pointer along `points` (the last one is where it rests).
    pub(crate) async fn move_along(
        &mut self,
        page: &Page,
        points: &[(f64, f64)],
        held: Option<MouseButton>,
    ) -> R<()> {
        self.unbuffer(page).await;
        let r = pointer::move_along(page, points, held).await;
        // Even after a failure part way, the pointer is somewhere on the path; the end is the
        // best guess for the next move's start.
        if let Some(&last) = points.last() {
            self.set_pointer(page, last);
        }
        r
    }

    /// Before the first pointer move in `page`'s tab: ask for unbuffered mouse input
    /// ([`pointer::unbuffer`]: each move then reaches the page when sent, not at the next
    /// frame). Once per tab; a refusal is not retried (moves then cost a frame each, as before).
    pub(crate) async fn unbuffer(&mut self, page: &Page) {
        let Some(tab) = self
            .st
            .tabs
            .iter_mut()
            .find(|t| t.page.target_id() == page.target_id())
        else {
            return;
        };
        if tab.unbuffered {
            return;
        }
        tab.unbuffered = true;
        let _ = pointer::unbuffer(page).await;
    }

    /// Where forge's pointer last was in `page`'s tab.
    pub(crate) fn pointer_at(&self, page: &Page) -> (f64, f64) {
        self.st
            .tabs
            .iter()
            .find(|t| t.page.target_id() == page.target_id())
            .map(|t| t.pointer)
            .unwrap_or((0.0, 0.0))
    }

    /// Record that forge's pointer in `page`'s tab is now at `at`.
    pub(crate) fn set_pointer(&mut self, page: &Page, at: (f64, f64)) {
        if let Some(t) = self
            .st
            .tabs
            .iter_mut()
            .find(|t| t.page.target_id() == page.target_id())
        {
            t.pointer = at;
        }
    }

    /// Before acting: turn a `{text}` condition into "appears anew", counting the text's
    /// occurrences now, so text that is already on the page (a heading that repeats a menu item's
    /// word) does not end the wait before the action had any effect.
    pub(crate) async fn wait_baseline(&self, w: Option<WaitFor>) -> R<Option<WaitFor>> {
        let Some(WaitFor::Text(text)) = w else {
            return Ok(w);
        };
        let page = self.page()?;
        let v = observe::call(&page, "waitState", &json!({"text": text})).await?;
        let before = v.get("count").and_then(Value::as_u64).unwrap_or(0);
        let doc = v.get("doc").and_then(Value::as_f64).unwrap_or(0.0);
        Ok(Some(WaitFor::NewText { text, before, doc }))
    }

    /// Wait for `w` in the active tab (bounded by [`WAIT_CAP`] and half the call's limit, in
    /// time and in number of checks). Returns the words for the status line.
    pub(crate) async fn wait(&self, w: &WaitFor) -> R<String> {
        let page = self.page()?;
        let cap = WAIT_CAP.min(self.limit / 2);
        let started = tokio::time::Instant::now();
        let (args, what) = match w {
            WaitFor::Ms(ms) => {
                let d = Duration::from_millis(*ms).min(cap);
                tokio::time::sleep(d).await;
                return Ok(format!("waited {} ms", d.as_millis()));
            }
            WaitFor::Download => {
                // The downloads themselves are reported on the lines after the status.
                return Ok(match self.session.downloads.settle_all(cap).await {
                    None => "no download was running".into(),
                    Some(true) => format!(
                        "waited {} ms until the downloads ended",
                        started.elapsed().as_millis()
                    ),
                    Some(false) => format!(
                        "waited {} ms (the wait_for limit); a download is still running",
                        started.elapsed().as_millis()
                    ),
                });
            }
            WaitFor::Text(t) => (json!({"text": t}), format!("text {t:?} appeared")),
            WaitFor::NewText { text, before, doc } => (
                json!({"text": text, "before": before, "doc": doc}),
                format!("text {text:?} appeared"),
            ),
            WaitFor::Gone(r) => (json!({"gone": r}), format!("{r} was gone")),
        };
        let max_checks = (cap.as_millis() / WAIT_POLL.as_millis()) as usize + 2;
        for _ in 0..max_checks {
            let v = observe::call(&page, "waitState", &args).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(match e {
                    "bad-ref" => invalid(format!(
                        "`wait_for.gone` needs a ref like e12 or f1e3, not {:?}",
                        args["gone"].as_str().unwrap_or("")
                    )),
                    other => failed(format!("wait_for could not be checked ({other})")),
                });
            }
            if v.get("met").and_then(Value::as_bool) == Some(true) {
                return Ok(format!(
                    "waited {} ms until {what}",
                    started.elapsed().as_millis()
                ));
            }
            if started.elapsed() >= cap {
                break;
            }
            tokio::time::sleep(WAIT_POLL).await;
        }
        let not = match w {
            WaitFor::Text(t) => format!("text {t:?} did not appear"),
            WaitFor::NewText { text, before: 0, .. } => format!("text {text:?} did not appear"),
            WaitFor::NewText { text, before, .. } => format!(
                "text {text:?} did not appear anew (it was on the page {before} time(s) before the action)"
            ),
            WaitFor::Gone(r) => format!("{r} was still there"),
            WaitFor::Ms(_) | WaitFor::Download => String::new(),
        };
        Ok(format!(
            "waited {} ms (the wait_for limit) but {not}; observed anyway",
            started.elapsed().as_millis()
        ))
    }

    /// Describe what an action led to, and switch to a tab it opened.
    pub(crate) async fn outcome(&mut self, out: &NavOutcome, page: &Page) -> R<String> {
        let limit = self.limit;
        if let Some(b) = &out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(b.clone())));
        }
        let mut parts = Vec::new();
        if out.download {
            // Its file (or why it was not kept) is reported on the lines after the status.
            parts.push("started a download".to_string());
        }
        if out.navigated {
            observe::wait_ready(page, limit / 5).await?;
            match (out.status, &out.failed) {
                // The document load that turned into the download ended so; the page is as it was.
                _ if out.became_download() => {}
                (_, Some(f)) => parts.push(format!("navigation failed ({f})")),
                (Some(s), _) => parts.push(format!("navigated (HTTP {s})")),
                (None, _) => parts.push("navigated".to_string()),
            }
        }
        let st = &mut *self.st;
        let new_tabs = self.session.sync_tabs(st).await;
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
}

fn page_dialog_count(st: &SessionState, page: &Page) -> usize {
    st.tabs
        .iter()
        .find(|t| t.page.target_id() == page.target_id())
        .map(|t| t.dialogs.lock().unwrap_or_else(|p| p.into_inner()).len())
        .unwrap_or(0)
}

/// Longest `wait_for` wait (and the largest `ms`).
pub(crate) const WAIT_CAP: Duration = Duration::from_millis(5000);
/// How often a `wait_for` condition is checked.
const WAIT_POLL: Duration = Duration::from_millis(50);

/// What to wait for after an action, before observing (`wait_for`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WaitFor {
    /// Until this text is in the page's rendered text.
    Text(String),
    /// Until this text appears anew: more occurrences than before the action, or any in a new
    /// document (the action navigated). Made from `Text` by [`Cx::wait_baseline`].
    NewText {
        text: String,
        /// Occurrences before the action.
        before: u64,
        /// The document they were counted in (its time origin).
        doc: f64,
    },
    /// Until this ref is detached or hidden.
    Gone(String),
    /// A fixed pause.
    Ms(u64),
    /// Until the session's running downloads have ended.
    Download,
}

/// The `wait_for` property of the tools that can wait after acting: its four forms and the cap
/// in one short description (no per-form schema, to keep `tools/list` small; [`wait_for_arg`]
/// checks the shape, the cap and "exactly one", and its errors show the forms).
pub(crate) fn wait_for_prop() -> Value {
    json!({
        "type": "object",
        "description": format!(
            "Then ≤{}s: {{text:s}}|{{gone:ref}}|{{ms:n}}|{{download:true}}",
            WAIT_CAP.as_secs()
        )
    })
}

/// The `wait_for` input, checked before acting (so a bad one changes nothing).
pub(crate) fn wait_for_arg(input: &Value) -> R<Option<WaitFor>> {
    let Some(w) = input.get("wait_for").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    const SHAPE: &str =
        "give `wait_for` as {\"text\": \"...\"}, {\"gone\": \"e12\"}, {\"ms\": 500} or {\"download\": true}";
    let obj = w
        .as_object()
        .ok_or_else(|| invalid(format!("`wait_for` must be an object; {SHAPE}")))?;
    if obj.len() != 1 {
        return Err(invalid(format!(
            "`wait_for` takes exactly one condition; {SHAPE}"
        )));
    }
    let cap = WAIT_CAP.as_millis() as u64;
    match obj.iter().next() {
        Some((k, Value::String(t))) if k == "text" && !t.is_empty() => {
            Ok(Some(WaitFor::Text(t.clone())))
        }
        Some((k, Value::String(r))) if k == "gone" && !r.trim().is_empty() => {
            Ok(Some(WaitFor::Gone(r.trim().to_string())))
        }
        Some((k, Value::Bool(true))) if k == "download" => Ok(Some(WaitFor::Download)),
        Some((k, v)) if k == "ms" => match v.as_u64() {
            Some(ms) if ms <= cap => Ok(Some(WaitFor::Ms(ms))),
            _ => Err(invalid(format!(
                "`wait_for.ms` must be a whole number of milliseconds from 0 to {cap}; for longer waits call browser_state with wait_for again"
            ))),
        },
        _ => Err(invalid(format!("unusable `wait_for`; {SHAPE}"))),
    }
}

/// The `ref`, `selector` and `frame` properties of a tool that acts on one element, with no
/// descriptions: a ref is shown in every observation, and `browser_navigate`'s description says
/// once that refs look like e12, frames like f2 and selectors are CSS (docs/benchmarks.md, "MCP").
pub(crate) fn target_props() -> serde_json::Map<String, Value> {
    let v = json!({
        "ref": {"type": "string"},
        "selector": {"type": "string"},
        "frame": {"type": "string"}
    });
    v.as_object().cloned().unwrap_or_default()
}

/// A field holding a secret shows `value=(secret NAME)`, also when the observation cut its value
/// (a cut value that is the start of a secret of the same full length). Page text, names and
/// titles are redacted here too, before rendering cuts them to the budget (a value cut in half
/// by the budget would no longer be recognised by the runtime's redactor on the call path).
fn mask_secret_values(obs: &mut observe::Observation, secrets: &forge_tools::Secrets) {
    if secrets.is_empty() {
        return;
    }
    let redact = |t: &mut String| {
        if let std::borrow::Cow::Owned(r) = secrets.redact(t) {
            *t = r;
        }
    };
    redact(&mut obs.title);
    redact(&mut obs.url);
    redact(&mut obs.text);
    for row in &mut obs.rows {
        redact(&mut row.text);
    }
    for e in &mut obs.elements {
        redact(&mut e.name);
        if let Some(h) = e.hint.as_mut() {
            redact(h);
        }
    }
    for e in &mut obs.elements {
        let Some(v) = e.state.get("value").and_then(Value::as_str) else {
            continue;
        };
        let full = e.state.get("valueLength").and_then(Value::as_u64);
        let name = match (v.strip_suffix('…'), full) {
            (Some(prefix), Some(n)) => secrets
                .iter()
                .find(|s| {
                    let sv = s.value.expose();
                    sv.chars().count() as u64 == n && sv.starts_with(prefix)
                })
                .map(|s| s.name.clone()),
            _ => secrets.name_of_value(v).map(str::to_string),
        };
        if let Some(name) = name {
            e.state
                .insert("value".into(), Value::String(format!("(secret {name})")));
            e.state.remove("valueLength");
        }
        // A value (or option, placeholder...) that holds a secret among other text.
        for v in e.state.values_mut() {
            secrets.redact_json(v);
        }
    }
}

/// An object schema with `props` and `required` (left out when empty: nothing is required).
/// No `"additionalProperties": false`: forge does not validate inputs against the schema, every
/// tool ignores unknown keys, and leaving it out keeps `tools/list` small (docs/benchmarks.md, "MCP").
pub(crate) fn schema(props: serde_json::Map<String, Value>, required: &[&str]) -> Value {
    if required.is_empty() {
        return json!({"type": "object", "properties": props});
    }
    json!({"type": "object", "properties": props, "required": required})
}

pub(crate) fn str_arg<'a>(input: &'a Value, key: &str) -> Option<&'a str> {
    input.get(key).and_then(Value::as_str)
}

/// `{"ref": ..}` or `{"selector": ..}` from the input (ref first), for the page library.
pub(crate) fn target_args(input: &Value) -> R<Value> {
    let r = str_arg(input, "ref")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let s = str_arg(input, "selector")
        .map(str::trim)
        .filter(|s| !s.is_empty());
    match (r, s) {
        (Some(r), _) => Ok(json!({"ref": r})),
        (None, Some(s)) => match str_arg(input, "frame")
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            Some(f) => Ok(json!({"selector": s, "frame": f})),
            None => Ok(json!({"selector": s})),
        },
        (None, None) => Err(invalid(
            "give `ref` (from the latest observation, e.g. \"e12\") or `selector` (CSS)",
        )),
    }
}

/// Wait two animation frames (bounded), so hover/click effects are painted before observing.
pub(crate) async fn settle_frames(page: &Page) {
    let _ = tokio::time::timeout(
        Duration::from_millis(200),
        observe::call(page, "ready", &Value::Null),
    )
    .await;
}

#[cfg(test)]
mod secret_mask_tests {
    use super::*;

    #[test]
    fn secrets_are_masked_before_the_budget_can_cut_them_in_half() {
        const PW: &str = "Pw9x2LmQ4vZ-long-enough-to-be-cut";
        let secrets = forge_tools::Secrets::new(
            vec![forge_tools::Secret {
                name: "portal_password".into(),
                value: forge_tools::SecretValue::new(PW.into()),
                origins: Vec::new(),
                hosts: vec!["x.example".into()],
            }],
            None,
        );
        let long = format!("{PW}{}", "x".repeat(80));
        let obs: observe::Observation = serde_json::from_value(json!({
            "url": "http://x.example/", "title": format!("Denied {PW}"),
            "viewport": {"width": 800.0, "height": 600.0},
            "scroll": {"x": 0.0, "y": 0.0, "width": 800.0, "height": 600.0},
            "elements": [{"ref": "e1", "role": "textbox", "name": "Note", "where": "in",
                          "state": {"value": format!("{}…", &long[..60]), "valueLength": long.chars().count()}},
                         {"ref": "e2", "role": "textbox", "name": "Secret", "where": "in",
                          "state": {"value": format!("{}…", &PW[..20]), "valueLength": PW.chars().count()}}],
            "frames": [],
            "text": format!("{} wrong password: {PW} {}", "word ".repeat(60), "tail ".repeat(40)),
        }))
        .expect("an observation");
        let mut masked = obs.clone();
        mask_secret_values(&mut masked, &secrets);
        let mut cut_seen = false;
        for budget in (400..2400).step_by(3) {
            let raw = observe::render(&obs, budget);
            let raw_text = raw.split("\ntext:\n").nth(1).unwrap_or("");
            cut_seen |= raw_text.contains(&PW[..6]) && !raw_text.contains(PW);
            let out = observe::render(&masked, budget);
            assert!(!out.contains(&PW[..6]), "budget {budget}: {out}");
        }
        assert!(
            cut_seen,
            "no budget cut the value in half; the test shows nothing"
        );
        let out = observe::render(&masked, 4000);
        assert!(
            out.contains("e2 textbox \"Secret\" value=\"(secret portal_password)\""),
            "{out}"
        );
        assert!(
            out.contains("wrong password: (secret portal_password)"),
            "{out}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_notice_goes_first_in_results_and_messages_but_not_in_a_timeout() {
        let out = ToolOutput {
            text: "navigated".into(),
            data: Some(json!({"tab": "t1"})),
        };
        let (r, carried) = with_crash_notice(Ok(out), "N");
        let out = r.expect("still ok");
        assert!(carried);
        assert_eq!(out.text, "notice: N\nnavigated");
        assert_eq!(out.data, Some(json!({"tab": "t1", "notice": "N"})));
        let (r, carried) = with_crash_notice(Err(ToolError::Failed("stale ref e1".into())), "N");
        assert!(carried);
        assert_eq!(
            r.expect_err("still an error").to_string(),
            "notice: N\nstale ref e1"
        );
        let (r, carried) = with_crash_notice(Err(ToolError::Timeout(Duration::from_secs(1))), "N");
        assert!(!carried, "kept for the next call");
        assert!(matches!(r, Err(ToolError::Timeout(_))));
    }

    #[test]
    fn schemas_are_objects_and_names_unique() {
        let mgr = Arc::new(BrowserManager::new(crate::BrowserConfig::default()));
        let tools = browser_tools(mgr, BrowserToolOptions::default());
        let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
        assert_eq!(names.len(), 18);
        for t in &tools {
            assert_eq!(t.input_schema()["type"], "object", "{}", t.name());
            assert!(!t.description().is_empty());
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 18);
    }
}
