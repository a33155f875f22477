//! Starting and running tasks: a task per incoming message on the agent loop (at most
//! [`super::store::MAX_RUNNING`] at once, the rest wait `submitted`), its progress fanned out to
//! subscribers, its end recorded (status, artifacts, result object, conversation).

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::files::is_servable_name;
use super::store::{lock, Entry, State, TaskStore, Write, MAX_CONTEXTS, MAX_TASKS};
use super::wire::{agent_message, file_artifact, message_text, RpcError, DRAINING};
use crate::agent_loop::{BrowserUse, LoopError, LoopEvent};
use crate::audit::rfc3339_now;
use crate::task_scope::mime_for;
use forge_llm::Message;
use forge_state::{new_id, now_ms, ContextRecord, StoredArtifact};

/// What the message's id says about running it ([`TaskStore::accept`]).
pub(super) enum Accepted {
    /// Run it, as this task id when one was claimed for it in the state store.
    Run(Option<String>),
    /// It was accepted before (by this replica or another) as this task: never run it again.
    Earlier(String),
}

impl TaskStore {
    /// Claim `message` in the state store before running it, keyed by its conversation and its
    /// `messageId`, so that a message reaching a second replica after the first accepted it (a
    /// forwarded message whose owner died, or whose answer was lost) is never run twice. Only
    /// messages with both a `contextId` and a `messageId` are claimed (only they are forwarded;
    /// a new conversation's message is its own). Without a state store: always run.
    pub(super) async fn accept(&self, message: &Value) -> Result<Accepted, RpcError> {
        let Some(d) = &self.durable else {
            return Ok(Accepted::Run(None));
        };
        let (Some(ctx), Some(mid)) = (
            message.get("contextId").and_then(Value::as_str),
            message.get("messageId").and_then(Value::as_str),
        ) else {
            return Ok(Accepted::Run(None));
        };
        let task_id = new_id();
        match d.store.claim_message(ctx, mid, &task_id, &d.replica).await {
            Ok(None) => Ok(Accepted::Run(Some(task_id))),
            Ok(Some(earlier)) => {
                tracing::info!(context = ctx, message = mid, task = %earlier, "message accepted before: not run again");
                Ok(Accepted::Earlier(earlier))
            }
            Err(e) => Err(RpcError {
                code: -32603,
                message: format!(
                    "Internal error: message {mid} could not be recorded in the state store ({e}); it was not run; retry"
                ),
            }),
        }
    }

    /// Undo [`TaskStore::accept`]'s claim of `message` as `task_id` (the task did not start:
    /// invalid parameters, draining), so the client may send it again.
    pub(super) async fn unaccept(&self, message: &Value, task_id: &str) {
        let Some(d) = &self.durable else { return };
        if let (Some(ctx), Some(mid)) = (
            message.get("contextId").and_then(Value::as_str),
            message.get("messageId").and_then(Value::as_str),
        ) {
            if let Err(e) = d.store.release_message(ctx, mid, task_id).await {
                tracing::warn!("state store: {e}");
            }
        }
    }

    /// The receiver that turns true when task `id` (running here) ends; `None` when it is not
    /// in this replica's memory.
    pub(super) fn done_of(&self, id: &str) -> Option<watch::Receiver<bool>> {
        lock(&self.inner).tasks.get(id).map(|e| e.done.clone())
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
        self.start_as(message, subscriber, base_url, None)
    }

    /// [`TaskStore::start_at`] as task `task_id` (the id [`TaskStore::accept`] claimed), or a new
    /// id.
    pub(super) fn start_as(
        self: &Arc<Self>,
        message: &Value,
        subscriber: Option<UnboundedSender<Value>>,
        base_url: Option<String>,
        task_id: Option<String>,
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
        // A form skill (`metadata.skill`): its input and scope are checked before the task exists.
        let form = super::forms::form_request(&self.agent, message)?;
        if form.is_none() && text.trim().is_empty() {
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
        // The login profile (metadata.forge.profile): known and usable, before the task exists.
        let profile = match message
            .get("metadata")
            .and_then(|m| m.get("forge"))
            .and_then(|f| f.get("profile"))
        {
            None | Some(Value::Null) => None,
            Some(Value::String(p)) => {
                self.agent.check_profile(p).map_err(|e| {
                    RpcError::invalid_params(format!("params.message.metadata.forge.profile: {e}"))
                })?;
                Some(p.clone())
            }
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "params.message.metadata.forge.profile must be a profile name (a string), not {other}"
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
        let task_id = task_id.unwrap_or_else(new_id);
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
                profile,
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
        let parent = crate::telemetry::current_parent();
        tokio::spawn(crate::telemetry::with_parent(parent, async move {
            store
                .run(
                    id,
                    context_id,
                    text,
                    history_msgs,
                    spec,
                    form,
                    cancel,
                    done_tx,
                )
                .await;
        }));
        Ok((task_id, done_rx))
    }

    pub(super) fn publish(&self, id: &str, update: impl FnOnce(&mut Entry) -> Vec<Value>) {
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.tasks.get_mut(id) {
            let events = update(e);
            e.subscribers
                .retain(|s| events.iter().all(|ev| s.send(ev.clone()).is_ok()));
            if !events.is_empty() {
                self.persist(id, e, &events);
            }
        }
        self.agent.audit.tap().changed(id);
    }

    pub(super) fn status_event(id: &str, e: &Entry, is_final: bool) -> Value {
        let mut status = json!({"state": e.state.as_str(), "timestamp": e.status_time});
        if let Some(m) = &e.status_message {
            status["message"] = m.clone();
        }
        json!({"kind": "status-update", "taskId": id, "contextId": e.context_id, "status": status, "final": is_final})
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run(
        self: Arc<Self>,
        id: String,
        context_id: String,
        text: String,
        history: Vec<Message>,
        spec: crate::task_scope::ResolvedSpec,
        form: Option<crate::forms::FormRequest>,
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
            let (close_browser, profile) = lock(&self.inner)
                .tasks
                .get(&id)
                .map(|e| (e.close_browser, e.profile.clone()))
                .unwrap_or((false, None));
            let browser =
                BrowserUse::conversation(&context_id, !close_browser).with_profile(profile);
            // A form skill runs its own way (no model); anything else is the agent loop's task.
            let run = async {
                match &form {
                    Some(req) => self.run_form(&id, &context_id, req, &cancel).await,
                    None => {
                        self.agent
                            .run_task_with(
                                &id,
                                &browser,
                                &text,
                                history,
                                cancel.clone(),
                                Some(tx),
                                &spec,
                            )
                            .await
                    }
                }
            };
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

    pub(super) fn progress(&self, id: &str, context_id: &str, ev: LoopEvent) {
        crate::ui::record_progress(&self.agent.audit, id, &ev);
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
            // While a person is needed the status keeps the hand-off's message (its link).
            if e.state != State::InputRequired {
                e.status_message = Some(msg.clone());
                e.status_time = rfc3339_now();
            }
            let mut ev = Self::status_event(id, e, false);
            ev["metadata"] = json!({"forge": data});
            vec![ev]
        });
    }
}
