//! The narrow adapter between tool assembly and the egress and browser crates: building the egress
//! policy and client, starting the proxy, finding Chromium and building the browser manager.
//! Everything assembly needs from those crates goes through here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use forge_browser::routing::EngineRoutes;
use forge_browser::{
    browser_tools, find_browser_binary, BrowserConfig, BrowserManager, BrowserToolOptions,
    CrashObserver, EngineKind, RefusalLog,
};
use forge_egress::client::EgressClient;
use forge_egress::proxy::{Decision, EgressObserver, EgressProxy, ProxyHandle, ProxyOptions};
use forge_egress::{EgressMode, EgressPolicy, EgressSettings};
use forge_skills::{expand_domains, Agent, BrowserSettings, BrowserView};
use forge_tools::Tool;

use super::options::{AssembleError, AssembleOptions, EgressPolicyError};

/// The egress settings for `agent` (none: deny-all): forge.yaml `egress`, every active skill's
/// `egress_domains` (with `$VAR` entries expanded from the environment), plus forge's own entries
/// (the caller's, e.g. the model host, and the host of every `http` server of forge.yaml
/// `mcp.servers`, added like the model host: `forge: mcp server NAME`) and command-line entries.
pub(crate) fn egress_settings(
    agent: Option<&Agent>,
    forge_entries: &[(String, String)],
    cli_entries: &[String],
) -> EgressSettings {
    let mut settings = EgressSettings {
        cli_entries: cli_entries.to_vec(),
        forge_entries: forge_entries.to_vec(),
        ..Default::default()
    };
    let Some(agent) = agent else {
        return settings;
    };
    for server in &agent.config.mcp.servers {
        if let Some(entry) = server.url.as_deref().and_then(mcp_egress_entry) {
            settings
                .forge_entries
                .push((format!("mcp server {}", server.name), entry));
        }
    }
    let e = &agent.config.egress;
    settings.mode = Some(match e.mode {
        forge_skills::EgressMode::DenyAll => EgressMode::DenyAll,
        forge_skills::EgressMode::Allowlist => EgressMode::Allowlist,
        forge_skills::EgressMode::DevOpen => EgressMode::DevOpen,
    });
    settings.allowed_domains = e.allowed_domains.clone();
    settings.allow_private_ips = e.allow_private_ips;
    settings.allowed_private_cidrs = e.allowed_private_cidrs.clone();
    for skill in &agent.skills {
        if let Some(f) = &skill.forge {
            for d in expand_domains(&f.egress_domains, |k| std::env::var(k).ok()) {
                settings.skill_domains.push((skill.name.clone(), d));
            }
        }
    }
    settings
}

/// The allowlist entry of an MCP server's URL: its host, with the port when it is not the
/// scheme's default (`https://mcp.example.com/mcp` -> `mcp.example.com`,
/// `http://127.0.0.1:8931/mcp` -> `127.0.0.1:8931`). `None` for a URL without a host.
pub fn mcp_egress_entry(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    let host = u.host_str()?.to_string();
    // `port()` is `None` when the URL gives the scheme's default port (or none).
    match u.port() {
        Some(p) => Some(format!("{host}:{p}")),
        None => Some(host),
    }
}

/// THE egress policy of `agent` (none: deny-all plus `cli_entries`). The one place a policy is
/// built from an agent: `forge run`, `forge tool`, `forge egress check|serve` and the
/// [`crate::runner::Runner`] all come through here, and the proxy, the tools' egress client and
/// the model client all share the value it returns.
pub fn egress_policy(
    agent: Option<&Agent>,
    forge_entries: &[(String, String)],
    cli_entries: &[String],
) -> Result<EgressPolicy, EgressPolicyError> {
    EgressPolicy::new(egress_settings(agent, forge_entries, cli_entries)).map_err(|error| {
        let file = agent.and_then(|a| {
            if error.field.starts_with("egress.") {
                return Some(a.config.path.clone());
            }
            a.skills
                .iter()
                .find(|s| error.field == format!("egress_domains of skill {}", s.name))
                .map(|s| s.path.clone())
        });
        EgressPolicyError { error, file }
    })
}

