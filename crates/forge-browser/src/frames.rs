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
//! with the rest of the ref. A frame cross-origin to the frame it is nested in is reached from
//! that frame's document the way a top-level one is reached from the top ([`Host`]), hop by hop,
//! to [`MAX_DEPTH`] levels; at most [`MAX_FRAMES`] cross-origin frames are walked in all.

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
fn object_group(name: &str) -> String {
    format!("forge-frames-{name}")
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
/// Keyed by the tab's target id and the frame's full name (`f2`, `f2f1`).
#[derive(Default)]
pub(crate) struct Routes(std::sync::Mutex<std::collections::HashMap<(String, String), FrameRoute>>);

impl Routes {
    fn get(&self, page: &Page, k: &str) -> Option<FrameRoute> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(page.target_id().inner().clone(), k.to_string()))
            .cloned()
    }

    fn put(&self, page: &Page, k: &str, r: &FrameRoute) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((page.target_id().inner().clone(), k.to_string()), r.clone());
    }

    fn drop_route(&self, page: &Page, k: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(page.target_id().inner().clone(), k.to_string()));
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

/// Where a frame's iframe element lives: the top document (the tab's own session) or a
/// cross-origin frame forge reached before (a frame nested in a cross-origin frame).
#[derive(Clone)]
enum Host {
    Top(Page),
    Frame(FrameRoute),
}

impl Host {
    /// Page-library command `cmd(args)` in this document's library.
    async fn lib(&self, cmd: &str, args: &Value) -> Result<Value, PageError> {
        match self {
            Host::Top(p) => observe::call(p, cmd, args).await,
            Host::Frame(r) => r.call(cmd, args).await,
        }
    }

    /// The channel that reaches a frame of this document living in the same process.
    fn channel(&self) -> Channel {
        match self {
            Host::Top(p) => Channel::Page(p.clone()),
            Host::Frame(r) => r.channel.clone(),
        }
    }

    /// The frame id of the iframe element this document's library numbered `number`.
    async fn frame_id_of(&self, number: u64, group: &str) -> Result<Option<FrameId>, PageError> {
        let (channel, ctx) = match self {
            Host::Top(p) => (
                Channel::Page(p.clone()),
                observe::isolated_context(p).await?,
            ),
            Host::Frame(r) => (r.channel.clone(), r.context().await?),
        };
        let el = channel
            .exec(
                EvaluateParams::builder()
                    // Frame numbers come from the library in this world: where it is not
                    // installed (a new document), there is no frame `number` yet, so the
                    // library is not sent.
                    .expression(format!(
                        "globalThis.__forgeLib ? globalThis.__forgeLib.frameElement({number}) : null"
                    ))
                    .context_id(ctx)
                    .object_group(group.to_string())
                    .silent(true)
                    .build()
                    .map_err(PageError::Cdp)?,
            )
            .await;
        let described = async {
            let Some(oid) = el?.result.object_id.clone() else {
                return Ok(None);
            };
            let node = channel
                .exec(DescribeNodeParams::builder().object_id(oid).build())
                .await?;
            Ok(node.node.frame_id.clone())
        }
        .await;
        let _ = channel
            .exec(ReleaseObjectGroupParams::new(group.to_string()))
            .await;
        described
    }
}

/// The route to frame number `number` of `host`'s document (that library's numbering), or None
/// when that iframe is gone or has no frame yet. `name` is the frame's full name (`f2`, `f2f1`).
async fn route(
    session: &Session,
    host: &Host,
    number: u64,
    name: &str,
) -> Result<Option<FrameRoute>, PageError> {
    let group = object_group(name);
    let Some(frame_id) = host.frame_id_of(number, &group).await? else {
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
        // In the process of the document that embeds it: that document's channel reaches it.
        None => host.channel(),
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
        group,
    }))
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
    // Lightpanda keeps one browser context per CDP connection: a second connection sees no tab,
    // so the navigation goes over the page's own connection.
    if session.running.engine == crate::engine::EngineKind::Lightpanda {
        return match tokio::time::timeout(limit, page.execute(NavigateParams::new(url))).await {
            Ok(Ok(r)) => Ok(Some(r.result)),
            Ok(Err(e)) => Err(PageError::Cdp(e.to_string())),
            Err(_) => Ok(None),
        };
    }
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
    session: &Session,
    host: &Host,
    number: u64,
    name: &str,
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
            match route(session, host, number, name).await? {
                Some(r) => r.call(cmd, args).await,
                None => Ok(json!({"error": "stale"})),
            }
        }
    }
}

