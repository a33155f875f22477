//! [`ToolRunner`]: the single call path for tools, used by the agent loop and `forge tool call`:
//! lookup, `deny_commands` on the input, the time limit and cancellation, the tool itself (which
//! fences outside content), then `deny_output` (block, then redact) on the text and the data.
//! A guardrail hit is returned as [`ToolError::Guardrail`] (the model sees it; the task goes on)
//! and reported to [`ToolEvents`].
//!
//! A runner made by [`crate::assemble::AssembledTools::runner`] also carries what a call needs
//! outside the loop (files dir, egress client, time limit, the browser's sessions), so a caller
//! such as `forge tool call` or an MCP server can [`ToolRunner::call`] a tool in a session and
//! [`ToolRunner::close_session`] it (closing its browser context) without anything else.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forge_browser::BrowserManager;
use forge_egress::client::EgressClient;
use forge_tools::{Registry, ToolContext, ToolError, ToolOutput};
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::guardrails::{GuardrailHit, Guardrails};
use forge_llm::ToolSpec;

/// How often [`ToolRunner::call`] reports progress while a call runs.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// A call in progress, reported every [`PROGRESS_INTERVAL`] (first after one interval, so calls
/// shorter than that report nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallProgress {
    /// The tool being called.
    pub tool: String,
    /// The session the call belongs to.
    pub session_key: String,
    /// Time since the call started.
    pub elapsed: Duration,
}

/// Receives [`CallProgress`] reports.
pub type ProgressFn = Arc<dyn Fn(CallProgress) + Send + Sync>;

/// A finished call made through [`ToolRunner::call`] (the agent loop audits its own calls).
#[derive(Debug, Clone)]
pub struct CallEvent {
    pub session_key: String,
    pub tool: String,
    pub duration_ms: u64,
    pub input_bytes: usize,
    /// `Ok(output characters)` or `Err((error kind, message))`.
    pub result: Result<usize, (&'static str, String)>,
}

/// Where in a call a guardrail acted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailStage {
    ToolInput,
    ToolOutput,
}

/// A guardrail acted on a tool call.
#[derive(Debug, Clone, Serialize)]
pub struct GuardrailEvent {
    /// The session of the call: an A2A task's conversation (its context id), an MCP session.
    pub session_key: String,
    /// The task of the call ([`forge_tools::ToolContext::task_id`]), when it belongs to one.
    pub task_id: Option<String>,
    pub tool: String,
    pub stage: GuardrailStage,
    /// `blocked` or `redacted`.
    pub action: &'static str,
    /// The rule, for `blocked`.
    pub hit: Option<GuardrailHit>,
    /// Number of replacements, for `redacted`.
    pub redactions: usize,
}

/// Receives guardrail events (the runtime turns them into `guardrail_check` audit events).
pub trait ToolEvents: Send + Sync {
    fn on_guardrail(&self, event: &GuardrailEvent);
    /// A call made through [`ToolRunner::call`] ended (the runtime writes a `tool_exec` event).
    fn on_call(&self, _event: &CallEvent) {}
}

/// What a call needs besides the tool: where files go, the egress client, the time limit, and
/// the browser whose per-session contexts [`ToolRunner::close_session`] closes.
#[derive(Clone, Default)]
pub(crate) struct CallEnv {
    /// The agent's files dir; each call gets its workspace under it (see crate::workspace).
    pub files_dir: PathBuf,
    pub egress: Option<Arc<EgressClient>>,
    pub timeout: Option<Duration>,
    /// Every engine's manager (two when the browser skills use both engines).
    pub browsers: Vec<Arc<BrowserManager>>,
    /// Set when the assembled tools were shut down: calls are refused from then on (a call
    /// would otherwise relaunch Chromium on a proxy that no longer listens).
    pub stopped: Arc<AtomicBool>,
    /// The agent's resolved secrets: every call's context gets them, every result is redacted.
    pub secrets: forge_tools::Secrets,
}

