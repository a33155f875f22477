//! forge-skills: SKILL.md and forge.yaml parsing, requirement aggregation, derived configs.
//!
//! What it offers and where it lives:
//! - [`Skill`], [`ForgeMeta`] and the rest of the SKILL.md format, [`parse_skill`]: `skill.rs`
//! - [`ForgeConfig`] (forge.yaml) with [`ForgeConfig::load`]: `config.rs`
//! - [`McpConfig`], [`McpServer`] (forge.yaml `mcp.servers`): `mcp.rs`
//! - [`parse_duration`], [`format_duration`] (the one duration grammar): `duration.rs`
//! - [`BrowserSettings`] (forge.yaml `browser`), [`BrowserEngines`] (each browser skill's engine,
//!   [`Agent::browser_engines`]): `browser.rs`
//! - [`A2aSettings`] (forge.yaml `a2a`): `a2a.rs`
//! - [`discover`] (`skills/*/SKILL.md`, `skills/*.md`, symlink rules): `discovery.rs`
//! - [`embedded_skills`] (the repo's `skills/` folder compiled in): `embedded.rs`, listed by `build.rs`
//! - [`Aggregate`], [`BrowserView`], [`CliView`]: `aggregate.rs`
//! - [`ToolPlan`] ([`Agent::tool_plan`]): which tools the agent gets and why, read by the runtime
//!   and the build: `tool_plan.rs`
//! - [`parse_cli_tool_config`] (forge.yaml `tools[].config` of cli_execute), [`parse_duration_value`]:
//!   `tool_config.rs`
//! - [`SecretsConfig`], [`SecretSpec`] (forge.yaml `secrets`: credentials by reference bound to
//!   origins and hosts; literal values refused): `secrets.rs`
//! - [`ProfileSpec`] (forge.yaml `browser.profiles`: login profiles bound to origins): `profiles.rs`
//! - [`TasksConfig`] (forge.yaml `tasks`: per-task budgets, defaults and caps): `tasks.rs`
//! - [`Agent::load`] (forge.yaml + active skills + aggregate): `agent.rs`
//! - [`Error`], [`SourceDiagnostic`] (miette diagnostics with source spans): `error.rs`
//! - the position-keeping YAML tree behind the diagnostics: `yaml.rs` (internal)

mod a2a;
mod agent;
mod aggregate;
mod browser;
mod config;
mod discovery;
mod duration;
mod embedded;
mod error;
mod fleet;
mod mcp;
mod profiles;
mod secrets;
mod skill;
mod tasks;
mod tool_config;
mod tool_plan;
mod yaml;

pub use a2a::{A2aSettings, DEFAULT_INLINE_ARTIFACT_BYTES, MAX_INLINE_ARTIFACT_BYTES};
pub use agent::Agent;
pub use aggregate::{
    expand_domains, Aggregate, BrowserView, CliView, EnvAggregate, OneOfGroup, SHELLS,
};
pub use browser::{
    BrowserEngine, BrowserEngines, BrowserSettings, SkillEngine, TaskModel, MAX_BROWSER_SESSIONS,
};
pub use config::{
    Confinement, EgressConfig, EgressMode, ForgeConfig, ModelConfig, ModelFallback, SecurityConfig,
    SkillsConfig, ToolConfig, WorkspacesConfig, DEFAULT_WORKSPACE_RETENTION,
};
pub use discovery::{discover, load_skill_file, read_limited, Discovery, MAX_SKILL_BYTES};
pub use duration::{format_duration, parse_duration};
pub use embedded::{embedded_names, embedded_skill, embedded_skills, EMBEDDED};
pub use error::{Error, SourceDiagnostic};
pub use fleet::{DeployConfig, Replicas, StateConfig, MAX_REPLICAS};
pub use mcp::{
    is_valid_server_name, McpAuth, McpAuthKind, McpConfig, McpServer, McpToolFilter, McpTransport,
    MCP_DEFAULT_TIMEOUT, MCP_MAX_TIMEOUT, MCP_MIN_TIMEOUT,
};
pub use miette;
pub use profiles::{ProfileSpec, MAX_PROFILE_ORIGINS};
pub use secrets::{
    is_valid_secret_name, normalize_secret_host, SecretOrigin, SecretSource, SecretSpec,
    SecretsConfig,
};
pub use skill::{
    parse_skill, parse_tool_sections, BinRequirement, BrowserGuardrails, Capability,
    EnvRequirements, FilesystemAccess, ForgeMeta, Guardrails, Origin, OutputAction, OutputRule,
    PatternRule, Requires, Skill, SkillSource, ToolSection, TrustHints, Use, BROWSER_TOOLS,
    FILESYSTEM_MODES, KNOWN_CAPABILITIES, USE_TYPES,
};
pub use tasks::{
    TasksConfig, DEFAULT_MAX_SECONDS, DEFAULT_MAX_SECONDS_CAP, DEFAULT_MAX_STEPS,
    DEFAULT_MAX_STEPS_CAP,
};
pub use tool_config::{parse_cli_tool_config, parse_duration_value, CliToolConfig};
pub use tool_plan::{
    denied_by, is_mcp_tool_name, is_plain_tool_name, script_for, CliSource, PlannedTool,
    ScriptBinding, ToolPlan, ToolSource, BROWSER_ABSENT_REASON, BUILTIN_TOOLS, CLI_TOOL,
    SCRIPT_EXTENSIONS,
};
