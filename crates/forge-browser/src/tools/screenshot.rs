//! `browser_screenshot`: save a PNG (viewport, full page or one element) into the agent's files
//! dir; the result names the file, never carries the image.

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, CaptureScreenshotParams, Viewport as ClipViewport,
};
use forge_tools::ToolOutput;
use serde_json::{json, Value};

use super::{schema, str_arg, BrowserAction, Cx};
use crate::error::{failed, invalid, R};
use crate::observe;

pub(crate) struct Screenshot;

#[async_trait]
impl BrowserAction for Screenshot {
    fn name(&self) -> &'static str {
        "browser_screenshot"
    }

    fn description(&self) -> &'static str {
        "Save a PNG (viewport, full page or element) as `filename` in the files."
    }

    fn input_schema(&self) -> Value {
        let mut p = serde_json::Map::new();
        p.insert("selector".into(), json!({"type": "string"}));
        p.insert("full_page".into(), json!({"type": "boolean"}));
        p.insert("filename".into(), json!({"type": "string"}));
        schema(p, &[])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let ctx = cx.ctx;
        let page = cx.page()?;
        let full = input
            .get("full_page")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let selector = str_arg(input, "selector").filter(|s| !s.is_empty());
        let bytes = if let Some(sel) = selector {
            let v = observe::call(&page, "rect", &json!({"selector": sel})).await?;
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                return Err(match e {
                    "no-match" => failed(format!("no element matches selector {sel:?}")),
                    _ => invalid(format!("{sel:?} is not a valid CSS selector")),
                });
            }
            let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            if f("width") <= 0.0 || f("height") <= 0.0 {
                return Err(failed(format!("the element {sel:?} has no visible area")));
            }
            let params = CaptureScreenshotParams::builder()
                .format(CaptureScreenshotFormat::Png)
                .clip(ClipViewport {
                    x: f("x"),
                    y: f("y"),
                    width: f("width"),
                    height: f("height"),
                    scale: 1.0,
                })
                .capture_beyond_viewport(true)
                .build();
            page.screenshot(params).await?
        } else {
            page.screenshot(
                chromiumoxide::page::ScreenshotParams::builder()
                    .format(CaptureScreenshotFormat::Png)
                    .full_page(full)
                    .build(),
            )
            .await?
        };
        let name = screenshot_name(str_arg(input, "filename"), &ctx.files_dir)?;
        // Written as file_create writes: O_NOFOLLOW (a symlink planted in the files dir is not
        // followed), no FIFOs or devices, no hard links to files outside.
        let saved =
            forge_tools::builtins::file_create::save_artifact(&ctx.files_dir, &name, &bytes)
                .map_err(|e| failed(e.to_string()))?;
        Ok(ToolOutput::json(json!({
            "filename": saved.filename,
            "mime_type": "image/png",
            "path": saved.path,
            "size_bytes": saved.size_bytes,
        })))
    }
}

/// A safe file name for a screenshot inside `dir`: the last path component, `.png`, not existing.
fn screenshot_name(requested: Option<&str>, dir: &std::path::Path) -> R<String> {
    let base = match requested.map(str::trim).filter(|s| !s.is_empty()) {
        Some(r) => {
            let last = std::path::Path::new(r)
                .file_name()
                .and_then(|s| s.to_str())
                .unwrap_or("");
            let clean: String = last
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                .collect();
            let clean = clean.trim_start_matches('.').to_string();
            if clean.is_empty() {
                return Err(invalid(format!(
                    "{r:?} is not a usable file name; use letters, digits, - _ ."
                )));
            }
            if clean.to_ascii_lowercase().ends_with(".png") {
                clean
            } else {
                format!("{clean}.png")
            }
        }
        None => "screenshot.png".to_string(),
    };
    // Taken means any entry of that name, a dangling symlink included (`exists()` follows links).
    let taken = |n: &str| std::fs::symlink_metadata(dir.join(n)).is_ok();
    if !taken(&base) {
        return Ok(base);
    }
    let stem = base.trim_end_matches(".png").to_string();
    for i in 2..10_000 {
        let n = format!("{stem}-{i}.png");
        if !taken(&n) {
            return Ok(n);
        }
    }
    Err(failed("too many screenshots with that name"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn screenshot_names_stay_inside_the_files_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            screenshot_name(Some("../../etc/passwd"), dir.path()).expect("name"),
            "passwd.png"
        );
        assert_eq!(
            screenshot_name(Some("shot.PNG"), dir.path()).expect("name"),
            "shot.PNG"
        );
        assert_eq!(
            screenshot_name(None, dir.path()).expect("name"),
            "screenshot.png"
        );
        std::fs::write(dir.path().join("screenshot.png"), b"x").expect("write");
        assert_eq!(
            screenshot_name(None, dir.path()).expect("name"),
            "screenshot-2.png"
        );
        assert!(screenshot_name(Some("..."), dir.path()).is_err());
    }

    #[test]
    fn a_planted_symlink_is_neither_reused_nor_followed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("victim.png");
        // A dangling link: `exists()` says no, but the name is taken.
        std::os::unix::fs::symlink(&target, dir.path().join("evil.png")).expect("symlink");
        let name = screenshot_name(Some("evil.png"), dir.path()).expect("name");
        assert_eq!(name, "evil-2.png");
        // Even when the name is forced onto the link, the write refuses to follow it.
        let err = forge_tools::builtins::file_create::save_artifact(dir.path(), "evil.png", b"png")
            .expect_err("a symlink is not written through");
        assert!(!target.exists(), "nothing was written outside: {err}");
    }
}
