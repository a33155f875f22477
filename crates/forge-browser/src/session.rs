//! The sessions side of the browser: a running Chromium's session table ([`Running`]: the CDP
//! connection, the process group it kills, the sessions on it), each session ([`Session`]: one
//! browser context, its tabs, its navigations), its tabs ([`Tab`]: dialogs answered at once,
//! main-frame documents recorded) and the idle reaper. [`BrowserManager`](crate::BrowserManager)
//! (`manager.rs`) launches the browser and hands sessions out; `process.rs` holds the OS side.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::network::{EventResponseReceived, ResourceType};
use chromiumoxide::cdp::browser_protocol::page::{
    DialogType, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CloseTargetParams, CreateTargetParams, GetTargetsParams, TargetId,
};
use chromiumoxide::{Browser, Page};
use futures::StreamExt;
use tokio::sync::{Mutex, Notify};

use crate::crash::BrowserCrash;
use crate::error::BrowserError;
use crate::process::{end_strays, group_alive, unregister_live};
/// One tab of a session.
pub struct Tab {
    /// Stable id within the session (`t1`, `t2`, ...).
    pub id: String,
    pub(crate) target_id: TargetId,
    pub(crate) page: Page,
    /// Dialogs seen since the last look (already handled), as one-line descriptions.
    pub(crate) dialogs: Arc<StdMutex<Vec<String>>>,
    dialog_task: tokio::task::JoinHandle<()>,
    nav_task: tokio::task::JoinHandle<()>,
    /// Where forge's pointer last was in this tab (viewport CSS px); the next pointer action
    /// moves from here. A new tab starts at the viewport's top-left corner.
    pub(crate) pointer: (f64, f64),
    /// Whether forge asked this tab's renderer for unbuffered mouse input
    /// ([`crate::pointer::unbuffer`]), once, before its first pointer move.
    pub(crate) unbuffered: bool,
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.dialog_task.abort();
        self.nav_task.abort();
        crate::observe::forget(&self.target_id);
    }
}

/// What a session holds: its context, its tabs and which one is active.
pub struct SessionState {
    pub(crate) tabs: Vec<Tab>,
    pub(crate) active: usize,
    /// This session's own clipboard (`clipboard.rs`): what its last copy or cut took. Chromium's
    /// clipboard is one for all contexts, so forge keeps each session's here.
    pub(crate) clipboard: String,
    /// Main-frame documents loaded in this session's tabs (URL, HTTP status), oldest first.
    pub(crate) navigations: Arc<StdMutex<Vec<Navigation>>>,
    pub(crate) next_tab: u32,
    pub(crate) known: HashSet<TargetId>,
}

/// A main-frame document a session's tab loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Navigation {
    /// The document's URL (after redirects).
    pub url: String,
    /// Its HTTP status (a proxy refusal of plain http shows as 403).
    pub status: i64,
}

/// Navigations kept per session (the oldest are dropped past it).
pub const MAX_NAVIGATIONS: usize = 200;

/// One session: a browser context with its tabs. Calls on a session run one at a time.
pub struct Session {
    pub(crate) key: String,
    pub(crate) context_id: BrowserContextId,
    pub(crate) navigations: Arc<StdMutex<Vec<Navigation>>>,
    pub(crate) running: Arc<Running>,
    pub(crate) state: Mutex<SessionState>,
    pub(crate) last_used: StdMutex<Instant>,
    /// The proxy this session's browser context was created with (every byte of its pages
    /// leaves through it). Fixed for the session's life.
    pub(crate) proxy: std::net::SocketAddr,
    /// The scope the session was created with ([`SessionOptions::scope`]): the scope of the
    /// first task of its conversation. Fixed for the session's life; a later task may narrow it
    /// but never widen it (the runtime compares against this value).
    pub(crate) scope: Option<serde_json::Value>,
    /// This session's downloads (`downloads.rs`).
    pub(crate) downloads: Arc<crate::downloads::SessionDownloads>,
}

