//! A realistic pointer: moves go from where the pointer last was to the target along
//! intermediate points (never one jump), as a person's mouse does. Pages rely on that: a
//! jQuery-UI-style menu ignores the first hover after it opens, sortable lists and sliders follow
//! `mousemove`, and hover menus open on the way.

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::cdp::browser_protocol::{dom, overlay};
use chromiumoxide::Page;

use crate::error::{failed, R};

/// Most steps of an approach move (a long move is not made slower than this).
const MAX_APPROACH_STEPS: usize = 8;
/// Roughly one step per this many CSS px of distance.
const PX_PER_STEP: f64 = 120.0;
/// How far outside the target's box the approach's entering move starts, in CSS px.
const OUTSIDE: f64 = 3.0;

/// A target's box in top-viewport CSS px: left, top, width, height.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TargetBox {
    pub(crate) x: f64,
    pub(crate) y: f64,
    pub(crate) w: f64,
    pub(crate) h: f64,
}

impl TargetBox {
    fn contains(&self, p: (f64, f64)) -> bool {
        p.0 >= self.x && p.0 <= self.x + self.w && p.1 >= self.y && p.1 <= self.y + self.h
    }
}

/// An approach move split by what the page must see of it.
///
/// `quick` are the moves that bring the pointer just outside the target (sent without waiting
/// for each other's ack; the page sees at least a move that ends outside the target). `paced`
/// are the moves onto the target, each its own `mousemove` (each waits for the renderer's ack,
/// which comes once the move is dispatched, so the next cannot merge with it): the first one
/// enters the target from
/// outside, so the last `mouseover` the page sees is a fresh one on the target, after a
/// `mousemove` elsewhere (a jQuery UI 1.12 autocomplete replays a stale hover of a newly opened
/// menu on the first `mousemove` after it: that move is now the one outside).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Approach {
    pub(crate) quick: Vec<(f64, f64)>,
    pub(crate) paced: Vec<(f64, f64)>,
}

/// The approach from `from` to `to` (a point of the target).
///
/// With the target's box: one move to just outside the box (3 px out where the straight line
/// to `to` enters it; when the pointer rests inside the box, 4 px out through the nearest
/// edge), then 1 px short of `to`, then `to`. The travel is one move (hover menus on the way are
/// not crossed, as with a jump): while Chromium still dispatched moves once per frame (before
/// [`unbuffer`]), waiting for each eased point cost a frame per ~120 px (a click from a fresh
/// tab's corner took 133 ms instead of 34; docs/benchmarks.md, "Click from a far start").
/// Without a box (text positions, scroll points, a drag's start): eased travel
/// (about one point per 120 px, at most 8) then the two points on `to`.
pub(crate) fn approach(from: (f64, f64), to: (f64, f64), target: Option<TargetBox>) -> Approach {
    let mut quick = Vec::new();
    if let Some(b) = target {
        if b.contains(from) {
            // Leave through the nearest edge (not off the viewport's left or top: the box is
            // clipped to the viewport).
            let exits = [
                (from.0 - b.x, (b.x - OUTSIDE - 1.0, from.1)),
                (b.x + b.w - from.0, (b.x + b.w + OUTSIDE + 1.0, from.1)),
                (from.1 - b.y, (from.0, b.y - OUTSIDE - 1.0)),
                (b.y + b.h - from.1, (from.0, b.y + b.h + OUTSIDE + 1.0)),
            ];
            if let Some((_, p)) = exits
                .into_iter()
                .filter(|e| e.1 .0 >= 0.0 && e.1 .1 >= 0.0)
                .min_by(|a, b| a.0.total_cmp(&b.0))
            {
                quick.push(p);
            }
        } else {
            quick.push(outside_point(from, to, b));
        }
    } else {
        let dist = (to.0 - from.0).hypot(to.1 - from.1);
        let n = ((dist / PX_PER_STEP).ceil() as usize).clamp(1, MAX_APPROACH_STEPS);
        if dist >= 1.0 {
            for i in 1..n {
                let t = i as f64 / n as f64;
                let e = 1.0 - (1.0 - t).powi(3);
                quick.push((from.0 + (to.0 - from.0) * e, from.1 + (to.1 - from.1) * e));
            }
        }
    }
    // The point just short of the target, on the side the pointer comes from (the other side
    // when the pointer is already there, so that it is a real move).
    let last = quick.last().copied().unwrap_or(from);
    let d = (to.0 - last.0).hypot(to.1 - last.1);
    let near = if d >= 1.0 {
        (to.0 - (to.0 - last.0) / d, to.1 - (to.1 - last.1) / d)
    } else {
        (to.0 - 1.0, to.1)
    };
    Approach {
        quick: dedup(quick),
        paced: dedup(vec![near, to]),
    }
}

