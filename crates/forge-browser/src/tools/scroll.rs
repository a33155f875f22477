//! `browser_scroll`: scroll the page, or the scroll container around an element (a list, a chat
//! pane, a terms box), with real mouse-wheel events at the container's visible centre; when the
//! container ignores them (its centre is covered, or the page cancels wheel events) forge sets
//! its scroll position directly. Reports the new position and a fresh observation.
//!
//! The container, its position and the wheel point come from the page library (`scrollPlan`,
//! `scrollState`, `scrollSet` in observe.js, isolated world).

use std::time::Duration;

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType,
};
use chromiumoxide::Page;
use forge_tools::ToolOutput;
use serde_json::{json, Value};

use super::{schema, settle_frames, str_arg, target_props, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, R};
use crate::observe;

/// Share of the container's visible height (width) one `page` scrolls.
const PAGE_SHARE: f64 = 0.9;
/// Largest pixel `amount`.
const MAX_PIXELS: f64 = 1_000_000.0;
/// Wheel rounds for `to` (content may grow while scrolling, e.g. lazy lists).
const MAX_ROUNDS: usize = 4;

pub(crate) struct Scroll;

#[derive(Clone, Copy, PartialEq)]
enum Dir {
    Up,
    Down,
    Left,
    Right,
}

impl Dir {
    fn vertical(self) -> bool {
        matches!(self, Dir::Up | Dir::Down)
    }
    fn sign(self) -> f64 {
        match self {
            Dir::Up | Dir::Left => -1.0,
            Dir::Down | Dir::Right => 1.0,
        }
    }
    fn word(self) -> &'static str {
        match self {
            Dir::Up => "up",
            Dir::Down => "down",
            Dir::Left => "left",
            Dir::Right => "right",
        }
    }
}

/// How far: a share of a page, pixels, or to one end.
#[derive(Clone, Copy, PartialEq)]
enum Amount {
    Pages(f64),
    Pixels(f64),
    End,
}

/// What the input asks for: a direction and an amount.
fn parse(input: &Value) -> R<(Dir, Amount)> {
    let to = match input.get("to") {
        None | Some(Value::Null) => None,
        Some(v) => Some(match v.as_str().map(str::trim) {
            Some("top") => Dir::Up,
            Some("bottom") => Dir::Down,
            _ => {
                return Err(invalid(format!(
                    "`to` must be \"top\" or \"bottom\", not {v}"
                )))
            }
        }),
    };
    let dir = match input.get("direction") {
        None | Some(Value::Null) => None,
        Some(v) => Some(match v.as_str().map(str::trim) {
            Some("up") => Dir::Up,
            Some("down") => Dir::Down,
            Some("left") => Dir::Left,
            Some("right") => Dir::Right,
            _ => {
                return Err(invalid(format!(
                    "`direction` must be up, down, left or right, not {v}"
                )))
            }
        }),
    };
    let amount = match input.get("amount") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.trim() == "page" => Some(Amount::Pages(1.0)),
        Some(v) => match v.as_f64() {
            Some(n) if n > 0.0 && n <= MAX_PIXELS => Some(Amount::Pixels(n)),
            _ => {
                return Err(invalid(format!(
                    "`amount` must be \"page\" or a number of CSS pixels from 1 to {MAX_PIXELS}, not {v}"
                )))
            }
        },
    };
    match (to, dir, amount) {
        (Some(_), _, Some(_)) => Err(invalid(
            "give either `to` (top or bottom) or `amount`, not both",
        )),
        (Some(t), Some(d), None) if d != t => Err(invalid(format!(
            "`to` {} scrolls {}; leave `direction` out or make it match",
            if t == Dir::Up { "top" } else { "bottom" },
            t.word()
        ))),
        (Some(t), _, None) => Ok((t, Amount::End)),
        (None, d, a) => Ok((d.unwrap_or(Dir::Down), a.unwrap_or(Amount::Pages(1.0)))),
    }
}

/// A container's position along one axis.
#[derive(Debug, Clone, Copy)]
struct Pos {
    at: f64,
    max: f64,
    size: f64,
}

fn pos(v: &Value, vertical: bool) -> Pos {
    let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    if vertical {
        Pos {
            at: f("top"),
            max: f("maxTop"),
            size: f("height"),
        }
    } else {
        Pos {
            at: f("left"),
            max: f("maxLeft"),
            size: f("width"),
        }
    }
}

