//! [`BrowserConfig`]: how the manager launches Chromium (proxy, binary, headless, limits, timeouts).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How the [`crate::BrowserManager`] launches and limits Chromium.
#[derive(Debug, Clone)]
pub struct BrowserConfig {
    /// The egress proxy every browser byte leaves through. Required: the manager refuses to start
    /// a browser without it (the browser never runs unproxied). Must be a loopback address.
    pub proxy: Option<SocketAddr>,
    /// The browser binary; `None` means [`crate::find_browser_binary`] at launch time.
    pub binary: Option<PathBuf>,
    /// Headless (the default). `FORGE_BROWSER_HEADLESS=false|0` turns it off for local debugging.
    pub headless: bool,
    /// Where the throwaway profile dir is created (a fresh temp dir inside it). Defaults to the
    /// system temp dir, which is outside the agent's workdir.
    pub temp_root: Option<PathBuf>,
    /// Most concurrent sessions (browser contexts). Default 8.
    pub max_sessions: usize,
    /// A session unused this long is closed. Default 15 minutes.
    pub idle_timeout: Duration,
    /// Time limit for navigations (navigate, back, clicks that navigate). Default 45 s.
    pub navigation_timeout: Duration,
    /// Time limit for other actions. Default 30 s.
    pub action_timeout: Duration,
    /// Upper bound for a skill's `timeout_hint`. Default 120 s.
    pub max_timeout: Duration,
    /// Time allowed for Chromium to start and print its DevTools address. Default 20 s.
    pub launch_timeout: Duration,
    /// Viewport size in CSS pixels. Default 1280x800.
    pub viewport: (u32, u32),
    /// Spawn Chromium in a network namespace of its own whose only reachable address is the
    /// proxy (forge-egress `confine`; see `devtools_relay.rs`). `None`: proxy flag only.
    pub confine: Option<forge_egress::confine::Confiner>,
    /// How long `browser_handoff` waits for a person to finish. Default 10 minutes.
    pub handoff_timeout: Duration,
    /// Download caps (forge.yaml `browser.downloads`).
    pub downloads: DownloadLimits,
    /// The engine (forge.yaml `browser.engine`, `FORGE_BROWSER_ENGINE`). Default Chromium.
    pub engine: crate::engine::EngineKind,
}

impl Default for BrowserConfig {
    fn default() -> Self {
        Self {
            proxy: None,
            binary: None,
            headless: true,
            temp_root: None,
            max_sessions: 8,
            idle_timeout: Duration::from_secs(15 * 60),
            navigation_timeout: Duration::from_secs(45),
            action_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(120),
            launch_timeout: Duration::from_secs(20),
            viewport: (1280, 800),
            confine: None,
            handoff_timeout: Duration::from_secs(600),
            downloads: DownloadLimits::default(),
            engine: crate::engine::EngineKind::Chromium,
        }
    }
}

impl BrowserConfig {
    /// The defaults with `proxy` set, and `FORGE_BROWSER_BIN` / `FORGE_BROWSER_HEADLESS` applied.
    pub fn with_proxy(proxy: SocketAddr) -> Self {
        Self {
            proxy: Some(proxy),
            ..Self::default()
        }
        .apply_env()
    }

    /// Apply `FORGE_BROWSER_BIN` and `FORGE_BROWSER_HEADLESS` from the environment.
    pub fn apply_env(self) -> Self {
        self.apply_env_from(|k| std::env::var(k).ok())
    }

    /// Apply `FORGE_BROWSER_ENGINE`, then the engine's binary variable (`FORGE_BROWSER_BIN` for
    /// Chromium, `FORGE_LIGHTPANDA_BIN` for Lightpanda) and `FORGE_BROWSER_HEADLESS`, as `env`
    /// gives them (they win over forge.yaml `browser:`). A bad `FORGE_BROWSER_ENGINE` is left
    /// out here; the runtime refuses it at startup (`engine::engine_from_env`).
    pub fn apply_env_from(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        if let Ok(Some(kind)) = crate::engine::engine_from_env(&env) {
            self.engine = kind;
        }
        let bin_var = match self.engine {
            crate::engine::EngineKind::Chromium => "FORGE_BROWSER_BIN",
            crate::engine::EngineKind::Lightpanda => crate::engine::LIGHTPANDA_BIN_VAR,
        };
        if let Some(bin) = env(bin_var).filter(|v| !v.is_empty()) {
            self.binary = Some(PathBuf::from(bin));
        }
        if let Some(v) = env("FORGE_BROWSER_HEADLESS") {
            let v = v.trim().to_ascii_lowercase();
            self.headless = !(v == "false" || v == "0" || v == "no" || v == "off");
        }
        self
    }
}

/// The download caps (forge.yaml `browser.downloads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownloadLimits {
    /// Largest download kept, in bytes; a larger one is cancelled. Default 50 MiB.
    pub max_bytes: u64,
    /// Most downloads one session may start; the next is cancelled. Default 20.
    pub max_files: usize,
}

impl Default for DownloadLimits {
    fn default() -> Self {
        Self {
            max_bytes: 50 * 1024 * 1024,
            max_files: 20,
        }
    }
}
