//! forge-runtime: turns an agent directory into a running agent.
//!
//! - [`runner`]: THE way in: [`runner::Runner::start`] turns a loaded agent into a running one
//!   (audit log, model, tools, egress policy and clients, proxy, browser, agent loop); `forge run`,
//!   `forge tool`, `forge mcp serve` and tests all start agents through it (`runner.rs`).
//! - [`assemble`]: which tools an agent gets (builtins, cli_execute, skill scripts, the opt-in
//!   browser) and why, with `denied_tools` applied last.
//! - [`guardrails`]: skill guardrails on tool input/output, prompts and responses.
//! - [`agent_loop`]: the tool-calling loop and system prompt (`agent_loop.rs`); its bridge to the
//!   assembled tools and the audit observers (`agent_loop/assembled.rs`).
//! - [`audit`]: the hash-chained NDJSON audit log and its verifier (`audit.rs`).
//! - [`mcp_host`]: the agent's tools as an MCP server (forge-mcp's `ToolHost` over the
//!   `ToolRunner`), served by [`runner::Runner::serve_mcp_stdio`] / `serve_mcp_http`.
//! - [`a2a`]: the A2A 0.3 JSON-RPC server of `forge run` (`a2a.rs`: card, token;
//!   `a2a/http.rs`: routes, SSE; `a2a/tasks.rs`: the task store).
//! - [`task`]: one task's scope (narrowed egress), budgets (max_steps, max_seconds) and result
//!   object (`task.rs`).

pub mod a2a;
pub mod agent_loop;
pub mod assemble;
pub mod audit;
pub mod guardrails;
pub mod mcp_host;
pub mod runner;
pub mod task;

pub use runner::{Runner, RunnerOptions};
