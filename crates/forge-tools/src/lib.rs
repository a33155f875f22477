//! forge-tools: what every tool is and the tools every agent gets.
//!
//! - [`tool`]: the [`Tool`] trait, the [`ToolContext`] a call runs with, [`ToolOutput`] and [`ToolError`].
//! - [`registry`]: the [`Registry`] of tools an agent has (register, lookup, remove, list).
//! - [`builtins`]: the tools every agent gets (http_request, web_fetch, file_create, ...) and cli_execute.
//! - [`secrets`]: resolved secrets ([`Secrets`], [`Secret`], [`SecretValue`]): values that never
//!   print, bound to origins and hosts, and the one redactor that replaces each value by its name.
//! - [`pdf`]: reading PDFs ([`pdf::read_pdf`]: title and text page by page, bounded in time and
//!   memory on hostile input) and the text a tool shows of one ([`pdf::render_pdf_text`]).
//! - [`fence`]: the untrusted-content fence that wraps everything that came from outside
//!   (web pages, HTTP bodies) before a model sees it.

pub mod builtins;
pub mod fence;
pub mod pdf;
pub mod registry;
pub mod secrets;
pub mod tool;

pub use registry::Registry;
pub use secrets::{BoundOrigin, Secret, SecretUseSink, SecretValue, Secrets};
pub use tool::{Tool, ToolContext, ToolError, ToolOutput};
