//! forge-runtime: turns an agent directory into a running agent.
//!
//! - [`assemble`]: which tools an agent gets (builtins, cli_execute, skill scripts, the opt-in
//!   browser) and why, with `denied_tools` applied last.
//! - [`guardrails`]: skill guardrails on tool input/output, prompts and responses.
//! - [`providers`]: LLM providers (OpenAI-compatible, Anthropic, scripted) over the egress client.
//! - [`agent_loop`]: the tool-calling loop.
//! - [`audit`]: the hash-chained NDJSON audit log.
//! - [`a2a`]: the A2A JSON-RPC server (`forge run`).

pub mod a2a;
pub mod agent_loop;
pub mod assemble;
pub mod audit;
pub mod guardrails;
pub mod providers;