/// How a session is created, beyond its key. Only the first call for a key counts: an existing
/// session keeps what it was created with.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// The proxy this session's browser context uses; `None`: the manager's
    /// ([`BrowserConfig::proxy`](crate::BrowserConfig::proxy)). Must be a loopback address. A task with its own scope gets
    /// its own proxy identity (a per-context listener on the narrowed policy) through this.
    pub proxy: Option<std::net::SocketAddr>,
    /// The scope of the task that opened the session (allowed hosts, budgets), kept opaque here
    /// and handed back by [`Session::scope`], so a later task in the same conversation can be
    /// checked against it (narrow, never widen).
    pub scope: Option<serde_json::Value>,
}

/// Why a session ended, as told to the [`SessionClosedHook`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// Closed on request ([`BrowserManager::close_session`](crate::BrowserManager::close_session): the `browser_close` tool, a task
    /// asking for it, a cancelled task).
    Closed,
    /// Unused for `idle_timeout`; closed by the timer.
    Idle,
    /// The browser was shut down ([`BrowserManager::shutdown`](crate::BrowserManager::shutdown)).
    Shutdown,
    /// Chromium died or hung; its sessions are gone.
    Crashed,
}

impl CloseReason {
    /// `closed`, `idle`, `shutdown`, `crashed` (audit logs use these).
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Closed => "closed",
            CloseReason::Idle => "idle",
            CloseReason::Shutdown => "shutdown",
            CloseReason::Crashed => "crashed",
        }
    }
}

/// Told about every session that ends (its key and why), whoever ended it: the runtime audits it
/// and clears the record of which replica holds the conversation's browser.
pub type SessionClosedHook = Arc<dyn Fn(&str, CloseReason) + Send + Sync>;

/// A live Chromium: the process group, the CDP connection and the sessions on it.
pub struct Running {
    pub(crate) browser: Browser,
    pub(crate) pgid: i32,
    pub(crate) pid: u32,
    pub(crate) profile: StdMutex<Option<tempfile::TempDir>>,
    pub(crate) profile_path: PathBuf,
    pub(crate) dead: Arc<AtomicBool>,
    pub(crate) death: Arc<Notify>,
    pub(crate) why_dead: Arc<StdMutex<Option<String>>>,
    pub(crate) tasks: StdMutex<Vec<tokio::task::JoinHandle<()>>>,
    pub(crate) sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Keys of the sessions dropped by `kill_and_clean` (for the crash notice, `crash.rs`).
    pub(crate) lost: StdMutex<Vec<String>>,
    /// When the browser started (for figures) and how long launch took.
    pub(crate) launched_in: Duration,
    /// forge's second CDP connection, for cross-origin iframes' sessions (`frames.rs`), opened
    /// on first use.
    pub(crate) frame_link: tokio::sync::OnceCell<Arc<crate::cdp_link::CdpLink>>,
    /// Held while a session uses Chromium's one clipboard (`clipboard.rs`), so that no other
    /// session's copy or paste runs between writing it and clearing it.
    pub(crate) clipboard: Mutex<()>,
    /// The proxy address Chromium's contexts use (inside its namespace when confined).
    pub(crate) context_proxy: std::net::SocketAddr,
    /// When confined: the spare proxy listeners of Chromium's namespace (`devtools_relay.rs`).
    pub(crate) spare: Option<Arc<crate::devtools_relay::SpareProxies>>,
    /// Every session's downloads, for the browser's download watcher (`downloads.rs`).
    pub(crate) downloads: crate::downloads::Registry,
    /// Which engine this is (`engine/`).
    pub(crate) engine: crate::engine::EngineKind,
    /// Ended on purpose with its one session (a Lightpanda process per session): its death
    /// is no crash.
    pub(crate) retired: AtomicBool,
}

