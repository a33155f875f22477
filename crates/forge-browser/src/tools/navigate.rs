//! `browser_navigate`: open a URL in the active tab, wait for it (and optionally for a text or
//! selector), report the HTTP status and observe.

use std::time::Duration;

use async_trait::async_trait;
use forge_tools::{ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{schema, str_arg, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, ActionError, R};
use crate::navwatch::{blocked_from_error, NavWatch};
use crate::observe;

pub(crate) struct Navigate;

#[async_trait]
impl BrowserAction for Navigate {
    fn name(&self) -> &'static str {
        "browser_navigate"
    }

    fn description(&self) -> &'static str {
        "Open a URL and observe it (text, refs like e12, frames like f2). Selectors are CSS; `wait_for`: CSS or text."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("url".into(), json!({"type": "string"}));
        p.insert("wait_for".into(), json!({"type": "string"}));
        p.insert(
            "timeout_ms".into(),
            json!({"type": "integer", "minimum": 1, "default": 45000}),
        );
        schema(p, &["url"])
    }

    fn navigates(&self) -> bool {
        true
    }

    fn requested_limit(&self, input: &Value) -> Option<Duration> {
        input
            .get("timeout_ms")
            .and_then(Value::as_u64)
            .map(Duration::from_millis)
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let status = self.act(cx, input).await?;
        cx.observed(status, DEFAULT_BUDGET).await
    }
}

impl Navigate {
    /// What `browser_navigate` does before it observes (also the form tools' page loads): the status words.
    pub(crate) async fn act(&self, cx: &mut Cx<'_>, input: &Value) -> R<String> {
        let limit = cx.limit;
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
        let page = cx.page()?;
        let dl_before = cx.session.downloads.begun();
        let mut watch = NavWatch::new(&page).await?;
        // `Page.navigate` goes through forge's own CDP link, not the tab's chromiumoxide session:
        // chromiumoxide answers a `Page.navigate` sent through a `Page` only when the main frame
        // and every child frame reached `load`, so a frame that never loads (an iframe of a
        // blocked scheme: file:, view-source:, chrome:) held the call for its 30 s time limit,
        // and a navigation abandoned by a time limit queued the next one behind it. Chromium
        // itself answers when the navigation commits (or fails); NavWatch waits for the load.
        let Some(nav) =
            crate::frames::navigate(&page, cx.session, url.as_str(), limit * 3 / 5).await?
        else {
            return Err(failed(format!(
                "navigation to {url} did not get a response within {:.0} s (the load was stopped)",
                (limit * 3 / 5).as_secs_f64()
            )));
        };
        if let Some(err) = nav.error_text.filter(|e| !e.is_empty()) {
            if let Some(b) = blocked_from_error(cx.manager, url.as_str(), &err) {
                return Err(ActionError::Tool(ToolError::Blocked(b)));
            }
            // A URL that is a download (an attachment, a type Chromium does not show, a PDF in
            // headless Chromium) aborts the load and begins a download: wait for it to begin
            // (ends as soon as it does; only on an aborted load), then report it like a click's.
            if err.contains("ERR_ABORTED")
                && cx
                    .session
                    .downloads
                    .begun_within(
                        &cx.session.running.downloads,
                        dl_before,
                        Duration::from_secs(3),
                    )
                    .await
            {
                return Ok(format!(
                    "navigated: {url} is a download; the page stays as it was"
                ));
            }
            // Let the error page settle, then report.
            return Err(failed(format!("navigation to {url} failed: {err}")));
        }
        // A new document is on its way when Chromium names its loader (a same-document navigation
        // has none): then its start is certain, and a machine under load may deliver the event
        // late, so wait longer for it than for a navigation that may not happen at all.
        let quick = if nav.loader_id.is_some() {
            (limit / 5).clamp(Duration::from_secs(2), Duration::from_secs(10))
        } else {
            Duration::from_secs(2)
        };
        let out = watch.settle(cx.manager, quick, limit * 3 / 5).await;
        if let Some(b) = out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(b)));
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
        Ok(status)
    }
}
