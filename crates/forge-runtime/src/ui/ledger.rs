//! The per-task egress ledger: an egress observer on a task's own proxy listener (its browser)
//! and on each of its tool calls' HTTP client that writes one `task_egress` audit event per
//! decision, with the task id, the tool, the decision and the rule, and passes the decision on
//! to the task's refusal recorder. The audit log's `egress_allowed`/`egress_blocked` events stay
//! what they were (every decision at the enforcement point, task or not); `task_egress` is the
//! attribution the watch page and the HAR export ([`super::har`]) read.

use forge_egress::proxy::{Decision, EgressObserver, Outcome};
use serde_json::json;

use crate::audit::AuditLog;
use crate::task_scope::BlockedRecorder;

/// The audit event of one egress decision made for a task.
pub(crate) const TASK_EGRESS: &str = "task_egress";

/// See the module comment.
pub(crate) struct TaskEgress {
    /// The task's refusal recorder (the result's `blocked` list); it also names the tool.
    pub blocked: BlockedRecorder,
    /// Where `task_egress` goes.
    pub audit: AuditLog,
    /// The task.
    pub task_id: String,
    /// `proxy` (the task's browser) or `client` (a tool's HTTP client).
    pub via: &'static str,
}

impl EgressObserver for TaskEgress {
    fn on_decision(&self, d: &Decision) {
        self.blocked.on_decision(d);
        let decision = match d.outcome {
            Outcome::Allowed => "allowed",
            Outcome::Blocked | Outcome::Malformed => "refused",
            // The policy allowed it; the upstream (DNS, connect, the server) failed.
            Outcome::Failed => "failed",
        };
        let duration_ms = d.duration.as_millis() as u64;
        let started_ms = forge_state::now_ms().saturating_sub(duration_ms as i64);
        self.audit.emit(
            Some(&self.task_id),
            TASK_EGRESS,
            json!({
                "tool": self.blocked.tool.current(),
                "via": self.via,
                "method": d.method,
                "host": d.host,
                "port": d.port,
                "ip": d.chosen.map(|a| a.ip().to_string()),
                "decision": decision,
                "rule": d.reason.to_string(),
                "status": d.status,
                "bytes_up": d.bytes_up,
                "bytes_down": d.bytes_down,
                "started_ms": started_ms,
                "duration_ms": duration_ms,
            }),
        );
    }
}