impl Running {
    /// End it on purpose (its session closed): killed and cleaned, and never reported as a crash.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::SeqCst);
        self.kill_and_clean();
    }

    pub(crate) fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    pub(crate) fn mark_dead(&self, why: &str) {
        let mut w = self.why_dead.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            *w = Some(why.to_string());
        }
        self.dead.store(true, Ordering::SeqCst);
        self.death.notify_waiters();
    }

    /// What a call that the browser's death aborted says: the engine and why, and what is lost
    /// (every session's pages on the shared Chromium; this session's on its own Lightpanda).
    pub(crate) fn crash_message(&self) -> String {
        let lost = match self.engine {
            crate::engine::EngineKind::Chromium => "pages, tabs and cookies of every session are gone",
            crate::engine::EngineKind::Lightpanda => {
                "this session's pages and cookies are gone; other sessions run in processes of their own"
            }
        };
        format!(
            "{} {}; the call was aborted. The next browser call starts a fresh browser ({lost}; navigate again)",
            self.engine.title(),
            self.death_reason()
        )
    }

    pub(crate) fn death_reason(&self) -> String {
        self.why_dead
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .unwrap_or_else(|| "exited".into())
    }

    /// Kill the process group, wait (bounded) until it is gone, remove the profile dir.
    pub(crate) fn kill_and_clean(&self) {
        self.mark_dead("was shut down");
        // SAFETY-free: killpg on our own child's group id; negative/zero ids are never used.
        if self.pgid > 0 {
            unsafe {
                libc::killpg(self.pgid, libc::SIGKILL);
            }
        }
        // Wait until the group has no live process and our direct child is reaped (a zombie
        // keeps its /proc entry and pid until then; `group_alive` does not count zombies, so
        // the child may die between a `waitpid` and the group check: loop until it is reaped).
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut reaped = self.pid == 0;
        loop {
            if !reaped {
                let mut status = 0;
                // SAFETY: plain syscall on our own child's pid. tokio's wait (the exit task) may
                // reap it first; then ECHILD says so (a new child of ours would need the kernel
                // to wrap its pid counter round to this very pid in between).
                let r = unsafe { libc::waitpid(self.pid as i32, &mut status, libc::WNOHANG) };
                reaped = r == self.pid as i32 || r == -1;
            }
            if (reaped && !group_alive(self.pgid)) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // Its crash handlers run outside the group: shutdown returns when they are gone too.
        end_strays(&self.profile_path, deadline);
        for t in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            t.abort();
        }
        unregister_live(self.pgid);
        // Sessions point back at this value; dropping them breaks the cycle (and aborts their
        // dialog tasks). A session busy in a call keeps its Arc until the call ends.
        if let Ok(mut sessions) = self.sessions.try_lock() {
            self.lost
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend(sessions.drain().map(|(k, _)| k));
        }
        if let Some(dir) = self
            .profile
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let path = dir.path().to_path_buf();
            if dir.close().is_err() {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// What a crash of this browser takes with it (`crash.rs`): the keys of its sessions.
    pub(crate) async fn crash_record(&self, relaunching: bool) -> BrowserCrash {
        let mut sessions: Vec<String> = self.sessions.lock().await.keys().cloned().collect();
        sessions.extend(
            self.lost
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .cloned(),
        );
        sessions.sort();
        sessions.dedup();
        BrowserCrash {
            reason: format!("{} {}", self.engine.title(), self.death_reason()),
            pid: self.pid,
            sessions,
            relaunching,
        }
    }

    /// The profile dir (for tests and diagnostics).
    pub fn profile_path(&self) -> &std::path::Path {
        &self.profile_path
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_and_clean();
    }
}

/// Close the sessions unused for longer than `idle`. A session with a call in flight (its state
/// is locked) is left alone, however long the call takes.
pub(crate) async fn reap_idle_sessions(
    running: &Arc<Running>,
    idle: Duration,
    hook: Option<&SessionClosedHook>,
) {
    let idle: Vec<Arc<Session>> = {
        let mut sessions = running.sessions.lock().await;
        let keys: Vec<String> = sessions
            .iter()
            .filter(|(_, s)| s.idle_for() > idle && s.state.try_lock().is_ok())
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| sessions.remove(k)).collect()
    };
    for s in idle {
        tracing::debug!(session = %s.key, "closing idle browser session");
        s.dispose().await;
        if let Some(h) = hook {
            h(&s.key, CloseReason::Idle);
        }
    }
}

