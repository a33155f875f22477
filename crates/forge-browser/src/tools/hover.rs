//! `browser_hover`: move the mouse over an element (menus, tooltips) and observe.

use async_trait::async_trait;
use forge_tools::ToolOutput;
use serde_json::Value;

use super::{schema, settle_frames, target_args, target_props, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::R;

pub(crate) struct Hover;

#[async_trait]
impl BrowserAction for Hover {
    fn name(&self) -> &'static str {
        "browser_hover"
    }

    fn description(&self) -> &'static str {
        "Move the mouse over an element (menus, tooltips) and return a fresh observation."
    }

    fn input_schema(&self) -> Value {
        schema(target_props(), &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let target = target_args(input)?;
        let page = cx.page()?;
        let (x, y, info) = cx.point(&page, &target).await?;
        let r = info
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        cx.move_pointer(&page, (x, y), None).await?;
        settle_frames(&page).await;
        cx.observed(format!("hovering over {r}"), DEFAULT_BUDGET)
            .await
    }
}
