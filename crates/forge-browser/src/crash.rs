//! After Chromium crashed: each session that had pages on the dead browser is told so, once, in
//! the result of its next call, and the crash reaches the audit log through a [`CrashObserver`].
//!
//! Invariants kept here (test: `a_crash_between_calls_is_said_once_and_audited`):
//! - A dead browser is recorded once: when the manager replaces it (the next call) or, if no
//!   call comes, when the manager shuts down. An intentional shutdown is not a crash.
//! - A session's notice is carried by exactly one call result, the first one after the crash
//!   that ends with a result or an error message; a call that is cancelled or times out leaves it
//!   for the next call. Closing the session drops it.
//! - At most [`MAX_PENDING`] notices are kept (oldest dropped first), so a browser that keeps
//!   crashing cannot grow memory.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// Notices kept for sessions that have not called since a crash.
pub const MAX_PENDING: usize = 256;

/// A browser that died without being asked to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrowserCrash {
    /// What happened, in forge's words, naming the engine ("Chromium exited unexpectedly
    /// (signal: 9 (SIGKILL))", "Lightpanda lost its DevTools connection ...").
    pub reason: String,
    /// The main process id of the dead browser.
    pub pid: u32,
    /// The sessions (task ids) whose pages, tabs and cookies died with it, sorted.
    pub sessions: Vec<String>,
    /// Whether a new browser is being started in its place (false: found at shutdown).
    pub relaunching: bool,
}

/// Told about every crash (the runtime's audit log writes a `browser_crash` event).
pub trait CrashObserver: Send + Sync {
    fn on_crash(&self, crash: &BrowserCrash);
}

/// The words a session's next result starts with after a crash.
pub fn notice_text(reason: &str) -> String {
    format!(
        "the browser restarted after a crash ({reason}); this session's pages, tabs and \
         cookies are gone, and this call ran in a fresh browser: navigate again"
    )
}

/// The crashes seen and the notices not yet given.
#[derive(Default)]
pub(crate) struct CrashBook {
    pending: Mutex<VecDeque<(String, String)>>,
    observer: Option<Arc<dyn CrashObserver>>,
}

impl CrashBook {
    pub(crate) fn with_observer(observer: Arc<dyn CrashObserver>) -> Self {
        Self {
            pending: Mutex::new(VecDeque::new()),
            observer: Some(observer),
        }
    }

    /// Record `crash`: a notice for each of its sessions when a new browser replaces it, and
    /// the observer in any case.
    pub(crate) fn record(&self, crash: BrowserCrash) {
        tracing::warn!(
            pid = crash.pid,
            sessions = crash.sessions.len(),
            "{}",
            crash.reason
        );
        if crash.relaunching {
            let text = notice_text(&crash.reason);
            let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            for key in &crash.sessions {
                q.retain(|(k, _)| k != key);
                if q.len() >= MAX_PENDING {
                    q.pop_front();
                }
                q.push_back((key.clone(), text.clone()));
            }
        }
        if let Some(o) = &self.observer {
            o.on_crash(&crash);
        }
    }

    /// The notice for session `key`, if one is pending; it is removed (given once).
    pub(crate) fn take(&self, key: &str) -> Option<String> {
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let i = q.iter().position(|(k, _)| k == key)?;
        q.remove(i).map(|(_, t)| t)
    }

    /// Put a notice back (the call that took it ended without a message to carry it).
    pub(crate) fn put_back(&self, key: &str, text: String) {
        let mut q = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if !q.iter().any(|(k, _)| k == key) {
            if q.len() >= MAX_PENDING {
                q.pop_front();
            }
            q.push_front((key.to_string(), text));
        }
    }

    /// Drop the notice of session `key` (the session was closed).
    pub(crate) fn forget(&self, key: &str) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(k, _)| k != key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<BrowserCrash>>);
    impl CrashObserver for Seen {
        fn on_crash(&self, crash: &BrowserCrash) {
            self.0.lock().expect("not poisoned").push(crash.clone());
        }
    }

    fn crash(sessions: &[&str], relaunching: bool) -> BrowserCrash {
        BrowserCrash {
            reason: "exited unexpectedly (signal: 9 (SIGKILL))".into(),
            pid: 42,
            sessions: sessions.iter().map(|s| s.to_string()).collect(),
            relaunching,
        }
    }

    #[test]
    fn a_notice_is_given_once_per_session_and_the_observer_sees_every_crash() {
        let seen = Arc::new(Seen::default());
        let book = CrashBook::with_observer(seen.clone());
        book.record(crash(&["a", "b"], true));
        let n = book.take("a").expect("a has a notice");
        assert!(
            n.contains("restarted after a crash") && n.contains("SIGKILL"),
            "{n}"
        );
        assert_eq!(book.take("a"), None, "given once");
        book.forget("b");
        assert_eq!(book.take("b"), None, "a closed session's notice is dropped");
        // Put back after a call that could not carry it; given by the next one.
        book.put_back("a", n.clone());
        assert_eq!(book.take("a"), Some(n));
        // Found at shutdown: audited, no notices.
        book.record(crash(&["c"], false));
        assert_eq!(book.take("c"), None);
        assert_eq!(seen.0.lock().expect("not poisoned").len(), 2);
    }

    #[test]
    fn pending_notices_are_bounded() {
        let book = CrashBook::default();
        let keys: Vec<String> = (0..MAX_PENDING + 10).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        book.record(crash(&refs, true));
        assert_eq!(
            book.pending.lock().expect("not poisoned").len(),
            MAX_PENDING
        );
        assert_eq!(book.take("s0"), None, "the oldest were dropped");
        assert!(book.take(&format!("s{}", MAX_PENDING + 9)).is_some());
    }
}
