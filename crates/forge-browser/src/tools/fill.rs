//! `browser_fill`: type a value into a text field with real key events (replacing its content),
//! refusing sensitive fields unless the agent allows them; optionally press Enter afterwards.
//! `secret: NAME` types a forge-held secret instead, only into a field whose own frame origin the
//! secret is bound to (a password field then needs no opt-in).

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use forge_tools::{ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{
    schema, target_args, target_props, wait_for_arg, wait_for_prop, BrowserAction, Cx,
    DEFAULT_BUDGET,
};
use crate::error::{failed, invalid, ActionError, R};
use crate::keys::{press_key, KeyPress};
use crate::navwatch::NavWatch;

pub(crate) struct Fill;

#[async_trait]
impl BrowserAction for Fill {
    fn name(&self) -> &'static str {
        "browser_fill"
    }

    fn description(&self) -> &'static str {
        "Type `value` into a text field with real keys, replacing it. Password/payment fields are refused unless allowed. Instead of `value`, `secret: NAME` types a secret forge holds (listed in the system prompt) into a field on an origin that secret is bound to."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert("value".into(), json!({"type": "string"}));
        p.insert(
            "secret".into(),
            json!({"type": "string", "description": "Name of a secret to type instead of `value`."}),
        );
        p.insert(
            "submit".into(),
            json!({"type": "boolean", "description": "Press Enter after."}),
        );
        p.insert("wait_for".into(), wait_for_prop());
        schema(p, &[])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let mut target = target_args(input)?;
        let wait = wait_for_arg(input)?;
        let wait = cx.wait_baseline(wait).await?;
        // The context reference outlives `cx`'s borrows below (the secret's value is read from it).
        let ctx = cx.ctx;
        let secret = match input.get("secret") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => {
                if input.get("value").is_some_and(|v| !v.is_null()) {
                    return Err(invalid("give either `value` or `secret`, not both"));
                }
                Some(ctx.secrets.get(name).ok_or_else(|| {
                    invalid(format!(
                        "there is no secret {name:?} for this agent; its secrets: {}",
                        ctx.secrets.names()
                    ))
                })?)
            }
            Some(_) => return Err(invalid("`secret` must be a secret's name (a string)")),
        };
        let value = match secret {
            Some(s) => s.value.expose(),
            None => input.get("value").and_then(Value::as_str).ok_or_else(|| {
                invalid("`value` (a string) or `secret` (a secret's name) is required")
            })?,
        };
        let page = cx.page()?;
        // A secret bound to the field's origin may go into a password field without the opt-in;
        // whether the origin is bound is checked below, before anything is typed.
        target["allowSensitive"] = json!(cx.options.allow_sensitive_fill || secret.is_some());
        let v = cx.lib(&page, "prepareFill", &target).await?;
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
                other => cx.stale(other, &target).await,
            });
        }
        if let Some(s) = secret {
            let origin = v.get("origin").and_then(Value::as_str).unwrap_or("");
            match forge_tools::BoundOrigin::of_url(origin).filter(|o| s.allows_origin(o)) {
                Some(o) => cx.ctx.secrets.record_use(
                    cx.ctx.task_id.as_deref(),
                    &s.name,
                    &o.to_string(),
                    "browser_fill",
                ),
                None => {
                    return Err(failed(format!(
                        "refused to fill {r} with secret {}: the field's frame origin is {}, and the secret is bound to {}; nothing was typed",
                        s.name,
                        if origin.is_empty() { "unknown" } else { origin },
                        s.bindings()
                    )))
                }
            }
        }
        if !v.get("focused").and_then(Value::as_bool).unwrap_or(false) {
            // The keys would go to whatever has focus instead (possibly a protected field).
            return Err(failed(format!("could not focus {r} (hidden, inert or not focusable), so nothing was typed; browser_state shows what is visible")));
        }
        if v.get("hadValue").and_then(Value::as_bool).unwrap_or(false) {
            press_key(&page, &KeyPress::named("Backspace", 0)?).await?;
        }
        let mut after_enter = false;
        for (n, ch) in value.chars().enumerate() {
            if after_enter || (secret.is_some() && n > 0) {
                // A secret: every key must reach the checked field; if focus moved (a page
                // script, a frame), stop before the next key goes elsewhere.
                // Enter can submit and load another page (whose focused field may be protected):
                // type on only while the target still has focus.
                let v = cx.lib(&page, "stillFocused", &json!({"ref": r})).await?;
                if v.get("focused").and_then(Value::as_bool) != Some(true) {
                    if let Some(s) = secret {
                        return Err(failed(format!("stopped after {n} of {} chars of secret {}: {r} lost focus while typing; the rest was not typed", value.chars().count(), s.name)));
                    }
                    return Err(failed(format!("stopped after {n} of {} chars: {r} lost focus after a newline (Enter) in the value; the rest was not typed. Use submit=true to press Enter after the value", value.chars().count())));
                }
            }
            if ch == '\n' {
                press_key(&page, &KeyPress::named("Enter", 0)?).await?;
                after_enter = true;
            } else if ch == '\t' {
                // As text: a Tab key event would move focus to the next field and type the rest
                // of the value there.
                page.execute(InsertTextParams::new("\t")).await?;
            } else {
                press_key(&page, &KeyPress::char(ch)).await?;
            }
        }
        if secret.is_some() {
            // Screenshots: a field holding a secret is drawn masked (discs) from now on, also a
            // plain text field.
            cx.lib(&page, "maskSecretField", &json!({"ref": r})).await?;
        }
        let after = cx.lib(&page, "valueOf", &json!({"ref": r})).await?;
        let len = after.get("length").and_then(Value::as_u64).unwrap_or(0);
        let want = value.chars().count() as u64;
        let mut status = match secret {
            Some(s) => format!("filled {r} with secret {} ({want} chars)", s.name),
            None => format!("filled {r} ({want} chars)"),
        };
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
            press_key(&page, &KeyPress::named("Enter", 0)?).await?;
            let out = watch
                .settle(cx.manager, Duration::from_millis(500), cx.limit * 3 / 5)
                .await;
            let what = cx.outcome(&out, &page).await?;
            status.push_str(&format!(
                "; pressed Enter: {}",
                if what.is_empty() {
                    "no navigation"
                } else {
                    &what
                }
            ));
        }
        if let Some(w) = &wait {
            status.push_str(&format!("; {}", cx.wait(w).await?));
        }
        cx.observed(status, DEFAULT_BUDGET).await
    }
}
