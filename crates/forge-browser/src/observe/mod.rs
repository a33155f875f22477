//! The page library (`observe.js`) run in forge's isolated world, and the compact observation
//! text the model sees.
//!
//! Observation format (all of it page-derived, so the tools put it inside the fence):
//!
//! ```text
//! page: <title>
//! url: <url>
//! viewport: 1280x800, scrolled 0 of 2400px
//! elements (in view, reading order):
//! e1 link "Home" -> /
//! e2 textbox "Email" type=email value=" a@b.example\n" required
//! e3 button "Buy" [covered by div#cookie "We use cookies"]
//! e4 button hint="star"
//! e9 row "From Jane: Lunch?"
//!   e10 button hint="star"
//!   e11 button hint="trash"
//! e12 clickable "Documents" has children, collapsed
//! e13 scrollable hint="results" scroll 0/1,450px, 12 more items below in this list
//! e14 option "Apricot" [scrolled out of its list]
//! f1: iframe "Payment" same-origin http://127.0.0.1:8080
//! f1e4 button "Pay"
//! 12 more below, 3 above (browser_state with scroll=1 or a larger max_chars to see them)
//! text:
//! e20 h1 "Sign up"
//! e21 p "Create an account to …"
//! loose text outside blocks
//! ```
//!
//! - `hint=` (never a name) for a control without an accessible name: an inner svg `<title>` or
//!   `<use href="#icon-…">`, an icon-font class (`fa-star`) or ligature (`material-icons`),
//!   words of its class list and id, a `data-action`-like attribute, a background image's file.
//! - `row "…"`: the text of a repeated item (list row, post, card, table row) whose controls are
//!   listed under it, indented. When the item is itself a control its own line is the header.
//! - Values are exact: JSON-escaped (`\n`, `\t`, `\"`), spaces kept; over 60 chars the first 60
//!   plus `…` and `(N chars)`.
//! - `expanded`/`collapsed` from `aria-expanded` or `<details>`; `has children, collapsed` when
//!   inferred from an item's nested list.
//! - `draggable "…"` for a `draggable="true"` element; `treeitem`/`clickable` for the items of a
//!   list whose click listener sits on the list (delegation), the item's label element when the
//!   `<li>` has no text of its own.
//! - Scroll containers (vertical): `scroll <top>/<max>px`, the items below (and above) the
//!   visible part; controls they clip are `[scrolled out of its list]` (at most three per list),
//!   `[clipped by its container]` for overflow-hidden ancestors.
//! - Text blocks (p, li, td, th, headings, ...) carry a ref, usable by `scroll_to`, hover and
//!   click like any other; a nested block ends the outer one's line, and a block that is only a
//!   link or button gets none (the control has a ref).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex as StdMutex};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::dom::{DescribeNodeParams, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::dom_debugger::GetEventListenersParams;
use chromiumoxide::cdp::browser_protocol::page::{
    CreateIsolatedWorldParams, EventFrameNavigated, FrameId,
};
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, EvaluateParams, EventExecutionContextCreated,
    EventExecutionContextDestroyed, EventExecutionContextsCleared, ExecutionContextId,
    GetPropertiesParams, ReleaseObjectGroupParams, RemoteObjectId,
};
use chromiumoxide::Page;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use serde::Deserialize;
use serde_json::Value;

/// The page library, evaluated in the isolated world.
pub(crate) const LIBRARY: &str = include_str!("observe.js");
/// The isolated world's name (one per frame document; Chromium reuses it for the same name).
pub(crate) const WORLD: &str = "forge";
/// What a call returns when the library is not installed in the world it ran in (the library's
/// own results never carry this key: they are objects the library builds).
const NOT_INSTALLED: &str = "__forgeNotInstalled";

/// Why a call into the page library failed.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The CDP command failed (page gone, target closed, browser gone).
    #[error("{0}")]
    Cdp(String),
    /// The script threw (should not happen; reported with the exception text).
    #[error("page script error: {0}")]
    Script(String),
}

/// forge's isolated world in one page's main-frame document, kept between calls so a call is one
/// `Runtime.evaluate` instead of `Page.createIsolatedWorld` + an evaluate that re-sends the
/// library.
///
/// Safety of the cache: the world is addressed by its `uniqueId`, which Chromium never reuses
/// (numeric context ids restart in every renderer process, so after a cross-process navigation a
/// stale numeric id could name another world, even the page's own). Before each use, the events
/// seen since the world was created are checked: a main-frame navigation, cleared contexts or the
/// world's destruction drop it, and the next call creates the world afresh in the new document
/// (exactly what an uncached call does). A call that still meets a vanished world (the document
/// changed while the call was in flight) fails with a CDP error and is retried once on a fresh
/// world.
struct World {
    frame: FrameId,
    id: ExecutionContextId,
    /// None when Chromium's creation event was not seen (the world existed before): such a world
    /// is used for this call only, addressed by its numeric id as it was just returned.
    unique_id: Option<String>,
    installed: bool,
    /// Yields when the document (and with it the world) may be gone.
    gone: BoxStream<'static, ()>,
}

