//! `browser_drag`: press on one element, move along intermediate points with the button held,
//! release on another element or at an offset. Mouse/pointer-event drags (sortable lists, slider
//! and resize handles) see every move; an HTML5 `draggable` drag is intercepted
//! (`Input.setInterceptDrags`) and finished with real drag events (`Input.dispatchDragEvent`:
//! dragEnter, dragOver along the rest of the path, drop) carrying the page's own drag data.

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchDragEventParams, DispatchDragEventType, DispatchMouseEventParams,
    DispatchMouseEventType, DragData, EventDragIntercepted, MouseButton, SetInterceptDragsParams,
};
use chromiumoxide::Page;
use forge_tools::{fence, ToolOutput};
use futures::{FutureExt, StreamExt};
use serde_json::{json, Value};

use super::{schema, settle_frames, str_arg, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, R};
use crate::navwatch::NavWatch;
use crate::observe;
use crate::pointer::{self, mouse};

/// Intermediate points of a drag when `steps` is not given.
const DEFAULT_STEPS: u64 = 12;
/// Most intermediate points.
const MAX_STEPS: u64 = 100;
/// Largest `by` offset on each axis, in CSS px.
const MAX_OFFSET: f64 = 10_000.0;
/// How long a drag of a `draggable` element waits for Chromium to report the native drag.
const INTERCEPT_WAIT: Duration = Duration::from_millis(300);

/// The pause before each of the last two `dragover`s of an HTML5 drag.
const DROP_PAUSE: Duration = Duration::from_millis(50);

pub(crate) struct Drag;

/// `{"ref": ..}` for a ref like `e12`/`f1e3`/`f2f1e3` (a frame inside a frame), else
/// `{"selector": ..}`.
fn locator(s: &str) -> Value {
    let s = s.trim();
    let mut body = s;
    // Each `f<digits>` is one frame level; at most as many levels as the ref has characters.
    while let Some(rest) = body.strip_prefix('f') {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            break;
        }
        body = &rest[digits..];
    }
    let is_ref = body
        .strip_prefix('e')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if is_ref {
        json!({"ref": s})
    } else {
        json!({"selector": s})
    }
}

