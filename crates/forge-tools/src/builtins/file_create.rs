//! `file_create` and the artifact writer every tool that produces a file uses (browser screenshots
//! included): files land in the agent's files dir (`.forge/files`), under a sanitised name, and can
//! never escape it.
//!
//! Confinement, stated as invariants:
//! - the stored name is a single path component from `[A-Za-z0-9._-]`, not starting with `.`, at
//!   most [`MAX_NAME_LEN`] bytes (so no `/`, no `..`, no hidden files, no NUL);
//! - the file is opened with `O_NOFOLLOW`, so a symlink planted in the files dir is not followed, and
//!   it is written only when it is a regular file with one link (no hard link out, no FIFO);
//! - the files dir itself is created if missing and must be a real directory (not a symlink).

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use base64::Engine as _;
use serde::Serialize;
use serde_json::{json, Value};

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Longest stored file name, in bytes.
pub const MAX_NAME_LEN: usize = 128;
/// Largest file `file_create` writes.
pub const MAX_FILE_BYTES: usize = 10 * 1024 * 1024;

/// What a tool that wrote a file returns (the same JSON for `file_create` and `browser_screenshot`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Artifact {
    /// The stored (sanitised) name.
    pub filename: String,
    /// Guessed from the extension.
    pub mime_type: String,
    /// Absolute path of the file.
    pub path: String,
    /// Size in bytes.
    pub size_bytes: u64,
}

impl Artifact {
    /// The artifact as a tool result.
    pub fn into_output(self) -> ToolOutput {
        // Serialising a struct of strings and an integer cannot fail.
        ToolOutput::json(serde_json::to_value(&self).unwrap_or(Value::Null))
    }
}

/// Make `name` safe to store: its last path component, with every character outside
/// `[A-Za-z0-9._-]` replaced by `_`, leading dots removed, and length capped (keeping the extension).
/// An empty result becomes `file`.
pub fn sanitize_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut s: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    s = s.trim_start_matches('.').to_string();
    if s.len() > MAX_NAME_LEN {
        let ext = match s.rfind('.') {
            Some(i) if s.len() - i <= 16 => s[i..].to_string(),
            _ => String::new(),
        };
        s.truncate(MAX_NAME_LEN - ext.len());
        s.push_str(&ext);
    }
    if s.is_empty() {
        "file".to_string()
    } else {
        s
    }
}

/// The MIME type for a file name, from its extension.
pub fn mime_for(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "xml" => "application/xml",
        "yaml" | "yml" => "application/yaml",
        "js" => "text/javascript",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "pdf" => "application/pdf",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// Why an artifact could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    #[error("the files dir {path} is not a directory (or is a symlink); remove it so forge can create it")]
    NotADir { path: PathBuf },
    #[error("could not write {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl From<ArtifactError> for ToolError {
    fn from(e: ArtifactError) -> Self {
        ToolError::Failed(e.to_string())
    }
}

