//! Risk scoring of one skill: the factors and their points, the level, recommendations.

use forge_skills::{Capability, Skill};
use serde::Serialize;

use crate::policy::Policy;

/// Hosts scored as trusted (+2) rather than unknown (+10).
pub const TRUSTED_DOMAINS: &[&str] = &[
    "api.github.com",
    "github.com",
    "api.openai.com",
    "api.anthropic.com",
    "api.tavily.com",
    "api.slack.com",
    "hooks.slack.com",
    "slack.com",
    "api.telegram.org",
    "googleapis.com",
    "api.together.ai",
    "api.cohere.com",
];

/// Binaries that allow arbitrary code execution or raw network access.
pub const HIGH_RISK_BINARIES: &[&str] = &[
    "bash", "sh", "python", "python3", "node", "ssh", "nc", "ncat", "netcat", "perl", "ruby",
];

/// Substrings marking an env var as sensitive.
pub const SENSITIVE_ENV_PATTERNS: &[&str] = &[
    "SECRET",
    "PASSWORD",
    "PRIVATE_KEY",
    "SESSION_TOKEN",
    "CREDENTIALS",
];

/// Cap on the points all env vars of one skill can add.
pub const ENV_POINTS_CAP: u32 = 25;

/// A risk level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    None,
    Low,
    Medium,
    High,
    Critical,
}

impl RiskLevel {
    /// 0 none, 1-25 low, 26-50 medium, 51-75 high, 76-100 critical.
    pub fn classify(score: u32) -> RiskLevel {
        match score {
            0 => RiskLevel::None,
            1..=25 => RiskLevel::Low,
            26..=50 => RiskLevel::Medium,
            51..=75 => RiskLevel::High,
            _ => RiskLevel::Critical,
        }
    }
    pub fn as_str(&self) -> &'static str {
        match self {
            RiskLevel::None => "none",
            RiskLevel::Low => "low",
            RiskLevel::Medium => "medium",
            RiskLevel::High => "high",
            RiskLevel::Critical => "critical",
        }
    }
}

/// A 0-100 score and its level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RiskScore {
    pub value: u32,
    pub level: RiskLevel,
}

impl RiskScore {
    pub fn new(value: u32) -> RiskScore {
        let value = value.min(100);
        RiskScore {
            value,
            level: RiskLevel::classify(value),
        }
    }
}

/// One contribution to a score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RiskFactor {
    /// `egress`, `binary`, `capability`, `browser`, `env` or `script`.
    pub category: String,
    pub description: String,
    pub points: u32,
}

fn factor(category: &str, description: String, points: u32) -> RiskFactor {
    RiskFactor {
        category: category.to_string(),
        description,
        points,
    }
}

fn is_trusted(domain: &str, policy: &Policy) -> bool {
    let d = domain.trim_end_matches('.').to_ascii_lowercase();
    TRUSTED_DOMAINS.contains(&d.as_str())
        || policy
            .trusted_domains
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&d))
}

/// Every env var a skill names (required, one_of, optional), de-duplicated.
pub(crate) fn skill_env(skill: &Skill) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(f) = &skill.forge {
        let e = &f.requires.env;
        for v in e.required.iter().chain(&e.one_of).chain(&e.optional) {
            if !out.contains(v) {
                out.push(v.clone());
            }
        }
    }
    out
}

/// Whether the env var name looks like a secret.
pub fn is_sensitive_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SENSITIVE_ENV_PATTERNS.iter().any(|p| upper.contains(p))
}