/// The agent's egress policy, the client on it, and the proxy when one runs. The same policy value
/// backs the client and the proxy.
pub struct EgressParts {
    policy: Arc<EgressPolicy>,
    client: Arc<EgressClient>,
    /// Behind a lock so that [`EgressParts::shutdown`] can stop it through a shared reference
    /// (a task still finishing must not keep the proxy listening after shutdown).
    proxy: Mutex<Option<ProxyHandle>>,
    /// forge.yaml `egress.max_tunnels`: the proxy's concurrent CONNECT tunnel cap.
    max_tunnels: usize,
    /// The options the proxy was started with (observers included), for per-task listeners.
    proxy_options: Option<ProxyOptions>,
}

impl EgressParts {
    pub(super) fn build(agent: &Agent, opts: &AssembleOptions) -> Result<Self, AssembleError> {
        let policy = Arc::new(egress_policy(
            Some(agent),
            &opts.forge_egress_entries,
            &opts.cli_egress_entries,
        )?);
        let client = Arc::new(EgressClient::new(policy.clone(), opts.deps.client.clone()));
        Ok(Self {
            policy,
            client,
            proxy: Mutex::new(None),
            max_tunnels: agent.config.egress.max_tunnels as usize,
            proxy_options: None,
        })
    }

    /// Start the proxy on the same policy value. `extra` observers (the browser's refusal log) are
    /// told about every decision, alongside the caller's observer (audit).
    pub(super) async fn start_proxy(
        &mut self,
        opts: &AssembleOptions,
        extra: Option<Arc<dyn EgressObserver>>,
    ) -> Result<(), AssembleError> {
        if self.proxy_addr().is_some() {
            return Ok(());
        }
        let mut options = opts.deps.proxy.clone();
        options.limits.max_tunnels = self.max_tunnels;
        // The proxy serves on a thread of its own (forge-egress thread.rs: no hops between the
        // runtime's workers per request, no queueing behind the agent's other work); its
        // per-task listeners share that thread.
        if options.thread.is_none() {
            options.thread = Some(
                forge_egress::thread::ProxyThread::start()
                    .map_err(|e| AssembleError::Proxy(e.to_string()))?,
            );
        }
        let observers: Vec<Arc<dyn EgressObserver>> =
            options.observer.take().into_iter().chain(extra).collect();
        options.observer = match observers.len() {
            0 => None,
            1 => observers.into_iter().next(),
            _ => Some(Arc::new(Fanout(observers))),
        };
        let (_addr, handle) = EgressProxy::serve(self.policy.clone(), options.clone())
            .await
            .map_err(|e| AssembleError::Proxy(e.to_string()))?;
        self.proxy_options = Some(options);
        *self.proxy.get_mut().unwrap_or_else(|p| p.into_inner()) = Some(handle);
        Ok(())
    }

    /// A proxy listener of one task's own, serving `policy` (the agent's, or narrowed for the
    /// task) with the agent proxy's limits and observers (audit, the browser's refusal log) plus
    /// `extra` (the task's refusal recorder): `within` (a listener inside a confined Chromium's
    /// namespace) when given, else a new one on 127.0.0.1 (ephemeral port). `None` when the
    /// agent runs no proxy.
    pub async fn serve_task_proxy(
        &self,
        policy: Arc<EgressPolicy>,
        extra: Arc<dyn EgressObserver>,
        within: Option<std::net::TcpListener>,
    ) -> Option<std::io::Result<ProxyHandle>> {
        let mut options = self.proxy_options.clone()?;
        options.observer = Some(match options.observer.take() {
            Some(own) => Arc::new(Fanout(vec![own, extra])),
            None => extra,
        });
        let listener = match within {
            Some(l) => match l
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(l))
            {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            },
            None => match tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await {
                Ok(l) => l,
                Err(e) => return Some(Err(e)),
            },
        };
        Some(EgressProxy::serve_on(listener, policy, options).map(|(_, h)| h))
    }

    /// The policy (one value for every enforcement point).
    pub fn policy(&self) -> &Arc<EgressPolicy> {
        &self.policy
    }

    /// The egress client (the one policy), for tool contexts and model providers.
    pub fn client(&self) -> Option<Arc<EgressClient>> {
        Some(self.client.clone())
    }

    /// The egress client (the one policy), by reference.
    pub fn client_ref(&self) -> &Arc<EgressClient> {
        &self.client
    }

    fn with_proxy<T>(&self, f: impl FnOnce(&ProxyHandle) -> T) -> Option<T> {
        // A poisoned lock still holds a valid Option (nothing panics while holding it).
        let guard = self.proxy.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(f)
    }

    /// The proxy address, while a proxy is running.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.with_proxy(|p| p.addr())
    }

    /// A confiner on the running proxy for children entering `kind` namespaces.
    pub fn confiner(
        &self,
        kind: forge_egress::confine::NsKind,
    ) -> Option<forge_egress::confine::Confiner> {
        self.with_proxy(|p| forge_egress::confine::Confiner::new(p.entry(), kind))
    }

    /// `http://127.0.0.1:PORT` of the proxy, while one is running.
    pub fn proxy_url(&self) -> Option<String> {
        self.with_proxy(|p| p.url())
    }

    /// Stop the proxy (if one runs); later calls do nothing.
    pub(super) async fn shutdown(&self) {
        let handle = self.proxy.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = handle {
            p.shutdown().await;
        }
    }
}