/// Frames nested in cross-origin frames are walked and reached to this depth (a frame in a
/// frame in a frame ... : the top document's frames are depth 1).
pub(crate) const MAX_DEPTH: usize = 4;

/// Leading `f<K>` of a ref or frame name, and the rest: `f2f1e3` -> (2, `f1e3`), `f2e3` ->
/// (2, `e3`), `f2f1` -> (2, `f1`), `f2` -> (2, ``).
fn split_hop(r: &str) -> Option<(u64, &str)> {
    let rest = r.trim().strip_prefix('f')?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let k = rest[..digits].parse().ok()?;
    Some((k, &rest[digits..]))
}

/// A frame argument, `"f2"`, `"2"`, `2` or a nested frame's name `"f2f1"`, as its first frame
/// number and the rest of the name (empty for a frame of the document itself).
fn frame_path(v: &Value) -> Option<(u64, String)> {
    match v {
        Value::Number(n) => n.as_u64().map(|k| (k, String::new())),
        Value::String(s) => {
            let s = s.trim();
            if let Ok(k) = s.parse() {
                return Some((k, String::new()));
            }
            let (k, rest) = split_hop(s)?;
            let mut tail = rest;
            // The rest is more `f<J>` hops, nothing else.
            while !tail.is_empty() {
                tail = split_hop(tail).filter(|(_, t)| t.len() < tail.len())?.1;
            }
            Some((k, rest.to_string()))
        }
        _ => None,
    }
}

/// `f<K>e<N>` -> (K, `e<N>`); `f<K>f<J>...e<N>` (an element of a frame nested in cross-origin
/// frame K, in K's own frame numbering) -> (K, `f<J>...e<N>`).
fn split_ref(r: &str) -> Option<(u64, String)> {
    let (k, inner) = split_hop(r)?;
    let mut body = inner;
    for _ in 0..MAX_DEPTH * 2 {
        match body.strip_prefix('f') {
            Some(_) => {
                let (_, rest) = split_hop(body)?;
                if rest.len() + 1 >= body.len() {
                    return None;
                }
                body = rest;
            }
            None => break,
        }
    }
    let n = body.strip_prefix('e')?;
    (!n.is_empty() && n.chars().all(|c| c.is_ascii_digit())).then(|| (k, inner.to_string()))
}

/// Run page-library command `cmd(args)` for the element `args` names: in the top document's
/// library, or, when `args.ref` points into a cross-origin frame (at any depth up to
/// [`MAX_DEPTH`]), in that frame's library (ref rewritten both ways; for `point`, the point moved
/// into the top viewport and checked for covers in each embedding document).
pub(crate) async fn call(
    page: &Page,
    session: &Session,
    routes: &Routes,
    cmd: &str,
    args: &Value,
) -> Result<Value, PageError> {
    call_in(
        page,
        session,
        routes,
        Host::Top(page.clone()),
        String::new(),
        cmd,
        args.clone(),
        1,
    )
    .await
}

