//! `browser_back`: go back one entry in the active tab's history.

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::page::{
    GetNavigationHistoryParams, NavigateToHistoryEntryParams,
};
use forge_tools::{ToolError, ToolOutput};
use serde_json::Value;

use super::{schema, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, ActionError, R};
use crate::navwatch::NavWatch;
use crate::observe;

pub(crate) struct Back;

#[async_trait]
impl BrowserAction for Back {
    fn name(&self) -> &'static str {
        "browser_back"
    }

    fn description(&self) -> &'static str {
        "Go back one page."
    }

    fn input_schema(&self) -> Value {
        schema(serde_json::Map::new(), &[])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, _input: &Value) -> R<ToolOutput> {
        let limit = cx.limit;
        let page = cx.page()?;
        let hist = page
            .execute(GetNavigationHistoryParams::default())
            .await?
            .result;
        let idx = hist.current_index;
        if idx <= 0 {
            return Err(failed("there is no previous page in this tab's history"));
        }
        let Some(entry) = hist.entries.get((idx - 1) as usize) else {
            return Err(failed("there is no previous page in this tab's history"));
        };
        let mut watch = NavWatch::new(&page).await?;
        page.execute(NavigateToHistoryEntryParams::new(entry.id))
            .await?;
        let out = watch
            .settle(cx.manager, Duration::from_millis(1000), limit * 3 / 5)
            .await;
        if let Some(b) = out.blocked {
            return Err(ActionError::Tool(ToolError::Blocked(b)));
        }
        observe::wait_ready(&page, limit / 5).await?;
        cx.observed("went back one page".into(), DEFAULT_BUDGET)
            .await
    }
}
