//! One task's scope, budgets and result.
//!
//! - [`TaskSpec`]: what a caller asks for one task (A2A `metadata.forge = {allowed_hosts,
//!   max_steps, max_seconds}`, `forge run --once --task-host ... --max-steps N --max-seconds S`).
//! - [`TaskSpec::resolve`] checks it against the agent: `allowed_hosts` only narrows the agent's
//!   egress policy ([`forge_egress::EgressPolicy::narrow`]; an entry the agent does not allow is
//!   an error naming it), budgets default to forge.yaml `tasks:` and may not exceed its caps.
//!   The result, [`ResolvedSpec`], carries the task's policy (the same type, narrowed), which the
//!   agent loop hands to the task's egress client and to the task's own proxy listener.
//! - [`TaskResult`]: how every task ends (`{status, answer, steps, seconds, navigations,
//!   blocked, artifacts}`), as the A2A `result` artifact, `forge run --once --format json`, the
//!   audit log's `session_end` and the state store's task record.
//! - [`BlockedLog`]: the refusals of one task, filled by [`BlockedRecorder`]s, egress observers
//!   on the task's client (one per tool call, naming the tool) and on its proxy listener (naming
//!   the browser tool in flight).

use std::sync::{Arc, Mutex};

use forge_egress::policy::PolicyError;
use forge_egress::proxy::{Decision, EgressObserver, Outcome};
use forge_egress::EgressPolicy;
use forge_skills::TasksConfig;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a caller asks for one task. `None` fields take forge.yaml `tasks:` defaults (and the
/// agent's whole egress policy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSpec {
    /// Entries (the `egress.allowed_domains` syntax) narrowing the agent's egress policy.
    pub allowed_hosts: Option<Vec<String>>,
    /// Tool calls the task may make.
    pub max_steps: Option<u64>,
    /// Wall time the task may take, in seconds.
    pub max_seconds: Option<u64>,
}

/// Why a [`TaskSpec`] was refused. Each message names the field, the value and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// An `allowed_hosts` entry is malformed or not allowed by the agent's policy.
    #[error(transparent)]
    Host(#[from] PolicyError),
    /// A budget is zero or above forge.yaml's cap.
    #[error("invalid {field} value {value}: {why} (hint: {hint})")]
    Budget {
        /// Where it was written, e.g. `metadata.forge.max_steps` or `--max-steps`.
        field: String,
        /// The value asked for.
        value: u64,
        /// What is wrong.
        why: String,
        /// How to fix it.
        hint: String,
    },
    /// `metadata.forge` does not have the expected shape.
    #[error("invalid {field}: {why}")]
    Shape {
        /// Where.
        field: String,
        /// What is wrong.
        why: String,
    },
}

/// Where each field of a spec was written, for error messages.
#[derive(Debug, Clone, Copy)]
pub struct SpecFields {
    /// The `allowed_hosts` field (`metadata.forge.allowed_hosts`, `--task-host`).
    pub allowed_hosts: &'static str,
    /// The `max_steps` field.
    pub max_steps: &'static str,
    /// The `max_seconds` field.
    pub max_seconds: &'static str,
}

impl SpecFields {
    /// A2A `metadata.forge.*`.
    pub const A2A: SpecFields = SpecFields {
        allowed_hosts: "metadata.forge.allowed_hosts",
        max_steps: "metadata.forge.max_steps",
        max_seconds: "metadata.forge.max_seconds",
    };
    /// `forge run --once` flags.
    pub const CLI: SpecFields = SpecFields {
        allowed_hosts: "--task-host",
        max_steps: "--max-steps",
        max_seconds: "--max-seconds",
    };
}

/// A spec checked against the agent: the task's policy and budgets.
#[derive(Debug, Clone)]
pub struct ResolvedSpec {
    /// The task's egress policy: the agent's, narrowed when the caller gave `allowed_hosts`.
    /// `None` only for a loop without an egress client (tests of the loop alone).
    pub policy: Option<Arc<EgressPolicy>>,
    /// Tool calls the task may make.
    pub max_steps: u64,
    /// Wall time, in seconds.
    pub max_seconds: u64,
}

impl ResolvedSpec {
    /// The defaults of `limits`, on `policy` un-narrowed.
    pub fn defaults(limits: &TasksConfig, policy: Option<Arc<EgressPolicy>>) -> Self {
        ResolvedSpec {
            policy,
            max_steps: limits.max_steps,
            max_seconds: limits.max_seconds,
        }
    }
}

