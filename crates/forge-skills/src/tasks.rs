//! forge.yaml `tasks:`: the per-task budgets (defaults, and the caps a caller's own budget may not
//! exceed).
//!
//! ```yaml
//! tasks:
//!   max_steps: 60          # tool calls a task may make, unless the caller asks for fewer/more
//!   max_seconds: 300       # wall time of a task
//!   max_steps_cap: 150     # most a caller (A2A metadata.forge, --max-steps) may ask for
//!   max_seconds_cap: 1800  # most a caller may ask for; also the drain grace and the pod's
//!                          # termination grace (forge build)
//! ```
//!
//! Values are checked after parsing, each problem a diagnostic pointing at its value.

use serde::{Deserialize, Serialize};

use crate::yaml::{Doc, Seg};
use crate::SourceDiagnostic;

/// `tasks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TasksConfig {
    /// Tool calls a task may make when the caller sets no `max_steps`.
    #[serde(default = "default_max_steps")]
    pub max_steps: u64,
    /// Seconds a task may run when the caller sets no `max_seconds`.
    #[serde(default = "default_max_seconds")]
    pub max_seconds: u64,
    /// The most `max_steps` a caller may ask for.
    #[serde(default = "default_max_steps_cap")]
    pub max_steps_cap: u64,
    /// The most `max_seconds` a caller may ask for.
    #[serde(default = "default_max_seconds_cap")]
    pub max_seconds_cap: u64,
}

/// Default of `tasks.max_steps`.
pub const DEFAULT_MAX_STEPS: u64 = 60;
/// Default of `tasks.max_seconds`.
pub const DEFAULT_MAX_SECONDS: u64 = 300;
/// Default of `tasks.max_steps_cap`.
pub const DEFAULT_MAX_STEPS_CAP: u64 = 150;
/// Default of `tasks.max_seconds_cap`.
pub const DEFAULT_MAX_SECONDS_CAP: u64 = 1800;

fn default_max_steps() -> u64 {
    DEFAULT_MAX_STEPS
}
fn default_max_seconds() -> u64 {
    DEFAULT_MAX_SECONDS
}
fn default_max_steps_cap() -> u64 {
    DEFAULT_MAX_STEPS_CAP
}
fn default_max_seconds_cap() -> u64 {
    DEFAULT_MAX_SECONDS_CAP
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            max_seconds: DEFAULT_MAX_SECONDS,
            max_steps_cap: DEFAULT_MAX_STEPS_CAP,
            max_seconds_cap: DEFAULT_MAX_SECONDS_CAP,
        }
    }
}

/// The problems of `tasks` (each value at least 1, each default within its cap).
pub(crate) fn check(doc: &Doc<'_>, t: &TasksConfig) -> Vec<SourceDiagnostic> {
    let mut out = Vec::new();
    let at = |k: &'static str| [Seg::Key("tasks"), Seg::Key(k)];
    for (key, value, default) in [
        ("max_steps", t.max_steps, DEFAULT_MAX_STEPS),
        ("max_seconds", t.max_seconds, DEFAULT_MAX_SECONDS),
        ("max_steps_cap", t.max_steps_cap, DEFAULT_MAX_STEPS_CAP),
        (
            "max_seconds_cap",
            t.max_seconds_cap,
            DEFAULT_MAX_SECONDS_CAP,
        ),
    ] {
        if value == 0 {
            out.push(doc.diag(
                "forge::config::tasks",
                format!("tasks.{key} must be at least 1"),
                &at(key),
                "zero would stop every task at once",
                Some(format!(
                    "remove it for the default ({default}), or give a positive number"
                )),
            ));
        }
    }
    for (key, value, cap_key, cap) in [
        ("max_steps", t.max_steps, "max_steps_cap", t.max_steps_cap),
        (
            "max_seconds",
            t.max_seconds,
            "max_seconds_cap",
            t.max_seconds_cap,
        ),
    ] {
        if cap > 0 && value > cap {
            out.push(doc.diag(
                "forge::config::tasks",
                format!("tasks.{key} ({value}) is above tasks.{cap_key} ({cap})"),
                &at(key),
                "above the cap",
                Some(format!(
                    "lower tasks.{key} to {cap} or less, or raise tasks.{cap_key}"
                )),
            ));
        }
    }
    out
}