/// Worlds by target id. Entries are removed when a tab closes ([`forget`]); the cap bounds what
/// pages not opened as tabs (diagnostics, the benchmark) can leave behind.
static WORLDS: LazyLock<StdMutex<HashMap<String, World>>> =
    LazyLock::new(|| StdMutex::new(HashMap::new()));
const MAX_WORLDS: usize = 256;

/// Forget the cached world of a closed page.
pub fn forget(target: &TargetId) {
    WORLDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(target.as_ref());
}

fn take_cached(page: &Page) -> Option<World> {
    WORLDS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(page.target_id().as_ref())
}

fn keep(page: &Page, world: World) {
    if world.unique_id.is_none() {
        return;
    }
    let mut worlds = WORLDS.lock().unwrap_or_else(|p| p.into_inner());
    if worlds.len() >= MAX_WORLDS {
        worlds.clear();
    }
    worlds.insert(page.target_id().as_ref().to_string(), world);
}

/// Whether `world` is still the world of the current main-frame document as far as the events
/// received so far tell.
fn still_valid(world: &mut World, frame: &FrameId) -> bool {
    if &world.frame != frame {
        return false;
    }
    // Pending: nothing arrived. An event (the document may be gone) or the end of the page's
    // event stream: not valid.
    world.gone.next().now_or_never().is_none()
}

/// A fresh world in the main frame's current document: subscribe to the events that end it,
/// create it, and learn its `uniqueId` from the creation event.
async fn create_world(page: &Page, frame: FrameId) -> Result<World, PageError> {
    let cdp = |e: chromiumoxide::error::CdpError| PageError::Cdp(e.to_string());
    let mut created = page
        .event_listener::<EventExecutionContextCreated>()
        .await
        .map_err(cdp)?;
    let main = frame.as_ref().to_string();
    let navigated = page
        .event_listener::<EventFrameNavigated>()
        .await
        .map_err(cdp)?
        .filter(move |e| futures::future::ready(e.frame.id.as_ref() == main))
        .map(|_| ());
    let cleared = page
        .event_listener::<EventExecutionContextsCleared>()
        .await
        .map_err(cdp)?
        .map(|_| ());
    let destroyed = page
        .event_listener::<EventExecutionContextDestroyed>()
        .await
        .map_err(cdp)?;
    let id = page
        .execute(
            CreateIsolatedWorldParams::builder()
                .frame_id(frame.clone())
                .world_name(WORLD)
                .grant_univeral_access(false)
                .build()
                .map_err(PageError::Cdp)?,
        )
        .await
        .map_err(cdp)?
        .result
        .execution_context_id;
    // Chromium sends the creation event before the command's answer, and the CDP handler hands
    // events to listeners in arrival order, so a new world's event is already queued here.
    let mut unique_id = None;
    while let Some(Some(ev)) = created.next().now_or_never() {
        let in_frame = ev
            .context
            .aux_data
            .as_ref()
            .and_then(|a| a.get("frameId"))
            .and_then(Value::as_str)
            == Some(frame.as_ref());
        if ev.context.id == id && ev.context.name == WORLD && in_frame {
            unique_id = Some(ev.context.unique_id.clone());
            break;
        }
    }
    let mine = unique_id.clone().unwrap_or_default();
    let destroyed = destroyed
        .filter(move |e| futures::future::ready(e.execution_context_unique_id == mine))
        .map(|_| ());
    let gone = futures::stream::select(navigated, futures::stream::select(cleared, destroyed));
    Ok(World {
        frame,
        id,
        unique_id,
        installed: false,
        gone: gone.boxed(),
    })
}

/// The world to use now: the cached one while it is valid, else a fresh one. The flag says
/// whether it came from the cache (and so may be retried on a fresh world).
async fn world(page: &Page) -> Result<(World, bool), PageError> {
    let frame = main_frame(page).await?;
    if let Some(mut w) = take_cached(page) {
        if still_valid(&mut w, &frame) {
            return Ok((w, true));
        }
    }
    Ok((create_world(page, frame).await?, false))
}

/// What to run in the world: a library command, or a plain expression.
enum Job<'a> {
    Lib(&'a str, &'a Value),
    Raw(&'a str),
}

/// Evaluate in `world`; only its address crosses the await (a `World` holds a stream that is
/// not `Sync`).
fn evaluate<'a>(
    page: &'a Page,
    world: &World,
    expression: String,
) -> impl std::future::Future<Output = Result<Value, PageError>> + Send + 'a {
    let (unique_id, id) = (world.unique_id.clone(), world.id);
    evaluate_at(page, unique_id, id, expression)
}

