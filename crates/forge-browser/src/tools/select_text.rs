//! `browser_select_text`: select text in an element with real mouse events (press before the
//! first character, move through intermediate points, release after the last), so pages that
//! listen to mousedown/mouseup/selectionchange see a person's selection; then report what the
//! page's selection holds and a fresh observation.
//!
//! The points come from the page library (`selectTextPlan` in observe.js, isolated world): the
//! text's character rects (`Range.getClientRects`) after scrolling it into view. A selection
//! taller than the viewport is made by pressing and releasing before the first character, then
//! scrolling to the last one and shift-clicking after it.

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::Page;
use forge_tools::{fence, ToolOutput};
use serde_json::{json, Value};

use super::{schema, settle_frames, target_args, target_props, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, R};
use crate::observe;
use crate::pointer::mouse;

/// Intermediate pointer positions between press and release.
const DRAG_STEPS: usize = 8;
/// Longest `text` accepted.
const MAX_TEXT: usize = 10_000;
/// Shift in CDP's modifier bit set.
const SHIFT: i64 = 8;

pub(crate) struct SelectText;

#[async_trait]
impl BrowserAction for SelectText {
    fn name(&self) -> &'static str {
        "browser_select_text"
    }

    fn description(&self) -> &'static str {
        "Mouse-select an element's text, or phrase `text` in it (then Control+C copies)."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert("text".into(), json!({"type": "string"}));
        p.insert(
            "occurrence".into(),
            json!({"type": "integer", "minimum": 1, "default": 1}),
        );
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let mut args = target_args(input)?;
        if let Some(t) = input.get("text").filter(|t| !t.is_null()) {
            let t = t
                .as_str()
                .ok_or_else(|| invalid("`text` must be a string (the phrase to select)"))?;
            if t.trim().is_empty() {
                return Err(invalid(
                    "`text` is empty; leave it out to select the whole element, or give the phrase to select",
                ));
            }
            if t.chars().count() > MAX_TEXT {
                return Err(invalid(format!(
                    "`text` is longer than {MAX_TEXT} characters; select the whole element instead (leave `text` out)"
                )));
            }
            args["text"] = json!(t);
        }
        let occurrence = match input.get("occurrence") {
            None | Some(Value::Null) => 1,
            Some(v) => v.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
                invalid("`occurrence` must be a whole number from 1 (1 is the first match)")
            })?,
        };
        args["occurrence"] = json!(occurrence);
        let page = cx.page()?;
        let plan = observe::call(&page, "selectTextPlan", &args).await?;
        let r = plan
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(e) = plan.get("error").and_then(Value::as_str) {
            return Err(plan_error(cx, e, &r, &plan, input, &args, occurrence).await);
        }
        let (sx, sy) = xy(&plan["start"]);
        let (ex, ey) = xy(&plan["end"]);
        let end_in_view = plan
            .get("endInView")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let expected = plan
            .get("expected")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let count = plan.get("count").and_then(Value::as_u64).unwrap_or(1);

        // Approach the first character along a path from where the pointer last was.
        cx.move_pointer(&page, (sx, sy), None).await?;
        mouse(
            &page,
            DispatchMouseEventType::MousePressed,
            sx,
            sy,
            Some(MouseButton::Left),
            1,
        )
        .await?;
        let how = if end_in_view {
            for i in 1..=DRAG_STEPS {
                let f = i as f64 / (DRAG_STEPS + 1) as f64;
                mouse(
                    &page,
                    DispatchMouseEventType::MouseMoved,
                    sx + (ex - sx) * f,
                    sy + (ey - sy) * f,
                    Some(MouseButton::Left),
                    1,
                )
                .await?;
            }
            mouse(
                &page,
                DispatchMouseEventType::MouseMoved,
                ex,
                ey,
                Some(MouseButton::Left),
                1,
            )
            .await?;
            mouse(
                &page,
                DispatchMouseEventType::MouseReleased,
                ex,
                ey,
                Some(MouseButton::Left),
                1,
            )
            .await?;
            cx.set_pointer(&page, (ex, ey));
            "mouse drag"
        } else {
            // Taller than the viewport: anchor before the first character, scroll to the last and
            // extend with a shift-click after it.
            mouse(
                &page,
                DispatchMouseEventType::MouseReleased,
                sx,
                sy,
                Some(MouseButton::Left),
                1,
            )
            .await?;
            let mut end_args = args.clone();
            end_args["ref"] = json!(r);
            end_args["phase"] = json!("end");
            let end = observe::call(&page, "selectTextPlan", &end_args).await?;
            if end.get("error").is_some()
                || !end.get("inView").and_then(Value::as_bool).unwrap_or(false)
            {
                return Err(failed(format!(
                    "started a selection in {r}, but the end of the text could not be brought into view to finish it; select a shorter phrase with `text`"
                )));
            }
            let (ex, ey) = xy(&end);
            cx.move_pointer(&page, (ex, ey), None).await?;
            shift_click(&page, ex, ey).await?;
            "press before the first character, shift-click after the last (the text is taller than the window)"
        };
        settle_frames(&page).await;

        let got = observe::call(&page, "selectionText", &json!({"ref": r})).await?;
        let selected = got
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let matches = squash(&selected) == squash(&expected);
        let which = if count > 1 {
            format!(" (occurrence {occurrence} of {count})")
        } else {
            String::new()
        };
        let status = if matches {
            format!(
                "selected {} chars of text in {r}{which} with a {how}",
                selected.chars().count()
            )
        } else if selected.trim().is_empty() {
            format!(
                "did a {how} over the text in {r}{which}, but the page's selection is empty afterwards (the page may forbid selecting it, e.g. with user-select: none, or clear the selection on mouseup)"
            )
        } else {
            format!(
                "did a {how} over the text in {r}{which}, but the page's selection ({} chars) differs from the requested text ({} chars) (user-select rules or page scripts may change it); both are below",
                selected.chars().count(),
                expected.chars().count()
            )
        };
        let detail = if matches {
            format!("selected text: {}", quote_clip(&selected))
        } else {
            format!(
                "requested text: {}\npage selection: {}",
                quote_clip(&expected),
                quote_clip(&selected)
            )
        };
        let o = cx.observed(status.clone(), DEFAULT_BUDGET).await?;
        let rest = o.text.strip_prefix(&status).unwrap_or(&o.text);
        let text = format!(
            "{status}\n{}{rest}",
            fence::wrap("source=browser selection", &detail)
        );
        Ok(ToolOutput {
            text,
            data: Some(json!({
                "tab": o.data.as_ref().and_then(|d| d.get("tab")).cloned().unwrap_or(Value::Null),
                "status": status,
                "ref": r,
                "selected_chars": selected.chars().count(),
                "matches_request": matches,
            })),
        })
    }
}