#[async_trait]
impl BrowserAction for Drag {
    fn name(&self) -> &'static str {
        "browser_drag"
    }

    fn description(&self) -> &'static str {
        "Drag `from` onto `to` (each a ref or CSS) or by `by` px: lists, sliders, drag-and-drop."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("from".into(), json!({"type": "string"}));
        p.insert("to".into(), json!({"type": "string"}));
        p.insert("by".into(), json!({"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]}));
        p.insert("steps".into(), json!({"type": "integer", "minimum": 1, "maximum": MAX_STEPS, "default": DEFAULT_STEPS}));
        schema(p, &["from"])
    }

    fn navigates(&self) -> bool {
        true
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let from_s = str_arg(input, "from")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("`from` (a ref like e12 or a CSS selector) is required"))?;
        let from = locator(from_s);
        let to = str_arg(input, "to")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(locator);
        let by = match input.get("by").filter(|v| !v.is_null()) {
            None => None,
            Some(b) => {
                let axis = |k: &str| b.get(k).and_then(Value::as_f64).filter(|v| v.is_finite());
                match (axis("x"), axis("y")) {
                    (Some(x), Some(y)) if x.abs() <= MAX_OFFSET && y.abs() <= MAX_OFFSET => {
                        Some((x, y))
                    }
                    _ => {
                        return Err(invalid(format!(
                            "`by` must be {{\"x\": number, \"y\": number}} in CSS px, each within ±{MAX_OFFSET}"
                        )))
                    }
                }
            }
        };
        match (&to, by) {
            (Some(_), Some(_)) => return Err(invalid("give either `to` or `by`, not both")),
            (None, None) => {
                return Err(invalid(
                    "give `to` (a ref or selector to release on) or `by` ({\"x\": .., \"y\": ..} in CSS px)",
                ))
            }
            _ => {}
        }
        let steps = match input.get("steps").filter(|v| !v.is_null()) {
            None => DEFAULT_STEPS,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=MAX_STEPS).contains(n))
                .ok_or_else(|| {
                    invalid(format!(
                        "`steps` must be a whole number from 1 to {MAX_STEPS}"
                    ))
                })?,
        } as usize;

        let page = cx.page()?;
        let mut args = json!({"from": from});
        if let Some(t) = &to {
            args["to"] = t.clone();
        }
        if let Some((x, y)) = by {
            args["by"] = json!({"x": x, "y": y});
        }
        let plan = observe::call(&page, "dragPlan", &args).await?;
        if let Some(e) = plan.get("error").and_then(Value::as_str) {
            let which = plan.get("which").and_then(Value::as_str).unwrap_or("from");
            let r = plan.get("ref").and_then(Value::as_str).unwrap_or("");
            return Err(match e {
                "not-visible" => failed(format!("{r} (`{which}`) is not visible (hidden or zero-size), so it cannot be dragged there; browser_state shows what is visible")),
                "too-far" => failed(format!(
                    "the drag from {r} spans ({:+.0}, {:+.0}) px and its start cannot be shown in the {}x{} viewport while leaving room to travel; drag in shorter moves with `by`, or pick a nearer target",
                    plan.get("dx").and_then(Value::as_f64).unwrap_or(0.0),
                    plan.get("dy").and_then(Value::as_f64).unwrap_or(0.0),
                    plan.get("vw").and_then(Value::as_f64).unwrap_or(0.0),
                    plan.get("vh").and_then(Value::as_f64).unwrap_or(0.0),
                )),
                other => {
                    let which_target = if which == "to" { to.clone().unwrap_or_default() } else { from.clone() };
                    cx.stale(other, &which_target).await
                }
            });
        }
        let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let (fx, fy) = (num(&plan["from"], "x"), num(&plan["from"], "y"));
        let (mut tx, mut ty) = (num(&plan["to"], "x"), num(&plan["to"], "y"));
        if to.is_some() {
            let b = &plan["to"]["box"];
            (tx, ty) = past_midpoint((fx, fy), (tx, ty), (num(b, "w"), num(b, "h")));
        }
        let fref = plan["from"]["ref"].as_str().unwrap_or("").to_string();
        let tref = plan["to"]["ref"].as_str().unwrap_or("").to_string();
        if let Some(cover) = plan
            .get("cover")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
        {
            return Err(failed(format!(
                "did not drag {fref}: another element covers its centre, so the press would land on that instead. Close or scroll past the cover first. The cover: {}",
                fence::wrap("source=browser", cover)
            )));
        }
        let draggable = plan
            .get("draggable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let before = plan.get("box").cloned().unwrap_or(Value::Null);

        let mut watch = NavWatch::new(&page).await?;
        page.execute(SetInterceptDragsParams::new(true)).await?;
        let far = plan.get("far").and_then(Value::as_bool).unwrap_or(false);
        let done = if far {
            self.long_drag(cx, &page, (fx, fy), to.is_some()).await
        } else {
            self.drag(
                cx,
                &page,
                (fx, fy),
                (tx, ty),
                steps,
                draggable,
                to.is_some(),
            )
            .await
        };
        // Always switch interception off again, even when the drag failed part way.
        let _ = page.execute(SetInterceptDragsParams::new(false)).await;
        let (mode, moves) = done?;
        settle_frames(&page).await;

        let mut status = match by {
            Some((x, y)) => format!("dragged {fref} by ({x:+.0}, {y:+.0}) px"),
            None => format!("dragged {fref} to {tref}"),
        };
        status.push_str(&format!(" ({mode}, {moves} moves)"));
        let after = observe::call(&page, "boxOf", &json!({"ref": fref})).await?;
        status.push_str(&format!("; {}", what_moved(&fref, &before, &after)));
        if let Some(c) = container_change(&plan["container"], &after["container"]) {
            status.push_str(&format!("; {c}"));
        }
        let (moved, order) = list_change(&plan, &after);
        if let Some(m) = moved {
            status.push_str(&format!("; {m}"));
        }
        let out = watch
            .settle(cx.manager, Duration::from_millis(25), cx.limit * 3 / 5)
            .await;
        let what = cx.outcome(&out, &page).await?;
        if !what.is_empty() {
            status.push_str(&format!("; {what}"));
        }
        cx.observed_with(status, order.as_deref(), DEFAULT_BUDGET)
            .await
    }
}

