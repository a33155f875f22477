//! The A2A task store ([`TaskStore`]): keeps each task's state, history and artifacts for
//! `tasks/get` (in memory, and in the state store when the server has one: writes go through one
//! writer task, in order), conversations, subscribers, draining, replica heartbeats. Starting and
//! running tasks is in `scheduler.rs`, cancelling them in `cancel.rs`, the JSON shapes in
//! `wire.rs`, serving a task's files in `files.rs`.
//!
//! Tasks sharing a `contextId` form a conversation: a new message in a context continues from the
//! last completed task's conversation, in the same browser session (the session key is the
//! `contextId`; `metadata.forge.close_browser: true` closes it when that task ends).
//!
//! Files a task writes are artifacts with an absolute `http(s)` URI served by the server at
//! `GET /artifacts/{task_id}/{name}` ([`TaskStore::artifact`]), plus the bytes inline (base64) in a
//! second part when they are at most `a2a.inline_artifact_bytes`. The store keeps the most recent [`MAX_TASKS`] tasks and
//! [`MAX_CONTEXTS`] contexts; older ones are forgotten (`tasks/get` then says the task is unknown).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use super::files::{is_servable_name, read_plain_file, ArtifactReadError};
use super::wire::{failed_task, RpcError};
use crate::agent_loop::AgentLoop;
use crate::task_scope::mime_for;
use forge_llm::Message;
use forge_state::{now_ms, ContextRecord, StateStore, StoredArtifact, TaskRecord};

/// The status message of tasks a restart found unfinished (or a gone replica left).
pub const INTERRUPTED_BY_RESTART: &str = "interrupted by restart";
/// The status message of tasks a drain had to stop.
pub const INTERRUPTED_BY_SHUTDOWN: &str = "interrupted by shutdown";

/// Tasks remembered for `tasks/get`.
pub(crate) const MAX_TASKS: usize = 1000;
/// Conversations (contexts) remembered.
pub(crate) const MAX_CONTEXTS: usize = 200;
/// Tasks running at once; more wait in state `submitted`.
pub const MAX_RUNNING: usize = 8;
/// How often a replica reports itself alive in the store.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(5);
/// A replica silent this long is gone (its lease has expired): its unfinished tasks are marked
/// failed.
pub(crate) const REPLICA_GONE: Duration = Duration::from_secs(30);
/// Longest a `tasks/resubscribe` of another replica's task is streamed from the store.
pub(crate) const REMOTE_STREAM_LIMIT: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Submitted,
    Working,
    /// Waiting for a person (`browser_handoff`); back to `Working` when the hand-off ends.
    InputRequired,
    Completed,
    Canceled,
    Failed,
}

impl State {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::InputRequired => "input-required",
            State::Completed => "completed",
            State::Canceled => "canceled",
            State::Failed => "failed",
        }
    }
    pub(super) fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Canceled | State::Failed)
    }
}

pub(super) struct Entry {
    pub(super) context_id: String,
    /// The server's base URL as the client that sent the message reached it (`http://host/`):
    /// artifact URIs start with it.
    pub(super) base_url: String,
    /// Close the conversation's browser session when this task ends.
    pub(super) close_browser: bool,
    /// The login profile the task's browser starts from (`metadata.forge.profile`).
    pub(super) profile: Option<String>,
    /// The files the task wrote, by name (served at `/artifacts/{task_id}/{name}`).
    pub(super) files: Vec<(String, std::path::PathBuf)>,
    pub(super) state: State,
    pub(super) status_message: Option<Value>,
    pub(super) status_time: String,
    pub(super) history: Vec<Value>,
    pub(super) artifacts: Vec<Value>,
    pub(super) cancel: CancellationToken,
    pub(super) subscribers: Vec<UnboundedSender<Value>>,
    pub(super) done: watch::Receiver<bool>,
    pub(super) created_ms: i64,
    /// The result object, once the task ended.
    pub(super) result: Option<Value>,
}

