//! Embeds every `skills/<name>/SKILL.md` of the repository into the crate: writes
//! `$OUT_DIR/embedded_skills.rs`, a `&[(name, content)]` built from `include_str!`, so adding a
//! skill folder is enough to ship it in the binary. Names starting with `.` or `_` are skipped, as
//! in discovery.

// Build script: talks to cargo on stdout (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fmt::Write;
use std::path::PathBuf;

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let skills = manifest.join("../../skills");
    println!("cargo:rerun-if-changed={}", skills.display());
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&skills) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let skill_md = e.path().join("SKILL.md");
            if name.starts_with('.') || name.starts_with('_') || !skill_md.is_file() {
                continue;
            }
            println!("cargo:rerun-if-changed={}", skill_md.display());
            entries.push((name, skill_md));
        }
    }
    entries.sort();
    let mut out = String::from("&[\n");
    for (name, path) in &entries {
        let path = path.canonicalize().unwrap_or_else(|_| path.clone());
        // Debug formatting gives valid, escaped Rust string literals.
        let _ = writeln!(
            out,
            "    ({:?}, include_str!({:?})),",
            name,
            path.display().to_string()
        );
    }
    out.push(']');
    let dest =
        PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("embedded_skills.rs");
    std::fs::write(dest, out).expect("OUT_DIR is writable");
}
