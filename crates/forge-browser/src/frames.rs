//! Cross-origin iframes: their content walked, and refs into them (`f2e5`) acted on, through the
//! frame's own execution context.
//!
//! The page library in the top document cannot reach into a cross-origin iframe (its
//! `contentDocument` is null), so `observe.js` lists such a frame as one line. Here forge runs
//! the same library in the frame itself, in forge's isolated world of that frame:
//! - a cross-origin frame of the same site (`127.0.0.1:8080` embedding `127.0.0.1:9090`) lives
//!   in the tab's own renderer, and the tab's CDP session reaches it with
//!   `Page.createIsolatedWorld {frameId}`;
//! - a frame of another site is out of process (site isolation stays on): Chromium gives it its
//!   own `iframe` target, reached through a flattened CDP session attached to that target.
//!
//! chromiumoxide 0.9 auto-attaches iframe targets (flattened, resumed at once) on each page's
//! session, but has no way to send a command on any session other than a page's own (its `Page`
//! for a non-page target never answers). So forge opens one more CDP connection ([`CdpLink`]) to
//! the same browser's DevTools socket (Chromium binds it to 127.0.0.1 only), attaches there to
//! the iframe targets it needs and sends the frame's commands with that session id. The link
//! creates no target and no context, and attaches only to `iframe` targets of the session's own
//! browser context; the frames' traffic is the page's own, through the context's proxy.
//!
//! Refs: the frame's library numbers its elements `e1`, `e2`, ...; forge shows them as
//! `f<K>e<N>`, K being the frame number the top library gave the iframe element, so a tool
//! parses them as it parses same-origin frame refs. [`call`] routes a tool's library command for
//! such a ref to the frame (ref rewritten to `e<N>`), and for `point` translates the frame's
//! viewport point into the top viewport (where CDP mouse events go; Chromium hit-tests them into
//! the frame's renderer) and checks what covers it in the embedding page. Key events go to the
//! tab as before: Chromium delivers them to the focused frame, which the frame's library focused.
//!
//! The library is sent to a frame document once: a call first runs on the installed library
//! (`call_expr`, a few hundred bytes) and sends the library (`lib_expr`, 76 KB) only where the
//! document does not have it yet.
//!
//! Frames nested in a cross-origin frame K and same-origin to it are walked by K's library:
//! their elements come back with K's own frame refs (`f1e3`), shown as `fKf1e3` and routed to K
//! with the rest of the ref. Not walked: a frame cross-origin to the frame it is nested in (its
//! line is listed), and more than [`MAX_FRAMES`] cross-origin frames.

use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::dom::DescribeNodeParams;
use chromiumoxide::cdp::browser_protocol::page::{
    CreateIsolatedWorldParams, FrameId, NavigateParams, NavigateReturns, StopLoadingParams,
};
use chromiumoxide::cdp::browser_protocol::target::{GetTargetsParams, SessionId, TargetId};
use chromiumoxide::cdp::js_protocol::runtime::{
    EvaluateParams, ExecutionContextId, ReleaseObjectGroupParams,
};
use chromiumoxide::{Command, Page};
use serde_json::{json, Value};

use crate::cdp_link::CdpLink;
use crate::manager::Session;
use crate::observe::{self, Cdp, Element, Observation, PageError, Viewport};

/// Most cross-origin frames walked per observation.
pub(crate) const MAX_FRAMES: usize = 8;
/// Time limit for walking one frame during an observation (a frame that does not answer in time
/// stays a one-line entry).
const FRAME_LIMIT: Duration = Duration::from_secs(3);
/// Characters of a frame's text added to the observation's text.
const FRAME_TEXT: usize = 2000;
/// The object group of forge's CDP objects for frame number `k` (one per frame: frames are walked
/// at the same time, and releasing one frame's group must not free another's objects).
fn object_group(k: u64) -> String {
    format!("forge-frames-{k}")
}

/// How forge reaches a frame: the tab's own session, or a session on the frame's target.
#[derive(Clone)]
enum Channel {
    Page(Page),
    Child {
        link: Arc<CdpLink>,
        target: TargetId,
        session: SessionId,
    },
}

impl Cdp for Channel {
    async fn exec<C: Command + Send + Sync>(&self, cmd: C) -> Result<C::Response, PageError> {
        match self {
            Channel::Page(p) => p
                .execute(cmd)
                .await
                .map(|r| r.result)
                .map_err(|e| PageError::Cdp(e.to_string())),
            Channel::Child { link, session, .. } => link.exec(Some(session), cmd).await,
        }
    }
}

