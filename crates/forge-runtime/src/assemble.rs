//! Which tools an agent gets is decided once, by forge-skills' tool plan ([`Agent::tool_plan`]:
//! builtins, `cli_execute`, skill scripts, browser tools, `denied_tools`, each with its reason);
//! this module builds exactly what the plan names: the tool [`Registry`], compiled
//! [`Guardrails`], the egress policy and client, the egress proxy (only when something needs it)
//! and the browser manager (only when the plan needs the browser). `forge run` and `forge tool`
//! both use [`assemble`], so what `forge tool list` shows is exactly what `forge run` registers,
//! and `forge build` writes the same plan into agent.json.
//!
//! Steps, in order:
//! 1. guardrails compiled (an invalid regex stops startup, naming skill, file and line);
//! 2. the egress policy built once from forge.yaml `egress` + skill `egress_domains` (+ the
//!    caller's extra entries, e.g. the model host), and the egress client on it;
//! 3. the plan's builtins;
//! 4. the plan's `cli_execute` (its forge.yaml configuration is checked here);
//! 5. the plan's skill scripts, each with an interpreter found on PATH (else absent, saying so);
//! 6. the egress proxy, started only when a present cli_execute, script tool or browser tool needs it;
//!    confinement decided (forge.yaml `security.confinement`, before anything starts: `required`
//!    without a namespace stops startup) and, when available, cli_execute, scripts and Chromium
//!    spawned in a network namespace whose only reachable address is the proxy;
//! 7. the browser (opt-in): each engine's binary resolved (Chromium, Lightpanda, or both when
//!    the browser skills choose both: `requires.browser_engine`), a manager per engine built on
//!    the proxy, the plan's browser tools registered (routed by `skill` with two engines). No browser skill, or every browser tool denied, means no browser
//!    tools, no Chromium and no proxy for it.
//! 8. forge.yaml `mcp.servers`: each server reached (http through the egress client, its host in
//!    the policy like the model host; stdio as a confined child) and its allowed tools registered
//!    as `<server>__<tool>`, unless `denied_tools` names them; a `required` server that fails stops
//!    startup, any other is recorded as absent with the cause.
//!
//! 0b (before all of that): forge.yaml `secrets:` resolved (`assemble/secrets.rs`).
//!
//! Every call then goes through [`ToolRunner::execute`]: input guardrails, the time limit, the
//! tool (which fences outside content), output guardrails (block, then redact), then every secret
//! value in the result or error replaced by `(secret NAME)`.

mod call;
mod deps;
mod options;
mod secrets;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use forge_skills::{Agent, PlannedTool, ScriptBinding, ToolPlan};
use forge_tools::builtins::{self, cli_execute, script};
use forge_tools::{Registry, ToolContext};
use serde::Serialize;
use serde_json::Value;

use crate::guardrails::Guardrails;

pub(crate) use call::CallEvent;
pub use call::{GuardrailEvent, GuardrailStage, ProgressFn, ToolEvents, ToolRunner};
pub(crate) use deps::{decide_confinement, BrowserParts, EgressParts};
pub use deps::{egress_policy, mcp_egress_entry, ConfinementStatus};
pub use options::{AssembleError, AssembleOptions, EgressPolicyError};
pub(crate) use options::{DepOptions, EnvLookup};

/// Where a tool comes from (the tool plan's sources).
pub use forge_skills::ToolSource;
/// Why browser tools are absent when no skill asks for them.
pub use forge_skills::BROWSER_ABSENT_REASON;

use forge_skills::is_mcp_tool_name;

/// Whether a tool is registered and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolReason {
    pub name: String,
    pub present: bool,
    pub source: ToolSource,
    /// One sentence: the condition that put it there or kept it out.
    pub reason: String,
}

/// An agent's assembled tools and everything they need kept alive.
pub struct AssembledTools {
    registry: Arc<Registry>,
    reasons: Vec<ToolReason>,
    guardrails: Arc<Guardrails>,
    files_dir: PathBuf,
    timeout: Option<Duration>,
    egress: EgressParts,
    browser: Option<BrowserParts>,
    events: Option<Arc<dyn ToolEvents>>,
    stopped: Arc<AtomicBool>,
    mcp: Vec<forge_mcp::McpConnection>,
    confinement: ConfinementStatus,
    secrets: forge_tools::Secrets,
}