/// The tool call path. Cheap to clone; share it across tasks and sessions.
#[derive(Clone)]
pub struct ToolRunner {
    registry: Arc<Registry>,
    guardrails: Arc<Guardrails>,
    events: Option<Arc<dyn ToolEvents>>,
    env: CallEnv,
    /// The workspace key of every call, when set ([`ToolRunner::in_workspace`]); else each
    /// session key is its own workspace.
    workspace: Option<String>,
}

impl ToolRunner {
    /// A runner over `registry` with `guardrails`.
    pub fn new(
        registry: Arc<Registry>,
        guardrails: Arc<Guardrails>,
        events: Option<Arc<dyn ToolEvents>>,
    ) -> Self {
        Self {
            registry,
            guardrails,
            events,
            env: CallEnv::default(),
            workspace: None,
        }
    }

    /// This runner with every call in the workspace keyed `key` whatever its session key (one
    /// `forge tool call` run is one workspace, however its session is named).
    pub fn in_workspace(mut self, key: impl Into<String>) -> Self {
        self.workspace = Some(key.into());
        self
    }

    /// This runner with every call in a new workspace of its own (forge-made id).
    pub fn in_new_workspace(self) -> Self {
        self.in_workspace(format!("run-{}", forge_state::new_id()))
    }

    pub(crate) fn with_env(mut self, env: CallEnv) -> Self {
        self.env = env;
        self
    }

