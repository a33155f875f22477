//! forge's isolated world in a page's main-frame document: created on demand, cached per tab
//! (addressed by its `uniqueId`, dropped when the document goes), the page library installed in
//! it once, and the calls into it ([`call`], [`isolated_context`], [`element_object`]).

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex as StdMutex};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::page::{
    CreateIsolatedWorldParams, EventFrameNavigated, FrameId,
};
use chromiumoxide::cdp::browser_protocol::target::TargetId;
use chromiumoxide::cdp::js_protocol::runtime::{
    EvaluateParams, EventExecutionContextCreated, EventExecutionContextDestroyed,
    EventExecutionContextsCleared, ExecutionContextId,
};
use chromiumoxide::Page;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use serde_json::Value;

use super::{PageError, LIBRARY, WORLD};

/// What a call returns when the library is not installed in the world it ran in (the library's
/// own results never carry this key: they are objects the library builds).
const NOT_INSTALLED: &str = "__forgeNotInstalled";

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

/// Evaluate `expression` (a self-contained script, not a page-library command) in forge's
/// isolated world of the main frame's current document; the page's own scripts cannot see or
/// change what it reads (the form inspector, `forms/learn.js`).
pub(crate) async fn evaluate_isolated(page: &Page, expression: &str) -> Result<Value, PageError> {
    Ok(run(page, Job::Raw(expression)).await?.0)
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

/// The id of the cached world of the current document when it is valid and has the library.
pub(super) async fn installed_world(page: &Page) -> Option<ExecutionContextId> {
    let frame = main_frame(page).await.ok()?;
    let mut w = take_cached(page)?;
    if !still_valid(&mut w, &frame) || !w.installed {
        return None;
    }
    let id = w.id;
    keep(page, w);
    Some(id)
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