/// Write `bytes` into `files_dir` under the sanitised form of `name` (replacing a regular file of
/// that name) and describe the result.
pub fn save_artifact(
    files_dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<Artifact, ArtifactError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ArtifactError::Io { path, source }
    };
    std::fs::create_dir_all(files_dir).map_err(io(files_dir))?;
    let meta = std::fs::symlink_metadata(files_dir).map_err(io(files_dir))?;
    if !meta.is_dir() {
        return Err(ArtifactError::NotADir {
            path: files_dir.to_path_buf(),
        });
    }
    let dir = files_dir.canonicalize().map_err(io(files_dir))?;
    let filename = sanitize_filename(name);
    let path = dir.join(&filename);
    // Invariant: `filename` is one component without `/` or a leading `.`, so `path` is directly
    // inside `dir`. Checked again here so a future change to the sanitiser cannot break it silently.
    if path.parent() != Some(dir.as_path()) {
        return Err(ArtifactError::Io {
            path,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "name escapes the files dir",
            ),
        });
    }
    // Not truncated at open: an existing entry is checked first (below) and emptied only when it is
    // a regular file of its own. `O_NONBLOCK` makes opening a FIFO fail instead of waiting for a reader.
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .mode(0o644);
    }
    let mut f = opts.open(&path).map_err(io(&path))?;
    let meta = f.metadata().map_err(io(&path))?;
    #[cfg(unix)]
    let links = {
        use std::os::unix::fs::MetadataExt;
        meta.nlink()
    };
    #[cfg(not(unix))]
    let links = 1;
    // A hard link planted in the files dir would let the write land in a file outside it.
    if !meta.is_file() || links != 1 {
        return Err(ArtifactError::Io {
            path,
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an entry of that name exists and is not a regular file of its own \
                 (a hard link, FIFO or device); remove it or choose another name",
            ),
        });
    }
    f.set_len(0).map_err(io(&path))?;
    f.write_all(bytes).map_err(io(&path))?;
    f.flush().map_err(io(&path))?;
    Ok(Artifact {
        mime_type: mime_for(&filename).to_string(),
        filename,
        path: path.to_string_lossy().into_owned(),
        size_bytes: bytes.len() as u64,
    })
}

/// The `file_create` tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct FileCreate;

#[async_trait]
impl Tool for FileCreate {
    fn name(&self) -> &str {
        "file_create"
    }

    fn description(&self) -> &str {
        "Create a file for the user in the agent's files directory (.forge/files). The name is \
         sanitised to letters, digits, '.', '_' and '-'; an existing file of that name is replaced. \
         Returns {filename, mime_type, path, size_bytes}."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "filename": {"type": "string", "description": "e.g. report.md"},
                "content": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf8", "base64"], "default": "utf8"}
            },
            "required": ["filename", "content"],
            "additionalProperties": false
        })
    }

    async fn execute(&self, ctx: &ToolContext, input: Value) -> Result<ToolOutput, ToolError> {
        let name = input
            .get("filename")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`filename` (a string) is required".into()))?;
        let content = input
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::InvalidInput("`content` (a string) is required".into()))?;
        let bytes = match input
            .get("encoding")
            .and_then(Value::as_str)
            .unwrap_or("utf8")
        {
            "utf8" | "utf-8" | "text" => content.as_bytes().to_vec(),
            "base64" => base64::engine::general_purpose::STANDARD
                .decode(content.trim())
                .map_err(|e| {
                    ToolError::InvalidInput(format!("`content` is not valid base64: {e}"))
                })?,
            other => {
                return Err(ToolError::InvalidInput(format!(
                    "`encoding` {other:?} is not one of utf8, base64"
                )))
            }
        };
        if bytes.len() > MAX_FILE_BYTES {
            return Err(ToolError::InvalidInput(format!(
                "the file is larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        let files_dir = ctx.files_dir.clone();
        let name = name.to_string();
        let artifact =
            tokio::task::spawn_blocking(move || save_artifact(&files_dir, &name, &bytes))
                .await
                .map_err(|e| ToolError::Failed(format!("file writer stopped: {e}")))??;
        Ok(artifact.into_output())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_names() {
        assert_eq!(sanitize_filename("report.md"), "report.md");
        assert_eq!(sanitize_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitize_filename("..\\..\\win.ini"), "win.ini");
        assert_eq!(sanitize_filename(".bashrc"), "bashrc");
        assert_eq!(sanitize_filename(".."), "file");
        assert_eq!(sanitize_filename(""), "file");
        assert_eq!(sanitize_filename("a b\0c;rm -rf.txt"), "a_b_c_rm_-rf.txt");
        assert_eq!(sanitize_filename("dir/"), "file");
        let long = format!("{}.png", "x".repeat(500));
        let s = sanitize_filename(&long);
        assert_eq!(s.len(), MAX_NAME_LEN);
        assert!(s.ends_with(".png"));
    }

    #[test]
    fn mime_types() {
        assert_eq!(mime_for("a.PNG"), "image/png");
        assert_eq!(mime_for("noext"), "application/octet-stream");
    }
}