impl Drag {
    /// Approach `from`, press, move along the path with the button held, and release at `to`
    /// (or finish an intercepted HTML5 drag with drag events). With `nudge` (a drag onto a
    /// target), a slow start and one more move 1 px further in the direction of travel before
    /// the release (a sortable list recomputes the drop place on each move). Returns the mode
    /// and the number of moves made.
    #[allow(clippy::too_many_arguments)]
    async fn drag(
        &self,
        cx: &mut Cx<'_>,
        page: &Page,
        from: (f64, f64),
        to: (f64, f64),
        steps: usize,
        draggable: bool,
        nudge: bool,
    ) -> R<(&'static str, usize)> {
        let mut intercepted = page.event_listener::<EventDragIntercepted>().await?;
        cx.move_pointer(page, from, None).await?;
        mouse(
            page,
            DispatchMouseEventType::MousePressed,
            from.0,
            from.1,
            Some(MouseButton::Left),
            1,
        )
        .await?;
        // Onto a target: a slow start, as a person's, two small moves (2 and 6 px towards the
        // end) before the rest, so the page's pointer-down work (SortableJS makes the item
        // draggable there) and Chromium's drag threshold see a beginning; then the even path.
        // (A drag `by` an offset keeps exactly its `steps` moves: sliders and grips.)
        let (dx, dy) = (to.0 - from.0, to.1 - from.1);
        let len = dx.hypot(dy);
        let mut path: Vec<(f64, f64)> = Vec::new();
        if nudge && len > 12.0 {
            for d in [2.0, 6.0] {
                path.push((from.0 + dx * d / len, from.1 + dy * d / len));
            }
        }
        path.extend(pointer::linear(from, to, steps));
        let end = if nudge && len > 0.5 {
            let (ux, uy) = if dy.abs() >= dx.abs() {
                (0.0, dy.signum())
            } else {
                (dx.signum(), 0.0)
            };
            let e = (to.0 + ux, to.1 + uy);
            path.push(e);
            e
        } else {
            to
        };
        let mut data: Option<DragData> = None;
        let mut sent = 0;
        for &p in &path {
            mouse(
                page,
                DispatchMouseEventType::MouseMoved,
                p.0,
                p.1,
                Some(MouseButton::Left),
                0,
            )
            .await?;
            sent += 1;
            cx.set_pointer(page, p);
            if let Some(Some(ev)) = intercepted.next().now_or_never() {
                data = Some(ev.data.clone());
                break;
            }
        }
        if data.is_none() && (draggable || draggable_now(page).await) {
            if let Ok(Some(ev)) = tokio::time::timeout(INTERCEPT_WAIT, intercepted.next()).await {
                data = Some(ev.data.clone());
            }
        }
        let Some(data) = data else {
            mouse(
                page,
                DispatchMouseEventType::MouseReleased,
                end.0,
                end.1,
                Some(MouseButton::Left),
                1,
            )
            .await?;
            cx.set_pointer(page, end);
            return Ok(("mouse", sent));
        };
        // A native (HTML5) drag started: the page now expects drag events, not mouse moves.
        // Let it finish its dragstart work first (SortableJS defers it to the next task and
        // ignores drag events until then: without this pause about one fast drag in 40 did
        // nothing).
        observe::let_page_run(page, Duration::from_millis(300)).await;
        let mut rest: Vec<(f64, f64)> = path[sent.min(path.len())..].to_vec();
        if rest.is_empty() {
            rest.push(to);
        }
        let drag_event = |kind: DispatchDragEventType, p: (f64, f64)| {
            DispatchDragEventParams::builder()
                .r#type(kind)
                .x(p.0)
                .y(p.1)
                .data(data.clone())
                .build()
                .map_err(failed)
        };
        page.execute(drag_event(DispatchDragEventType::DragEnter, rest[0])?)
            .await?;
        for &p in &rest {
            page.execute(drag_event(DispatchDragEventType::DragOver, p)?)
                .await?;
            sent += 1;
        }
        // Then hold still over the end a moment, as a person does before dropping: two more
        // `dragover`s 50 ms apart (the drop place is decided on `dragover`; a page still busy
        // with its drag start ignored the first ones).
        for p in [to, end] {
            tokio::time::sleep(DROP_PAUSE).await;
            page.execute(drag_event(DispatchDragEventType::DragOver, p)?)
                .await?;
            sent += 1;
        }
        page.execute(drag_event(DispatchDragEventType::Drop, end)?)
            .await?;
        mouse(
            page,
            DispatchMouseEventType::MouseReleased,
            end.0,
            end.1,
            Some(MouseButton::Left),
            1,
        )
        .await?;
        cx.set_pointer(page, end);
        Ok(("HTML5 drag-and-drop", sent))
    }
}

