//! agent.json's tool list is forge-skills' tool plan (the one forge-runtime assembles from): the
//! same tools, and a `## Tool:` name that is a path never binds a script outside the skill.

use forge_build::{audit_agent, documented_tool_plan, spec_from_agent};
use forge_skills::Agent;

#[test]
fn agent_json_tools_are_the_plan_and_tool_names_cannot_leave_the_scripts_dir() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: plan\nversion: 0.1.0\ndenied_tools: [web_fetch]\n",
    )
    .unwrap();
    let skill = dir.path().join("skills/kit");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: kit\ndescription: d\n---\n## Tool: count_words\nCount.\n\n## Tool: ../../../outside\nEscape.\n",
    )
    .unwrap();
    std::fs::write(skill.join("scripts/count_words.sh"), "echo 1\n").unwrap();
    // What `../../../outside` would name if names were paths.
    std::fs::write(dir.path().join("outside.sh"), "echo pwned\n").unwrap();

    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    let audit = audit_agent(&agent, None).unwrap();
    let spec = spec_from_agent(&agent, audit);
    let kit = &spec.skills[0];
    assert_eq!(
        kit.tools[0].script.as_deref(),
        Some("skills/kit/scripts/count_words.sh")
    );
    assert_eq!(kit.tools[1].name, "../../../outside");
    assert_eq!(kit.tools[1].script, None, "a path is not a tool name");

    let plan = documented_tool_plan(&spec);
    let registered: Vec<&str> = plan
        .iter()
        .filter(|t| t.registered)
        .map(|t| t.name.as_str())
        .collect();
    let from_skills: Vec<String> = agent
        .tool_plan()
        .present()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(registered, from_skills);
    assert!(registered.contains(&"count_words"));
    assert!(!registered.contains(&"web_fetch"));
    let escape = plan.iter().find(|t| t.name == "../../../outside").unwrap();
    assert!(!escape.registered);
    assert_eq!(escape.kind, "skill-script");
    assert!(escape
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("not a plain file name"));
    let fetch = plan.iter().find(|t| t.name == "web_fetch").unwrap();
    assert_eq!(fetch.kind, "builtin");
    assert!(fetch
        .reason
        .as_deref()
        .unwrap_or("")
        .starts_with("denied by denied_tools of forge.yaml"));
    let http = plan.iter().find(|t| t.name == "http_request").unwrap();
    assert_eq!(http.reason, None, "a present builtin needs no reason");
}

#[test]
fn the_task_time_cap_comes_from_forge_yaml_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let write = |yaml: &str| std::fs::write(dir.path().join("forge.yaml"), yaml).unwrap();
    write("agent_id: cap\nversion: 0.1.0\n");
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    let spec = spec_from_agent(&agent, audit_agent(&agent, None).unwrap());
    assert_eq!(spec.deploy.task_seconds_cap, 1800);
    write("agent_id: cap\nversion: 0.1.0\ntasks:\n  max_seconds: 60\n  max_seconds_cap: 600\n");
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    let spec = spec_from_agent(&agent, audit_agent(&agent, None).unwrap());
    assert_eq!(spec.deploy.task_seconds_cap, 600);
}