/// The routes to cross-origin frames found during one tool call (one action), so a call that
/// asks a frame's library several times (point, then act, then check) builds each route once.
/// Keyed by the tab's target id and the frame number.
#[derive(Default)]
pub(crate) struct Routes(std::sync::Mutex<std::collections::HashMap<(String, u64), FrameRoute>>);

impl Routes {
    fn get(&self, page: &Page, k: u64) -> Option<FrameRoute> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(page.target_id().inner().clone(), k))
            .cloned()
    }

    fn put(&self, page: &Page, k: u64, r: &FrameRoute) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((page.target_id().inner().clone(), k), r.clone());
    }

    fn drop_route(&self, page: &Page, k: u64) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(page.target_id().inner().clone(), k));
    }
}

/// One cross-origin frame, reachable.
#[derive(Clone)]
struct FrameRoute {
    channel: Channel,
    frame_id: FrameId,
    /// The object group for this frame's objects ([`object_group`]).
    group: String,
}

/// The page-library expression for `cmd(args)` (installing the library on first use).
fn lib_expr(cmd: &str, args: &Value) -> String {
    format!(
        "(globalThis.__forgeLib || (globalThis.__forgeLib = {lib}))[{cmd}]({args})",
        lib = observe::LIBRARY,
        cmd = serde_json::to_string(cmd).unwrap_or_default(),
    )
}

/// What [`call_expr`] returns where the library is not installed yet.
const NOT_INSTALLED: &str = "__forgeFrameNotInstalled";

/// The expression for `cmd(args)` on an installed library, without the library's text (76 KB):
/// where the library is missing (a new document) it returns `{NOT_INSTALLED: true}` and the
/// caller sends [`lib_expr`] once. The library's own results never carry that key.
fn call_expr(cmd: &str, args: &Value) -> String {
    format!(
        "globalThis.__forgeLib ? globalThis.__forgeLib[{cmd}]({args}) : ({{{NOT_INSTALLED}: true}})",
        cmd = serde_json::to_string(cmd).unwrap_or_default(),
    )
}

impl FrameRoute {
    /// Run library command `cmd(args)` in forge's isolated world of this frame.
    async fn call(&self, cmd: &str, args: &Value) -> Result<Value, PageError> {
        let ctx = self.context().await?;
        self.eval(ctx, cmd, args).await
    }

    /// Install the library, mark the frame's elements with JS click listeners
    /// (`observe/listeners.rs`, the same marking as the top document's), then observe.
    async fn observe(&self, args: &Value) -> Result<Value, PageError> {
        let ctx = self.context().await?;
        self.eval(ctx, "ready", &Value::Null).await?;
        let _ = observe::mark_frame_click_listeners(&self.channel, ctx, &self.group).await;
        let _ = self
            .channel
            .exec(ReleaseObjectGroupParams::new(self.group.clone()))
            .await;
        self.eval(ctx, "observe", args).await
    }

    /// The execution context of forge's isolated world in this frame's current document.
    async fn context(&self) -> Result<ExecutionContextId, PageError> {
        Ok(self
            .channel
            .exec(
                CreateIsolatedWorldParams::builder()
                    .frame_id(self.frame_id.clone())
                    .world_name(observe::WORLD)
                    .grant_univeral_access(false)
                    .build()
                    .map_err(PageError::Cdp)?,
            )
            .await?
            .execution_context_id)
    }

    /// Run `cmd(args)` in context `ctx`, sending the library only when that document's world
    /// does not have it yet (once per document).
    async fn eval(
        &self,
        ctx: ExecutionContextId,
        cmd: &str,
        args: &Value,
    ) -> Result<Value, PageError> {
        let v = self.eval_expr(ctx, call_expr(cmd, args)).await?;
        if v.get(NOT_INSTALLED).is_some() {
            return self.eval_expr(ctx, lib_expr(cmd, args)).await;
        }
        Ok(v)
    }

