//! Aggregation across skills and the derived browser / cli_execute views.

use std::path::{Path, PathBuf};

use forge_skills::{discover, parse_skill, Aggregate, Capability, Skill, SkillSource};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn good() -> Vec<Skill> {
    let d = discover(&repo().join("fixtures/skills/good"));
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    d.skills
}

fn skill(name: &str, forge: &str) -> Skill {
    let text = format!("---\nname: {name}\nmetadata:\n  forge:\n{forge}---\nbody\n");
    parse_skill(&text, Path::new("t/SKILL.md"), name, SkillSource::Local).unwrap()
}

fn pick(all: &[Skill], names: &[&str]) -> Vec<Skill> {
    names
        .iter()
        .map(|n| all.iter().find(|s| s.name == *n).unwrap().clone())
        .collect()
}

#[test]
fn initializ_style_fixtures_parse_without_warnings() {
    let skills = good();
    let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "code-runner",
            "github-issues",
            "k8s-incident-triage",
            "research-browser",
            "tavily-search"
        ]
    );
    for s in &skills {
        assert!(s.warnings.is_empty(), "{}: {:?}", s.name, s.warnings);
        assert!(s.forge.is_some(), "{}", s.name);
    }
    let gh = &skills[1];
    // Tags are lowercased and de-duplicated keeping the first ("GitHub" == "github").
    assert_eq!(gh.tags, ["github", "issues", "pull-requests"]);
    assert_eq!(gh.tools.len(), 3);
    assert_eq!(gh.tools[1].output_format.as_deref(), Some("json"));
    assert!(gh.other_metadata.contains_key("clawdbot"));
    let k8s = &skills[2];
    assert!(k8s.is_instructional());
    assert_eq!(
        k8s.forge.as_ref().unwrap().guardrails.deny_commands.len(),
        2
    );
    // The executable script of code-runner is found; other skills ship none.
    assert_eq!(skills[0].scripts.len(), 1);
    assert!(skills[1].scripts.is_empty());
}

#[test]
fn browser_skill_makes_browser_view_present() {
    let all = good();
    let agg = Aggregate::from_skills(&pick(&all, &["github-issues", "research-browser"]));
    assert_eq!(agg.capabilities, [Capability::Browser]);
    let view = agg.browser_view().expect("browser view present");
    assert_eq!(view.skills, ["research-browser"]);
    assert!(!view.allow_sensitive_fill);
}

#[test]
fn without_browser_skill_browser_view_is_absent() {
    let all = good();
    let agg = Aggregate::from_skills(&pick(
        &all,
        &["github-issues", "k8s-incident-triage", "tavily-search"],
    ));
    assert!(agg.capabilities.is_empty());
    assert!(agg.browser_view().is_none());
}

#[test]
fn sensitive_fill_opt_in_from_non_browser_skill_does_not_escalate() {
    let browser = skill("b", "    requires:\n      capabilities: [browser]\n");
    let other = skill(
        "o",
        "    guardrails:\n      browser:\n        allow_sensitive_fill: true\n",
    );
    let agg = Aggregate::from_skills(&[browser.clone(), other]);
    assert!(!agg.browser_view().unwrap().allow_sensitive_fill);

    let opted = skill(
        "b2",
        "    requires:\n      capabilities: [browser]\n    guardrails:\n      browser:\n        allow_sensitive_fill: true\n",
    );
    let agg = Aggregate::from_skills(&[browser, opted]);
    let view = agg.browser_view().unwrap();
    assert!(view.allow_sensitive_fill);
    assert_eq!(view.skills, ["b", "b2"]);
}

#[test]
fn bins_env_domains_tools_guardrails_and_timeout_merge() {
    let a = skill(
        "a",
        "    requires:\n      bins: [jq, bash, curl]\n      env:\n        required: [A]\n        optional: [B, C]\n        one_of: [X, Y]\n    egress_domains: ['api.example.com, ,*.example.org', '$HOSTS']\n    denied_tools: [web_fetch, cli_execute]\n    guardrails:\n      deny_commands:\n        - pattern: 'rm -rf'\n          message: no\n    timeout_hint: 30\n",
    );
    let b = skill(
        "b",
        "    requires:\n      bins:\n        - name: jq\n          apt: jq\n          version: '1.7'\n      env:\n        required: [B]\n        one_of: [Z]\n    egress_domains: [api.example.com]\n    denied_tools: [web_fetch]\n    guardrails:\n      deny_commands:\n        - pattern: 'rm -rf'\n          message: dup\n        - pattern: 'mkfs'\n          message: no\n    timeout_hint: 120\n",
    );
    let agg = Aggregate::from_skills(&[a, b]);
    let names: Vec<_> = agg.bins.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["jq", "bash", "curl"]);
    assert_eq!(
        agg.bins[0].apt.as_deref(),
        Some("jq"),
        "richest jq entry wins"
    );
    assert_eq!(agg.env.required, ["A", "B"], "B promoted from optional");
    assert_eq!(agg.env.optional, ["C"]);
    assert_eq!(agg.env.one_of.len(), 2, "one_of kept per skill");
    assert_eq!(
        agg.egress_domains,
        ["api.example.com", "*.example.org", "$HOSTS"]
    );
    assert_eq!(agg.egress_env_vars(), ["HOSTS"]);
    assert_eq!(
        agg.egress_domains_with(|k| (k == "HOSTS").then(|| "x.test,api.example.com".to_string())),
        ["api.example.com", "*.example.org", "x.test"]
    );
    assert_eq!(agg.denied_tools, ["web_fetch", "cli_execute"]);
    let pats: Vec<_> = agg
        .guardrails
        .deny_commands
        .iter()
        .map(|r| (r.pattern.as_str(), r.origin.skill.as_str()))
        .collect();
    assert_eq!(pats, [("rm -rf", "a"), ("mkfs", "b")]);
    assert_eq!(agg.timeout_hint, Some(120));
    let cli = agg.cli_view();
    assert_eq!(
        cli.allowed_binaries,
        ["jq", "curl"],
        "shells are never allowed"
    );
    assert_eq!(cli.env_passthrough, ["A", "B", "X", "Y", "Z", "C"]);
    assert_eq!(cli.timeout_hint, Some(120));
}

#[test]
fn no_front_matter_means_body_only() {
    let s = parse_skill(
        "## Tool: t\n**Input:** x\n",
        Path::new("skills/t.md"),
        "t",
        SkillSource::Local,
    )
    .unwrap();
    assert!(s.forge.is_none());
    assert_eq!(s.name, "t");
    assert_eq!(s.tools[0].input.as_deref(), Some("x"));
}
