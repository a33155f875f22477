//! The [`BrowserManager`]: one Chromium per agent, launched lazily through the egress proxy, with
//! one browser context per session, crash/hang detection, relaunch and clean shutdown. Lightpanda
//! keeps one browser context per CDP connection, so on it each session gets a process of its own
//! (same confinement), ended with the session. The glue:
//! the OS process side (flags, environment, spawning, the process group) is in `process.rs`, the
//! sessions side (the live browser's session table, sessions, tabs) in `session.rs`.
//!
//! Invariants kept here:
//! - Chromium is never started without a loopback proxy address; every context is created with
//!   that proxy and `<-loopback>` so loopback goes through the proxy too.
//! - With `config.confine`, Chromium runs in a network namespace of its own whose only reachable
//!   address is the proxy (127.0.0.1:3128 there); its DevTools endpoint lives in there too and
//!   forge reaches it through `devtools_relay.rs`.
//! - Chromium runs in its own process group; shutdown, a detected crash or hang, and `Drop` kill
//!   the whole group and remove the 0700 throwaway profile dir.
//! - A session (a task, a conversation) owns one browser context; its tabs, popups included, live
//!   in that context only.
//! - A session lives until it is closed ([`BrowserManager::close_session`], the `browser_close`
//!   tool), idle for `idle_timeout` (a timer closes it, not only the next call), or the browser
//!   shuts down or crashes; each of these tells the [`SessionClosedHook`] which key closed and
//!   why. `max_sessions` counts live sessions.
//! - A session given its own proxy ([`BrowserManager::set_session_proxy`]: a task's narrowed
//!   egress listener) has its context created with that proxy, and is never handed out for a
//!   different proxy afterwards (the call fails instead of crossing scopes).
//! - Each session records its main-frame document responses (URL and HTTP status) for the task's
//!   result ([`BrowserManager::navigations`]).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::GetVersionParams;
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use chromiumoxide::handler::viewport::Viewport;
use chromiumoxide::handler::HandlerConfig;
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{Mutex, Notify};

use crate::config::BrowserConfig;
use crate::crash::{CrashBook, CrashObserver};
use crate::engine::EngineKind;
use crate::error::ActionError;
use crate::error::BrowserError;
pub use crate::process::{browser_env, launch_args};
use crate::process::{launch_err, register_live, spawn_browser, ProvisionalCleanup};
use crate::profile::{ProfileOrigin, ProfileState, SessionProfile};
use crate::refusals::RefusalLog;
use crate::session::{reap_idle_sessions, with_timeout};
pub use crate::session::{
    CloseReason, Navigation, Running, Session, SessionClosedHook, SessionOptions, SessionState,
    Tab, MAX_NAVIGATIONS,
};

/// One Chromium per agent, launched on first use, with one browser context per session key.
pub struct BrowserManager {
    config: BrowserConfig,
    /// The live browser processes by slot ([`BrowserManager::slot`]): one for every Chromium
    /// session (slot ""), one per session on Lightpanda (slot = the session key).
    running: Mutex<HashMap<String, Arc<Running>>>,
    refusals: Option<RefusalLog>,
    launches: AtomicU64,
    crashes: CrashBook,
    /// Shared with the idle timer, which may outlive a hook change.
    on_close: Arc<StdMutex<Option<SessionClosedHook>>>,
    /// Sessions that must use a proxy of their own (a task's narrowed egress listener).
    session_proxies: StdMutex<HashMap<String, std::net::SocketAddr>>,
    /// Sessions whose context starts from a login profile (taken when the context is created).
    session_profiles: StdMutex<HashMap<String, Arc<SessionProfile>>>,
    /// The tabs being watched or handed to a person (`screencast.rs`).
    live: crate::screencast::LiveTabs,
    /// Hand-offs to a person that wait (`handoff.rs`).
    handoffs: Arc<crate::handoff::Handoffs>,
}

impl BrowserManager {
    /// A manager that will launch Chromium with `config` on first use. Starts nothing now.
    pub fn new(config: BrowserConfig) -> Self {
        Self {
            config,
            running: Mutex::new(HashMap::new()),
            refusals: None,
            launches: AtomicU64::new(0),
            crashes: CrashBook::default(),
            on_close: Arc::new(StdMutex::new(None)),
            session_proxies: StdMutex::new(HashMap::new()),
            session_profiles: StdMutex::new(HashMap::new()),
            live: Default::default(),
            handoffs: Default::default(),
        }
    }

