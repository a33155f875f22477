//! Forms at scale, the runtime's part (issue 25): the two form skills, `learn-form-schema` and
//! `execute-form-batch`, without a model.
//!
//! - [`FormRequest`]: what a caller asks (A2A `metadata.skill`/`skillId` with the input as JSON in
//!   the first text part or as fields of `metadata`; the CLI and MCP build the same value).
//!   `allowedHosts` is mandatory and narrows the agent's policy exactly as a task's
//!   `metadata.forge.allowed_hosts` does ([`crate::task_scope::TaskSpec::resolve`]).
//! - [`FormEnv::learn`]: open the page in a browser session of its own, served by a proxy
//!   listener on the narrowed policy, read the form (forge-browser `browser_form_learn`) and keep
//!   the schema in the state store under `sites/{host}/forms/{slug}`.
//! - [`FormEnv::run_batch`]: the batch scheduler over forge-state rows. Each row is claimed
//!   (`pending` -> `submitting`) before its form is filled and submitted (forge-browser
//!   `browser_form_row`), then recorded `done`/`failed`; a row whose outcome is unknown (the
//!   browser failed after the submit, or the process died: see forge-state `open_batch`) is
//!   `uncertain` and never sent again. `concurrency` workers (capped by `browser.max_sessions`)
//!   each use their own browser context. Cancelling stops after the rows in flight; a changed
//!   form stops the batch with what changed.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use forge_browser::forms::{FormSchema, LEARN_TOOL, ROW_TOOL};
use forge_state::{BatchRecord, FormRecord, FormStore, RowState, StateStore};
use forge_tools::ToolContext;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::agent_loop::{AgentLoop, SessionCloser};
use crate::task_scope::{BlockedLog, BlockedRecorder, SpecFields, TaskSpec, ToolName};

/// The A2A skill that learns a form.
pub const LEARN_SKILL: &str = "learn-form-schema";
/// The A2A skill that runs a batch.
pub const BATCH_SKILL: &str = "execute-form-batch";

/// The agent-card entries of the two skills: (id, description, tags).
pub(crate) fn card_skills() -> Vec<(String, String, Vec<String>)> {
    vec![
        (
            LEARN_SKILL.into(),
            "Read a web form's structure (fields, kinds, options, constraints, submit, steps) into a FormSchema, kept per site. Input: {url, allowedHosts, form?}.".into(),
            vec!["forms".into(), "browser".into()],
        ),
        (
            BATCH_SKILL.into(),
            "Submit rows of values through a learned form, one status update per row, resumable by batchId. Input: {schema (slug or inline), rows, allowedHosts, batchId?, concurrency?}.".into(),
            vec!["forms".into(), "browser".into()],
        ),
    ]
}

/// Why a form skill failed. Each message names the field or the thing, and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormError {
    /// The request is malformed.
    #[error("{0}")]
    Input(String),
    /// `allowedHosts` is missing or outside the agent's policy.
    #[error("{0}")]
    Scope(String),
    /// The state store failed or is missing.
    #[error("{0}")]
    Store(String),
    /// The agent has no browser.
    #[error("this agent has no browser: the form skills need a skill with `requires.capabilities: [browser]`")]
    NoBrowser,
    /// The browser failed.
    #[error("{0}")]
    Browser(String),
    /// The form changed since it was learned (the batch stopped).
    #[error("{0}")]
    Changed(String),
}

/// A learn request.
#[derive(Debug, Clone, PartialEq)]
pub struct LearnRequest {
    /// The page with the form.
    pub url: String,
    /// Which form, when the page has several (id, name, CSS selector or index).
    pub form: Option<String>,
    /// The name to keep it under.
    pub slug: Option<String>,
    /// The hosts the browser may reach (narrowing the agent's policy).
    pub allowed_hosts: Vec<String>,
}

/// Which schema a batch runs on.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaRef {
    /// A stored schema by slug (its host picked by `allowedHosts` when several sites have one).
    Slug(String),
    /// A schema given whole.
    Inline(Box<FormSchema>),
}