impl TaskSpec {
    /// Read A2A `message.metadata.forge` (absent: an empty spec). Unknown keys are refused, so a
    /// misspelt budget is not silently ignored.
    pub fn from_a2a_message(message: &Value) -> Result<TaskSpec, SpecError> {
        let Some(forge) = message.get("metadata").and_then(|m| m.get("forge")) else {
            return Ok(TaskSpec::default());
        };
        let shape = |field: &str, why: &str| SpecError::Shape {
            field: field.to_string(),
            why: why.to_string(),
        };
        let Some(obj) = forge.as_object() else {
            return Err(shape(
                "metadata.forge",
                "must be an object like {\"allowed_hosts\": [\"example.com\"], \"max_steps\": 20, \"max_seconds\": 120}",
            ));
        };
        let mut spec = TaskSpec::default();
        for (k, v) in obj {
            match k.as_str() {
                "allowed_hosts" => {
                    let field = "metadata.forge.allowed_hosts";
                    let arr = v.as_array().ok_or_else(|| {
                        shape(field, "must be a list of host entries like [\"example.com\", \"*.example.org\"]")
                    })?;
                    let mut hosts = Vec::new();
                    for (i, h) in arr.iter().enumerate() {
                        let s = h.as_str().ok_or_else(|| {
                            shape(&format!("{field}[{i}]"), "must be a string (a host entry)")
                        })?;
                        hosts.push(s.to_string());
                    }
                    spec.allowed_hosts = Some(hosts);
                }
                "max_steps" | "max_seconds" => {
                    let field = format!("metadata.forge.{k}");
                    let n = v
                        .as_u64()
                        .ok_or_else(|| shape(&field, "must be a positive whole number"))?;
                    if k == "max_steps" {
                        spec.max_steps = Some(n);
                    } else {
                        spec.max_seconds = Some(n);
                    }
                }
                // Keys other parts of forge read (browser session control, the login profile).
                "close_browser" | "profile" => {}
                other => {
                    return Err(shape(
                        &format!("metadata.forge.{other}"),
                        "unknown key (known: allowed_hosts, max_steps, max_seconds, close_browser, profile)",
                    ))
                }
            }
        }
        Ok(spec)
    }

    /// Check the spec against the agent's `policy` and forge.yaml `limits`.
    pub fn resolve(
        &self,
        limits: &TasksConfig,
        policy: Option<&Arc<EgressPolicy>>,
        fields: SpecFields,
    ) -> Result<ResolvedSpec, SpecError> {
        let budget = |field: &str, value: Option<u64>, default: u64, cap: u64, cap_key: &str| {
            let Some(v) = value else {
                return Ok(default);
            };
            if v == 0 {
                return Err(SpecError::Budget {
                    field: field.to_string(),
                    value: v,
                    why: "must be at least 1".into(),
                    hint: format!("leave it out for the agent's default ({default})"),
                });
            }
            if v > cap {
                return Err(SpecError::Budget {
                    field: field.to_string(),
                    value: v,
                    why: format!("above this agent's cap (forge.yaml tasks.{cap_key}: {cap})"),
                    hint: format!("ask for {cap} or less"),
                });
            }
            Ok(v)
        };
        let max_steps = budget(
            fields.max_steps,
            self.max_steps,
            limits.max_steps,
            limits.max_steps_cap,
            "max_steps_cap",
        )?;
        let max_seconds = budget(
            fields.max_seconds,
            self.max_seconds,
            limits.max_seconds,
            limits.max_seconds_cap,
            "max_seconds_cap",
        )?;
        let policy = match (&self.allowed_hosts, policy) {
            (Some(hosts), Some(p)) => Some(Arc::new(p.narrow(hosts, fields.allowed_hosts)?)),
            (Some(_), None) => {
                return Err(SpecError::Shape {
                    field: fields.allowed_hosts.to_string(),
                    why: "this agent loop has no egress client to narrow".into(),
                })
            }
            (None, p) => p.cloned(),
        };
        Ok(ResolvedSpec {
            policy,
            max_steps,
            max_seconds,
        })
    }
}

/// How a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResultStatus {
    /// The model gave its final answer.
    Done,
    /// The task failed (model error, guardrail, no answer within max_iterations).
    Failed,
    /// A budget (max_steps, max_seconds) ran out; the answer is the model's last word on it.
    Incomplete,
    /// The task was cancelled.
    Canceled,
}

/// A main-frame page the task's browser loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NavigationRecord {
    /// The URL.
    pub url: String,
    /// The HTTP status.
    pub status: i64,
}

/// A request the egress policy refused during the task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedRecord {
    /// The host (normalised), with `:port` when the port is not 80 or 443.
    pub host: String,
    /// The tool whose request it was (`http_request`, `browser_navigate`, ...).
    pub tool: String,
}

