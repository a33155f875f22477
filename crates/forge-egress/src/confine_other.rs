//! Network confinement where it does not exist (every system but Linux): the same API as
//! `confine.rs`, with [`availability`] always proxy-only, so forge runs its children proxy-only and
//! says so (`security.confinement: required` then refuses to start). Compiled on Linux too, under
//! test, so the two keep the same API.

use std::io;
use std::os::fd::OwnedFd;

use crate::proxy::ProxyEntry;

/// The port of the proxy listener inside a confined child's namespace.
pub(crate) const CHILD_PROXY_PORT: u16 = 3128;
/// The proxy URL a confined child gets in `HTTP(S)_PROXY`.
pub(crate) const CHILD_PROXY_URL: &str = "http://127.0.0.1:3128";
/// Setting this variable (to a reason) forces proxy-only mode.
pub(crate) const FORCE_ENV: &str = "FORGE_CONFINEMENT_UNAVAILABLE";
/// The fix to print when confinement is required but unavailable.
pub(crate) const FIX: &str = "run forge on Linux for network confinement, or set forge.yaml \
     `security.confinement: auto` to run proxy-only";

const WHY: &str = "network namespaces exist only on Linux";

/// How a confined child enters its namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NsKind {
    Net,
    UserNet,
}

impl NsKind {
    /// A short name for messages.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            NsKind::Net => "network namespace",
            NsKind::UserNet => "user + network namespace",
        }
    }
}

/// Whether confinement can be had in this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Availability {
    Namespace(NsKind),
    ProxyOnly(String),
}

/// Always proxy-only here.
pub(crate) fn availability() -> Availability {
    match std::env::var_os(FORCE_ENV).filter(|v| !v.is_empty()) {
        Some(reason) => {
            Availability::ProxyOnly(format!("{FORCE_ENV} is set: {}", reason.to_string_lossy()))
        }
        None => Availability::ProxyOnly(WHY.into()),
    }
}

/// Always fails here.
pub(crate) fn probe() -> Result<NsKind, String> {
    Err(WHY.into())
}

/// What to make inside a child's namespace.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub listen_ports: Vec<u16>,
    pub dial_sockets: usize,
}

impl Plan {
    /// Only the proxy listener.
    pub(crate) fn proxy_only() -> Self {
        Plan {
            listen_ports: vec![CHILD_PROXY_PORT],
            dial_sockets: 0,
        }
    }
}

/// Why confining a child failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum ConfineError {
    #[error("cannot confine a child: {0}")]
    Unsupported(&'static str),
}

/// Confines children on one proxy (never constructed usefully here: [`availability`] is
/// proxy-only).
#[derive(Clone)]
pub(crate) struct Confiner {
    kind: NsKind,
}

impl std::fmt::Debug for Confiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Confiner")
            .field("kind", &self.kind)
            .finish()
    }
}

impl Confiner {
    pub(crate) fn new(_entry: ProxyEntry, kind: NsKind) -> Self {
        Confiner { kind }
    }

    pub(crate) fn kind(&self) -> NsKind {
        self.kind
    }

    /// Always fails here.
    pub(crate) fn prepare(
        &self,
        _cmd: &mut std::process::Command,
        _plan: &Plan,
    ) -> Result<PendingChild, ConfineError> {
        Err(ConfineError::Unsupported(WHY))
    }
}

/// A confined child between `prepare` and `spawn` (never made here).
pub(crate) struct PendingChild {
    _private: (),
}

impl PendingChild {
    pub(crate) fn attach(self) -> Result<ConfinedChild, ConfineError> {
        Err(ConfineError::Unsupported(WHY))
    }

    pub(crate) fn failure(self, _spawn_error: io::Error) -> ConfineError {
        ConfineError::Unsupported(WHY)
    }
}

/// A running confined child's end in forge (never made here).
#[derive(Debug)]
pub(crate) struct ConfinedChild {
    pub spare: Vec<(u16, std::net::TcpListener)>,
    pub dial: Vec<OwnedFd>,
}

impl ConfinedChild {
    pub(crate) fn serve_spare(&mut self) -> Result<Option<u16>, ConfineError> {
        Ok(None)
    }
}

/// Always fails here.
pub(crate) async fn connect_inside(
    _sock: OwnedFd,
    _port: u16,
) -> io::Result<tokio::net::TcpStream> {
    Err(io::Error::other(WHY))
}