/// A batch request.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRequest {
    /// The schema.
    pub schema: SchemaRef,
    /// The rows: field key -> value.
    pub rows: Vec<Map<String, Value>>,
    /// The hosts the browser may reach.
    pub allowed_hosts: Vec<String>,
    /// The batch id (re-send it to resume); a new one when absent.
    pub batch_id: Option<String>,
    /// Rows at once (default 1, capped by `browser.max_sessions`).
    pub concurrency: Option<u64>,
}

/// A form skill request.
#[derive(Debug, Clone, PartialEq)]
pub enum FormRequest {
    /// `learn-form-schema`.
    Learn(LearnRequest),
    /// `execute-form-batch`.
    Batch(BatchRequest),
}

fn strings(v: &Value, field: &str) -> Result<Vec<String>, FormError> {
    let bad = || {
        FormError::Input(format!(
            "`{field}` must be a list of host entries like [\"portal.example.com\"]"
        ))
    };
    match v {
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
            .collect(),
        Value::String(s) => Ok(vec![s.clone()]),
        _ => Err(bad()),
    }
}

impl FormRequest {
    /// The form skill an A2A message asks for (`metadata.skill`, else `metadata.skillId`, else
    /// the message's `skillId`), with its input; `None` for any other message (the generalist).
    pub fn from_a2a_message(message: &Value) -> Result<Option<FormRequest>, FormError> {
        let meta = message.get("metadata").and_then(Value::as_object);
        let skill = meta
            .and_then(|m| m.get("skill").or_else(|| m.get("skillId")))
            .or_else(|| message.get("skillId"))
            .and_then(Value::as_str);
        let Some(skill) = skill.filter(|s| *s == LEARN_SKILL || *s == BATCH_SKILL) else {
            return Ok(None);
        };
        // The input: a JSON object in the first text part, else the metadata's fields.
        let text = message
            .get("parts")
            .and_then(Value::as_array)
            .and_then(|p| {
                p.iter().find(|x| {
                    x.get("kind")
                        .or_else(|| x.get("type"))
                        .and_then(Value::as_str)
                        == Some("text")
                        || x.get("text").is_some()
                })
            })
            .and_then(|p| p.get("text"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        let input = if text.starts_with('{') {
            serde_json::from_str::<Value>(text).map_err(|e| {
                FormError::Input(format!(
                    "the first text part of a {skill} message must be a JSON object ({e}); or give the fields in metadata"
                ))
            })?
        } else {
            let mut m = meta.cloned().unwrap_or_default();
            m.remove("skill");
            m.remove("skillId");
            m.remove("forge");
            Value::Object(m)
        };
        Self::from_json(skill, &input).map(Some)
    }

    /// The request for `skill` from its JSON input (Foragent's names: `url`, `allowedHosts`,
    /// `form`, `schema`, `rows`, `batchId`, `concurrency`; forge's `slug`).
    pub fn from_json(skill: &str, v: &Value) -> Result<FormRequest, FormError> {
        let o = v.as_object().ok_or_else(|| {
            FormError::Input(format!("the input of {skill} must be a JSON object"))
        })?;
        let hosts = match o.get("allowedHosts") {
            Some(h) => strings(h, "allowedHosts")?,
            None => Vec::new(),
        };
        if hosts.is_empty() {
            return Err(FormError::Scope(format!(
                "`allowedHosts` is required for {skill}: name the hosts the browser may reach (within the agent's egress allowlist), e.g. \"allowedHosts\": [\"portal.example.com\"]"
            )));
        }
        let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
        match skill {
            LEARN_SKILL => Ok(FormRequest::Learn(LearnRequest {
                url: text("url")
                    .filter(|u| !u.trim().is_empty())
                    .ok_or_else(|| {
                        FormError::Input("`url` (the page with the form) is required".into())
                    })?,
                form: text("form"),
                slug: text("slug"),
                allowed_hosts: hosts,
            })),
            BATCH_SKILL => {
                let schema = match o.get("schema") {
                    Some(Value::String(s)) => SchemaRef::Slug(s.clone()),
                    Some(v @ Value::Object(_)) => SchemaRef::Inline(Box::new(
                        serde_json::from_value(v.clone()).map_err(|e| {
                            FormError::Input(format!(
                                "`schema` is not a FormSchema ({e}); give a slug from learn-form-schema or its whole output"
                            ))
                        })?,
                    )),
                    _ => {
                        return Err(FormError::Input(
                            "`schema` is required: a slug (learn-form-schema's `slug`) or a FormSchema object".into(),
                        ))
                    }
                };
                let rows = match o.get("rows") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .enumerate()
                        .map(|(i, r)| {
                            r.as_object().cloned().ok_or_else(|| {
                                FormError::Input(format!(
                                    "rows[{i}] must be an object of field keys to values"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    _ => {
                        return Err(FormError::Input(
                            "`rows` is required: a list of objects, field key -> value".into(),
                        ))
                    }
                };
                let concurrency = match o.get("concurrency") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_u64() {
                        Some(n) if n >= 1 => Some(n),
                        _ => {
                            return Err(FormError::Input(
                                "`concurrency` must be a whole number of at least 1".into(),
                            ))
                        }
                    },
                };
                Ok(FormRequest::Batch(BatchRequest {
                    schema,
                    rows,
                    allowed_hosts: hosts,
                    batch_id: text("batchId").filter(|b| !b.trim().is_empty()),
                    concurrency,
                }))
            }
            other => Err(FormError::Input(format!("unknown form skill {other:?}"))),
        }
    }

    /// Its `allowedHosts`.
    pub fn allowed_hosts(&self) -> &[String] {
        match self {
            FormRequest::Learn(l) => &l.allowed_hosts,
            FormRequest::Batch(b) => &b.allowed_hosts,
        }
    }
}

/// One row's result.
#[derive(Debug, Clone, PartialEq)]
pub struct RowResult {
    /// 0-based.
    pub index: usize,
    /// `done`, `failed`, `uncertain`, `pending` (not reached: the batch stopped).
    pub status: String,
    /// The page's or forge's message.
    pub message: String,
    /// The row's values.
    pub values: Value,
}

/// A batch's result.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchResult {
    /// The batch id (re-send it to resume).
    pub batch_id: String,
    /// The form.
    pub host: String,
    /// Its slug.
    pub slug: String,
    /// Whether this run resumed an earlier one.
    pub resumed: bool,
    /// Every row, in order.
    pub rows: Vec<RowResult>,
    /// Why the batch stopped early (a changed form, a cancel), if it did.
    pub stopped: Option<String>,
    /// The fields shown in the CSV besides index, status and message.
    pub key_fields: Vec<String>,
}

impl BatchResult {
    fn count(&self, status: &str) -> usize {
        self.rows.iter().filter(|r| r.status == status).count()
    }

    /// `50 rows: 47 done, 3 failed` and why it stopped.
    pub fn summary(&self) -> String {
        let mut parts = vec![];
        for s in ["done", "failed", "uncertain", "pending"] {
            let n = self.count(s);
            if n > 0 {
                parts.push(format!("{n} {s}"));
            }
        }
        let mut out = format!(
            "batch {} on {}/{}: {} rows: {}",
            self.batch_id,
            self.host,
            self.slug,
            self.rows.len(),
            parts.join(", ")
        );
        if let Some(s) = &self.stopped {
            out.push_str(&format!("; stopped: {s}"));
        }
        out
    }

    /// The result as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "batchId": self.batch_id,
            "host": self.host,
            "slug": self.slug,
            "resumed": self.resumed,
            "stopped": self.stopped,
            "summary": self.summary(),
            "rows": self.rows.iter().map(|r| json!({
                "index": r.index, "status": r.status, "message": r.message, "values": r.values,
            })).collect::<Vec<_>>(),
        })
    }

    /// The result as CSV: `index,status,message` and the key fields.
    pub fn to_csv(&self) -> String {
        let cell = |s: &str| {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_string()
            }
        };
        let mut out = String::from("index,status,message");
        for k in &self.key_fields {
            out.push(',');
            out.push_str(&cell(k));
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&format!(
                "{},{},{}",
                r.index,
                cell(&r.status),
                cell(&r.message)
            ));
            for k in &self.key_fields {
                let v = match r.values.get(k) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(Value::Object(_)) => "(secret)".into(),
                    Some(other) => other.to_string(),
                };
                out.push(',');
                out.push_str(&cell(&v));
            }
            out.push('\n');
        }
        out
    }
}