/// Most rounds of a long drag's scrolling (each a move at the edge, a wait and a look).
const LONG_DRAG_ROUNDS: usize = 120;
/// The pause after each move at the edge of a long drag (pages scroll on a timer or per move).
const EDGE_PAUSE: Duration = Duration::from_millis(50);

impl Drag {
    /// A mouse drag whose end is outside the viewport: press at `from`, move to the viewport's
    /// edge towards the end and hold there (moves every 50 ms), as a person does, so the page's
    /// own auto-scroll (jQuery UI sortable, SortableJS) scrolls; when the page does not scroll
    /// within three such moves, turn the mouse wheel (a person's other way), then move on. Once
    /// the end is in view, the ordinary path to it and the release (past a target's midpoint,
    /// as in [`Drag::drag`]). Bounded by [`LONG_DRAG_ROUNDS`]. An HTML5 drag that starts on
    /// the way goes on as drag events ([`Drag::long_native`]), forge scrolling as a browser does.
    /// The end may be hidden in an inner scroll box rather than outside the window: the pointer
    /// then holds at that box's edge ([`edge_point`]) and the box is what scrolls.
    async fn long_drag(
        &self,
        cx: &mut Cx<'_>,
        page: &Page,
        from: (f64, f64),
        onto_target: bool,
    ) -> R<(&'static str, usize)> {
        let mut intercepted = page.event_listener::<EventDragIntercepted>().await?;
        cx.move_pointer(page, from, None).await?;
        mouse(
            page,
            DispatchMouseEventType::MousePressed,
            from.0,
            from.1,
            Some(MouseButton::Left),
            1,
        )
        .await?;
        let held = Some(MouseButton::Left);
        let mut at = from;
        let mut sent = 0usize;
        let mut still = 0usize;
        let mut last_scroll: Option<(f64, f64)> = None;
        let (mut wheeled, mut directly) = (false, false);
        let mut dir0: Option<(f64, f64)> = None;
        let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        for _ in 0..LONG_DRAG_ROUNDS {
            if let Some(Some(ev)) = intercepted.next().now_or_never() {
                // A native (HTML5) drag started on the way: the page now expects drag events.
                // Chromium does not scroll an intercepted drag, so forge scrolls as a browser
                // does during a native drag, and goes on with drag events.
                return self
                    .long_native(cx, page, ev.data.clone(), at, from, sent, onto_target)
                    .await;
            }
            let g = observe::call(page, "dragGoal", &Value::Null).await?;
            if let Some(e) = g.get("error").and_then(Value::as_str) {
                let _ = mouse(
                    page,
                    DispatchMouseEventType::MouseReleased,
                    at.0,
                    at.1,
                    held.clone(),
                    1,
                )
                .await;
                return Err(failed(format!(
                    "the drag's target went away while the page scrolled ({e}); released where the pointer was"
                )));
            }
            let (gx, gy, vw, vh) = (num(&g, "x"), num(&g, "y"), num(&g, "vw"), num(&g, "vh"));
            // The drag's direction, from where it started to where the end first was (the last
            // moves may go back a little once the page scrolled past; the release still goes
            // past the target's midpoint in this direction).
            let dir = *dir0.get_or_insert((gx - from.0, gy - from.1));
            if g.get("inView").and_then(Value::as_bool) == Some(true) {
                let mut to = (gx, gy);
                if onto_target {
                    let b = &g["box"];
                    to = past_midpoint((gx - dir.0, gy - dir.1), to, (num(b, "w"), num(b, "h")));
                }
                if (to.0 - at.0).hypot(to.1 - at.1) > 1.0 {
                    // Towards the end three moves at a time, looking again after each three: the
                    // page may move the end on the way (a sortable's placeholder passing items
                    // shifts them by one place; a page catching up with a scroll under the
                    // pointer moves its placeholder at the first move).
                    let chunk: Vec<(f64, f64)> = pointer::linear(at, to, final_steps(at, to))
                        .into_iter()
                        .take(3)
                        .collect();
                    cx.move_along(page, &chunk, held.clone()).await?;
                    sent += chunk.len();
                    at = chunk.last().copied().unwrap_or(to);
                    continue;
                }
                let mut path = Vec::new();
                let end = if onto_target {
                    let (dx, dy) = dir;
                    let e = if dy.abs() >= dx.abs() {
                        (to.0, to.1 + dy.signum())
                    } else {
                        (to.0 + dx.signum(), to.1)
                    };
                    path.push(e);
                    e
                } else {
                    to
                };
                cx.move_along(page, &path, held.clone()).await?;
                sent += path.len();
                mouse(
                    page,
                    DispatchMouseEventType::MouseReleased,
                    end.0,
                    end.1,
                    held.clone(),
                    1,
                )
                .await?;
                cx.set_pointer(page, end);
                return Ok((
                    if directly {
                        "mouse, scrolling the page on the way (forge scrolled it: neither the page nor the wheel did)"
                    } else {
                        "mouse, scrolling the page on the way"
                    },
                    sent,
                ));
            }
            // Hold at the edge towards the end: 12 px inside the viewport, or 8 px inside an
            // inner scroll box that hides the end (where such boxes start scrolling).
            let edge = edge_point(&g, (gx, gy), (vw, vh));
            let target = if (edge.0 - at.0).hypot(edge.1 - at.1) > 1.0 {
                edge
            } else {
                // A move the page sees at the same place: 1 px back and forth.
                (edge.0, edge.1 + if sent % 2 == 0 { 1.0 } else { 0.0 })
            };
            cx.move_along(page, &[target], held.clone()).await?;
            at = target;
            sent += 1;
            tokio::time::sleep(EDGE_PAUSE).await;
            let scroll = (num(&g, "sx"), num(&g, "sy"));
            if last_scroll == Some(scroll) {
                still += 1;
            } else {
                still = 0;
            }
            last_scroll = Some(scroll);
            if still >= 3 && wheeled {
                // Not even the wheel scrolled it (Chromium sends no wheel scroll while a button
                // is held on some pages): scroll the page directly, as browser_scroll falls back
                // to doing (the page still gets its `scroll` event).
                observe::call(page, "dragNudge", &nudge_way(&g, (gx, gy), (vw, vh))).await?;
                still = 0;
                wheeled = false;
                directly = true;
            } else if still >= 3 {
                // The page does not scroll by itself: the wheel, towards the end.
                wheeled = true;
                let (dx, dy) = (gx - at.0, gy - at.1);
                let wheel = DispatchMouseEventParams::builder()
                    .r#type(DispatchMouseEventType::MouseWheel)
                    .x(at.0)
                    .y(at.1)
                    .button(MouseButton::Left)
                    .buttons(1)
                    .delta_x(if dx.abs() > vw / 2.0 {
                        dx.signum() * vw / 2.0
                    } else {
                        0.0
                    })
                    .delta_y(if dy.abs() > vh / 2.0 {
                        dy.signum() * vh / 2.0
                    } else {
                        0.0
                    })
                    .build()
                    .map_err(failed)?;
                page.execute(wheel).await?;
                tokio::time::sleep(EDGE_PAUSE).await;
                still = 0;
            }
        }
        let _ = mouse(
            page,
            DispatchMouseEventType::MouseReleased,
            at.0,
            at.1,
            held,
            1,
        )
        .await;
        Err(failed(format!(
            "the drag's end did not come into view after {LONG_DRAG_ROUNDS} rounds of holding at the edge and scrolling; released at the edge. Scroll with browser_scroll, then drag the rest"
        )))
    }
}