#[derive(Default)]
pub(super) struct Inner {
    pub(super) tasks: HashMap<String, Entry>,
    pub(super) order: VecDeque<String>,
    pub(super) contexts: HashMap<String, Vec<Message>>,
    pub(super) context_order: VecDeque<String>,
    /// Conversations whose browser was on a replica that is gone: the notice the next task's
    /// result carries (its browser session is a new one).
    pub(super) browser_lost: HashMap<String, String>,
}

/// The task store; one per server.
pub struct TaskStore {
    pub(super) agent: Arc<AgentLoop>,
    pub(super) inner: Mutex<Inner>,
    pub(super) running: Semaphore,
    /// Set when the server drains (SIGTERM): new tasks are refused with a retryable error.
    pub(super) draining: std::sync::atomic::AtomicBool,
    /// Set when draining ran out of time: tasks still running end `failed` with this reason.
    pub(super) interrupted: Mutex<Option<String>>,
    /// The durable store, when the server keeps one (tasks, events, contexts, artifacts).
    pub(super) durable: Option<Durable>,
    /// How artifacts are addressed and inlined.
    pub(super) artifacts: Mutex<ArtifactOptions>,
}

/// How a task's files are offered to A2A clients.
#[derive(Debug, Clone)]
pub struct ArtifactOptions {
    /// The base URL artifact URIs start with when no request says better (`FORGE_PUBLIC_URL`
    /// wins over the request's Host; else the bound address).
    pub public_url: Option<String>,
    /// The bound address as a URL (`http://127.0.0.1:8080/`), the last resort.
    pub bound_url: String,
    /// Files up to this size also go inline (base64) in the artifact; 0 never.
    pub inline_bytes: u64,
}

impl Default for ArtifactOptions {
    fn default() -> Self {
        Self {
            public_url: None,
            bound_url: "http://127.0.0.1/".into(),
            inline_bytes: forge_skills::DEFAULT_INLINE_ARTIFACT_BYTES,
        }
    }
}

/// The state store side of a [`TaskStore`]: writes go through one writer task, in order.
pub(super) struct Durable {
    pub(super) store: Arc<dyn StateStore>,
    pub(super) replica: String,
    pub(super) writes: UnboundedSender<Write>,
    pub(super) max_artifact_bytes: u64,
}

/// One write to the state store.
pub(super) enum Write {
    Task(Box<TaskRecord>),
    Event(String, Value),
    Context(ContextRecord),
    Artifact(String, StoredArtifact),
    /// The browser session of conversation `.0` closed: clear the context's `browser_replica`.
    BrowserClosed(String),
    /// Answered once every earlier write is done.
    Flush(tokio::sync::oneshot::Sender<()>),
}

pub(super) async fn write_all(
    store: Arc<dyn StateStore>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Write>,
) {
    while let Some(w) = rx.recv().await {
        let r = match w {
            Write::Task(t) => store.save_task(&t).await,
            Write::Event(id, ev) => store.append_event(&id, &ev).await.map(|_| ()),
            Write::Context(c) => store.save_context(&c).await,
            Write::Artifact(id, a) => store.save_artifact(&id, &a).await,
            Write::BrowserClosed(ctx) => match store.context(&ctx).await {
                Ok(Some(mut c)) if c.browser_replica.is_some() => {
                    c.browser_replica = None;
                    store.save_context(&c).await
                }
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            },
            Write::Flush(done) => {
                let _ = done.send(());
                Ok(())
            }
        };
        if let Err(e) = r {
            tracing::warn!("state store: {e}");
        }
    }
}

/// This process as a replica lease: a fresh id, `address`, its pid and host name.
pub(crate) fn this_replica(address: String) -> forge_state::ReplicaRecord {
    forge_state::ReplicaRecord {
        id: forge_state::new_id(),
        address,
        heartbeat_ms: now_ms(),
        pid: Some(i64::from(std::process::id())),
        host: Some(host_name()),
    }
}

