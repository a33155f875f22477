//! [`Runner`]: the one way in. `forge run`, `forge tool`, `forge mcp serve` and tests start an
//! agent with [`Runner::start`], which puts together, in this order:
//!
//! 1. the audit log ([`AuditTarget`]);
//! 2. the model (only when [`RunnerOptions::model`] asks for one): provider, name and base URL
//!    resolved, fallbacks too, and each endpoint's host added to the egress allowlist;
//! 3. the tools ([`crate::assemble::assemble`]): guardrails, THE egress policy (built once, by
//!    [`crate::assemble::egress_policy`]) and the egress client on it, the proxy only when
//!    cli_execute, a script tool or the browser needs it, the browser only when a skill asks,
//!    `denied_tools` last; guardrail hits, tool calls and egress decisions go to the audit log;
//! 4. the model providers, over a second egress client on the SAME policy value (longer time
//!    limit and body cap for generations), and the agent loop.
//!
//! Callers then use [`Runner::tools`] (the [`ToolRunner`]: list, call in a session, close a
//! session), [`Runner::run_once`], [`Runner::serve_a2a`], and finally [`Runner::shutdown`], which
//! stops Chromium (removing its profile) and the proxy. Nothing here prints; the CLI renders.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use forge_egress::client::EgressClient;
use forge_egress::EgressPolicy;
use forge_skills::Agent;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::a2a::{self, CardInfo, ServerHandle, TaskStore};
use crate::agent_loop::tool_bridge::{
    AssembledLoopTools, AssembledSessions, AuditEgressObserver, AuditToolEvents,
};
use crate::agent_loop::{
    system_prompt, AgentLoop, LoopConfig, LoopError, LoopEvent, LoopTools, PromptSkill,
    SessionCloser, TaskOutcome,
};
use crate::assemble::{
    assemble, AssembleError, AssembleOptions, AssembledTools, DepOptions, ToolReason, ToolRunner,
};
use crate::audit::{AuditError, AuditLog};
use forge_llm::fallback::Fallback;
use forge_llm::transport::EgressTransport;
use forge_llm::{
    build_provider, resolve_fallback, resolve_model, ModelHttp, ModelSettings, Provider,
    ProviderError, ResolvedModel, RetryPolicy,
};

/// Reads an environment variable (tests pass their own).
pub type EnvFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Where the audit log goes.
#[derive(Clone, Default)]
pub enum AuditTarget {
    /// No audit log (`forge tool list|describe|call`).
    #[default]
    Off,
    /// Standard error.
    Stderr,
    /// Appended to this file (an existing log's hash chain is continued).
    File(PathBuf),
    /// A log the caller made (tests: [`AuditLog::to_writer`]).
    Log(AuditLog),
}

/// The command line's say on the model (`--provider`, `--model`); forge.yaml and the environment
/// fill in the rest.
#[derive(Clone, Debug, Default)]
pub struct ModelChoice {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
}

/// How to start an agent.
#[derive(Clone)]
pub struct RunnerOptions {
    /// `Some`: resolve and build the model (and add its hosts to the egress allowlist), for
    /// [`Runner::run_once`] and [`Runner::serve_a2a`]. `None`: tools only (`forge tool`,
    /// `forge mcp serve`): no model, no model host in the policy.
    pub model: Option<ModelChoice>,
    /// Extra egress allowlist entries (`--allow`).
    pub allow: Vec<String>,
    /// Where the audit log goes.
    pub audit: AuditTarget,
    /// Model turns per task (at least 1).
    pub max_iterations: usize,
    /// Where tools write artifacts; default `<agent dir>/.forge/files`.
    pub files_dir: Option<PathBuf>,
    /// Egress knobs (tests: a resolver, test roots). With an audit log on, the proxy and client
    /// observers are the audit log's (any set here are replaced).
    pub deps: DepOptions,
    /// The environment (API keys, `FORGE_MODEL_PROVIDER`, `FORGE_RUNTIME_TOKEN`, ...).
    pub env: EnvFn,
    /// The login profile (forge.yaml `browser.profiles`) that [`Runner::run_once`] tasks and
    /// MCP sessions start from and save back to (`forge run --once --profile`, `forge mcp serve
    /// --profile`); checked at start.
    pub profile: Option<String>,
}

impl Default for RunnerOptions {
    fn default() -> Self {
        Self {
            model: None,
            allow: Vec::new(),
            audit: AuditTarget::Off,
            max_iterations: 50,
            files_dir: None,
            deps: DepOptions::default(),
            env: Arc::new(|k| std::env::var(k).ok()),
            profile: None,
        }
    }
}

/// Why an agent could not be started. Each message names the thing, the rule and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The audit file could not be opened.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The model could not be resolved or its provider built (no provider, unknown provider,
    /// bad base URL, no API key).
    #[error(transparent)]
    Model(Box<ProviderError>),
    /// A forge.yaml `model.fallbacks` entry is wrong.
    #[error("{config}: model.fallbacks[{index}]: {source}")]
    Fallback {
        /// forge.yaml.
        config: PathBuf,
        /// The entry's index.
        index: usize,
        /// What is wrong.
        source: Box<ProviderError>,
    },
    /// The tools could not be assembled (bad cli_execute config, guardrail regex, egress policy,
    /// missing Chromium, proxy start).
    #[error(transparent)]
    Assemble(#[from] AssembleError),
    /// forge.yaml `browser.profiles` cannot be used as configured (an origin outside the egress
    /// policy, a malformed key, the store, an unknown `--profile`).
    #[error("{0}")]
    Profiles(String),
    /// Traces were asked for (`OTEL_EXPORTER_OTLP_ENDPOINT`) but cannot be exported as set.
    #[error(transparent)]
    Telemetry(#[from] crate::telemetry::TelemetryError),
}

/// Why a task could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The runner was started without a model.
    #[error("this agent was started for its tools only (no model); start it with RunnerOptions::model to run tasks")]
    NoModel,
    /// The task failed.
    #[error(transparent)]
    Task(#[from] LoopError),
    /// The task's scope or budgets were refused (an entry outside the agent's policy, a budget
    /// over the cap).
    #[error(transparent)]
    Spec(#[from] crate::task_scope::SpecError),
}

/// Where and how to serve A2A.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// The address to bind. Anything but loopback requires a bearer token.
    pub host: IpAddr,
    /// The port (0 picks a free one).
    pub port: u16,
    /// Also serve `/healthz` and `/readyz` on this port of `host` (0 picks a free one), apart
    /// from the main port so a flood there never fails the probes.
    pub probe_port: Option<u16>,
}

/// Where the A2A bearer token came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenOrigin {
    /// `FORGE_RUNTIME_TOKEN` (used as is, written nowhere).
    Env,
    /// `.forge/runtime.token` under the agent dir (generated when missing).
    File(PathBuf),
}