impl Drag {
    /// The rest of a long drag that became a native (HTML5) drag at `at`: `dragover` held at the
    /// edge towards the end while forge scrolls (the page's own handlers may scroll too; forge
    /// scrolls half a view when nothing moved for two rounds, as a browser's drag auto-scroll
    /// does), then `dragover` along the path to the end (past a target's midpoint), a short
    /// hold, `drop` and the button's release. Bounded by [`LONG_DRAG_ROUNDS`].
    #[allow(clippy::too_many_arguments)]
    async fn long_native(
        &self,
        cx: &mut Cx<'_>,
        page: &Page,
        data: DragData,
        mut at: (f64, f64),
        from: (f64, f64),
        mut sent: usize,
        onto_target: bool,
    ) -> R<(&'static str, usize)> {
        // Let the page finish its dragstart work first (see `Drag::drag`).
        observe::let_page_run(page, Duration::from_millis(300)).await;
        let drag_event = |kind: DispatchDragEventType, p: (f64, f64)| {
            DispatchDragEventParams::builder()
                .r#type(kind)
                .x(p.0)
                .y(p.1)
                .data(data.clone())
                .build()
                .map_err(failed)
        };
        let release = |p: (f64, f64)| {
            mouse(
                page,
                DispatchMouseEventType::MouseReleased,
                p.0,
                p.1,
                Some(MouseButton::Left),
                1,
            )
        };
        page.execute(drag_event(DispatchDragEventType::DragEnter, at)?)
            .await?;
        let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let mut last_scroll: Option<(f64, f64)> = None;
        let mut still = 0usize;
        let mut dir0: Option<(f64, f64)> = None;
        for _ in 0..LONG_DRAG_ROUNDS {
            let g = observe::call(page, "dragGoal", &Value::Null).await?;
            if let Some(e) = g.get("error").and_then(Value::as_str) {
                let _ = page
                    .execute(drag_event(DispatchDragEventType::DragCancel, at)?)
                    .await;
                let _ = release(at).await;
                return Err(failed(format!(
                    "the drag's target went away while the page scrolled ({e}); the native drag was cancelled"
                )));
            }
            let (gx, gy, vw, vh) = (num(&g, "x"), num(&g, "y"), num(&g, "vw"), num(&g, "vh"));
            let dir = *dir0.get_or_insert((gx - from.0, gy - from.1));
            if g.get("inView").and_then(Value::as_bool) == Some(true) {
                let mut to = (gx, gy);
                if onto_target {
                    let b = &g["box"];
                    to = past_midpoint((gx - dir.0, gy - dir.1), to, (num(b, "w"), num(b, "h")));
                }
                if (to.0 - at.0).hypot(to.1 - at.1) > 1.0 {
                    // Three `dragover`s at a time towards the end, then look again (as in
                    // `long_drag`).
                    for p in pointer::linear(at, to, final_steps(at, to))
                        .into_iter()
                        .take(3)
                    {
                        page.execute(drag_event(DispatchDragEventType::DragOver, p)?)
                            .await?;
                        sent += 1;
                        at = p;
                    }
                    continue;
                }
                for _ in 0..2 {
                    tokio::time::sleep(DROP_PAUSE).await;
                    page.execute(drag_event(DispatchDragEventType::DragOver, to)?)
                        .await?;
                    sent += 1;
                }
                page.execute(drag_event(DispatchDragEventType::Drop, to)?)
                    .await?;
                release(to).await?;
                cx.set_pointer(page, to);
                return Ok(("HTML5 drag-and-drop, scrolling on the way", sent));
            }
            let edge = edge_point(&g, (gx, gy), (vw, vh));
            let target = if (edge.0 - at.0).hypot(edge.1 - at.1) > 1.0 {
                edge
            } else {
                (edge.0, edge.1 + if sent % 2 == 0 { 1.0 } else { 0.0 })
            };
            page.execute(drag_event(DispatchDragEventType::DragOver, target)?)
                .await?;
            at = target;
            sent += 1;
            tokio::time::sleep(EDGE_PAUSE).await;
            let scroll = (num(&g, "sx"), num(&g, "sy"));
            still = if last_scroll == Some(scroll) {
                still + 1
            } else {
                0
            };
            last_scroll = Some(scroll);
            if still >= 2 {
                observe::call(page, "dragNudge", &nudge_way(&g, (gx, gy), (vw, vh))).await?;
                still = 0;
            }
        }
        let _ = page
            .execute(drag_event(DispatchDragEventType::DragCancel, at)?)
            .await;
        let _ = release(at).await;
        Err(failed(format!(
            "the native drag's end did not come into view after {LONG_DRAG_ROUNDS} rounds of scrolling towards it; the drag was cancelled. Scroll with browser_scroll so both ends are closer, then drag again"
        )))
    }
}