/// `1450` → `1,450`.
fn px(n: f64) -> String {
    let n = n.round().max(0.0) as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `900/1,450px (at bottom)`.
fn where_now(p: Pos, vertical: bool) -> String {
    let mut s = format!("{}/{}px", px(p.at), px(p.max));
    if p.at >= p.max - 1.0 {
        s.push_str(if vertical {
            " (at bottom)"
        } else {
            " (at right end)"
        });
    } else if p.at <= 1.0 {
        s.push_str(if vertical {
            " (at top)"
        } else {
            " (at left end)"
        });
    }
    s
}

#[async_trait]
impl BrowserAction for Scroll {
    fn name(&self) -> &'static str {
        "browser_scroll"
    }

    fn description(&self) -> &'static str {
        "Wheel-scroll the page or the box (list, chat) holding `ref`, by pages or px."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert(
            "direction".into(),
            json!({"type": "string", "enum": ["up", "down", "left", "right"], "default": "down"}),
        );
        p.insert(
            "amount".into(),
            json!({"default": "page", "anyOf": [{"type": "string", "enum": ["page"]}, {"type": "number", "minimum": 1}]}),
        );
        p.insert(
            "to".into(),
            json!({"type": "string", "enum": ["top", "bottom"]}),
        );
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let (dir, amount) = parse(input)?;
        let vertical = dir.vertical();
        let mut args = json!({"axis": if vertical { "y" } else { "x" }});
        let r = str_arg(input, "ref")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let s = str_arg(input, "selector")
            .map(str::trim)
            .filter(|s| !s.is_empty());
        if let Some(r) = r {
            args["ref"] = json!(r);
        } else if let Some(s) = s {
            args["selector"] = json!(s);
        }
        let page = cx.page()?;
        let plan = observe::call(&page, "scrollPlan", &args).await?;
        if let Some(e) = plan.get("error").and_then(Value::as_str) {
            return Err(cx.stale(e, &args).await);
        }
        let cref = plan
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = if plan.get("page").and_then(Value::as_bool) == Some(true) {
            "the page".to_string()
        } else if let Some(f) = plan
            .get("framePage")
            .and_then(Value::as_str)
            .filter(|f| !f.is_empty())
        {
            format!("frame {f}")
        } else {
            cref.clone()
        };
        let before = pos(&plan, vertical);
        if before.max < 1.0 {
            let axis = if vertical { "vertically" } else { "sideways" };
            let msg = match (r.or(s), name.as_str()) {
                (None, _) => format!("nothing scrolled: the page does not scroll {axis} (its content fits the window). To scroll a list or box inside it, pass its `ref` (or the ref of an item in it)"),
                (Some(t), "the page") => format!("nothing scrolled: neither {t} nor any element around it scrolls {axis}, and the page does not either"),
                (Some(_), n) => format!("nothing scrolled: {n} does not scroll {axis}"),
            };
            return Err(failed(msg));
        }
        let goal = match amount {
            Amount::End => {
                if dir.sign() > 0.0 {
                    before.max
                } else {
                    0.0
                }
            }
            Amount::Pages(n) => before.at + dir.sign() * n * before.size * PAGE_SHARE,
            Amount::Pixels(n) => before.at + dir.sign() * n,
        }
        .clamp(0.0, before.max);
        if (goal - before.at).abs() < 1.0 {
            let edge = match dir {
                Dir::Up => "top",
                Dir::Down => "bottom",
                Dir::Left => "left end",
                Dir::Right => "right end",
            };
            return cx
                .observed(
                    format!(
                        "{name} is already at the {edge} ({}/{}px); nothing to scroll {}",
                        px(before.at),
                        px(before.max),
                        dir.word()
                    ),
                    DEFAULT_BUDGET,
                )
                .await;
        }

        let in_view = plan.get("inView").and_then(Value::as_bool).unwrap_or(false);
        let covered = plan
            .get("cover")
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        let x = plan.get("x").and_then(Value::as_f64).unwrap_or(0.0);
        let y = plan.get("y").and_then(Value::as_f64).unwrap_or(0.0);
        let cargs = json!({"ref": cref});
        let mut now = before;
        let mut fallback = None;
        if !in_view {
            fallback = Some("it has no visible area to turn the wheel over");
        } else if covered {
            fallback = Some(
                "another element covers its visible centre (wheel events would reach that instead)",
            );
        } else {
            cx.move_pointer(&page, (x, y), None).await?;
            let rounds = if amount == Amount::End { MAX_ROUNDS } else { 1 };
            for _ in 0..rounds {
                let delta = goal_now(amount, dir, goal, now) - now.at;
                if delta.abs() < 1.0 {
                    break;
                }
                wheel(&page, x, y, delta, vertical).await?;
                let after = settle(
                    &page,
                    &cargs,
                    vertical,
                    now.at,
                    goal_now(amount, dir, goal, now),
                )
                .await?;
                let moved = (after.at - now.at).abs() >= 1.0;
                now = after;
                if !moved {
                    break;
                }
            }
            if (now.at - before.at).abs() < 1.0 {
                fallback = Some("wheel events did not move it (the page may cancel them)");
            }
        }
        if fallback.is_some() {
            let key = if vertical { "top" } else { "left" };
            let target = goal_now(amount, dir, goal, now);
            let v = observe::call(&page, "scrollSet", &json!({"ref": cref, key: target})).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(cx.stale(e, &cargs).await);
            }
            now = pos(&v, vertical);
        }
        settle_frames(&page).await;
        let mut status = if (now.at - before.at).abs() < 1.0 {
            format!("{name} did not move: still at {}", where_now(now, vertical))
        } else {
            format!(
                "scrolled {name} {} to {}",
                dir.word(),
                where_now(now, vertical)
            )
        };
        match fallback {
            Some(why) => status.push_str(&format!(
                "; {why}, so forge set its scroll position directly"
            )),
            None => status.push_str(" with the mouse wheel"),
        }
        cx.observed(status, DEFAULT_BUDGET).await
    }
}