impl AssembledTools {
    /// The registered tools (after `denied_tools`).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// For every tool considered: present or absent, and why. Registration order, then absences.
    pub fn reasons(&self) -> &[ToolReason] {
        &self.reasons
    }

    /// The compiled guardrails (the agent loop checks prompts and replies with them).
    pub fn guardrails(&self) -> &Arc<Guardrails> {
        &self.guardrails
    }

    /// The agent's files dir (`.forge/files`).
    pub fn files_dir(&self) -> &Path {
        &self.files_dir
    }

    /// The per-call time limit from the skills' largest `timeout_hint`, if any.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The egress policy, client and proxy.
    pub fn egress(&self) -> &EgressParts {
        &self.egress
    }

    /// The proxy's address, when one was started.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.egress.proxy_addr()
    }

    /// How child programs are kept on the egress proxy (namespace or proxy-only, with why).
    pub fn confinement(&self) -> &ConfinementStatus {
        &self.confinement
    }

    /// The agent's resolved secrets (names and bindings for the prompt; the redactor).
    pub fn secrets(&self) -> &forge_tools::Secrets {
        &self.secrets
    }

    /// The browser manager, when a skill declared the browser.
    pub fn browser(&self) -> Option<&BrowserParts> {
        self.browser.as_ref()
    }

    /// A context for one task or conversation.
    pub fn context(&self, session_key: impl Into<String>) -> ToolContext {
        self.runner().context(session_key)
    }

    /// The call path shared by the agent loop, `forge tool call` and the MCP server (cheap to
    /// clone), with what calls need: files dir, egress client, time limit, browser sessions.
    pub fn runner(&self) -> ToolRunner {
        ToolRunner::new(
            self.registry.clone(),
            self.guardrails.clone(),
            self.events.clone(),
        )
        .with_env(call::CallEnv {
            files_dir: self.files_dir.clone(),
            egress: self.egress.client(),
            timeout: self.timeout,
            browsers: self
                .browser
                .iter()
                .flat_map(|b| b.managers().cloned())
                .collect(),
            stopped: self.stopped.clone(),
            secrets: self.secrets.clone(),
        })
    }

    /// Run one tool call through guardrails, time limit and fence: see [`ToolRunner::execute`].
    pub async fn execute(
        &self,
        name: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<forge_tools::ToolOutput, forge_tools::ToolError> {
        self.runner().execute(name, input, ctx).await
    }

    /// End a task's browser session (its browser context), if it has one.
    pub async fn close_session(&self, session_key: &str) {
        if let Some(b) = &self.browser {
            b.close_session(session_key).await;
        }
    }

    /// Stop the browser (removing its profile) and the proxy. Works through a shared reference,
    /// so a task still holding the tools cannot keep them running; later calls do nothing.
    pub async fn shutdown(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        for c in &self.mcp {
            c.shutdown().await;
        }
        if let Some(b) = &self.browser {
            b.shutdown().await;
        }
        self.egress.shutdown().await;
    }
}

