//! forge.yaml `state:` (where tasks, conversations and artifacts are kept) and `deploy:` (how many
//! replicas serve the agent).
//!
//! ```yaml
//! state:
//!   url: postgres://forge@db:5432/forge   # default: SQLite at .forge/state.db; FORGE_STATE_URL wins
//!   keep_tasks: 1000                      # newest tasks kept (running ones always)
//!   keep_days: 7                          # finished tasks older than this are removed
//!   max_artifact_bytes: 10485760          # larger artifacts are refused with a clear error
//! deploy:
//!   replicas: {min: 2, max: 6}            # default 1/1: no autoscaler
//! ```
//!
//! Values are checked after parsing, each problem a diagnostic pointing at its value.

use serde::{Deserialize, Serialize};

use crate::yaml::{Doc, Seg};
use crate::SourceDiagnostic;

/// Most replicas `deploy.replicas.max` accepts.
pub const MAX_REPLICAS: u32 = 100;

/// `state`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateConfig {
    /// `postgres://...` for a shared PostgreSQL, `sqlite:PATH` for another SQLite file; unset:
    /// `.forge/state.db`. `FORGE_STATE_URL` overrides it.
    #[serde(default)]
    pub url: Option<String>,
    /// Tasks kept (the newest; running tasks are never removed).
    #[serde(default = "default_keep_tasks")]
    pub keep_tasks: u64,
    /// Days a finished task is kept.
    #[serde(default = "default_keep_days")]
    pub keep_days: u64,
    /// Largest artifact kept, in bytes.
    #[serde(default = "default_max_artifact_bytes")]
    pub max_artifact_bytes: u64,
}

fn default_keep_tasks() -> u64 {
    1_000
}
fn default_keep_days() -> u64 {
    7
}
fn default_max_artifact_bytes() -> u64 {
    10 * 1024 * 1024
}

impl Default for StateConfig {
    fn default() -> Self {
        Self {
            url: None,
            keep_tasks: default_keep_tasks(),
            keep_days: default_keep_days(),
            max_artifact_bytes: default_max_artifact_bytes(),
        }
    }
}

impl StateConfig {
    /// Whether the store is PostgreSQL (by `url`; `FORGE_STATE_URL` is the caller's to check).
    pub fn is_postgres(&self) -> bool {
        self.url
            .as_deref()
            .is_some_and(|u| u.starts_with("postgres://") || u.starts_with("postgresql://"))
    }
}

/// `deploy`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployConfig {
    /// How many replicas Kubernetes runs.
    #[serde(default)]
    pub replicas: Replicas,
}

/// `deploy.replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Replicas {
    /// Fewest replicas (the autoscaler's floor).
    #[serde(default = "one")]
    pub min: u32,
    /// Most replicas (above 1: a HorizontalPodAutoscaler and a PodDisruptionBudget are written).
    #[serde(default = "one")]
    pub max: u32,
}

fn one() -> u32 {
    1
}

impl Default for Replicas {
    fn default() -> Self {
        Self { min: 1, max: 1 }
    }
}

/// The problems of `state` and `deploy` (errors, then a warning for a password in `state.url`).
pub(crate) fn check(
    doc: &Doc<'_>,
    state: &StateConfig,
    deploy: &DeployConfig,
) -> Vec<SourceDiagnostic> {
    let mut out = Vec::new();
    let at_state = |k: &'static str| [Seg::Key("state"), Seg::Key(k)];
    if let Some(url) = state.url.as_deref() {
        let known = url.starts_with("postgres://")
            || url.starts_with("postgresql://")
            || url.starts_with("sqlite:");
        if !known {
            out.push(doc.diag(
                "forge::config::state-url",
                "state.url must be a postgres:// URL or sqlite:PATH",
                &at_state("url"),
                "unsupported store",
                Some("use postgres://USER@HOST:5432/DB (password in FORGE_STATE_URL), sqlite:PATH, or remove state.url for .forge/state.db".into()),
            ));
        } else if url_has_password(url) {
            out.push(
                doc.diag(
                    "forge::config::state-url-password",
                    "state.url holds a password, which then lives in forge.yaml and the image",
                    &at_state("url"),
                    "password here",
                    Some("remove the password from state.url and set FORGE_STATE_URL (the generated Secret has the key) with the full URL instead".into()),
                )
                .warning(),
            );
        }
    }
    if state.keep_tasks == 0 {
        out.push(doc.diag(
            "forge::config::state-keep-tasks",
            "state.keep_tasks must be at least 1",
            &at_state("keep_tasks"),
            "zero keeps nothing",
            Some("remove it for the default (1000), or give the number of tasks to keep".into()),
        ));
    }
    if state.keep_days == 0 {
        out.push(doc.diag(
            "forge::config::state-keep-days",
            "state.keep_days must be at least 1",
            &at_state("keep_days"),
            "zero keeps nothing",
            Some("remove it for the default (7), or give the number of days to keep".into()),
        ));
    }
    if state.max_artifact_bytes == 0 {
        out.push(doc.diag(
            "forge::config::state-max-artifact-bytes",
            "state.max_artifact_bytes must be at least 1",
            &at_state("max_artifact_bytes"),
            "zero refuses every artifact",
            Some("remove it for the default (10485760 = 10 MiB)".into()),
        ));
    }
    let at_rep = |k: &'static str| [Seg::Key("deploy"), Seg::Key("replicas"), Seg::Key(k)];
    let r = deploy.replicas;
    if r.min == 0 {
        out.push(doc.diag(
            "forge::config::deploy-replicas",
            "deploy.replicas.min must be at least 1",
            &at_rep("min"),
            "no replica would serve the agent",
            Some("use 1 or more".into()),
        ));
    }
    if r.max > MAX_REPLICAS {
        out.push(doc.diag(
            "forge::config::deploy-replicas",
            format!(
                "deploy.replicas.max is {}, above forge's limit of {MAX_REPLICAS}",
                r.max
            ),
            &at_rep("max"),
            "too many",
            Some(format!("use at most {MAX_REPLICAS}")),
        ));
    }
    if r.max < r.min {
        out.push(doc.diag(
            "forge::config::deploy-replicas",
            format!(
                "deploy.replicas.max ({}) is below deploy.replicas.min ({})",
                r.max, r.min
            ),
            &at_rep("max"),
            "below min",
            Some(format!("set max to {} or more", r.min)),
        ));
    }
    out
}

/// Whether `scheme://user:password@host...` carries a password.
fn url_has_password(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'))
}

#[cfg(test)]
mod tests {
    use super::url_has_password;

    #[test]
    fn passwords_in_urls_are_seen() {
        assert!(url_has_password("postgres://forge:pw@db:5432/forge"));
        assert!(!url_has_password("postgres://forge@db:5432/forge"));
        assert!(!url_has_password("postgres://db:5432/forge"));
        assert!(!url_has_password("postgres://db/forge?user=a:b@c"));
        assert!(!url_has_password("sqlite:state.db"));
    }
}
