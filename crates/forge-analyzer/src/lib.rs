//! forge-analyzer: risk scoring, policy checks and audit reports for skills.
//!
//! What it offers and where it lives:
//! - [`audit`] (`&[Skill]`, `&Policy` -> [`AuditReport`], text and JSON rendering): `report.rs`
//! - [`Policy`] (defaults, YAML override file) : `policy.rs`
//! - risk factors, points and levels ([`risk_factors`], [`RiskLevel`]): `scoring.rs`
//! - RFC 3339 timestamps: `time.rs`

mod policy;
mod report;
mod scoring;
mod time;

pub use policy::{Policy, ScriptPolicy};
pub use report::{
    assess, audit, check_policy, Assessment, AuditReport, PolicySummary, Severity, Violation,
};
pub use scoring::{
    is_sensitive_env, recommendations, risk_factors, total, RiskFactor, RiskLevel, RiskScore,
    ENV_POINTS_CAP, HIGH_RISK_BINARIES, SENSITIVE_ENV_PATTERNS, TRUSTED_DOMAINS,
};
pub use time::format_rfc3339;
