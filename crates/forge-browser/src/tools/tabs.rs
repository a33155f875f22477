//! `browser_tabs`: list the session's tabs, switch to one, open a new one or close one.

use std::time::Duration;

use async_trait::async_trait;
use forge_tools::{fence, ToolOutput};
use serde_json::{json, Value};

use super::{schema, str_arg, BrowserAction, Cx};
use crate::error::{invalid, R};
use crate::manager::SessionState;

pub(crate) struct Tabs;

#[async_trait]
impl BrowserAction for Tabs {
    fn name(&self) -> &'static str {
        "browser_tabs"
    }

    fn description(&self) -> &'static str {
        "List, switch to, open (new) or close (default: active) tab `tab`, e.g. t2."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("action".into(), json!({"type": "string", "enum": ["list", "switch", "close", "new"], "default": "list"}));
        p.insert("tab".into(), json!({"type": "string"}));
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let session = cx.session;
        let st = &mut *cx.st;
        let action = str_arg(input, "action").unwrap_or("list");
        let find = |st: &SessionState, id: &str| -> R<usize> {
            let id = id.trim();
            st.tabs
                .iter()
                .position(|t| t.id == id || t.id == format!("t{id}"))
                .ok_or_else(|| {
                    invalid(format!(
                        "no tab {id:?}; browser_tabs with action=list shows the tab ids"
                    ))
                })
        };
        let status = match action {
            "list" => "tabs:".to_string(),
            "switch" => {
                let id = str_arg(input, "tab")
                    .ok_or_else(|| invalid("`tab` (a tab id like t2) is required for switch"))?;
                st.active = find(st, id)?;
                let _ = st.tabs[st.active].page.bring_to_front().await;
                format!("switched to {}", st.tabs[st.active].id)
            }
            "close" => {
                let idx = match str_arg(input, "tab") {
                    Some(id) => find(st, id)?,
                    None => st.active,
                };
                let id = st.tabs[idx].id.clone();
                session.close_tab(st, idx).await;
                if st.tabs.is_empty() {
                    session.new_tab(st).await?;
                }
                format!("closed {id}; active tab is {}", st.tabs[st.active].id)
            }
            "new" => {
                session.new_tab(st).await?;
                format!("opened {} (blank; now active)", st.tabs[st.active].id)
            }
            other => {
                return Err(invalid(format!(
                    "action must be list, switch, close or new, not {other:?}"
                )))
            }
        };
        let mut listing = String::new();
        for (i, t) in st.tabs.iter().enumerate() {
            // Bounded: a tab blocked on a dialog answers nothing.
            let quick = Duration::from_secs(2);
            let title = tokio::time::timeout(quick, t.page.get_title())
                .await
                .ok()
                .and_then(|r| r.ok().flatten())
                .unwrap_or_else(|| "(not responding)".into());
            let url = tokio::time::timeout(quick, t.page.url())
                .await
                .ok()
                .and_then(|r| r.ok().flatten())
                .unwrap_or_default();
            listing.push_str(&format!(
                "{}{} {:?} {}\n",
                t.id,
                if i == st.active { " (active)" } else { "" },
                title.chars().take(80).collect::<String>(),
                url
            ));
        }
        let ids: Vec<&str> = st.tabs.iter().map(|t| t.id.as_str()).collect();
        let text = format!(
            "{status} {}\n{}",
            ids.join(", "),
            fence::wrap("source=browser tabs", &listing)
        );
        Ok(ToolOutput {
            text,
            data: Some(json!({"tabs": ids, "active": st.tabs[st.active].id})),
        })
    }
}