async fn evaluate_at(
    page: &Page,
    unique_id: Option<String>,
    id: ExecutionContextId,
    expression: String,
) -> Result<Value, PageError> {
    let mut params = EvaluateParams::builder()
        .expression(expression)
        .return_by_value(true)
        .await_promise(true)
        .silent(true);
    params = match unique_id {
        Some(u) => params.unique_context_id(u),
        None => params.context_id(id),
    };
    let resp = page
        .execute(params.build().map_err(PageError::Cdp)?)
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?;
    if let Some(ex) = &resp.result.exception_details {
        let detail = ex
            .exception
            .as_ref()
            .and_then(|e| e.description.clone())
            .unwrap_or_else(|| ex.text.clone());
        return Err(PageError::Script(detail));
    }
    Ok(resp.result.result.value.clone().unwrap_or(Value::Null))
}

async fn run_in(page: &Page, world: &mut World, job: &Job<'_>) -> Result<Value, PageError> {
    let (cmd, args) = match job {
        Job::Raw(expr) => return evaluate(page, world, expr.to_string()).await,
        Job::Lib(cmd, args) => (serde_json::to_string(cmd).unwrap_or_default(), *args),
    };
    if world.installed {
        let v = evaluate(
            page,
            world,
            format!(
                "globalThis.__forgeLib ? globalThis.__forgeLib[{cmd}]({args}) : {{{NOT_INSTALLED}: true}}"
            ),
        )
        .await?;
        if v.get(NOT_INSTALLED) != Some(&Value::Bool(true)) {
            return Ok(v);
        }
        world.installed = false;
    }
    let v = evaluate(
        page,
        world,
        format!("(globalThis.__forgeLib || (globalThis.__forgeLib = {LIBRARY}))[{cmd}]({args})"),
    )
    .await?;
    world.installed = true;
    Ok(v)
}

/// Run `job` in forge's world of the main frame's current document; returns the result and the
/// world's numeric id (valid for follow-up commands in the same document).
async fn run(page: &Page, job: Job<'_>) -> Result<(Value, ExecutionContextId), PageError> {
    let (mut w, cached) = world(page).await?;
    match run_in(page, &mut w, &job).await {
        Ok(v) => {
            let id = w.id;
            keep(page, w);
            Ok((v, id))
        }
        // The cached world vanished under the call (the document changed): once more, fresh.
        Err(PageError::Cdp(_)) if cached => {
            let frame = main_frame(page).await?;
            let mut w = create_world(page, frame).await?;
            let v = run_in(page, &mut w, &job).await?;
            let id = w.id;
            keep(page, w);
            Ok((v, id))
        }
        Err(e) => {
            if matches!(e, PageError::Script(_)) {
                // The world is fine; the script threw.
                keep(page, w);
            }
            Err(e)
        }
    }
}

/// The numeric id of forge's isolated world in the main frame's current document, with the
/// library installed (for commands that need a context id: object groups, raw expressions). Valid
/// until that document goes away.
pub(crate) async fn isolated_context(page: &Page) -> Result<ExecutionContextId, PageError> {
    if let Some(id) = installed_world(page).await {
        return Ok(id);
    }
    Ok(run(page, Job::Lib("ready", &Value::Null)).await?.1)
}

/// Run `cmd(args)` of the page library in the isolated world of `page`'s main frame.
pub async fn call(page: &Page, cmd: &str, args: &Value) -> Result<Value, PageError> {
    Ok(run(page, Job::Lib(cmd, args)).await?.0)
}

/// Let the page run what an input event just queued (timers of 0 ms, promise jobs), then return:
/// a navigation such work starts has been announced (`Page.frameRequestedNavigation`) before this
/// returns. Bounded by `limit`; an error (the document went away) also ends the wait.
pub async fn let_page_run(page: &Page, limit: Duration) {
    let _ = tokio::time::timeout(
        limit,
        run(page, Job::Raw("new Promise(r => setTimeout(r, 0))")),
    )
    .await;
}

/// The main frame's id (the frame tree's root).
pub async fn main_frame(page: &Page) -> Result<FrameId, PageError> {
    if let Ok(Some(f)) = page.mainframe().await {
        return Ok(f);
    }
    let tree = page
        .execute(chromiumoxide::cdp::browser_protocol::page::GetFrameTreeParams::default())
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?;
    Ok(tree.result.frame_tree.frame.id.clone())
}

