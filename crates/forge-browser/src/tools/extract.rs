//! `browser_extract`: the page's readable text, its links, or one element's HTML, paginated.

use async_trait::async_trait;
use forge_tools::{fence, ToolOutput};
use serde_json::{json, Value};

use super::{schema, str_arg, BrowserAction, Cx, MAX_BUDGET};
use crate::error::{failed, invalid, R};

/// `max_chars` when the input gives none (also the schema's `default`).
const DEFAULT_EXTRACT: usize = 8000;

pub(crate) struct Extract;

#[async_trait]
impl BrowserAction for Extract {
    fn name(&self) -> &'static str {
        "browser_extract"
    }

    fn description(&self) -> &'static str {
        "Read the page's text, links or a `selector`'s HTML; `offset` from a 'pass offset=N' line; `page` N of the last downloaded PDF."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("selector".into(), json!({"type": "string"}));
        p.insert("frame".into(), json!({"type": "string"}));
        p.insert(
            "mode".into(),
            json!({"type": "string", "enum": ["text", "links", "html"], "default": "text"}),
        );
        p.insert("max_chars".into(), json!({"type": "integer", "minimum": 200, "maximum": MAX_BUDGET, "default": DEFAULT_EXTRACT}));
        p.insert("offset".into(), json!({"type": "integer", "minimum": 0}));
        p.insert("page".into(), json!({"type": "integer", "minimum": 1}));
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        if let Some(p) = input.get("page").filter(|v| !v.is_null()) {
            return read_pdf_page(cx, p, input).await;
        }
        let page = cx.page()?;
        let mode = str_arg(input, "mode").unwrap_or("text");
        if !matches!(mode, "text" | "links" | "html") {
            return Err(invalid(format!(
                "mode must be text, links or html, not {mode:?}"
            )));
        }
        let selector = str_arg(input, "selector").filter(|s| !s.is_empty());
        let mut args = json!({"mode": mode, "selector": selector});
        if let Some(f) = str_arg(input, "frame")
            .map(str::trim)
            .filter(|f| !f.is_empty())
        {
            args["frame"] = json!(f);
        }
        // Same-origin frames are read by the top document's library, cross-origin ones by the
        // frame's own (frames.rs).
        let v = cx.lib(&page, "extract", &args).await?;
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(match e {
                "html-needs-selector" => invalid("mode=html needs a `selector` naming one element (the whole page's HTML is never returned)"),
                "html-whole-page" => invalid("mode=html returns one element's HTML, not the whole page; pick a narrower selector"),
                "no-match" => failed(format!("no element matches selector {:?}", selector.unwrap_or(""))),
                "bad-selector" => invalid(format!("{:?} is not a valid CSS selector", selector.unwrap_or(""))),
                "no-frame" | "bad-frame" | "stale" => invalid(format!("no frame {:?} on the page: `frame` names a frame line of the latest observation, like \"f2\"", str_arg(input, "frame").unwrap_or(""))),
                other => failed(format!("extract failed: {other}")),
            });
        }
        // Secrets are replaced by their names before the text is cut into chunks, so a value is
        // never split across the cut (the call path's redactor sees whole values only).
        let content = cx
            .ctx
            .secrets
            .redact(v.get("content").and_then(Value::as_str).unwrap_or(""))
            .into_owned();
        let max = input
            .get("max_chars")
            .and_then(Value::as_u64)
            .map(|n| (n as usize).clamp(200, MAX_BUDGET))
            .unwrap_or(DEFAULT_EXTRACT);
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0) as usize;
        let total = content.chars().count();
        if offset > total {
            return Err(invalid(format!(
                "offset {offset} is past the end ({total} chars)"
            )));
        }
        let chunk: String = content.chars().skip(offset).take(max).collect();
        let end = offset + chunk.chars().count();
        let url = page.url().await.ok().flatten().unwrap_or_default();
        let mut text = format!("extract mode={mode}: chars {offset}..{end} of {total}\n");
        text.push_str(&fence::wrap(&format!("source=browser url={url}"), &chunk));
        if end < total {
            text.push_str(&format!(
                "\n{} more chars: pass offset={end} for more",
                total - end
            ));
        }
        Ok(ToolOutput {
            text,
            data: Some(json!({"mode": mode, "offset": offset, "end": end, "total": total})),
        })
    }
}

/// `browser_extract {page: N}`: the last PDF this session downloaded, from page N.
async fn read_pdf_page(cx: &mut Cx<'_>, p: &Value, input: &Value) -> R<ToolOutput> {
    let n = p
        .as_u64()
        .filter(|n| *n >= 1)
        .ok_or_else(|| invalid(format!("`page` must be a page number from 1, not {p}")))?;
    let path = cx.session.downloads.last_pdf().ok_or_else(|| {
        invalid("no PDF was downloaded in this session; `page` reads the last PDF a click or navigation downloaded")
    })?;
    let max = input
        .get("max_chars")
        .and_then(Value::as_u64)
        .map(|n| (n as usize).clamp(200, MAX_BUDGET))
        .unwrap_or(DEFAULT_EXTRACT);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = crate::downloads::pdf_text(&path, n as usize, max, &cx.ctx.secrets)
        .await
        .map_err(|why| failed(format!("{name}: {why}")))?;
    Ok(ToolOutput {
        text: format!("PDF downloads/{name} from page {n}:\n{text}"),
        data: Some(json!({"pdf": name, "page": n})),
    })
}