/// Turn `agent` into its tools. See the module docs for the steps.
pub async fn assemble(
    agent: &Agent,
    opts: AssembleOptions,
) -> Result<AssembledTools, AssembleError> {
    let agg = &agent.aggregate;
    let files_dir = opts
        .files_dir
        .clone()
        .unwrap_or_else(|| agent.dir.join(".forge").join("files"));
    // Absolute, so every result that names a file gives a path that works from anywhere.
    let files_dir = if files_dir.is_absolute() {
        files_dir
    } else {
        std::env::current_dir()
            .map(|d| d.join(&files_dir))
            .unwrap_or(files_dir)
    };
    let files_dir: PathBuf = files_dir
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    let timeout = agg.timeout_hint.filter(|s| *s > 0).map(Duration::from_secs);
    let env: EnvLookup = opts
        .env
        .clone()
        .unwrap_or_else(|| Arc::new(|k: &str| std::env::var(k).ok()));

    // 0. A required MCP server's token must be set before anything starts.
    agent
        .config
        .check_mcp_env(&|k| env(k))
        .map_err(|e| AssembleError::McpEnv(format!("{:?}", miette_report(e))))?;

    // 0b. Secrets: every reference resolved now (a missing source stops startup, naming it).
    let secrets = secrets::resolve(&agent.config.secrets, &env, opts.secret_uses.clone())?;

    // 1. Guardrails.
    let guardrails = Arc::new(Guardrails::from_skills(&agg.guardrails)?);

    // 2. The egress policy and client (one value for every enforcement point).
    let mut egress = EgressParts::build(agent, &opts)?;

    // 2b. Confinement of child programs (`required` and unavailable stops startup here).
    let confinement = decide_confinement(agent)?;

    let plan = agent.tool_plan();
    let mut registry = Registry::new();
    let mut reasons: Vec<ToolReason> = Vec::new();
    let note = |reasons: &mut Vec<ToolReason>, p: &PlannedTool, present: bool, reason: String| {
        reasons.push(ToolReason {
            name: p.name.clone(),
            present,
            source: p.source,
            reason,
        })
    };

    // 3. Builtins (forge-tools builds them in the plan's order; a test checks the two lists).
    for tool in builtins::always() {
        if let Some(p) = plan.get(tool.name()).filter(|p| p.present) {
            note(&mut reasons, p, true, p.reason.clone());
            registry.register(tool);
        }
    }

    // 4-5. cli_execute and script tools need the proxy; decide what they are first (a bad
    // cli_execute configuration fails here, before anything is started).
    let cli_plan = match plan.cli.as_ref().map(|_| plan_cli(agent)).transpose()? {
        Some(config) => {
            let tool = cli_execute::CliExecute::new(config, None).map_err(|e| {
                AssembleError::CliConfig {
                    file: agent.config.path.clone(),
                    message: e.to_string(),
                }
            })?;
            Some(tool)
        }
        None => None,
    };
    let script_plans = plan_scripts(agent, &plan, timeout);
    let browser_view = plan.browser.clone();
    if !plan.browser_denied_for.is_empty() {
        tracing::info!(
            skills = %plan.browser_denied_for.join(", "),
            "every browser tool is denied by denied_tools: the browser is not started"
        );
    }
    let mcp_stdio = agent
        .config
        .mcp
        .servers
        .iter()
        .any(|s| s.transport == forge_skills::McpTransport::Stdio);
    let needs_proxy = cli_plan.is_some()
        || script_plans.iter().any(|p| p.tool.is_some())
        || browser_view.is_some()
        || mcp_stdio;

    // The browser binary is resolved before anything starts, so a missing browser fails fast.
    let browser_binaries = match &browser_view {
        Some(_) => {
            let routes = BrowserParts::routes_for(agent, |k| std::env::var(k).ok())?;
            let binaries = BrowserParts::find_binaries(&routes)?;
            Some((routes, binaries))
        }
        None => None,
    };
    let refusals = forge_browser::RefusalLog::new();

    // 6. The proxy, only when something will use it (the browser's refusal log listens in).
    if needs_proxy {
        let extra: Option<Arc<dyn forge_egress::proxy::EgressObserver>> = browser_view
            .as_ref()
            .map(|_| Arc::new(refusals.clone()) as _);
        egress.start_proxy(&opts, extra).await?;
    }
    let proxy_url = egress.proxy_url();
    let confiner = match &confinement {
        ConfinementStatus::Namespace(kind) => egress.confiner(*kind),
        ConfinementStatus::ProxyOnly(_) => None,
    };

    for p in plan.tools.iter().filter(|p| p.source == ToolSource::Cli) {
        match cli_plan.as_ref().filter(|_| p.present) {
            Some(_) => {}
            None => note(&mut reasons, p, false, p.reason.clone()),
        }
    }
    if let Some(mut tool) = cli_plan {
        tool.set_proxy_url(proxy_url.clone());
        tool.set_confiner(confiner.clone());
        let missing: Vec<String> = tool
            .binaries()
            .iter()
            .filter(|(_, r)| matches!(r, cli_execute::Resolved::Missing(_)))
            .map(|(n, _)| n.clone())
            .collect();
        let mut reason = plan
            .get(forge_skills::CLI_TOOL)
            .map(|p| p.reason.clone())
            .unwrap_or_default();
        if !missing.is_empty() {
            reason.push_str(&format!(
                "; not installed (calls will fail until they are): {}",
                missing.join(", ")
            ));
        }
        reasons.push(ToolReason {
            name: forge_skills::CLI_TOOL.into(),
            present: true,
            source: ToolSource::Cli,
            reason,
        });
        registry.register(Arc::new(tool));
    }

    for sp in script_plans {
        match sp.tool {
            Some(tool) if is_mcp_tool_name(&tool.name) => reasons.push(ToolReason {
                name: tool.name.clone(),
                present: false,
                source: ToolSource::SkillScript,
                reason: format!(
                    "skill {}: the name form <server>__<tool> is reserved for MCP tools; rename the tool section",
                    tool.skill
                ),
            }),
            Some(mut tool) => {
                tool.proxy_url = proxy_url.clone();
                tool.confine = confiner.clone();
                reasons.push(ToolReason {
                    name: tool.name.clone(),
                    present: true,
                    source: ToolSource::SkillScript,
                    reason: sp.reason,
                });
                registry.register(Arc::new(tool));
            }
            None => reasons.push(ToolReason {
                name: sp.name,
                present: false,
                source: ToolSource::SkillScript,
                reason: sp.reason,
            }),
        }
    }

    // 7. The browser, opt-in.
    let browser = match &browser_view {
        Some(view) => {
            let (routes, binaries) =
                browser_binaries
                    .clone()
                    .ok_or_else(|| AssembleError::Browser {
                        skills: view.skills.join(", "),
                        message: "no browser binary was resolved".into(),
                    })?;
            let parts = BrowserParts::build(
                view,
                &agent.config.browser,
                routes,
                binaries,
                &egress,
                refusals.clone(),
                opts.deps.browser_crash.clone(),
                confiner.clone(),
            )?;
            let sensitive = if view.allow_sensitive_fill {
                "; sensitive fill allowed by a browser skill"
            } else {
                ""
            };
            let binaries = parts.binaries();
            let engine = parts.routes().default;
            for tool in parts.tools() {
                if let Some(p) = plan.get(tool.name()).filter(|p| p.present) {
                    let how = engines_serving(parts.routes(), &binaries, tool.name());
                    note(
                        &mut reasons,
                        p,
                        true,
                        format!("{}; {how}{sensitive}", p.reason),
                    );
                    registry.register(tool.clone());
                }
            }
            // The planned browser tools no engine in use can serve: absent, with the reason. When
            // every browser skill chose its engine itself, the fix is in a skill, not forge.yaml.
            let browser_skills: Vec<&forge_skills::Skill> = agent
                .skills
                .iter()
                .filter(|s| s.requires_browser())
                .collect();
            let chosen_by: Option<Vec<&str>> = (!browser_skills.is_empty()
                && browser_skills.iter().all(|s| s.browser_engine().is_some()))
            .then(|| browser_skills.iter().map(|s| s.name.as_str()).collect());
            for (name, _) in forge_browser::engine::TOOL_NEEDS {
                if parts.tools().iter().any(|t| t.name() == *name) {
                    continue;
                }
                if let (Some(p), Some(why)) = (
                    plan.get(name).filter(|p| p.present),
                    match &chosen_by {
                        Some(skills) => {
                            forge_browser::engine::absent_reason_by_skills(engine, name, skills)
                        }
                        None => forge_browser::engine::absent_reason(engine, name),
                    },
                ) {
                    note(&mut reasons, p, false, why);
                }
            }
            Some(parts)
        }
        None => None,
    };

    // 8. MCP servers (the plan does not know their tools: denied_tools is applied here).
    let denied = agent.denied_tools();
    let mcp = match connect_mcp(
        agent,
        &opts,
        &egress,
        proxy_url.as_deref(),
        confiner.as_ref(),
        &env,
    )
    .await
    {
        Ok((conns, mut why)) => {
            for c in &conns {
                for tool in c.tools() {
                    if denied.iter().any(|d| d == tool.name()) {
                        let who = forge_skills::denied_by(agent, tool.name());
                        for r in why.iter_mut().filter(|r| r.name == tool.name()) {
                            r.present = false;
                            r.reason =
                                format!("denied by denied_tools of {who} (was: {})", r.reason);
                        }
                        continue;
                    }
                    if registry.get(tool.name()).is_some() {
                        why.push(ToolReason {
                            name: tool.name().to_string(),
                            present: false,
                            source: ToolSource::Mcp,
                            reason: "a tool with this name is already registered".into(),
                        });
                        continue;
                    }
                    registry.register(tool);
                }
            }
            reasons.extend(
                why.into_iter()
                    .filter(|r| !r.present || registry.get(&r.name).is_some()),
            );
            conns
        }
        Err(e) => {
            if let Some(b) = &browser {
                b.shutdown().await;
            }
            egress.shutdown().await;
            return Err(e);
        }
    };

    // Everything else the plan considered and left out (denied tools, browser tools without a
    // browser skill, forge.yaml entries forge does not provide).
    for p in plan.tools.iter().filter(|p| {
        !p.present
            && matches!(
                p.source,
                ToolSource::Builtin | ToolSource::Browser | ToolSource::Config
            )
    }) {
        if p.source == ToolSource::Config {
            tracing::warn!(tool = %p.name, "forge.yaml lists a tool forge does not provide; ignored");
        }
        note(&mut reasons, p, false, p.reason.clone());
    }
    for name in agent.denied_tools() {
        if plan.get(&name).is_none() {
            tracing::debug!(tool = %name, "denied_tools names a tool that was not registered");
        }
    }

    // Present first, then absent, each in plan order (the registration order).
    reasons.sort_by_key(|r| {
        (
            !r.present,
            plan.tools
                .iter()
                .position(|p| p.name == r.name)
                .unwrap_or(usize::MAX),
        )
    });

    Ok(AssembledTools {
        registry: Arc::new(registry),
        reasons,
        guardrails,
        files_dir,
        timeout,
        egress,
        browser,
        events: opts.events.clone(),
        stopped: Arc::new(AtomicBool::new(false)),
        mcp,
        confinement,
        secrets,
    })
}