/// A file the task wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRecord {
    /// The file name.
    pub name: String,
    /// Its media type.
    pub mime_type: String,
    /// Its size.
    pub size_bytes: u64,
    /// The SHA-256 (hex) of the bytes captured when it was made (absent when it could not be
    /// captured: too large, not a plain file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Where it is.
    pub uri: String,
}

/// How a task ended, for the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// done, failed, incomplete or canceled.
    pub status: ResultStatus,
    /// The final answer (for failed: what went wrong).
    pub answer: String,
    /// Tool calls made.
    pub steps: u64,
    /// Wall time, in seconds (millisecond precision).
    pub seconds: f64,
    /// Main-frame pages the browser loaded, in order.
    pub navigations: Vec<NavigationRecord>,
    /// Requests the egress policy refused, one per (host, tool).
    pub blocked: Vec<BlockedRecord>,
    /// Files written.
    pub artifacts: Vec<ArtifactRecord>,
}

impl TaskResult {
    /// The result as JSON.
    pub fn to_json(&self) -> Value {
        // Invariant: every field serialises (strings, numbers, plain structs).
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// One line: `done in 3 steps, 1.2 s; 2 pages, 1 blocked, 0 files`.
    pub fn summary(&self) -> String {
        let status = match self.status {
            ResultStatus::Done => "done",
            ResultStatus::Failed => "failed",
            ResultStatus::Incomplete => "incomplete",
            ResultStatus::Canceled => "canceled",
        };
        format!(
            "{status} in {} step{}, {:.1} s; {} page{}, {} blocked, {} file{}",
            self.steps,
            if self.steps == 1 { "" } else { "s" },
            self.seconds,
            self.navigations.len(),
            if self.navigations.len() == 1 { "" } else { "s" },
            self.blocked.len(),
            self.artifacts.len(),
            if self.artifacts.len() == 1 { "" } else { "s" },
        )
    }
}

/// Refusals kept per task (one per host and tool; past it they are not listed).
pub(crate) const MAX_BLOCKED: usize = 100;

/// The refusals of one task.
#[derive(Debug, Clone, Default)]
pub(crate) struct BlockedLog(Arc<Mutex<Vec<BlockedRecord>>>);

impl BlockedLog {
    /// Record a refusal of `host` for `tool` (once per pair).
    pub(crate) fn push(&self, host: &str, tool: &str) {
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if v.len() >= MAX_BLOCKED || v.iter().any(|b| b.host == host && b.tool == tool) {
            return;
        }
        v.push(BlockedRecord {
            host: host.to_string(),
            tool: tool.to_string(),
        });
    }

