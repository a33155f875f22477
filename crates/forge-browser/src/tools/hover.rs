//! `browser_hover`: move the mouse over an element (menus, tooltips) and observe.

use async_trait::async_trait;
use forge_tools::ToolOutput;
use serde_json::Value;

use super::{
    schema, settle_frames, target_args, target_props, wait_for_arg, wait_for_prop, BrowserAction,
    Cx, DEFAULT_BUDGET,
};
use crate::error::R;

pub(crate) struct Hover;

#[async_trait]
impl BrowserAction for Hover {
    fn name(&self) -> &'static str {
        "browser_hover"
    }

    fn description(&self) -> &'static str {
        "Hover the mouse over an element (menus, tooltips)."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert("wait_for".into(), wait_for_prop());
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let target = target_args(input)?;
        let wait = wait_for_arg(input)?;
        let wait = cx.wait_baseline(wait).await?;
        let page = cx.page()?;
        let (x, y, info) = cx.point(&page, &target).await?;
        let r = info
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        cx.move_pointer_to(&page, (x, y), Cx::target_box(&info), None)
            .await?;
        settle_frames(&page).await;
        let mut status = format!("hovering over {r}");
        if let Some(w) = &wait {
            status.push_str(&format!("; {}", cx.wait(w).await?));
        }
        cx.observed(status, DEFAULT_BUDGET).await
    }
}
