//! forge-runtime: turns an agent directory into a running agent. The way in is [`Runner`]
//! ([`Runner::start`]: audit log, model, tools, egress policy and clients, proxy, browser, agent
//! loop); `forge run`, `forge tool`, `forge mcp serve` and tests start agents through it. The
//! modules are private; what the CLI and tests need is re-exported below.
//!
//! - runner (runner.rs): [`Runner`], [`RunnerOptions`], the A2A and MCP servers it starts, their
//!   options and errors.
//! - assemble (assemble.rs): which tools an agent gets (builtins, cli_execute, skill scripts, the
//!   opt-in browser) and why, with `denied_tools` applied last; egress policy and confinement
//!   (assemble/deps.rs); its options and errors (assemble/options.rs); the per-call path with
//!   guardrails and progress (assemble/call.rs, [`ToolRunner`]).
//! - guardrails (guardrails.rs): skill guardrails on tool input/output, prompts and responses.
//! - agent_loop (agent_loop.rs): the tool-calling loop and system prompt; its bridge to the
//!   assembled tools and the audit observers (agent_loop/tool_bridge.rs); the browser task tools
//!   (agent_loop/browser_task.rs).
//! - audit (audit.rs): the hash-chained NDJSON audit log and its verifier.
//! - mcp_host (mcp_host.rs): the agent's tools as an MCP server (forge-mcp's `ToolHost` over the
//!   `ToolRunner`).
//! - a2a (a2a.rs: card, token): the A2A 0.3 JSON-RPC server of `forge run`:
//!   - a2a/http.rs: routes, SSE;
//!   - a2a/store.rs: the task store (cache, durable writes);
//!   - a2a/scheduler.rs: starting and running tasks;
//!   - a2a/cancel.rs: cancelling them, across replicas too;
//!   - a2a/wire.rs: the JSON shapes; a2a/files.rs: which files a task may serve, reading them;
//!   - a2a/forward.rs: forwarding to the replica that holds a task;
//!   - a2a/v1.rs: the A2A 1.0 method names and shapes;
//!   - a2a/live.rs: the live view and the hand-off page (`browser_handoff`, `input-required`).
//! - handoff_http (handoff_http.rs): the hand-off page's routes (`/handoff/...`), one piece
//!   served by the A2A server and by `forge mcp serve --transport http`.
//! - workspace (workspace.rs): one files directory per conversation, MCP session or one-off run
//!   (`.forge/files/ws-<hash>/`), its forge-made id, the retention sweep and artifact capture
//!   (bytes + SHA-256, a read-only content-addressed copy).
//! - forms (forms.rs): the form skills without a model (`learn-form-schema`,
//!   `execute-form-batch`): requests, the batch scheduler over forge-state rows ([`FormEnv`]).
//! - telemetry (telemetry.rs): OpenTelemetry traces over OTLP/HTTP (task, model call, tool call
//!   and egress decision spans; W3C `traceparent` on A2A requests), off unless
//!   `OTEL_EXPORTER_OTLP_ENDPOINT` is set.
//! - task_scope (task_scope.rs): one task's scope (narrowed egress), budgets (max_steps,
//!   max_seconds) and result object.
//!
//! - profiles (profiles.rs): login profiles: the key (`FORGE_PROFILE_KEY`), sealing
//!   (XChaCha20-Poly1305), loading and saving through the state store; the browser side is
//!   forge-browser's `profile.rs`.
//! - ui (ui.rs): the watch page (`/ui`) and its data routes, the per-task egress ledger
//!   (`task_egress` audit events, ui/ledger.rs) and its HAR 1.2 form (ui/har.rs,
//!   `GET /tasks/{id}/egress`), the per-task record the page reads (ui/tap.rs); a2a/watch.rs is
//!   the A2A store's side of it.
//!
//! Model providers live in forge-llm, the durable store in forge-state.

mod a2a;
mod agent_loop;
mod assemble;
mod audit;
mod forms;
mod guardrails;
mod handoff_http;
mod mcp_host;
mod profiles;
mod runner;
mod task_scope;
mod telemetry;
mod ui;
mod workspace;

pub use a2a::store::{
    ArtifactOptions, INTERRUPTED_BY_RESTART, INTERRUPTED_BY_SHUTDOWN, MAX_RUNNING,
};
pub use a2a::{
    agent_card, load_or_create_token, serve as serve_a2a, CardInfo, ServerHandle, TaskStore,
};
pub use agent_loop::{AgentLoop, BrowserUse, LoopConfig, LoopError, LoopEvent, SessionCloser};
pub use assemble::{
    assemble, egress_policy, mcp_egress_entry, parse_cli_config, AssembleError, AssembleOptions,
    AssembledTools, ConfinementStatus, EgressPolicyError, GuardrailEvent, GuardrailStage,
    ProgressFn, ToolEvents, ToolReason, ToolRunner, ToolSource, BROWSER_ABSENT_REASON,
};
pub use audit::{
    events as audit_events, verify as verify_audit, verify_file as verify_audit_file, AuditLog,
    Field as AuditField, VerifyError, VerifySummary,
};
pub use forms::{
    BatchRequest, BatchResult, FormEnv, FormError, FormRequest, LearnRequest, Progress, RowResult,
    SchemaRef, BATCH_SKILL, LEARN_SKILL,
};
pub use guardrails::REDACTED;
pub use profiles::{
    LoadedProfile, ProfileError, ProfileKey, Profiles, MAX_PROFILE_BYTES, PROFILE_KEY_ENV,
    PROFILE_KEY_FILE_ENV,
};
pub use runner::{
    A2aServer, AuditTarget, EnvFn, McpHttpOptions, McpServeOptions, ModelChoice, RunError, Runner,
    RunnerOptions, ServeError, ServeOptions, StartError, TokenOrigin,
};
pub use task_scope::{ResultStatus, SpecFields, TaskSpec};
pub use telemetry::{TelemetryError, ALLOW_REMOTE_VAR as OTEL_ALLOW_REMOTE_VAR};
pub use ui::{har_from_audit, HarError};
pub use workspace::{sweep as sweep_workspaces, workspace_dir, workspace_id};
