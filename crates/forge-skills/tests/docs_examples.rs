//! The examples in docs/skills.md parse (so the documentation cannot drift from the parser).

use std::path::{Path, PathBuf};

use forge_skills::{parse_skill, Capability, ForgeConfig, SkillSource};

fn block(doc: &str, lang: &str, nth: usize) -> String {
    let fence = format!("```{lang}\n");
    let start = doc.match_indices(&fence).nth(nth).expect("block exists").0 + fence.len();
    let end = start + doc[start..].find("\n```").expect("block closed");
    doc[start..end].to_string() + "\n"
}

fn docs() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/skills.md");
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn skill_md_example_parses_with_every_field() {
    let text = block(&docs(), "markdown", 0);
    let s = parse_skill(&text, Path::new("docs/SKILL.md"), "x", SkillSource::Local)
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let f = s.forge.as_ref().unwrap();
    assert_eq!(f.requires.capabilities, [Capability::Browser]);
    assert_eq!(f.requires.bins.len(), 2);
    assert_eq!(f.uses[0].reference, "mcp.linear");
    assert_eq!(f.egress_domains.len(), 3);
    assert_eq!(f.guardrails.deny_commands.len(), 1);
    assert_eq!(f.timeout_hint, Some(60));
    assert_eq!(s.tools[0].name, "github_create_issue");
}

#[test]
fn forge_yaml_example_parses_without_warnings() {
    let text = block(&docs(), "yaml", 0);
    let c =
        ForgeConfig::parse(&text, Path::new("docs/forge.yaml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.agent_id, "my-agent");
    assert_eq!(c.skills.embedded, ["web-browse"]);
    assert_eq!(c.model.unwrap().fallbacks.len(), 1);
    assert_eq!(c.mcp.servers.len(), 2);
    assert_eq!(c.mcp.servers[1].env, ["SOME_VAR"]);
}