/// The way to scroll towards a long drag's end `goal` (`{"x": -1|0|1, "y": ...}`): along each
/// axis on which the end lies outside (or within 24 px of the edge of) the part of the viewport
/// it can be seen in.
fn nudge_way(g: &Value, goal: (f64, f64), viewport: (f64, f64)) -> Value {
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let c = &g["clip"];
    let (x, y, w, h) = match (num(c, "x"), num(c, "y"), num(c, "w"), num(c, "h")) {
        (Some(x), Some(y), Some(w), Some(h)) => (x, y, w, h),
        _ => (0.0, 0.0, viewport.0, viewport.1),
    };
    let way = |v: f64, lo: f64, len: f64| {
        if v < lo + 24.0 {
            -1.0
        } else if v > lo + len - 24.0 {
            1.0
        } else {
            0.0
        }
    };
    json!({"x": way(goal.0, x, w), "y": way(goal.1, y, h)})
}

/// Intermediate points of a long drag's last stretch, from where the pointer is to the end: one
/// per 10 px (at most 60), so that a list's item on the way is not skipped (sortables decide the
/// drop place by the item under each move); the drag sends three of them, then looks again.
fn final_steps(at: (f64, f64), to: (f64, f64)) -> usize {
    (((to.0 - at.0).hypot(to.1 - at.1) / 10.0).ceil() as usize).clamp(1, 60)
}

