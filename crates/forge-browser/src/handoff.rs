//! Hand-offs to a person ([`Handoffs`]): the `browser_handoff` tool (`tools/handoff.rs`) opens
//! one for its tab and waits; the server that shows the hand-off page (forge-runtime) redeems
//! its one-time token, sends the person's input to the tab and finishes it (Done or Cancel).
//!
//! Invariants, each kept here:
//! - The token is single use: [`Handoffs::redeem`] trades it once for a visitor secret (the
//!   page keeps it in an `HttpOnly` cookie); a second redemption is refused.
//! - The token and the visitor secret are 32 random bytes each, compared in constant time, and
//!   never leave this registry except to the one caller that made or redeemed them; events
//!   name the hand-off by its id (`h-...`, the token id) only.
//! - A hand-off gives access to its one tab ([`Visit::tab`]) and nothing else, and only until it
//!   ends: done, cancelled, timed out or abandoned (the tool call ended), all of which remove it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::screencast::LiveTab;

/// Hand-offs waiting at once (more are refused: a person handles one at a time anyway).
pub const MAX_HANDOFFS: usize = 32;
/// Longest note a person can leave with Done.
pub const MAX_NOTE: usize = 1000;

/// How a hand-off ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HandoffEnd {
    /// The person pressed Done, with an optional note.
    Done(String),
    /// The person pressed Cancel.
    Cancelled,
    /// Nobody finished it within the hand-off timeout.
    TimedOut,
    /// The tool call ended first (the task was cancelled).
    Abandoned,
}

impl HandoffEnd {
    /// `done`, `cancelled`, `timeout`, `abandoned` (the audit log uses these).
    pub fn as_str(&self) -> &'static str {
        match self {
            HandoffEnd::Done(_) => "done",
            HandoffEnd::Cancelled => "cancelled",
            HandoffEnd::TimedOut => "timeout",
            HandoffEnd::Abandoned => "abandoned",
        }
    }
}

/// What the registry tells its observer (the runtime: A2A state, audit log).
#[derive(Debug)]
#[non_exhaustive]
pub enum HandoffEvent<'a> {
    /// A hand-off opened: the person's link is `{server base URL}{path}`.
    Opened {
        /// The hand-off's id (the token id).
        id: &'a str,
        /// The task whose tool call waits, when known.
        task_id: Option<&'a str>,
        /// The browser session (the tool call's session key: an A2A conversation, an MCP
        /// session).
        session_key: &'a str,
        /// Why the model asked for a person.
        reason: &'a str,
        /// The page's path with the one-time token (`handoff/t/<token>`), relative to the server
        /// root. The observer shows it to a person; it never goes into a log.
        path: &'a str,
        /// How long the person has.
        timeout: Duration,
    },
    /// A hand-off ended.
    Closed {
        /// The hand-off's id (the token id).
        id: &'a str,
        /// The task whose tool call waited.
        task_id: Option<&'a str>,
        /// The browser session whose tab it was.
        session_key: &'a str,
        /// How it ended.
        end: &'a HandoffEnd,
        /// Whether the token was redeemed (someone opened the link).
        opened: bool,
        /// How long it was open.
        duration: Duration,
    },
}

/// Told about every hand-off opening and closing. Returns, for `Opened`, whether it showed the
/// link somewhere a person can reach it (a hand-off nobody can reach fails at once).
pub type HandoffObserver = Arc<dyn Fn(&HandoffEvent<'_>) -> bool + Send + Sync>;

/// Why a redemption or a visit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HandoffRefusal {
    /// The link was used already, or its hand-off ended (done, cancelled, timed out).
    #[error("this hand-off link was used already or its hand-off has ended; links work once")]
    Used,
    /// No such hand-off, or the visitor secret does not match.
    #[error("no such hand-off for this browser; open the link from the task's status message")]
    Unknown,
}

struct Pending {
    token: String,
    visitor: Option<String>,
    tab: Arc<LiveTab>,
    task_id: Option<String>,
    session_key: String,
    reason: String,
    started: Instant,
    finish: Option<oneshot::Sender<HandoffEnd>>,
}

/// The hand-offs waiting on a browser's tabs, by id.
#[derive(Default)]
pub struct Handoffs {
    pending: StdMutex<HashMap<String, Pending>>,
    observer: StdMutex<Option<HandoffObserver>>,
}

/// What a redeemed hand-off gives the page: its id, the visitor secret (for the cookie), the
/// reason and the tab.
pub struct Visit {
    /// The hand-off's id.
    pub id: String,
    /// The visitor secret the page's later requests carry.
    pub secret: String,
    /// Why the model asked.
    pub reason: String,
    /// The one tab the person may see and drive.
    pub tab: Arc<LiveTab>,
}

/// A waiting hand-off, as the tool holds it.
pub(crate) struct Opened {
    pub(crate) id: String,
    pub(crate) end: oneshot::Receiver<HandoffEnd>,
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::fill(&mut b[..]);
    hex::encode(b)
}