/// [`call`] in `host`'s document, whose frames are named `{prefix}f<K>`; `depth` is the depth
/// of those frames.
#[allow(clippy::too_many_arguments)]
fn call_in<'a>(
    page: &'a Page,
    session: &'a Session,
    routes: &'a Routes,
    host: Host,
    prefix: String,
    cmd: &'a str,
    args: Value,
    depth: usize,
) -> futures::future::BoxFuture<'a, Result<Value, PageError>> {
    Box::pin(async move {
        // The frame: a frame ref's (`f2e5`), or the `frame` argument of a selector (`f2`).
        let by_ref = args.get("ref").and_then(Value::as_str).and_then(split_ref);
        let by_frame = match args.get("frame") {
            None | Some(Value::Null) => None,
            Some(f) => match frame_path(f) {
                Some(k) => Some(k),
                None => return Ok(json!({"error": "bad-frame"})),
            },
        };
        let Some(k) = by_ref
            .as_ref()
            .map(|(k, _)| *k)
            .or(by_frame.as_ref().map(|f| f.0))
        else {
            return host.lib(cmd, &args).await;
        };
        let b = host.lib("frameBox", &json!({"frame": k})).await?;
        if b.get("error").is_some() {
            return Ok(json!({"error": if by_ref.is_some() { "stale" } else { "no-frame" }}));
        }
        if b.get("reachable").and_then(Value::as_bool) == Some(true) {
            // A same-origin frame: this document's library walks and drives it itself.
            return host.lib(cmd, &args).await;
        }
        if depth > MAX_DEPTH {
            return Ok(json!({"error": if by_ref.is_some() { "stale" } else { "no-frame" }}));
        }
        let name = format!("{prefix}f{k}");
        let r = match routes.get(page, &name) {
            Some(r) => r,
            None => match route(session, &host, k, &name).await? {
                Some(r) => {
                    routes.put(page, &name, &r);
                    r
                }
                None => return Ok(json!({"error": "stale"})),
            },
        };
        let mut inner = args.clone();
        if let Some(o) = inner.as_object_mut() {
            // In the frame's own library the selector is matched in its own document (or, for a
            // frame nested in it, in that frame: the rest of the name).
            match by_frame.as_ref().map(|f| f.1.as_str()) {
                Some(rest) if !rest.is_empty() => {
                    o.insert("frame".into(), json!(rest));
                }
                _ => {
                    o.remove("frame");
                }
            }
        }
        if let Some((_, rest)) = &by_ref {
            inner["ref"] = json!(rest);
        }
        let nested = Host::Frame(r.clone());
        let mut v = match call_in(
            page,
            session,
            routes,
            nested,
            name.clone(),
            cmd,
            inner.clone(),
            depth + 1,
        )
        .await
        {
            Ok(v) => v,
            Err(e) => {
                routes.drop_route(page, &name);
                // The frame's session went away (it navigated to another process, say): attach
                // afresh, once.
                let Channel::Child { link, target, .. } = &r.channel else {
                    return Err(e);
                };
                link.forget(target);
                match route(session, &host, k, &name).await? {
                    Some(r2) => {
                        routes.put(page, &name, &r2);
                        call_in(
                            page,
                            session,
                            routes,
                            Host::Frame(r2),
                            name.clone(),
                            cmd,
                            inner,
                            depth + 1,
                        )
                        .await?
                    }
                    None => return Ok(json!({"error": "stale"})),
                }
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
            let outer = host
                .lib(
                    "frameBox",
                    &json!({"frame": k, "scroll": true, "inner": {"x": x, "y": y}}),
                )
                .await?;
            if outer.get("error").is_some() {
                return Ok(json!({"error": "stale", "ref": args.get("ref")}));
            }
            let ox = outer.get("x").and_then(Value::as_f64).unwrap_or(x);
            let oy = outer.get("y").and_then(Value::as_f64).unwrap_or(y);
            v["x"] = json!(ox);
            v["y"] = json!(oy);
            // The visible box moves with the point.
            if let Some(bx) = v.get_mut("box").and_then(Value::as_object_mut) {
                for (key, d) in [("x", ox - x), ("y", oy - y)] {
                    if let Some(c) = bx.get(key).and_then(Value::as_f64) {
                        bx.insert(key.into(), json!(c + d));
                    }
                }
            }
            let own = v.get("cover").and_then(Value::as_str).unwrap_or("");
            let out_cover = outer.get("cover").and_then(Value::as_str).unwrap_or("");
            if own.is_empty() && !out_cover.is_empty() {
                v["cover"] = json!(out_cover);
            }
            // A click in a frame never navigates this tab itself (only the frame).
            v["navLikely"] = json!(false);
            if outer.get("scrolled").and_then(Value::as_bool) == Some(true) {
                // Chromium routes mouse events to an out-of-process frame by the hit-test
                // regions of the last composited frame: let the scroll reach the screen first.
                painted(page).await;
            }
        }
        Ok(v)
    })
}

/// Wait (at most 1 s) for two animation frames of `page`: on a loaded machine 300 ms was not
/// always enough for a scroll to reach the screen before a click into a cross-origin frame.
async fn painted(page: &Page) {
    painted_within(page, Duration::from_secs(1)).await;
}

/// Wait (at most `limit`) for two animation frames of `page`.
pub(crate) async fn painted_within(page: &Page, limit: Duration) {
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
    let _ = tokio::time::timeout(limit, wait).await;
}

