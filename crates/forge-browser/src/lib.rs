//! forge-browser: the Chromium manager, page observation and the browser_* tools.
//!
//! - [`BrowserManager`] (`manager.rs`): one Chromium per agent, launched lazily, only through the
//!   egress proxy; one browser context per session; crash/hang detection; clean shutdown.
//! - [`BrowserConfig`] (`config.rs`): proxy address, binary, headless, limits and timeouts.
//! - [`find_browser_binary`] (`binary.rs`): `FORGE_BROWSER_BIN` or a PATH lookup.
//! - [`browser_tools`] (`tools.rs`): the eleven `browser_*` tools implementing `forge_tools::Tool`.
//! - `observe.rs` + `observe.js`: the page library run in an isolated world, and the compact
//!   observation text (refs like `e12`, `f1e3`).
//! - [`RefusalLog`] (`refusals.rs`): the egress proxy's recent refusals, for clear blocked errors.

pub mod binary;
pub mod config;
pub mod manager;
pub mod observe;
pub mod refusals;
pub mod tools;

pub use binary::{find_browser_binary, BrowserNotFound};
pub use config::BrowserConfig;
pub use manager::{BrowserError, BrowserManager};
pub use refusals::RefusalLog;
pub use tools::{browser_tools, BrowserToolOptions};
