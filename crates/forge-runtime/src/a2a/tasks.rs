//! The A2A task store: starts a task per incoming message on the agent loop, keeps its state,
//! history and artifacts for `tasks/get`, fans progress out to `message/stream` subscribers, and
//! cancels it on `tasks/cancel`. Also builds the A2A 0.3 JSON shapes (Task, Message, status and
//! artifact update events).
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
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::agent_loop::{AgentLoop, BrowserUse, LoopError, LoopEvent};
use crate::audit::rfc3339_now;
use crate::task_scope::mime_for;
use forge_llm::Message;
use forge_state::{new_id, now_ms, ContextRecord, StateStore, StoredArtifact, TaskRecord};

/// The status message of tasks a restart found unfinished (or a gone replica left).
pub const INTERRUPTED_BY_RESTART: &str = "interrupted by restart";
/// The status message of tasks a drain had to stop.
pub const INTERRUPTED_BY_SHUTDOWN: &str = "interrupted by shutdown";

/// Tasks remembered for `tasks/get`.
pub const MAX_TASKS: usize = 1000;
/// Conversations (contexts) remembered.
pub const MAX_CONTEXTS: usize = 200;
/// Tasks running at once; more wait in state `submitted`.
pub const MAX_RUNNING: usize = 8;
/// How long `tasks/cancel` waits for the task to stop before answering.
pub const CANCEL_WAIT: Duration = Duration::from_secs(10);
/// How often a running task checks the store for a cancel asked on another replica.
pub const CANCEL_POLL: Duration = Duration::from_millis(500);
/// How often a replica reports itself alive in the store.
pub const HEARTBEAT: Duration = Duration::from_secs(5);
/// A replica silent this long is gone: its unfinished tasks are marked failed.
pub const REPLICA_GONE: Duration = Duration::from_secs(30);
/// Longest a `tasks/resubscribe` of another replica's task is streamed from the store.
pub const REMOTE_STREAM_LIMIT: Duration = Duration::from_secs(3600);

/// A JSON-RPC error: code, message, optional data.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The JSON-RPC / A2A error code.
    pub code: i64,
    /// The message.
    pub message: String,
}

