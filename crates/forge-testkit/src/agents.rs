//! Private copies of the agents under `fixtures/agents/` (and `examples/`), so tests never write
//! into the repository. Used by the forge-runtime and forge-cli tests; moved here from
//! forge-runtime/tests/support.

use std::path::{Path, PathBuf};

/// The fixture agent called `name` (`fixtures/agents/<name>`), in the repository.
pub fn fixture(name: &str) -> PathBuf {
    // This crate lives at `crates/forge-testkit`, two levels below the repository root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/agents")
        .join(name)
}

/// Copy `from` into `to` recursively. `.forge` (runtime state a local run may have left beside
/// forge.yaml, gitignored) is left out; every other file, dotfiles included, is copied.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() == ".forge" {
            continue;
        }
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A private copy of fixture agent `name` at the root of a fresh temp dir.
pub fn fixture_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&fixture(name), dir.path());
    dir
}