/// How `forge tool list` says which engine serves browser tool `tool`: with one engine, the
/// engine and its binary; with two, each engine that can serve it and its skills, or the one
/// that can and why the other cannot.
fn engines_serving(
    routes: &forge_browser::routing::EngineRoutes,
    binaries: &[(forge_browser::EngineKind, &Path)],
    tool: &str,
) -> String {
    if let [(k, bin)] = binaries {
        return format!("{} {} through the egress proxy", k.title(), bin.display());
    }
    let mut parts = Vec::new();
    for (k, bin) in binaries {
        let skills = routes.skills_of(*k);
        let skills = if skills.is_empty() {
            "no skill".to_string()
        } else {
            format!("skill {}", skills.join(", "))
        };
        let default = if *k == routes.default {
            ", the default"
        } else {
            ""
        };
        match forge_browser::engine::absent_reason(*k, tool) {
            None => parts.push(format!(
                "{} {} for {skills}{default}",
                k.title(),
                bin.display()
            )),
            Some(_) => parts.push(format!("not for {skills} ({} cannot serve it)", k.name())),
        }
    }
    format!(
        "{} through the egress proxy; pick with `skill`",
        parts.join("; ")
    )
}

fn miette_report(e: forge_skills::Error) -> forge_skills::miette::Report {
    forge_skills::miette::Report::new(e)
}