/// The error for a plan the page library refused (`e` is its error code).
async fn plan_error(
    cx: &Cx<'_>,
    e: &str,
    r: &str,
    plan: &Value,
    input: &Value,
    args: &Value,
    occurrence: u64,
) -> crate::error::ActionError {
    match e {
        "form-field" => failed(format!(
            "{r} is a form field; browser_select_text selects page text. To select a field's content, use browser_press with key Control+A and ref {r}"
        )),
        "not-visible" => failed(format!(
            "{r} (or the text asked for in it) is not visible, even after scrolling it into view (hidden, zero-size or clipped); browser_state shows what is visible"
        )),
        "no-text" => failed(format!(
            "{r} has no visible text to select; pick the element that holds the text (a paragraph, list item or cell), or pass a CSS `selector` for it"
        )),
        "covered" => {
            let cover = plan.get("cover").and_then(Value::as_str).unwrap_or("");
            failed(format!(
                "did not select in {r}: another element covers the start of the text, so the mouse would press on that instead. Close or scroll past the cover (often a banner or dialog). The cover: {}",
                fence::wrap("source=browser", cover)
            ))
        }
        "not-found" => {
            let count = plan.get("count").and_then(Value::as_u64).unwrap_or(0);
            let folded = plan.get("ignoringCase").and_then(Value::as_u64).unwrap_or(0);
            let excerpt = plan.get("excerpt").and_then(Value::as_str).unwrap_or("");
            let asked = input.get("text").and_then(Value::as_str).unwrap_or("");
            let mut msg = if count == 0 {
                format!("the text asked for is not in {r} (0 occurrences")
            } else {
                format!(
                    "occurrence {occurrence} was asked for, but {r} holds the text only {count} time(s) (occurrences 1 to {count}"
                )
            };
            if folded > count {
                msg.push_str(&format!(
                    "; {folded} when ignoring upper/lower case: match the page's case"
                ));
            }
            msg.push_str("). Whitespace is ignored when matching, letters are not.");
            let shown = format!(
                "asked: {}\nthe element's text begins: {}",
                quote_clip(asked),
                quote_clip(excerpt)
            );
            failed(format!(
                "{msg}\n{}",
                fence::wrap("source=browser", &shown)
            ))
        }
        other => cx.stale(other, args).await,
    }
}

async fn shift_click(page: &Page, x: f64, y: f64) -> R<()> {
    for kind in [
        DispatchMouseEventType::MousePressed,
        DispatchMouseEventType::MouseReleased,
    ] {
        let p = DispatchMouseEventParams::builder()
            .r#type(kind)
            .x(x)
            .y(y)
            .button(MouseButton::Left)
            .buttons(1)
            .click_count(1)
            .modifiers(SHIFT)
            .build()
            .map_err(failed)?;
        page.execute(p).await?;
    }
    Ok(())
}

fn xy(v: &Value) -> (f64, f64) {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    (f("x"), f("y"))
}

/// The text without any whitespace (how selections are compared: line breaks between blocks
/// differ between a Range's and a Selection's text).
fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// `s` JSON-quoted, cut to 2,000 characters.
fn quote_clip(s: &str) -> String {
    const MAX: usize = 2000;
    let n = s.chars().count();
    let cut: String = s.chars().take(MAX).collect();
    let q = serde_json::to_string(&cut).unwrap_or_default();
    if n > MAX {
        format!("{q} (… {} more chars)", n - MAX)
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selections_compare_without_whitespace_and_quotes_are_bounded() {
        assert_eq!(squash("brown\n fox\tjumps"), "brownfoxjumps");
        assert_eq!(quote_clip("a\"b"), "\"a\\\"b\"");
        let long = "x".repeat(2500);
        let q = quote_clip(&long);
        assert!(q.ends_with("(… 500 more chars)"), "{q}");
    }
}
