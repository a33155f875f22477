//! `browser_press`: press a key or chord (optionally after focusing an element), refusing keys
//! that could type into a sensitive field unless the agent allows it.

use std::time::Duration;

use async_trait::async_trait;
use forge_tools::ToolOutput;
use serde_json::{json, Value};

use super::{schema, str_arg, wait_for_arg, wait_for_prop, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::clipboard::ClipOp;
use crate::error::{failed, invalid, R};
use crate::keys::{press_key, KeyPress};
use crate::navwatch::NavWatch;

pub(crate) struct Press;

#[async_trait]
impl BrowserAction for Press {
    fn name(&self) -> &'static str {
        "browser_press"
    }

    fn description(&self) -> &'static str {
        "Press `key` (Enter, ArrowDown, Control+A...), after focusing `ref` if given."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("key".into(), json!({"type": "string"}));
        p.insert("ref".into(), json!({"type": "string"}));
        p.insert("wait_for".into(), wait_for_prop());
        schema(p, &["key"])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let k = str_arg(input, "key")
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("`key` is required (e.g. Enter, Tab, Control+A)"))?;
        let press = KeyPress::parse(k)?;
        let wait = wait_for_arg(input)?;
        let wait = cx.wait_baseline(wait).await?;
        let page = cx.page()?;
        if let Some(r) = str_arg(input, "ref").filter(|s| !s.is_empty()) {
            let t = json!({"ref": r});
            let v = cx.lib(&page, "focusRef", &t).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(cx.stale(e, &t).await);
            }
        }
        if !cx.options.allow_sensitive_fill && !press.edits_nothing() {
            // Pressing keys one by one must not do what browser_fill refuses.
            let why = crate::frames::focus_sensitivity(&page, cx.session).await?;
            if !why.is_empty() {
                return Err(failed(format!(
                    "refused to press {k}: the focused field is a sensitive field ({why}). forge does not type into password, payment-card or one-time-code fields by default. To allow it, the agent's browser skill must opt in with `allow_sensitive_fill: true` under `metadata.forge.guardrails.browser` in its SKILL.md (see docs/browser.md, \"Fill safety\"); otherwise ask the user to complete this field."
                )));
            }
        }
        let mut watch = NavWatch::new(&page).await?.downloads(cx.session);
        // Enter often submits a form; give its navigation time to start.
        let quick = if press.key == "Enter" {
            Duration::from_millis(300)
        } else {
            Duration::ZERO
        };
        let clip = crate::clipboard::op_of(&press);
        // Chromium's clipboard is shared by all sessions: hold it for the whole copy or paste
        // (see clipboard.rs).
        let running = cx.session.running.clone();
        let _clip_lock = match clip {
            Some(_) => Some(running.clipboard.lock().await),
            None => None,
        };
        match clip {
            Some(ClipOp::Paste) => crate::clipboard::put(&page, &cx.st.clipboard).await?,
            Some(ClipOp::Copy | ClipOp::Cut) => crate::clipboard::arm(&page).await?,
            None => {}
        }
        let pressed = press_key(&page, &press).await;
        let mut clip_note = String::new();
        if let Some(op) = clip {
            if op != ClipOp::Paste {
                match crate::clipboard::take(&page).await {
                    Ok(Some(t)) => {
                        clip_note = format!(
                            "; {} {} chars to this session's clipboard",
                            if op == ClipOp::Cut { "cut" } else { "copied" },
                            t.chars().count()
                        );
                        cx.st.clipboard = t;
                    }
                    _ => clip_note = "; no copy reached the page's top document (nothing selected there, or the focus is in a cross-origin frame), so this session's clipboard is unchanged".into(),
                }
            }
            // Whatever happened, leave nothing of this session in the shared clipboard. Should
            // that fail, nothing leaks through forge: every paste writes its own session's text
            // first.
            if crate::clipboard::put(&page, "").await.is_err() {
                clip_note.push_str("; the browser clipboard could not be emptied afterwards");
            }
        }
        pressed?;
        if quick.is_zero() {
            // As for a click: let the work the key queued run, then look, with no fixed wait.
            crate::observe::let_page_run(&page, Duration::from_millis(500)).await;
        }
        let out = watch.settle(cx.manager, quick, cx.limit * 3 / 5).await;
        let what = cx.outcome(&out, &page).await?;
        let mut status = format!(
            "pressed {k}{}{clip_note}",
            if what.is_empty() {
                String::new()
            } else {
                format!(": {what}")
            }
        );
        if let Some(w) = &wait {
            status.push_str(&format!("; {}", cx.wait(w).await?));
        }
        cx.observed(status, DEFAULT_BUDGET).await
    }
}