/// Connect to every server of forge.yaml `mcp.servers`, in order: the connections, and a reason
/// for every tool registered or left out (and for a server whose tools are all absent). A
/// `required` server that fails (unreachable, 401, no tools) is an error; the connections made
/// so far are shut down first.
async fn connect_mcp(
    agent: &Agent,
    opts: &AssembleOptions,
    egress: &EgressParts,
    proxy_url: Option<&str>,
    confiner: Option<&forge_egress::confine::Confiner>,
    env: &EnvLookup,
) -> Result<(Vec<forge_mcp::McpConnection>, Vec<ToolReason>), AssembleError> {
    use forge_mcp::{EgressDeps, ServerSpec, ServerTransport};
    use forge_skills::McpTransport;
    let mut conns: Vec<forge_mcp::McpConnection> = Vec::new();
    let mut reasons = Vec::new();
    let deps = EgressDeps {
        policy: egress.policy().clone(),
        options: opts.deps.client.clone(),
    };
    for server in &agent.config.mcp.servers {
        let bearer = server
            .auth
            .as_ref()
            .and_then(|a| env(&a.token_env))
            .filter(|t| !t.is_empty());
        let transport = match server.transport {
            McpTransport::Http => ServerTransport::Http {
                url: server.url.clone().unwrap_or_default(),
                bearer: bearer.clone(),
            },
            McpTransport::Stdio => ServerTransport::Stdio {
                command: server.command.clone().unwrap_or_default(),
                args: server.args.clone(),
                env: forge_mcp::child::stdio_env(
                    &server.env,
                    &|k| env(k),
                    match confiner {
                        Some(_) => Some(forge_egress::confine::CHILD_PROXY_URL),
                        None => proxy_url,
                    },
                ),
                cwd: Some(agent.dir.clone()),
                confine: confiner.cloned(),
            },
        };
        let spec = ServerSpec {
            name: server.name.clone(),
            transport,
            allow: server.tools.allow.clone(),
            deny: server.tools.deny.clone(),
            timeout: server.timeout,
        };
        let location = spec.location();
        let fail = |message: String| AssembleError::McpRequired {
            file: agent.config.path.clone(),
            server: server.name.clone(),
            message,
        };
        let outcome = match (&server.auth, &bearer) {
            (Some(a), None) => Err(format!(
                "MCP server {} ({location}): its token variable {} is not set",
                server.name, a.token_env
            )),
            _ => forge_mcp::connect(spec, Some(&deps))
                .await
                .map_err(|e| e.to_string()),
        };
        let conn = match outcome {
            Ok(c) if c.tools().is_empty() => {
                let skipped: Vec<&str> = c.skipped().iter().map(|t| t.tool.as_str()).collect();
                let why = format!(
                    "MCP server {} ({location}) lists no tools that tools.allow lets through (listed and left out: {})",
                    server.name,
                    if skipped.is_empty() { "none".to_string() } else { skipped.join(", ") }
                );
                c.shutdown().await;
                Err(why)
            }
            other => other,
        };
        match conn {
            Ok(c) => {
                let why = format!(
                    "mcp server {} ({} {location})",
                    server.name,
                    server.transport.as_str()
                );
                for t in c.tools() {
                    reasons.push(ToolReason {
                        name: t.name().to_string(),
                        present: true,
                        source: ToolSource::Mcp,
                        reason: why.clone(),
                    });
                }
                for s in c.skipped() {
                    reasons.push(ToolReason {
                        name: server.tool_name(&s.tool),
                        present: false,
                        source: ToolSource::Mcp,
                        reason: s.reason.clone(),
                    });
                }
                conns.push(c);
            }
            Err(message) if server.required => {
                for c in &conns {
                    c.shutdown().await;
                }
                return Err(fail(message));
            }
            Err(message) => {
                tracing::warn!(server = %server.name, "MCP server not used: {message}");
                reasons.push(ToolReason {
                    name: server.tool_name("*"),
                    present: false,
                    source: ToolSource::Mcp,
                    reason: format!("not connected (required: false): {message}"),
                });
            }
        }
    }
    Ok((conns, reasons))
}

