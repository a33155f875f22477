//! Pieces the corpus benches share (`browser.rs`, `engines.rs`): the loopback static server for
//! the shared page corpus, the corpus dir from the command line, a tool by name, medians and
//! /proc readings. Included by each bench with `mod common;` (a bench is its own crate).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use forge_browser::{browser_tools, BrowserManager, BrowserToolOptions};
use forge_testkit::site::{Handler, Request, Response};
use forge_tools::Tool;

/// Serves the files under `root` (the corpus) by path; `..` and paths leaving `root` get 403.
pub(crate) fn static_server_handler(root: PathBuf) -> Handler {
    Arc::new(move |r: &Request| {
        let rel = r
            .path
            .split('?')
            .next()
            .unwrap_or("/")
            .trim_start_matches('/');
        let path = root.join(rel);
        if rel.contains("..") || !path.starts_with(&root) {
            return Response::with(403, "text/plain", "no");
        }
        match std::fs::read(&path) {
            Ok(body) => {
                let ct = match path.extension().and_then(|e| e.to_str()).unwrap_or("") {
                    "html" => "text/html; charset=utf-8",
                    "js" => "text/javascript",
                    "css" => "text/css",
                    "png" => "image/png",
                    "json" => "application/json",
                    _ => "application/octet-stream",
                };
                Response::bytes(200, ct, body)
            }
            Err(_) => Response::not_found(),
        }
    })
}

/// The corpus dir: the first non-flag argument, else `FORGE_CORPUS`, else /work/shared/corpus.
pub(crate) fn corpus_dir() -> PathBuf {
    std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("FORGE_CORPUS").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpus"))
}

/// The readability pages of the corpus (names of the dirs holding a `source.html`), sorted.
pub(crate) fn readability_pages(corpus: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(corpus.join("readability"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().join("source.html").exists())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The observation inside the untrusted-content fence of a tool result: the lines after the
/// fence's `[forge: ...]` notice, up to its end marker (empty when there is no fence).
pub(crate) fn fenced(s: &str) -> &str {
    let Some((_, rest)) = s.split_once("<<<UNTRUSTED_CONTENT_START") else {
        return "";
    };
    let Some((_, rest)) = rest.split_once("\n[forge: ") else {
        return "";
    };
    let Some((_, body)) = rest.split_once('\n') else {
        return "";
    };
    body.split_once("<<<UNTRUSTED_CONTENT_END")
        .map(|(b, _)| b.strip_suffix('\n').unwrap_or(b))
        .unwrap_or("")
}

/// The middle value (upper middle for an even count); 0 for none. Sorts `v`.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        return 0.0;
    }
    v[v.len() / 2]
}

/// Milliseconds.
pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The browser tool `name` on manager `m` (default options).
pub(crate) fn tool(m: &Arc<BrowserManager>, name: &str) -> Arc<dyn Tool> {
    browser_tools(m.clone(), BrowserToolOptions::default())
        .into_iter()
        .find(|t| t.name() == name)
        .expect("tool")
}

/// Kilobytes of a /proc status-like field (`VmRSS:` in `status`, `Pss:` in `smaps_rollup`).
pub(crate) fn proc_kb(pid: i32, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// The fields of /proc/<pid>/stat after the command name (field 3, the state, is index 0).
pub(crate) fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Every pid in /proc.
pub(crate) fn all_pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect()
        })
        .unwrap_or_default()
}