/// Where a long drag holds the pointer to scroll towards its end (`goal`): the end clamped into
/// the part of the viewport the end can be seen in (`g.clip`: the viewport, or an inner scroll
/// box), 12 px inside the viewport's edges or 8 px inside a box's (jQuery UI and SortableJS
/// scroll a box while the pointer is within 20-30 px of its edge).
fn edge_point(g: &Value, goal: (f64, f64), viewport: (f64, f64)) -> (f64, f64) {
    let num = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let c = &g["clip"];
    let inner = c.get("inner").and_then(Value::as_bool).unwrap_or(false);
    let (x, y, w, h) = match (num(c, "x"), num(c, "y"), num(c, "w"), num(c, "h")) {
        (Some(x), Some(y), Some(w), Some(h)) if w > 0.0 && h > 0.0 => (x, y, w, h),
        _ => (0.0, 0.0, viewport.0, viewport.1),
    };
    let m = if inner { 8.0 } else { 12.0 };
    // A side shorter than twice the margin: its middle.
    let clamp = |v: f64, lo: f64, len: f64| {
        if len > 2.0 * m {
            v.clamp(lo + m, lo + len - m)
        } else {
            lo + len / 2.0
        }
    };
    (clamp(goal.0, x, w), clamp(goal.1, y, h))
}

/// Whether the element under the pressed button became draggable on the press (SortableJS sets
/// `draggable` in its pointer-down handler), so the drag waits for Chromium to report the native
/// drag.
async fn draggable_now(page: &Page) -> bool {
    observe::call(page, "pressedDraggable", &Value::Null)
        .await
        .ok()
        .and_then(|v| v.get("draggable").and_then(Value::as_bool))
        .unwrap_or(false)
}

/// Where a drag onto a target of size `size` (w, h) centred at `to` releases: past the target's
/// midpoint in the direction of travel (a quarter of its size, at least 3 px, staying 2 px
/// inside it), on the main axis of the move. Sortable lists (jQuery UI sortable, SortableJS)
/// move an item down (or right) only once the pointer passes the target's middle going that
/// way; releasing at the centre would reorder only upwards.
fn past_midpoint(from: (f64, f64), to: (f64, f64), size: (f64, f64)) -> (f64, f64) {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let past = |len: f64| (len / 4.0).max(3.0).min((len / 2.0 - 2.0).max(0.0));
    if dy.abs() >= dx.abs() {
        (to.0, to.1 + dy.signum() * past(size.1))
    } else {
        (to.0 + dx.signum() * past(size.0), to.1)
    }
}