/// The risk factors of `skill` under `policy` (in a stable order: egress, binaries,
/// capabilities, env, script).
pub fn risk_factors(skill: &Skill, policy: &Policy) -> Vec<RiskFactor> {
    let mut out = Vec::new();
    let Some(f) = &skill.forge else {
        if !skill.scripts.is_empty() {
            out.push(script_factor(skill));
        }
        return out;
    };
    for d in &f.egress_domains {
        if d.starts_with('$') {
            out.push(factor(
                "egress",
                format!("runtime-defined domains: {d} (hosts chosen by the operator at run time)"),
                10,
            ));
        } else if is_trusted(d, policy) {
            out.push(factor("egress", format!("trusted domain: {d}"), 2));
        } else {
            out.push(factor("egress", format!("unknown domain: {d}"), 10));
        }
    }
    if f.egress_domains.len() > 5 {
        out.push(factor(
            "egress",
            format!(">5 total domains ({})", f.egress_domains.len()),
            15,
        ));
    }
    for b in &f.requires.bins {
        let name = b.name.as_str();
        if HIGH_RISK_BINARIES.contains(&name) {
            if policy.acknowledged_binaries.iter().any(|a| a == name) {
                out.push(factor(
                    "binary",
                    format!("high-risk binary (acknowledged by policy): {name}"),
                    3,
                ));
            } else {
                out.push(factor("binary", format!("high-risk binary: {name}"), 15));
            }
        } else {
            out.push(factor("binary", format!("standard binary: {name}"), 3));
        }
    }
    for c in &f.requires.capabilities {
        match c {
            Capability::Browser => out.push(factor(
                "capability",
                "capability browser: high-risk: headless browser web access".to_string(),
                15,
            )),
        }
    }
    if f.guardrails.browser.allow_sensitive_fill {
        out.push(factor(
            "browser",
            "allow_sensitive_fill: true (the browser may type into password and payment fields)"
                .to_string(),
            10,
        ));
    }
    let mut env_points = 0u32;
    for v in skill_env(skill) {
        let (desc, pts) = if is_sensitive_env(&v) {
            if policy.acknowledged_env.iter().any(|a| a == &v) {
                (
                    format!("sensitive variable (acknowledged by policy): {v}"),
                    5,
                )
            } else {
                (format!("sensitive variable: {v}"), 10)
            }
        } else {
            (format!("env variable: {v}"), 5)
        };
        // The env total is capped; a factor over the cap is listed with the points it adds.
        let capped = pts.min(ENV_POINTS_CAP - env_points);
        env_points += capped;
        let desc = if capped < pts {
            format!("{desc} (env points capped at {ENV_POINTS_CAP})")
        } else {
            desc
        };
        out.push(factor("env", desc, capped));
    }
    if !skill.scripts.is_empty() {
        out.push(script_factor(skill));
    }
    out
}

fn script_factor(skill: &Skill) -> RiskFactor {
    let names: Vec<String> = skill
        .scripts
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
        .collect();
    factor(
        "script",
        format!("ships executable script: {}", names.join(", ")),
        20,
    )
}

/// Sum of points, capped at 100.
pub fn total(factors: &[RiskFactor]) -> u32 {
    factors.iter().map(|f| f.points).sum::<u32>().min(100)
}

/// Recommendations following from the factors.
pub fn recommendations(skill: &Skill, factors: &[RiskFactor]) -> Vec<String> {
    let mut recs = Vec::new();
    let has = |cat: &str, min: u32| factors.iter().any(|f| f.category == cat && f.points >= min);
    let high_bin = factors
        .iter()
        .any(|f| f.category == "binary" && f.description.starts_with("high-risk binary"));
    let sensitive = factors
        .iter()
        .any(|f| f.category == "env" && f.description.starts_with("sensitive variable"));
    if high_bin {
        recs.push(
            "Review high-risk binary usage; consider restricting to specific commands".to_string(),
        );
    }
    if sensitive {
        recs.push(
            "Ensure sensitive credentials are rotated regularly and scoped minimally".to_string(),
        );
    }
    if has("egress", 10) {
        recs.push(
            "Verify unknown egress domains are expected and add to trusted list if appropriate"
                .to_string(),
        );
    }
    if skill.requires_browser() {
        recs.push(
            "Keep the browser's allowlist to the hosts the task needs; every browser request goes through the egress proxy".to_string(),
        );
    }
    if has("browser", 10) {
        recs.push(
            "Remove allow_sensitive_fill unless the skill must log in; prefer a dedicated low-privilege account".to_string(),
        );
    }
    if !skill.scripts.is_empty() {
        recs.push(
            "Audit executable script content for security issues before deployment".to_string(),
        );
    }
    recs
}