/// The position to reach now: the far end for `to` (it may have grown while scrolling), else the
/// goal computed at the start.
fn goal_now(amount: Amount, dir: Dir, goal: f64, now: Pos) -> f64 {
    match amount {
        Amount::End if dir.sign() > 0.0 => now.max,
        _ => goal,
    }
}

/// One mouse-wheel event of `delta` CSS pixels at (`x`, `y`).
async fn wheel(page: &Page, x: f64, y: f64, delta: f64, vertical: bool) -> R<()> {
    let (dx, dy) = if vertical { (0.0, delta) } else { (delta, 0.0) };
    let p = DispatchMouseEventParams::builder()
        .r#type(DispatchMouseEventType::MouseWheel)
        .x(x)
        .y(y)
        .delta_x(dx)
        .delta_y(dy)
        .build()
        .map_err(failed)?;
    page.execute(p).await?;
    Ok(())
}

/// Wait (bounded) until the container stops moving after a wheel event: it reached `goal`, or
/// its position held still for a few polls after moving, or it never started moving.
async fn settle(page: &Page, cargs: &Value, vertical: bool, from: f64, goal: f64) -> R<Pos> {
    const POLL: Duration = Duration::from_millis(20);
    const NEVER_MOVED: Duration = Duration::from_millis(400);
    const CAP: Duration = Duration::from_secs(3);
    let started = tokio::time::Instant::now();
    let mut last = from;
    let mut still = 0;
    let mut moved = false;
    let mut waited_for_frames = false;
    loop {
        tokio::time::sleep(POLL).await;
        let v = observe::call(page, "scrollState", cargs).await?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(failed(format!(
                "the scrolled element went away while scrolling ({e}); call browser_state for a fresh observation"
            )));
        }
        let p = pos(&v, vertical);
        if (p.at - goal).abs() < 1.0 {
            return Ok(p);
        }
        if (p.at - last).abs() < 0.5 {
            still += 1;
        } else {
            still = 0;
            moved = true;
        }
        last = p.at;
        let waited = started.elapsed();
        if !moved && waited >= NEVER_MOVED && !waited_for_frames {
            // On a loaded machine the wheel's scroll may not have been composited within
            // NEVER_MOVED: before judging that the page cancelled it, let two of the page's
            // frames pass (once; at most 1 s), then look again.
            waited_for_frames = true;
            crate::frames::painted_within(page, Duration::from_secs(1)).await;
            continue;
        }
        if (moved && still >= 4) || (!moved && waited >= NEVER_MOVED) || waited >= CAP {
            return Ok(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_parse_and_positions_read_well() {
        let (d, a) = parse(&json!({})).expect("defaults");
        assert!(d == Dir::Down && a == Amount::Pages(1.0));
        let (d, a) = parse(&json!({"to": "top"})).expect("to top");
        assert!(d == Dir::Up && a == Amount::End);
        let (d, a) = parse(&json!({"direction": "left", "amount": 120})).expect("pixels");
        assert!(d == Dir::Left && a == Amount::Pixels(120.0));
        assert!(parse(&json!({"to": "bottom", "amount": 5})).is_err());
        assert!(parse(&json!({"to": "bottom", "direction": "up"})).is_err());
        assert!(parse(&json!({"amount": -3})).is_err());
        assert!(parse(&json!({"amount": "lots"})).is_err());
        assert!(parse(&json!({"direction": "sideways"})).is_err());
        assert_eq!(px(1450.4), "1,450");
        assert_eq!(px(1_234_567.0), "1,234,567");
        assert_eq!(px(12.0), "12");
        let p = |at, max| Pos {
            at,
            max,
            size: 100.0,
        };
        assert_eq!(where_now(p(900.0, 1450.0), true), "900/1,450px");
        assert_eq!(
            where_now(p(1450.0, 1450.0), true),
            "1,450/1,450px (at bottom)"
        );
        assert_eq!(where_now(p(0.0, 1450.0), true), "0/1,450px (at top)");
    }
}
