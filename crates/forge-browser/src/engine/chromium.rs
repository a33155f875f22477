//! Chromium as an [`Engine`]: every capability; its binary is `FORGE_BROWSER_BIN` or a PATH
//! lookup (`binary.rs`), its command line and environment are in `process.rs`.

use std::ffi::OsString;
use std::path::PathBuf;

use super::{Capability, Engine, EngineKind};
use crate::binary::BrowserNotFound;

/// Chromium (the default engine).
#[derive(Debug, Clone, Copy, Default)]
pub struct Chromium;

impl Engine for Chromium {
    fn kind(&self) -> EngineKind {
        EngineKind::Chromium
    }

    fn can(&self, _c: Capability) -> bool {
        true
    }

    fn find_binary_in(
        &self,
        explicit: Option<PathBuf>,
        path_var: Option<OsString>,
    ) -> Result<PathBuf, BrowserNotFound> {
        crate::binary::find_browser_binary_in(explicit, path_var)
    }

    fn find_binary(&self) -> Result<PathBuf, BrowserNotFound> {
        crate::binary::find_browser_binary()
    }

    fn ping_means_dead(&self) -> bool {
        true
    }
}