/// How child programs (cli_execute, skill scripts, Chromium) are kept on the egress proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfinementStatus {
    /// Each child runs in a network namespace of its own whose only reachable address is the proxy.
    Namespace(forge_egress::confine::NsKind),
    /// Only the proxy variables (and Chromium's proxy flag) keep children on the proxy; why.
    ProxyOnly(String),
}

impl ConfinementStatus {
    /// What `forge tool list` shows after `confinement: `.
    pub fn describe(&self) -> String {
        match self {
            ConfinementStatus::Namespace(kind) => format!(
                "namespace ({} per child; only the egress proxy is reachable)",
                kind.describe()
            ),
            ConfinementStatus::ProxyOnly(why) => format!("proxy-only ({why})"),
        }
    }

    /// Whether children run confined.
    pub fn is_namespace(&self) -> bool {
        matches!(self, ConfinementStatus::Namespace(_))
    }
}

/// Decide, once per assembly, how children are confined: forge.yaml `security.confinement`
/// (`off`: proxy-only; `auto`: a namespace when the platform allows it, else proxy-only with a
/// warning; `required`: a namespace or a startup error naming the reason and the fix).
/// `FORGE_CONFINEMENT_UNAVAILABLE=<reason>` forces the fallback.
pub(crate) fn decide_confinement(agent: &Agent) -> Result<ConfinementStatus, AssembleError> {
    use forge_egress::confine::{availability, Availability};
    use forge_skills::Confinement;
    let mode = agent.config.security.confinement;
    if mode == Confinement::Off {
        return Ok(ConfinementStatus::ProxyOnly(
            "security.confinement is off in forge.yaml".into(),
        ));
    }
    match availability() {
        Availability::Namespace(kind) => Ok(ConfinementStatus::Namespace(kind)),
        Availability::ProxyOnly(reason) if mode == Confinement::Required => {
            Err(AssembleError::ConfinementRequired {
                file: agent.config.path.clone(),
                reason,
            })
        }
        Availability::ProxyOnly(reason) => {
            tracing::warn!(
                "confinement: proxy-only ({reason}); child programs are kept on the egress proxy \
                 by their proxy variables only"
            );
            Ok(ConfinementStatus::ProxyOnly(reason))
        }
    }
}

/// Tells several observers about every proxy decision.
struct Fanout(Vec<Arc<dyn EgressObserver>>);

impl EgressObserver for Fanout {
    fn on_decision(&self, d: &Decision) {
        for o in &self.0 {
            o.on_decision(d);
        }
    }
}

/// The browser's configuration: forge's defaults, then forge.yaml `browser:` (`settings`), then
/// the environment (`FORGE_BROWSER_BIN`, `FORGE_BROWSER_HEADLESS`), which still wins.
pub(crate) fn browser_config(
    proxy: SocketAddr,
    settings: &BrowserSettings,
    env: impl Fn(&str) -> Option<String>,
) -> BrowserConfig {
    let mut c = BrowserConfig {
        proxy: Some(proxy),
        ..BrowserConfig::default()
    };
    if let Some(n) = settings.max_sessions {
        c.max_sessions = n;
    }
    if let Some(d) = settings.idle_timeout {
        c.idle_timeout = d;
    }
    if let Some(d) = settings.navigation_timeout {
        c.navigation_timeout = d;
        // A skill's timeout_hint is capped at max_timeout; never below the configured limits.
        c.max_timeout = c.max_timeout.max(d);
    }
    if let Some(d) = settings.action_timeout {
        c.action_timeout = d;
        c.max_timeout = c.max_timeout.max(d);
    }
    if let Some(v) = settings.viewport {
        c.viewport = v;
    }
    if let Some(h) = settings.headless {
        c.headless = h;
    }
    if let Some(d) = settings.handoff_timeout {
        c.handoff_timeout = d;
    }
    if let Some(n) = settings.download_max_bytes {
        c.downloads.max_bytes = n;
    }
    if let Some(n) = settings.download_max_files {
        c.downloads.max_files = n;
    }
    if let Some(e) = settings.engine {
        c.engine = engine_kind(e);
    }
    c.apply_env_from(env)
}

