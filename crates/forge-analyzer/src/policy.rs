//! The audit policy: defaults, and a YAML file that overrides only the fields it sets.

use std::path::Path;

use forge_skills::{Error, SourceDiagnostic};
use serde::{Deserialize, Serialize};

/// What to do about skills that ship executable scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScriptPolicy {
    Allow,
    Warn,
    Deny,
}

/// Security policy for `forge skills audit`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Maximum egress entries per skill (0 = unlimited).
    pub max_egress_domains: usize,
    /// Binaries no skill may require.
    pub binary_denylist: Vec<String>,
    /// Substrings (case-insensitive) of env var names no skill may use.
    pub denied_env_patterns: Vec<String>,
    pub script_policy: ScriptPolicy,
    /// Highest allowed per-skill risk score (0 = no limit).
    pub max_risk_score: u32,
    /// Most tags a skill should have (0 = no limit); more is a warning.
    pub max_tags: usize,
    /// Extra hosts scored as trusted (+2) in addition to the built-in set.
    pub trusted_domains: Vec<String>,
    /// High-risk binaries the operator has reviewed: scored +3 instead of +15.
    pub acknowledged_binaries: Vec<String>,
    /// Sensitive env vars the operator has reviewed: scored +5 instead of +10.
    pub acknowledged_env: Vec<String>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_egress_domains: 0,
            binary_denylist: ["nc", "ncat", "netcat", "nmap", "ssh", "scp"]
                .map(String::from)
                .to_vec(),
            denied_env_patterns: ["AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"]
                .map(String::from)
                .to_vec(),
            script_policy: ScriptPolicy::Warn,
            max_risk_score: 90,
            max_tags: 20,
            trusted_domains: Vec::new(),
            acknowledged_binaries: Vec::new(),
            acknowledged_env: Vec::new(),
        }
    }
}

/// The policy file: every field optional; omitted fields keep their defaults.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    max_egress_domains: Option<usize>,
    binary_denylist: Option<Vec<String>>,
    denied_env_patterns: Option<Vec<String>>,
    script_policy: Option<ScriptPolicy>,
    max_risk_score: Option<u32>,
    max_tags: Option<usize>,
    trusted_domains: Option<Vec<String>>,
    acknowledged_binaries: Option<Vec<String>>,
    acknowledged_env: Option<Vec<String>>,
}

impl Policy {
    /// Read a policy YAML file; fields it sets replace the defaults, the rest keep them.
    pub fn load(path: &Path) -> Result<Policy, Error> {
        let text = forge_skills::read_limited(path)?;
        Self::parse(&text, path)
    }

    /// Parse policy YAML `text` (read from `path`, for diagnostics).
    pub fn parse(text: &str, path: &Path) -> Result<Policy, Error> {
        let file: PolicyFile = if text.trim().is_empty() {
            PolicyFile::default()
        } else {
            serde_norway::from_str(text).map_err(|e| Error::Invalid {
                path: path.to_path_buf(),
                problems: vec![SourceDiagnostic::from_yaml_error(
                    path,
                    text,
                    &e,
                    "audit policy",
                )],
            })?
        };
        let mut p = Policy::default();
        if let Some(v) = file.max_egress_domains {
            p.max_egress_domains = v;
        }
        if let Some(v) = file.binary_denylist {
            p.binary_denylist = v;
        }
        if let Some(v) = file.denied_env_patterns {
            p.denied_env_patterns = v;
        }
        if let Some(v) = file.script_policy {
            p.script_policy = v;
        }
        if let Some(v) = file.max_risk_score {
            p.max_risk_score = v;
        }
        if let Some(v) = file.max_tags {
            p.max_tags = v;
        }
        if let Some(v) = file.trusted_domains {
            p.trusted_domains = v;
        }
        if let Some(v) = file.acknowledged_binaries {
            p.acknowledged_binaries = v;
        }
        if let Some(v) = file.acknowledged_env {
            p.acknowledged_env = v;
        }
        Ok(p)
    }
}
