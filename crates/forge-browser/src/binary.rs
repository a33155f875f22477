//! Finding the Chromium binary: `FORGE_BROWSER_BIN`, else a PATH lookup of the usual names.

use std::path::PathBuf;

/// The names looked up on PATH, in order.
pub const BROWSER_NAMES: [&str; 5] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "headless-shell",
];

/// No usable browser binary was found.
#[derive(Debug, Clone, thiserror::Error)]
#[error("no {} found (looked for: {}); {}", engine_title(*engine), searched.join(", "), engine_fix(*engine))]
pub struct BrowserNotFound {
    /// What was looked at (the env variable's value or `name on PATH`), in order.
    pub searched: Vec<String>,
    /// The engine whose binary is missing.
    pub engine: crate::engine::kind::EngineKind,
}

fn engine_title(e: crate::engine::kind::EngineKind) -> &'static str {
    e.title()
}

/// How to install `e`'s binary (one sentence, for error messages).
pub fn engine_fix(e: crate::engine::kind::EngineKind) -> &'static str {
    match e {
        crate::engine::kind::EngineKind::Chromium => {
            "install Debian's `chromium` package or set FORGE_BROWSER_BIN to the browser binary"
        }
        crate::engine::kind::EngineKind::Lightpanda => {
            "install it (`pip install lightpanda` puts `lightpanda` on PATH; scripts/install-deps.sh does this) or set FORGE_LIGHTPANDA_BIN to the binary"
        }
    }
}

/// The browser to launch: `FORGE_BROWSER_BIN` when set (it must exist; no fallback then), else
/// the first of [`BROWSER_NAMES`] found on PATH.
pub fn find_browser_binary() -> Result<PathBuf, BrowserNotFound> {
    find_browser_binary_in(
        std::env::var_os("FORGE_BROWSER_BIN").map(PathBuf::from),
        std::env::var_os("PATH"),
    )
}

/// [`find_browser_binary`] with the environment passed in (for tests).
pub fn find_browser_binary_in(
    explicit: Option<PathBuf>,
    path_var: Option<std::ffi::OsString>,
) -> Result<PathBuf, BrowserNotFound> {
    if let Some(bin) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        if forge_which::is_executable(&bin) {
            return Ok(bin);
        }
        return Err(BrowserNotFound {
            searched: vec![format!(
                "FORGE_BROWSER_BIN={} (not an executable file; fix or unset FORGE_BROWSER_BIN)",
                bin.display()
            )],
            engine: crate::engine::kind::EngineKind::Chromium,
        });
    }
    let dirs: Vec<PathBuf> = path_var
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    // Name by name: an earlier name anywhere on PATH beats a later one.
    for name in BROWSER_NAMES {
        if let Some(found) = forge_which::find_in(name, &dirs) {
            return Ok(found);
        }
    }
    Err(BrowserNotFound {
        searched: BROWSER_NAMES
            .iter()
            .map(|n| format!("{n} on PATH"))
            .collect(),
        engine: crate::engine::kind::EngineKind::Chromium,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn explicit_binary_must_exist_and_is_named_in_the_error() {
        let err = find_browser_binary_in(Some("/nonexistent/forge-chrome".into()), None)
            .expect_err("missing explicit binary is an error");
        let msg = err.to_string();
        assert!(
            msg.contains("FORGE_BROWSER_BIN=/nonexistent/forge-chrome"),
            "{msg}"
        );
    }

    #[test]
    fn path_lookup_finds_names_in_order_and_lists_them_when_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = find_browser_binary_in(None, Some(dir.path().as_os_str().to_owned()))
            .expect_err("empty dir has no browser");
        assert_eq!(empty.searched.len(), BROWSER_NAMES.len());
        assert!(empty.to_string().contains("google-chrome-stable on PATH"));
        for name in ["headless-shell", "google-chrome"] {
            let p = dir.path().join(name);
            std::fs::write(&p, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let found =
            find_browser_binary_in(None, Some(dir.path().as_os_str().to_owned())).expect("found");
        assert_eq!(found, dir.path().join("google-chrome"), "earlier name wins");
        let explicit = dir.path().join("headless-shell");
        assert_eq!(
            find_browser_binary_in(Some(explicit.clone()), None).expect("explicit"),
            explicit
        );
    }
}
