//! `browser_pdf`: print the current page (CDP `Page.printToPDF`) into the workspace as a PDF
//! artifact; the name is made safe like a download's (`downloads::safe_name`) and a taken name
//! gets a suffix; the result names the file, never carries its bytes.

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::page::PrintToPdfParams;
use forge_tools::ToolOutput;
use serde_json::{json, Value};

use super::{schema, str_arg, BrowserAction, Cx};
use crate::error::{failed, invalid, R};

pub(crate) struct Pdf;

/// Longest `page_ranges` accepted, in characters.
const MAX_RANGES: usize = 200;

#[async_trait]
impl BrowserAction for Pdf {
    fn name(&self) -> &'static str {
        "browser_pdf"
    }

    fn description(&self) -> &'static str {
        "Save the page as PDF `filename` in the files; `page_ranges` e.g. 1-3,5."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("filename".into(), json!({"type": "string"}));
        p.insert("landscape".into(), json!({"type": "boolean"}));
        p.insert("page_ranges".into(), json!({"type": "string"}));
        schema(p, &["filename"])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let ctx = cx.ctx;
        let requested = str_arg(input, "filename")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid("give `filename`, e.g. \"page.pdf\""))?;
        let mut name = crate::downloads::safe_name(requested, "page.pdf");
        if !name.to_ascii_lowercase().ends_with(".pdf") {
            name.push_str(".pdf");
        }
        let landscape = input
            .get("landscape")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut params = PrintToPdfParams::builder()
            .landscape(landscape)
            .print_background(true);
        if let Some(r) = str_arg(input, "page_ranges")
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            if r.len() > MAX_RANGES
                || !r
                    .chars()
                    .all(|c| c.is_ascii_digit() || matches!(c, '-' | ',' | ' '))
            {
                return Err(invalid(format!(
                    "`page_ranges` {r:?} is not a list of pages like \"1-3, 5\""
                )));
            }
            params = params.page_ranges(r.to_string());
        }
        let page = cx.page()?;
        let bytes = page.pdf(params.build()).await.map_err(|e| {
            let m = e.to_string();
            if m.contains("range") {
                invalid(format!("`page_ranges` does not fit this page's pages: {m}"))
            } else {
                failed(format!("printing the page to PDF failed: {m}"))
            }
        })?;
        let name = free_name(&ctx.files_dir, &name)?;
        // Written as file_create writes: O_NOFOLLOW, no FIFOs or devices, no hard links out.
        let saved =
            forge_tools::builtins::file_create::save_artifact(&ctx.files_dir, &name, &bytes)
                .map_err(|e| failed(e.to_string()))?;
        Ok(ToolOutput::json(json!({
            "filename": saved.filename,
            "mime_type": "application/pdf",
            "path": saved.path,
            "size_bytes": saved.size_bytes,
        })))
    }
}

/// `name`, or `stem-N.pdf` when an entry of that name exists (a dangling symlink included).
fn free_name(dir: &std::path::Path, name: &str) -> R<String> {
    let taken = |n: &str| std::fs::symlink_metadata(dir.join(n)).is_ok();
    if !taken(name) {
        return Ok(name.to_string());
    }
    let stem = &name[..name.len() - 4];
    for i in 2..10_000 {
        let n = format!("{stem}-{i}.pdf");
        if !taken(&n) {
            return Ok(n);
        }
    }
    Err(failed("too many files with that name"))
}