/// A point `OUTSIDE` px outside box `b` (across the edge it enters by) on the straight line from `from` (outside `b`) to `to`
/// (inside it), just before the line enters the box. When `from` is that close already, `from`.
fn outside_point(from: (f64, f64), to: (f64, f64), b: TargetBox) -> (f64, f64) {
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let len = dx.hypot(dy);
    if len < 1e-9 || b.contains(from) {
        return from;
    }
    // The largest t in [0, 1] at which the line is still outside the box (slab method: the line
    // enters when it is inside both slabs).
    let slab = |p: f64, d: f64, lo: f64, hi: f64| -> f64 {
        if d.abs() < 1e-12 {
            return 0.0; // Parallel: already inside this slab (`to` is in the box).
        }
        let (t1, t2) = ((lo - p) / d, (hi - p) / d);
        t1.min(t2).max(0.0)
    };
    let (tx, ty) = (
        slab(from.0, dx, b.x, b.x + b.w),
        slab(from.1, dy, b.y, b.y + b.h),
    );
    // Back off so that the point is OUTSIDE px beyond the edge the line crosses (measured across
    // that edge, not along a slanted line; Chromium hit-tests whole pixels).
    let back = if tx >= ty {
        OUTSIDE / dx.abs().max(1e-9)
    } else {
        OUTSIDE / dy.abs().max(1e-9)
    };
    let t_out = (tx.max(ty) - back).max(0.0);
    (from.0 + dx * t_out, from.1 + dy * t_out)
}

/// The points of a drag from `from` to `to`: `steps` evenly spaced intermediate points, then
/// `to` (sortable lists and sliders compute positions from each held-button move).
pub(crate) fn linear(from: (f64, f64), to: (f64, f64), steps: usize) -> Vec<(f64, f64)> {
    let n = steps.max(1);
    let mut pts: Vec<(f64, f64)> = (1..=n)
        .map(|i| {
            let t = i as f64 / (n + 1) as f64;
            (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t)
        })
        .collect();
    pts.push(to);
    dedup(pts)
}

/// Drop consecutive points closer than 0.01 px (a move to where the pointer is moves nothing).
fn dedup(pts: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(pts.len());
    for p in pts {
        if out
            .last()
            .is_some_and(|l| (l.0 - p.0).abs() < 0.01 && (l.1 - p.1).abs() < 0.01)
        {
            continue;
        }
        out.push(p);
    }
    out
}

/// The `buttons` bit mask of a held button.
fn buttons_of(b: &MouseButton) -> i64 {
    match b {
        MouseButton::Left => 1,
        MouseButton::Right => 2,
        MouseButton::Middle => 4,
        _ => 0,
    }
}

/// One CDP mouse event at viewport point (`x`, `y`); with `button`, pressed/released state and
/// `count` (the click count). A move with `button` is a move with that button held.
pub(crate) async fn mouse(
    page: &Page,
    kind: DispatchMouseEventType,
    x: f64,
    y: f64,
    button: Option<MouseButton>,
    count: i64,
) -> R<()> {
    let mut b = DispatchMouseEventParams::builder().r#type(kind).x(x).y(y);
    if let Some(btn) = button {
        let buttons = buttons_of(&btn);
        b = b.button(btn).buttons(buttons).click_count(count);
    }
    page.execute(b.build().map_err(failed)?).await?;
    Ok(())
}

/// Ask the tab's renderer to dispatch mouse moves as they come instead of once per frame.
///
/// Chromium's renderer holds `mousemove`s until the next animation frame (rAF-aligned input)
/// and merges moves queued together; a `mouseMoved` command is acknowledged only when its move
/// has been dispatched, so each awaited move cost a frame (about 16 ms), and moves sent without
/// waiting reached the page as one. With the Overlay domain enabled (it needs the DOM domain),
/// Chromium turns that buffering off for the page (`SetNeedsUnbufferedInputForDebugger`: the
/// DevTools front end needs input while paused), so every move reaches the page as its own
/// `mousemove` when it arrives, and an awaited move costs a round trip to the renderer's main
/// thread (about 1 ms). The page sees nothing else: the overlay draws nothing until asked, and
/// the DOM domain tracks only nodes it is asked for (forge asks for none). Both stay on for the
/// tab's life (Chromium restores them after a navigation). Best effort: if either is refused,
/// moves are as before (correct, one frame slower each); the error is returned for the caller
/// to ignore.
pub(crate) async fn unbuffer(page: &Page) -> R<()> {
    page.execute(dom::EnableParams::default()).await?;
    page.execute(overlay::EnableParams::default()).await?;
    Ok(())
}

