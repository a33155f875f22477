//! `browser_upload`: put a file from this conversation's files dir into a page's file input
//! (`DOM.setFileInputFiles`; the page gets its `input` and `change` events).
//!
//! Only a file inside the files dir can be given: absolute paths, `..`, a symlink that resolves
//! outside the dir, a hard-linked file (it may be any file on the machine) and anything that is
//! not a regular file are refused, so a page can never receive other files of the machine.

use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use chromiumoxide::cdp::browser_protocol::dom::SetFileInputFilesParams;
use chromiumoxide::cdp::js_protocol::runtime::ReleaseObjectGroupParams;
use forge_tools::{ToolError, ToolOutput};
use serde_json::{json, Value};

use super::{schema, str_arg, target_args, target_props, BrowserAction, Cx, DEFAULT_BUDGET};
use crate::error::{failed, invalid, ActionError, R};
use crate::observe;

/// The object group of the file input's handle (released after the call).
const GROUP: &str = "forge-upload";

pub(crate) struct Upload;

#[async_trait]
impl BrowserAction for Upload {
    fn name(&self) -> &'static str {
        "browser_upload"
    }

    fn description(&self) -> &'static str {
        "Fill a file input with `filename` from the files dir."
    }

    fn input_schema(&self) -> Value {
        let mut p = target_props();
        p.insert("filename".into(), json!({"type": "string"}));
        schema(p, &["filename"])
    }

    async fn run(&self, cx: &mut Cx<'_>, input: &Value) -> R<ToolOutput> {
        let target = target_args(input)?;
        let name = str_arg(input, "filename")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                invalid("`filename` (a file in this conversation's files dir) is required")
            })?;
        let path = resolve_in_files_dir(&cx.ctx.files_dir, name)?;
        let page = cx.page()?;
        let v = observe::call(&page, "uploadTarget", &target).await?;
        let r = v
            .get("ref")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Some(e) = v.get("error").and_then(Value::as_str) {
            return Err(match e {
                "not-file-input" => failed(format!("{r} is not a file input (<input type=file>); find the file input in the observation (it may be hidden behind a styled button: try its selector, e.g. input[type=file])")),
                "disabled" => failed(format!("{r} is disabled")),
                other => cx.stale(other, &target).await,
            });
        }
        let set = async {
            let oid = observe::element_object(&page, "elementOf", &target, GROUP)
                .await?
                .ok_or_else(|| failed(format!("{r} is no longer on the page")))?;
            let params = SetFileInputFilesParams::builder()
                .file(path.display().to_string())
                .object_id(oid)
                .build()
                .map_err(failed)?;
            page.execute(params).await?;
            Ok::<(), ActionError>(())
        }
        .await;
        let _ = page.execute(ReleaseObjectGroupParams::new(GROUP)).await;
        set?;
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let shown = path
            .file_name()
            .and_then(|s| s.to_str())
            .unwrap_or(name)
            .to_string();
        let status = format!("uploaded {shown} ({size} bytes) into {r}");
        cx.observed(status, DEFAULT_BUDGET).await
    }
}