/// cli_execute's configuration: forge.yaml `tools[cli_execute].config`, else derived from the
/// skills (the plan said cli_execute is present).
fn plan_cli(agent: &Agent) -> Result<cli_execute::CliConfig, AssembleError> {
    let file = agent.config.path.clone();
    let err = |message: String| AssembleError::CliConfig {
        file: file.clone(),
        message,
    };
    if let Some(entry) = agent.config.tools.iter().find(|t| t.name == "cli_execute") {
        let cfg = parse_cli_config(&entry.config).map_err(err)?;
        if cfg.allowed_binaries.is_empty() {
            return Err(err(
                "config.allowed_binaries is empty; list the programs the agent may run".into(),
            ));
        }
        return Ok(cfg);
    }
    let view = agent.aggregate.cli_view();
    let cfg = cli_execute::CliConfig {
        allowed_binaries: view.allowed_binaries.clone(),
        env_passthrough: view.env_passthrough.clone(),
        timeout: view
            .timeout_hint
            .filter(|s| *s > 0)
            .map(Duration::from_secs)
            .unwrap_or(cli_execute::DEFAULT_TIMEOUT),
        max_output_bytes: cli_execute::DEFAULT_MAX_OUTPUT_BYTES,
    };
    Ok(cfg)
}

/// Parse forge.yaml `tools[{name: cli_execute, config}]` (forge-skills reads it; unset keys keep
/// cli_execute's defaults).
pub fn parse_cli_config(v: &Value) -> Result<cli_execute::CliConfig, String> {
    let parsed = forge_skills::parse_cli_tool_config(v)?;
    let mut cfg = cli_execute::CliConfig {
        allowed_binaries: parsed.allowed_binaries,
        env_passthrough: parsed.env_passthrough,
        ..Default::default()
    };
    if let Some(t) = parsed.timeout {
        cfg.timeout = t;
    }
    if let Some(n) = parsed.max_output_bytes {
        cfg.max_output_bytes = n;
    }
    Ok(cfg)
}

