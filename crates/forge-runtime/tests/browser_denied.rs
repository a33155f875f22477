//! An agent whose browser skill is left with no browser tool (every `browser_*` denied by
//! `denied_tools`) does not need the browser: it starts without a Chromium binary and without a
//! proxy listener for it. Its own test binary, because it points `FORGE_BROWSER_BIN` (read from
//! the process environment by forge-browser) at a file that does not exist.

use forge_runtime::ToolSource;
use forge_runtime::{Runner, RunnerOptions};
use forge_skills::{Agent, BROWSER_TOOLS};

fn browser_agent(dir: &std::path::Path, denied: &[&str]) -> Agent {
    std::fs::write(
        dir.join("forge.yaml"),
        "agent_id: no-browser\nversion: 0.1.0\n",
    )
    .unwrap();
    let skill = dir.join("skills/reader");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!(
            "---\nname: reader\ndescription: d\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n    denied_tools: [{}]\n---\nRead pages.\n",
            denied.join(", ")
        ),
    )
    .unwrap();
    Agent::load(dir.join("forge.yaml")).unwrap()
}

#[tokio::test]
async fn every_browser_tool_denied_means_no_chromium_and_no_proxy() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-such-chromium");
    // The only test in this binary: nothing else reads the variable concurrently.
    std::env::set_var("FORGE_BROWSER_BIN", &missing);

    // Control: with one browser tool left, the same agent needs Chromium and, there being none
    // at FORGE_BROWSER_BIN, refuses to start.
    let some = tempfile::tempdir().unwrap();
    let agent = browser_agent(some.path(), &BROWSER_TOOLS[1..]);
    let err = match Runner::start(&agent, RunnerOptions::default()).await {
        Ok(_) => panic!("a browser tool is left, so Chromium is required"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("no Chromium binary was found"), "{err}");
    assert!(err.contains("no-such-chromium"), "{err}");

    // Every browser tool denied: it starts, with no browser and no proxy.
    let all = tempfile::tempdir().unwrap();
    let agent = browser_agent(all.path(), BROWSER_TOOLS);
    let plan = agent.tool_plan();
    assert!(plan.browser.is_none());
    assert_eq!(plan.browser_denied_for, ["reader"]);
    let runner = Runner::start(&agent, RunnerOptions::default())
        .await
        .expect("no browser tool is left, so no Chromium is needed");
    assert!(
        runner.proxy_addr().is_none(),
        "nothing else needs the proxy, so no listener"
    );
    assert!(runner.assembled().browser().is_none());
    let browser_reasons: Vec<_> = runner
        .tool_reasons()
        .iter()
        .filter(|r| r.source == ToolSource::Browser)
        .collect();
    assert_eq!(browser_reasons.len(), BROWSER_TOOLS.len());
    for r in browser_reasons {
        assert!(!r.present);
        assert!(
            r.reason
                .starts_with("denied by denied_tools of skill(s) reader"),
            "{}",
            r.reason
        );
    }
    assert!(runner
        .tools()
        .registry()
        .list()
        .iter()
        .all(|t| !t.name().starts_with("browser_")));
    runner.shutdown().await;
}