/// Why A2A could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The runner was started without a model.
    #[error("this agent was started for its tools only (no model); start it with RunnerOptions::model to serve A2A")]
    NoModel,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// `FORGE_RUNTIME_TOKEN` is set but unusable.
    #[error("FORGE_RUNTIME_TOKEN must be at least 16 printable ASCII characters without spaces")]
    BadEnvToken,
    /// The MCP server could not start (e.g. a non-loopback bind without a token).
    #[error(transparent)]
    Mcp(#[from] forge_mcp::McpError),
    /// The generated token could not be written.
    #[error("cannot write the bearer token to {}: {source}", path.display())]
    TokenFile {
        /// `.forge/runtime.token`.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The state store could not be opened (unreachable, corrupt, too new).
    #[error(transparent)]
    State(#[from] forge_state::StateError),
    /// The server could not start.
    #[error("{0}")]
    Server(std::io::Error),
}

/// A running A2A server.
pub struct A2aServer {
    /// `http://HOST:PORT/`.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
    /// The bearer token required on `POST /` (none on loopback).
    pub token: Option<String>,
    /// Where the token came from.
    pub token_origin: Option<TokenOrigin>,
    /// The probe listener's address (`/healthz`, `/readyz`), when one was asked for.
    pub probe_addr: Option<SocketAddr>,
    handle: ServerHandle,
    store: Arc<TaskStore>,
    state: Option<Arc<dyn forge_state::StateStore>>,
}

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrainOutcome {
    /// Tasks that were running when the drain began.
    pub running_at_start: usize,
    /// Tasks that were still running when the grace ran out (or the drain was cut short); they
    /// end `failed` with "interrupted by shutdown".
    pub interrupted: usize,
}

pub(crate) use crate::a2a::store::{INTERRUPTED_BY_RESTART, INTERRUPTED_BY_SHUTDOWN};

impl A2aServer {
    /// Stop accepting, cancel running tasks, wait for the server to end and for the state
    /// store to have every write.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
        self.store.flush().await;
        // Hand the lease back: the next forge on this store need not wait for it to expire.
        if let (Some(state), Some(me)) = (&self.state, self.store.replica_id()) {
            if let Err(e) = state.remove_replica(&me).await {
                tracing::warn!("state store: cannot release the lease of replica {me}: {e}");
            }
        }
    }

    /// The state store, when tasks are kept in one (always, for `forge run`).
    pub fn state_store(&self) -> Option<&Arc<dyn forge_state::StateStore>> {
        self.state.as_ref()
    }

    /// Drain before a shutdown (SIGTERM): from now on `/readyz` answers 503 and new messages get
    /// a retryable error (HTTP 503, `Retry-After`); running tasks get up to `grace` to finish,
    /// or until `cut_short` resolves (a second Ctrl-C); those still running then end `failed`
    /// with [`INTERRUPTED_BY_SHUTDOWN`]. The server keeps answering `tasks/get` meanwhile.
    pub async fn drain(
        &self,
        grace: Duration,
        cut_short: impl std::future::Future<Output = ()>,
    ) -> DrainOutcome {
        self.store.drain();
        let running_at_start = self.store.unfinished();
        let wait_idle = async {
            // Bounded: at most grace / 100 ms rounds (the outer timeout), each a cheap count.
            while self.store.unfinished() > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::select! {
            _ = tokio::time::timeout(grace, wait_idle) => {}
            _ = cut_short => {}
        }
        let interrupted = self.store.unfinished();
        if interrupted > 0 {
            self.store.interrupt_all(INTERRUPTED_BY_SHUTDOWN);
            let stopped = async {
                while self.store.unfinished() > 0 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            let _ = tokio::time::timeout(
                crate::agent_loop::CANCEL_GRACE + Duration::from_secs(2),
                stopped,
            )
            .await;
        }
        DrainOutcome {
            running_at_start,
            interrupted,
        }
    }
}

/// How MCP results are shaped (screenshot image cap) and progress reported.
pub use forge_mcp::ServeOptions as McpServeOptions;

/// Where and how to serve MCP over streamable HTTP (`forge mcp serve --transport http`).
#[derive(Clone, Debug)]
pub struct McpHttpOptions {
    /// The address to bind. Anything but loopback requires a bearer token (the A2A rule).
    pub host: IpAddr,
    /// The port (0 picks a free one).
    pub port: u16,
    /// Browser origins allowed to call (exact `scheme://host[:port]`); none by default.
    pub allowed_origins: Vec<String>,
    /// Result shaping (image cap) and progress.
    pub serve: forge_mcp::ServeOptions,
    /// Also serve `/healthz` and `/readyz` on this port of `host` (0 picks a free one).
    pub probe_port: Option<u16>,
}

/// A running MCP HTTP server.
pub struct McpHttpServer {
    /// `http://HOST:PORT/mcp`.
    pub url: String,
    /// The bound address.
    pub addr: SocketAddr,
    /// The bearer token required on every request (none on loopback).
    pub token: Option<String>,
    /// Where the token came from.
    pub token_origin: Option<TokenOrigin>,
    /// The probe listener's address (`/healthz`, `/readyz`), when one was asked for.
    pub probe_addr: Option<SocketAddr>,
    handle: forge_mcp::HttpServerHandle,
}

impl McpHttpServer {
    /// Stop accepting, end every MCP session (closing their browser contexts) and wait.
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
    }
}

/// What the runner keeps of the agent.
struct AgentInfo {
    id: String,
    version: String,
    dir: PathBuf,
    description: Option<String>,
    skills: Vec<(String, String, Vec<String>)>,
    state: forge_skills::StateConfig,
    a2a: forge_skills::A2aSettings,
    tasks: forge_skills::TasksConfig,
    workspaces: forge_skills::WorkspacesConfig,
}

/// The model side: the resolved model, its client and the loop.
struct ModelParts {
    model: ResolvedModel,
    client: Arc<EgressClient>,
    agent_loop: Arc<AgentLoop>,
}

/// A started agent. See the module docs.
pub struct Runner {
    agent: AgentInfo,
    tools: Arc<AssembledTools>,
    audit: Option<AuditLog>,
    model: Option<ModelParts>,
    env: EnvFn,
    /// The agent's login profiles (forge.yaml `browser.profiles` of a browser agent).
    profiles: Option<Arc<crate::profiles::Profiles>>,
    /// The profile of `run_once` tasks and MCP sessions ([`RunnerOptions::profile`]).
    profile: Option<String>,
}

impl Runner {
    /// Start `agent`: audit log, model (when asked), tools, egress, proxy, providers, loop.
    /// On error nothing is left running.
    pub async fn start(agent: &Agent, options: RunnerOptions) -> Result<Runner, StartError> {
        let env = options.env.clone();
        let env_fn = |k: &str| env(k);
        // 1. The audit log.
        let audit = match &options.audit {
            AuditTarget::Off => None,
            AuditTarget::Stderr => Some(AuditLog::stderr()),
            AuditTarget::File(p) => Some(AuditLog::open_file(p)?),
            AuditTarget::Log(l) => Some(l.clone()),
        };
        // Traces, for agents that run tasks (off unless OTEL_EXPORTER_OTLP_ENDPOINT is set).
        if options.model.is_some() {
            crate::telemetry::init(&env_fn, &agent.config.agent_id)?;
        }
        // 2. The model, resolved before the tools so its hosts join the one egress policy.
        let models = match &options.model {
            Some(choice) => Some(resolve_models(agent, choice, &env_fn)?),
            None => None,
        };
        // 3. The tools, the egress policy and client, the proxy and the browser.
        let mut opts = AssembleOptions {
            files_dir: options.files_dir.clone(),
            cli_egress_entries: options.allow.clone(),
            deps: options.deps.clone(),
            env: Some(options.env.clone()),
            ..Default::default()
        };
        if let Some((primary, fallbacks, task_model)) = &models {
            for m in std::iter::once(primary)
                .chain(fallbacks.iter())
                .chain(task_model.iter())
            {
                if let Some(entry) = m.egress_entry() {
                    opts.forge_egress_entries
                        .push((format!("model provider {}", m.provider), entry));
                }
            }
        }
        if let Some(a) = &audit {
            opts.events = Some(Arc::new(AuditToolEvents(a.clone())));
            opts.deps.proxy.observer = Some(Arc::new(AuditEgressObserver::proxy(a.clone())));
            opts.deps.client.observer = Some(Arc::new(AuditEgressObserver::client(a.clone())));
            opts.deps.browser_crash = Some(Arc::new(a.clone()));
            opts.secret_uses = Some(Arc::new(a.clone()));
        }
        let tools = Arc::new(assemble(agent, opts.clone()).await?);
        if let Some(a) = &audit {
            for s in tools.secrets().iter() {
                a.add_named_secret(&s.name, s.value.expose());
            }
        }
        // Login profiles: origins inside the policy, the key, the store (opened now, so a
        // store that cannot be reached stops startup rather than the first task).
        let profiles = match open_profiles(agent, &tools, &env_fn).await {
            Ok(p) => p,
            Err(e) => {
                tools.shutdown().await;
                return Err(e);
            }
        };
        if let Some(name) = &options.profile {
            let checked = match &profiles {
                Some(p) => p.check(name).map_err(|e| e.to_string()),
                None if tools.browser().is_none() => Err(format!(
                    "--profile {name}: login profiles need the browser, and this agent has none (no active skill requires the browser capability)"
                )),
                None => Err(format!(
                    "--profile {name}: forge.yaml has no browser.profiles; add `browser: {{profiles: {{{name}: {{origins: [\"https://...\"]}}}}}}`"
                )),
            };
            if let Err(e) = checked {
                tools.shutdown().await;
                return Err(StartError::Profiles(e));
            }
        }
        let info = agent_info(agent);
        // 4. Providers and the loop.
        let model = match models {
            None => None,
            Some((primary, fallbacks, task_model)) => {
                match build_model(
                    agent,
                    &info,
                    &tools,
                    &opts,
                    audit.clone(),
                    options.max_iterations,
                    (primary, fallbacks, task_model),
                    &env_fn,
                    profiles.clone(),
                ) {
                    Ok(m) => Some(m),
                    Err(e) => {
                        tools.shutdown().await;
                        return Err(e);
                    }
                }
            }
        };
        Ok(Runner {
            agent: info,
            tools,
            audit,
            model,
            env: options.env,
            profiles,
            profile: options.profile,
        })
    }

    /// The agent's login profiles (`None` without forge.yaml `browser.profiles` or a browser).
    pub fn profiles(&self) -> Option<&Arc<crate::profiles::Profiles>> {
        self.profiles.as_ref()
    }

    /// The agent's `agent_id`.
    pub fn agent_id(&self) -> &str {
        &self.agent.id
    }

    /// How long a drain waits for running tasks: `FORGE_DRAIN_SECONDS`, else the task time cap
    /// (forge.yaml `tasks.max_seconds_cap`, default [`forge_skills::DEFAULT_MAX_SECONDS_CAP`]), so a
    /// Kubernetes rollout (whose grace period forge build sets to the cap plus 30 s) loses
    /// nothing.
    pub fn drain_grace(&self) -> Duration {
        let secs = (self.env)("FORGE_DRAIN_SECONDS")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(self.agent.tasks.max_seconds_cap);
        Duration::from_secs(secs)
    }

    /// The form skills outside A2A (`forge forms learn | run`): the browser, the agent's policy,
    /// and the state store with a lease of this process (give it back with
    /// [`crate::FormEnv::release`]; a SQLite store that a running `forge run` holds is refused,
    /// naming it).
    pub async fn form_env(&self) -> Result<crate::forms::FormEnv, ServeError> {
        let sessions: Option<Arc<dyn SessionCloser>> = match self.agent_loop() {
            Some(l) => l.sessions.clone(),
            None if self.tools.browser().is_some() => {
                let audit = self
                    .audit
                    .clone()
                    .unwrap_or_else(|| AuditLog::to_writer(Box::new(std::io::sink())));
                Some(Arc::new(AssembledSessions::new(self.tools.clone(), audit)))
            }
            None => None,
        };
        let me = a2a::store::this_replica(format!("forge-forms (pid {})", std::process::id()));
        let state = self.open_state(&me).await?;
        Ok(crate::forms::FormEnv {
            sessions,
            files_dir: self.tools.files_dir().to_path_buf(),
            policy: Some(self.tools.egress().client_ref().policy().clone()),
            tasks: self.agent.tasks,
            store: Some(state),
            replica: me.id,
        })
    }

    /// forge.yaml `tasks:`: the per-task budgets' defaults and caps.
    pub fn task_limits(&self) -> &forge_skills::TasksConfig {
        &self.agent.tasks
    }

    /// The agent's description (its root SKILL.md's), when it has one.
    pub fn description(&self) -> Option<&str> {
        self.agent.description.as_deref()
    }

    /// The tool call path: list tools, call one in a session, close a session. Cheap to clone.
    pub fn tools(&self) -> ToolRunner {
        self.tools.runner()
    }

    /// Every tool considered, present or absent, and why (`forge tool list`).
    pub fn tool_reasons(&self) -> &[ToolReason] {
        self.tools.reasons()
    }

    /// The assembled tools (registry, guardrails, browser, proxy).
    pub fn assembled(&self) -> &AssembledTools {
        &self.tools
    }

    /// THE egress policy: the proxy, the tools' client and the model client all consult it.
    pub fn egress_policy(&self) -> &Arc<EgressPolicy> {
        self.tools.egress().policy()
    }

    /// The egress client of `http_request`/`web_fetch` (on [`Runner::egress_policy`]).
    pub fn egress_client(&self) -> Arc<EgressClient> {
        self.tools.egress().client_ref().clone()
    }

    /// The model providers' egress client (on the same policy value), when a model was started.
    pub fn model_client(&self) -> Option<&Arc<EgressClient>> {
        self.model.as_ref().map(|m| &m.client)
    }

    /// The proxy's address, while one runs (only when cli_execute, a script tool or the browser
    /// needs it).
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.tools.proxy_addr()
    }

    /// The resolved model, when one was started.
    pub fn model(&self) -> Option<&ResolvedModel> {
        self.model.as_ref().map(|m| &m.model)
    }

    /// The agent loop, when a model was started.
    pub fn agent_loop(&self) -> Option<&Arc<AgentLoop>> {
        self.model.as_ref().map(|m| &m.agent_loop)
    }

    /// The audit log, unless it is off.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// Run one task (`forge run --once`): `prompt`, progress to `events`, stopped by `cancel`.
    pub async fn run_once(
        &self,
        prompt: &str,
        cancel: CancellationToken,
        events: Option<UnboundedSender<LoopEvent>>,
    ) -> Result<TaskOutcome, RunError> {
        let m = self.model.as_ref().ok_or(RunError::NoModel)?;
        let task_id = forge_state::new_id();
        if self.profile.is_some() {
            let spec = m.agent_loop.default_spec();
            let browser =
                crate::agent_loop::BrowserUse::own(&task_id).with_profile(self.profile.clone());
            return Ok(m
                .agent_loop
                .run_task_with(&task_id, &browser, prompt, vec![], cancel, events, &spec)
                .await
                .outcome?);
        }
        Ok(m.agent_loop
            .run_task(&task_id, prompt, vec![], cancel, events)
            .await?)
    }

    /// Run one task in a caller's scope and budgets (`forge run --once --task-host ...
    /// --max-steps N --max-seconds S`): the spec is checked first (an entry the agent's policy
    /// does not allow, or a budget over forge.yaml's cap, is [`RunError::Spec`]); the task's
    /// result object comes back whatever the outcome.
    pub async fn run_once_with(
        &self,
        prompt: &str,
        spec: &crate::task_scope::TaskSpec,
        cancel: CancellationToken,
        events: Option<UnboundedSender<LoopEvent>>,
    ) -> Result<crate::agent_loop::TaskRun, RunError> {
        let m = self.model.as_ref().ok_or(RunError::NoModel)?;
        let resolved = m
            .agent_loop
            .resolve_spec(spec, crate::task_scope::SpecFields::CLI)?;
        let task_id = forge_state::new_id();
        Ok(m.agent_loop
            .run_task_with(
                &task_id,
                &crate::agent_loop::BrowserUse::own(&task_id).with_profile(self.profile.clone()),
                prompt,
                vec![],
                cancel,
                events,
                &resolved,
            )
            .await)
    }

    /// Serve the agent over A2A. On anything but loopback a bearer token is required: the one in
    /// `FORGE_RUNTIME_TOKEN`, else `.forge/runtime.token` (generated when missing); it is kept
    /// out of the audit log.
    pub async fn serve_a2a(&self, opts: ServeOptions) -> Result<A2aServer, ServeError> {
        let m = self.model.as_ref().ok_or(ServeError::NoModel)?;
        let addr = SocketAddr::new(opts.host, opts.port);
        let listener =
            forge_egress::accept::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
        let local = listener.local_addr().map_err(ServeError::Server)?;
        let probe = bind_probe(opts.host, opts.probe_port)?;
        let (token, token_origin) = self.bearer_token(opts.host)?;
        let info = CardInfo {
            name: self.agent.id.clone(),
            description: self.agent.description.clone().unwrap_or_else(|| {
                format!(
                    "forge agent {} ({} skills)",
                    self.agent.id,
                    self.agent.skills.len()
                )
            }),
            version: self.agent.version.clone(),
            skills: self.agent.skills.clone(),
        };
        // Any agent with the browser also offers the form skills (no model per row).
        let mut info = info;
        if m.agent_loop
            .sessions
            .as_ref()
            .and_then(|s| s.form_tool(forge_browser::forms::LEARN_TOOL))
            .is_some()
        {
            info.skills.extend(crate::forms::card_skills());
        }
        let url = format!("http://{local}/");
        let card = a2a::agent_card(&info, &url, token.is_some());
        // Other replicas find this one at FORGE_REPLICA_URL (a pod's own IP in Kubernetes),
        // else at the address it is bound to.
        let address = (self.env)("FORGE_REPLICA_URL")
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| url.clone());
        let me = a2a::store::this_replica(address.clone());
        let state = self.open_state(&me).await?;
        let store = TaskStore::with_state(
            m.agent_loop.clone(),
            state.clone(),
            me.id.clone(),
            self.agent.state.max_artifact_bytes,
        );
        // Artifact URIs: FORGE_PUBLIC_URL (what clients outside reach, e.g. an ingress) wins,
        // else the Host the client used, else the bound address.
        store.set_artifact_options(a2a::store::ArtifactOptions {
            public_url: (self.env)("FORGE_PUBLIC_URL")
                .map(|u| u.trim().to_string())
                .filter(|u| u.starts_with("http://") || u.starts_with("https://")),
            bound_url: url.clone(),
            inline_bytes: self.agent.a2a.inline_artifact_bytes,
        });
        // A conversation's browser session that ends (closed, idle, shutdown) is audited and
        // no longer recorded in the store as held by this replica.
        if let Some(b) = self.tools.browser() {
            let weak = Arc::downgrade(&store);
            let clear: forge_browser::SessionClosedHook = Arc::new(move |key: &str, _| {
                if let Some(s) = weak.upgrade() {
                    s.browser_closed(key);
                }
            });
            for manager in b.managers() {
                manager.set_on_session_closed(crate::agent_loop::tool_bridge::audit_session_close(
                    m.agent_loop.audit.clone(),
                    Some(clear.clone()),
                ));
            }
        }
        let handle =
            a2a::serve(listener, store.clone(), card, token.clone()).map_err(ServeError::Server)?;
        let probe_addr = match probe {
            Some(l) => {
                let at = l.local_addr().map_err(ServeError::Server)?;
                a2a::serve_probe(l, store.clone(), handle.shutdown_token());
                Some(at)
            }
            None => None,
        };
        store.keep_alive(address, handle.shutdown_token());
        self.sweep_workspaces(handle.shutdown_token());
        Ok(A2aServer {
            url,
            addr: local,
            token,
            token_origin,
            probe_addr,
            handle,
            store,
            state: Some(state),
        })
    }

    /// Remove the workspaces idle for longer than `workspaces.retention` (see crate::workspace):
    /// now, then every `retention / 4` (at least a minute, at most an hour) until `stop`. Used
    /// by `forge run` (A2A) and `forge mcp serve` (HTTP and stdio) alike.
    fn sweep_workspaces(&self, stop: tokio_util::sync::CancellationToken) {
        let root = self.tools.files_dir().to_path_buf();
        let retention = self.agent.workspaces.retention;
        let period = (retention / 4).clamp(Duration::from_secs(60), Duration::from_secs(3600));
        tokio::spawn(async move {
            loop {
                let r = root.clone();
                let _ = tokio::task::spawn_blocking(move || crate::workspace::sweep(&r, retention))
                    .await;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(period) => {}
                }
            }
        });
    }

    /// Open the state store (`FORGE_STATE_URL`, else forge.yaml `state.url`, else
    /// `.forge/state.db`), take this replica's lease `me`, mark `failed` ("interrupted by
    /// restart") the unfinished tasks whose owner's lease has expired, and apply the retention.
    ///
    /// A lease has expired when its owner has not renewed it for [`a2a::store::REPLICA_GONE`],
    /// or at once when the owner ran on this host and its process is gone (a restart). A SQLite
    /// store has one owner: while another process holds a live lease, this one refuses to start
    /// ([`forge_state::StateError::LeaseHeld`] names the owner and the fix) and touches nothing.
    /// A PostgreSQL store is shared by any number of replicas.
    async fn open_state(
        &self,
        me: &forge_state::ReplicaRecord,
    ) -> Result<Arc<dyn forge_state::StateStore>, ServeError> {
        use forge_state::{Retention, SqlStore, StateStore, StoreLocation};
        let url = (self.env)("FORGE_STATE_URL")
            .filter(|u| !u.trim().is_empty())
            .or_else(|| self.agent.state.url.clone());
        let location = StoreLocation::from_config(url.as_deref(), &self.agent.dir)?;
        let store = SqlStore::open(&location)
            .await?
            .with_max_artifact_bytes(self.agent.state.max_artifact_bytes);
        let expiry = a2a::store::REPLICA_GONE.as_millis() as i64;
        let alive_since = forge_state::now_ms() - expiry;
        // Leases of processes known to be gone (this host, no such process) end now.
        for r in store.replicas().await? {
            if r.heartbeat_ms >= alive_since && a2a::store::lease_process_gone(&r, me) {
                store.remove_replica(&r.id).await?;
            }
        }
        let sole = (store.kind() == "sqlite").then_some(alive_since);
        store.acquire_lease(me, sole, expiry).await?;
        let failed = store
            .fail_unowned(alive_since, &|t: &forge_state::TaskRecord| {
                a2a::wire::failed_task(t, INTERRUPTED_BY_RESTART)
            })
            .await?;
        if !failed.is_empty() {
            tracing::info!(
                tasks = failed.len(),
                "tasks whose replica's lease expired marked failed (interrupted by restart)"
            );
        }
        store
            .prune(Retention {
                keep_tasks: self.agent.state.keep_tasks,
                keep_days: self.agent.state.keep_days,
            })
            .await?;
        Ok(Arc::new(store))
    }

    /// The bearer token a server bound on `host` requires: none on loopback; otherwise the one
    /// in `FORGE_RUNTIME_TOKEN`, else `.forge/runtime.token` (generated when missing). The token
    /// is kept out of the audit log. One rule for A2A and MCP.
    fn bearer_token(
        &self,
        host: IpAddr,
    ) -> Result<(Option<String>, Option<TokenOrigin>), ServeError> {
        let token_path = self.agent.dir.join(".forge").join("runtime.token");
        let from_env = (self.env)("FORGE_RUNTIME_TOKEN")
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        let (token, token_origin) = if host.is_loopback() {
            (None, None)
        } else if let Some(t) = from_env {
            if t.len() < 16 || !t.chars().all(|c| c.is_ascii_graphic()) {
                return Err(ServeError::BadEnvToken);
            }
            (Some(t), Some(TokenOrigin::Env))
        } else {
            let (t, _) =
                a2a::load_or_create_token(&token_path).map_err(|source| ServeError::TokenFile {
                    path: token_path.clone(),
                    source,
                })?;
            (Some(t), Some(TokenOrigin::File(token_path)))
        };
        if let (Some(t), Some(a)) = (&token, &self.audit) {
            a.add_secret(t);
        }
        Ok((token, token_origin))
    }

    /// The agent's tools as an MCP [`forge_mcp::ToolHost`]: the [`ToolRunner`] path, one forge
    /// session per MCP session, instructions naming the hosts the policy allows.
    pub fn mcp_host(&self) -> Arc<dyn forge_mcp::ToolHost> {
        crate::mcp_host::host(
            &self.agent.id,
            self.tools(),
            self.egress_policy(),
            self.mcp_profile(),
            None,
            None,
        )
    }

    /// The login profile each MCP session's browser starts from (`forge mcp serve --profile`).
    fn mcp_profile(&self) -> Option<(Arc<AssembledSessions>, String)> {
        match (&self.profiles, &self.profile) {
            (Some(p), Some(name)) => Some((
                Arc::new(AssembledSessions::for_profiles(
                    self.tools.clone(),
                    self.audit
                        .clone()
                        .unwrap_or_else(|| AuditLog::to_writer(Box::new(std::io::sink()))),
                    p.clone(),
                )),
                name.clone(),
            )),
            _ => None,
        }
    }

    /// [`Runner::mcp_host`] with the form skills (`learn_form_schema`, `execute_form_batch`)
    /// when the agent has the browser and the state store can be opened (its lease taken; a
    /// SQLite store another forge holds leaves them out, with a warning).
    async fn mcp_host_with_forms(
        &self,
        handoffs: Option<Arc<crate::mcp_host::McpHandoffs>>,
    ) -> (Arc<dyn forge_mcp::ToolHost>, Option<crate::forms::FormEnv>) {
        let forms = if self.tools.browser().is_some() {
            match self.form_env().await {
                Ok(f) => Some(f),
                Err(e) => {
                    tracing::warn!("MCP: the form tools are left out: {e}");
                    None
                }
            }
        } else {
            None
        };
        let host = crate::mcp_host::host(
            &self.agent.id,
            self.tools(),
            self.egress_policy(),
            self.mcp_profile(),
            forms.clone(),
            handoffs,
        );
        (host, forms)
    }

    /// Serve the agent's tools over MCP on this process's stdin/stdout until the client
    /// disconnects (nothing else may write to stdout).
    pub async fn serve_mcp_stdio(
        &self,
        opts: forge_mcp::ServeOptions,
    ) -> Result<(), forge_mcp::McpError> {
        // Idle workspaces go as with `forge run`: now, then periodically, until the client leaves.
        let stop = tokio_util::sync::CancellationToken::new();
        self.sweep_workspaces(stop.clone());
        let (host, forms) = self.mcp_host_with_forms(None).await;
        let served = forge_mcp::serve_stdio(host, opts).await;
        stop.cancel();
        if let Some(f) = forms {
            f.release().await;
        }
        served
    }

    /// Serve the agent's tools over MCP (streamable HTTP at `/mcp`). On anything but loopback a
    /// bearer token is required, exactly as for [`Runner::serve_a2a`]; `Origin` and `Host` are
    /// checked against DNS rebinding (see [`forge_mcp::serve_http`]).
    pub async fn serve_mcp_http(&self, opts: McpHttpOptions) -> Result<McpHttpServer, ServeError> {
        let addr = SocketAddr::new(opts.host, opts.port);
        let (token, token_origin) = self.bearer_token(opts.host)?;
        let listener =
            forge_egress::accept::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
        let probe = bind_probe(opts.host, opts.probe_port)?;
        // The watch page (`/ui`) beside `/mcp`, when there is an audit log to show.
        let watch = self
            .audit
            .as_ref()
            .map(|a| crate::ui::mcp_routes(a.clone(), token.clone()));
        // With the browser: the hand-off page's routes (`/handoff/...`, the A2A server's piece)
        // and the hand-offs' observer sending each link to the client of the call that asked.
        let browser = self.tools.browser().map(|b| b.manager().clone());
        let handoffs = browser
            .as_ref()
            .map(|_| Arc::new(crate::mcp_host::McpHandoffs::default()));
        let bound = listener.local_addr().map_err(ServeError::Server)?;
        if let (Some(m), Some(h)) = (&browser, &handoffs) {
            let base = (self.env)("FORGE_PUBLIC_URL")
                .map(|u| u.trim().to_string())
                .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
                .map(|u| if u.ends_with('/') { u } else { format!("{u}/") })
                .unwrap_or_else(|| format!("http://{bound}/"));
            m.handoffs()
                .set_observer(h.observer(base, self.audit.clone()));
        }
        let extra = crate::handoff_http::mcp_routes(browser, token.clone(), watch);
        let handle = forge_mcp::serve_http_with(
            listener,
            self.mcp_host_with_forms(handoffs).await.0,
            opts.serve,
            forge_mcp::HttpOptions {
                token: token.clone(),
                allowed_origins: opts.allowed_origins,
            },
            extra,
        )?;
        let addr = handle.addr;
        let probe_addr = match probe {
            Some(l) => {
                let at = l.local_addr().map_err(ServeError::Server)?;
                tokio::spawn(forge_egress::probe::serve(
                    l,
                    forge_egress::probe::always_ready(),
                    handle.shutdown_token(),
                ));
                Some(at)
            }
            None => None,
        };
        // Idle workspaces go as with `forge run`: now, then periodically, until the server stops.
        self.sweep_workspaces(handle.shutdown_token());
        Ok(McpHttpServer {
            url: format!("http://{addr}{}", forge_mcp::server::MCP_PATH),
            addr,
            token,
            token_origin,
            probe_addr,
            handle,
        })
    }

    /// Stop the agent: Chromium (its profile removed) and the proxy. Tasks still finishing get
    /// up to 5 s to release the tools; after that the tools stop anyway, and calls made through
    /// a [`ToolRunner`] kept from [`Runner::tools`] are refused.
    pub async fn shutdown(self) {
        let Runner { tools, model, .. } = self;
        drop(model);
        for _ in 0..50 {
            if Arc::strong_count(&tools) == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tools.shutdown().await;
        // The spans of the tasks that ran leave before the process does.
        crate::telemetry::shutdown().await;
    }
}