/// Why typing into the focused element needs the fill opt-in, or "" (the top library's
/// `focusSensitivity`, asked of the cross-origin frame that holds the focus when there is one,
/// down to [`MAX_DEPTH`] frames deep).
pub(crate) async fn focus_sensitivity(page: &Page, session: &Session) -> Result<String, PageError> {
    let v = observe::call(page, "focusSensitivity", &Value::Null).await?;
    let why = |v: &Value| {
        v.get("sensitive")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut host = Host::Top(page.clone());
    let mut answer = v;
    let mut name = String::new();
    for _ in 0..MAX_DEPTH {
        let Some(k) = answer.get("frame").and_then(Value::as_u64) else {
            return Ok(why(&answer));
        };
        // Focus is in a cross-origin frame: that frame's library can inspect it. Anything that
        // fails leaves the cautious answer of the document that embeds it.
        name = format!("{name}f{k}");
        let Ok(Some(r)) = route(session, &host, k, &name).await else {
            return Ok(why(&answer));
        };
        match call_routed(
            session,
            &host,
            k,
            &name,
            r.clone(),
            "focusSensitivity",
            &Value::Null,
        )
        .await
        {
            Ok(inner) => {
                answer = inner;
                host = Host::Frame(r);
            }
            Err(_) => return Ok(why(&answer)),
        }
    }
    // Deeper than forge walks: still cautious.
    Ok(why(&answer))
}

/// Observe `page`, walking its cross-origin frames and the cross-origin frames nested in them
/// (at most [`MAX_FRAMES`] in all, [`MAX_DEPTH`] deep) into the element list at the frames'
/// places, with frame-qualified refs (`f2e1`, `f2f1e3`).
pub(crate) async fn observe(page: &Page, session: &Session) -> Result<Observation, PageError> {
    let mut obs = observe::observe(page).await?;
    let budget = std::sync::atomic::AtomicUsize::new(MAX_FRAMES);
    let host = Host::Top(page.clone());
    walk_frames(page, session, &host, &mut obs, "", &budget, 1).await;
    Ok(obs)
}

/// Take one frame from the walk budget (false when it is spent).
fn take(budget: &std::sync::atomic::AtomicUsize) -> bool {
    budget
        .fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        )
        .is_ok()
}

/// Walk the cross-origin frames of `obs` (the observation of `host`'s document, whose frames are
/// named `{prefix}f<K>`, at `depth`) into it: their elements at their places with `f<K>` refs,
/// their text after its text, and the frames nested in them after its frame lines.
async fn walk_frames(
    page: &Page,
    session: &Session,
    host: &Host,
    obs: &mut Observation,
    prefix: &str,
    budget: &std::sync::atomic::AtomicUsize,
    depth: usize,
) {
    let todo: Vec<(usize, u64)> = if depth > MAX_DEPTH {
        Vec::new()
    } else {
        obs.frames
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.same_origin && f.blocked.is_none())
            .filter_map(|(i, f)| {
                let k = f.frame.strip_prefix('f')?.parse::<u64>().ok()?;
                Some((i, k))
            })
            .filter(|_| take(budget))
            .collect()
    };
    // The frames' full names (`f2f1` for frame 1 of frame 2).
    for f in &mut obs.frames {
        f.frame = format!("{prefix}{}", f.frame);
    }
    // The frames are walked at the same time (each within its own limit): their CDP round trips
    // overlap instead of adding up.
    let viewport = obs.viewport.clone();
    let walks = todo.into_iter().map(|(i, k)| {
        let viewport = &viewport;
        async move {
            let name = format!("{prefix}f{k}");
            let walked = tokio::time::timeout(
                FRAME_LIMIT,
                walk(page, session, host, k, name, viewport, budget, depth),
            )
            .await;
            (i, k, walked)
        }
    });
    let results = futures::future::join_all(walks).await;
    let mut inserts: Vec<(usize, usize, Vec<Element>)> = Vec::new();
    let mut nested: Vec<observe::Frame> = Vec::new();
    for (i, _, walked) in results {
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
            obs.text.push_str(&format!("\n[frame {}] {cut}", f.frame));
        }
        inserts.push((at, i, child.elements));
        // Its own frames, already named in the page's numbering (`f2f1`).
        for mut nf in child.frames {
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
}