pub(crate) async fn with_timeout<T>(
    limit: Duration,
    f: impl std::future::Future<Output = chromiumoxide::Result<T>>,
) -> Result<T, BrowserError> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err(BrowserError::Cdp(format!(
            "no answer from the browser within {limit:?}"
        ))),
    }
}

impl crate::downloads::Link for Running {
    fn browser(&self) -> &chromiumoxide::Browser {
        &self.browser
    }
    fn registry(&self) -> &crate::downloads::Registry {
        &self.downloads
    }
}

impl Session {
    pub(crate) fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn idle_for(&self) -> Duration {
        self.last_used
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// The session key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The proxy this session's browser context uses.
    pub fn proxy(&self) -> std::net::SocketAddr {
        self.proxy
    }

    /// The scope the session was created with ([`SessionOptions::scope`]), if any.
    pub fn scope(&self) -> Option<&serde_json::Value> {
        self.scope.as_ref()
    }

    pub(crate) async fn dispose(&self) {
        self.running.downloads.remove(&self.context_id);
        let mut st = self.state.lock().await;
        st.tabs.clear();
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            self.running
                .browser
                .dispose_browser_context(self.context_id.clone()),
        )
        .await;
    }

    /// Pick up tabs the pages of this session opened (window.open, target=_blank). Returns the
    /// ids of tabs that are new since the last call.
    pub(crate) async fn sync_tabs(&self, st: &mut SessionState) -> Vec<String> {
        let Ok(Ok(resp)) = tokio::time::timeout(
            Duration::from_secs(5),
            self.running.browser.execute(GetTargetsParams::default()),
        )
        .await
        else {
            return Vec::new();
        };
        let live: Vec<_> = resp
            .result
            .target_infos
            .into_iter()
            .filter(|t| {
                t.r#type == "page" && t.browser_context_id.as_ref() == Some(&self.context_id)
            })
            .collect();
        let live_ids: HashSet<TargetId> = live.iter().map(|t| t.target_id.clone()).collect();
        // Drop tabs that are gone.
        let active_id = st.tabs.get(st.active).map(|t| t.target_id.clone());
        st.tabs.retain(|t| live_ids.contains(&t.target_id));
        let mut new_tabs = Vec::new();
        for t in live {
            if st.known.contains(&t.target_id) {
                continue;
            }
            // The handler attaches to new targets on its own; wait (bounded) until it has.
            let mut page = None;
            for _ in 0..40 {
                if let Ok(p) = self.running.browser.get_page(t.target_id.clone()).await {
                    page = Some(p);
                    break;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            if let Some(p) = page {
                let id = st.add_tab(p).await;
                new_tabs.push(id);
            } else {
                st.known.insert(t.target_id.clone());
            }
        }
        st.active = active_id
            .and_then(|id| st.tabs.iter().position(|t| t.target_id == id))
            .unwrap_or(0);
        new_tabs
    }

    /// Close tab `idx` of this session.
    pub(crate) async fn close_tab(&self, st: &mut SessionState, idx: usize) {
        if idx < st.tabs.len() {
            let tab = st.tabs.remove(idx);
            let _ = tokio::time::timeout(
                Duration::from_secs(5),
                self.running
                    .browser
                    .execute(CloseTargetParams::new(tab.target_id.clone())),
            )
            .await;
            if st.active >= st.tabs.len() {
                st.active = st.tabs.len().saturating_sub(1);
            } else if st.active > idx {
                st.active -= 1;
            }
        }
    }

    /// Open a new blank tab in this session and make it active.
    pub(crate) async fn new_tab(&self, st: &mut SessionState) -> Result<(), BrowserError> {
        let page = with_timeout(
            Duration::from_secs(10),
            self.running.browser.new_page(
                CreateTargetParams::builder()
                    .url("about:blank")
                    .browser_context_id(self.context_id.clone())
                    .build()
                    .map_err(BrowserError::Cdp)?,
            ),
        )
        .await?;
        st.add_tab(page).await;
        st.active = st.tabs.len() - 1;
        Ok(())
    }
}

/// Dialogs kept per tab between two observations (a page can open them in a loop).
const MAX_DIALOGS: usize = 20;

impl SessionState {
    pub(crate) async fn add_tab(&mut self, page: Page) -> String {
        let id = format!("t{}", self.next_tab);
        self.next_tab += 1;
        let dialogs = Arc::new(StdMutex::new(Vec::new()));
        let target_id = page.target_id().clone();
        self.known.insert(target_id.clone());
        // Dialogs never hang a call: each is recorded and answered at once (dismissed; a
        // beforeunload is accepted so the navigation the model asked for goes ahead).
        let d = dialogs.clone();
        let p = page.clone();
        let stream = page.event_listener::<EventJavascriptDialogOpening>().await;
        let dialog_task = tokio::spawn(async move {
            let Ok(mut stream) = stream else { return };
            // A page can open dialogs in a loop: at most MAX_DIALOGS are kept between two looks,
            // the last slot then counting the rest.
            let mut unlisted = 0usize;
            while let Some(ev) = stream.next().await {
                let accept = matches!(ev.r#type, DialogType::Beforeunload);
                let kind = match ev.r#type {
                    DialogType::Alert => "alert",
                    DialogType::Confirm => "confirm",
                    DialogType::Prompt => "prompt",
                    DialogType::Beforeunload => "beforeunload",
                };
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    p.execute(HandleJavaScriptDialogParams::new(accept)),
                )
                .await;
                let msg: String = ev.message.chars().take(200).collect();
                let line = format!(
                    "{kind} {msg:?} ({})",
                    if accept { "accepted" } else { "dismissed" }
                );
                let mut seen = d.lock().unwrap_or_else(|p| p.into_inner());
                if seen.len() < MAX_DIALOGS {
                    seen.push(line);
                    unlisted = 0;
                } else if let Some(last) = seen.last_mut() {
                    unlisted += 1;
                    *last = format!("{} more dialogs, answered the same way", unlisted + 1);
                }
            }
        });
        // Main-frame documents (the page target's id is its main frame's id) go to the session's
        // navigation list, for the task's result.
        let navs = self.navigations.clone();
        let main = target_id.as_ref().to_string();
        let p = page.clone();
        let nav_task = tokio::spawn(async move {
            // Subscribed here, not before the tab is listed: a tab that opens with a dialog
            // must not wait on anything but the dialog listener above.
            let Ok(mut stream) = p.event_listener::<EventResponseReceived>().await else {
                return;
            };
            while let Some(ev) = stream.next().await {
                if ev.r#type != ResourceType::Document
                    || ev.frame_id.as_ref().map(|f| f.as_ref()) != Some(main.as_str())
                {
                    continue;
                }
                let mut n = navs.lock().unwrap_or_else(|p| p.into_inner());
                if n.len() >= MAX_NAVIGATIONS {
                    n.remove(0);
                }
                n.push(Navigation {
                    url: ev.response.url.clone(),
                    status: ev.response.status,
                });
            }
        });
        self.tabs.push(Tab {
            id: id.clone(),
            target_id,
            page,
            dialogs,
            dialog_task,
            nav_task,
            pointer: (0.0, 0.0),
            unbuffered: false,
        });
        id
    }

    /// The active tab.
    pub(crate) fn active_tab(&self) -> Option<&Tab> {
        self.tabs.get(self.active)
    }
}