/// What the form skills run with (from the agent loop for A2A, from the [`crate::Runner`] for
/// `forge forms`).
#[derive(Clone)]
pub struct FormEnv {
    /// The browser side (sessions, their proxy listeners, the form tools); None without the
    /// browser.
    pub sessions: Option<Arc<dyn SessionCloser>>,
    /// The agent's files dir (each session's workspace is under it).
    pub files_dir: std::path::PathBuf,
    /// The agent's egress policy, narrowed by each request's `allowedHosts`.
    pub policy: Option<Arc<forge_egress::EgressPolicy>>,
    /// forge.yaml `tasks:` (the scope is resolved as a task's).
    pub tasks: forge_skills::TasksConfig,
    /// The state store (schemas and rows).
    pub store: Option<Arc<dyn StateStore>>,
    /// This replica's id (rows name who claimed them).
    pub replica: String,
}

/// `policy` narrowed by `hosts` (as a task's `allowed_hosts`; an entry outside the agent's
/// policy is refused, naming it).
pub(crate) fn narrowed(
    policy: Option<&Arc<forge_egress::EgressPolicy>>,
    tasks: &forge_skills::TasksConfig,
    hosts: &[String],
) -> Result<Arc<forge_egress::EgressPolicy>, FormError> {
    let spec = TaskSpec {
        allowed_hosts: Some(hosts.to_vec()),
        ..Default::default()
    };
    let fields = SpecFields {
        allowed_hosts: "allowedHosts",
        max_steps: "max_steps",
        max_seconds: "max_seconds",
    };
    let resolved = spec
        .resolve(tasks, policy, fields)
        .map_err(|e| FormError::Scope(e.to_string()))?;
    resolved
        .policy
        .ok_or_else(|| FormError::Scope("this agent has no egress policy to narrow".into()))
}

