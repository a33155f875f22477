//! `browser_form_row {schema, row}`: one row of a batch. Open the form, check its fingerprint,
//! fill each field by the schema through the browser tools' own code paths (real key events,
//! fill safety, `secret` references), step through a wizard, submit, and judge what the page
//! says (`judge.js`). No model is involved.
//!
//! The answer's data says `status` (`done`, `failed`, `uncertain`, `changed`), `sent` (whether
//! the submit may have reached the site: false when the row failed before the submit, when the
//! browser's own validation kept the form from being sent, or when the egress policy refused
//! the request), `message` and, for `changed`, `changes` (what differs from the schema).

use std::time::Duration;

use async_trait::async_trait;
use forge_tools::{ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{learn_page, FieldKind, FormField, FormSchema};
use crate::error::{invalid, ActionError, R};
use crate::tools::{schema, BrowserAction, Cx};

/// The judging script (an expression: a function of one argument).
const JUDGE: &str = include_str!("judge.js");

/// The name of the row tool.
pub const ROW_TOOL: &str = "browser_form_row";

/// How long the page gets to show what a submit without navigation led to.
const JUDGE_WAIT: Duration = Duration::from_secs(3);
/// How often it is looked at meanwhile.
const JUDGE_POLL: Duration = Duration::from_millis(100);

pub(super) struct Row;

/// How a row ended (the tool's data).
struct Outcome {
    status: &'static str,
    sent: bool,
    message: String,
    changes: Vec<String>,
}

impl Outcome {
    fn failed_unsent(message: String) -> Self {
        Outcome {
            status: "failed",
            sent: false,
            message,
            changes: vec![],
        }
    }
}

#[async_trait]
impl BrowserAction for Row {
    fn name(&self) -> &'static str {
        ROW_TOOL
    }

    fn description(&self) -> &'static str {
        "Fill and submit one row of values into a learned form (FormSchema) and judge the page's answer."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("schema".into(), json!({"type": "object"}));
        p.insert("row".into(), json!({"type": "object"}));
        schema(p, &["schema", "row"])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let form: FormSchema =
            serde_json::from_value(input.get("schema").cloned().unwrap_or(Value::Null))
                .map_err(|e| invalid(format!("`schema` is not a FormSchema: {e}")))?;
        let row = input
            .get("row")
            .and_then(Value::as_object)
            .ok_or_else(|| invalid("`row` must be an object of field keys to values"))?;
        let o = match run_row(cx, &form, row).await {
            Ok(o) => o,
            // A refusal by the egress policy: the request never left forge.
            Err((_, ActionError::Tool(ToolError::Blocked(b)))) => {
                Outcome::failed_unsent(format!("refused by the egress policy: {}", b.reason()))
            }
            Err((false, e)) => Outcome::failed_unsent(ToolError::from(e).to_string()),
            Err((true, e)) => Outcome {
                status: "uncertain",
                sent: true,
                message: format!("the submit was clicked, then: {}", ToolError::from(e)),
                changes: vec![],
            },
        };
        Ok(ToolOutput {
            text: format!("row {}: {}", o.status, o.message),
            data: Some(json!({
                "status": o.status,
                "sent": o.sent,
                "message": o.message,
                "changes": o.changes,
            })),
        })
    }
}

/// A row's value as text for a field (`None`: leave the field as it is).
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) if s.is_empty() => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Whether a checkbox value asks for it to be checked.
fn truthy(v: &Value, own: Option<&str>) -> Option<bool> {
    match v {
        Value::Null => None,
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_f64() != Some(0.0)),
        Value::String(s) => {
            let s = s.trim().to_ascii_lowercase();
            if s.is_empty() {
                return None;
            }
            Some(
                ["true", "yes", "y", "1", "on", "x", "checked"].contains(&s.as_str())
                    || own.is_some_and(|o| o.eq_ignore_ascii_case(&s)),
            )
        }
        _ => None,
    }
}

