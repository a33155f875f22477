//! forge-which: finding an executable in a list of directories, the one copy forge's crates share
//! (the CLI's requirement checks, the `cli_execute` and script tools, the image builder lookup,
//! the Chromium lookup). No dependencies: those crates have no other forge crate in common.
//!
//! - [`is_executable`]: a regular file with an execute bit (any of user, group, other).
//! - [`find_in`]: the first `dir/name` over some directories that [`is_executable`].
//!
//! Which directories count (every `PATH` entry, only absolute ones, non-empty ones) is each
//! caller's rule, so the caller filters `std::env::split_paths` before handing them in.

use std::path::{Path, PathBuf};

/// Whether `p` is a regular file with an execute bit (on non-Unix systems: a regular file).
/// Symlinks are followed; a missing or unreadable path is not executable.
pub fn is_executable(p: &Path) -> bool {
    match std::fs::metadata(p) {
        #[cfg(unix)]
        Ok(m) => {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        }
        #[cfg(not(unix))]
        Ok(m) => m.is_file(),
        Err(_) => false,
    }
}

/// The first `dir/name`, over `dirs` in order, that [`is_executable`].
pub fn find_in<I>(name: &str, dirs: I) -> Option<PathBuf>
where
    I: IntoIterator,
    I::Item: AsRef<Path>,
{
    dirs.into_iter()
        .map(|d| d.as_ref().join(name))
        .find(|p| is_executable(p))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        p
    }

    #[test]
    fn only_regular_files_with_an_execute_bit_count() {
        let d = tempfile::tempdir().expect("tempdir");
        assert!(is_executable(&file(d.path(), "u", 0o700)));
        assert!(is_executable(&file(d.path(), "o", 0o601)));
        assert!(!is_executable(&file(d.path(), "plain", 0o644)));
        assert!(!is_executable(d.path()), "a directory is not executable");
        assert!(!is_executable(&d.path().join("missing")));
    }

    #[test]
    fn the_first_directory_holding_it_wins() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        file(a.path(), "tool", 0o644);
        let in_b = file(b.path(), "tool", 0o755);
        assert_eq!(find_in("tool", [a.path(), b.path()]), Some(in_b));
        file(a.path(), "other", 0o755);
        assert_eq!(
            find_in("other", [a.path(), b.path()]),
            Some(a.path().join("other"))
        );
        assert_eq!(find_in("none", [a.path(), b.path()]), None);
    }
}
