//! Errors of the crate: [`BrowserError`] (the browser could not do what was asked) and
//! [`ActionError`] (an error inside one browser action, turned into a [`ToolError`] at the end).
//!
//! Both live here, below the manager and the tools, so neither imports the other for them.

use std::time::Duration;

use forge_tools::ToolError;

use crate::observe::PageError;

/// Why the browser could not do what was asked. Messages say what happened and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrowserError {
    /// No proxy address: the browser never runs unproxied.
    #[error("the browser refuses to start without an egress proxy address (BrowserConfig.proxy is not set); the runtime must start the egress proxy first")]
    NoProxy,
    /// The proxy address is not on loopback.
    #[error("the egress proxy address {0} is not a loopback address; the browser only uses forge's own loopback proxy")]
    ProxyNotLoopback(std::net::SocketAddr),
    /// No browser binary.
    #[error(transparent)]
    NotFound(#[from] crate::binary::BrowserNotFound),
    /// The browser did not start.
    #[error("the browser ({binary}) failed to start: {reason}")]
    Launch { binary: String, reason: String },
    /// The browser died or hung during the call: what happened, naming the engine
    /// (`Running::crash_message`), and what it takes with it.
    #[error("{0}")]
    Crashed(String),
    /// Too many live sessions (each conversation keeps its own until it is closed or idle).
    #[error("{0} browser sessions are already open, the limit (forge.yaml browser.max_sessions); a session is a conversation's browser (A2A contextId) and stays open until browser_close, a message with metadata.forge.close_browser: true, or browser.idle_timeout without use; close one of them or try again later")]
    TooManySessions(usize),
    /// A session's egress scope changed while its browser context is open.
    #[error("browser session {0} is open with another egress scope (proxy); it is not reused across scopes: close it (it ends with its task) and start again")]
    ScopeChanged(String),
    /// A CDP command failed.
    #[error("browser command failed: {0}")]
    Cdp(String),
    /// The workspace's downloads folder cannot be used.
    #[error("downloads cannot go into the workspace: {0}")]
    Downloads(String),
}

impl From<chromiumoxide::error::CdpError> for BrowserError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        BrowserError::Cdp(e.to_string())
    }
}

/// An error inside a browser action, turned into a [`ToolError`] at the end.
#[derive(Debug)]
#[non_exhaustive]
pub enum ActionError {
    Browser(BrowserError),
    Timeout(Duration),
    Tool(ToolError),
}

impl From<BrowserError> for ActionError {
    fn from(e: BrowserError) -> Self {
        ActionError::Browser(e)
    }
}
impl From<ToolError> for ActionError {
    fn from(e: ToolError) -> Self {
        ActionError::Tool(e)
    }
}
impl From<PageError> for ActionError {
    fn from(e: PageError) -> Self {
        ActionError::Tool(ToolError::Failed(format!("browser: {e}")))
    }
}
impl From<chromiumoxide::error::CdpError> for ActionError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        ActionError::Browser(BrowserError::Cdp(e.to_string()))
    }
}
impl From<ActionError> for ToolError {
    fn from(e: ActionError) -> Self {
        match e {
            ActionError::Browser(b) => ToolError::Failed(b.to_string()),
            ActionError::Timeout(d) => ToolError::Timeout(d),
            ActionError::Tool(t) => t,
        }
    }
}

/// The result of a browser action.
pub(crate) type R<T> = Result<T, ActionError>;

/// The model gave an unusable input.
pub(crate) fn invalid(msg: impl Into<String>) -> ActionError {
    ActionError::Tool(ToolError::InvalidInput(msg.into()))
}

/// The action could not be done.
pub(crate) fn failed(msg: impl Into<String>) -> ActionError {
    ActionError::Tool(ToolError::Failed(msg.into()))
}