/// What a drag did to the order of the list the dragged element is an item of: forge's words
/// (positions only, for the status line) and the item texts before and after (page text, for the
/// fenced part). Nothing when the element is not a list item.
fn list_change(plan: &Value, after: &Value) -> (Option<String>, Option<String>) {
    let names = |v: &Value| -> Option<Vec<String>> {
        Some(
            v.as_array()?
                .iter()
                .map(|s| s.as_str().unwrap_or("").to_string())
                .collect(),
        )
    };
    let Some(b) = names(&plan["list"]) else {
        return (None, None);
    };
    let quote = |v: &[String]| {
        v.iter()
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let Some(a) = names(&after["list"]) else {
        return (
            Some("the list it was in is gone from the page".into()),
            None,
        );
    };
    let count = after
        .get("count")
        .and_then(Value::as_u64)
        .unwrap_or(a.len() as u64);
    let i0 = plan.get("index").and_then(Value::as_i64).unwrap_or(-1);
    let i1 = after.get("index").and_then(Value::as_i64).unwrap_or(-1);
    if a == b {
        return (
            Some(format!("list order unchanged ({count} items)")),
            Some(format!("list order (unchanged): {}", quote(&b))),
        );
    }
    let words = match (i0, i1) {
        (p, q) if p >= 0 && q >= 0 && p != q => format!(
            "list order changed: the item moved from position {} to {} of {count}",
            p + 1,
            q + 1,
        ),
        (p, -1) if p >= 0 => "list order changed: the item left this list".to_string(),
        _ => "list order changed".to_string(),
    };
    (
        Some(words),
        Some(format!(
            "list order before: {}\nlist order after: {}",
            quote(&b),
            quote(&a)
        )),
    )
}

/// A resize of the dragged element's container (a grip inside a resizable panel).
fn container_change(before: &Value, after: &Value) -> Option<String> {
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64);
    let (w0, h0) = (n(before, "w")?, n(before, "h")?);
    let (w1, h1) = (n(after, "w")?, n(after, "h")?);
    if (w1 - w0).abs() < 0.5 && (h1 - h0).abs() < 0.5 {
        return None;
    }
    Some(format!(
        "its container resized from {w0:.0}x{h0:.0} to {w1:.0}x{h1:.0} px"
    ))
}

/// What a drag did to the dragged element, from its box before and after.
fn what_moved(r: &str, before: &Value, after: &Value) -> String {
    if after.get("gone").and_then(Value::as_bool) == Some(true) {
        return format!("{r} was removed or replaced by the page");
    }
    let n = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let (dx, dy) = (
        n(after, "x") - n(before, "x"),
        n(after, "y") - n(before, "y"),
    );
    let (w0, h0, w1, h1) = (n(before, "w"), n(before, "h"), n(after, "w"), n(after, "h"));
    let mut parts = Vec::new();
    if dx.abs() >= 0.5 || dy.abs() >= 0.5 {
        parts.push(format!("{r} moved by ({dx:+.0}, {dy:+.0}) px"));
    }
    if (w1 - w0).abs() >= 0.5 || (h1 - h0).abs() >= 0.5 {
        parts.push(format!(
            "{r} resized from {w0:.0}x{h0:.0} to {w1:.0}x{h1:.0} px"
        ));
    }
    if parts.is_empty() {
        format!("{r} itself did not move or resize (see the observation for what changed)")
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_selectors_are_told_apart() {
        assert_eq!(locator("e12"), json!({"ref": "e12"}));
        assert_eq!(locator(" f2e7 "), json!({"ref": "f2e7"}));
        assert_eq!(locator("f2f1e3"), json!({"ref": "f2f1e3"}));
        assert_eq!(locator("f2fe3"), json!({"selector": "f2fe3"}));
        assert_eq!(locator("#list li"), json!({"selector": "#list li"}));
        assert_eq!(locator("e"), json!({"selector": "e"}));
        assert_eq!(locator("fe3"), json!({"selector": "fe3"}));
        assert_eq!(locator("e1x"), json!({"selector": "e1x"}));
    }

    #[test]
    fn what_moved_says_moved_resized_or_nothing() {
        let b = json!({"x": 10.0, "y": 10.0, "w": 100.0, "h": 50.0});
        assert_eq!(
            what_moved(
                "e1",
                &b,
                &json!({"x": 10.0, "y": 94.0, "w": 100.0, "h": 50.0})
            ),
            "e1 moved by (+0, +84) px"
        );
        assert_eq!(
            what_moved(
                "e1",
                &b,
                &json!({"x": 10.0, "y": 10.0, "w": 180.0, "h": 90.0})
            ),
            "e1 resized from 100x50 to 180x90 px"
        );
        assert!(what_moved("e1", &b, &b).contains("did not move"));
        assert!(what_moved("e1", &b, &json!({"gone": true})).contains("removed"));
    }
}
