//! An agent whose browser skills use two engines (issue 26): ending a session key through the
//! shared call path (`ToolRunner::close_session`, which `forge mcp serve` uses when an MCP
//! session ends) closes that key's session on both engines, and Lightpanda's process for it is
//! gone. Real Chromium, real Lightpanda, real proxy; fails instead of skipping under
//! FORGE_REQUIRE_BROWSER=1.

// Test: prints skip notes (the workspace denies printing in library code).
#![allow(clippy::print_stderr)]

use forge_runtime::{assemble, AssembleOptions};
use forge_skills::Agent;
use forge_testkit::site::{Request, Response, Site};
use serde_json::json;

fn agent(site: &str) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: two\nversion: 0.1.0\nmodel:\n  provider: openai\n  name: m\negress:\n  mode: allowlist\n",
    )
    .expect("forge.yaml");
    for (name, engine) in [
        ("former", ""),
        ("reader", "      browser_engine: lightpanda\n"),
    ] {
        let d = dir.path().join("skills").join(name);
        std::fs::create_dir_all(&d).expect("skill dir");
        std::fs::write(
            d.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n{engine}    egress_domains: [\"{site}\"]\n---\nx\n"),
        )
        .expect("SKILL.md");
    }
    let a = Agent::load(dir.path().join("forge.yaml")).expect("agent");
    (dir, a)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_key_closes_it_on_both_engines() {
    let test = "closing_a_session_key_closes_it_on_both_engines";
    if forge_testkit::require_browser(test).is_none()
        || forge_testkit::require_lightpanda(test).is_none()
    {
        return;
    }
    let site =
        Site::start(|_: &Request| Response::html("<!doctype html><title>T</title><p>hi</p>"));
    let (_d, agent) = agent(&site.entry());
    let tools = assemble(&agent, AssembleOptions::default())
        .await
        .expect("assembled");
    let runner = tools.runner();
    let ctx = tools.context("mcp-1");
    for skill in ["reader", "former"] {
        let out = runner
            .execute(
                "browser_navigate",
                json!({"url": site.url("/"), "skill": skill}),
                &ctx,
            )
            .await
            .expect("navigates");
        assert!(out.text.contains("hi"), "{skill}: {}", out.text);
    }
    let parts = tools.browser().expect("browser parts");
    let managers: Vec<_> = parts.managers().cloned().collect();
    assert_eq!(managers.len(), 2, "one manager per engine");
    let mut lightpanda_pid = None;
    for m in &managers {
        assert!(m.has_session("mcp-1").await, "{:?}", m.config().engine);
        if m.config().engine == forge_browser::EngineKind::Lightpanda {
            lightpanda_pid = m.session_pid("mcp-1").await;
        }
    }
    let Some(pid) = lightpanda_pid else {
        panic!("the reader call ran on Lightpanda");
    };
    runner.close_session("mcp-1").await;
    for m in &managers {
        assert!(!m.has_session("mcp-1").await, "{:?}", m.config().engine);
    }
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the session's Lightpanda {pid} is gone"
    );
    tools.shutdown().await;
}