/// The browser managers (one per engine the agent's browser skills use) and the tools.
pub struct BrowserParts {
    binary: PathBuf,
    /// The manager of the agent's primary engine (`BrowserEngines::primary`): calls that name no
    /// skill, the form tools, profiles, hand-off and the live view run on it.
    manager: Arc<BrowserManager>,
    /// The other engine's manager, when the browser skills use two (`routing.rs`).
    other: Option<(EngineKind, PathBuf, Arc<BrowserManager>)>,
    /// Which engine serves each browser skill.
    routes: EngineRoutes,
    tools: Vec<Arc<dyn Tool>>,
    /// The form tools (`browser_form_*`), which the form skills call (not the model).
    form_tools: Vec<Arc<dyn Tool>>,
}

/// forge-skills' engine name as forge-browser's.
pub(crate) fn engine_kind(e: forge_skills::BrowserEngine) -> EngineKind {
    match e {
        forge_skills::BrowserEngine::Chromium => EngineKind::Chromium,
        forge_skills::BrowserEngine::Lightpanda => EngineKind::Lightpanda,
    }
}

/// forge-browser's engine name as forge-skills'.
fn skills_engine(e: EngineKind) -> forge_skills::BrowserEngine {
    match e {
        EngineKind::Chromium => forge_skills::BrowserEngine::Chromium,
        EngineKind::Lightpanda => forge_skills::BrowserEngine::Lightpanda,
    }
}