/// A progress report: the row, its 1-based position and the total.
pub type Progress<'a> = &'a (dyn Fn(&RowResult, usize, usize) + Send + Sync);

impl FormEnv {
    /// The form env of the agent loop `agent` (the A2A server's).
    pub(crate) fn of_agent(
        agent: &AgentLoop,
        store: Option<Arc<dyn StateStore>>,
        replica: String,
    ) -> FormEnv {
        FormEnv {
            sessions: agent.sessions.clone(),
            files_dir: agent.files_dir.clone(),
            policy: agent.policy().cloned(),
            tasks: agent.config.tasks,
            store,
            replica,
        }
    }

    /// Give this process's lease on the state store back (`forge forms`, when done).
    pub async fn release(&self) {
        if let Some(s) = &self.store {
            let _ = s.remove_replica(&self.replica).await;
        }
    }

    fn sessions(&self) -> Result<&Arc<dyn SessionCloser>, FormError> {
        let s = self.sessions.as_ref().ok_or(FormError::NoBrowser)?;
        if s.form_tool(LEARN_TOOL).is_none() {
            return Err(FormError::NoBrowser);
        }
        Ok(s)
    }

    fn forms(&self) -> Result<&dyn FormStore, FormError> {
        self.store
            .as_ref()
            .and_then(|s| s.forms())
            .ok_or_else(|| FormError::Store("the form skills keep schemas and batch rows in the state store, and this agent runs without one (forge.yaml state:)".into()))
    }