    async fn eval_expr(
        &self,
        ctx: ExecutionContextId,
        expression: String,
    ) -> Result<Value, PageError> {
        let resp = self
            .channel
            .exec(
                EvaluateParams::builder()
                    .expression(expression)
                    .context_id(ctx)
                    .return_by_value(true)
                    .await_promise(true)
                    .silent(true)
                    .build()
                    .map_err(PageError::Cdp)?,
            )
            .await?;
        if let Some(ex) = &resp.exception_details {
            let detail = ex
                .exception
                .as_ref()
                .and_then(|e| e.description.clone())
                .unwrap_or_else(|| ex.text.clone());
            return Err(PageError::Script(detail));
        }
        Ok(resp.result.value.clone().unwrap_or(Value::Null))
    }
}

/// The route to frame number `number` of `page` (the top library's numbering), or None when that
/// iframe is gone or has no frame yet.
async fn route(
    page: &Page,
    session: &Session,
    number: u64,
) -> Result<Option<FrameRoute>, PageError> {
    let frame_id = match frame_id_of(page, number).await {
        Ok(f) => f,
        Err(e) => {
            let _ = page
                .execute(ReleaseObjectGroupParams::new(object_group(number)))
                .await;
            return Err(e);
        }
    };
    let _ = page
        .execute(ReleaseObjectGroupParams::new(object_group(number)))
        .await;
    let Some(frame_id) = frame_id else {
        return Ok(None);
    };
    // An out-of-process frame is a target whose id is the frame's id.
    let targets = session
        .running
        .browser
        .execute(GetTargetsParams::default())
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?
        .result
        .target_infos;
    let oopif = targets
        .into_iter()
        .find(|t| t.target_id.inner() == frame_id.inner() && t.r#type == "iframe");
    let channel = match oopif {
        None => Channel::Page(page.clone()),
        Some(t) => {
            // Only frames of this session's own browser context.
            if t.browser_context_id.as_ref() != Some(&session.context_id) {
                return Ok(None);
            }
            let link = link(session).await?;
            let s = link.session_for(&t.target_id).await?;
            Channel::Child {
                link,
                target: t.target_id,
                session: s,
            }
        }
    };
    Ok(Some(FrameRoute {
        channel,
        frame_id,
        group: object_group(number),
    }))
}

/// The frame id of the iframe element the top library numbered `number`.
async fn frame_id_of(page: &Page, number: u64) -> Result<Option<FrameId>, PageError> {
    let ctx = observe::isolated_context(page).await?;
    let el = page
        .execute(
            EvaluateParams::builder()
                // Frame numbers come from the library in this world: where it is not installed
                // (a new document), there is no frame `number` yet, so the library is not sent.
                .expression(format!(
                    "globalThis.__forgeLib ? globalThis.__forgeLib.frameElement({number}) : null"
                ))
                .context_id(ctx)
                .object_group(object_group(number))
                .silent(true)
                .build()
                .map_err(PageError::Cdp)?,
        )
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?;
    let Some(oid) = el.result.result.object_id.clone() else {
        return Ok(None);
    };
    let node = page
        .execute(DescribeNodeParams::builder().object_id(oid).build())
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?;
    Ok(node.result.node.frame_id.clone())
}

/// Send `Page.navigate {url}` for `page` on forge's own link (a session forge attached to the
/// tab's target there) and return Chromium's answer, which comes when the navigation commits or
/// fails (None when it did not within `limit`: the load is then stopped, so it cannot hold up
/// the next navigation). chromiumoxide's own `Page.navigate` waits for every frame's `load` (see
/// `tools/navigate.rs`).
pub(crate) async fn navigate(
    page: &Page,
    session: &Session,
    url: &str,
    limit: Duration,
) -> Result<Option<NavigateReturns>, PageError> {
    let link = link(session).await?;
    let target = page.target_id().clone();
    let mut s = link.session_for(&target).await?;
    let deadline = tokio::time::Instant::now() + limit;
    for attempt in 0..2 {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match link
            .exec_within(Some(&s), NavigateParams::new(url), left)
            .await
        {
            Ok(r) => return Ok(Some(r)),
            Err(PageError::Cdp(e)) if e.contains("no answer within") => {
                let _ = link.exec(Some(&s), StopLoadingParams::default()).await;
                return Ok(None);
            }
            // forge's session on the tab is gone (Chromium detached it): attach afresh, once.
            Err(PageError::Cdp(e))
                if attempt == 0 && e.to_ascii_lowercase().contains("session") =>
            {
                link.forget(&target);
                s = link.session_for(&target).await?;
            }
            Err(e) => return Err(e),
        }
    }
    Err(PageError::Cdp(format!(
        "cannot navigate to {url}: forge's session on the tab keeps going away"
    )))
}

/// The browser's frame link, opened on first use.
async fn link(session: &Session) -> Result<Arc<CdpLink>, PageError> {
    let running = &session.running;
    running
        .frame_link
        .get_or_try_init(|| async {
            CdpLink::connect(running.browser.websocket_address())
                .await
                .map(Arc::new)
        })
        .await
        .cloned()
}

/// Run `cmd(args)` on `route`, attaching once more when the frame's session went away (the frame
/// navigated to another process, say).
async fn call_routed(
    page: &Page,
    session: &Session,
    number: u64,
    route_now: FrameRoute,
    cmd: &str,
    args: &Value,
) -> Result<Value, PageError> {
    match route_now.call(cmd, args).await {
        Ok(v) => Ok(v),
        Err(e) => {
            let Channel::Child { link, target, .. } = &route_now.channel else {
                return Err(e);
            };
            link.forget(target);
            match route(page, session, number).await? {
                Some(r) => r.call(cmd, args).await,
                None => Ok(json!({"error": "stale"})),
            }
        }
    }
}

/// A frame argument, `"f2"`, `"2"` or `2`, as its number.
fn frame_number(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().strip_prefix('f').unwrap_or(s.trim()).parse().ok(),
        _ => None,
    }
}

