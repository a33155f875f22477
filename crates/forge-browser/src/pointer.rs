//! A realistic pointer: moves go from where the pointer last was to the target along
//! intermediate points (never one jump), as a person's mouse does. Pages rely on that: a
//! jQuery-UI-style menu ignores the first hover after it opens, sortable lists and sliders follow
//! `mousemove`, and hover menus open on the way.

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchMouseEventParams, DispatchMouseEventType, MouseButton,
};
use chromiumoxide::Page;

use crate::error::{failed, R};

/// Most steps of an approach move (a long move is not made slower than this).
const MAX_APPROACH_STEPS: usize = 8;
/// Roughly one step per this many CSS px of distance. Every move the page sees as its own
/// `mousemove` costs a frame (about 17 ms: Chromium dispatches moves with the next animation
/// frame, and merges moves sent within one frame into one), so a short move is not cut into
/// more steps than needed: under this distance it is just the two points on the target.
const PX_PER_STEP: f64 = 120.0;

/// The points of a move from `from` to `to` for reaching a target (click, hover): eased (fast
/// start, slow arrival, so the last points fall inside the target), ending with a point 1 px
/// short of `to` and `to` itself, so the target always sees at least two moves over it even
/// when the pointer already rests on it.
pub(crate) fn approach(from: (f64, f64), to: (f64, f64)) -> Vec<(f64, f64)> {
    let dist = (to.0 - from.0).hypot(to.1 - from.1);
    let n = ((dist / PX_PER_STEP).ceil() as usize).clamp(1, MAX_APPROACH_STEPS);
    let mut pts = Vec::with_capacity(n + 2);
    // Already there: no eased part (it would be moves to where the pointer is).
    let eased = if dist >= 1.0 { 1..n } else { 1..1 };
    for i in eased {
        let t = i as f64 / n as f64;
        let e = 1.0 - (1.0 - t).powi(3);
        pts.push((from.0 + (to.0 - from.0) * e, from.1 + (to.1 - from.1) * e));
    }
    // The point just short of the target, on the side the pointer comes from (the other side
    // when the pointer is already there, so that it is a real move).
    let near = if dist >= 1.0 {
        (to.0 - (to.0 - from.0) / dist, to.1 - (to.1 - from.1) / dist)
    } else {
        (to.0 - 1.0, to.1)
    };
    pts.push(near);
    pts.push(to);
    dedup(pts)
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

    #[test]
    fn approach_moves_in_steps_and_ends_with_two_points_on_the_target() {
        let pts = approach((0.0, 0.0), (400.0, 300.0));
        // 500 px: 5 steps, so 4 eased points, then one px short and the target.
        assert_eq!(pts.len(), 6, "{pts:?}");
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
        let still = approach((50.0, 60.0), (50.0, 60.0));
        assert_eq!(still, vec![(49.0, 60.0), (50.0, 60.0)]);
        // A short move: the two points on the target only.
        let short = approach((0.0, 0.0), (60.0, 80.0));
        assert_eq!(short.len(), 2, "{short:?}");
        assert_eq!(short[1], (60.0, 80.0));
        // A very long move is capped.
        assert!(approach((0.0, 0.0), (1e6, 1e6)).len() <= MAX_APPROACH_STEPS + 1);
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