    /// Whether each session has a browser process of its own (Lightpanda: one browser context
    /// per CDP connection) rather than a context in the one shared process (Chromium).
    fn process_per_session(&self) -> bool {
        self.config.engine == EngineKind::Lightpanda
    }

    /// The process slot of session `key`: "" (the shared process) or the key itself.
    fn slot<'k>(&self, key: &'k str) -> &'k str {
        if self.process_per_session() {
            key
        } else {
            ""
        }
    }

    /// The process serving session `key`, if one runs (nothing is launched).
    async fn running_of(&self, key: &str) -> Option<Arc<Running>> {
        self.running.lock().await.get(self.slot(key)).cloned()
    }

    /// A live process, preferring the shared one (for figures: pid, profile dir, launch time).
    async fn any_running(&self) -> Option<Arc<Running>> {
        let g = self.running.lock().await;
        if let Some(r) = g.get("").filter(|r| !r.is_dead()) {
            return Some(r.clone());
        }
        let mut live: Vec<(&String, &Arc<Running>)> =
            g.iter().filter(|(_, r)| !r.is_dead()).collect();
        live.sort_by(|a, b| a.0.cmp(b.0));
        live.first().map(|(_, r)| (*r).clone())
    }

    /// The process id of the browser serving session `key` (its own process on Lightpanda),
    /// if the session is open.
    pub async fn session_pid(&self, key: &str) -> Option<u32> {
        let r = self.running_of(key).await.filter(|r| !r.is_dead())?;
        let open = r.sessions.lock().await.contains_key(key);
        open.then_some(r.pid)
    }

    /// Start session `key`'s browser context from `profile` (its cookies and local storage for
    /// its origins only), when the context is created; `None` forgets it. A session already
    /// open keeps what it has.
    pub fn set_session_profile(&self, key: &str, profile: Option<Arc<SessionProfile>>) {
        let mut m = self
            .session_profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match profile {
            Some(p) => {
                m.insert(key.to_string(), p);
            }
            None => {
                m.remove(key);
            }
        }
    }

    /// The local storage of session `key`'s tabs that show one of `origins` (empty when the
    /// session is not open).
    pub async fn read_session_storage(
        &self,
        key: &str,
        origins: &[ProfileOrigin],
    ) -> std::collections::BTreeMap<String, Vec<(String, String)>> {
        let running = self.running_of(key).await;
        let Some(running) = running else {
            return Default::default();
        };
        let Some(s) = running.sessions.lock().await.get(key).cloned() else {
            return Default::default();
        };
        let pages: Vec<Page> = {
            let st = s.state.lock().await;
            st.tabs.iter().map(|t| t.page.clone()).collect()
        };
        crate::profile::read_storage(&pages, origins).await
    }

    /// The cookies and local storage of session `key` that belong to `origins` (read from its
    /// context and tabs); `None` when the session is not open.
    pub async fn read_session_profile(
        &self,
        key: &str,
        origins: &[ProfileOrigin],
    ) -> Result<Option<ProfileState>, BrowserError> {
        let running = self.running_of(key).await;
        let Some(running) = running else {
            return Ok(None);
        };
        let Some(s) = running.sessions.lock().await.get(key).cloned() else {
            return Ok(None);
        };
        let pages: Vec<Page> = {
            let st = s.state.lock().await;
            st.tabs.iter().map(|t| t.page.clone()).collect()
        };
        crate::profile::read(&running.browser, &s.context_id, &pages, origins)
            .await
            .map(Some)
    }

    /// The live view of session `key`'s active tab (`screencast.rs`), if the session has a tab.
    /// Waits at most a few seconds for a browser call in flight to let go of the session.
    pub async fn live_tab(&self, key: &str) -> Option<Arc<crate::screencast::LiveTab>> {
        let running = self.running_of(key).await?;
        let s = running.sessions.lock().await.get(key).cloned()?;
        let st = tokio::time::timeout(Duration::from_secs(5), s.state.lock())
            .await
            .ok()?;
        let page = st.active_tab().map(|t| t.page.clone())?;
        Some(self.live.get(&page, self.config.viewport))
    }

    /// How many times a screencast was started on this manager's tabs (one per watched stretch).
    pub fn screencast_starts(&self) -> u64 {
        self.live.starts.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The hand-offs to a person waiting on this manager's tabs (`handoff.rs`).
    pub fn handoffs(&self) -> &Arc<crate::handoff::Handoffs> {
        &self.handoffs
    }

    /// Call `hook` whenever a session ends (closed, idle, shutdown, crash). One hook; a later
    /// call replaces it.
    pub fn set_on_session_closed(&self, hook: SessionClosedHook) {
        *self.on_close.lock().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    fn hook(&self) -> Option<SessionClosedHook> {
        self.on_close
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn tell_closed(&self, keys: &[String], why: CloseReason) {
        if let Some(h) = self.hook() {
            for k in keys {
                h(k, why);
            }
        }
    }

    /// Make session `key` use `proxy` (a loopback listener serving a narrowed egress policy)
    /// instead of the agent's proxy; `None` goes back to the agent's. Takes effect when the
    /// session's context is created; a session already open with another proxy is refused
    /// rather than reused (close it first).
    pub fn set_session_proxy(&self, key: &str, proxy: Option<std::net::SocketAddr>) {
        let mut m = self
            .session_proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match proxy {
            Some(p) => {
                m.insert(key.to_string(), p);
            }
            None => {
                m.remove(key);
            }
        }
    }

    /// Tell `observer` about every crash (the runtime's audit log writes `browser_crash`).
    pub fn with_crash_observer(mut self, observer: Arc<dyn CrashObserver>) -> Self {
        self.crashes = CrashBook::with_observer(observer);
        self
    }

    pub(crate) fn crashes(&self) -> &CrashBook {
        &self.crashes
    }

    /// The proxy of its own session `key` was given ([`BrowserManager::set_session_proxy`]).
    fn session_proxy(&self, key: &str) -> Option<std::net::SocketAddr> {
        self.session_proxies
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied()
    }

    /// The main-frame documents session `key` loaded so far (URL, HTTP status), oldest first;
    /// empty when it has no session.
    pub async fn navigations(&self, key: &str) -> Vec<Navigation> {
        let running = self.running_of(key).await;
        let Some(r) = running else {
            return Vec::new();
        };
        let sessions = r.sessions.lock().await;
        sessions
            .get(key)
            .map(|s| {
                s.navigations
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })
            .unwrap_or_default()
    }

    /// Give the manager the proxy's log of recent refusals (wire [`RefusalLog`] as the proxy's
    /// observer) so blocked navigations are reported with the proxy's own reason.
    pub fn with_refusals(mut self, log: RefusalLog) -> Self {
        self.refusals = Some(log);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &BrowserConfig {
        &self.config
    }

    pub(crate) fn refusals(&self) -> Option<&RefusalLog> {
        self.refusals.as_ref()
    }

    /// How many times Chromium was launched (a relaunch after a crash counts).
    pub fn launch_count(&self) -> u64 {
        self.launches.load(Ordering::SeqCst)
    }

    /// The live browser's main process id, if one is running (on Lightpanda, one of the
    /// sessions' processes: [`BrowserManager::session_pid`] names a session's).
    pub async fn browser_pid(&self) -> Option<u32> {
        self.any_running().await.map(|r| r.pid)
    }

    /// The live browser's profile dir, if one is running.
    pub async fn profile_dir(&self) -> Option<PathBuf> {
        self.any_running().await.map(|r| r.profile_path.clone())
    }

    /// Whether Chromium is spawned in a network namespace of its own (forge-egress `confine`).
    pub fn is_confined(&self) -> bool {
        self.config.confine.is_some()
    }

    /// A proxy address inside Chromium's network namespace, served by forge's proxy with its
    /// policy (launching Chromium when none runs). `None` when Chromium is not confined (its
    /// contexts then reach the proxy on forge's own loopback) or every spare listener is in use.
    pub async fn proxy_in_browser_namespace(
        &self,
    ) -> Result<Option<std::net::SocketAddr>, BrowserError> {
        let running = self.running_for("").await?;
        match &running.spare {
            Some(spare) => spare.serve_one().map_err(BrowserError::Cdp),
            None => Ok(None),
        }
    }

    /// A proxy listener inside the network namespace of the browser that will serve session
    /// `key`, for that session's own proxy (launching the browser when none runs: on Lightpanda,
    /// the session's own process). `None` when the browser is not confined (a session's own
    /// proxy is then a listener on forge's loopback). An error when every spare is taken.
    pub async fn namespace_slot(
        &self,
        key: &str,
    ) -> Result<Option<crate::devtools_relay::NamespaceSlot>, BrowserError> {
        if !self.is_confined() {
            // Nothing to launch for: the session's own proxy is on forge's loopback.
            return Ok(None);
        }
        let running = self.running_for(key).await?;
        match &running.spare {
            Some(spare) => spare.take().map(Some).ok_or_else(|| {
                BrowserError::Cdp(format!(
                    "every one of the {} proxy listeners inside the browser's network namespace is in use by a session with a scope of its own; close a session (browser_close, close_browser) and retry",
                    crate::devtools_relay::SPARE_PROXIES
                ))
            }),
            None => Ok(None),
        }
    }

    /// The time the current browser took from spawn to a usable CDP connection.
    pub async fn launch_duration(&self) -> Option<Duration> {
        self.any_running().await.map(|r| r.launched_in)
    }

    /// Whether Nagle is off on every one of forge's CDP connections to the process serving
    /// session `key` (`nodelay.rs`; on a confined engine, the connections to its DevTools relay);
    /// `None` when no process runs or no connection to it is found.
    pub async fn cdp_nagle_off(&self, key: &str) -> Option<bool> {
        let running = self.running_of(key).await?;
        let peer = crate::nodelay::ws_peer(running.browser.websocket_address())?;
        crate::nodelay::all_off_to(peer)
    }

    /// Launch the browser process that will serve session `key` (the shared one on Chromium,
    /// the session's own on Lightpanda) when none is alive, without creating the session: lets
    /// a caller (the benches) time the launch apart from the session set-up.
    pub async fn launch_for(&self, key: &str) -> Result<(), BrowserError> {
        self.running_for(key).await.map(|_| ())
    }

    /// The browser process serving session `key` (the shared one on Chromium, the session's own
    /// on Lightpanda), launching one when none is alive.
    pub(crate) async fn running_for(&self, key: &str) -> Result<Arc<Running>, BrowserError> {
        let slot = self.slot(key).to_string();
        let mut guard = self.running.lock().await;
        // Processes that ended with their session (retired) are dropped from the table.
        let ended: Vec<String> = guard
            .iter()
            .filter(|(_, r)| r.is_dead() && r.is_retired())
            .map(|(k, _)| k.clone())
            .collect();
        for k in ended {
            guard.remove(&k);
        }
        if let Some(r) = guard.get(&slot) {
            if !r.is_dead() {
                return Ok(r.clone());
            }
            // Dead: record the crash (each of its sessions' next call says so), clean up what
            // is left, then relaunch.
            let old = guard.remove(&slot);
            if let Some(old) = old {
                self.crashes.record(old.crash_record(true).await);
                let keys: Vec<String> = old.sessions.lock().await.keys().cloned().collect();
                self.tell_closed(&keys, CloseReason::Crashed);
                tokio::task::spawn_blocking(move || old.kill_and_clean())
                    .await
                    .ok();
            }
        }
        // One process per session: max_sessions bounds the processes.
        if self.process_per_session() && guard.len() >= self.config.max_sessions {
            return Err(BrowserError::TooManySessions(self.config.max_sessions));
        }
        let r = Arc::new(self.launch().await?);
        self.launches.fetch_add(1, Ordering::SeqCst);
        // Idle sessions are closed on a timer, not only when the next browser call arrives. The
        // task holds the browser weakly and ends with it.
        let weak = Arc::downgrade(&r);
        let idle = self.config.idle_timeout;
        let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        let hook = self.on_close.clone();
        let per_session = self.process_per_session();
        let born = Instant::now();
        let reaper = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(running) = weak.upgrade() else {
                    return;
                };
                if running.is_dead() {
                    return;
                }
                let h = hook.lock().unwrap_or_else(|p| p.into_inner()).clone();
                reap_idle_sessions(&running, idle, h.as_ref()).await;
                // A session's own process ends with it (idle included); one never used by a
                // session ends after the idle time too.
                if per_session && born.elapsed() > idle && running.sessions.lock().await.is_empty()
                {
                    tokio::task::spawn_blocking(move || running.retire());
                    return;
                }
            }
        });
        r.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(reaper);
        // Downloads of every session are followed from the start (`downloads.rs`).
        let streams = crate::downloads::subscribe(&r.browser).await?;
        let watcher = tokio::spawn(crate::downloads::watch(Arc::downgrade(&r), streams));
        r.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(watcher);
        guard.insert(slot, r.clone());
        Ok(r)
    }

    /// The session for `key`, created (with a fresh browser context and one blank tab) if needed.
    pub async fn session(&self, key: &str) -> Result<Arc<Session>, BrowserError> {
        self.session_with(key, &SessionOptions::default()).await
    }

    /// The session for `key`; when there is none, one is created with `options` (its own proxy,
    /// its scope). An existing session is returned as it is, with what it was created with.
    pub async fn session_with(
        &self,
        key: &str,
        options: &SessionOptions,
    ) -> Result<Arc<Session>, BrowserError> {
        if let Some(p) = options.proxy {
            if !p.ip().is_loopback() {
                return Err(BrowserError::ProxyNotLoopback(p));
            }
        }
        let running = self.running_for(key).await?;
        self.reap_idle(&running).await;
        let mut sessions = running.sessions.lock().await;
        // The session's own proxy (a task's narrowed listener) if it has one, else the one
        // every context uses (the agent's proxy, or 127.0.0.1:3128 inside a confined Chromium's
        // namespace).
        let proxy = options
            .proxy
            .or_else(|| self.session_proxy(key))
            .unwrap_or(running.context_proxy);
        if !proxy.ip().is_loopback() {
            return Err(BrowserError::ProxyNotLoopback(proxy));
        }
        if let Some(s) = sessions.get(key) {
            if s.proxy != proxy {
                return Err(BrowserError::ScopeChanged(key.to_string()));
            }
            s.touch();
            return Ok(s.clone());
        }
        if sessions.len() >= self.config.max_sessions {
            return Err(BrowserError::TooManySessions(self.config.max_sessions));
        }
        // Lightpanda keeps one browser context per CDP connection: the session's own process
        // (`running_for` gave it one) serves no other session.
        if self.process_per_session() && !sessions.is_empty() {
            return Err(BrowserError::Cdp(format!(
                "the {} process of another session was handed to session {key}; this is a bug",
                running.engine
            )));
        }
        let params = CreateBrowserContextParams::builder()
            .dispose_on_detach(true)
            .proxy_server(format!("http://{proxy}"))
            .proxy_bypass_list("<-loopback>")
            .build();
        let ctx = with_timeout(
            Duration::from_secs(10),
            running.browser.create_browser_context(params),
        )
        .await?;
        // Downloads are refused until a tool call names the workspace they go into
        // (`downloads::enable`). Events stay on: the flag belongs to the whole browser
        // connection, and a call with it off stops the events of every session's downloads,
        // those in flight included (their completion was never told).
        let deny = chromiumoxide::cdp::browser_protocol::browser::SetDownloadBehaviorParams::builder()
            .behavior(chromiumoxide::cdp::browser_protocol::browser::SetDownloadBehaviorBehavior::Deny)
            .browser_context_id(ctx.clone())
            .events_enabled(true)
            .build()
            .map_err(BrowserError::Cdp)?;
        if running.engine == EngineKind::Chromium {
            with_timeout(Duration::from_secs(10), running.browser.execute(deny)).await?;
        }
        let page = with_timeout(
            Duration::from_secs(10),
            running.browser.new_page(
                CreateTargetParams::builder()
                    .url("about:blank")
                    .browser_context_id(ctx.clone())
                    .build()
                    .map_err(BrowserError::Cdp)?,
            ),
        )
        .await?;
        let downloads = Arc::new(crate::downloads::SessionDownloads::default());
        running.downloads.add(&ctx, downloads.clone());
        let navigations = Arc::new(StdMutex::new(Vec::new()));
        let mut state = SessionState {
            tabs: Vec::new(),
            active: 0,
            clipboard: String::new(),
            navigations: navigations.clone(),
            next_tab: 1,
            known: HashSet::new(),
        };
        let profile = self
            .session_profiles
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
        if let Some(profile) = &profile {
            if let Err(e) = crate::profile::restore(&running.browser, &ctx, &page, profile).await {
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    running.browser.dispose_browser_context(ctx.clone()),
                )
                .await;
                return Err(e);
            }
        }
        state.add_tab(page).await;
        let s = Arc::new(Session {
            key: key.to_string(),
            context_id: ctx,
            navigations,
            running: running.clone(),
            state: Mutex::new(state),
            last_used: StdMutex::new(Instant::now()),
            proxy,
            scope: options.scope.clone(),
            downloads: downloads.clone(),
        });
        sessions.insert(key.to_string(), s.clone());
        Ok(s)
    }

    /// Whether a live session `key` exists (nothing is launched or created).
    pub async fn has_session(&self, key: &str) -> bool {
        let running = self.running_of(key).await;
        match running {
            Some(r) if !r.is_dead() => r.sessions.lock().await.contains_key(key),
            _ => false,
        }
    }

    /// The active tab's page of session `key`, if the session exists (for diagnostics and the
    /// benchmark's accessibility-tree comparison; tools never hand pages out).
    pub async fn active_page(&self, key: &str) -> Option<Page> {
        let running = self.running_of(key).await?;
        let s = running.sessions.lock().await.get(key).cloned()?;
        let st = s.state.lock().await;
        st.active_tab().map(|t| t.page.clone())
    }

    /// Close the session `key` (its context, tabs, cookies and storage). Unknown keys are a no-op.
    /// Returns whether a session was open.
    pub async fn close_session(&self, key: &str) -> bool {
        self.crashes.forget(key);
        if self.process_per_session() {
            // The session's own process ends with it (gone when this returns).
            let Some(running) = self.running.lock().await.remove(key) else {
                return false;
            };
            let was_open = running.sessions.lock().await.remove(key).is_some();
            tokio::task::spawn_blocking(move || running.retire())
                .await
                .ok();
            if was_open {
                self.tell_closed(&[key.to_string()], CloseReason::Closed);
            }
            return was_open;
        }
        let running = self.running_of(key).await;
        let Some(running) = running else { return false };
        let s = running.sessions.lock().await.remove(key);
        match s {
            Some(s) => {
                s.dispose().await;
                self.tell_closed(&[key.to_string()], CloseReason::Closed);
                true
            }
            None => false,
        }
    }

    /// Number of open sessions.
    pub async fn session_count(&self) -> usize {
        let running: Vec<Arc<Running>> = self.running.lock().await.values().cloned().collect();
        let mut n = 0;
        for r in running.iter().filter(|r| !r.is_dead()) {
            n += r.sessions.lock().await.len();
        }
        n
    }

    async fn reap_idle(&self, running: &Arc<Running>) {
        reap_idle_sessions(running, self.config.idle_timeout, self.hook().as_ref()).await;
    }

    /// Stop Chromium: close it, kill its process group, remove the profile dir. Idempotent; the
    /// next browser call launches a new one.
    pub async fn shutdown(&self) {
        let all: Vec<Arc<Running>> = self.running.lock().await.drain().map(|(_, r)| r).collect();
        for r in all {
            if r.is_retired() {
                continue;
            }
            let keys: Vec<String> = r.sessions.lock().await.keys().cloned().collect();
            self.tell_closed(&keys, CloseReason::Shutdown);
            if r.is_dead() {
                // Crashed and never replaced: audited, with no notices (no call will follow).
                self.crashes.record(r.crash_record(false).await);
            } else if r.engine == EngineKind::Chromium {
                // Lightpanda has no Browser.close: its process group is killed below.
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    r.browser.execute(
                        chromiumoxide::cdp::browser_protocol::browser::CloseParams::default(),
                    ),
                )
                .await;
            }
            tokio::task::spawn_blocking(move || r.kill_and_clean())
                .await
                .ok();
        }
    }

    /// Run `op` against the live browser `running`, failing promptly if Chromium dies or stops
    /// answering, and after `limit` in any case.
    pub(crate) async fn guard<T, F>(
        &self,
        running: &Arc<Running>,
        limit: Duration,
        op: F,
    ) -> Result<T, ActionError>
    where
        F: std::future::Future<Output = Result<T, ActionError>>,
    {
        if running.is_dead() {
            return Err(ActionError::Browser(BrowserError::Crashed(
                running.crash_message(),
            )));
        }
        let started = Instant::now();
        let watchdog = async {
            // Process exit or lost connection is noticed at once (notify); a hang is noticed by
            // a liveness ping that gets no answer within 3 s, checked every 2 s after 3 s.
            let mut next_ping = started + Duration::from_secs(3);
            // Lightpanda answers CDP on the thread that runs the page's scripts: a busy page
            // delays the answer for seconds, so only its exit or a lost connection means dead.
            let pings = running.engine.engine().ping_means_dead();
            loop {
                let notified = running.death.notified();
                if running.is_dead() {
                    break;
                }
                tokio::select! {
                    _ = notified => {}
                    _ = tokio::time::sleep_until(next_ping.into()), if pings => {
                        let ping = tokio::time::timeout(
                            Duration::from_secs(3),
                            running.browser.execute(GetVersionParams::default()),
                        )
                        .await;
                        if !matches!(ping, Ok(Ok(_))) {
                            running.mark_dead("stopped responding (no answer to a liveness check within 3 s) and was killed");
                            let r = running.clone();
                            tokio::task::spawn_blocking(move || r.kill_and_clean());
                        }
                        next_ping = Instant::now() + Duration::from_secs(2);
                    }
                }
                if running.is_dead() {
                    break;
                }
            }
            ActionError::Browser(BrowserError::Crashed(running.crash_message()))
        };
        let op = async {
            let r = op.await;
            if r.is_err() && !running.is_dead() {
                // A command that failed because Chromium is going away: give the exit watcher a
                // moment so the error says so instead of "oneshot canceled".
                let notified = running.death.notified();
                let _ = tokio::time::timeout(Duration::from_millis(500), notified).await;
            }
            match r {
                Err(_) if running.is_dead() => Err(ActionError::Browser(BrowserError::Crashed(
                    running.crash_message(),
                ))),
                other => other,
            }
        };
        tokio::select! {
            r = op => r,
            e = watchdog => Err(e),
            _ = tokio::time::sleep(limit) => Err(ActionError::Timeout(limit)),
        }
    }

    async fn launch(&self) -> Result<Running, BrowserError> {
        let proxy = self.config.proxy.ok_or(BrowserError::NoProxy)?;
        if !proxy.ip().is_loopback() {
            return Err(BrowserError::ProxyNotLoopback(proxy));
        }
        let engine = self.config.engine;
        let binary = match &self.config.binary {
            Some(b) => engine.engine().find_binary_in(Some(b.clone()), None)?,
            None => engine.engine().find_binary()?,
        };
        let started = Instant::now();
        let mut tmp = tempfile::Builder::new();
        tmp.prefix("forge-browser-");
        let dir = match &self.config.temp_root {
            Some(root) => tmp.tempdir_in(root),
            None => tmp.tempdir(),
        }
        .map_err(|e| launch_err(&binary, format!("cannot create the profile dir: {e}")))?;
        let profile = dir.path().join("profile");
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
                .map_err(|e| launch_err(&binary, format!("cannot chmod the profile dir: {e}")))?;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&profile)
                .map_err(|e| launch_err(&binary, format!("cannot create the profile dir: {e}")))?;
        }
        // A PDF a page opens is downloaded, not shown in Chromium's viewer (an empty page to
        // forge): the profile pref `plugins.always_open_pdf_externally`, which the sessions'
        // browser contexts inherit. The download is then read as a document (`downloads.rs`).
        if engine == EngineKind::Chromium {
            let default = profile.join("Default");
            std::fs::create_dir_all(&default)
                .and_then(|()| {
                    std::fs::write(
                        default.join("Preferences"),
                        br#"{"plugins":{"always_open_pdf_externally":true}}"#,
                    )
                })
                .map_err(|e| {
                    launch_err(
                        &binary,
                        format!("cannot write the profile's preferences: {e}"),
                    )
                })?;
        }
        // Confined, Chromium reaches the proxy at 127.0.0.1:3128 inside its namespace.
        let context_proxy = match self.config.confine {
            Some(_) => crate::devtools_relay::inside_proxy(),
            None => proxy,
        };
        // Lightpanda binds an ephemeral loopback port (inside its namespace when confined) and
        // logs it; its only proxy is forge's (`--http-proxy`), for every request of every page.
        let args = match engine {
            EngineKind::Chromium => launch_args(&self.config, context_proxy, &profile),
            EngineKind::Lightpanda => crate::engine::serve_args(
                std::net::SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
                context_proxy,
            ),
        };
        // Chromium gets a cleared environment (secrets such as API keys and the runtime token
        // never reach it or its renderers), with a HOME of its own inside the throwaway dir.
        let home = dir.path().join("home");
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&home)
                .map_err(|e| launch_err(&binary, format!("cannot create its home dir: {e}")))?;
        }
        let mut cmd = tokio::process::Command::new(&binary);
        let env = match engine {
            EngineKind::Chromium => {
                browser_env(&home, self.config.headless, |k| std::env::var_os(k))
            }
            EngineKind::Lightpanda => crate::engine::lightpanda_env(&home, |k| std::env::var_os(k)),
        };
        cmd.env_clear()
            .envs(env)
            .current_dir(dir.path())
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        let (mut child, spare) = spawn_browser(cmd, self.config.confine.as_ref())
            .await
            .map_err(|e| launch_err(&binary, e))?;
        let pid = child.id().unwrap_or(0);
        let pgid = pid as i32;
        register_live(pgid, dir.path().to_path_buf());
        // From here on, a failure must kill the group and remove the dir: `Running` does that.
        let dead = Arc::new(AtomicBool::new(false));
        let death = Arc::new(Notify::new());
        let why_dead = Arc::new(StdMutex::new(None));
        let stderr_tail = Arc::new(StdMutex::new(Vec::<String>::new()));
        let (ws_tx, ws_rx) = tokio::sync::oneshot::channel::<String>();
        let stderr = child.stderr.take();
        let tail = stderr_tail.clone();
        let stderr_task = tokio::spawn(async move {
            let Some(stderr) = stderr else { return };
            let mut lines = BufReader::new(stderr).lines();
            let mut ws_tx = Some(ws_tx);
            while let Ok(Some(line)) = lines.next_line().await {
                let ws = match engine {
                    EngineKind::Chromium => line
                        .strip_prefix("DevTools listening on ")
                        .map(|rest| rest.trim().to_string()),
                    EngineKind::Lightpanda => crate::engine::cdp_url_from_log(&line),
                };
                if let Some(ws) = ws {
                    if let Some(tx) = ws_tx.take() {
                        let _ = tx.send(ws);
                    }
                }
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                t.push(line);
                if t.len() > 20 {
                    t.remove(0);
                }
            }
        });
        let exit_dead = dead.clone();
        let exit_death = death.clone();
        let exit_why = why_dead.clone();
        let exit_task = tokio::spawn(async move {
            let status = child.wait().await;
            let msg = match status {
                Ok(s) => format!("exited unexpectedly ({s})"),
                Err(e) => format!("could not be waited for ({e})"),
            };
            exit_why
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(msg);
            exit_dead.store(true, Ordering::SeqCst);
            exit_death.notify_waiters();
            // Keep `child` alive until here so kill_on_drop does not fire early.
            drop(child);
        });
        let mut provisional = ProvisionalCleanup {
            pgid,
            pid,
            dir: Some(dir),
            tasks: vec![stderr_task, exit_task],
        };
        let ws = tokio::select! {
            r = ws_rx => r.ok(),
            _ = tokio::time::sleep(self.config.launch_timeout) => None,
        };
        let Some(ws) = ws else {
            let tail = stderr_tail
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .join("\n");
            return Err(launch_err(
                &binary,
                format!(
                    "no DevTools address within {:?}; its last output:\n{tail}",
                    self.config.launch_timeout
                ),
            ));
        };
        // Confined: DevTools listens inside Chromium's namespace; forge goes through the relay.
        let ws = match &spare {
            Some(spare) => {
                let (url, relay) = crate::devtools_relay::start(&ws, spare.take_dial())
                    .await
                    .map_err(|e| launch_err(&binary, e))?;
                provisional.tasks.push(relay);
                url
            }
            None => ws,
        };
        let handler_config = HandlerConfig {
            viewport: Some(Viewport {
                width: self.config.viewport.0,
                height: self.config.viewport.1,
                ..Viewport::default()
            }),
            request_timeout: Duration::from_secs(60),
            ..HandlerConfig::default()
        };
        let (browser, mut handler) = Browser::connect_with_config(ws.clone(), handler_config)
            .await
            .map_err(|e| launch_err(&binary, format!("cannot connect to {ws}: {e}")))?;
        // chromiumoxide leaves Nagle on: turn it off on the connection just opened (`nodelay.rs`).
        if let Some(peer) = crate::nodelay::ws_peer(&ws) {
            crate::nodelay::on_connections_to(peer);
        }
        let h_dead = dead.clone();
        let h_death = death.clone();
        let h_why = why_dead.clone();
        let handler_task = tokio::spawn(async move {
            while let Some(ev) = handler.next().await {
                if let Err(e) = ev {
                    let s = e.to_string();
                    if s.contains("closed") || s.contains("Connection reset") || s.contains("Io") {
                        h_why
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .get_or_insert(format!("lost its DevTools connection ({s})"));
                        break;
                    }
                    tracing::debug!("cdp handler: {s}");
                }
            }
            h_why
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert("closed its DevTools connection".into());
            h_dead.store(true, Ordering::SeqCst);
            h_death.notify_waiters();
        });
        let mut tasks = std::mem::take(&mut provisional.tasks);
        tasks.push(handler_task);
        let dir = provisional.dir.take();
        provisional.pgid = 0;
        let profile_path = dir
            .as_ref()
            .map(|d| d.path().to_path_buf())
            .unwrap_or_default();
        Ok(Running {
            browser,
            pgid,
            pid,
            profile: StdMutex::new(dir),
            profile_path,
            dead,
            death,
            why_dead,
            tasks: StdMutex::new(tasks),
            sessions: Mutex::new(HashMap::new()),
            lost: StdMutex::new(Vec::new()),
            launched_in: started.elapsed(),
            frame_link: tokio::sync::OnceCell::new(),
            clipboard: Mutex::new(()),
            context_proxy,
            spare,
            downloads: crate::downloads::Registry::new(self.config.downloads),
            engine,
            retired: AtomicBool::new(false),
        })
    }
}

impl Drop for BrowserManager {
    fn drop(&mut self) {
        if let Ok(mut g) = self.running.try_lock() {
            for (_, r) in g.drain() {
                r.kill_and_clean();
            }
        }
    }
}
