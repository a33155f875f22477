//! The tool plan (`Agent::tool_plan`): which tools an agent gets and why, decided once for the
//! runtime and the build.

use std::fs;
use std::path::Path;

use forge_skills::{
    script_for, Agent, CliSource, ToolSource, BROWSER_ABSENT_REASON, BROWSER_TOOLS, BUILTIN_TOOLS,
};

/// An agent in a temp dir: forge.yaml text, (skill dir name, SKILL.md text) pairs and
/// (path relative to the agent dir, content) extra files.
fn agent(
    yaml: &str,
    skills: &[(&str, &str)],
    files: &[(&str, &str)],
) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("forge.yaml"), yaml).unwrap();
    for (name, text) in skills {
        let d = dir.path().join("skills").join(name);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("SKILL.md"), text).unwrap();
    }
    for (rel, content) in files {
        let p = dir.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

const YAML: &str = "agent_id: plan\nversion: 0.1.0\n";

#[test]
fn a_plain_agent_gets_the_builtins_and_nothing_else() {
    let (_d, a) = agent(YAML, &[], &[]);
    let plan = a.tool_plan();
    let present: Vec<&str> = plan.present().map(|t| t.name.as_str()).collect();
    assert_eq!(present, BUILTIN_TOOLS);
    let cli = plan.get("cli_execute").unwrap();
    assert!(!cli.present && cli.source == ToolSource::Cli);
    assert!(plan.cli.is_none());
    for name in BROWSER_TOOLS {
        let t = plan.get(name).unwrap();
        assert!(!t.present);
        assert_eq!(t.reason, BROWSER_ABSENT_REASON);
    }
    assert!(plan.browser.is_none() && plan.browser_denied_for.is_empty());
}

#[test]
fn cli_execute_from_forge_yaml_or_the_skills_bins() {
    let skill = "---\nname: lister\nmetadata:\n  forge:\n    requires:\n      bins: [ls, bash]\n---\nList.\n";
    let (_d, a) = agent(YAML, &[("lister", skill)], &[]);
    let plan = a.tool_plan();
    assert_eq!(plan.cli, Some(CliSource::Derived(vec!["ls".into()])));
    assert!(plan
        .get("cli_execute")
        .unwrap()
        .reason
        .contains("shells removed): ls"));

    let yaml = "agent_id: plan\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config: {allowed_binaries: 'jq, wc'}\n  - name: web_search\n";
    let (_d, a) = agent(yaml, &[], &[]);
    let plan = a.tool_plan();
    assert_eq!(plan.cli, Some(CliSource::Configured));
    assert_eq!(
        plan.get("cli_execute").unwrap().reason,
        "forge.yaml tools[cli_execute]: allowed binaries jq, wc"
    );
    let ws = plan.get("web_search").unwrap();
    assert!(!ws.present && ws.source == ToolSource::Config, "{ws:?}");
}

#[test]
fn script_tools_bind_to_files_in_the_scripts_dir_only() {
    let skill = "---\nname: kit\ndescription: d\nmetadata:\n  forge:\n    requires:\n      bins: [ls]\n---\n## Tool: word_count\nCount.\n\n## Tool: ../../../outside\nEscape.\n\n## Tool: .hidden\nHidden.\n\n## Tool: docs_only\nNo script.\n\n## Tool: http_request\nShadows a builtin.\n\n## Tool: cli_execute\nHow to use cli_execute.\n";
    let (d, a) = agent(
        YAML,
        &[("kit", skill)],
        &[
            ("skills/kit/scripts/word-count.py", "print(1)\n"),
            ("skills/kit/scripts/http_request.sh", "echo\n"),
            ("skills/kit/scripts/.hidden.sh", "echo\n"),
            ("outside.sh", "echo pwned\n"),
        ],
    );
    let plan = a.tool_plan();
    let wc = plan.get("word_count").unwrap();
    assert!(wc.present, "{wc:?}");
    let b = wc.script.as_ref().unwrap();
    assert_eq!(b.skill, "kit");
    assert_eq!(b.script, d.path().join("skills/kit/scripts/word-count.py"));
    assert_eq!(
        wc.reason,
        "skill kit: ## Tool: word_count -> skills/kit/scripts/word-count.py"
    );

    let escape = plan.get("../../../outside").unwrap();
    assert!(!escape.present && escape.script.is_none(), "{escape:?}");
    assert!(
        escape.reason.contains("not a plain file name"),
        "{}",
        escape.reason
    );
    // The file is really there: only the name rule keeps it out.
    assert!(d
        .path()
        .join("skills/kit/scripts/../../../outside.sh")
        .is_file());
    assert!(!plan.get(".hidden").unwrap().present);

    let docs = plan.get("docs_only").unwrap();
    assert!(!docs.present);
    assert!(
        docs.reason.contains("no script for ## Tool: docs_only"),
        "{}",
        docs.reason
    );

    // A script cannot take a builtin's name; a section documenting the (present) cli_execute
    // adds nothing.
    let shadows: Vec<_> = plan
        .tools
        .iter()
        .filter(|t| t.name == "http_request")
        .collect();
    assert_eq!(shadows.len(), 2);
    assert!(shadows[0].present && shadows[0].source == ToolSource::Builtin);
    assert!(!shadows[1].present && shadows[1].reason.contains("already registered"));
    assert_eq!(
        plan.tools
            .iter()
            .filter(|t| t.name == "cli_execute")
            .count(),
        1
    );
}

#[test]
fn script_for_refuses_names_that_are_paths() {
    let root = tempfile::tempdir().unwrap();
    let skill = root.path().join("skills/demo");
    fs::create_dir_all(skill.join("scripts/sub")).unwrap();
    fs::write(root.path().join("outside.sh"), "echo\n").unwrap();
    fs::write(skill.join("scripts/sub/inner.sh"), "echo\n").unwrap();
    fs::write(skill.join("scripts/fine.js"), "1\n").unwrap();
    for name in [
        "../../../outside",
        "sub/inner",
        "/etc/passwd",
        "..",
        "a\\..\\b",
        "",
        "x\0y",
    ] {
        assert_eq!(script_for(&skill, name), None, "{name:?}");
    }
    assert_eq!(
        script_for(&skill, "fine"),
        Some(skill.join("scripts/fine.js"))
    );
    assert_eq!(script_for(Path::new("/nonexistent"), "fine"), None);
}

#[test]
fn the_browser_is_needed_only_while_a_browser_tool_survives_denied_tools() {
    let browse = |denied: &str| {
        format!("---\nname: browse\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    denied_tools: {denied}\n---\nBrowse.\n")
    };
    let (_d, a) = agent(YAML, &[("browse", &browse("[browser_hover]"))], &[]);
    let plan = a.tool_plan();
    assert_eq!(plan.browser.as_ref().unwrap().skills, ["browse"]);
    assert!(plan.has("browser_navigate"));
    assert!(!plan.has("browser_hover"));
    assert!(plan
        .get("browser_hover")
        .unwrap()
        .reason
        .starts_with("denied by denied_tools of skill(s) browse (was: browser: skill(s) browse"));

    let all = format!("[{}]", BROWSER_TOOLS.join(", "));
    let (_d, a) = agent(YAML, &[("browse", &browse(&all))], &[]);
    let plan = a.tool_plan();
    assert!(
        plan.browser.is_none(),
        "every browser tool denied: no browser"
    );
    assert_eq!(plan.browser_denied_for, ["browse"]);
    assert!(BROWSER_TOOLS.iter().all(|t| !plan.has(t)));
    // forge.yaml can deny them as well.
    let yaml = format!("{YAML}denied_tools: {all}\n");
    let (_d, a) = agent(&yaml, &[("browse", &browse("[]"))], &[]);
    assert!(a.tool_plan().browser.is_none());
    assert!(a
        .tool_plan()
        .get("browser_state")
        .unwrap()
        .reason
        .starts_with("denied by denied_tools of forge.yaml"));
}
