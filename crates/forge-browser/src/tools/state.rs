//! `browser_state`: observe the active tab again, optionally after scrolling.

use async_trait::async_trait;
use forge_tools::ToolOutput;
use serde_json::{json, Value};

use super::{
    schema, str_arg, wait_for_arg, wait_for_prop, BrowserAction, Cx, DEFAULT_BUDGET, MAX_BUDGET,
};
use crate::error::R;
use crate::observe;

pub(crate) struct State;

#[async_trait]
impl BrowserAction for State {
    fn name(&self) -> &'static str {
        "browser_state"
    }

    fn description(&self) -> &'static str {
        "Observe the page; first scroll `scroll` pages (<0: up) or to ref `scroll_to`."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("max_chars".into(), json!({"type": "integer", "minimum": 500, "maximum": MAX_BUDGET, "default": DEFAULT_BUDGET}));
        p.insert("scroll".into(), json!({"type": "number"}));
        p.insert("scroll_to".into(), json!({"type": "string"}));
        p.insert("wait_for".into(), wait_for_prop());
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let page = cx.page()?;
        let wait = wait_for_arg(input)?;
        let budget = input
            .get("max_chars")
            .and_then(Value::as_u64)
            .map(|n| (n as usize).clamp(500, MAX_BUDGET))
            .unwrap_or(DEFAULT_BUDGET);
        if let Some(r) = str_arg(input, "scroll_to").filter(|s| !s.is_empty()) {
            let v = cx.lib(&page, "scrollTo", &json!({"ref": r})).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(cx.stale(e, &json!({"ref": r})).await);
            }
        }
        if let Some(p) = input.get("scroll").and_then(Value::as_f64) {
            if p != 0.0 {
                observe::call(&page, "scrollBy", &json!({"pages": p.clamp(-50.0, 50.0)})).await?;
            }
        }
        let status = match &wait {
            Some(w) => format!("observation ({}):", cx.wait(w).await?),
            None => "observation:".into(),
        };
        cx.observed(status, budget).await
    }
}
