//! The narrow adapter between tool assembly and the egress and browser crates: building the egress
//! policy and client, starting the proxy, finding Chromium and building the browser manager.
//! Everything assembly needs from those crates goes through here.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use forge_skills::{Agent, BrowserView};
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

/// Knobs for the egress and browser parts (test resolvers, observers, browser flags).
#[derive(Clone, Default)]
pub struct DepOptions {}

/// The agent's egress policy, the client on it, and the proxy when one runs.
pub struct EgressParts {
    client: Option<Arc<forge_egress::client::EgressClient>>,
    proxy_addr: Option<SocketAddr>,
}

impl EgressParts {
    pub(super) fn build(_agent: &Agent, _opts: &AssembleOptions) -> Result<Self, AssembleError> {
        Ok(Self {
            client: None,
            proxy_addr: None,
        })
    }

    pub(super) async fn start_proxy(
        &mut self,
        _opts: &AssembleOptions,
    ) -> Result<(), AssembleError> {
        Err(AssembleError::Proxy(
            "the egress proxy is not available in this build yet".into(),
        ))
    }

    /// The egress client (the one policy), for tool contexts.
    pub fn client(&self) -> Option<Arc<forge_egress::client::EgressClient>> {
        self.client.clone()
    }

    /// The proxy address, when a proxy was started.
    pub fn proxy_addr(&self) -> Option<SocketAddr> {
        self.proxy_addr
    }

    /// `http://127.0.0.1:PORT` of the proxy, when one was started.
    pub fn proxy_url(&self) -> Option<String> {
        self.proxy_addr.map(|a| format!("http://{a}"))
    }

    pub(super) async fn shutdown(self) {}
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