/// The real path of `name` inside `files_dir`, or why it is refused.
fn resolve_in_files_dir(files_dir: &Path, name: &str) -> R<PathBuf> {
    let rule = "browser_upload takes only a file inside this conversation's files dir, named relative to it (e.g. report.pdf or exports/data.csv)";
    if name.contains('\0') {
        return Err(invalid(format!(
            "{name:?} is not a usable file name; {rule}"
        )));
    }
    let rel = Path::new(name);
    if rel.is_absolute() {
        return Err(invalid(format!("{name:?} is an absolute path; {rule}")));
    }
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(invalid(format!(
            "{name:?} leaves the files dir (`..`); {rule}"
        )));
    }
    let dir_meta = std::fs::symlink_metadata(files_dir).map_err(|_| {
        failed(format!(
            "this conversation's files dir {} does not exist yet, so there is nothing to upload; create the file there first (file_create, or a screenshot)",
            files_dir.display()
        ))
    })?;
    if !dir_meta.is_dir() {
        return Err(ActionError::Tool(ToolError::Guardrail(format!(
            "this conversation's files dir {} is not a real directory (a symlink or a file); nothing is uploaded from it",
            files_dir.display()
        ))));
    }
    let base = files_dir.canonicalize().map_err(|e| {
        failed(format!(
            "cannot read the files dir {}: {e}",
            files_dir.display()
        ))
    })?;
    let real = match base.join(rel).canonicalize() {
        Ok(p) => p,
        Err(_) => {
            let mut names: Vec<String> = std::fs::read_dir(&base)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                        .filter_map(|e| e.file_name().to_str().map(str::to_string))
                        .take(20)
                        .collect()
                })
                .unwrap_or_default();
            names.sort();
            return Err(failed(format!(
                "no file {name:?} in this conversation's files dir; it holds: {}",
                if names.is_empty() {
                    "(no files)".to_string()
                } else {
                    names.join(", ")
                }
            )));
        }
    };
    if !real.starts_with(&base) {
        return Err(ActionError::Tool(ToolError::Guardrail(format!(
            "{name:?} is a symlink to a file outside this conversation's files dir; {rule}"
        ))));
    }
    let meta =
        std::fs::metadata(&real).map_err(|e| failed(format!("cannot read {name:?}: {e}")))?;
    if !meta.is_file() {
        return Err(invalid(format!("{name:?} is not a regular file; {rule}")));
    }
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            return Err(ActionError::Tool(ToolError::Guardrail(format!(
                "{name:?} is hard-linked (it may be any file of the machine under another name); copy the content into a new file in the files dir instead"
            ))));
        }
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(dir: &Path, name: &str) -> String {
        match resolve_in_files_dir(dir, name) {
            Ok(p) => panic!("{name:?} was accepted as {}", p.display()),
            Err(e) => ToolError::from(e).to_string(),
        }
    }

    #[test]
    fn only_regular_files_inside_the_files_dir_resolve() {
        let root = tempfile::tempdir().expect("tempdir");
        let files = root.path().join("files");
        std::fs::create_dir(&files).expect("mkdir");
        std::fs::write(files.join("ok.txt"), b"hello").expect("write");
        std::fs::create_dir(files.join("sub")).expect("mkdir sub");
        std::fs::write(files.join("sub/inner.csv"), b"a,b").expect("write");
        let outside = root.path().join("secret.txt");
        std::fs::write(&outside, b"secret").expect("write");
        std::os::unix::fs::symlink(&outside, files.join("escape.txt")).expect("symlink");
        std::os::unix::fs::symlink(files.join("ok.txt"), files.join("alias.txt")).expect("symlink");
        std::fs::hard_link(&outside, files.join("hard.txt")).expect("hard link");

        let base = files.canonicalize().expect("canon");
        assert_eq!(
            resolve_in_files_dir(&files, "ok.txt").expect("ok"),
            base.join("ok.txt")
        );
        assert_eq!(
            resolve_in_files_dir(&files, "sub/inner.csv").expect("nested"),
            base.join("sub/inner.csv")
        );
        assert_eq!(
            resolve_in_files_dir(&files, "alias.txt").expect("inside symlink"),
            base.join("ok.txt")
        );
        assert!(refused(&files, outside.to_str().expect("utf8")).contains("absolute path"));
        assert!(refused(&files, "../secret.txt").contains("leaves the files dir"));
        assert!(refused(&files, "sub/../../secret.txt").contains("leaves the files dir"));
        assert!(refused(&files, "escape.txt").contains("symlink to a file outside"));
        assert!(refused(&files, "hard.txt").contains("hard-linked"));
        assert!(refused(&files, "sub").contains("not a regular file"));
        let missing = refused(&files, "nope.txt");
        assert!(
            missing.contains("no file \"nope.txt\"") && missing.contains("ok.txt"),
            "{missing}"
        );
        assert!(refused(&root.path().join("absent"), "ok.txt").contains("does not exist"));
    }
}
