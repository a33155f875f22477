//! The audit: per-skill assessments with policy violations, the summary, and text rendering.

use forge_skills::{Capability, Skill};
use serde::Serialize;

use crate::policy::{Policy, ScriptPolicy};
use crate::scoring::{recommendations, risk_factors, skill_env, total, RiskFactor, RiskScore};

/// Severity of a policy violation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
    Critical,
}

impl Severity {
    /// Errors and critical violations fail the audit; warnings never do.
    pub fn fails(&self) -> bool {
        matches!(self, Severity::Error | Severity::Critical)
    }
}

/// A broken policy rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: String,
    pub severity: Severity,
    pub message: String,
}

/// The assessment of one skill.
#[derive(Debug, Clone, Serialize)]
pub struct Assessment {
    pub skill_name: String,
    pub score: RiskScore,
    pub factors: Vec<RiskFactor>,
    pub violations: Vec<Violation>,
    pub recommendations: Vec<String>,
    /// Capabilities the skill requires (named in the text report).
    #[serde(skip)]
    pub capabilities: Vec<Capability>,
}

/// Violation counts.
#[derive(Debug, Clone, Serialize)]
pub struct PolicySummary {
    pub total_violations: usize,
    /// Errors plus critical violations.
    pub errors: usize,
    pub warnings: usize,
    pub passed: bool,
}

/// The audit report (`forge skills audit --format json` prints it as-is).
#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    /// RFC 3339, UTC.
    pub timestamp: String,
    pub skill_count: usize,
    /// The highest per-skill score (an agent is as risky as its riskiest skill).
    pub aggregate_score: RiskScore,
    pub assessments: Vec<Assessment>,
    pub policy_summary: PolicySummary,
}

/// Check `skill` (scored `score`) against `policy`.
pub fn check_policy(skill: &Skill, score: u32, policy: &Policy) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |rule: &str, severity: Severity, message: String| {
        out.push(Violation {
            rule: rule.to_string(),
            severity,
            message,
        })
    };
    let forge = skill.forge.as_ref();
    let domains = forge.map(|f| f.egress_domains.len()).unwrap_or(0);
    if policy.max_egress_domains > 0 && domains > policy.max_egress_domains {
        v(
            "max_egress_domains",
            Severity::Error,
            format!(
                "skill has {domains} egress domains (max: {})",
                policy.max_egress_domains
            ),
        );
    }
    for b in forge.map(|f| f.requires.bins.as_slice()).unwrap_or(&[]) {
        if policy.binary_denylist.iter().any(|d| d == &b.name) {
            v(
                "binary_denylist",
                Severity::Error,
                format!("binary \"{}\" is denied by policy", b.name),
            );
        }
    }
    for e in skill_env(skill) {
        for p in &policy.denied_env_patterns {
            if e.to_ascii_uppercase().contains(&p.to_ascii_uppercase()) {
                v(
                    "denied_env_pattern",
                    Severity::Error,
                    format!("env var \"{e}\" matches denied pattern \"{p}\""),
                );
            }
        }
    }
    if !skill.scripts.is_empty() {
        match policy.script_policy {
            ScriptPolicy::Deny => v(
                "script_policy",
                Severity::Error,
                "skill has an executable script (denied by policy)".to_string(),
            ),
            ScriptPolicy::Warn => v(
                "script_policy",
                Severity::Warning,
                "skill has an executable script".to_string(),
            ),
            ScriptPolicy::Allow => {}
        }
    }
    if policy.max_tags > 0 && skill.tags.len() > policy.max_tags {
        v(
            "excessive-tags",
            Severity::Warning,
            format!(
                "skill has {} tags (recommended max: {})",
                skill.tags.len(),
                policy.max_tags
            ),
        );
    }
    if policy.max_risk_score > 0 && score > policy.max_risk_score {
        v(
            "max_risk_score",
            Severity::Error,
            format!(
                "risk score {score} exceeds maximum {}",
                policy.max_risk_score
            ),
        );
    }
    if let Some(f) = forge.filter(|_| skill.requires_browser()) {
        if f.trust_hints.network == Some(false) {
            v(
                "capability_trust_conflict",
                Severity::Critical,
                "skill declares the browser capability but trust_hints.network is false; browsing requires network access".to_string(),
            );
        }
        if f.guardrails.deny_output.is_empty() {
            v(
                "capability_guardrail_gap",
                Severity::Warning,
                "browser skill declares no guardrails.deny_output; extracted page content is returned unredacted".to_string(),
            );
        }
    }
    out
}