/// Send moves to all `points` at once, without waiting for each one's ack (Chromium may merge
/// them into one `mousemove` at the last point), then wait for all.
pub(crate) async fn move_quick(page: &Page, points: &[(f64, f64)]) -> R<()> {
    futures::future::try_join_all(
        points
            .iter()
            .map(|&(x, y)| mouse(page, DispatchMouseEventType::MouseMoved, x, y, None, 0)),
    )
    .await?;
    Ok(())
}

/// Move along `points` (each a `mouseMoved`, with `held` pressed when given).
pub(crate) async fn move_along(
    page: &Page,
    points: &[(f64, f64)],
    held: Option<MouseButton>,
) -> R<()> {
    for &(x, y) in points {
        mouse(
            page,
            DispatchMouseEventType::MouseMoved,
            x,
            y,
            held.clone(),
            0,
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(a: &Approach) -> Vec<(f64, f64)> {
        a.quick.iter().chain(a.paced.iter()).copied().collect()
    }

    #[test]
    fn approach_moves_in_steps_and_ends_with_two_points_on_the_target() {
        let a = approach((0.0, 0.0), (400.0, 300.0), None);
        let pts = all(&a);
        // 500 px: 5 steps, so 4 eased points, then one px short and the target.
        assert_eq!(pts.len(), 6, "{pts:?}");
        assert_eq!(a.paced.len(), 2, "{a:?}");
        // No step crosses half the move or more.
        assert!(
            pts.windows(2)
                .all(|w| (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1) < 500.0 / 2.0),
            "{pts:?}"
        );
        assert_eq!(pts.last(), Some(&(400.0, 300.0)));
        let before = pts[pts.len() - 2];
        let d = (400.0 - before.0).hypot(300.0 - before.1);
        assert!((d - 1.0).abs() < 1e-9, "one px short: {before:?}");
        // Monotonic: every point is closer to the target than the one before.
        let dist = |p: &(f64, f64)| (400.0 - p.0).hypot(300.0 - p.1);
        assert!(pts.windows(2).all(|w| dist(&w[1]) < dist(&w[0])), "{pts:?}");
        // Already on the target: still two real moves.
        let still = approach((50.0, 60.0), (50.0, 60.0), None);
        assert_eq!(all(&still), vec![(49.0, 60.0), (50.0, 60.0)]);
        // A short move: the two points on the target only.
        let short = approach((0.0, 0.0), (60.0, 80.0), None);
        assert_eq!(all(&short).len(), 2, "{short:?}");
        // A very long move is capped.
        assert!(all(&approach((0.0, 0.0), (1e6, 1e6), None)).len() <= MAX_APPROACH_STEPS + 2);
    }

    #[test]
    fn with_a_box_the_target_is_entered_from_outside_last() {
        // A menu item 200x26 at (40, 100); the pointer rests on the item above it (the issue's
        // case: item 1 under the pointer, item 3 the target, 52 px away).
        let b = TargetBox {
            x: 40.0,
            y: 100.0,
            w: 200.0,
            h: 26.0,
        };
        let to = (140.0, 113.0);
        let a = approach((140.0, 61.0), to, Some(b));
        let out = *a.quick.last().expect("a move outside");
        assert!(
            !b.contains(out),
            "the last quick move is outside the box: {a:?}"
        );
        assert!(
            (out.1 - (100.0 - OUTSIDE)).abs() < 1e-6,
            "just above it: {out:?}"
        );
        assert!(a.paced.iter().all(|p| b.contains(*p)), "{a:?}");
        assert_eq!(a.paced.last(), Some(&to));
        // From far away: one move to just outside, then onto the target.
        let far = approach((0.0, 0.0), to, Some(b));
        assert_eq!(far.quick.len(), 1, "{far:?}");
        assert!(far.quick.iter().all(|p| !b.contains(*p)), "{far:?}");
        assert!(far.paced.iter().all(|p| b.contains(*p)), "{far:?}");
        // Resting inside the target: the first move leaves it through the nearest edge (the
        // bottom one here), then the pointer comes back in.
        let inside = approach((140.0, 122.0), to, Some(b));
        let first = inside.quick[0];
        assert!(!b.contains(first) && first.1 > 126.0, "{inside:?}");
        assert!(
            !b.contains(*inside.quick.last().expect("outside")),
            "{inside:?}"
        );
        assert!(inside.paced.iter().all(|p| b.contains(*p)), "{inside:?}");
    }

    #[test]
    fn linear_drags_take_the_given_steps() {
        let pts = linear((0.0, 0.0), (100.0, 0.0), 4);
        assert_eq!(
            pts,
            vec![
                (20.0, 0.0),
                (40.0, 0.0),
                (60.0, 0.0),
                (80.0, 0.0),
                (100.0, 0.0)
            ]
        );
        assert_eq!(linear((0.0, 0.0), (10.0, 0.0), 0).len(), 2);
    }
}