    fn policy(&self, hosts: &[String]) -> Result<Arc<forge_egress::EgressPolicy>, FormError> {
        narrowed(self.policy.as_ref(), &self.tasks, hosts)
    }

    /// Run form tool `name` in browser session `key` (opened on `policy` by the caller).
    async fn call(
        &self,
        key: &str,
        task_id: &str,
        name: &str,
        input: Value,
    ) -> Result<forge_tools::ToolOutput, forge_tools::ToolError> {
        let sessions = self
            .sessions
            .as_ref()
            .ok_or_else(|| forge_tools::ToolError::Failed("this agent has no browser".into()))?;
        let tool = sessions.form_tool(name).ok_or_else(|| {
            forge_tools::ToolError::Failed(format!("this agent has no {name} tool"))
        })?;
        let workspace = self.files_dir.join(crate::workspace::workspace_id(key));
        let mut ctx = ToolContext::new(key, workspace);
        ctx.task_id = Some(task_id.to_string());
        ctx.secrets = sessions.secrets();
        // Never cancelled from outside: a batch stops between rows, never inside one.
        ctx.cancel = CancellationToken::new();
        let out = tool.execute(&ctx, input).await;
        // Results are page-derived: a secret the page echoes is redacted.
        match out {
            Ok(mut o) => {
                o.text = ctx.secrets.redact(&o.text).into_owned();
                if let Some(d) = o.data.as_mut() {
                    ctx.secrets.redact_json(d);
                }
                Ok(o)
            }
            Err(e) => Err(forge_tools::ToolError::Failed(
                ctx.secrets.redact(&e.to_string()).into_owned(),
            )),
        }
    }

    /// Open browser session `key` with its own proxy listener on `policy`.
    async fn open(
        &self,
        key: &str,
        policy: &Arc<forge_egress::EgressPolicy>,
        tool: &str,
    ) -> Result<(), FormError> {
        let s = self.sessions()?;
        let recorder = Arc::new(BlockedRecorder {
            log: BlockedLog::default(),
            tool: ToolName::Fixed(tool.to_string()),
            // Form skills run without the agent loop, so without a task span: no egress spans.
            trace: Default::default(),
        });
        s.open_scoped_proxy(key, policy.clone(), recorder)
            .await
            .map_err(FormError::Browser)
    }

    async fn close(&self, key: &str) {
        if let Some(s) = &self.sessions {
            s.close_session(key).await;
            s.release_scoped_proxy(key).await;
        }
    }

    /// Learn the form of `req`; keep it in the store when there is one. Returns the schema and
    /// whether it was kept.
    pub async fn learn(
        &self,
        task_id: &str,
        req: &LearnRequest,
    ) -> Result<(FormSchema, bool), FormError> {
        let policy = self.policy(&req.allowed_hosts)?;
        let key = format!("{task_id}-learn");
        self.open(&key, &policy, LEARN_TOOL).await?;
        let mut input = json!({"url": req.url});
        if let Some(f) = &req.form {
            input["form"] = json!(f);
        }
        if let Some(s) = &req.slug {
            input["slug"] = json!(s);
        }
        let out = self.call(&key, task_id, LEARN_TOOL, input).await;
        self.close(&key).await;
        let out = out.map_err(|e| FormError::Browser(e.to_string()))?;
        let schema: FormSchema = serde_json::from_value(out.data.unwrap_or(Value::Null))
            .map_err(|e| FormError::Browser(format!("the learned schema does not read: {e}")))?;
        let kept = match self.store.as_ref().and_then(|s| s.forms()) {
            Some(f) => {
                f.save_form(&FormRecord {
                    host: schema.host.clone(),
                    slug: schema.slug.clone(),
                    schema: serde_json::to_value(&schema).unwrap_or(Value::Null),
                    fingerprint: schema.fingerprint.clone(),
                    updated_ms: forge_state::now_ms(),
                })
                .await
                .map_err(|e| FormError::Store(e.to_string()))?;
                true
            }
            None => false,
        };
        Ok((schema, kept))
    }

