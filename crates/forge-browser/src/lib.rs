//! forge-browser: the Chromium manager, page observation and the browser_* tools.
//!
//! - [`BrowserManager`] (`manager.rs`): one Chromium per agent (one Lightpanda per session),
//!   launched lazily, only through the egress proxy; one browser context per session;
//!   crash/hang detection; clean shutdown.
//! - `session.rs`: the sessions side: the running browser's session table, each session's
//!   browser context, tabs (dialogs, navigations) and the idle reaper.
//! - `process.rs`: Chromium as an OS process: its flags and environment, spawning (confined or
//!   not), the process-group registry and kill checks the manager uses.
//! - `lifeline.rs`: Chromium dies with forge (`kill -9` included): spawned from one long-lived
//!   thread with a parent-death signal.
//! - [`CrashObserver`], [`BrowserCrash`] (`crash.rs`): after a crash, each session's next result
//!   says once that its pages are gone; observers (the audit log) are told of every crash.
//! - [`engine`] (`engine/mod.rs`, `engine/chromium.rs`, `engine/lightpanda.rs`): the engine seam:
//!   [`engine::EngineKind`] (Chromium or Lightpanda), the [`engine::Engine`] trait (binary,
//!   liveness, [`engine::Capability`]) and which tools each engine can serve.
//! - [`routing`] (`routing.rs`): two engines in one agent: [`routing::routed_browser_tools`] send
//!   each call to its `skill`'s engine ([`routing::EngineRoutes`]), one manager per engine.
//! - [`BrowserConfig`] (`config.rs`): proxy address, binary, headless, limits and timeouts.
//! - [`find_browser_binary`] (`binary.rs`): `FORGE_BROWSER_BIN` or a PATH lookup.
//! - [`BrowserError`], `ActionError` (`error.rs`): why the browser or one action failed.
//! - [`browser_tools`] (`tools/mod.rs`): the `browser_*` tools implementing `forge_tools::Tool`,
//!   one file per tool under `tools/` (`navigate.rs`, `click.rs`, ...), sharing the action
//!   context `Cx` (observe, stale-ref errors, points, what an action led to).
//! - `keys.rs`: key and chord parsing ([`keys::KeyPress`]) and real key events.
//! - `navwatch.rs`: watching what an action led to (navigation, HTTP status) and mapping the egress
//!   proxy's refusals to clear blocked messages.
//! - `pointer.rs`: the realistic pointer (moves along intermediate points from where it last was;
//!   the position is kept per tab) and CDP mouse events.
//! - `observe/` (`mod.rs`, `world.rs`, `listeners.rs`, `render.rs`) + `observe/observe.js`: the
//!   page library run in an isolated world (the world cache), click-listener marking, and the
//!   compact observation text (refs like `e12`, `f1e3`).
//! - `nodelay.rs`: Nagle off on forge's own CDP connections (chromiumoxide leaves it on; a
//!   large command's tail then waited ~40 ms for the engine's delayed ACK).
//! - `cdp_link.rs`: forge's second CDP connection to the browser, for commands on iframe
//!   targets' sessions (used by `frames.rs`, kept per browser by the manager).
//! - `frames.rs`: cross-origin iframes (in-process and out-of-process) walked and driven through
//!   the frame's own context; routes a frame ref's library calls to the owning session.
//! - `clipboard.rs`: a clipboard per session (copy/cut keep the text in the session; paste puts
//!   it back for that one key press), so tasks never share Chromium's one clipboard.
//! - `devtools_relay.rs`: Chromium confined in a network namespace of its own (only the proxy is
//!   reachable), forge's relay to its DevTools endpoint inside, and the spare proxy listeners there.
//! - [`ProfileState`], [`SessionProfile`], [`ProfileOrigin`] (`profile.rs`): login profiles in
//!   a session's context: cookies and local storage restored at creation and read back, for
//!   the profile's origins only (domain rule, source scheme and port).
//! - `downloads.rs`: every session's downloads land in its workspace (`downloads/`), followed,
//!   capped ([`DownloadLimits`]), named safely and reported by the tool call they happened in.
//! - [`forms`] (`forms/mod.rs`, `forms/schema.rs`, `forms/learn.js`): learning a form's structure
//!   read-only in the isolated world ([`forms::FormSchema`], the `browser_form_learn` tool).
//! - [`RefusalLog`] (`refusals.rs`): the egress proxy's recent refusals, for clear blocked errors.
//! - [`LiveTab`] (`screencast.rs`): a tab's live view (CDP screencast, only while watched, capped
//!   in rate and size) and a person's input to it (mouse, wheel, keys, text through CDP `Input.*`).
//! - [`Handoffs`] (`handoff.rs`): hand-offs to a person (one-time token, visitor secret, one tab),
//!   opened by `browser_handoff` (`tools/handoff.rs`) and finished by the runtime's hand-off page.

pub mod binary;
mod cdp_link;
mod clipboard;
pub mod config;
pub mod crash;
pub mod devtools_relay;
pub mod downloads;
pub mod engine;
pub mod error;
pub mod forms;
mod frames;
pub mod handoff;
pub mod keys;
mod lifeline;
pub mod manager;
mod navwatch;
mod nodelay;
pub mod observe;
mod pointer;
mod process;
pub mod profile;
pub mod refusals;
pub mod routing;
pub mod screencast;
mod session;
pub mod tools;

pub use binary::{find_browser_binary, BrowserNotFound};
pub use config::BrowserConfig;
pub use crash::{BrowserCrash, CrashObserver};
pub use downloads::DownloadLimits;
pub use engine::{Capability, EngineKind};
pub use error::BrowserError;
pub use handoff::{HandoffEnd, HandoffEvent, HandoffObserver, HandoffRefusal, Handoffs};
pub use manager::{BrowserManager, CloseReason, SessionClosedHook, SessionOptions};
pub use profile::{ProfileOrigin, ProfileState, SavedCookie, SessionProfile};
pub use refusals::RefusalLog;
pub use screencast::{Frame, LiveError, LiveInput, LiveTab};
pub use tools::{browser_tools, BrowserToolOptions};
