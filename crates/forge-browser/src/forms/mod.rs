//! Forms at scale, the browser's part: learning a form's structure from the page, read-only and
//! in forge's isolated world ([`FormSchema`], `learn.js`).
//!
//! - `schema.rs`: [`FormSchema`] and its parts, the structural fingerprint, what changed between
//!   two learnings, slugs.
//! - `learn.js`: the inspector (fields in order, submit control, wizard steps), run in the
//!   isolated world: it changes nothing on the page, and page scripts cannot change what it reads.
//! - `row.rs` + `judge.js`: the `browser_form_row` tool: one batch row filled through the
//!   browser tools' own fill/select/click code (fill safety applies), submitted and judged.
//! - here: the `browser_form_learn` tool ([`form_tools`]), which the runtime calls for the A2A
//!   skill `learn-form-schema`, `forge forms learn` and the MCP tool; it is not one of the
//!   model's browser tools.

use std::sync::Arc;

use async_trait::async_trait;
use forge_tools::{Tool, ToolOutput};
use serde_json::{json, Value};

use crate::error::{failed, invalid, R};
use crate::manager::BrowserManager;
use crate::tools::{schema, str_arg, BrowserAction, BrowserToolOptions, Cx};

mod row;
mod schema;

pub use row::ROW_TOOL;
pub use schema::{
    is_slug, slugify, Control, FieldKind, FieldOption, FormField, FormRef, FormSchema, Step,
};

/// The inspector script (an expression: a function of one argument).
const LEARN: &str = include_str!("learn.js");

/// The name of the learning tool.
pub const LEARN_TOOL: &str = "browser_form_learn";

/// The form tools over `manager` (not among the model's browser tools: the runtime calls them
/// for the form skills): `browser_form_learn`, `browser_form_row`.
pub fn form_tools(manager: Arc<BrowserManager>, options: BrowserToolOptions) -> Vec<Arc<dyn Tool>> {
    vec![
        crate::tools::wrap(Learn, &manager, &options),
        crate::tools::wrap(row::Row, &manager, &options),
    ]
}

/// `browser_form_learn {url, form?, slug?}`: open `url` in the session's tab and read its form.
struct Learn;

#[async_trait]
impl BrowserAction for Learn {
    fn name(&self) -> &'static str {
        LEARN_TOOL
    }

    fn description(&self) -> &'static str {
        "Open a URL and read one of its forms' structure (fields, submit control, steps) without changing the page; returns a FormSchema."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("url".into(), json!({"type": "string"}));
        p.insert(
            "form".into(),
            json!({"type": "string", "description": "Which form when the page has several: its id, name, CSS selector or 0-based index."}),
        );
        p.insert(
            "slug".into(),
            json!({"type": "string", "description": "The name to keep it under (default: from the form's id or the page's path)."}),
        );
        schema(p, &["url"])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let url = str_arg(input, "url")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("`url` is required"))?;
        let slug = match str_arg(input, "slug")
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            Some(s) if is_slug(s) => Some(s.to_string()),
            Some(s) => {
                return Err(invalid(format!(
                "`slug` {s:?} is not a slug: use lower-case letters, digits and `-` (at most 60)"
            )))
            }
            None => None,
        };
        crate::tools::navigate_in(cx, url).await?;
        let hint = str_arg(input, "form").unwrap_or("");
        let schema = learn_page(cx, hint, slug).await?;
        let text = format!(
            "learned form {} on {}: {} field(s), {} step(s), submit {}; fingerprint {}",
            schema.slug,
            schema.host,
            schema.fields.len(),
            schema.steps.len().max(1),
            if schema.submit.is_some() {
                "found"
            } else {
                "not found"
            },
            schema.fingerprint
        );
        let data = serde_json::to_value(&schema)
            .map_err(|e| failed(format!("the schema could not be written as JSON: {e}")))?;
        Ok(ToolOutput {
            text,
            data: Some(data),
        })
    }
}

/// Read the form `hint` names (or the page's largest) on the active tab's current page.
pub(crate) async fn learn_page(cx: &Cx<'_>, hint: &str, slug: Option<String>) -> R<FormSchema> {
    let page = cx.page()?;
    let expr = format!("({LEARN})({})", json!({ "hint": hint }));
    let v = crate::observe::evaluate_isolated(&page, &expr).await?;
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        let forms = v.get("forms").cloned().unwrap_or(Value::Null);
        return Err(match (e, hint.is_empty()) {
            ("no-form", true) => failed("the page has no <form> element, so there is no form to learn"),
            ("no-form", false) => failed(format!(
                "no form matches {hint:?} (give a form's id, name, CSS selector or 0-based index); the page's forms: {forms}"
            )),
            (other, _) => failed(format!("the form could not be read ({other})")),
        });
    }
    let page_url = v.get("url").and_then(Value::as_str).unwrap_or("");
    let parsed = url::Url::parse(page_url)
        .map_err(|e| failed(format!("the page's URL {page_url:?} cannot be read ({e})")))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        (None, _) => return Err(failed(format!("the page {page_url} has no host"))),
    };
    let mut schema: FormSchema = serde_json::from_value(json!({
        "slug": "",
        "host": host,
        "url": page_url,
        "title": v.get("title").cloned().unwrap_or(json!("")),
        "form": v.get("form").cloned().unwrap_or(json!({})),
        "action": v.get("action").cloned().unwrap_or(json!("")),
        "method": v.get("method").cloned().unwrap_or(json!("get")),
        "fields": v.get("fields").cloned().unwrap_or(json!([])),
        "submit": v.get("submit").cloned().unwrap_or(Value::Null),
        "steps": v.get("steps").cloned().unwrap_or(json!([])),
    }))
    .map_err(|e| {
        failed(format!(
            "the inspector's answer has an unexpected shape: {e}"
        ))
    })?;
    schema.slug = slug.unwrap_or_else(|| {
        let named = if !schema.form.id.is_empty() {
            schema.form.id.clone()
        } else if !schema.form.name.is_empty() {
            schema.form.name.clone()
        } else {
            parsed
                .path_segments()
                .and_then(|mut s| s.rfind(|p| !p.is_empty()).map(str::to_string))
                .unwrap_or_default()
        };
        slugify(&named)
    });
    schema.fingerprint = schema.compute_fingerprint();
    Ok(schema)
}
