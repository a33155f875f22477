//! The narrow adapter between tool assembly and the egress and browser crates: building the egress
//! policy and client, starting the proxy, finding Chromium and building the browser manager.
//! Everything assembly needs from those crates goes through here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::proxy::{EgressProxy, ProxyHandle, ProxyOptions};
use forge_egress::{EgressMode, EgressPolicy, EgressSettings};
use forge_skills::{expand_domains, Agent, BrowserView};
use forge_tools::Tool;

use super::{AssembleError, AssembleOptions};

/// The browser tool names (for the "absent" reasons when no skill declares the browser).
pub const BROWSER_TOOL_NAMES: &[&str] = &[
    "browser_navigate",
    "browser_state",
    "browser_click",
    "browser_fill",
    "browser_select",
    "browser_press",
    "browser_hover",
    "browser_back",
    "browser_tabs",
    "browser_extract",
    "browser_screenshot",
];

/// Knobs for the egress and browser parts (test resolvers and CAs, the proxy observer).
#[derive(Clone, Default)]
pub struct DepOptions {
    /// Options of the egress client used by `http_request`/`web_fetch` (resolver, limits, roots).
    pub client: ClientOptions,
    /// Options of the egress proxy (resolver, observer, limits).
    pub proxy: ProxyOptions,
}

/// The egress settings for `agent`: forge.yaml `egress`, every active skill's `egress_domains`
/// (with `$VAR` entries expanded from the environment), plus forge's own and command-line entries.
pub fn egress_settings(
    agent: &Agent,
    forge_entries: &[(String, String)],
    cli_entries: &[String],
) -> EgressSettings {
    let e = &agent.config.egress;
    let mode = match e.mode {
        forge_skills::EgressMode::DenyAll => EgressMode::DenyAll,
        forge_skills::EgressMode::Allowlist => EgressMode::Allowlist,
        forge_skills::EgressMode::DevOpen => EgressMode::DevOpen,
    };
    let mut skill_domains = Vec::new();
    for skill in &agent.skills {
        if let Some(f) = &skill.forge {
            for d in expand_domains(&f.egress_domains, |k| std::env::var(k).ok()) {
                skill_domains.push((skill.name.clone(), d));
            }
        }
    }
    EgressSettings {
        mode: Some(mode),
        allowed_domains: e.allowed_domains.clone(),
        allow_private_ips: e.allow_private_ips,
        allowed_private_cidrs: e.allowed_private_cidrs.clone(),
        skill_domains,
        cli_entries: cli_entries.to_vec(),
        forge_entries: forge_entries.to_vec(),
        ..Default::default()
    }
}

/// The agent's egress policy, the client on it, and the proxy when one runs. The same policy value
/// backs the client and the proxy.
pub struct EgressParts {
    policy: Arc<EgressPolicy>,
    client: Arc<EgressClient>,
    proxy: Option<ProxyHandle>,
}

impl EgressParts {
    pub(super) fn build(agent: &Agent, opts: &AssembleOptions) -> Result<Self, AssembleError> {
        let settings = egress_settings(agent, &opts.forge_egress_entries, &opts.cli_egress_entries);
        let policy =
            Arc::new(EgressPolicy::new(settings).map_err(|e| {
                AssembleError::Egress(format!("{}: {e}", agent.config.path.display()))
            })?);
        let client = Arc::new(EgressClient::new(policy.clone(), opts.deps.client.clone()));
        Ok(Self {
            policy,
            client,
            proxy: None,
        })
    }

    pub(super) async fn start_proxy(
        &mut self,
        opts: &AssembleOptions,
    ) -> Result<(), AssembleError> {
        if self.proxy.is_some() {
            return Ok(());
        }
        let (_addr, handle) = EgressProxy::serve(self.policy.clone(), opts.deps.proxy.clone())
            .await
            .map_err(|e| AssembleError::Proxy(e.to_string()))?;
        self.proxy = Some(handle);
        Ok(())
    }

    /// The policy (one value for every enforcement point).
    pub fn policy(&self) -> &Arc<EgressPolicy> {
        &self.policy
    }

    /// The egress client (the one policy), for tool contexts and model providers.
    pub fn client(&self) -> Option<Arc<EgressClient>> {
        Some(self.client.clone())
    }

    /// The proxy address, when a proxy was started.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.proxy.as_ref().map(|p| p.addr())
    }

    /// `http://127.0.0.1:PORT` of the proxy, when one was started.
    pub fn proxy_url(&self) -> Option<String> {
        self.proxy.as_ref().map(|p| p.url())
    }

    pub(super) async fn shutdown(self) {
        if let Some(p) = self.proxy {
            p.shutdown().await;
        }
    }
}

/// The browser manager and its tools.
pub struct BrowserParts {
    binary: PathBuf,
    tools: Vec<Arc<dyn Tool>>,
}

impl BrowserParts {
    pub(super) async fn build(
        view: &BrowserView,
        _egress: &EgressParts,
        _files_dir: &Path,
        _opts: &AssembleOptions,
    ) -> Result<Self, AssembleError> {
        Err(AssembleError::Browser {
            skills: view.skills.join(", "),
            message: "browser support is not available in this build yet".into(),
        })
    }

    /// The Chromium binary that will be launched.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The browser tools.
    pub fn tools(&self) -> &[Arc<dyn Tool>] {
        &self.tools
    }

    pub(super) async fn close_session(&self, _session_key: &str) {}

    pub(super) async fn shutdown(self) {}
}
