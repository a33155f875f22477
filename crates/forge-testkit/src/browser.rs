//! Browser test support: the real egress proxy allowlisting a test's sites, a `BrowserManager`
//! on it (confined in a network namespace where asked), the shared per-test-binary fixture
//! ([`Shared`]: one Chromium for all tests of a binary, each test in its own session and so its
//! own browser context), and a process-table probe for "no Chromium left running" checks.
//!
//! A shared fixture lives in a `static` and is never dropped: its temp dirs are removed at
//! process exit ([`remove_at_exit`]) and the manager kills its Chromium and removes its profile at
//! exit on its own, so no Chromium outlives the test binary.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

use forge_browser::{browser_tools, BrowserConfig, BrowserManager, BrowserToolOptions, RefusalLog};
use forge_egress::confine::NsKind;
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyHandle, ProxyOptions};
use forge_tools::{ToolContext, ToolError};
use serde_json::Value;

/// The real egress proxy allowlisting exactly `entries`, with a refusal log as its observer.
pub async fn proxy(entries: &[String]) -> (SocketAddr, ProxyHandle, RefusalLog) {
    let policy = Arc::new(
        EgressPolicy::allowlist(entries.iter().map(String::as_str))
            .expect("the test's allowlist entries are valid"),
    );
    let log = RefusalLog::new();
    let opts = ProxyOptions {
        observer: Some(Arc::new(log.clone())),
        ..ProxyOptions::default()
    };
    let (addr, handle) = EgressProxy::serve(policy, opts)
        .await
        .expect("start the egress proxy");
    (addr, handle, log)
}

/// A manager on the proxy at `addr`, profile dirs under `tmp`, up to 32 sessions.
pub fn manager(addr: SocketAddr, log: RefusalLog, tmp: &Path) -> BrowserManager {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.max_sessions = 32;
    BrowserManager::new(cfg).with_refusals(log)
}

/// A manager like [`manager`] whose Chromium runs confined (its own network namespace, only the
/// proxy reachable).
pub fn confined_manager(
    addr: SocketAddr,
    proxy: &ProxyHandle,
    kind: NsKind,
    log: RefusalLog,
    tmp: &Path,
) -> BrowserManager {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.max_sessions = 32;
    cfg.confine = Some(forge_egress::confine::Confiner::new(proxy.entry(), kind));
    BrowserManager::new(cfg).with_refusals(log)
}

static CLEANUP: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn cleanup_dirs() {
    if let Ok(mut dirs) = CLEANUP.lock() {
        for d in dirs.drain(..) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Remove `p` (a temp dir held by a never-dropped static) when the process exits.
pub fn remove_at_exit(p: &Path) {
    static HOOK: Once = Once::new();
    // SAFETY: registers a plain extern "C" function without captured state.
    HOOK.call_once(|| unsafe {
        libc::atexit(cleanup_dirs);
    });
    if let Ok(mut dirs) = CLEANUP.lock() {
        dirs.push(p.to_path_buf());
    }
}

/// Where Chromium runs in a [`Shared`] fixture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confine {
    /// Unconfined (only the proxy setting keeps its traffic in).
    No,
    /// In a network namespace where this machine offers one (forge's default), else unconfined.
    WhereAvailable,
}

/// One Chromium shared by every test of a test binary: its runtime, the proxy allowlisting the
/// binary's sites, the manager, a files dir for tool calls. Keep it in a `static OnceLock`.
pub struct Shared {
    pub rt: tokio::runtime::Runtime,
    pub manager: Arc<BrowserManager>,
    pub proxy_addr: SocketAddr,
    pub proxy: ProxyHandle,
    pub log: RefusalLog,
    /// The files dir handed to tools in their context.
    pub files: tempfile::TempDir,
    /// Profile dirs live under it.
    pub tmp: tempfile::TempDir,
}

impl Shared {
    /// The fixture for a binary whose sites are allowlisted by `entries` (`127.0.0.1:PORT`), or
    /// `None` after a skip note naming `test` when no Chromium is installed (a panic under
    /// `FORGE_REQUIRE_BROWSER=1`). Chromium itself starts on the first call that needs it.
    pub fn start(test: &str, entries: &[String], confine: Confine) -> Option<Shared> {
        Self::start_engine(test, entries, confine, forge_browser::EngineKind::Chromium)
    }

    /// [`Shared::start`] on `engine`: its binary is required (`gates::require_lightpanda` for
    /// Lightpanda), and the manager launches that engine.
    pub fn start_engine(
        test: &str,
        entries: &[String],
        confine: Confine,
        engine: forge_browser::EngineKind,
    ) -> Option<Shared> {
        let binary = match engine {
            forge_browser::EngineKind::Chromium => crate::gates::require_browser(test)?,
            forge_browser::EngineKind::Lightpanda => crate::gates::require_lightpanda(test)?,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime for the shared browser fixture");
        let tmp = tempfile::tempdir().expect("a temp dir for browser profiles");
        let files = tempfile::tempdir().expect("a files dir for tool calls");
        let (proxy_addr, proxy, log) = rt.block_on(proxy(entries));
        let kind = match (confine, forge_egress::confine::availability()) {
            (Confine::WhereAvailable, forge_egress::confine::Availability::Namespace(k)) => Some(k),
            _ => None,
        };
        let mut config = BrowserConfig::with_proxy(proxy_addr);
        config.temp_root = Some(tmp.path().to_path_buf());
        config.max_sessions = 32;
        config.confine = kind.map(|k| forge_egress::confine::Confiner::new(proxy.entry(), k));
        config.engine = engine;
        config.binary = Some(binary);
        let manager = Arc::new(BrowserManager::new(config).with_refusals(log.clone()));
        remove_at_exit(tmp.path());
        remove_at_exit(files.path());
        Some(Shared {
            rt,
            manager,
            proxy_addr,
            proxy,
            log,
            files,
            tmp,
        })
    }
}

impl Shared {
    /// A tool context for `session` whose files dir is this fixture's.
    pub fn context(&self, session: &str) -> ToolContext {
        ToolContext::new(session, self.files.path())
    }

    /// Run the browser tool `name` (default options) with `input` in `ctx` on this fixture's
    /// runtime: the tool's text, or its error. Panics when there is no such tool (a test typo).
    pub fn run_tool(
        &self,
        ctx: &ToolContext,
        name: &str,
        input: Value,
    ) -> Result<String, ToolError> {
        let tool = browser_tools(self.manager.clone(), BrowserToolOptions::default())
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or_else(|| panic!("no browser tool {name}"));
        self.rt
            .block_on(async { tool.execute(ctx, input).await.map(|o| o.text) })
    }
}

/// Processes whose command line mentions `needle` (a profile dir path), zombies excluded.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains(needle) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim().chars().next().unwrap_or('?'))
                .unwrap_or('?');
            if state != 'Z' {
                out.push(pid);
            }
        }
    }
    out
}

/// Ports in LISTEN state on 127.0.0.1 in the network namespace of `pid` (`self` for ours).
pub fn loopback_listeners(pid: &str) -> std::collections::HashSet<u16> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state) = (f.get(1)?, f.get(3)?);
            let (ip, port) = local.split_once(':')?;
            (*state == "0A" && ip == "0100007F").then(|| u16::from_str_radix(port, 16).ok())?
        })
        .collect()
}
