//! What tool assembly is given and how it fails: [`AssembleOptions`] (with the egress and
//! browser knobs, [`DepOptions`]) and [`AssembleError`] (with [`EgressPolicyError`]). Kept apart
//! from `assemble.rs` and `assemble/deps.rs` so both can use them without importing each other.

use std::path::PathBuf;
use std::sync::Arc;

use forge_browser::CrashObserver;
use forge_egress::client::ClientOptions;
use forge_egress::policy::PolicyError;
use forge_egress::proxy::ProxyOptions;

use super::call::ToolEvents;
use crate::guardrails::GuardrailError;

/// Reads an environment variable (MCP tokens and stdio servers' `env` names; tests pass their own).
pub(crate) type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Options for [`assemble`].
#[derive(Clone, Default)]
pub struct AssembleOptions {
    /// The environment MCP servers' tokens and `env` names are read from (default: the process's).
    pub env: Option<EnvLookup>,
    /// Where tools write artifacts; default `<agent dir>/.forge/files`.
    pub files_dir: Option<PathBuf>,
    /// Extra allowlist entries forge itself needs (the model provider host), as (why, entry).
    pub forge_egress_entries: Vec<(String, String)>,
    /// Extra entries given on the command line (`--allow`).
    pub cli_egress_entries: Vec<String>,
    /// Receives guardrail events (the runtime writes audit events from them).
    pub events: Option<Arc<dyn ToolEvents>>,
    /// Egress and browser knobs (resolver for tests, proxy observer, browser flags).
    pub deps: DepOptions,
    /// Told each time a tool uses a secret (the runtime writes a `secret_use` audit event).
    pub secret_uses: Option<Arc<dyn forge_tools::SecretUseSink>>,
}

/// Knobs for the egress and browser parts (test resolvers and CAs, the proxy observer).
#[derive(Clone, Default)]
pub struct DepOptions {
    /// Options of the egress client used by `http_request`/`web_fetch` (resolver, limits, roots).
    pub client: ClientOptions,
    /// Options of the egress proxy (resolver, observer, limits).
    pub proxy: ProxyOptions,
    /// Told about every Chromium crash (the runner sets its audit log).
    pub browser_crash: Option<Arc<dyn CrashObserver>>,
}

/// Why an agent's tools could not be assembled. Each message names the thing, the rule and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AssembleError {
    /// A forge.yaml `secrets:` entry's source is missing or empty.
    #[error("secret {name} ({reference}): {why}\n  fix: {fix}")]
    Secret {
        name: String,
        /// `env:NAME` or `file:PATH`.
        reference: String,
        why: String,
        fix: String,
    },
    #[error(transparent)]
    Guardrail(#[from] GuardrailError),
    /// forge.yaml `tools[cli_execute].config` is wrong, or cli_execute refused a binary.
    #[error("{file}: tools[cli_execute]: {message}")]
    CliConfig { file: PathBuf, message: String },
    /// The egress policy could not be built.
    #[error("egress policy: {0}")]
    Egress(#[from] EgressPolicyError),
    /// The egress proxy could not start.
    #[error("could not start the egress proxy on 127.0.0.1: {0}")]
    Proxy(String),
    /// A skill declares the browser but no Chromium was found.
    #[error(
        "the browser is required by skill(s) {skills} (requires.capabilities: [browser]) but no Chromium binary was found.\n  \
         searched: {searched}\n  \
         fix: install it (`apt-get install chromium`), or set FORGE_BROWSER_BIN=/path/to/chromium, \
         or remove the browser capability from those skills"
    )]
    BrowserMissing { skills: String, searched: String },
    /// `browser.engine` (or `FORGE_BROWSER_ENGINE`) is lightpanda and no Lightpanda was found.
    #[error(
        "the browser is required by skill(s) {skills} with browser.engine lightpanda but no Lightpanda binary was found.\n  \
         searched: {searched}\n  \
         fix: `pip install lightpanda` (puts `lightpanda` on PATH; scripts/install-deps.sh does it), \
         or set FORGE_LIGHTPANDA_BIN=/path/to/lightpanda, or use browser.engine: chromium"
    )]
    LightpandaMissing { skills: String, searched: String },
    /// `FORGE_BROWSER_ENGINE` names no engine.
    #[error("{0}")]
    BrowserEngine(String),
    /// The browser manager could not be built.
    #[error("the browser required by skill(s) {skills} could not be set up: {message}")]
    Browser { skills: String, message: String },
    /// forge.yaml `security.confinement: required`, and this platform cannot confine children.
    #[error(
        "{file}: security.confinement is `required` but child programs cannot be confined here: {reason}\n  \
         fix: {fix}",
        file = file.display(),
        fix = forge_egress::confine::FIX
    )]
    ConfinementRequired { file: PathBuf, reason: String },
    /// A required MCP server's token variable is not set (forge.yaml `mcp.servers[].auth`).
    #[error("{0}")]
    McpEnv(String),
    /// A `required: true` MCP server could not be reached, refused the token, or listed no tools.
    #[error("{file}: mcp.servers[{server}] is required and could not be used: {message}; fix the server or its token, or set `required: false` to start without its tools")]
    McpRequired {
        file: PathBuf,
        server: String,
        message: String,
    },
}

/// The agent's egress policy could not be built: the policy error, and the file that holds the
/// offending value (forge.yaml for `egress.*`, the skill's SKILL.md for its `egress_domains`;
/// `None` for `--allow` and forge's own entries).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}{error}", file.as_ref().map(|f| format!("{}: ", f.display())).unwrap_or_default())]
pub struct EgressPolicyError {
    /// What is wrong, with the field, the value and the fix.
    pub error: PolicyError,
    /// The file holding the value, when it came from one.
    pub file: Option<PathBuf>,
}
