//! `browser_select`: choose options of a native `<select>` by label or value.

use async_trait::async_trait;
use forge_tools::{fence, ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{schema, target_args, target_props, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, ActionError, R};

pub(crate) struct Select;

#[async_trait]
impl BrowserAction for Select {
    fn name(&self) -> &'static str {
        "browser_select"
    }

    fn description(&self) -> &'static str {
        "Choose `option` (label or value; a list if multiple) in a <select>."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert(
            "option".into(),
            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
        );
        schema(p, &["option"])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let status = self.act(cx, input).await?;
        cx.observed(status, DEFAULT_BUDGET).await
    }
}

impl Select {
    /// What `browser_select` does before it observes (also the form rows' selects): the status words.
    pub(crate) async fn act(&self, cx: &mut Cx<'_>, input: &Value) -> R<String> {
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
        let page = cx.page()?;
        target["options"] = json!(options);
        let v = cx.lib(&page, "selectOption", &target).await?;
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
                other => cx.stale(other, &target).await,
            });
        }
        let n = v
            .get("selected")
            .and_then(Value::as_array)
            .map(Vec::len)
            .unwrap_or(0);
        Ok(format!("selected {n} option(s) in {r}"))
    }
}
