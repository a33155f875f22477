//! forge-testkit: test support shared by every crate's tests and benches (a dev-dependency only,
//! never used by product code, never by unit tests inside a crate's `src/`). Real parts only:
//! real sockets on 127.0.0.1, real Chromium, a real PostgreSQL; fakes only for the LLM vendors.
//!
//! Map (one feature per area, so a crate's tests build only what they use):
//! - gates (gates.rs): require-or-skip for optional dependencies (Chromium, Python SDKs, ...):
//!   a note on stderr and a skip, or a panic under `FORGE_REQUIRE_BROWSER=1` (CI).
//! - site (site.rs): the loopback HTTP site with hit counting ([`site::Site`]) and the canary
//!   that must never be reached ([`site::Canary`]); [`site::Site::builder`] for another bind,
//!   fewer connections or HTTPS (feature `tls`); bare, raw and delayed answers.
//! - llm (llm.rs, feature `llm`): the fake OpenAI / Anthropic servers and their reply builders.
//! - pg (pg.rs, feature `pg`): a PostgreSQL server of a test's own in a temp dir.
//! - agents (agents.rs, feature `agents`): private copies of the fixture agents.
//! - browser (browser.rs, feature `browser`): the real egress proxy and a `BrowserManager` on it,
//!   the shared per-binary browser fixture (its Chromium and temp dirs gone at process exit),
//!   confinement gates and a process-table probe.
//! - squid (squid.rs, feature `squid`): squid started as a reference proxy for the proxy benches
//!   (never a test dependency) and a process's on-CPU time.
//! - cli (cli.rs, feature `cli`): `forge` command builders with a hermetic environment
//!   ([`forge!`], [`forge_assert!`]), and `url_port` (the port of the URL a start-up line prints).
//! - mcp (mcp.rs, feature `mcp`): a raw MCP-over-HTTP session ([`mcp::RawSession`]) for tests
//!   of `forge mcp serve --transport http`.
//!
//! Test support panics when its setup fails (a test cannot go on without its server): the
//! `expect`s here name what failed. Printing is allowed (skip notes go to stderr, as in tests).
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod files;
pub mod gates;
pub mod site;

#[cfg(feature = "agents")]
pub mod agents;
#[cfg(feature = "browser")]
pub mod browser;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "llm")]
pub mod llm;
#[cfg(feature = "mcp")]
pub mod mcp;
#[cfg(feature = "pg")]
pub mod pg;
#[cfg(feature = "squid")]
pub mod squid;

#[cfg(feature = "egress")]
pub use gates::require_namespace;
pub use gates::{
    program_runs, python_has, require, require_lightpanda_program, required, skip,
    skip_unless_required_by,
};
#[cfg(feature = "browser")]
pub use gates::{require_browser, require_lightpanda};