/// `f<K>e<N>` -> (K, `e<N>`); `f<K>f<J>e<N>` (an element of frame J nested in cross-origin
/// frame K, in K's own frame numbering) -> (K, `f<J>e<N>`).
fn split_ref(r: &str) -> Option<(u64, String)> {
    let rest = r.trim().strip_prefix('f')?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let k = rest[..digits].parse().ok()?;
    let inner = &rest[digits..];
    let body = match inner.strip_prefix('f') {
        Some(nested) => {
            let d = nested.chars().take_while(char::is_ascii_digit).count();
            (d > 0).then(|| &nested[d..])?
        }
        None => inner,
    };
    let n = body.strip_prefix('e')?;
    (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then(|| (k, inner.to_string()))
}

/// Run page-library command `cmd(args)` for the element `args` names: in the top document's
/// library, or, when `args.ref` points into a cross-origin frame, in that frame's library (ref
/// rewritten both ways; for `point`, the point moved into the top viewport and checked for
/// covers in the embedding page).
pub(crate) async fn call(
    page: &Page,
    session: &Session,
    routes: &Routes,
    cmd: &str,
    args: &Value,
) -> Result<Value, PageError> {
    // The frame: a frame ref's (`f2e5`), or the `frame` argument of a selector (`f2`).
    let by_ref = args.get("ref").and_then(Value::as_str).and_then(split_ref);
    let by_frame = match args.get("frame") {
        None | Some(Value::Null) => None,
        Some(f) => match frame_number(f) {
            Some(k) => Some(k),
            None => return Ok(json!({"error": "bad-frame"})),
        },
    };
    let Some(k) = by_ref.as_ref().map(|(k, _)| *k).or(by_frame) else {
        return observe::call(page, cmd, args).await;
    };
    let b = observe::call(page, "frameBox", &json!({"frame": k})).await?;
    if b.get("error").is_some() {
        return Ok(json!({"error": if by_ref.is_some() { "stale" } else { "no-frame" }}));
    }
    if b.get("reachable").and_then(Value::as_bool) == Some(true) {
        // A same-origin frame: the top library walks and drives it itself.
        return observe::call(page, cmd, args).await;
    }
    let r = match routes.get(page, k) {
        Some(r) => r,
        None => match route(page, session, k).await? {
            Some(r) => {
                routes.put(page, k, &r);
                r
            }
            None => return Ok(json!({"error": "stale"})),
        },
    };
    let mut inner = args.clone();
    if let Some(o) = inner.as_object_mut() {
        // In the frame's own library the selector is matched in its own document.
        o.remove("frame");
    }
    if let Some((_, rest)) = &by_ref {
        inner["ref"] = json!(rest);
    }
    let mut v = match call_routed(page, session, k, r, cmd, &inner).await {
        Ok(v) => v,
        Err(e) => {
            routes.drop_route(page, k);
            return Err(e);
        }
    };
    if let Some(rr) = v.get("ref").and_then(Value::as_str) {
        if rr.starts_with('e') || rr.starts_with('f') {
            v["ref"] = json!(format!("f{k}{rr}"));
        }
    }
    if cmd == "point" && v.get("error").is_none() {
        let x = v.get("x").and_then(Value::as_f64).unwrap_or(0.0);
        let y = v.get("y").and_then(Value::as_f64).unwrap_or(0.0);
        let top = observe::call(
            page,
            "frameBox",
            &json!({"frame": k, "scroll": true, "inner": {"x": x, "y": y}}),
        )
        .await?;
        if top.get("error").is_some() {
            return Ok(json!({"error": "stale", "ref": args.get("ref")}));
        }
        v["x"] = top.get("x").cloned().unwrap_or(json!(x));
        v["y"] = top.get("y").cloned().unwrap_or(json!(y));
        let own = v.get("cover").and_then(Value::as_str).unwrap_or("");
        let outer = top.get("cover").and_then(Value::as_str).unwrap_or("");
        if own.is_empty() && !outer.is_empty() {
            v["cover"] = json!(outer);
        }
        // A click in a frame never navigates this tab itself (only the frame).
        v["navLikely"] = json!(false);
        if top.get("scrolled").and_then(Value::as_bool) == Some(true) {
            // Chromium routes mouse events to an out-of-process frame by the hit-test regions
            // of the last composited frame: let the scroll reach the screen first.
            painted(page).await;
        }
    }
    Ok(v)
}

/// Wait (at most 300 ms) for two animation frames of `page`.
async fn painted(page: &Page) {
    let wait = async {
        let ctx = observe::isolated_context(page).await.ok()?;
        let p = EvaluateParams::builder()
            .expression("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))")
            .context_id(ctx)
            .await_promise(true)
            .return_by_value(true)
            .silent(true)
            .build()
            .ok()?;
        page.execute(p).await.ok()
    };
    let _ = tokio::time::timeout(Duration::from_millis(300), wait).await;
}

/// Why typing into the focused element needs the fill opt-in, or "" (the top library's
/// `focusSensitivity`, asked of the cross-origin frame that holds the focus when there is one).
pub(crate) async fn focus_sensitivity(page: &Page, session: &Session) -> Result<String, PageError> {
    let v = observe::call(page, "focusSensitivity", &Value::Null).await?;
    let why = |v: &Value| {
        v.get("sensitive")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let Some(k) = v.get("frame").and_then(Value::as_u64) else {
        return Ok(why(&v));
    };
    // Focus is in a cross-origin frame: that frame's library can inspect it. Anything that
    // fails leaves the top library's cautious answer.
    let Ok(Some(r)) = route(page, session, k).await else {
        return Ok(why(&v));
    };
    match call_routed(page, session, k, r, "focusSensitivity", &Value::Null).await {
        // Nested once more (a frame in the frame): still cautious.
        Ok(inner) if inner.get("frame").is_none() => Ok(why(&inner)),
        _ => Ok(why(&v)),
    }
}

/// Observe `page`, walking its cross-origin frames (at most [`MAX_FRAMES`]) into the element list
/// at the frames' places, with frame-qualified refs.
pub(crate) async fn observe(page: &Page, session: &Session) -> Result<Observation, PageError> {
    let mut obs = observe::observe(page).await?;
    let todo: Vec<usize> = obs
        .frames
        .iter()
        .enumerate()
        .filter(|(_, f)| !f.same_origin && f.blocked.is_none())
        .map(|(i, _)| i)
        .take(MAX_FRAMES)
        .collect();
    // The frames are walked at the same time (each within its own limit): their CDP round trips
    // overlap instead of adding up.
    let viewport = obs.viewport.clone();
    let walks = todo.into_iter().filter_map(|i| {
        let k = obs.frames[i]
            .frame
            .strip_prefix('f')
            .and_then(|s| s.parse::<u64>().ok())?;
        let viewport = &viewport;
        Some(async move {
            let walked = tokio::time::timeout(FRAME_LIMIT, walk(page, session, k, viewport)).await;
            (i, k, walked)
        })
    });
    let results = futures::future::join_all(walks).await;
    let mut inserts: Vec<(usize, usize, Vec<Element>)> = Vec::new();
    let mut nested: Vec<observe::Frame> = Vec::new();
    for (i, k, walked) in results {
        let Ok(Ok(Some((child, origin)))) = walked else {
            continue;
        };
        let f = &mut obs.frames[i];
        if child.url.starts_with("chrome-error:") {
            // Chromium's error page: its text is Chromium's, not the site's.
            f.blocked = Some("it did not load: Chromium shows its error page".into());
            continue;
        }
        f.walked = true;
        if !origin.is_empty() {
            f.origin = origin;
        }
        let at = f.at.unwrap_or(obs.elements.len()).min(obs.elements.len());
        let text = child.text.trim();
        if !text.is_empty() {
            let cut: String = text.chars().take(FRAME_TEXT).collect();
            obs.text.push_str(&format!("\n[frame f{k}] {cut}"));
        }
        inserts.push((at, i, child.elements));
        // Its own frames, named in the page's numbering (`f2f1`); frames nested in those again
        // (a frame cross-origin to the frame) are listed but not walked.
        for mut nf in child.frames {
            nf.frame = format!("f{k}{}", nf.frame);
            nf.at = None;
            nested.push(nf);
        }
    }
    obs.frames.extend(nested);
    // Later places first (and of two frames at one place, the later frame first), so earlier
    // indices stay valid and frames keep their document order.
    inserts.sort_by_key(|x| std::cmp::Reverse((x.0, x.1)));
    for (at, _, els) in inserts {
        obs.elements.splice(at..at, els);
    }
    Ok(obs)
}

/// Walk frame `k`: its elements with `f<k>` refs and positions relative to the top viewport, and
/// the frame's real origin.
async fn walk(
    page: &Page,
    session: &Session,
    k: u64,
    top: &Viewport,
) -> Result<Option<(Observation, String)>, PageError> {
    let Some(r) = route(page, session, k).await? else {
        return Ok(None);
    };
    let args = json!({"maxText": FRAME_TEXT});
    let v = match r.observe(&args).await {
        Ok(v) => v,
        // The frame's session went away (the frame navigated to another process, say).
        Err(_) => call_routed(page, session, k, r, "observe", &args).await?,
    };
    let Ok(mut child) = serde_json::from_value::<Observation>(v) else {
        return Ok(None);
    };
    let b = observe::call(page, "frameBox", &json!({"frame": k})).await?;
    let bx = |key: &str| {
        b.get("box")
            .and_then(|x| x.get(key))
            .and_then(Value::as_f64)
            .unwrap_or(0.0)
    };
    let (x, y, w, h) = (bx("x"), bx("y"), bx("width"), bx("height"));
    // Where the whole frame is relative to the top viewport decides for its in-view elements.
    let frame_where = if y + h <= 0.0 {
        "above"
    } else if y >= top.height {
        "below"
    } else if x + w <= 0.0 || x >= top.width {
        "side"
    } else {
        "in"
    };
    // Elements of frames nested in this one (walked by this frame's library: same-origin to it)
    // have refs in this frame's own frame numbering (`f1e3`): prefixed like the others
    // (`f2f1e3`), which the tools route to this frame with the rest of the ref.
    child
        .elements
        .retain(|e| e.reference.starts_with('e') || e.reference.starts_with('f'));
    for e in &mut child.elements {
        e.reference = format!("f{k}{}", e.reference);
        if e.location == "in" && frame_where != "in" {
            e.location = frame_where.to_string();
            e.covered_by = None;
        }
    }
    let origin = url::Url::parse(&child.url)
        .ok()
        .map(|u| u.origin().ascii_serialization())
        .filter(|o| o != "null")
        .unwrap_or_default();
    Ok(Some((child, origin)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_on_an_installed_library_does_not_carry_the_library() {
        let e = call_expr("observe", &json!({"maxText": 2000}));
        assert!(e.len() < 200, "{} bytes", e.len());
        assert!(e.contains(r#"["observe"]({"maxText":2000})"#), "{e}");
        assert!(lib_expr("observe", &Value::Null).len() > observe::LIBRARY.len());
    }

    #[test]
    fn frame_refs_split() {
        assert_eq!(split_ref("f2e15"), Some((2, "e15".into())));
        assert_eq!(split_ref(" f10e3 "), Some((10, "e3".into())));
        assert_eq!(split_ref("f2f1e3"), Some((2, "f1e3".into())));
        assert_eq!(split_ref("f2fe3"), None);
        assert_eq!(split_ref("f2f1"), None);
        assert_eq!(split_ref("e3"), None);
        assert_eq!(split_ref("f2"), None);
        assert_eq!(split_ref("fxe3"), None);
        assert_eq!(split_ref("f2e"), None);
    }
}