struct ScriptPlan {
    name: String,
    tool: Option<script::ScriptTool>,
    reason: String,
}

/// The plan's skill script tools, each with its interpreter resolved on PATH (absent, saying
/// what to install, when there is none). Denied and otherwise absent script tools keep the
/// plan's reason.
fn plan_scripts(agent: &Agent, plan: &ToolPlan, timeout: Option<Duration>) -> Vec<ScriptPlan> {
    let path_var = std::env::var("PATH").unwrap_or_default();
    let mut out = Vec::new();
    for p in plan
        .tools
        .iter()
        .filter(|p| p.source == ToolSource::SkillScript)
    {
        let name = p.name.clone();
        let binding = match (&p.script, p.present) {
            (Some(b), true) => b,
            _ => {
                out.push(ScriptPlan {
                    name,
                    tool: None,
                    reason: p.reason.clone(),
                });
                continue;
            }
        };
        let ScriptBinding {
            skill: skill_name,
            script: path,
            ..
        } = binding;
        let Some(skill) = agent.skills.iter().find(|s| &s.name == skill_name) else {
            continue;
        };
        let Some(section) = skill.tools.iter().find(|t| t.name == p.name) else {
            continue;
        };
        match script::interpreter_for(path, &path_var) {
            Ok(interpreter) => {
                let env = skill
                    .forge
                    .as_ref()
                    .map(|f| {
                        let e = &f.requires.env;
                        e.required
                            .iter()
                            .chain(e.one_of.iter())
                            .chain(e.optional.iter())
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                let mut description = section.description.clone();
                if let Some(i) = &section.input {
                    description.push_str(&format!(" Input: {i}"));
                }
                if let Some(o) = &section.output {
                    description.push_str(&format!(" Output: {o}"));
                }
                if description.trim().is_empty() {
                    description = format!("Tool {} of skill {}.", section.name, skill.name);
                }
                let reason = format!("{} (run with {})", p.reason, interpreter.display());
                let skill_timeout = skill
                    .forge
                    .as_ref()
                    .and_then(|f| f.timeout_hint)
                    .filter(|s| *s > 0)
                    .map(Duration::from_secs);
                out.push(ScriptPlan {
                    name: name.clone(),
                    tool: Some(script::ScriptTool {
                        name,
                        skill: skill.name.clone(),
                        description: description.trim().to_string(),
                        script: path.clone(),
                        interpreter,
                        env_passthrough: env,
                        proxy_url: None,
                        confine: None,
                        timeout: skill_timeout
                            .or(timeout)
                            .unwrap_or(script::DEFAULT_SCRIPT_TIMEOUT),
                    }),
                    reason,
                });
            }
            Err(wanted) => {
                tracing::warn!(skill = %skill.name, tool = %section.name, "script interpreter not installed");
                out.push(ScriptPlan {
                    name,
                    tool: None,
                    reason: format!(
                        "skill {}: {} needs {} on PATH, which is not installed; install it and restart",
                        skill.name,
                        path.display(),
                        wanted.join(" or ")
                    ),
                })
            }
        }
    }
    out
}