    /// What was recorded, in order.
    pub(crate) fn list(&self) -> Vec<BlockedRecord> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// Which tool a recorder names.
#[derive(Debug, Clone)]
pub(crate) enum ToolName {
    /// Always this tool (the client of one tool call).
    Fixed(String),
    /// The browser tool in flight (the task's proxy listener; browser calls run one at a time).
    Current(Arc<Mutex<String>>),
}

impl ToolName {
    /// The tool named now.
    pub(crate) fn current(&self) -> String {
        match self {
            ToolName::Fixed(t) => t.clone(),
            ToolName::Current(c) => c.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

/// An egress observer writing the refusals it sees into a task's [`BlockedLog`].
pub(crate) struct BlockedRecorder {
    /// The log.
    pub log: BlockedLog,
    /// The tool to name.
    pub tool: ToolName,
    /// The span the decisions are recorded under (the tool call's, or the task's for its
    /// browser proxy); every decision, allowed or refused, becomes an egress span there.
    pub trace: crate::telemetry::Trace,
}

impl EgressObserver for BlockedRecorder {
    fn on_decision(&self, d: &Decision) {
        self.trace.egress(d);
        if matches!(d.outcome, Outcome::Blocked | Outcome::Malformed) {
            let tool = self.tool.current();
            // The port is part of what was refused unless it is a default one.
            let host = match d.port {
                0 | 80 | 443 => d.host.clone(),
                p if d.host.contains(':') => format!("[{}]:{p}", d.host),
                p => format!("{}:{p}", d.host),
            };
            self.log.push(&host, &tool);
        }
    }
}

/// The line of the system prompt naming the hosts the task may reach.
pub(crate) fn hosts_line(policy: &EgressPolicy) -> String {
    use forge_egress::policy::EntrySource;
    if let Some(scope) = policy.scope() {
        return if scope.is_empty() {
            "Hosts this task may reach: none (the caller allowed no hosts); do not try to reach any.".into()
        } else {
            format!(
                "Hosts this task may reach: {} (the caller narrowed this task; every other host is refused).",
                scope.join(", ")
            )
        };
    }
    if policy.mode() == forge_egress::EgressMode::DevOpen {
        return "Hosts this task may reach: any public host (egress mode dev-open; private and loopback addresses are refused).".into();
    }
    let hosts: Vec<&str> = policy
        .entries()
        .iter()
        .filter(|e| !matches!(e.source, EntrySource::Forge(_)))
        .map(|e| e.text.as_str())
        .collect();
    if hosts.is_empty() {
        "Hosts this task may reach: none (egress is deny-all for this agent).".into()
    } else {
        format!(
            "Hosts this task may reach: {} (every other host is refused).",
            hosts.join(", ")
        )
    }
}

/// The media type of an artifact, by its extension: the one table `file_create` also uses, so an
/// artifact's type is the same inline, over `/artifacts/...` and in the tool's own result.
pub(crate) fn mime_for(path: &std::path::Path) -> &'static str {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    forge_tools::builtins::file_create::mime_for(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agent() -> Arc<EgressPolicy> {
        Arc::new(
            EgressPolicy::allowlist(["127.0.0.1:8001", "127.0.0.1:8002", "example.com"]).unwrap(),
        )
    }

    #[test]
    fn a2a_metadata_is_read_and_checked() {
        let m = json!({"metadata": {"forge": {"allowed_hosts": ["127.0.0.1:8001"], "max_steps": 2, "max_seconds": 9}}});
        let spec = TaskSpec::from_a2a_message(&m).unwrap();
        assert_eq!(spec.allowed_hosts, Some(vec!["127.0.0.1:8001".to_string()]));
        let r = spec
            .resolve(&TasksConfig::default(), Some(&agent()), SpecFields::A2A)
            .unwrap();
        assert_eq!((r.max_steps, r.max_seconds), (2, 9));
        assert_eq!(
            r.policy.unwrap().scope(),
            Some(vec!["127.0.0.1:8001".to_string()])
        );
        for (bad, what) in [
            (
                json!({"forge": {"max_steps": "3"}}),
                "metadata.forge.max_steps",
            ),
            (
                json!({"forge": {"allowed_hosts": "a.com"}}),
                "metadata.forge.allowed_hosts",
            ),
            (
                json!({"forge": {"allowed_hosts": [1]}}),
                "metadata.forge.allowed_hosts[0]",
            ),
            (json!({"forge": {"max_step": 3}}), "metadata.forge.max_step"),
            (json!({"forge": 3}), "metadata.forge"),
        ] {
            let e = TaskSpec::from_a2a_message(&json!({"metadata": bad})).unwrap_err();
            assert!(e.to_string().contains(what), "{e}");
        }
    }

    #[test]
    fn budgets_default_and_are_capped_and_hosts_only_narrow() {
        let limits = TasksConfig::default();
        let r = TaskSpec::default()
            .resolve(&limits, Some(&agent()), SpecFields::CLI)
            .unwrap();
        assert_eq!((r.max_steps, r.max_seconds), (60, 300));
        assert_eq!(r.policy.unwrap().scope(), None);
        let over = TaskSpec {
            max_steps: Some(151),
            ..Default::default()
        }
        .resolve(&limits, Some(&agent()), SpecFields::CLI)
        .unwrap_err();
        assert!(over.to_string().contains("--max-steps value 151"), "{over}");
        assert!(
            over.to_string().contains("tasks.max_steps_cap: 150"),
            "{over}"
        );
        let zero = TaskSpec {
            max_seconds: Some(0),
            ..Default::default()
        }
        .resolve(&limits, Some(&agent()), SpecFields::A2A)
        .unwrap_err();
        assert!(
            zero.to_string().contains("metadata.forge.max_seconds"),
            "{zero}"
        );
        let wide = TaskSpec {
            allowed_hosts: Some(vec!["127.0.0.1:8001".into(), "evil.example".into()]),
            ..Default::default()
        }
        .resolve(&limits, Some(&agent()), SpecFields::A2A)
        .unwrap_err();
        assert!(
            wide.to_string()
                .contains("metadata.forge.allowed_hosts[1] value \"evil.example\""),
            "{wide}"
        );
    }

    #[test]
    fn the_prompt_line_names_the_scope_or_the_agent_hosts() {
        let a = agent();
        assert!(hosts_line(&a).contains("127.0.0.1:8001, 127.0.0.1:8002, example.com"));
        let n = a.narrow(&["127.0.0.1:8002"], "f").unwrap();
        assert!(hosts_line(&n).contains("reach: 127.0.0.1:8002 (the caller narrowed"));
    }
}