    /// The schema `r` names.
    async fn schema(&self, r: &SchemaRef, hosts: &[String]) -> Result<FormSchema, FormError> {
        match r {
            SchemaRef::Inline(s) => Ok((**s).clone()),
            SchemaRef::Slug(slug) => {
                let all = self
                    .forms()?
                    .forms()
                    .await
                    .map_err(|e| FormError::Store(e.to_string()))?;
                let mut found: Vec<FormRecord> =
                    all.into_iter().filter(|f| &f.slug == slug).collect();
                if found.len() > 1 {
                    found.retain(|f| hosts.iter().any(|h| h.eq_ignore_ascii_case(&f.host)));
                }
                match found.len() {
                    0 => Err(FormError::Input(format!(
                        "no learned form is called {slug:?}; learn it first (learn-form-schema, `forge forms learn URL`), `forge forms list` shows the learned ones"
                    ))),
                    1 => serde_json::from_value(found.remove(0).schema).map_err(|e| {
                        FormError::Store(format!("the stored schema {slug:?} does not read: {e}"))
                    }),
                    _ => Err(FormError::Input(format!(
                        "several sites have a form called {slug:?} ({}); name one of them in allowedHosts",
                        found.iter().map(|f| f.host.as_str()).collect::<Vec<_>>().join(", ")
                    ))),
                }
            }
        }
    }

