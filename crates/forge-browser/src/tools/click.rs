//! `browser_click`: a real mouse click on an element (refused when another element covers its
//! centre, unless forced), then what it led to and a fresh observation.

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::{DispatchMouseEventType, MouseButton};
use forge_tools::{fence, ToolOutput};
use serde_json::{json, Value};

use super::{
    schema, str_arg, target_args, target_props, wait_for_arg, wait_for_prop, BrowserAction, Cx,
    DEFAULT_BUDGET,
};
use crate::error::{failed, invalid, R};
use crate::navwatch::NavWatch;
use crate::pointer::{self, mouse};

pub(crate) struct Click;

#[async_trait]
impl BrowserAction for Click {
    fn name(&self) -> &'static str {
        "browser_click"
    }

    fn description(&self) -> &'static str {
        "Mouse-click an element (`force`: even if covered); reports navigation, tabs, dialogs."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert(
            "button".into(),
            json!({"type": "string", "enum": ["left", "right", "middle"]}),
        );
        p.insert(
            "click_count".into(),
            json!({"type": "integer", "minimum": 1, "maximum": 3}),
        );
        p.insert("force".into(), json!({"type": "boolean"}));
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

impl Click {
    /// What `browser_click` does before it observes (also the form rows' clicks): the status words.
    pub(crate) async fn act(&self, cx: &mut Cx<'_>, input: &Value) -> R<String> {
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
        let force = input.get("force").and_then(Value::as_bool).unwrap_or(false);
        if let Some(cover) = info
            .get("cover")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            if !force {
                let msg = format!(
                    "did not click {r}: another element covers its centre; the click would hit that instead. Close or scroll past the cover (often a banner or dialog), or pass force=true. The cover: {}",
                    fence::wrap("source=browser", cover)
                );
                return Err(failed(msg));
            }
        }
        let button = match str_arg(input, "button").unwrap_or("left") {
            "left" => MouseButton::Left,
            "right" => MouseButton::Right,
            "middle" => MouseButton::Middle,
            other => {
                return Err(invalid(format!(
                    "button must be left, right or middle, not {other:?}"
                )))
            }
        };
        let count = input
            .get("click_count")
            .and_then(Value::as_i64)
            .unwrap_or(1)
            .clamp(1, 3);
        // A same-tab link or submit button gets a longer window for its navigation to start; the
        // wait ends as soon as it does.
        let nav_likely = info
            .get("navLikely")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let quick = if nav_likely {
            Duration::from_millis(1000)
        } else {
            Duration::ZERO
        };
        let mut watch = NavWatch::new(&page).await?.downloads(cx.session);
        // The approach: the travel up to just outside the target's box sent at once (nothing
        // needs to see it point by point), then the moves onto the target each as its own
        // `mousemove` (each waits for the renderer's ack, which comes once it is dispatched:
        // about 1 ms with the tab's input unbuffered, `pointer::unbuffer`), all but the last,
        // which goes with the press.
        let path = pointer::approach(cx.pointer_at(&page), (x, y), Cx::target_box(&info));
        let (last, lead) = match path.paced.split_last() {
            Some((l, lead)) => (Some(*l), lead),
            None => (None, &[][..]),
        };
        cx.move_quick(&page, &path.quick, None).await?;
        cx.move_along(&page, lead, None).await?;
        // Moving there can change the page (a hover effect opens something over the target or
        // shifts it): look again, refuse a cover that appeared, follow a target that moved.
        // The pointer is already on the target here (it entered the box with the move before
        // the last), so entering it has run its handlers.
        let (nx, ny, again) = cx.point(&page, &target).await?;
        if let Some(cover) = again
            .get("cover")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            if !force {
                let msg = format!(
                    "did not click {r}: once the pointer moved onto it, another element covered its centre (a hover effect); the click would hit that instead. Hover elsewhere or close it first, or pass force=true. The cover: {}",
                    fence::wrap("source=browser", cover)
                );
                return Err(failed(msg));
            }
        }
        let (x, y, last) = if (nx - x).abs() > 0.5 || (ny - y).abs() > 0.5 {
            cx.move_pointer_to(&page, (nx, ny), Cx::target_box(&again), None)
                .await?;
            (nx, ny, None)
        } else {
            (x, y, last)
        };
        // The last move, then the presses and releases, sent together: the last move cannot
        // merge with the one before (that one was acknowledged, so already dispatched), Chromium
        // keeps their order, and a press flushes any move still queued before it.
        let mut events = Vec::new();
        if let Some((lx, ly)) = last {
            events.push((DispatchMouseEventType::MouseMoved, lx, ly, None, 0));
        }
        for c in 1..=count {
            events.push((
                DispatchMouseEventType::MousePressed,
                x,
                y,
                Some(button.clone()),
                c,
            ));
            events.push((
                DispatchMouseEventType::MouseReleased,
                x,
                y,
                Some(button.clone()),
                c,
            ));
        }
        let sent = futures::future::try_join_all(
            events
                .into_iter()
                .map(|(kind, ex, ey, b, c)| mouse(&page, kind, ex, ey, b, c)),
        )
        .await;
        cx.set_pointer(&page, (x, y));
        sent?;
        if !nav_likely {
            // A navigation the click starts is announced while the page handles it or in the work
            // it queues (0 ms timers, promise jobs): let that run, then look, with no fixed wait.
            crate::observe::let_page_run(&page, Duration::from_millis(500)).await;
        }
        let out = watch.settle(cx.manager, quick, cx.limit * 3 / 5).await;
        let mut what = cx.outcome(&out, &page).await?;
        if what.is_empty() {
            what = "no navigation".into();
        }
        let mut status = format!("clicked {r}: {what}");
        if let Some(w) = &wait {
            status.push_str(&format!("; {}", cx.wait(w).await?));
        }
        Ok(status)
    }
}