/// Assess one skill.
pub fn assess(skill: &Skill, policy: &Policy) -> Assessment {
    let factors = risk_factors(skill, policy);
    let score = total(&factors);
    Assessment {
        skill_name: skill.name.clone(),
        score: RiskScore::new(score),
        violations: check_policy(skill, score, policy),
        recommendations: recommendations(skill, &factors),
        factors,
        capabilities: skill.capabilities().to_vec(),
    }
}

/// Audit `skills` against `policy`.
pub fn audit(skills: &[Skill], policy: &Policy) -> AuditReport {
    let assessments: Vec<Assessment> = skills.iter().map(|s| assess(s, policy)).collect();
    let (mut errors, mut warnings) = (0, 0);
    for v in assessments.iter().flat_map(|a| &a.violations) {
        if v.severity.fails() {
            errors += 1;
        } else {
            warnings += 1;
        }
    }
    let max = assessments.iter().map(|a| a.score.value).max().unwrap_or(0);
    AuditReport {
        timestamp: forge_time::now_rfc3339(),
        skill_count: skills.len(),
        aggregate_score: RiskScore::new(max),
        assessments,
        policy_summary: PolicySummary {
            total_violations: errors + warnings,
            errors,
            warnings,
            passed: errors == 0,
        },
    }
}

impl AuditReport {
    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // Serializing plain structs of strings and numbers cannot fail.
        serde_json::to_string_pretty(self).expect("audit report serializes")
    }

    /// A readable report with the same content as the JSON.
    pub fn to_text(&self) -> String {
        use std::fmt::Write;
        let mut b = String::new();
        let _ = writeln!(b, "Security Audit Report");
        let _ = writeln!(b, "=====================");
        let _ = writeln!(b, "Generated: {}", self.timestamp);
        let _ = writeln!(b, "Skills analyzed: {}", self.skill_count);
        for a in &self.assessments {
            let _ = writeln!(b);
            let _ = writeln!(
                b,
                "{:<28} Risk: {} ({}/100)",
                a.skill_name,
                a.score.level.as_str(),
                a.score.value
            );
            for c in &a.capabilities {
                match c {
                    Capability::Browser => {
                        let _ = writeln!(
                            b,
                            "  Capability: browser (headless Chromium with web access through the egress proxy)"
                        );
                    }
                }
            }
            if !a.factors.is_empty() {
                let _ = writeln!(b, "  Factors:");
                for f in &a.factors {
                    let _ = writeln!(
                        b,
                        "    {:<10} +{:<3} {}",
                        f.category, f.points, f.description
                    );
                }
            }
            if a.violations.is_empty() {
                let _ = writeln!(b, "  Violations: none");
            } else {
                let _ = writeln!(b, "  Violations:");
                for v in &a.violations {
                    let sev = match v.severity {
                        Severity::Warning => "WARN ",
                        Severity::Error => "ERROR",
                        Severity::Critical => "CRIT ",
                    };
                    let _ = writeln!(b, "    {sev} {}: {}", v.rule, v.message);
                }
            }
            if !a.recommendations.is_empty() {
                let _ = writeln!(b, "  Recommendations:");
                for r in &a.recommendations {
                    let _ = writeln!(b, "    - {r}");
                }
            }
        }
        let _ = writeln!(b);
        let _ = writeln!(
            b,
            "Aggregate Risk: {} ({}/100)",
            self.aggregate_score.level.as_str(),
            self.aggregate_score.value
        );
        let s = &self.policy_summary;
        let _ = writeln!(
            b,
            "Policy Summary: {} ({} errors, {} warnings)",
            if s.passed { "PASSED" } else { "FAILED" },
            s.errors,
            s.warnings
        );
        b
    }
}