/// The host name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else empty).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

/// Whether the process holding lease `r` is known to be gone: it ran on this host (same host
/// name) and either has this process's pid (a restarted container: the old pid 1 is not this
/// process, whose lease is new) or no process has its pid (or only a zombie). Elsewhere, or
/// when unsure, `false`: only the lease's expiry tells.
pub(crate) fn lease_process_gone(
    r: &forge_state::ReplicaRecord,
    me: &forge_state::ReplicaRecord,
) -> bool {
    let (Some(pid), Some(host)) = (r.pid, r.host.as_deref()) else {
        return false;
    };
    if r.id == me.id || host.is_empty() || me.host.as_deref() != Some(host) {
        return false;
    }
    if me.pid == Some(pid) {
        return true;
    }
    process_gone(pid)
}

#[cfg(target_os = "linux")]
fn process_gone(pid: i64) -> bool {
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses: `Z` is a zombie, `X` dead.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| st == "Z" || st == "X"),
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

#[cfg(not(target_os = "linux"))]
fn process_gone(_pid: i64) -> bool {
    false
}

pub(super) fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
    // A panic while holding the lock leaves plain data behind; keep serving.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TaskStore {
    /// A store running tasks on `agent`, keeping them in memory only.
    pub fn new(agent: Arc<AgentLoop>) -> Arc<Self> {
        Self::build(agent, None)
    }

    /// A store running tasks on `agent` that also keeps every task, its events, its
    /// conversation and its artifacts' bytes (up to `max_artifact_bytes` each) in `state`, so
    /// they outlive the process. `replica` names this process in the store.
    pub fn with_state(
        agent: Arc<AgentLoop>,
        state: Arc<dyn StateStore>,
        replica: String,
        max_artifact_bytes: u64,
    ) -> Arc<Self> {
        let (tx, rx) = unbounded_channel();
        tokio::spawn(write_all(state.clone(), rx));
        Self::build(
            agent,
            Some(Durable {
                store: state,
                replica,
                writes: tx,
                max_artifact_bytes,
            }),
        )
    }

    pub(super) fn build(agent: Arc<AgentLoop>, durable: Option<Durable>) -> Arc<Self> {
        Arc::new(Self {
            agent,
            inner: Mutex::new(Inner::default()),
            running: Semaphore::new(MAX_RUNNING),
            draining: std::sync::atomic::AtomicBool::new(false),
            interrupted: Mutex::new(None),
            durable,
            artifacts: Mutex::new(ArtifactOptions::default()),
        })
    }

    /// Set how artifacts are addressed (public URL, bound URL) and inlined.
    pub fn set_artifact_options(&self, options: ArtifactOptions) {
        *self.artifacts.lock().unwrap_or_else(|p| p.into_inner()) = options;
    }

    pub(super) fn artifact_options(&self) -> ArtifactOptions {
        self.artifacts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The browser session of conversation `context_id` ended (closed, idle, shutdown): the
    /// state store no longer says this replica holds it.
    pub fn browser_closed(&self, context_id: &str) {
        if let Some(d) = &self.durable {
            let _ = d.writes.send(Write::BrowserClosed(context_id.to_string()));
        }
    }

    /// The bytes and type of artifact `name` of task `task_id`: from the state store when the task
    /// is there (any replica of a fleet can serve it), else from the file the task wrote.
    pub async fn artifact(
        &self,
        task_id: &str,
        name: &str,
    ) -> Result<(String, Vec<u8>), ArtifactReadError> {
        if !is_servable_name(name) {
            return Err(ArtifactReadError::BadName(name.chars().take(100).collect()));
        }
        if !is_servable_name(task_id)
            || !task_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-')
        {
            return Err(ArtifactReadError::BadName(
                task_id.chars().take(100).collect(),
            ));
        }
        if let Some(d) = &self.durable {
            if let Ok(Some(a)) = d.store.artifact(task_id, name).await {
                return Ok((a.mime_type, a.bytes));
            }
        }
        let path = {
            let inner = lock(&self.inner);
            let e = inner
                .tasks
                .get(task_id)
                .ok_or(ArtifactReadError::NotFound)?;
            e.files
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| p.clone())
                .ok_or(ArtifactReadError::NotFound)?
        };
        let mime = mime_for(&path).to_string();
        let bytes = tokio::task::spawn_blocking(move || read_plain_file(&path))
            .await
            .map_err(|e| ArtifactReadError::Unavailable(e.to_string()))??;
        Ok((mime, bytes))
    }

    /// Queue the task's current snapshot (and `events`) for the state store.
    pub(super) fn persist(&self, id: &str, e: &Entry, events: &[Value]) {
        let Some(d) = &self.durable else { return };
        let now = now_ms();
        let record = TaskRecord {
            id: id.to_string(),
            context_id: e.context_id.clone(),
            state: e.state.as_str().to_string(),
            replica: (!e.state.is_final()).then(|| d.replica.clone()),
            task: Self::snapshot_of(id, e, None),
            result: e.result.clone(),
            created_ms: e.created_ms,
            updated_ms: now,
        };
        let _ = d.writes.send(Write::Task(Box::new(record)));
        for ev in events {
            let _ = d.writes.send(Write::Event(id.to_string(), ev.clone()));
        }
    }

    /// Wait until every queued write has reached the state store (server shutdown).
    pub async fn flush(&self) {
        let Some(d) = &self.durable else { return };
        let (tx, rx) = tokio::sync::oneshot::channel();
        if d.writes.send(Write::Flush(tx)).is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(10), rx).await;
        }
    }

    /// The task as A2A JSON, from memory or else from the state store (a task of an earlier run
    /// or another replica).
    pub async fn get_or_load(
        &self,
        id: &str,
        history_length: Option<usize>,
    ) -> Result<Value, RpcError> {
        if let Ok(v) = self.get(id, history_length) {
            return Ok(v);
        }
        let Some(d) = &self.durable else {
            return Err(RpcError::task_not_found(id));
        };
        match d.store.task(id).await {
            Ok(Some(t)) => {
                let mut task = t.task;
                if let (Some(n), Some(h)) = (
                    history_length,
                    task.get_mut("history").and_then(Value::as_array_mut),
                ) {
                    let skip = h.len().saturating_sub(n);
                    h.drain(..skip);
                }
                Ok(task)
            }
            Ok(None) => Err(RpcError::task_not_found(id)),
            Err(e) => Err(RpcError {
                code: -32603,
                message: format!("Internal error: {e}"),
            }),
        }
    }

    /// Bring the conversation `context_id` into memory from the state store when it is not
    /// there (a context of an earlier run), so a new message continues it.
    pub async fn preload_context(&self, context_id: &str) {
        let Some(d) = &self.durable else { return };
        if lock(&self.inner).contexts.contains_key(context_id) {
            return;
        }
        let Ok(Some(c)) = d.store.context(context_id).await else {
            return;
        };
        let Ok(messages) = serde_json::from_value::<Vec<Message>>(c.messages) else {
            tracing::warn!("state store: context {context_id} does not read as a conversation; starting it afresh");
            return;
        };
        let mut inner = lock(&self.inner);
        if !inner.contexts.contains_key(context_id) {
            inner.contexts.insert(context_id.to_string(), messages);
            inner.context_order.push_back(context_id.to_string());
        }
    }

    /// Stop accepting tasks: from now on `message/send` and `message/stream` get the retryable
    /// [`DRAINING`] error and `/readyz` says not ready. Running tasks go on.
    pub fn drain(&self) {
        self.draining
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether [`TaskStore::drain`] was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether this replica takes new tasks: `Err` says why not (draining, or every browser
    /// session taken). `GET /readyz`.
    pub async fn ready(&self) -> Result<(), String> {
        if self.is_draining() {
            return Err("draining: shutting down, no new tasks".into());
        }
        if let Some(s) = &self.agent.sessions {
            if let Some(cap) = s.at_capacity().await {
                return Err(format!("at the browser session cap ({cap})"));
            }
        }
        Ok(())
    }

    /// Tasks not yet in a final state (submitted or working).
    pub fn unfinished(&self) -> usize {
        lock(&self.inner)
            .tasks
            .values()
            .filter(|e| !e.state.is_final())
            .count()
    }

    /// Stop every unfinished task; each ends `failed` with `reason` as its status message (not
    /// `canceled`: nobody asked for it). Returns at once; [`TaskStore::unfinished`] tells when
    /// they have stopped.
    pub fn interrupt_all(&self, reason: &str) {
        *self.interrupted.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.to_string());
        self.cancel_all();
    }

    pub(super) fn snapshot_of(id: &str, e: &Entry, history_length: Option<usize>) -> Value {
        let mut status = json!({"state": e.state.as_str(), "timestamp": e.status_time});
        if let Some(m) = &e.status_message {
            status["message"] = m.clone();
        }
        let history: Vec<Value> = match history_length {
            Some(n) => e
                .history
                .iter()
                .skip(e.history.len().saturating_sub(n))
                .cloned()
                .collect(),
            None => e.history.clone(),
        };
        json!({"kind": "task", "id": id, "contextId": e.context_id, "status": status, "history": history, "artifacts": e.artifacts})
    }

    /// The task as A2A JSON (`history_length` keeps the last N history messages).
    pub fn get(&self, id: &str, history_length: Option<usize>) -> Result<Value, RpcError> {
        let inner = lock(&self.inner);
        inner
            .tasks
            .get(id)
            .map(|e| Self::snapshot_of(id, e, history_length))
            .ok_or_else(|| RpcError::task_not_found(id))
    }

    /// Stream a task's events to `tx` (`tasks/resubscribe`): the task as it is now, then every
    /// update until the final one. For a finished task, only the task is sent.
    pub fn subscribe(&self, id: &str, tx: UnboundedSender<Value>) -> Result<(), RpcError> {
        let mut inner = lock(&self.inner);
        let e = inner
            .tasks
            .get_mut(id)
            .ok_or_else(|| RpcError::task_not_found(id))?;
        let _ = tx.send(Self::snapshot_of(id, e, None));
        if !e.state.is_final() {
            e.subscribers.push(tx);
        }
        Ok(())
    }

    /// Wait until the task reaches a final state.
    pub async fn wait(&self, mut done: watch::Receiver<bool>) {
        let _ = done.wait_for(|d| *d).await;
    }

    /// Stream a task another replica runs (`tasks/resubscribe` on this replica): the task as
    /// stored now, then its stored events as they arrive, until a final one. Polls the store
    /// every 250 ms, for at most [`REMOTE_STREAM_LIMIT`].
    pub async fn stream_from_store(
        &self,
        id: &str,
        tx: UnboundedSender<Value>,
    ) -> Result<(), RpcError> {
        let Some(d) = &self.durable else {
            return Err(RpcError::task_not_found(id));
        };
        let t = match d.store.task(id).await {
            Ok(Some(t)) => t,
            _ => return Err(RpcError::task_not_found(id)),
        };
        let _ = tx.send(t.task.clone());
        if t.is_final() {
            return Ok(());
        }
        let store = d.store.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            let mut after = 0i64;
            // The events written before this call belong to the snapshot just sent.
            while let Ok(evs) = store.events_after(&id, after, 1000).await {
                match evs.last() {
                    Some((seq, _)) => after = *seq,
                    None => break,
                }
                if evs.len() < 1000 {
                    break;
                }
            }
            let deadline = tokio::time::Instant::now() + REMOTE_STREAM_LIMIT;
            while tokio::time::Instant::now() < deadline {
                let evs = store
                    .events_after(&id, after, 1000)
                    .await
                    .unwrap_or_default();
                for (seq, ev) in evs {
                    after = seq;
                    let last = ev.get("final").and_then(Value::as_bool) == Some(true);
                    if tx.send(ev).is_err() || last {
                        return;
                    }
                }
                if let Ok(Some(t)) = store.task(&id).await {
                    if t.is_final() {
                        // Ended without a final event in the store (interrupted): say so.
                        let _ = tx.send(json!({"kind": "status-update", "taskId": id, "contextId": t.context_id, "status": t.task["status"], "final": true}));
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        Ok(())
    }

    /// This replica's id in the state store (`None` without one).
    pub fn replica_id(&self) -> Option<String> {
        self.durable.as_ref().map(|d| d.replica.clone())
    }

    /// The replica (id, address) holding the live browser of conversation `context_id`, when it
    /// is another live replica of the fleet (a message for the conversation goes there). A
    /// holder silent for [`REPLICA_GONE`] is gone: its record is cleared and the next task of the
    /// conversation says that its browser session is new.
    pub async fn browser_owner_elsewhere(&self, context_id: &str) -> Option<(String, String)> {
        let d = self.durable.as_ref()?;
        let owner = d
            .store
            .context(context_id)
            .await
            .ok()
            .flatten()?
            .browser_replica?;
        if owner == d.replica {
            return None;
        }
        let alive_since = now_ms() - REPLICA_GONE.as_millis() as i64;
        match d.store.replica(&owner).await {
            Ok(Some(r)) if r.heartbeat_ms >= alive_since && !r.address.is_empty() => {
                Some((owner, r.address))
            }
            Ok(_) => {
                self.browser_lost(
                    context_id,
                    &format!(
                        "the browser session of this conversation was on replica {owner}, which is gone (silent for {} s or more); this task started a new browser session here, without the pages, tabs and cookies of earlier messages",
                        REPLICA_GONE.as_secs()
                    ),
                );
                None
            }
            Err(e) => {
                tracing::warn!("state store: cannot look up replica {owner}: {e}");
                None
            }
        }
    }

    /// The browser of conversation `context_id` is lost (its replica is gone or unreachable):
    /// clear the store's record and have the conversation's next task say `notice`.
    pub fn browser_lost(&self, context_id: &str, notice: &str) {
        let mut inner = lock(&self.inner);
        if inner.browser_lost.len() >= MAX_CONTEXTS {
            inner.browser_lost.clear();
        }
        inner
            .browser_lost
            .insert(context_id.to_string(), notice.to_string());
        drop(inner);
        if let Some(d) = &self.durable {
            let _ = d.writes.send(Write::BrowserClosed(context_id.to_string()));
        }
    }

    /// Record in the state store, every [`HEARTBEAT`], that this replica is alive at `address`,
    /// and mark `failed` ("interrupted by restart") the unfinished tasks of replicas that have
    /// stopped reporting (PostgreSQL fleets; a stopped SQLite run is handled at start).
    pub fn keep_alive(self: &Arc<Self>, address: String, stop: CancellationToken) {
        let Some(d) = &self.durable else { return };
        let store = d.store.clone();
        let replica = d.replica.clone();
        let fleet = store.kind() == "postgres";
        tokio::spawn(async move {
            loop {
                if let Err(e) = store.heartbeat(&replica, &address).await {
                    tracing::warn!("state store heartbeat: {e}");
                }
                if fleet {
                    let stale = forge_state::now_ms() - REPLICA_GONE.as_millis() as i64;
                    if let Err(e) = store
                        .fail_orphaned(stale, &|t: &TaskRecord| {
                            failed_task(t, INTERRUPTED_BY_RESTART)
                        })
                        .await
                    {
                        tracing::warn!("state store: {e}");
                    }
                }
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(HEARTBEAT) => {}
                }
            }
        });
    }
}
