//! Loading the shared fixture agents (fixtures/agents/{browse,plain}) end to end.

use std::path::PathBuf;

use forge_skills::{Agent, Capability, EgressMode, SkillSource};

fn fixture(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(p)
}

#[test]
fn browse_agent_has_browser_view() {
    let agent = Agent::load(fixture("agents/browse/forge.yaml")).unwrap();
    assert_eq!(agent.config.agent_id, "browse-agent");
    assert_eq!(agent.config.egress.mode, EgressMode::Allowlist);
    assert!(
        agent.config.warnings.is_empty(),
        "{:?}",
        agent.config.warnings
    );
    let names: Vec<_> = agent.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["docs-reader"]);
    assert_eq!(agent.skills[0].source, SkillSource::Local);
    assert!(agent.aggregate.has_capability(Capability::Browser));
    let view = agent.aggregate.browser_view().expect("browser view");
    assert_eq!(view.skills, ["docs-reader"]);
    assert!(!view.allow_sensitive_fill);
    assert_eq!(agent.aggregate.timeout_hint, Some(90));
    assert_eq!(agent.aggregate.guardrails.deny_output.len(), 2);
    let origin = &agent.aggregate.guardrails.deny_output[0].origin;
    assert_eq!(origin.skill, "docs-reader");
    assert_eq!(origin.line, 26, "line of the first deny_output pattern");
    let hosts = agent.aggregate.egress_domains_with(|k| {
        (k == "DOCS_HOSTS").then(|| "a.example.com, ,b.example.com".into())
    });
    assert_eq!(
        hosts,
        ["docs.example.com", "a.example.com", "b.example.com"]
    );
    assert_eq!(
        agent.aggregate.egress_domains_with(|_| None),
        ["docs.example.com"]
    );
}

#[test]
fn plain_agent_has_no_browser_view() {
    let agent = Agent::load(fixture("agents/plain/forge.yaml")).unwrap();
    assert!(agent.aggregate.browser_view().is_none());
    assert!(agent.aggregate.capabilities.is_empty());
    let cli = agent.aggregate.cli_view();
    assert_eq!(cli.allowed_binaries, ["curl", "jq"]);
    assert_eq!(cli.timeout_hint, Some(30));
    assert_eq!(agent.skills[0].tools.len(), 2);
    assert_eq!(agent.skills[0].tools[0].name, "weather_current");
    assert_eq!(
        agent.skills[0].tools[0].input.as_deref(),
        Some("city (string)")
    );
}

#[test]
fn embedded_web_browse_parses_with_browser_capability() {
    let skills = forge_skills::embedded_skills().unwrap();
    let wb = skills
        .iter()
        .find(|s| s.name == "web-browse")
        .expect("web-browse embedded");
    assert_eq!(wb.source, SkillSource::Embedded);
    assert!(wb.requires_browser());
    assert!(wb.warnings.is_empty(), "{:?}", wb.warnings);
    let f = wb.forge.as_ref().unwrap();
    assert_eq!(f.trust_hints.network, Some(true));
    assert_eq!(f.egress_domains, ["$BROWSE_HOSTS"]);
    assert!(!f.guardrails.deny_output.is_empty());
    assert!(f.timeout_hint.is_some());
    assert_eq!(wb.category.as_deref(), Some("research"));
    assert!(wb.icon.is_some());
}

#[test]
fn initializ_layout_agent_with_root_file_flat_skills_and_uses_reference() {
    let agent = Agent::load(fixture("agents/skills-initializ/forge.yaml")).unwrap();
    assert!(
        agent.config.warnings.is_empty(),
        "{:?}",
        agent.config.warnings
    );
    let names: Vec<_> = agent
        .skills
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(
        names,
        [
            ("ops-assistant", SkillSource::Local),
            ("ops-research", SkillSource::Local),
            ("status-page", SkillSource::Local),
            ("web-browse", SkillSource::Embedded),
        ]
    );
    for s in &agent.skills {
        assert!(s.warnings.is_empty(), "{}: {:?}", s.name, s.warnings);
    }
    // The flat skill's script lives in skills/scripts/<tool>.sh.
    assert_eq!(agent.skills[2].scripts.len(), 1);
    let agg = &agent.aggregate;
    assert_eq!(agg.browser_view().unwrap().skills, ["web-browse"]);
    assert_eq!(agg.timeout_hint, Some(240));
    assert_eq!(agg.cli_view().allowed_binaries, ["python3", "curl", "jq"]);
    assert_eq!(agg.env.required, ["TEAM_NAME"]);
    assert_eq!(agg.env.optional, ["BROWSE_HOSTS"]);
    assert_eq!(
        agg.egress_domains,
        [
            "docs.github.com",
            "www.githubstatus.com",
            "status.openai.com",
            "$BROWSE_HOSTS"
        ]
    );
    assert_eq!(
        agg.guardrails.deny_responses[0].origin.skill,
        "ops-research"
    );
    assert_eq!(
        agg.guardrails.deny_output.len(),
        2,
        "web-browse's guardrails"
    );
    assert_eq!(
        agent.config.security.policy_path.as_deref(),
        Some(std::path::Path::new("policy.yaml"))
    );
}