impl BrowserParts {
    /// The engine: forge.yaml `browser.engine`, then `FORGE_BROWSER_ENGINE` (a value naming no
    /// engine stops startup rather than falling back to Chromium).
    pub(super) fn engine(
        settings: &BrowserSettings,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<EngineKind, AssembleError> {
        let from_yaml = settings.engine.map(engine_kind).unwrap_or_default();
        Ok(forge_browser::engine::engine_from_env(env)
            .map_err(AssembleError::BrowserEngine)?
            .unwrap_or(from_yaml))
    }

    /// Which engine serves each browser skill: its own `requires.browser_engine`, else the
    /// default ([`Self::engine`]: `FORGE_BROWSER_ENGINE`, else forge.yaml, else chromium), and
    /// the engine of calls that name no skill (docs/browser.md, "Per skill").
    pub(super) fn routes_for(
        agent: &Agent,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<EngineRoutes, AssembleError> {
        let default = Self::engine(&agent.config.browser, env)?;
        let engines = agent.browser_engines_with(Some(skills_engine(default)));
        Ok(EngineRoutes {
            default: engine_kind(engines.primary()),
            skills: engines
                .skills
                .iter()
                .map(|s| (s.skill.clone(), engine_kind(s.engine)))
                .collect(),
        })
    }

    /// Resolve each engine's binary (before anything else, so a missing browser fails startup
    /// promptly with the skills that asked, what was searched and the fixes).
    pub(super) fn find_binaries(
        routes: &EngineRoutes,
    ) -> Result<Vec<(EngineKind, PathBuf)>, AssembleError> {
        routes
            .engines()
            .into_iter()
            .map(|engine| {
                let mut skills = routes.skills_of(engine);
                if skills.is_empty() {
                    skills = routes.skills.iter().map(|(s, _)| s.as_str()).collect();
                }
                Self::find_binary(&skills.join(", "), engine).map(|b| (engine, b))
            })
            .collect()
    }

    fn find_binary(skills: &str, engine: EngineKind) -> Result<PathBuf, AssembleError> {
        let skills = skills.to_string();
        match engine {
            EngineKind::Chromium => {
                find_browser_binary().map_err(|e| AssembleError::BrowserMissing {
                    skills,
                    searched: e.searched.join(", "),
                })
            }
            EngineKind::Lightpanda => {
                engine
                    .engine()
                    .find_binary()
                    .map_err(|e| AssembleError::LightpandaMissing {
                        skills,
                        searched: e.searched.join(", "),
                    })
            }
        }
    }

    /// Build one manager per engine on the running proxy (each browser starts lazily on its
    /// first call), with forge.yaml `browser:` applied ([`browser_config`]); with two engines,
    /// the tools route each call to its skill's engine (`forge_browser::routing`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build(
        view: &BrowserView,
        settings: &BrowserSettings,
        routes: EngineRoutes,
        binaries: Vec<(EngineKind, PathBuf)>,
        egress: &EgressParts,
        refusals: RefusalLog,
        crash: Option<Arc<dyn CrashObserver>>,
        confine: Option<forge_egress::confine::Confiner>,
    ) -> Result<Self, AssembleError> {
        let proxy = egress.proxy_addr().ok_or_else(|| AssembleError::Browser {
            skills: view.skills.join(", "),
            message: "the egress proxy is not running; the browser never runs unproxied".into(),
        })?;
        let mut managers: Vec<(EngineKind, PathBuf, Arc<BrowserManager>)> = Vec::new();
        for (engine, binary) in binaries {
            let mut config = browser_config(proxy, settings, |k| std::env::var(k).ok());
            config.engine = engine;
            config.binary = Some(binary.clone());
            config.confine = confine.clone();
            let mut manager = BrowserManager::new(config).with_refusals(refusals.clone());
            if let Some(observer) = &crash {
                manager = manager.with_crash_observer(observer.clone());
            }
            managers.push((engine, binary, Arc::new(manager)));
        }
        let at = managers
            .iter()
            .position(|(k, _, _)| *k == routes.default)
            .ok_or_else(|| AssembleError::Browser {
                skills: view.skills.join(", "),
                message: format!("no binary was resolved for engine {}", routes.default),
            })?;
        let (_, binary, manager) = managers.remove(at);
        let other = managers.pop();
        let options = BrowserToolOptions {
            allow_sensitive_fill: view.allow_sensitive_fill,
        };
        let tools = match &other {
            None => browser_tools(manager.clone(), options.clone()),
            Some((k, _, m)) => forge_browser::routing::routed_browser_tools(
                &[(routes.default, manager.clone()), (*k, m.clone())],
                &routes,
                options.clone(),
            ),
        };
        let form_tools = forge_browser::forms::form_tools(manager.clone(), options);
        Ok(Self {
            binary,
            manager,
            other,
            routes,
            tools,
            form_tools,
        })
    }

    /// Which engine serves each browser skill.
    pub fn routes(&self) -> &EngineRoutes {
        &self.routes
    }

    /// Every manager: the primary one first, then the other engine's (when two are used).
    pub fn managers(&self) -> impl Iterator<Item = &Arc<BrowserManager>> {
        std::iter::once(&self.manager).chain(self.other.iter().map(|(_, _, m)| m))
    }

    /// Each engine in use and its binary, the primary first.
    pub fn binaries(&self) -> Vec<(EngineKind, &Path)> {
        std::iter::once((self.routes.default, self.binary.as_path()))
            .chain(self.other.iter().map(|(k, b, _)| (*k, b.as_path())))
            .collect()
    }

    /// The binary of the primary engine (the one calls without a `skill` use).
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The manager (for its pid, profile dir and launch count).
    pub fn manager(&self) -> &Arc<BrowserManager> {
        &self.manager
    }

    /// The browser tools.
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    /// The form tools (`browser_form_learn`, `browser_form_row`).
    pub fn form_tools(&self) -> &[Arc<dyn Tool>] {
        &self.form_tools
    }

    pub(super) async fn close_session(&self, session_key: &str) {
        for m in self.managers() {
            m.close_session(session_key).await;
        }
    }

    pub(super) async fn shutdown(&self) {
        for m in self.managers() {
            m.shutdown().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn forge_yaml_browser_settings_apply_and_the_environment_still_wins() {
        let proxy: SocketAddr = "127.0.0.1:3128".parse().expect("addr");
        let settings = BrowserSettings {
            max_sessions: Some(3),
            idle_timeout: Some(Duration::from_secs(90)),
            navigation_timeout: Some(Duration::from_secs(300)),
            viewport: Some((1024, 768)),
            headless: Some(true),
            download_max_bytes: Some(1024 * 1024),
            download_max_files: Some(3),
            ..Default::default()
        };
        let env = |k: &str| match k {
            "FORGE_BROWSER_HEADLESS" => Some("false".to_string()),
            "FORGE_BROWSER_BIN" => Some("/opt/chromium/chrome".to_string()),
            _ => None,
        };
        let c = browser_config(proxy, &settings, env);
        assert_eq!(c.proxy, Some(proxy));
        assert_eq!(c.max_sessions, 3);
        assert_eq!(c.idle_timeout, Duration::from_secs(90));
        assert_eq!(c.navigation_timeout, Duration::from_secs(300));
        assert_eq!(c.max_timeout, Duration::from_secs(300), "the cap follows");
        assert_eq!(c.action_timeout, BrowserConfig::default().action_timeout);
        assert_eq!(c.viewport, (1024, 768));
        assert_eq!(c.downloads.max_bytes, 1024 * 1024);
        assert_eq!(c.downloads.max_files, 3);
        assert!(
            !c.headless,
            "FORGE_BROWSER_HEADLESS=false wins over headless: true"
        );
        assert_eq!(c.binary, Some(PathBuf::from("/opt/chromium/chrome")));
        let plain = browser_config(proxy, &BrowserSettings::default(), |_| None);
        let d = BrowserConfig::default();
        assert_eq!(
            (
                plain.max_sessions,
                plain.idle_timeout,
                plain.viewport,
                plain.headless,
                plain.downloads
            ),
            (
                d.max_sessions,
                d.idle_timeout,
                d.viewport,
                d.headless,
                d.downloads
            )
        );
    }

    #[test]
    fn the_engine_comes_from_forge_yaml_then_the_environment() {
        let proxy: SocketAddr = "127.0.0.1:3128".parse().expect("addr");
        let lp = BrowserSettings {
            engine: Some(forge_skills::BrowserEngine::Lightpanda),
            ..BrowserSettings::default()
        };
        let env = |k: &str| match k {
            "FORGE_LIGHTPANDA_BIN" => Some("/opt/lp/lightpanda".to_string()),
            "FORGE_BROWSER_BIN" => Some("/opt/chromium/chrome".to_string()),
            _ => None,
        };
        let c = browser_config(proxy, &lp, env);
        assert_eq!(c.engine, EngineKind::Lightpanda);
        assert_eq!(
            c.binary,
            Some(PathBuf::from("/opt/lp/lightpanda")),
            "the engine's own variable, not FORGE_BROWSER_BIN"
        );
        let chromium_env = |k: &str| (k == "FORGE_BROWSER_ENGINE").then(|| "chromium".to_string());
        assert_eq!(
            browser_config(proxy, &lp, chromium_env).engine,
            EngineKind::Chromium,
            "FORGE_BROWSER_ENGINE wins"
        );
        assert_eq!(
            browser_config(proxy, &BrowserSettings::default(), |_| None).engine,
            EngineKind::Chromium,
            "default"
        );
        assert_eq!(
            BrowserParts::engine(&lp, |_| None).ok(),
            Some(EngineKind::Lightpanda)
        );
        let bad = BrowserParts::engine(&lp, |k| {
            (k == "FORGE_BROWSER_ENGINE").then(|| "webkit".to_string())
        })
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(bad.contains("FORGE_BROWSER_ENGINE=webkit"), "{bad}");
    }

    #[test]
    fn forge_browser_engine_replaces_the_default_and_a_skills_own_choice_stands() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("forge.yaml"),
            "agent_id: e\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: m\n",
        )
        .expect("forge.yaml");
        for (name, engine) in [
            ("former", "      browser_engine: chromium\n"),
            ("reader", ""),
        ] {
            let d = dir.path().join("skills").join(name);
            std::fs::create_dir_all(&d).expect("skill dir");
            std::fs::write(
                d.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: d\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n{engine}---\nx\n"),
            )
            .expect("SKILL.md");
        }
        let agent = Agent::load(dir.path().join("forge.yaml")).expect("agent");
        let plain = BrowserParts::routes_for(&agent, |_| None).expect("routes");
        assert_eq!(plain.engines(), [EngineKind::Chromium], "one engine");
        let lp = |k: &str| (k == "FORGE_BROWSER_ENGINE").then(|| "lightpanda".to_string());
        let mixed = BrowserParts::routes_for(&agent, lp).expect("routes");
        assert_eq!(mixed.default, EngineKind::Lightpanda);
        assert_eq!(
            mixed.skills,
            [
                ("former".to_string(), EngineKind::Chromium),
                ("reader".to_string(), EngineKind::Lightpanda)
            ],
            "the variable moves reader (no choice of its own), not former"
        );
        assert_eq!(
            mixed.engines(),
            [EngineKind::Chromium, EngineKind::Lightpanda]
        );
    }
}
