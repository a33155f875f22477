//! `browser_task` is offered to the model only for browser agents, and `denied_tools` removes it
//! like any tool (checked on the started agent loop's tool list; Chromium is never launched).
//! Skips without Chromium (a browser agent cannot start without one), fails instead when
//! FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes (the workspace denies printing in library code).
#![allow(clippy::print_stderr)]

use forge_runtime::{ModelChoice, Runner, RunnerOptions};
use forge_skills::Agent;

fn agent(denied: &str, browser: bool) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.yaml"), "turns:\n  - text: hi\n").unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        format!(
            "agent_id: bt\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n{denied}"
        ),
    )
    .unwrap();
    if browser {
        std::fs::create_dir_all(dir.path().join("skills/look")).unwrap();
        std::fs::write(
            dir.path().join("skills/look/SKILL.md"),
            "---\nname: look\ndescription: Look.\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n---\nLook.\n",
        )
        .unwrap();
    }
    let a = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, a)
}

async fn tool_names(agent: &Agent) -> Vec<String> {
    let runner = Runner::start(
        agent,
        RunnerOptions {
            model: Some(ModelChoice::default()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let names = runner
        .agent_loop()
        .expect("a loop")
        .tools
        .specs()
        .into_iter()
        .map(|s| s.name)
        .collect();
    runner.shutdown().await;
    names
}

#[tokio::test]
async fn browser_task_is_for_browser_agents_and_deniable() {
    let (_d, plain) = agent("", false);
    assert!(!tool_names(&plain).await.iter().any(|n| n == "browser_task"));
    if forge_testkit::require_browser("browser_task registration").is_none() {
        return;
    }
    let (_d, browsing) = agent("", true);
    let names = tool_names(&browsing).await;
    assert!(names.iter().any(|n| n == "browser_task"), "{names:?}");
    assert!(names.iter().any(|n| n == "browser_navigate"), "{names:?}");
    let (_d, denied) = agent("denied_tools: [browser_task]\n", true);
    let names = tool_names(&denied).await;
    assert!(!names.iter().any(|n| n == "browser_task"), "{names:?}");
    assert!(names.iter().any(|n| n == "browser_navigate"), "{names:?}");
}