/// Walk frame `k` of `host`'s document (named `name`): its elements with `f<k>` refs (and those
/// of the cross-origin frames nested in it, walked the same way), located relative to `top` (the
/// embedding document's viewport), and the frame's real origin.
#[allow(clippy::too_many_arguments)]
fn walk<'a>(
    page: &'a Page,
    session: &'a Session,
    host: &'a Host,
    k: u64,
    name: String,
    top: &'a Viewport,
    budget: &'a std::sync::atomic::AtomicUsize,
    depth: usize,
) -> futures::future::BoxFuture<'a, Result<Option<(Observation, String)>, PageError>> {
    Box::pin(async move {
        let Some(r) = route(session, host, k, &name).await? else {
            return Ok(None);
        };
        let args = json!({"maxText": FRAME_TEXT});
        let v = match r.observe(&args).await {
            Ok(v) => v,
            // The frame's session went away (the frame navigated to another process, say).
            Err(_) => call_routed(session, host, k, &name, r.clone(), "observe", &args).await?,
        };
        let Ok(mut child) = serde_json::from_value::<Observation>(v) else {
            return Ok(None);
        };
        // The frames nested in this one that its library could not walk (cross-origin to it).
        let inner_host = Host::Frame(r);
        walk_frames(
            page,
            session,
            &inner_host,
            &mut child,
            &name,
            budget,
            depth + 1,
        )
        .await;
        let b = host.lib("frameBox", &json!({"frame": k})).await?;
        let bx = |key: &str| {
            b.get("box")
                .and_then(|x| x.get(key))
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        };
        let (x, y, w, h) = (bx("x"), bx("y"), bx("width"), bx("height"));
        // Where the whole frame is relative to the embedding viewport decides for its in-view
        // elements.
        let frame_where = if y + h <= 0.0 {
            "above"
        } else if y >= top.height {
            "below"
        } else if x + w <= 0.0 || x >= top.width {
            "side"
        } else {
            "in"
        };
        // Elements of frames nested in this one have refs in this frame's own frame numbering
        // (`f1e3`): prefixed like the others (`f2f1e3`), which the tools route to this frame
        // with the rest of the ref.
        child
            .elements
            .retain(|e| e.reference.starts_with('e') || e.reference.starts_with('f'));
        child.text = prefix_text_refs(&child.text, k);
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
    })
}

/// Whether `t` is a ref of a frame's library (`e3`, `f1e3`, `f1f2e3`).
fn is_ref(t: &str) -> bool {
    split_ref(t).is_some()
        || t.strip_prefix('e')
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// A frame's text with the refs of its text blocks (`e1 p "..."`, at the start of a line or
/// after a nested frame's `[frame f1f1] ` label) qualified with frame number `k`, as its
/// elements' refs are: the text's refs then name the frame's blocks, not the top document's.
fn prefix_text_refs(text: &str, k: u64) -> String {
    let fix = |line: &str| -> String {
        let (label, rest) = match line
            .strip_prefix("[frame ")
            .and_then(|r| r.find("] ").map(|i| i + 9))
        {
            Some(end) => line.split_at(end),
            None => ("", line),
        };
        match rest.split_once(' ') {
            Some((first, _)) if is_ref(first) => format!("{label}f{k}{rest}"),
            _ => line.to_string(),
        }
    };
    text.split('\n').map(fix).collect::<Vec<_>>().join("\n")
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
        assert_eq!(split_ref("f2f1f3e7"), Some((2, "f1f3e7".into())));
        assert_eq!(split_ref("f2f1fe7"), None);
    }

    #[test]
    fn nested_frame_names_split() {
        assert_eq!(frame_path(&json!("f2")), Some((2, String::new())));
        assert_eq!(frame_path(&json!("2")), Some((2, String::new())));
        assert_eq!(frame_path(&json!(3)), Some((3, String::new())));
        assert_eq!(frame_path(&json!("f2f1f4")), Some((2, "f1f4".into())));
        assert_eq!(frame_path(&json!("f2e1")), None);
        assert_eq!(frame_path(&json!("f2f")), None);
        assert_eq!(frame_path(&json!("x")), None);
    }

    #[test]
    fn a_frame_text_names_its_blocks_by_frame_refs() {
        let t = "e1 p \"Words\"\nButton Name\n[frame f1f1] f1e2 p \"Deep\"\ne4 is a chess move";
        assert_eq!(
            prefix_text_refs(t, 3),
            "f3e1 p \"Words\"\nButton Name\n[frame f1f1] f3f1e2 p \"Deep\"\nf3e4 is a chess move"
        );
    }
}