    /// The tools this runner can call.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The tools as described to a model or an MCP client: name, description, input schema, in
    /// registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.registry
            .list()
            .iter()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect()
    }

    /// A context for calls in session `session_key` (one browser context per session key), with
    /// the files directory of its workspace (see crate::workspace).
    pub fn context(&self, session_key: impl Into<String>) -> ToolContext {
        let session_key = session_key.into();
        let key = self.workspace.as_deref().unwrap_or(&session_key);
        let files_dir = crate::workspace::workspace_dir(&self.env.files_dir, key);
        let mut ctx = ToolContext::new(session_key, files_dir);
        ctx.egress = self.env.egress.clone();
        ctx.timeout = self.env.timeout;
        ctx
    }

    /// A handle for one session's calls; [`ToolSession::close`] ends it.
    pub fn open_session(&self, session_key: impl Into<String>) -> ToolSession {
        ToolSession {
            runner: self.clone(),
            key: session_key.into(),
        }
    }

    /// Call tool `name` with `args` in session `session_key`: the same path as the agent loop's
    /// calls ([`ToolRunner::execute`]), stopped by `cancel`, reporting to `progress` every
    /// [`PROGRESS_INTERVAL`] while it runs, and reported to [`ToolEvents::on_call`] when done.
    /// The output's text is what a model sees (outside content fenced), its data the structured
    /// result.
    pub async fn call(
        &self,
        session_key: &str,
        name: &str,
        args: Value,
        cancel: CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<ToolOutput, ToolError> {
        let mut ctx = self.context(session_key);
        ctx.cancel = cancel;
        let input_bytes = args.to_string().len();
        let started = Instant::now();
        let files_root = self.env.files_dir.clone();
        // A file the tool made is captured as soon as it returns (bytes + SHA-256; see
        // crate::workspace::capture): the MCP result's image content reads that copy.
        let run = async {
            self.execute(name, args, &ctx).await.map(|mut o| {
                if !files_root.as_os_str().is_empty() {
                    crate::agent_loop::capture_artifacts(&files_root, &ctx.files_dir, &mut o);
                }
                o
            })
        };
        tokio::pin!(run);
        let result = match &progress {
            None => run.await,
            Some(report) => {
                let mut tick = tokio::time::interval_at(
                    tokio::time::Instant::now() + PROGRESS_INTERVAL,
                    PROGRESS_INTERVAL,
                );
                loop {
                    tokio::select! {
                        r = &mut run => break r,
                        _ = tick.tick() => report(CallProgress {
                            tool: name.to_string(),
                            session_key: session_key.to_string(),
                            elapsed: started.elapsed(),
                        }),
                    }
                }
            }
        };
        if let Some(e) = &self.events {
            e.on_call(&CallEvent {
                session_key: session_key.to_string(),
                tool: name.to_string(),
                duration_ms: started.elapsed().as_millis() as u64,
                input_bytes,
                result: match &result {
                    Ok(o) => Ok(o.text.chars().count()),
                    Err(e) => Err((e.kind(), e.to_string())),
                },
            });
        }
        result
    }

    /// End session `session_key`: its browser context (cookies, pages) is closed. A no-op for a
    /// session that never used the browser, or an agent without one.
    pub async fn close_session(&self, session_key: &str) {
        for b in &self.env.browsers {
            b.close_session(session_key).await;
        }
    }

    fn report(&self, ev: GuardrailEvent) {
        tracing::info!(tool = %ev.tool, stage = ?ev.stage, action = ev.action, "guardrail");
        if let Some(e) = &self.events {
            e.on_guardrail(&ev);
        }
    }

    /// Run tool `name` with `input` in `ctx`.
    pub async fn execute(
        &self,
        name: &str,
        input: Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let Some(tool) = self.registry.get(name) else {
            let names: Vec<&str> = self.registry.list().iter().map(|t| t.name()).collect();
            return Err(ToolError::InvalidInput(format!(
                "there is no tool called {name:?} for this agent; available: {}",
                names.join(", ")
            )));
        };
        if self.env.stopped.load(Ordering::SeqCst) {
            return Err(ToolError::Failed(format!(
                "{name}: the agent's tools have been shut down (the runner stopped); start the agent again to call tools"
            )));
        }
        if let Err(hit) = self.guardrails.check_input(name, &input) {
            let msg = hit.to_string();
            self.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                task_id: ctx.task_id.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolInput,
                action: "blocked",
                hit: Some(hit),
                redactions: 0,
            });
            return Err(ToolError::Guardrail(msg));
        }
        if ctx.cancel.is_cancelled() {
            return Err(ToolError::Cancelled);
        }
        let mut with_secrets;
        let ctx = if ctx.secrets.is_empty() && !self.env.secrets.is_empty() {
            with_secrets = ctx.clone();
            with_secrets.secrets = self.env.secrets.clone();
            &with_secrets
        } else {
            ctx
        };
        let run = tool.execute(ctx, input);
        let out = tokio::select! {
            r = async {
                match ctx.timeout {
                    Some(t) => tokio::time::timeout(t, run).await.unwrap_or(Err(ToolError::Timeout(t))),
                    None => run.await,
                }
            } => r,
            _ = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
        };
        let out = match out {
            Ok(out) => self.filter_output(name, ctx, out),
            Err(e) => Err(self.filter_error(name, ctx, e)),
        };
        redact_secrets(&ctx.secrets, out)
    }

    /// A tool error can quote outside content (a browser error carries a fresh observation of
    /// the page): its message gets the same output guardrails as a result (block, then redact).
    fn filter_error(&self, name: &str, ctx: &ToolContext, e: ToolError) -> ToolError {
        let blocked_reason;
        let msg = match &e {
            ToolError::InvalidInput(m) | ToolError::Failed(m) => m,
            // A refusal is checked by its reason (the text after `blocked by egress policy: `).
            ToolError::Blocked(r) => {
                blocked_reason = r.reason();
                &blocked_reason
            }
            _ => return e,
        };
        match self.guardrails.check_output(name, msg) {
            Err(hit) => {
                let why = hit.to_string();
                self.report(GuardrailEvent {
                    session_key: ctx.session_key.clone(),
                    task_id: ctx.task_id.clone(),
                    tool: name.to_string(),
                    stage: GuardrailStage::ToolOutput,
                    action: "blocked",
                    hit: Some(hit),
                    redactions: 0,
                });
                ToolError::Guardrail(why)
            }
            Ok(r) if r.redactions > 0 => {
                self.report(GuardrailEvent {
                    session_key: ctx.session_key.clone(),
                    task_id: ctx.task_id.clone(),
                    tool: name.to_string(),
                    stage: GuardrailStage::ToolOutput,
                    action: "redacted",
                    hit: None,
                    redactions: r.redactions,
                });
                match e {
                    ToolError::InvalidInput(_) => ToolError::InvalidInput(r.value),
                    ToolError::Blocked(refusal) => ToolError::Blocked(refusal.rewritten(r.value)),
                    _ => ToolError::Failed(r.value),
                }
            }
            Ok(_) => e,
        }
    }

    fn filter_output(
        &self,
        name: &str,
        ctx: &ToolContext,
        out: ToolOutput,
    ) -> Result<ToolOutput, ToolError> {
        let blocked = |this: &Self, hit: GuardrailHit| {
            let msg = hit.to_string();
            this.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                task_id: ctx.task_id.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolOutput,
                action: "blocked",
                hit: Some(hit),
                redactions: 0,
            });
            ToolError::Guardrail(msg)
        };
        // Structured data first, string by string (keeps JSON valid). When the text is just the
        // data's JSON, it is re-rendered from the redacted data, then checked as text too (which
        // catches patterns spanning several values).
        let (data, data_redactions) = match &out.data {
            Some(d) => {
                let r = self
                    .guardrails
                    .check_output_value(name, d)
                    .map_err(|h| blocked(self, h))?;
                (Some(r.value), r.redactions)
            }
            None => (None, 0),
        };
        let text_in = match (&out.data, &data) {
            (Some(orig), Some(redacted))
                if serde_json::to_string(orig).ok().as_deref() == Some(out.text.as_str()) =>
            {
                redacted.to_string()
            }
            _ => out.text.clone(),
        };
        let text = self
            .guardrails
            .check_output(name, &text_in)
            .map_err(|h| blocked(self, h))?;
        let redactions = text.redactions + data_redactions;
        if redactions > 0 {
            self.report(GuardrailEvent {
                session_key: ctx.session_key.clone(),
                task_id: ctx.task_id.clone(),
                tool: name.to_string(),
                stage: GuardrailStage::ToolOutput,
                action: "redacted",
                hit: None,
                redactions,
            });
        }
        Ok(ToolOutput {
            text: text.value,
            data,
        })
    }
}

