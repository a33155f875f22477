//! forge-analyzer: risk scoring, policy checks and audit reports for skills.
//!
//! What it offers and where it lives:
//! - [`audit`] (`&[Skill]`, `&Policy` -> [`AuditReport`], text and JSON rendering): `report.rs`
//! - [`Policy`] (defaults, YAML override file) : `policy.rs`
//! - risk factors, points and levels ([`risk_factors`], [`RiskLevel`]): `scoring.rs`
//! - [`format_rfc3339`]: RFC 3339 timestamps (forge-time's `rfc3339`, re-exported)

mod policy;
mod report;
mod scoring;

pub use forge_time::rfc3339 as format_rfc3339;
pub use policy::{Policy, ScriptPolicy};
pub use report::{
    assess, audit, check_policy, Assessment, AuditReport, PolicySummary, Severity, Violation,
};
pub use scoring::{
    is_sensitive_env, recommendations, risk_factors, total, RiskFactor, RiskLevel, RiskScore,
    ENV_POINTS_CAP, HIGH_RISK_BINARIES, SENSITIVE_ENV_PATTERNS, TRUSTED_DOMAINS,
};
