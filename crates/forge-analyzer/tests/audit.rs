//! Exact scores, levels and policy violations for the fixture skills.

use std::path::{Path, PathBuf};

use forge_analyzer::{audit, Policy, RiskLevel, ScriptPolicy, Severity};
use forge_skills::{discover, parse_skill, Skill, SkillSource};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn skills(dir: &str) -> Vec<Skill> {
    let d = discover(&repo().join(dir));
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    d.skills
}

fn one(dir: &str, name: &str) -> Skill {
    skills(dir).into_iter().find(|s| s.name == name).unwrap()
}

fn points(report: &forge_analyzer::AuditReport) -> Vec<(String, u32)> {
    report.assessments[0]
        .factors
        .iter()
        .map(|f| (f.description.clone(), f.points))
        .collect()
}

#[test]
fn browser_skill_scores_the_browser_factor_and_names_it() {
    let s = one("fixtures/skills/good", "research-browser");
    let r = audit(&[s], &Policy::default());
    assert_eq!(
        points(&r),
        [
            ("unknown domain: en.wikipedia.org".to_string(), 10),
            ("unknown domain: *.readthedocs.io".to_string(), 10),
            (
                "runtime-defined domains: ${RESEARCH_HOSTS} (hosts chosen by the operator at run time)".to_string(),
                10
            ),
            ("capability browser: high-risk: headless browser web access".to_string(), 15),
            ("env variable: RESEARCH_HOSTS".to_string(), 5),
        ]
    );
    let a = &r.assessments[0];
    assert_eq!((a.score.value, a.score.level), (50, RiskLevel::Medium));
    assert!(a.violations.is_empty(), "{:?}", a.violations);
    assert!(r.policy_summary.passed);
    let text = r.to_text();
    assert!(text.contains("Capability: browser"), "{text}");
    assert!(
        text.contains("+15  capability browser: high-risk: headless browser web access"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["assessments"][0]["factors"][3]["points"], 15);
    assert_eq!(
        json["assessments"][0]["factors"][3]["category"],
        "capability"
    );
    assert_eq!(json["aggregate_score"]["level"], "medium");
}

#[test]
fn browser_with_network_false_is_a_critical_conflict() {
    let s = one("fixtures/skills/audit", "browser-offline");
    let r = audit(&[s], &Policy::default());
    let a = &r.assessments[0];
    assert_eq!(a.score.value, 25);
    assert_eq!(a.violations.len(), 1);
    assert_eq!(a.violations[0].rule, "capability_trust_conflict");
    assert_eq!(a.violations[0].severity, Severity::Critical);
    assert!(!r.policy_summary.passed);
    assert_eq!((r.policy_summary.errors, r.policy_summary.warnings), (1, 0));
    assert!(r.to_text().contains("CRIT  capability_trust_conflict"));
}

#[test]
fn browser_without_deny_output_gets_a_warning_that_does_not_fail() {
    let s = one("fixtures/skills/audit", "browser-no-guardrail");
    let r = audit(&[s], &Policy::default());
    let a = &r.assessments[0];
    assert_eq!(a.violations.len(), 1);
    assert_eq!(a.violations[0].rule, "capability_guardrail_gap");
    assert_eq!(a.violations[0].severity, Severity::Warning);
    assert!(r.policy_summary.passed);
    assert_eq!(r.policy_summary.warnings, 1);
}

#[test]
fn sensitive_fill_and_sensitive_env_and_trusted_domain() {
    let s = one("fixtures/skills/audit", "browser-sensitive-fill");
    let r = audit(&[s], &Policy::default());
    assert_eq!(
        points(&r).iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        [10, 2, 15, 10, 10]
    );
    assert_eq!(r.assessments[0].score.value, 47);
}

#[test]
fn script_high_risk_bins_and_max_risk_score() {
    let s = one("fixtures/skills/good", "code-runner");
    let r = audit(std::slice::from_ref(&s), &Policy::default());
    let a = &r.assessments[0];
    // pypi.org 10 + files.pythonhosted.org 10 + python3 15 + bash 15 + git 3
    // + WORKSPACE_DIR 5 + PYTEST_ADDOPTS 5 + CI_SESSION_TOKEN 10 + script 20 = 93.
    assert_eq!((a.score.value, a.score.level), (93, RiskLevel::Critical));
    let rules: Vec<_> = a
        .violations
        .iter()
        .map(|v| (v.rule.as_str(), v.severity))
        .collect();
    assert_eq!(
        rules,
        [
            ("script_policy", Severity::Warning),
            ("max_risk_score", Severity::Error)
        ]
    );
    assert!(!r.policy_summary.passed);

    // Acknowledged binaries score +3 and sensitive env +5; script policy deny is an error.
    let policy = Policy {
        acknowledged_binaries: vec!["python3".into(), "bash".into()],
        acknowledged_env: vec!["CI_SESSION_TOKEN".into()],
        script_policy: ScriptPolicy::Deny,
        ..Policy::default()
    };
    let r = audit(&[s], &policy);
    let a = &r.assessments[0];
    assert_eq!(a.score.value, 10 + 10 + 3 + 3 + 3 + 5 + 5 + 5 + 20);
    assert_eq!(a.violations.len(), 1);
    assert_eq!(
        (a.violations[0].rule.as_str(), a.violations[0].severity),
        ("script_policy", Severity::Error)
    );
}

fn inline(forge: &str, extra: &str) -> Skill {
    let text = format!("---\nname: t\n{extra}metadata:\n  forge:\n{forge}---\n");
    parse_skill(&text, Path::new("t/SKILL.md"), "t", SkillSource::Local).unwrap()
}

#[test]
fn env_points_cap_at_25_and_total_caps_at_100() {
    let s = inline(
        "    requires:\n      env:\n        required: [A, B, C, D, E, F]\n",
        "",
    );
    let r = audit(&[s], &Policy::default());
    assert_eq!(r.assessments[0].score.value, 25);
    assert_eq!(r.assessments[0].factors[5].points, 0);

    let s = inline(
        "    requires:\n      bins: [bash, sh, python, node, perl, ruby, ssh]\n    egress_domains: [a.com, b.com, c.com, d.com, e.com, f.com]\n",
        "",
    );
    let r = audit(&[s], &Policy::default());
    assert_eq!(
        (r.assessments[0].score.value, r.assessments[0].score.level),
        (100, RiskLevel::Critical)
    );
    let rules: Vec<_> = r.assessments[0]
        .violations
        .iter()
        .map(|v| v.rule.as_str())
        .collect();
    assert_eq!(rules, ["binary_denylist", "max_risk_score"]);
}

#[test]
fn other_policy_rules() {
    let s = inline(
        "    requires:\n      bins: [nmap]\n      env:\n        optional: [AWS_SECRET_ACCESS_KEY]\n    egress_domains: [a.com, b.com]\n",
        "tags: [a, b, c]\n",
    );
    let policy = Policy {
        max_egress_domains: 1,
        max_tags: 2,
        ..Policy::default()
    };
    let r = audit(&[s], &policy);
    let rules: Vec<_> = r.assessments[0]
        .violations
        .iter()
        .map(|v| (v.rule.as_str(), v.severity))
        .collect();
    assert_eq!(
        rules,
        [
            ("max_egress_domains", Severity::Error),
            ("binary_denylist", Severity::Error),
            ("denied_env_pattern", Severity::Error),
            ("excessive-tags", Severity::Warning),
        ]
    );
    assert_eq!(r.policy_summary.total_violations, 4);
    assert_eq!(r.policy_summary.errors, 3);
}

#[test]
fn policy_file_overrides_only_what_it_sets() {
    let p = Policy::parse(
        "max_risk_score: 50\nscript_policy: deny\n",
        Path::new("policy.yaml"),
    )
    .unwrap();
    assert_eq!(p.max_risk_score, 50);
    assert_eq!(p.script_policy, ScriptPolicy::Deny);
    assert_eq!(p.binary_denylist, Policy::default().binary_denylist);
    assert_eq!(p.max_tags, 20);
    let err = Policy::parse("max_risk_scor: 50\n", Path::new("policy.yaml")).unwrap_err();
    assert_eq!(err.problems()[0].line, 1);
    assert!(err.to_string().contains("max_risk_scor"), "{err}");
}

#[test]
fn aggregate_is_the_riskiest_skill_and_levels_are_exact() {
    let r = audit(&skills("fixtures/skills/good"), &Policy::default());
    assert_eq!(r.skill_count, 5);
    assert_eq!(r.aggregate_score.value, 93);
    for (v, l) in [
        (0, RiskLevel::None),
        (1, RiskLevel::Low),
        (25, RiskLevel::Low),
        (26, RiskLevel::Medium),
        (50, RiskLevel::Medium),
        (51, RiskLevel::High),
        (75, RiskLevel::High),
        (76, RiskLevel::Critical),
        (100, RiskLevel::Critical),
    ] {
        assert_eq!(RiskLevel::classify(v), l, "{v}");
    }
    assert!(
        r.timestamp.ends_with('Z') && r.timestamp.len() == 20,
        "{}",
        r.timestamp
    );
}

#[test]
fn policy_example_in_docs_is_exactly_the_defaults() {
    let doc = std::fs::read_to_string(repo().join("docs/skills.md")).unwrap();
    let start = doc.find("### Policy file").unwrap();
    let block_start = start + doc[start..].find("```yaml\n").unwrap() + "```yaml\n".len();
    let block_end = block_start + doc[block_start..].find("\n```").unwrap();
    let p = Policy::parse(&doc[block_start..block_end], Path::new("docs/skills.md")).unwrap();
    assert_eq!(p, Policy::default());
}
