//! `metadata.forge.requires.browser_engine` (a skill's own engine) and
//! [`Agent::browser_engines`]: which engine serves each browser skill of an agent.

use std::path::Path;

use forge_skills::{parse_skill, Agent, BrowserEngine, SkillSource};

fn skill_md(name: &str, requires: &str) -> String {
    format!(
        "---\nname: {name}\ndescription: a test skill\nmetadata:\n  forge:\n    requires:\n{requires}---\n\n# {name}\n"
    )
}

fn parse(content: &str) -> Result<forge_skills::Skill, forge_skills::Error> {
    parse_skill(content, Path::new("SKILL.md"), "x", SkillSource::Local)
}

/// An agent dir with forge.yaml (`browser_yaml` appended) and the given skills.
fn agent(browser_yaml: &str, skills: &[(&str, &str)]) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("forge.yaml"),
        format!("agent_id: engines\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: gpt-4o-mini\n{browser_yaml}"),
    )
    .expect("write forge.yaml");
    for (name, requires) in skills {
        let d = dir.path().join("skills").join(name);
        std::fs::create_dir_all(&d).expect("skill dir");
        std::fs::write(d.join("SKILL.md"), skill_md(name, requires)).expect("write SKILL.md");
    }
    let agent = Agent::load(dir.path().join("forge.yaml")).expect("agent loads");
    (dir, agent)
}

const BROWSER: &str = "      capabilities: [browser]\n";
const LIGHTPANDA: &str = "      capabilities: [browser]\n      browser_engine: lightpanda\n";
const CHROMIUM: &str = "      capabilities: [browser]\n      browser_engine: chromium\n";

#[test]
fn a_skill_names_its_engine() {
    let s = parse(&skill_md("reader", LIGHTPANDA)).expect("valid skill");
    assert_eq!(s.browser_engine(), Some(BrowserEngine::Lightpanda));
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let s = parse(&skill_md("former", CHROMIUM)).expect("valid skill");
    assert_eq!(s.browser_engine(), Some(BrowserEngine::Chromium));
    let s = parse(&skill_md("plain", BROWSER)).expect("valid skill");
    assert_eq!(s.browser_engine(), None);
}

#[test]
fn an_unknown_engine_points_at_the_value_and_names_the_fix() {
    let err = parse(&skill_md(
        "reader",
        "      capabilities: [browser]\n      browser_engine: lightpand\n",
    ))
    .expect_err("unknown engine");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::skill::unknown-browser-engine");
    assert_eq!((p.line, p.column), (8, 23), "the span is the value");
    assert!(p.message.contains("\"lightpand\""), "{}", p.message);
    assert!(p.message.contains("chromium, lightpanda"), "{}", p.message);
    let help = p.help.as_deref().unwrap_or_default();
    assert!(help.contains("did you mean `lightpanda`"), "{help}");
    assert!(help.contains("browser_engine: chromium"), "{help}");
}

#[test]
fn an_engine_without_the_browser_capability_is_an_error_saying_what_to_do() {
    let err = parse(&skill_md("reader", "      browser_engine: lightpanda\n"))
        .expect_err("engine without browser");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::skill::browser-engine-without-browser");
    assert_eq!((p.line, p.column), (7, 23));
    let help = p.help.as_deref().unwrap_or_default();
    assert!(
        help.contains("capabilities: [browser]") && help.contains("remove browser_engine"),
        "{help}"
    );
}

#[test]
fn a_misspelt_key_is_a_warning_naming_browser_engine() {
    let s = parse(&skill_md(
        "reader",
        "      capabilities: [browser]\n      browser_engin: lightpanda\n",
    ))
    .expect("unknown keys warn");
    assert_eq!(s.browser_engine(), None);
    let w = &s.warnings[0];
    assert!(
        w.help
            .as_deref()
            .unwrap_or_default()
            .contains("browser_engine"),
        "{w:?}"
    );
}

#[test]
fn each_browser_skill_gets_its_own_choice_or_the_agents_default() {
    let (_d, a) = agent(
        "",
        &[("former", BROWSER), ("notes", ""), ("reader", LIGHTPANDA)],
    );
    let e = a.browser_engines();
    assert_eq!(e.default, BrowserEngine::Chromium);
    assert_eq!(e.engine_of("former"), Some(BrowserEngine::Chromium));
    assert_eq!(e.engine_of("reader"), Some(BrowserEngine::Lightpanda));
    assert_eq!(e.engine_of("notes"), None, "not a browser skill");
    assert_eq!(
        e.used(),
        [BrowserEngine::Chromium, BrowserEngine::Lightpanda]
    );
    assert!(e.is_mixed());
    assert_eq!(e.primary(), BrowserEngine::Chromium);
    let explicit: Vec<_> = e
        .skills
        .iter()
        .map(|s| (s.skill.as_str(), s.explicit))
        .collect();
    assert_eq!(explicit, [("former", false), ("reader", true)]);
}

#[test]
fn forge_yaml_sets_the_default_and_the_override_replaces_only_the_default() {
    let (_d, a) = agent(
        "browser:\n  engine: lightpanda\n",
        &[("reader", BROWSER), ("former", CHROMIUM)],
    );
    let e = a.browser_engines();
    assert_eq!(e.default, BrowserEngine::Lightpanda);
    assert_eq!(e.engine_of("reader"), Some(BrowserEngine::Lightpanda));
    assert_eq!(e.engine_of("former"), Some(BrowserEngine::Chromium));
    // FORGE_BROWSER_ENGINE=chromium: the default changes; lightpanda is used by nobody now.
    let e = a.browser_engines_with(Some(BrowserEngine::Chromium));
    assert_eq!(e.default, BrowserEngine::Chromium);
    assert_eq!(e.engine_of("reader"), Some(BrowserEngine::Chromium));
    assert_eq!(e.engine_of("former"), Some(BrowserEngine::Chromium));
    assert_eq!(e.used(), [BrowserEngine::Chromium]);
    assert!(!e.is_mixed());
}

#[test]
fn a_skill_that_asks_for_lightpanda_alone_makes_lightpanda_the_primary_engine() {
    let (_d, a) = agent("", &[("reader", LIGHTPANDA)]);
    let e = a.browser_engines();
    assert_eq!(e.default, BrowserEngine::Chromium);
    assert_eq!(e.used(), [BrowserEngine::Lightpanda]);
    assert!(!e.is_mixed());
    assert_eq!(e.primary(), BrowserEngine::Lightpanda);
}

#[test]
fn an_agent_without_browser_skills_uses_no_engine() {
    let (_d, a) = agent("browser:\n  engine: lightpanda\n", &[("notes", "")]);
    let e = a.browser_engines();
    assert!(e.skills.is_empty());
    assert!(e.used().is_empty());
    assert_eq!(e.primary(), BrowserEngine::Lightpanda);
}
