//! `browser_fill`: type a value into a text field with real key events (replacing its content),
//! refusing sensitive fields unless the agent allows them; optionally press Enter afterwards.
//! `secret: NAME` types a forge-held secret instead, only into a field whose own frame origin the
//! secret is bound to (a password field then needs no opt-in).

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::InsertTextParams;
use chromiumoxide::Page;
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
        "Type `value` (or secret `secret`, on its origins only) into a field with real keys, replacing it; `submit` presses Enter. Password/card fields only if allowed. Formats: yyyy-mm-dd, hh:mm, yyyy-mm-ddThh:mm, yyyy-mm, yyyy-Www, #rrggbb."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert("value".into(), json!({"type": "string"}));
        p.insert("secret".into(), json!({"type": "string"}));
        p.insert("submit".into(), json!({"type": "boolean"}));
        p.insert("wait_for".into(), wait_for_prop());
        schema(p, &[])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let status = self.act(cx, input).await?;
        cx.observed(status, DEFAULT_BUDGET).await
    }
}

impl Fill {
    /// What `browser_fill` does before it observes (also the form rows' fills, with fill safety): the status words.
    pub(crate) async fn act(&self, cx: &mut Cx<'_>, input: &Value) -> R<String> {
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
        if let (Some(kind), Some(s)) = (v.get("typed").and_then(Value::as_str), secret) {
            // A date, time or colour field is set through its own value, and the status echoes
            // the value; secrets are credentials, typed into text fields only.
            return Err(failed(format!(
                "refused to fill {r} with secret {}: it is a {kind} field, and secrets are typed into text fields only; nothing was changed",
                s.name
            )));
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
        let mut status = match v.get("typed").and_then(Value::as_str) {
            Some(kind) => set_typed(cx, &page, &r, kind, value).await?,
            None => type_text(cx, &page, &r, &v, value, secret).await?,
        };
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
        Ok(status)
    }
}

/// Type `value` into the focused text field `r` with real keys (`v`: prepareFill's answer);
/// `secret`: the secret `value` is, whose every key must reach the checked field. Returns the
/// status words.
async fn type_text(
    cx: &mut Cx<'_>,
    page: &Page,
    r: &str,
    v: &Value,
    value: &str,
    secret: Option<&forge_tools::Secret>,
) -> R<String> {
    if !v.get("focused").and_then(Value::as_bool).unwrap_or(false) {
        // The keys would go to whatever has focus instead (possibly a protected field).
        return Err(failed(format!("could not focus {r} (hidden, inert or not focusable), so nothing was typed; browser_state shows what is visible")));
    }
    if v.get("hadValue").and_then(Value::as_bool).unwrap_or(false) {
        press_key(page, &KeyPress::named("Backspace", 0)?).await?;
    }
    let mut after_enter = false;
    for (n, ch) in value.chars().enumerate() {
        if after_enter || (secret.is_some() && n > 0) {
            // A secret: every key must reach the checked field; if focus moved (a page script, a
            // frame), stop before the next key goes elsewhere.
            // Enter can submit and load another page (whose focused field may be protected):
            // type on only while the target still has focus.
            let v = cx.lib(page, "stillFocused", &json!({"ref": r})).await?;
            if v.get("focused").and_then(Value::as_bool) != Some(true) {
                if let Some(s) = secret {
                    return Err(failed(format!("stopped after {n} of {} chars of secret {}: {r} lost focus while typing; the rest was not typed", value.chars().count(), s.name)));
                }
                return Err(failed(format!("stopped after {n} of {} chars: {r} lost focus after a newline (Enter) in the value; the rest was not typed. Use submit=true to press Enter after the value", value.chars().count())));
            }
        }
        if ch == '\n' {
            press_key(page, &KeyPress::named("Enter", 0)?).await?;
            after_enter = true;
        } else if ch == '\t' {
            // As text: a Tab key event would move focus to the next field and type the rest
            // of the value there.
            page.execute(InsertTextParams::new("\t")).await?;
        } else {
            press_key(page, &KeyPress::char(ch)).await?;
        }
    }
    if secret.is_some() {
        // Screenshots: a field holding a secret is drawn masked (discs) from now on, also a plain
        // text field.
        cx.lib(page, "maskSecretField", &json!({"ref": r})).await?;
    }
    let after = cx.lib(page, "valueOf", &json!({"ref": r})).await?;
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
    Ok(status)
}

/// Set a date, time, month, week or colour input `r` (of input type `kind`) to `value`, checked
/// against the type's format first, through the input's own value (`setTyped` in the page
/// library: focus, the native value setter, `input` and `change`). Chromium's editors for these
/// types are segmented by locale (month/day/year order, 12- or 24-hour clock), so typed keys
/// land in the wrong segment; the value property takes the one format the HTML standard gives
/// each type. Returns the status words, with the value as the page reads it back.
async fn set_typed(cx: &mut Cx<'_>, page: &Page, r: &str, kind: &str, value: &str) -> R<String> {
    let normal = typed_value(kind, value).map_err(|why| {
        invalid(format!(
            "{r} is a {kind} field (<input type={kind}>): {why}; nothing was changed"
        ))
    })?;
    let v = cx
        .lib(page, "setTyped", &json!({"ref": r, "value": normal}))
        .await?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return Err(match e {
            "disabled" => failed(format!("{r} is disabled or read-only")),
            other => cx.stale(other, &json!({"ref": r})).await,
        });
    }
    let back = v.get("value").and_then(Value::as_str).unwrap_or("");
    if back != normal {
        return Err(failed(format!(
            "{r} did not take {normal:?}: the field reads {back:?} (Chromium empties a {kind} value it cannot parse, such as a day the month does not have)"
        )));
    }
    let mut status = format!(
        "set {r} ({kind}) to {normal} through the field's own value; the page reads back {back}"
    );
    if v.get("valid").and_then(Value::as_bool) == Some(false) {
        status.push_str(" (the field reports it invalid: outside its min/max or step, so a form will not submit it)");
    }
    Ok(status)
}