/// Wait (bounded by `limit`) until the main document is fully loaded.
pub async fn wait_ready(page: &Page, limit: Duration) -> Result<(), PageError> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let r =
            tokio::time::timeout(Duration::from_secs(5), call(page, "ready", &Value::Null)).await;
        if let Ok(Ok(v)) = &r {
            if v.get("state").and_then(Value::as_str) == Some("complete") {
                return Ok(());
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// What `observe` returns.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Observation {
    pub url: String,
    pub title: String,
    pub viewport: Viewport,
    pub scroll: Scroll,
    pub elements: Vec<Element>,
    pub frames: Vec<Frame>,
    /// Headers of the repeated items (rows, posts, cards) that controls are grouped under.
    #[serde(default)]
    pub rows: Vec<Row>,
    pub text: String,
}

/// A repeated item (mail row, post, card, table row) whose controls are listed under it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Row {
    #[serde(rename = "ref")]
    pub reference: String,
    pub text: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Viewport {
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Scroll {
    pub y: f64,
    pub height: f64,
}

/// One interactive element.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Element {
    #[serde(rename = "ref")]
    pub reference: String,
    pub role: String,
    pub name: String,
    pub state: serde_json::Map<String, Value>,
    /// `in`, `above`, `below` or `side` (relative to the viewport).
    #[serde(rename = "where")]
    pub location: String,
    #[serde(rename = "coveredBy", default)]
    pub covered_by: Option<String>,
    /// For a control without a name: words from its icon, classes, data attributes or
    /// background image (`star`, `trash`).
    #[serde(default)]
    pub hint: Option<String>,
    /// The ref of the repeated item (row) it belongs to.
    #[serde(default)]
    pub row: Option<String>,
    /// `list` when its scroll container has it scrolled out of view, `clip` when an
    /// overflow-hidden ancestor cuts it off.
    #[serde(default)]
    pub clipped: Option<String>,
}

/// A frame (iframe) on the page.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Frame {
    pub frame: String,
    pub name: String,
    pub origin: String,
    #[serde(rename = "sameOrigin")]
    pub same_origin: bool,
    pub src: String,
    /// Where the frame sits in `elements` (its content goes there when forge walks it).
    #[serde(default)]
    pub at: Option<usize>,
    /// A cross-origin frame whose content forge walked through the frame's own context
    /// (`frames.rs`); set on the Rust side, never by the page library.
    #[serde(skip)]
    pub walked: bool,
}

/// Most elements with JS click listeners marked per observation.
const MAX_LISTENER_MARKS: usize = 60;
const OBJECT_GROUP: &str = "forge-observe";

/// Tell the page library which elements have JS click/pointer listeners (invisible to page JS;
/// read through DOMDebugger), so they count as interactive. Best effort: failures are ignored.
///
/// `DOMDebugger.getEventListeners` reports only the listeners of the world its object lives in,
/// so each root is read through a page-world object: the top document first, then every
/// same-origin frame document and open shadow root, which the isolated world lists
/// (`listenerRoots`) and CDP maps to the page world (`DOM.describeNode` -> backend node ->
/// `DOM.resolveNode` without a context, i.e. the main world of the node's own frame). Always
/// `pierce: false`: with `pierce: true` on a page with iframes, Chromium 156 stopped answering
/// `Page.createIsolatedWorld` after the next navigation.
async fn mark_click_listeners(page: &Page, ctx: ExecutionContextId) {
    let mut seen = std::collections::HashSet::new();
    let _ = mark_click_listeners_inner(page, ctx, &mut seen).await;
    let _ = page
        .execute(ReleaseObjectGroupParams::new(OBJECT_GROUP))
        .await;
}