fn agent_info(agent: &Agent) -> AgentInfo {
    AgentInfo {
        id: agent.config.agent_id.clone(),
        version: agent.config.version.clone(),
        dir: agent.dir.clone(),
        description: agent_description(agent),
        state: agent.config.state.clone(),
        a2a: agent.config.a2a.clone(),
        tasks: agent.config.tasks,
        workspaces: agent.config.workspaces,
        skills: agent
            .skills
            .iter()
            .map(|s| (s.name.clone(), s.description.clone(), s.tags.clone()))
            .collect(),
    }
}

/// The agent's description: the description of its root skill file (forge.yaml `skills.path`,
/// default `SKILL.md` next to forge.yaml), as in initializ/forge, when there is one.
fn agent_description(agent: &Agent) -> Option<String> {
    let rel = agent
        .config
        .skills
        .path
        .clone()
        .unwrap_or_else(|| PathBuf::from("SKILL.md"));
    let root = agent.dir.join(rel).canonicalize().ok()?;
    agent
        .skills
        .iter()
        .find(|s| s.path.canonicalize().ok().as_ref() == Some(&root))
        .map(|s| s.description.trim().to_string())
        .filter(|d| !d.is_empty())
}

/// The primary model (forge.yaml, environment, command line) and the fallbacks.
fn resolve_models(
    agent: &Agent,
    choice: &ModelChoice,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Models, StartError> {
    let settings = agent
        .config
        .model
        .as_ref()
        .map(|m| ModelSettings {
            provider: Some(m.provider.clone()),
            name: Some(m.name.clone()),
            base_url: m.base_url.clone(),
        })
        .unwrap_or_default();
    let primary = resolve_model(
        &settings,
        choice.provider.as_deref(),
        choice.model.as_deref(),
        env,
    )
    .map_err(|e| StartError::Model(Box::new(e)))?;
    let mut fallbacks = Vec::new();
    for (index, f) in agent
        .config
        .model
        .iter()
        .flat_map(|m| m.fallbacks.iter())
        .enumerate()
    {
        let entry = ModelSettings {
            provider: Some(f.provider.clone()),
            name: Some(f.name.clone()),
            base_url: f.base_url.clone(),
        };
        let m = resolve_fallback(&entry, env).map_err(|source| StartError::Fallback {
            config: agent.config.path.clone(),
            index,
            source: Box::new(source),
        })?;
        fallbacks.push(m);
    }
    // forge.yaml browser.task_model: browser_task's sub-agent (the same provider keeps the
    // primary's endpoint; another one gets its own default, or errors like a fallback would).
    let task_model = match &agent.config.browser.task_model {
        Some(tm) => {
            let entry = ModelSettings {
                provider: Some(tm.provider.clone()),
                name: Some(tm.name.clone()),
                base_url: (tm.provider == primary.provider)
                    .then(|| primary.base_url.clone())
                    .flatten(),
            };
            Some(resolve_fallback(&entry, env).map_err(|e| StartError::Model(Box::new(e)))?)
        }
        None => None,
    };
    Ok((primary, fallbacks, task_model))
}

/// The primary model, its fallbacks, and `browser.task_model` when set.
type Models = (ResolvedModel, Vec<ResolvedModel>, Option<ResolvedModel>);

/// The providers (over a model client on the tools' policy value) and the agent loop.
#[allow(clippy::too_many_arguments)]
fn build_model(
    agent: &Agent,
    info: &AgentInfo,
    tools: &Arc<AssembledTools>,
    opts: &AssembleOptions,
    audit: Option<AuditLog>,
    max_iterations: usize,
    (primary, fallbacks, task_model): Models,
    env: &dyn Fn(&str) -> Option<String>,
    profiles: Option<Arc<crate::profiles::Profiles>>,
) -> Result<ModelParts, StartError> {
    // Model calls get their own client on the same policy value, with the same resolver and
    // roots: a longer time limit than tool requests (generations can be slow) and a larger body
    // cap; decisions are audited alike.
    let retry = RetryPolicy::from_env(env);
    let mut client_opts = opts.deps.client.clone();
    client_opts.timeout = retry.request_timeout + Duration::from_secs(5);
    client_opts.max_body_bytes = 32 * 1024 * 1024;
    let client = Arc::new(EgressClient::new(
        tools.egress().policy().clone(),
        client_opts,
    ));
    let transport: Arc<dyn ModelHttp> = Arc::new(EgressTransport::new(client.clone()));
    let first = build_provider(&primary, &agent.dir, transport.clone(), retry.clone(), env)
        .map_err(|e| StartError::Model(Box::new(e)))?;
    let mut backups = Vec::new();
    for (index, m) in fallbacks.iter().enumerate() {
        let p = build_provider(m, &agent.dir, transport.clone(), retry.clone(), env).map_err(
            |source| StartError::Fallback {
                config: agent.config.path.clone(),
                index,
                source: Box::new(source),
            },
        )?;
        backups.push(p);
    }
    let provider: Arc<dyn Provider> = if backups.is_empty() {
        first
    } else {
        Arc::new(Fallback::new(first, backups))
    };
    let assembled_tools: Arc<dyn LoopTools> = Arc::new(AssembledLoopTools::new(tools));
    // Without an audit log the loop still needs a writer: it goes nowhere.
    let audit = audit.unwrap_or_else(|| AuditLog::to_writer(Box::new(std::io::sink())));
    let sessions: Option<Arc<dyn SessionCloser>> = if tools.browser().is_some() {
        Some(Arc::new(
            AssembledSessions::new(tools.clone(), audit.clone()).with_profiles(profiles),
        ))
    } else {
        None
    };
    let config = LoopConfig {
        max_iterations: max_iterations.max(1),
        tool_timeout: tools.timeout(),
        tasks: info.tasks,
        ..Default::default()
    };
    // browser_task (browser agents, unless denied): a sub-agent on the browser tools only, in
    // its own session and scope, returning its result object.
    let loop_tools: Arc<dyn LoopTools> = if tools.browser().is_some()
        && forge_skills::denied_by(agent, crate::agent_loop::browser_task::NAME).is_empty()
    {
        // With two engines, browser_task takes a `skill` too: its sub-agent's calls go to that
        // skill's engine unless they name another.
        let mixed_skills = tools
            .browser()
            .map(|b| b.routes())
            .filter(|r| r.engines().len() > 1)
            .map(|r| r.skills.iter().map(|(s, _)| s.clone()).collect())
            .unwrap_or_default();
        let task_skills = Arc::new(crate::agent_loop::browser_task::SubTaskSkills::new(
            mixed_skills,
        ));
        let sub_provider = match &task_model {
            Some(m) => build_provider(m, &agent.dir, transport.clone(), retry.clone(), env)
                .map_err(|e| StartError::Model(Box::new(e)))?,
            None => provider.clone(),
        };
        let sub = Arc::new(AgentLoop {
            provider: sub_provider,
            tools: Arc::new(crate::agent_loop::browser_task::BrowserOnly(
                assembled_tools.clone(),
                task_skills.clone(),
            )),
            system_prompt: format!(
                "{}{}",
                crate::agent_loop::browser_task::SUB_AGENT_PROMPT,
                secrets_prompt(tools.secrets())
            ),
            audit: audit.clone(),
            config: config.clone(),
            files_dir: tools.files_dir().to_path_buf(),
            egress: Some(tools.egress().client_ref().clone()),
            sessions: sessions.clone(),
        });
        Arc::new(crate::agent_loop::browser_task::WithBrowserTask::new(
            assembled_tools,
            sub,
            task_skills,
        ))
    } else {
        assembled_tools
    };
    let specs = loop_tools.specs();
    let skills: Vec<PromptSkill> = agent
        .skills
        .iter()
        .map(|s| PromptSkill {
            name: s.name.clone(),
            description: s.description.clone(),
            body: s.body.clone(),
        })
        .collect();
    let mut prompt = system_prompt(&info.id, info.description.as_deref(), &skills, &specs);
    prompt.push_str(&secrets_prompt(tools.secrets()));
    let agent_loop = Arc::new(AgentLoop {
        provider,
        tools: loop_tools,
        system_prompt: prompt,
        audit,
        config,
        files_dir: tools.files_dir().to_path_buf(),
        egress: Some(tools.egress().client_ref().clone()),
        sessions,
    });
    Ok(ModelParts {
        model: primary,
        client,
        agent_loop,
    })
}

/// Bind the probe listener on `host:port` when a probe port was asked for.
fn bind_probe(
    host: IpAddr,
    port: Option<u16>,
) -> Result<Option<tokio::net::TcpListener>, ServeError> {
    let Some(port) = port else { return Ok(None) };
    let addr = SocketAddr::new(host, port);
    forge_egress::accept::bind(addr)
        .map(Some)
        .map_err(|source| ServeError::Bind { addr, source })
}

/// The system prompt's secrets section: each name and where it may be used, never a value.
/// Empty when the agent has none.
fn secrets_prompt(secrets: &forge_tools::Secrets) -> String {
    if secrets.is_empty() {
        return String::new();
    }
    format!(
        "\n## Secrets\nThese credentials are held by forge; you never see their values and must \
         not ask for them. Use one by name: `browser_fill {{\"ref\": ..., \"secret\": \"NAME\"}}` types \
         it into a field whose page origin it is bound to; in `http_request` a header value may \
         contain `{{{{secret:NAME}}}}`, inserted only for its hosts. Where a value would appear in a \
         result, you see `(secret NAME)`.\n{}",
        secrets.prompt_lines()
    )
}

/// forge.yaml `browser.profiles` of a browser agent, ready to use: every origin inside the egress
/// policy, the key read (`FORGE_PROFILE_KEY` / `FORGE_PROFILE_KEY_FILE`; none is allowed, tasks
/// naming a profile are then refused), the state store open. `None` without profiles or browser.
async fn open_profiles(
    agent: &Agent,
    tools: &Arc<AssembledTools>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Arc<crate::profiles::Profiles>>, StartError> {
    let specs = &agent.config.browser.profiles;
    if specs.is_empty() || tools.browser().is_none() {
        return Ok(None);
    }
    let policy = tools.egress().policy();
    let entries: Vec<String> = policy.entries().iter().map(|e| e.text.clone()).collect();
    let mode = match policy.mode() {
        forge_egress::EgressMode::DevOpen => forge_skills::EgressMode::DevOpen,
        forge_egress::EgressMode::Allowlist => forge_skills::EgressMode::Allowlist,
        _ => forge_skills::EgressMode::DenyAll,
    };
    for p in specs {
        if let Some(outside) = p.outside_allowlist(mode, &entries).first() {
            return Err(StartError::Profiles(format!(
                "{}: browser.profiles.{}: profile `{}` keeps the login of {outside}, which the egress policy does not allow; add {outside} to `egress.allowed_domains` (with its port when not 80/443), or remove it from the profile's origins",
                agent.config.path.display(),
                p.name,
                p.name
            )));
        }
    }
    let key = crate::profiles::ProfileKey::from_env(env).map_err(StartError::Profiles)?;
    let url = env("FORGE_STATE_URL")
        .filter(|u| !u.trim().is_empty())
        .or_else(|| agent.config.state.url.clone());
    let location = forge_state::StoreLocation::from_config(url.as_deref(), &agent.dir)
        .map_err(|e| StartError::Profiles(format!("login profiles: {e}")))?;
    let store = forge_state::SqlStore::open(&location)
        .await
        .map_err(|e| StartError::Profiles(format!("login profiles: {e}")))?;
    Ok(Some(Arc::new(crate::profiles::Profiles::new(
        specs.clone(),
        key,
        Arc::new(store),
    ))))
}