/// `value` in the format of input type `kind` (normalised: `T` between date and time, lower-case
/// colour), or why it is not.
fn typed_value(kind: &str, value: &str) -> Result<String, String> {
    let v = value.trim();
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    let num = |s: &str| s.parse::<u32>().unwrap_or(u32::MAX);
    let date = |s: &str| -> bool {
        let p: Vec<&str> = s.split('-').collect();
        if p.len() != 3 || !digits(p[0], 4) || !digits(p[1], 2) || !digits(p[2], 2) {
            return false;
        }
        let (y, m, d) = (num(p[0]), num(p[1]), num(p[2]));
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let days = match m {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return false,
        };
        y >= 1 && (1..=days).contains(&d)
    };
    let time = |s: &str| -> bool {
        let (hms, frac) = match s.split_once('.') {
            Some((a, f)) => (a, Some(f)),
            None => (s, None),
        };
        let p: Vec<&str> = hms.split(':').collect();
        let ok = match p.as_slice() {
            [h, m] => digits(h, 2) && digits(m, 2) && num(h) < 24 && num(m) < 60,
            [h, m, sec] => {
                digits(h, 2)
                    && digits(m, 2)
                    && digits(sec, 2)
                    && num(h) < 24
                    && num(m) < 60
                    && num(sec) < 60
            }
            _ => false,
        };
        ok && frac.is_none_or(|f| {
            (1..=3).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()) && p.len() == 3
        })
    };
    let (ok, normal, format, example) = match kind {
        "date" => (date(v), v.to_string(), "yyyy-mm-dd", "2025-04-14"),
        "time" => (
            time(v),
            v.to_string(),
            "hh:mm or hh:mm:ss (24-hour)",
            "14:30",
        ),
        "datetime-local" => {
            let n = v.replacen(' ', "T", 1);
            let ok = n.split_once('T').is_some_and(|(d, t)| date(d) && time(t));
            (ok, n, "yyyy-mm-ddThh:mm (24-hour)", "2025-04-14T14:30")
        }
        "month" => {
            let ok = v.split_once('-').is_some_and(|(y, m)| {
                digits(y, 4) && num(y) >= 1 && digits(m, 2) && (1..=12).contains(&num(m))
            });
            (ok, v.to_string(), "yyyy-mm", "2025-04")
        }
        "week" => {
            let ok = v.split_once("-W").is_some_and(|(y, w)| {
                digits(y, 4) && num(y) >= 1 && digits(w, 2) && (1..=53).contains(&num(w))
            });
            (ok, v.to_string(), "yyyy-Www (ISO week)", "2025-W16")
        }
        "color" => {
            let ok =
                v.len() == 7 && v.starts_with('#') && v[1..].bytes().all(|b| b.is_ascii_hexdigit());
            (ok, v.to_ascii_lowercase(), "#rrggbb (hex)", "#1e90ff")
        }
        other => return Err(format!("forge cannot set input type {other}")),
    };
    if ok {
        Ok(normal)
    } else {
        Err(format!(
            "give the value as {format}, e.g. {example} (got {value:?})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::typed_value;

    #[test]
    fn typed_values_are_checked_and_normalised() {
        assert_eq!(typed_value("date", "1961-06-03"), Ok("1961-06-03".into()));
        assert_eq!(typed_value("date", "2024-02-29"), Ok("2024-02-29".into()));
        for bad in [
            "06/03/1961",
            "1961-6-3",
            "2023-02-29",
            "2025-13-01",
            "2025-04-31",
            "",
            "10603-12-06",
        ] {
            let e = typed_value("date", bad).expect_err(bad);
            assert!(e.contains("yyyy-mm-dd"), "{e}");
        }
        assert_eq!(typed_value("time", "14:30"), Ok("14:30".into()));
        assert_eq!(
            typed_value("time", "07:05:09.250"),
            Ok("07:05:09.250".into())
        );
        for bad in ["2:30 PM", "24:00", "14:60", "14:30.5"] {
            assert!(typed_value("time", bad).is_err(), "{bad}");
        }
        assert_eq!(
            typed_value("datetime-local", "2025-04-14 09:15"),
            Ok("2025-04-14T09:15".into())
        );
        assert!(typed_value("datetime-local", "2025-04-14").is_err());
        assert_eq!(typed_value("month", "2025-04"), Ok("2025-04".into()));
        assert!(typed_value("month", "2025-4").is_err());
        assert_eq!(typed_value("week", "2025-W16"), Ok("2025-W16".into()));
        assert!(typed_value("week", "2025-W54").is_err());
        assert_eq!(typed_value("color", "#1E90FF"), Ok("#1e90ff".into()));
        for bad in ["red", "#fff", "#12345g", "1e90ff"] {
            let e = typed_value("color", bad).expect_err(bad);
            assert!(e.contains("#rrggbb"), "{e}");
        }
    }
}