async fn mark_click_listeners_inner(
    page: &Page,
    ctx: ExecutionContextId,
    seen: &mut std::collections::HashSet<i64>,
) -> Option<()> {
    let doc = page
        .execute(
            // The page's own world. `document` is unforgeable, so the page cannot substitute it.
            EvaluateParams::builder()
                .expression("document")
                .object_group(OBJECT_GROUP)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    let doc_id = doc.result.result.object_id.clone()?;
    mark_listeners_under(page, ctx, doc_id, seen).await;
    // Frame documents and open shadow roots, found in the isolated world (whose DOM view the
    // page cannot change), as isolated-world objects.
    let roots = page
        .execute(
            EvaluateParams::builder()
                .expression("globalThis.__forgeLib ? globalThis.__forgeLib.listenerRoots() : []")
                .context_id(ctx)
                .object_group(OBJECT_GROUP)
                .return_by_value(false)
                .silent(true)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    // Most pages have none: skip the property read for an empty array.
    if roots.result.result.description.as_deref() == Some("Array(0)") {
        return Some(());
    }
    let roots_id = roots.result.result.object_id.clone()?;
    let props = page
        .execute(
            GetPropertiesParams::builder()
                .object_id(roots_id)
                .own_properties(true)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    for p in &props.result.result {
        if seen.len() > MAX_LISTENER_MARKS {
            break;
        }
        if p.name.parse::<u32>().is_err() {
            continue;
        }
        let Some(oid) = p.value.as_ref().and_then(|v| v.object_id.clone()) else {
            continue;
        };
        let Ok(node) = page
            .execute(DescribeNodeParams::builder().object_id(oid).build())
            .await
        else {
            continue;
        };
        let Ok(main) = page
            .execute(
                ResolveNodeParams::builder()
                    .backend_node_id(node.result.node.backend_node_id)
                    .object_group(OBJECT_GROUP)
                    .build(),
            )
            .await
        else {
            continue;
        };
        if let Some(main_id) = main.result.object.object_id.clone() {
            mark_listeners_under(page, ctx, main_id, seen).await;
        }
    }
    Some(())
}

/// Mark the elements under `root` (a page-world document or shadow root) that have click-ish
/// listeners, at most `MAX_LISTENER_MARKS` in all.
async fn mark_listeners_under(
    page: &Page,
    ctx: ExecutionContextId,
    root: RemoteObjectId,
    seen: &mut std::collections::HashSet<i64>,
) -> Option<()> {
    let listeners = page
        .execute(
            GetEventListenersParams::builder()
                .object_id(root)
                .depth(-1)
                .pierce(false)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    let mut nodes = Vec::new();
    for l in &listeners.result.listeners {
        if !matches!(
            l.r#type.as_str(),
            "click" | "mousedown" | "mouseup" | "pointerdown" | "pointerup"
        ) {
            continue;
        }
        let Some(node) = l.backend_node_id else {
            continue;
        };
        if seen.len() < MAX_LISTENER_MARKS && seen.insert(*node.inner()) {
            nodes.push(node);
        }
    }
    // Resolve every node into forge's world at once (the commands are independent), then mark
    // them all with one call on the first.
    let resolved = futures::future::join_all(nodes.into_iter().map(|node| {
        page.execute(
            ResolveNodeParams::builder()
                .backend_node_id(node)
                .execution_context_id(ctx)
                .object_group(OBJECT_GROUP)
                .build(),
        )
    }))
    .await;
    let mut objects = resolved
        .into_iter()
        .filter_map(|r| r.ok().and_then(|r| r.result.object.object_id.clone()));
    let first = objects.next()?;
    let rest: Vec<CallArgument> = objects
        .map(|o| CallArgument::builder().object_id(o).build())
        .collect();
    let _ = page
        .execute(
            CallFunctionOnParams::builder()
                .function_declaration(
                    "function (...rest) { const lib = globalThis.__forgeLib; if (!lib) return; lib.markClickers(this); for (const el of rest) lib.markClickers(el); }",
                )
                .object_id(first)
                .arguments(rest)
                .silent(true)
                .build()
                .ok()?,
        )
        .await;
    Some(())
}

/// Observe the active page of `page`.
pub async fn observe(page: &Page) -> Result<Observation, PageError> {
    // Install the library (if this document's world does not have it yet), then mark listener
    // elements, then observe.
    let ctx = isolated_context(page).await?;
    mark_click_listeners(page, ctx).await;
    let v = call(page, "observe", &serde_json::json!({"maxText": 20000})).await?;
    serde_json::from_value(v)
        .map_err(|e| PageError::Script(format!("unexpected observation shape: {e}")))
}

/// The id of the cached world of the current document when it is valid and has the library.
async fn installed_world(page: &Page) -> Option<ExecutionContextId> {
    let frame = main_frame(page).await.ok()?;
    let mut w = take_cached(page)?;
    if !still_valid(&mut w, &frame) || !w.installed {
        return None;
    }
    let id = w.id;
    keep(page, w);
    Some(id)
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

/// One line for an element.
pub fn element_line(e: &Element) -> String {
    let mut line = format!("{} {}", e.reference, e.role);
    if !e.name.is_empty() {
        line.push(' ');
        line.push_str(&quote(&e.name));
    } else if let Some(h) = e.hint.as_deref().filter(|h| !h.is_empty()) {
        line.push_str(&format!(" hint={}", quote(h)));
    }
    let st = &e.state;
    if let Some(t) = st.get("type").and_then(Value::as_str) {
        line.push_str(&format!(" type={t}"));
    }
    if let Some(v) = st.get("value").and_then(Value::as_str) {
        // Exact: JSON escaping keeps spaces and shows newlines, tabs and quotes as \n, \t, \".
        line.push_str(&format!(" value={}", quote(v)));
        if let Some(n) = st.get("valueLength").and_then(Value::as_u64) {
            line.push_str(&format!(" ({} chars)", thousands(n)));
        }
    }
    match st.get("checked") {
        Some(Value::Bool(true)) => line.push_str(" checked"),
        Some(Value::Bool(false)) => line.push_str(" unchecked"),
        Some(Value::String(s)) => line.push_str(&format!(" checked={s}")),
        _ => {}
    }
    if let Some(sel) = st.get("selected").and_then(Value::as_array) {
        let s: Vec<String> = sel.iter().filter_map(Value::as_str).map(quote).collect();
        line.push_str(&format!(
            " selected={}",
            if s.is_empty() {
                "none".into()
            } else {
                s.join(",")
            }
        ));
        if let Some(opts) = st.get("options").and_then(Value::as_array) {
            let o: Vec<String> = opts.iter().filter_map(Value::as_str).map(quote).collect();
            let count = st
                .get("optionCount")
                .and_then(Value::as_u64)
                .unwrap_or(o.len() as u64);
            line.push_str(&format!(" options={}", o.join(",")));
            if count > o.len() as u64 {
                line.push_str(&format!(",+{}", count - o.len() as u64));
            }
        }
    }
    for flag in ["multiple", "required", "readonly", "disabled"] {
        if st.get(flag) == Some(&Value::Bool(true)) {
            line.push(' ');
            line.push_str(flag);
        }
    }
    let children = if st.get("children") == Some(&Value::Bool(true)) {
        " has children,"
    } else {
        ""
    };
    match st.get("expanded") {
        Some(Value::Bool(true)) => line.push_str(&format!("{children} expanded")),
        Some(Value::Bool(false)) => line.push_str(&format!("{children} collapsed")),
        _ => {}
    }
    if let Some(sc) = st.get("scroll").and_then(Value::as_object) {
        let y = sc.get("y").and_then(Value::as_u64).unwrap_or(0);
        let max = sc.get("max").and_then(Value::as_u64).unwrap_or(0);
        line.push_str(&format!(" scroll {}/{}px", thousands(y), thousands(max)));
        if let Some(n) = st.get("itemsBelow").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} more items below in this list"));
        }
        if let Some(n) = st.get("itemsAbove").and_then(Value::as_u64) {
            line.push_str(&format!(", {n} above"));
        }
    }
    if st.get("selectedItem") == Some(&Value::Bool(true)) {
        line.push_str(" selected");
    }
    if st.get("fillProtected") == Some(&Value::Bool(true)) {
        line.push_str(" fill-protected");
    }
    if let Some(h) = st.get("href").and_then(Value::as_str) {
        line.push_str(&format!(" -> {h}"));
        if st.get("newTab") == Some(&Value::Bool(true)) {
            line.push_str(" (new tab)");
        }
    }
    match e.clipped.as_deref() {
        Some("list") => line.push_str(" [scrolled out of its list]"),
        Some(_) => line.push_str(" [clipped by its container]"),
        None => {}
    }
    if let Some(c) = &e.covered_by {
        line.push_str(&format!(" [covered by {c}]"));
    }
    line
}

/// `1450` as `1,450`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Render `obs` in about `budget` characters: header, in-view elements in reading order, a
/// summary of the others, then a page-text excerpt with what is left.
pub fn render(obs: &Observation, budget: usize) -> String {
    let budget = budget.max(400);
    let mut out = String::new();
    out.push_str(&format!("page: {}\nurl: {}\n", obs.title, obs.url));
    out.push_str(&format!(
        "viewport: {}x{}, scrolled {} of {}px\n",
        obs.viewport.width as i64,
        obs.viewport.height as i64,
        obs.scroll.y as i64,
        obs.scroll.height as i64
    ));
    let element_budget = budget * 7 / 10;
    let mut above = 0usize;
    let mut below = 0usize;
    let mut cut = 0usize;
    let mut listed = 0usize;
    let mut lines = String::new();
    let mut frames_done: Vec<&str> = Vec::new();
    // The row whose controls are being listed, and whether its header is a listed control.
    let mut current_row: Option<&str> = None;
    for e in &obs.elements {
        match e.location.as_str() {
            "above" => {
                above += 1;
                continue;
            }
            "below" | "side" => {
                below += 1;
                continue;
            }
            // Scrolled out of its list beyond the first few: the list's line counts them.
            "inlist" => continue,
            _ => {}
        }
        let mut line = String::new();
        let row = e.row.as_deref();
        if row != current_row {
            if let Some(r) = row.filter(|r| *r != e.reference) {
                if let Some(h) = obs.rows.iter().find(|h| h.reference == r) {
                    line.push_str(&format!("{} row {}\n", h.reference, quote(&h.text)));
                }
            }
        }
        let header_row = current_row;
        current_row = row;
        // Introduce a frame before its first element.
        if let Some(fnum) = e
            .reference
            .strip_prefix('f')
            .and_then(|r| r.split('e').next())
        {
            let key = format!("f{fnum}");
            if !frames_done.contains(&key.as_str()) {
                if let Some(f) = obs.frames.iter().find(|f| f.frame == key) {
                    frames_done.push(&f.frame);
                    line.push_str(&frame_line(f));
                    line.push('\n');
                }
            }
        }
        if row.is_some_and(|r| r != e.reference) {
            line.push_str("  ");
        }
        line.push_str(&element_line(e));
        line.push('\n');
        if out.len() + lines.len() + line.len() > element_budget {
            cut += 1;
            // Its row header (if it carried one) was not printed either.
            current_row = header_row;
            continue;
        }
        lines.push_str(&line);
        listed += 1;
    }
    let frames_rest: Vec<String> = obs
        .frames
        .iter()
        .filter(|f| !frames_done.contains(&f.frame.as_str()))
        .map(frame_line)
        .collect();
    out.push_str(if listed > 0 {
        "elements (in view, reading order):\n"
    } else {
        "elements in view: none\n"
    });
    out.push_str(&lines);
    for f in frames_rest {
        if out.len() + f.len() < element_budget + 400 {
            out.push_str(&f);
            out.push('\n');
        }
    }
    if above + below + cut > 0 {
        let mut parts = Vec::new();
        if cut > 0 {
            parts.push(format!("{cut} more in view not listed"));
        }
        if below > 0 {
            parts.push(format!("{below} more below"));
        }
        if above > 0 {
            parts.push(format!("{above} above"));
        }
        out.push_str(&format!(
            "{} (browser_state with scroll=1/-1, scroll_to=<ref> or a larger max_chars to see them)\n",
            parts.join(", ")
        ));
    }
    // The excerpt gets at most a third of the budget: the element list is what the model acts
    // on, and browser_extract has the full text.
    let left = budget.saturating_sub(out.len() + 8).min(budget / 3);
    out.push_str("text:\n");
    let text = obs.text.trim();
    if text.chars().count() <= left {
        out.push_str(text);
    } else {
        let mut cut_at: String = text.chars().take(left.saturating_sub(80)).collect();
        // End on a whole line (a block's ref line stays whole) when that loses little.
        if let Some(i) = cut_at.rfind('\n').filter(|i| *i >= cut_at.len() * 3 / 4) {
            cut_at.truncate(i);
        }
        let total = text.chars().count();
        out.push_str(&cut_at);
        out.push_str(&format!(
            "\n… ({} more chars; browser_extract for the full text)",
            total - cut_at.chars().count()
        ));
    }
    out
}

fn frame_line(f: &Frame) -> String {
    let mut s = format!("{}: iframe", f.frame);
    if !f.name.is_empty() {
        s.push(' ');
        s.push_str(&quote(&f.name));
    }
    if f.same_origin {
        s.push_str(&format!(" same-origin {}", f.origin));
    } else if f.walked {
        s.push_str(&format!(" cross-origin {}", f.origin));
    } else {
        s.push_str(&format!(" cross-origin {} (content not walked)", f.origin));
    }
    s
}

/// The element the page library's `cmd(args)` returns, as a remote object of forge's isolated
/// world in the object group `group` (for CDP commands that take a node, like
/// `DOM.setFileInputFiles`); None when it returns no element. Release the group afterwards.
pub(crate) async fn element_object(
    page: &Page,
    cmd: &str,
    args: &Value,
    group: &str,
) -> Result<Option<chromiumoxide::cdp::js_protocol::runtime::RemoteObjectId>, PageError> {
    // The world's id, with the library installed in it.
    let ctx = isolated_context(page).await?;
    let expression = format!(
        "globalThis.__forgeLib[{cmd}]({args})",
        cmd = serde_json::to_string(cmd).unwrap_or_default(),
        args = args
    );
    let params = EvaluateParams::builder()
        .expression(expression)
        .context_id(ctx)
        .object_group(group)
        .return_by_value(false)
        .silent(true)
        .build()
        .map_err(PageError::Cdp)?;
    let resp = page
        .execute(params)
        .await
        .map_err(|e| PageError::Cdp(e.to_string()))?;
    if let Some(ex) = &resp.result.exception_details {
        return Err(PageError::Script(ex.text.clone()));
    }
    Ok(resp.result.result.object_id.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el(r: &str, role: &str, name: &str, loc: &str, state: Value) -> Element {
        Element {
            reference: r.into(),
            role: role.into(),
            name: name.into(),
            state: state.as_object().cloned().unwrap_or_default(),
            location: loc.into(),
            covered_by: None,
            hint: None,
            row: None,
            clipped: None,
        }
    }

    #[test]
    fn element_lines_carry_state() {
        let e = el(
            "e3",
            "combobox",
            "Country",
            "in",
            serde_json::json!({"selected": ["France"], "options": ["France", "Spain"], "optionCount": 5, "required": true}),
        );
        assert_eq!(
            element_line(&e),
            "e3 combobox \"Country\" selected=\"France\" options=\"France\",\"Spain\",+3 required"
        );
        let mut b = el("f1e4", "button", "Pay", "in", serde_json::json!({}));
        b.covered_by = Some("div#overlay \"Cookies\"".into());
        assert_eq!(
            element_line(&b),
            "f1e4 button \"Pay\" [covered by div#overlay \"Cookies\"]"
        );
        let p = el(
            "e5",
            "textbox",
            "Password",
            "in",
            serde_json::json!({"type": "password", "value": "", "fillProtected": true}),
        );
        assert_eq!(
            element_line(&p),
            "e5 textbox \"Password\" type=password value=\"\" fill-protected"
        );
    }

    #[test]
    fn render_summarises_offscreen_elements_and_respects_the_budget() {
        let mut elements = vec![el(
            "e1",
            "link",
            "Home",
            "in",
            serde_json::json!({"href": "/"}),
        )];
        for i in 2..200 {
            elements.push(el(
                &format!("e{i}"),
                "link",
                &format!("Item {i}"),
                "below",
                serde_json::json!({}),
            ));
        }
        let obs = Observation {
            url: "http://127.0.0.1/".into(),
            title: "T".into(),
            viewport: Viewport {
                width: 1280.0,
                height: 800.0,
            },
            scroll: Scroll {
                y: 0.0,
                height: 9000.0,
            },
            elements,
            frames: vec![],
            rows: vec![],
            text: "word ".repeat(5000),
        };
        let out = render(&obs, 6000);
        assert!(out.len() <= 6100, "{}", out.len());
        assert!(out.contains("e1 link \"Home\" -> /"));
        assert!(out.contains("198 more below"));
        assert!(out.contains("browser_extract for the full text"));
        assert_eq!(render(&obs, 6000), out, "deterministic");
    }

    #[test]
    fn values_are_exact_hints_trees_scroll_and_clips_render() {
        let v = el(
            "e1",
            "textbox",
            "Note",
            "in",
            serde_json::json!({"value": " a \"b\"\n\tc "}),
        );
        assert_eq!(
            element_line(&v),
            "e1 textbox \"Note\" value=\" a \\\"b\\\"\\n\\tc \""
        );
        let long = el(
            "e2",
            "textbox",
            "Long",
            "in",
            serde_json::json!({"value": format!("{}…", "x".repeat(60)), "valueLength": 1450}),
        );
        assert!(element_line(&long).ends_with("…\" (1,450 chars)"));
        let mut h = el("e3", "button", "", "in", serde_json::json!({}));
        h.hint = Some("star".into());
        assert_eq!(element_line(&h), "e3 button hint=\"star\"");
        let t = el(
            "e4",
            "clickable",
            "Documents",
            "in",
            serde_json::json!({"children": true, "expanded": false}),
        );
        assert_eq!(
            element_line(&t),
            "e4 clickable \"Documents\" has children, collapsed"
        );
        let s = el(
            "e5",
            "scrollable",
            "",
            "in",
            serde_json::json!({"scroll": {"y": 0, "max": 1450}, "itemsBelow": 12}),
        );
        assert_eq!(
            element_line(&s),
            "e5 scrollable scroll 0/1,450px, 12 more items below in this list"
        );
        let mut c = el("e6", "button", "Item 9", "in", serde_json::json!({}));
        c.clipped = Some("list".into());
        assert_eq!(
            element_line(&c),
            "e6 button \"Item 9\" [scrolled out of its list]"
        );
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn controls_of_a_row_are_grouped_under_its_header() {
        let mut elements = Vec::new();
        for (i, row) in [(1, "e10"), (3, "e11")] {
            for (j, hint) in ["star", "trash"].iter().enumerate() {
                let mut b = el(
                    &format!("e{}", i + j),
                    "button",
                    "",
                    "in",
                    serde_json::json!({}),
                );
                b.hint = Some((*hint).into());
                b.row = Some(row.into());
                elements.push(b);
            }
        }
        elements.push(el("e5", "link", "Next", "in", serde_json::json!({})));
        let obs = Observation {
            url: "http://127.0.0.1/".into(),
            title: "Mail".into(),
            viewport: Viewport {
                width: 1280.0,
                height: 800.0,
            },
            scroll: Scroll {
                y: 0.0,
                height: 800.0,
            },
            elements,
            frames: vec![],
            rows: vec![
                Row {
                    reference: "e10".into(),
                    text: "From Jane: Lunch?".into(),
                },
                Row {
                    reference: "e11".into(),
                    text: "From Bob: Report".into(),
                },
            ],
            text: String::new(),
        };
        let out = render(&obs, 6000);
        assert!(
            out.contains(
                "e10 row \"From Jane: Lunch?\"\n  e1 button hint=\"star\"\n  e2 button hint=\"trash\"\ne11 row \"From Bob: Report\"\n  e3 button hint=\"star\"\n  e4 button hint=\"trash\"\ne5 link \"Next\"\n"
            ),
            "{out}"
        );
    }
}
