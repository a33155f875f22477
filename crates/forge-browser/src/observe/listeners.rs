//! Click-listener marking: which elements have JS click/pointer listeners (invisible to page
//! JS, read through `DOMDebugger.getEventListeners`), handed to the page library so they count as
//! interactive. Best effort: a failure leaves the observation without the marks.
//!
//! One copy for the top document ([`mark_click_listeners`]) and for a cross-origin frame's
//! document ([`mark_frame_click_listeners`], `frames.rs`): both find their page-world roots and
//! hand each to [`mark_listeners_under`], which reads, filters, resolves and marks.

use chromiumoxide::cdp::browser_protocol::dom::{DescribeNodeParams, ResolveNodeParams};
use chromiumoxide::cdp::browser_protocol::dom_debugger::GetEventListenersParams;
use chromiumoxide::cdp::js_protocol::runtime::{
    CallArgument, CallFunctionOnParams, EvaluateParams, ExecutionContextId, GetPropertiesParams,
    ReleaseObjectGroupParams, RemoteObjectId,
};
use chromiumoxide::Page;

use super::Cdp;

/// Most elements with JS click listeners marked per observation (per document: the top one with
/// its same-origin frames and shadow roots, or one cross-origin frame).
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
pub(crate) async fn mark_click_listeners(page: &Page, ctx: ExecutionContextId) {
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
    mark_listeners_under(page, ctx, doc_id, OBJECT_GROUP, seen).await;
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
            mark_listeners_under(page, ctx, main_id, OBJECT_GROUP, seen).await;
        }
    }
    Some(())
}

/// Tell a cross-origin frame's library (forge's world `ctx` in that frame, reached through
/// `cdp`: the tab's session or the frame's own) which of its elements have JS click/pointer
/// listeners, as [`mark_click_listeners`] does for the top document; best effort. The frame's
/// `document` in its page world is found through its node (`DOM.resolveNode` without a context
/// resolves in the main world of the node's frame), since DOMDebugger reports one world's
/// listeners. Objects go to `group`; the caller releases it.
pub(crate) async fn mark_frame_click_listeners(
    cdp: &impl Cdp,
    ctx: ExecutionContextId,
    group: &str,
) -> Option<()> {
    let doc = cdp
        .exec(
            EvaluateParams::builder()
                .expression("document")
                .context_id(ctx)
                .object_group(group)
                .build()
                .ok()?,
        )
        .await
        .ok()?;
    let node = cdp
        .exec(
            DescribeNodeParams::builder()
                .object_id(doc.result.object_id?)
                .build(),
        )
        .await
        .ok()?;
    let main_doc = cdp
        .exec(
            ResolveNodeParams::builder()
                .backend_node_id(node.node.backend_node_id)
                .object_group(group)
                .build(),
        )
        .await
        .ok()?;
    let mut seen = std::collections::HashSet::new();
    mark_listeners_under(cdp, ctx, main_doc.object.object_id?, group, &mut seen).await
}

/// Mark the elements under `root` (a page-world document or shadow root) that have click-ish
/// listeners, at most `MAX_LISTENER_MARKS` in all (counted in `seen`), resolving them into
/// forge's world `ctx` in object group `group`.
async fn mark_listeners_under(
    cdp: &impl Cdp,
    ctx: ExecutionContextId,
    root: RemoteObjectId,
    group: &str,
    seen: &mut std::collections::HashSet<i64>,
) -> Option<()> {
    let listeners = cdp
        .exec(
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
    for l in &listeners.listeners {
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
        cdp.exec(
            ResolveNodeParams::builder()
                .backend_node_id(node)
                .execution_context_id(ctx)
                .object_group(group)
                .build(),
        )
    }))
    .await;
    let mut objects = resolved
        .into_iter()
        .filter_map(|r| r.ok().and_then(|r| r.object.object_id));
    let first = objects.next()?;
    let rest: Vec<CallArgument> = objects
        .map(|o| CallArgument::builder().object_id(o).build())
        .collect();
    let _ = cdp
        .exec(
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