/// Fill, step, submit, judge. An error says whether the submit was clicked already.
async fn run_row(
    cx: &mut Cx<'_>,
    form: &FormSchema,
    row: &serde_json::Map<String, Value>,
) -> Result<Outcome, (bool, ActionError)> {
    let unsent = |e: ActionError| (false, e);
    crate::tools::navigate_in(cx, &form.url)
        .await
        .map_err(unsent)?;
    let hint = if !form.form.selector.is_empty() {
        form.form.selector.clone()
    } else {
        form.form.index.to_string()
    };
    let now = learn_page(cx, &hint, Some(form.slug.clone()))
        .await
        .map_err(unsent)?;
    if now.fingerprint != form.fingerprint {
        let changes = form.changes(&now);
        return Ok(Outcome {
            status: "changed",
            sent: false,
            message: format!(
                "the form changed since it was learned: {}; learn it again",
                changes.join("; ")
            ),
            changes,
        });
    }
    // Which fields were given a value (for the reset check): key and selector.
    let mut filled: Vec<Value> = Vec::new();
    let steps = form.steps.len().max(1);
    for step in 0..steps {
        for f in form
            .fields
            .iter()
            .filter(|f| form.steps.is_empty() || f.step.unwrap_or(0) == step)
        {
            let Some(v) = row.get(&f.key) else { continue };
            if let Some(sel) = fill_field(cx, f, v).await.map_err(unsent)? {
                filled.push(json!({"key": f.key, "selector": sel}));
            }
        }
        if let Some(next) = form.steps.get(step).and_then(|s| s.next.as_ref()) {
            crate::tools::click::Click
                .act(cx, &json!({"selector": next.selector}))
                .await
                .map_err(|e| {
                    unsent(crate::error::failed(format!(
                        "the wizard's next button {:?} (step {}) could not be clicked: {}",
                        next.label,
                        step + 1,
                        ToolError::from(e)
                    )))
                })?;
        }
    }
    let page = cx.page().map_err(unsent)?;
    let args = json!({"form": form.form.selector, "fields": filled});
    let expr = format!("({JUDGE})({args})");
    let before = crate::observe::evaluate_isolated(&page, &expr)
        .await
        .map_err(|e| unsent(e.into()))?;
    // The browser's own validation: a form with invalid fields is not sent.
    if let Some(msg) = invalid_message(&before) {
        return Ok(Outcome::failed_unsent(msg));
    }
    let origin = before.get("origin").and_then(Value::as_f64);
    let alerts_before = before.get("alerts").cloned().unwrap_or(Value::Null);
    let Some(submit) = &form.submit else {
        return Err(unsent(crate::error::failed(
            "the schema has no submit control, so the row cannot be submitted",
        )));
    };
    // From here on the row may have been sent.
    let clicked = crate::tools::click::Click
        .act(cx, &json!({"selector": submit.selector}))
        .await;
    match clicked {
        Ok(_) => {}
        Err(ActionError::Tool(ToolError::Blocked(b))) => {
            return Err((false, ActionError::Tool(ToolError::Blocked(b))))
        }
        Err(e) => return Err((true, e)),
    }
    let deadline = tokio::time::Instant::now() + JUDGE_WAIT;
    loop {
        let page = cx.page().map_err(|e| (true, e))?;
        let v = crate::observe::evaluate_isolated(&page, &expr).await;
        if let Ok(v) = v {
            let navigated = v.get("origin").and_then(Value::as_f64) != origin;
            if navigated {
                let status = cx
                    .session
                    .navigations
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .last()
                    .map(|n| n.status)
                    .unwrap_or(0);
                let title = v.get("title").and_then(Value::as_str).unwrap_or("");
                let alerts = alert_text(&v, "error");
                if status >= 400 || !alerts.is_empty() {
                    let why = if alerts.is_empty() {
                        format!("HTTP {status}")
                    } else {
                        alerts
                    };
                    return Ok(Outcome {
                        status: "failed",
                        sent: true,
                        message: format!("the site answered: {why}"),
                        changes: vec![],
                    });
                }
                return Ok(Outcome {
                    status: "done",
                    sent: true,
                    message: format!(
                        "submitted: HTTP {status}, page {title:?}{}",
                        match alert_text(&v, "success") {
                            s if s.is_empty() => String::new(),
                            s => format!(": {s}"),
                        }
                    ),
                    changes: vec![],
                });
            }
            if let Some(msg) = invalid_message(&v) {
                return Ok(Outcome::failed_unsent(msg));
            }
            if v.get("alerts") != Some(&alerts_before) {
                let errors = alert_text(&v, "error");
                if !errors.is_empty() {
                    return Ok(Outcome {
                        status: "failed",
                        sent: true,
                        message: format!("the page says: {errors}"),
                        changes: vec![],
                    });
                }
                let ok = alert_text(&v, "success");
                if !ok.is_empty() {
                    return Ok(Outcome {
                        status: "done",
                        sent: true,
                        message: format!("the page says: {ok}"),
                        changes: vec![],
                    });
                }
            }
            if v.get("reset").and_then(Value::as_bool) == Some(true) {
                return Ok(Outcome {
                    status: "done",
                    sent: true,
                    message: "submitted: the form was reset".into(),
                    changes: vec![],
                });
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(Outcome {
                status: "uncertain",
                sent: true,
                message: format!(
                    "the submit was clicked, but within {} s the page neither navigated nor showed a message nor reset the form",
                    JUDGE_WAIT.as_secs()
                ),
                changes: vec![],
            });
        }
        tokio::time::sleep(JUDGE_POLL).await;
    }
}

/// The browser's validation messages of a judge answer, as `key: message; ...`.
fn invalid_message(v: &Value) -> Option<String> {
    let list = v.get("invalid").and_then(Value::as_array)?;
    if list.is_empty() {
        return None;
    }
    let parts: Vec<String> = list
        .iter()
        .map(|i| {
            format!(
                "{}: {}",
                i.get("key").and_then(Value::as_str).unwrap_or("?"),
                i.get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("invalid")
            )
        })
        .collect();
    Some(format!("the page refused the values: {}", parts.join("; ")))
}

/// The texts of the judge answer's alerts of `kind`, joined.
fn alert_text(v: &Value, kind: &str) -> String {
    v.get("alerts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|x| x.get("kind").and_then(Value::as_str) == Some(kind))
                .filter_map(|x| x.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

/// Put `v` into field `f` the way a person would; the selector of what now holds a value (for
/// the reset check), or None when the field was left empty.
async fn fill_field(cx: &mut Cx<'_>, f: &FormField, v: &Value) -> R<Option<String>> {
    let named =
        |e: ActionError| crate::error::failed(format!("field `{}`: {}", f.key, ToolError::from(e)));
    match f.kind {
        FieldKind::Text
        | FieldKind::Email
        | FieldKind::Number
        | FieldKind::Date
        | FieldKind::Textarea => {
            let input = match v {
                Value::Object(o) => match o.get("secret").and_then(Value::as_str) {
                    Some(name) => json!({"selector": f.selector, "secret": name}),
                    None => {
                        return Err(invalid(format!(
                            "field `{}`: an object value must be {{\"secret\": \"NAME\"}}",
                            f.key
                        )))
                    }
                },
                other => match text_of(other) {
                    Some(t) => json!({"selector": f.selector, "value": t}),
                    None => return Ok(None),
                },
            };
            crate::tools::fill::Fill
                .act(cx, &input)
                .await
                .map_err(named)?;
            Ok(Some(f.selector.clone()))
        }
        FieldKind::Select => {
            let options: Vec<String> = match v {
                Value::Array(a) => a.iter().filter_map(text_of).collect(),
                other => text_of(other).into_iter().collect(),
            };
            if options.is_empty() {
                return Ok(None);
            }
            crate::tools::select::Select
                .act(cx, &json!({"selector": f.selector, "option": options}))
                .await
                .map_err(named)?;
            Ok(Some(f.selector.clone()))
        }
        FieldKind::Radio => {
            let Some(want) = text_of(v) else {
                return Ok(None);
            };
            let opt = f
                .options
                .iter()
                .find(|o| o.value == want)
                .or_else(|| {
                    f.options
                        .iter()
                        .find(|o| o.label.eq_ignore_ascii_case(&want))
                })
                .ok_or_else(|| {
                    invalid(format!(
                        "field `{}` has no option {want:?}; its options: {}",
                        f.key,
                        f.options
                            .iter()
                            .map(|o| o.value.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                })?;
            let sel = opt.selector.clone().unwrap_or_default();
            crate::tools::click::Click
                .act(cx, &json!({"selector": sel}))
                .await
                .map_err(named)?;
            Ok(Some(sel))
        }
        FieldKind::Checkbox => {
            let Some(want) = truthy(v, f.value.as_deref()) else {
                return Ok(None);
            };
            let page = cx.page()?;
            let expr = format!(
                "(() => {{ const e = document.querySelector({}); return e ? e.checked : null; }})()",
                json!(f.selector)
            );
            let now = crate::observe::evaluate_isolated(&page, &expr).await?;
            if now.as_bool() != Some(want) {
                crate::tools::click::Click
                    .act(cx, &json!({"selector": f.selector}))
                    .await
                    .map_err(named)?;
            }
            Ok(want.then(|| f.selector.clone()))
        }
        FieldKind::File => Err(invalid(format!(
            "field `{}` is a file input; batches do not upload files (leave it out of the rows)",
            f.key
        ))),
    }
}
