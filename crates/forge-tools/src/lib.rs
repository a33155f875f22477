//! forge-tools: what every tool is and the tools every agent gets.
//!
//! - [`tool`]: the [`Tool`] trait, the [`ToolContext`] a call runs with, [`ToolOutput`] and [`ToolError`].
//! - [`registry`]: the [`Registry`] of tools an agent has (register, lookup, remove, list).
//! - [`fence`]: the untrusted-content fence that wraps everything that came from outside
//!   (web pages, HTTP bodies) before a model sees it.

pub mod fence;
pub mod registry;
pub mod tool;

pub use registry::Registry;
pub use tool::{Tool, ToolContext, ToolError, ToolOutput};