    /// Run the batch of `req` (see the module comment), reporting each row to `progress`.
    pub async fn run_batch(
        &self,
        task_id: &str,
        req: &BatchRequest,
        cancel: &CancellationToken,
        progress: Progress<'_>,
    ) -> Result<BatchResult, FormError> {
        let policy = self.policy(&req.allowed_hosts)?;
        let sessions = self.sessions()?;
        let forms = self.forms()?;
        let schema = self.schema(&req.schema, &req.allowed_hosts).await?;
        // Every key of every row must be a field (a misspelt key would be silently left out).
        for (i, row) in req.rows.iter().enumerate() {
            for k in row.keys() {
                if !schema.fields.iter().any(|f| &f.key == k) {
                    return Err(FormError::Input(format!(
                        "rows[{i}] has key {k:?}, which form {} has no field for; its fields: {}",
                        schema.slug,
                        schema
                            .fields
                            .iter()
                            .map(|f| f.key.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
            }
        }
        let batch_id = req.batch_id.clone().unwrap_or_else(forge_state::new_id);
        let rows: Vec<Value> = req.rows.iter().cloned().map(Value::Object).collect();
        let (head, stored, resumed) = forms
            .open_batch(
                &BatchRecord {
                    id: batch_id.clone(),
                    host: schema.host.clone(),
                    slug: schema.slug.clone(),
                    fingerprint: schema.fingerprint.clone(),
                    total: rows.len() as i64,
                },
                &rows,
            )
            .await
            .map_err(|e| FormError::Store(e.to_string()))?;
        if resumed && (head.host != schema.host || head.slug != schema.slug) {
            return Err(FormError::Input(format!(
                "batch {batch_id} runs form {}/{}, not {}/{}; use a new batchId",
                head.host, head.slug, schema.host, schema.slug
            )));
        }
        let total = stored.len();
        let todo: Vec<(usize, Value)> = stored
            .iter()
            .filter(|r| r.state == RowState::Pending)
            .map(|r| (r.index as usize, r.data.clone()))
            .collect();
        // Rows finished by an earlier run are reported first.
        for r in stored.iter().filter(|r| r.state != RowState::Pending) {
            let i = r.index as usize;
            progress(
                &RowResult {
                    index: i,
                    status: r.state.as_str().to_string(),
                    message: format!(
                        "earlier run: {}",
                        r.message.clone().unwrap_or_else(|| r.state.as_str().into())
                    ),
                    values: r.data.clone(),
                },
                i + 1,
                total,
            );
        }
        let workers = req
            .concurrency
            .unwrap_or(1)
            .clamp(1, sessions.max_sessions().max(1) as u64) as usize;
        let workers = workers.min(todo.len().max(1));
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let stopped: Mutex<Option<String>> = Mutex::new(None);
        let schema_json = serde_json::to_value(&schema).unwrap_or(Value::Null);
        let worker = |w: usize| {
            let (next, stop, stopped, todo, schema_json, policy) =
                (&next, &stop, &stopped, &todo, &schema_json, &policy);
            let batch_id = batch_id.clone();
            async move {
                let key = format!("{task_id}-form-{w}");
                if let Err(e) = self.open(&key, policy, ROW_TOOL).await {
                    *stopped.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    stop.store(true, Ordering::SeqCst);
                    return;
                }
                loop {
                    if stop.load(Ordering::SeqCst) || cancel.is_cancelled() {
                        break;
                    }
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    let Some((index, data)) = todo.get(n) else {
                        break;
                    };
                    let idx = *index as i64;
                    match forms.claim_row(&batch_id, idx, &self.replica).await {
                        Ok(true) => {}
                        // Another replica has it (or finished it): not this one's.
                        Ok(false) => continue,
                        Err(e) => {
                            *stopped.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(format!("the state store failed: {e}"));
                            stop.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                    let out = self
                        .call(
                            &key,
                            task_id,
                            ROW_TOOL,
                            json!({"schema": schema_json, "row": data}),
                        )
                        .await;
                    let (state, message) = match out {
                        Ok(o) => {
                            let d = o.data.unwrap_or(Value::Null);
                            let msg = d
                                .get("message")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string();
                            match d.get("status").and_then(Value::as_str) {
                                Some("done") => (RowState::Done, msg),
                                Some("failed") => (RowState::Failed, msg),
                                Some("changed") => {
                                    // Nothing was typed: the row goes back, the batch stops.
                                    let _ = forms.unclaim_row(&batch_id, idx).await;
                                    *stopped.lock().unwrap_or_else(|p| p.into_inner()) =
                                        Some(msg);
                                    stop.store(true, Ordering::SeqCst);
                                    break;
                                }
                                _ => (RowState::Uncertain, msg),
                            }
                        }
                        // The tool failed somewhere: the submit may have been sent.
                        Err(e) => (
                            RowState::Uncertain,
                            format!("the browser failed during this row ({e}); it may or may not have been submitted, so it is not sent again"),
                        ),
                    };
                    if let Err(e) = forms
                        .finish_row(&batch_id, idx, state, Some(&message))
                        .await
                    {
                        *stopped.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(format!("the state store failed: {e}"));
                        stop.store(true, Ordering::SeqCst);
                    }
                    progress(
                        &RowResult {
                            index: *index,
                            status: state.as_str().to_string(),
                            message,
                            values: data.clone(),
                        },
                        index + 1,
                        total,
                    );
                }
                self.close(&key).await;
            }
        };
        futures::future::join_all((0..workers).map(worker)).await;
        let mut stopped = stopped.into_inner().unwrap_or_else(|p| p.into_inner());
        if stopped.is_none() && cancel.is_cancelled() {
            stopped = Some(
                "cancelled; the rows not reached are pending: re-send the batchId to go on".into(),
            );
        }
        let finals = forms
            .batch_rows(&batch_id)
            .await
            .map_err(|e| FormError::Store(e.to_string()))?;
        let key_fields = schema
            .fields
            .iter()
            .filter(|f| req.rows.iter().any(|r| r.contains_key(&f.key)))
            .take(3)
            .map(|f| f.key.clone())
            .collect();
        let result = BatchResult {
            batch_id,
            host: schema.host.clone(),
            slug: schema.slug.clone(),
            resumed,
            rows: finals
                .into_iter()
                .map(|r| RowResult {
                    index: r.index as usize,
                    status: r.state.as_str().to_string(),
                    message: r.message.unwrap_or_default(),
                    values: r.data,
                })
                .collect(),
            stopped,
            key_fields,
        };
        Ok(result)
    }
}