/// One session's calls (e.g. one MCP session): [`ToolRunner::call`] with the key filled in.
#[derive(Clone)]
pub struct ToolSession {
    runner: ToolRunner,
    key: String,
}

impl ToolSession {
    /// The session key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Call a tool in this session: see [`ToolRunner::call`].
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        cancel: CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<ToolOutput, ToolError> {
        self.runner
            .call(&self.key, name, args, cancel, progress)
            .await
    }

    /// End the session, closing its browser context.
    pub async fn close(self) {
        self.runner.close_session(&self.key).await;
    }
}

/// Every secret value in a call's result or error replaced by `(secret NAME)`: the last step of
/// every call, so no tool's output (a page echoing a password, a server echoing a header) carries
/// one to the model, the audit log, the store or an A2A/MCP answer.
fn redact_secrets(
    secrets: &forge_tools::Secrets,
    out: Result<ToolOutput, ToolError>,
) -> Result<ToolOutput, ToolError> {
    if secrets.is_empty() {
        return out;
    }
    match out {
        Ok(mut o) => {
            o.text = secrets.redact(&o.text).into_owned();
            if let Some(d) = o.data.as_mut() {
                secrets.redact_json(d);
            }
            Ok(o)
        }
        Err(ToolError::InvalidInput(m)) => {
            Err(ToolError::InvalidInput(secrets.redact(&m).into_owned()))
        }
        Err(ToolError::Failed(m)) => Err(ToolError::Failed(secrets.redact(&m).into_owned())),
        Err(ToolError::Guardrail(m)) => Err(ToolError::Guardrail(secrets.redact(&m).into_owned())),
        Err(ToolError::Blocked(r)) => {
            let reason = r.reason();
            match secrets.redact(&reason) {
                std::borrow::Cow::Owned(clean) => Err(ToolError::Blocked(r.rewritten(clean))),
                std::borrow::Cow::Borrowed(_) => Err(ToolError::Blocked(r)),
            }
        }
        Err(e) => Err(e),
    }
}