impl RpcError {
    /// -32602 invalid params.
    pub fn invalid_params(m: impl Into<String>) -> Self {
        Self {
            code: -32602,
            message: m.into(),
        }
    }
    /// -32001 task not found.
    pub fn task_not_found(id: &str) -> Self {
        Self {
            code: -32001,
            message: format!("Task not found: {id}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Submitted,
    Working,
    Completed,
    Canceled,
    Failed,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Submitted => "submitted",
            State::Working => "working",
            State::Completed => "completed",
            State::Canceled => "canceled",
            State::Failed => "failed",
        }
    }
    fn is_final(self) -> bool {
        matches!(self, State::Completed | State::Canceled | State::Failed)
    }
}

struct Entry {
    context_id: String,
    /// The server's base URL as the client that sent the message reached it (`http://host/`):
    /// artifact URIs start with it.
    base_url: String,
    /// Close the conversation's browser session when this task ends.
    close_browser: bool,
    /// The files the task wrote, by name (served at `/artifacts/{task_id}/{name}`).
    files: Vec<(String, std::path::PathBuf)>,
    state: State,
    status_message: Option<Value>,
    status_time: String,
    history: Vec<Value>,
    artifacts: Vec<Value>,
    cancel: CancellationToken,
    subscribers: Vec<UnboundedSender<Value>>,
    done: watch::Receiver<bool>,
    created_ms: i64,
    /// The result object, once the task ended.
    result: Option<Value>,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    order: VecDeque<String>,
    contexts: HashMap<String, Vec<Message>>,
    context_order: VecDeque<String>,
    /// Conversations whose browser was on a replica that is gone: the notice the next task's
    /// result carries (its browser session is a new one).
    browser_lost: HashMap<String, String>,
}

/// The task store; one per server.
pub struct TaskStore {
    agent: Arc<AgentLoop>,
    inner: Mutex<Inner>,
    running: Semaphore,
    /// Set when the server drains (SIGTERM): new tasks are refused with a retryable error.
    draining: std::sync::atomic::AtomicBool,
    /// Set when draining ran out of time: tasks still running end `failed` with this reason.
    interrupted: Mutex<Option<String>>,
    /// The durable store, when the server keeps one (tasks, events, contexts, artifacts).
    durable: Option<Durable>,
    /// How artifacts are addressed and inlined.
    artifacts: Mutex<ArtifactOptions>,
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

/// Largest file served from the local files dir at `/artifacts/...` (the state store has its own
/// per-artifact cap).
pub const MAX_SERVED_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Why `GET /artifacts/{task_id}/{name}` has nothing to give.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactReadError {
    /// The name (or task id) is not a plain file name: `/`, `\`, `..`, NUL, empty, too long.
    BadName(String),
    /// No such task, or the task has no such artifact.
    NotFound,
    /// The file is there but cannot be served (gone, a symlink, too large, unreadable).
    Unavailable(String),
}

/// Whether `name` is a plain file name that can be served: not empty, at most 255 bytes, no `/`,
/// `\`, `..` or NUL (nothing that could name another directory).
pub fn is_servable_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.contains(['/', '\\', '\0'])
        && !name.contains("..")
}

/// The state store side of a [`TaskStore`]: writes go through one writer task, in order.
struct Durable {
    store: Arc<dyn StateStore>,
    replica: String,
    writes: UnboundedSender<Write>,
    max_artifact_bytes: u64,
}

/// One write to the state store.
enum Write {
    Task(Box<TaskRecord>),
    Event(String, Value),
    Context(ContextRecord),
    Artifact(String, StoredArtifact),
    /// The browser session of conversation `.0` closed: clear the context's `browser_replica`.
    BrowserClosed(String),
    /// Answered once every earlier write is done.
    Flush(tokio::sync::oneshot::Sender<()>),
}

async fn write_all(
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

/// JSON-RPC error code of a message refused because the server is draining (retry elsewhere).
pub const DRAINING: i64 = -32050;

/// The text of an A2A message's text parts (0.3 `{kind: text, text}`; a part with a bare `text`
/// is accepted too), joined by newlines.
pub fn message_text(msg: &Value) -> String {
    msg.get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter(|p| {
                    p.get("kind")
                        .and_then(Value::as_str)
                        .is_none_or(|k| k == "text")
                })
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

fn agent_message(task_id: &str, context_id: &str, parts: Vec<Value>) -> Value {
    json!({"kind": "message", "role": "agent", "messageId": new_id(), "taskId": task_id, "contextId": context_id, "parts": parts})
}

/// The stored task `t` marked failed with `reason` as its status message (what the state store
/// writes for tasks interrupted by a restart or left by a replica that is gone).
pub(crate) fn failed_task(t: &TaskRecord, reason: &str) -> Value {
    let mut task = t.task.clone();
    let message = agent_message(
        &t.id,
        &t.context_id,
        vec![json!({"kind": "text", "text": reason})],
    );
    task["status"] = json!({"state": "failed", "message": message, "timestamp": rfc3339_now()});
    task
}

/// The artifact for file `path` (named `name`) of task `task_id`: a FilePart with the absolute
/// URI `{base_url}artifacts/{task_id}/{name}`, and a second FilePart with the bytes (base64) when
/// the file is at most `inline_limit` bytes.
fn file_artifact(
    base_url: &str,
    task_id: &str,
    name: &str,
    path: &Path,
    inline_limit: u64,
) -> Value {
    let mime = mime_for(path);
    let uri = match url::Url::parse(base_url) {
        Ok(mut u) => {
            if let Ok(mut segs) = u.path_segments_mut() {
                segs.pop_if_empty().extend(["artifacts", task_id, name]);
            }
            u.to_string()
        }
        Err(_) => format!("{base_url}artifacts/{task_id}/{name}"),
    };
    let mut parts =
        vec![json!({"kind": "file", "file": {"uri": uri, "mimeType": mime, "name": name}})];
    let size = std::fs::symlink_metadata(path).map(|m| m.len()).ok();
    if inline_limit > 0 && size.is_some_and(|n| n <= inline_limit) {
        if let Ok(bytes) = read_plain_file(path) {
            use base64::Engine as _;
            let b64 = base64::engine::general_purpose::STANDARD.encode(&bytes);
            parts.push(
                json!({"kind": "file", "file": {"bytes": b64, "mimeType": mime, "name": name}}),
            );
        }
    }
    json!({
        "artifactId": new_id(),
        "name": name,
        "description": format!("file written by the agent ({} bytes)", size.unwrap_or(0)),
        "parts": parts,
    })
}

/// Read a regular file that is not a symlink (opened with `O_NOFOLLOW`), at most
/// [`MAX_SERVED_FILE_BYTES`].
fn read_plain_file(path: &Path) -> Result<Vec<u8>, ArtifactReadError> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let gone = |e: std::io::Error| ArtifactReadError::Unavailable(format!("cannot read it: {e}"));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(gone)?;
    let meta = f.metadata().map_err(gone)?;
    if !meta.is_file() {
        return Err(ArtifactReadError::Unavailable("not a regular file".into()));
    }
    if meta.len() > MAX_SERVED_FILE_BYTES {
        return Err(ArtifactReadError::Unavailable(format!(
            "{} bytes, over the {MAX_SERVED_FILE_BYTES}-byte limit for serving",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_SERVED_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(gone)?;
    Ok(bytes)
}

fn lock(m: &Mutex<Inner>) -> std::sync::MutexGuard<'_, Inner> {
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

    fn build(agent: Arc<AgentLoop>, durable: Option<Durable>) -> Arc<Self> {
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

    fn artifact_options(&self) -> ArtifactOptions {
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
    fn persist(&self, id: &str, e: &Entry, events: &[Value]) {
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

    fn snapshot_of(id: &str, e: &Entry, history_length: Option<usize>) -> Value {
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

    /// Start a task for the A2A `message`. `subscriber` receives the task and every update event,
    /// ending with a final status-update. Returns the task id and a receiver that turns true when
    /// the task reaches a final state.
    pub fn start(
        self: &Arc<Self>,
        message: &Value,
        subscriber: Option<UnboundedSender<Value>>,
    ) -> Result<(String, watch::Receiver<bool>), RpcError> {
        self.start_at(message, subscriber, None)
    }

    /// [`TaskStore::start`] for a client that reached the server at `base_url`
    /// (`http://host:port/`, from its Host header): the task's artifact URIs start with it, unless
    /// a public URL is configured.
    pub fn start_at(
        self: &Arc<Self>,
        message: &Value,
        subscriber: Option<UnboundedSender<Value>>,
        base_url: Option<String>,
    ) -> Result<(String, watch::Receiver<bool>), RpcError> {
        if !message.is_object() {
            return Err(RpcError::invalid_params(
                "params.message must be an A2A Message object",
            ));
        }
        if self.is_draining() {
            return Err(RpcError {
                code: DRAINING,
                message: "this replica is shutting down and takes no new tasks; retry (another replica will take it)".into(),
            });
        }
        let text = message_text(message);
        if text.trim().is_empty() {
            return Err(RpcError::invalid_params(
                "params.message has no text part; forge agents take text input",
            ));
        }
        // The caller's scope and budgets (metadata.forge), checked before the task exists.
        let spec = crate::task_scope::TaskSpec::from_a2a_message(message)
            .and_then(|s| {
                self.agent
                    .resolve_spec(&s, crate::task_scope::SpecFields::A2A)
            })
            .map_err(|e| RpcError::invalid_params(e.to_string()))?;
        let close_browser = match message
            .get("metadata")
            .and_then(|m| m.get("forge"))
            .and_then(|f| f.get("close_browser"))
        {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "params.message.metadata.forge.close_browser must be true or false, not {other}"
                )))
            }
        };
        let options = self.artifact_options();
        let base_url = options
            .public_url
            .clone()
            .or(base_url)
            .unwrap_or(options.bound_url);
        let base_url = if base_url.ends_with('/') {
            base_url
        } else {
            format!("{base_url}/")
        };
        let task_id = new_id();
        let context_id = message
            .get("contextId")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(new_id);
        let mut user_msg = message.clone();
        user_msg["taskId"] = json!(task_id);
        user_msg["contextId"] = json!(context_id);
        if user_msg.get("messageId").is_none() {
            user_msg["messageId"] = json!(new_id());
        }
        user_msg["kind"] = json!("message");
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        let history_msgs;
        {
            let mut inner = lock(&self.inner);
            history_msgs = inner.contexts.get(&context_id).cloned().unwrap_or_default();
            let entry = Entry {
                context_id: context_id.clone(),
                base_url,
                close_browser,
                files: Vec::new(),
                state: State::Submitted,
                status_message: None,
                status_time: rfc3339_now(),
                history: vec![user_msg],
                artifacts: vec![],
                cancel: cancel.clone(),
                subscribers: subscriber.into_iter().collect(),
                done: done_rx.clone(),
                created_ms: now_ms(),
                result: None,
            };
            self.persist(&task_id, &entry, &[]);
            let first = Self::snapshot_of(&task_id, &entry, None);
            for s in &entry.subscribers {
                let _ = s.send(first.clone());
            }
            inner.tasks.insert(task_id.clone(), entry);
            inner.order.push_back(task_id.clone());
            while inner.order.len() > MAX_TASKS {
                if let Some(old) = inner.order.pop_front() {
                    // Never forget a task that is still running.
                    if inner.tasks.get(&old).is_some_and(|e| !e.state.is_final()) {
                        inner.order.push_back(old);
                        break;
                    }
                    inner.tasks.remove(&old);
                }
            }
        }
        let store = self.clone();
        let id = task_id.clone();
        tokio::spawn(async move {
            store
                .run(id, context_id, text, history_msgs, spec, cancel, done_tx)
                .await;
        });
        Ok((task_id, done_rx))
    }

    fn publish(&self, id: &str, update: impl FnOnce(&mut Entry) -> Vec<Value>) {
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.tasks.get_mut(id) {
            let events = update(e);
            e.subscribers
                .retain(|s| events.iter().all(|ev| s.send(ev.clone()).is_ok()));
            if !events.is_empty() {
                self.persist(id, e, &events);
            }
        }
    }

    fn status_event(id: &str, e: &Entry, is_final: bool) -> Value {
        let mut status = json!({"state": e.state.as_str(), "timestamp": e.status_time});
        if let Some(m) = &e.status_message {
            status["message"] = m.clone();
        }
        json!({"kind": "status-update", "taskId": id, "contextId": e.context_id, "status": status, "final": is_final})
    }

    #[allow(clippy::too_many_arguments)]
    async fn run(
        self: Arc<Self>,
        id: String,
        context_id: String,
        text: String,
        history: Vec<Message>,
        spec: crate::task_scope::ResolvedSpec,
        cancel: CancellationToken,
        done: watch::Sender<bool>,
    ) {
        let permit = tokio::select! {
            p = self.running.acquire() => p.ok(),
            _ = cancel.cancelled() => None,
        };
        let run = if permit.is_none() {
            crate::agent_loop::TaskRun {
                outcome: Err(LoopError::Cancelled),
                result: crate::task_scope::TaskResult {
                    status: crate::task_scope::ResultStatus::Canceled,
                    answer: "The task was cancelled.".into(),
                    steps: 0,
                    seconds: 0.0,
                    navigations: vec![],
                    blocked: vec![],
                    artifacts: vec![],
                },
            }
        } else {
            self.publish(&id, |e| {
                e.state = State::Working;
                e.status_time = rfc3339_now();
                vec![Self::status_event(&id, e, false)]
            });
            let (tx, mut rx) = unbounded_channel::<LoopEvent>();
            // The conversation's browser session: the next message in this context finds it.
            let close_browser = lock(&self.inner)
                .tasks
                .get(&id)
                .is_some_and(|e| e.close_browser);
            let browser = BrowserUse::conversation(&context_id, !close_browser);
            let run = self.agent.run_task_with(
                &id,
                &browser,
                &text,
                history,
                cancel.clone(),
                Some(tx),
                &spec,
            );
            let forward = async {
                while let Some(ev) = rx.recv().await {
                    self.progress(&id, &context_id, ev);
                }
            };
            // The cross-replica cancel flag is watched while the task runs, and no longer: the
            // task's final state is set only after this returns.
            let task = async { tokio::join!(run, forward).0 };
            tokio::pin!(task);
            tokio::select! {
                r = &mut task => r,
                () = self.watch_cancel_flag(&id, &cancel) => task.await,
            }
        };
        drop(permit);
        let mut result = run.result.to_json();
        if let Some(notice) = lock(&self.inner).browser_lost.remove(&context_id) {
            result["notices"] = json!([notice]);
        }
        // The result object: an artifact named `result` with a data part, on every ending.
        let result_artifact_of = |r: &Value| json!({"artifactId": new_id(), "name": "result", "description": "forge's result object: status, answer, steps, seconds, navigations, blocked, artifacts", "parts": [{"kind": "data", "data": r}]});
        let result_artifact = result_artifact_of(&result);
        match run.outcome {
            Ok(o) => {
                let answer_msg = agent_message(
                    &id,
                    &context_id,
                    vec![json!({"kind": "text", "text": o.answer})],
                );
                let mut artifacts = vec![
                    json!({"artifactId": new_id(), "name": "answer", "parts": [{"kind": "text", "text": o.answer}]}),
                    result_artifact.clone(),
                ];
                let base_url = lock(&self.inner)
                    .tasks
                    .get(&id)
                    .map(|e| e.base_url.clone())
                    .unwrap_or_default();
                let inline_limit = self.artifact_options().inline_bytes;
                let mut files = Vec::new();
                for p in &o.artifacts {
                    let name = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    if !is_servable_name(&name) {
                        continue;
                    }
                    files.push((name.clone(), p.clone()));
                    artifacts.push(file_artifact(&base_url, &id, &name, p, inline_limit));
                }
                if let Some(e) = lock(&self.inner).tasks.get_mut(&id) {
                    e.files = files;
                }
                // Which replica holds the conversation's live browser (a fleet forwards the next
                // message there); cleared when the session closes ([`TaskStore::browser_closed`]).
                let browser_alive = match &self.agent.sessions {
                    Some(s) => s.has_session(&context_id).await,
                    None => false,
                };
                if let Some(d) = &self.durable {
                    let _ = d.writes.send(Write::Context(ContextRecord {
                        id: context_id.clone(),
                        messages: serde_json::to_value(&o.messages).unwrap_or(Value::Null),
                        browser_replica: browser_alive.then(|| d.replica.clone()),
                        scope: None,
                        updated_ms: now_ms(),
                    }));
                    for p in &o.artifacts {
                        let name = p
                            .file_name()
                            .map(|n| n.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        match std::fs::metadata(p) {
                            Ok(m) if m.len() <= d.max_artifact_bytes => {
                                if let Ok(bytes) = std::fs::read(p) {
                                    let _ = d.writes.send(Write::Artifact(
                                        id.clone(),
                                        StoredArtifact {
                                            name,
                                            mime_type: mime_for(p).to_string(),
                                            bytes,
                                        },
                                    ));
                                }
                            }
                            Ok(m) => tracing::warn!(
                                "state store: artifact {} of task {id} is {} bytes, over state.max_artifact_bytes ({}); it is not kept in the store",
                                p.display(),
                                m.len(),
                                d.max_artifact_bytes
                            ),
                            Err(_) => {}
                        }
                    }
                }
                {
                    let mut inner = lock(&self.inner);
                    inner
                        .contexts
                        .insert(context_id.clone(), o.messages.clone());
                    inner.context_order.retain(|c| c != &context_id);
                    inner.context_order.push_back(context_id.clone());
                    while inner.context_order.len() > MAX_CONTEXTS {
                        if let Some(old) = inner.context_order.pop_front() {
                            inner.contexts.remove(&old);
                        }
                    }
                }
                self.publish(&id, |e| {
                    let mut evs: Vec<Value> = artifacts
                        .iter()
                        .map(|a| json!({"kind": "artifact-update", "taskId": id, "contextId": e.context_id, "artifact": a, "lastChunk": true}))
                        .collect();
                    e.artifacts = artifacts.clone();
                    e.result = Some(result.clone());
                    e.history.push(answer_msg.clone());
                    e.state = State::Completed;
                    e.status_message = Some(answer_msg.clone());
                    e.status_time = rfc3339_now();
                    evs.push(Self::status_event(&id, e, true));
                    evs
                });
            }
            Err(err) => {
                let interrupted = self
                    .interrupted
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
                    .filter(|_| matches!(err, LoopError::Cancelled));
                let state = if interrupted.is_some() || !matches!(err, LoopError::Cancelled) {
                    State::Failed
                } else {
                    State::Canceled
                };
                if let Some(reason) = &interrupted {
                    self.agent.audit.emit(
                        Some(&id),
                        crate::audit::events::TASK_INTERRUPTED,
                        json!({"reason": reason}),
                    );
                }
                let text = match (&interrupted, state) {
                    (Some(reason), _) => format!("The task failed: {reason}"),
                    (None, State::Canceled) => "The task was cancelled.".to_string(),
                    _ => format!("The task failed: {err}"),
                };
                let msg = agent_message(
                    &id,
                    &context_id,
                    vec![json!({"kind": "text", "text": text})],
                );
                // A task stopped by a drain ends failed, and its result says so.
                if interrupted.is_some() {
                    result["status"] = json!("failed");
                    result["answer"] = json!(text);
                }
                let result_artifact = result_artifact_of(&result);
                self.publish(&id, |e| {
                    e.artifacts.push(result_artifact.clone());
                    e.result = Some(result.clone());
                    e.state = state;
                    e.status_message = Some(msg.clone());
                    e.status_time = rfc3339_now();
                    vec![
                        json!({"kind": "artifact-update", "taskId": id, "contextId": e.context_id, "artifact": result_artifact, "lastChunk": true}),
                        Self::status_event(&id, e, true),
                    ]
                });
            }
        }
        {
            // Closing the streams: drop every subscriber after the final event.
            let mut inner = lock(&self.inner);
            if let Some(e) = inner.tasks.get_mut(&id) {
                e.subscribers.clear();
            }
        }
        let _ = done.send(true);
    }

    fn progress(&self, id: &str, context_id: &str, ev: LoopEvent) {
        let (text, data) = match &ev {
            LoopEvent::ModelCall { iteration } => (
                format!("asking the model (turn {iteration})"),
                json!({"event": "model_call", "iteration": iteration}),
            ),
            LoopEvent::Thought(t) => (t.clone(), json!({"event": "thought"})),
            LoopEvent::ToolStart {
                call_id,
                name,
                arguments,
            } => (
                format!("tool {name} started"),
                json!({"event": "tool_start", "tool": name, "callId": call_id, "arguments": arguments}),
            ),
            LoopEvent::ToolEnd {
                call_id,
                name,
                ok,
                summary,
                duration_ms,
            } => (
                format!(
                    "tool {name} {} in {duration_ms} ms: {summary}",
                    if *ok { "finished" } else { "failed" }
                ),
                json!({"event": "tool_end", "tool": name, "callId": call_id, "ok": ok, "durationMs": duration_ms, "summary": summary}),
            ),
        };
        let msg = agent_message(
            id,
            context_id,
            vec![
                json!({"kind": "text", "text": text}),
                json!({"kind": "data", "data": data.clone()}),
            ],
        );
        self.publish(id, |e| {
            if e.state.is_final() {
                return vec![];
            }
            e.status_message = Some(msg.clone());
            e.status_time = rfc3339_now();
            let mut ev = Self::status_event(id, e, false);
            ev["metadata"] = json!({"forge": data});
            vec![ev]
        });
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

    /// Cancel a running task and wait (up to [`CANCEL_WAIT`]) for it to stop; returns the task.
    pub async fn cancel(&self, id: &str) -> Result<Value, RpcError> {
        let known_here = lock(&self.inner).tasks.contains_key(id);
        if !known_here {
            return self.cancel_elsewhere(id).await;
        }
        let (token, done) = {
            let inner = lock(&self.inner);
            let e = inner
                .tasks
                .get(id)
                .ok_or_else(|| RpcError::task_not_found(id))?;
            if e.state.is_final() {
                return Err(RpcError {
                    code: -32002,
                    message: format!(
                        "Task cannot be canceled: it is already {}",
                        e.state.as_str()
                    ),
                });
            }
            (e.cancel.clone(), e.done.clone())
        };
        token.cancel();
        let _ = tokio::time::timeout(CANCEL_WAIT, self.wait(done)).await;
        self.get(id, None)
    }

    /// While task `id` runs, poll the state store's cancel flag (set by `tasks/cancel` on another
    /// replica) every [`CANCEL_POLL`] and cancel the task when it is set. Ends with the task.
    async fn watch_cancel_flag(&self, id: &str, cancel: &CancellationToken) {
        let Some(d) = self
            .durable
            .as_ref()
            .filter(|d| d.store.kind() == "postgres")
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(CANCEL_POLL) => {}
            }
            let finished = lock(&self.inner)
                .tasks
                .get(id)
                .is_none_or(|e| e.state.is_final());
            if finished {
                return;
            }
            if d.store.cancel_requested(id).await.unwrap_or(false) {
                cancel.cancel();
                return;
            }
        }
    }

    /// `tasks/cancel` for a task this replica does not run: set the store's cancel flag for the
    /// replica that runs it and wait (up to [`CANCEL_WAIT`]) until the store shows it ended.
    async fn cancel_elsewhere(&self, id: &str) -> Result<Value, RpcError> {
        let Some(d) = &self.durable else {
            return Err(RpcError::task_not_found(id));
        };
        let internal = |e: forge_state::StateError| RpcError {
            code: -32603,
            message: format!("Internal error: {e}"),
        };
        let Some(t) = d.store.task(id).await.map_err(internal)? else {
            return Err(RpcError::task_not_found(id));
        };
        if t.is_final() {
            return Err(RpcError {
                code: -32002,
                message: format!("Task cannot be canceled: it is already {}", t.state),
            });
        }
        d.store.request_cancel(id).await.map_err(internal)?;
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        // Bounded by the deadline: one store read per 200 ms.
        while tokio::time::Instant::now() < deadline {
            if let Ok(Some(t)) = d.store.task(id).await {
                if t.is_final() {
                    return Ok(t.task);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.get_or_load(id, None).await
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

    /// Cancel every running task (server shutdown).
    pub fn cancel_all(&self) {
        let inner = lock(&self.inner);
        for e in inner.tasks.values() {
            e.cancel.cancel();
        }
    }
}