/// Compare two secrets without an early exit on the first difference.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Handoffs {
    /// Tell `observer` about hand-offs opening and closing (one observer; a later call replaces it).
    pub fn set_observer(&self, observer: HandoffObserver) {
        *self.observer.lock().unwrap_or_else(|p| p.into_inner()) = Some(observer);
    }

    fn observer(&self) -> Option<HandoffObserver> {
        self.observer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open a hand-off of `tab`. Err: why no person can be reached (no observer showed the link,
    /// or too many wait).
    pub(crate) fn open(
        &self,
        tab: Arc<LiveTab>,
        task_id: Option<&str>,
        session_key: &str,
        reason: &str,
        timeout: Duration,
    ) -> Result<Opened, String> {
        let Some(observer) = self.observer() else {
            return Err("no server shows hand-off pages here: browser_handoff works when the agent is served over A2A (`forge run`, the link goes into the task's status) or over MCP on HTTP (`forge mcp serve --transport http`, the link goes to the client), not over stdio MCP or `forge tool call`".into());
        };
        let id = format!("h-{}", random_hex(8));
        let token = random_hex(32);
        let (tx, rx) = oneshot::channel();
        {
            let mut p = self.lock();
            if p.len() >= MAX_HANDOFFS {
                return Err(format!(
                    "{MAX_HANDOFFS} hand-offs already wait for a person; try again later"
                ));
            }
            p.insert(
                id.clone(),
                Pending {
                    token: token.clone(),
                    visitor: None,
                    tab,
                    task_id: task_id.map(str::to_string),
                    session_key: session_key.to_string(),
                    reason: reason.to_string(),
                    started: Instant::now(),
                    finish: Some(tx),
                },
            );
        }
        let path = format!("handoff/t/{token}");
        let shown = observer(&HandoffEvent::Opened {
            id: &id,
            task_id,
            session_key,
            reason,
            path: &path,
            timeout,
        });
        if !shown {
            self.close(&id, HandoffEnd::Abandoned);
            return Err("the hand-off link could not be shown to anyone: this call is neither part of an A2A task of `forge run` (the link goes into the task's input-required status) nor a call of an MCP client over HTTP (the link goes to the client)".into());
        }
        Ok(Opened { id, end: rx })
    }

    /// Trade the one-time `token` for a visit (once).
    pub fn redeem(&self, token: &str) -> Result<Visit, HandoffRefusal> {
        let mut p = self.lock();
        let Some((id, h)) = p.iter_mut().find(|(_, h)| same_secret(&h.token, token)) else {
            return Err(HandoffRefusal::Used);
        };
        if h.visitor.is_some() {
            return Err(HandoffRefusal::Used);
        }
        let secret = random_hex(32);
        h.visitor = Some(secret.clone());
        Ok(Visit {
            id: id.clone(),
            secret,
            reason: h.reason.clone(),
            tab: h.tab.clone(),
        })
    }

    /// The tab of hand-off `id` for the visitor holding `secret`.
    pub fn visit(&self, id: &str, secret: &str) -> Result<Arc<LiveTab>, HandoffRefusal> {
        let p = self.lock();
        match p.get(id) {
            Some(h) if h.visitor.as_deref().is_some_and(|v| same_secret(v, secret)) => {
                Ok(h.tab.clone())
            }
            _ => Err(HandoffRefusal::Unknown),
        }
    }

    /// The visitor holding `secret` finishes hand-off `id` (Done with a note, or Cancel).
    pub fn finish(&self, id: &str, secret: &str, end: HandoffEnd) -> Result<(), HandoffRefusal> {
        self.visit(id, secret)?;
        let end = match end {
            HandoffEnd::Done(note) => HandoffEnd::Done(note.chars().take(MAX_NOTE).collect()),
            other => other,
        };
        let tx = self.lock().get_mut(id).and_then(|h| h.finish.take());
        match tx {
            Some(tx) => {
                let _ = tx.send(end);
                Ok(())
            }
            None => Err(HandoffRefusal::Used),
        }
    }

    /// End hand-off `id` (the tool does, once it has its answer) and tell the observer.
    pub(crate) fn close(&self, id: &str, end: HandoffEnd) {
        let Some(h) = self.lock().remove(id) else {
            return;
        };
        if let Some(o) = self.observer() {
            o(&HandoffEvent::Closed {
                id,
                task_id: h.task_id.as_deref(),
                session_key: &h.session_key,
                end: &end,
                opened: h.visitor.is_some(),
                duration: h.started.elapsed(),
            });
        }
    }

    /// Why hand-off `id` was asked for (shown on its page).
    pub fn reason(&self, id: &str) -> Option<String> {
        self.lock().get(id).map(|h| h.reason.clone())
    }

    /// Hand-offs waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }
}
