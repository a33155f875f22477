//! Tool assembly on the `fixtures/agents/tools-*` agents and on small agents written by the tests:
//! which tools are present or absent and why, cli_execute from forge.yaml or from derived bins with
//! the real egress proxy in its environment, skill script tools, denied_tools, and the startup
//! errors (shell in allowed_binaries, invalid guardrail regex).

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use forge_runtime::{assemble, AssembleError, AssembleOptions, AssembledTools, ToolSource};
use forge_skills::Agent;
use serde_json::json;

use fixture_agents::fixture_copy;
use forge_testkit::agents as fixture_agents;
use forge_testkit::site::{Canary, Response, Site};

/// A private copy of a fixture agent (so `.forge/files` lands in a temp dir).
fn agent_copy(name: &str) -> (tempfile::TempDir, Agent) {
    let dir = fixture_copy(name);
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

/// An agent written by the test: forge.yaml text and (skill name, SKILL.md text) pairs.
fn agent_from(yaml: &str, skills: &[(&str, &str)]) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("forge.yaml"), yaml).unwrap();
    for (name, text) in skills {
        let d = dir.path().join("skills").join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("SKILL.md"), text).unwrap();
    }
    let agent = Agent::load(dir.path().join("forge.yaml")).unwrap();
    (dir, agent)
}

fn present(t: &AssembledTools) -> Vec<String> {
    t.registry()
        .list()
        .iter()
        .map(|t| t.name().to_string())
        .collect()
}

fn reason<'a>(t: &'a AssembledTools, name: &str) -> &'a forge_runtime::ToolReason {
    t.reasons()
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no reason for {name}"))
}

#[tokio::test]
async fn plain_agent_gets_builtins_only_and_no_proxy() {
    let (_d, agent) = agent_copy("tools-plain");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    assert_eq!(
        present(&tools),
        [
            "http_request",
            "file_create",
            "datetime_now",
            "json_parse",
            "math_calculate"
        ]
    );
    let wf = reason(&tools, "web_fetch");
    assert!(!wf.present);
    assert!(
        wf.reason
            .contains("denied by denied_tools of skill(s) notes"),
        "{}",
        wf.reason
    );
    let cli = reason(&tools, "cli_execute");
    assert!(!cli.present && cli.source == ToolSource::Cli);
    for r in tools
        .reasons()
        .iter()
        .filter(|r| r.source == ToolSource::Browser)
    {
        assert!(!r.present);
        assert!(
            r.reason.contains("no active skill declares"),
            "{}",
            r.reason
        );
    }
    assert_eq!(
        tools
            .reasons()
            .iter()
            .filter(|r| r.source == ToolSource::Browser)
            .count(),
        // Every browser tool (the list is checked against the tools forge-browser builds below).
        forge_skills::BROWSER_TOOLS.len()
    );
    assert!(
        tools.proxy_addr().is_none(),
        "no proxy listener without cli_execute, scripts or browser"
    );
    assert!(tools.browser().is_none());
    assert!(tools.files_dir().is_absolute());
    // The builtins run through the runner.
    let ctx = tools.context("s1");
    let out = tools
        .execute("math_calculate", json!({"expression": "6*7"}), &ctx)
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["result"], 42);
    let err = tools
        .execute("web_fetch", json!({"url": "https://example.com"}), &ctx)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("there is no tool called \"web_fetch\""),
        "{err}"
    );
    tools.shutdown().await;
}

#[tokio::test]
async fn cli_execute_from_forge_yaml_runs_with_the_proxy_env() {
    let (_d, agent) = agent_copy("tools-cli");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let names = present(&tools);
    assert!(
        names.contains(&"cli_execute".to_string()) && names.contains(&"word_count".to_string()),
        "{names:?}"
    );
    let r = reason(&tools, "cli_execute");
    assert!(
        r.reason
            .contains("forge.yaml tools[cli_execute]: allowed binaries echo, printenv, seq"),
        "{}",
        r.reason
    );
    let proxy = tools
        .proxy_addr()
        .expect("cli_execute starts the egress proxy");
    assert!(proxy.ip().is_loopback());
    let ctx = tools.context("s1");
    let out = tools
        .execute(
            "cli_execute",
            json!({"binary": "printenv", "args": ["HTTPS_PROXY"]}),
            &ctx,
        )
        .await
        .unwrap();
    // Confined, the child's proxy is the listener forge serves inside its namespace.
    let child_proxy = if tools.confinement().is_namespace() {
        forge_egress::confine::CHILD_PROXY_URL.to_string()
    } else {
        format!("http://{proxy}")
    };
    assert_eq!(out.data.unwrap()["stdout"], format!("{child_proxy}\n"));
    // Not in the allowlist.
    let err = tools
        .execute("cli_execute", json!({"binary": "ls"}), &ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not an allowed binary"), "{err}");
    // The skill's script tool gets the same proxy and its JSON args.
    let out = tools
        .execute("word_count", json!({"text": "one two three\nfour"}), &ctx)
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["words"], 4);
    assert_eq!(data["lines"], 2);
    assert_eq!(data["proxy"], child_proxy);
    let ns = reason(&tools, "not_scripted");
    assert!(
        !ns.present && ns.reason.contains("no script"),
        "{}",
        ns.reason
    );
    tools.shutdown().await;
}

#[tokio::test]
async fn cli_execute_derived_from_bins_drops_shells() {
    let (_d, agent) = agent_copy("tools-derived");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let r = reason(&tools, "cli_execute");
    assert!(r.present);
    assert!(
        r.reason.contains("derived from the skills' requires.bins"),
        "{}",
        r.reason
    );
    let ctx = tools.context("s1");
    let out = tools
        .execute("cli_execute", json!({"binary": "ls", "args": ["/"]}), &ctx)
        .await
        .unwrap();
    assert!(out.data.unwrap()["stdout"]
        .as_str()
        .unwrap()
        .contains("proc"));
    let err = tools
        .execute(
            "cli_execute",
            json!({"binary": "bash", "args": ["-c", "id"]}),
            &ctx,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("shells are never allowed"),
        "{err}"
    );
    assert!(!present(&tools).contains(&"http_request".to_string()));
    tools.shutdown().await;
}

/// The child really is confined by the proxy: curl through HTTP_PROXY reaches an allowlisted
/// loopback server and is refused (403 from forge's proxy) for a port that is not allowlisted.
#[tokio::test]
async fn cli_execute_traffic_goes_through_the_egress_proxy() {
    if forge_tools::builtins::process::which_in("curl", &std::env::var("PATH").unwrap_or_default())
        .is_none()
    {
        eprintln!(
            "SKIPPED cli_execute_traffic_goes_through_the_egress_proxy: curl is not installed"
        );
        return;
    }
    // Bounded: serves at most 4 connections.
    let allowed = Site::builder()
        .max_connections(4)
        .start(|_| Response::bare(200, "hello"));
    let canary = Canary::start();
    let (allowed_port, canary_port) = (allowed.port(), canary.port());
    let (_d, agent) = agent_from(
        "agent_id: curl-agent\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [curl]\negress:\n  mode: allowlist\n  allowed_domains: []\n",
        &[],
    );
    let opts = AssembleOptions {
        cli_egress_entries: vec![format!("127.0.0.1:{allowed_port}")],
        ..Default::default()
    };
    let tools = assemble(&agent, opts).await.unwrap();
    let ctx = tools.context("s1");
    let ok = tools
        .execute("cli_execute", json!({"binary": "curl", "args": ["-s", "-i", "--max-time", "10", format!("http://127.0.0.1:{allowed_port}/")]}), &ctx)
        .await
        .unwrap();
    let stdout = ok.data.unwrap()["stdout"].as_str().unwrap().to_string();
    assert!(
        stdout.starts_with("HTTP/1.1 200") && stdout.ends_with("hello"),
        "{stdout}"
    );
    let blocked = tools
        .execute("cli_execute", json!({"binary": "curl", "args": ["-s", "-i", "--max-time", "10", format!("http://127.0.0.1:{canary_port}/")]}), &ctx)
        .await
        .unwrap();
    let stdout = blocked.data.unwrap()["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(stdout.starts_with("HTTP/1.1 403"), "{stdout}");
    assert!(
        stdout
            .to_ascii_lowercase()
            .contains("x-forge-egress-reason"),
        "{stdout}"
    );
    canary.assert_untouched("the egress proxy in front of cli_execute");
    tools.shutdown().await;
}

#[tokio::test]
async fn shells_in_forge_yaml_are_a_startup_error() {
    let (_d, agent) = agent_from(
        "agent_id: a\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [jq, bash]\n",
        &[],
    );
    let err = assemble(&agent, AssembleOptions::default())
        .await
        .err()
        .expect("bash is refused");
    let msg = err.to_string();
    assert!(matches!(err, AssembleError::CliConfig { .. }), "{msg}");
    assert!(
        msg.contains("forge.yaml") && msg.contains("`bash` is a shell"),
        "{msg}"
    );
    let (_d, agent) = agent_from(
        "agent_id: a\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [ls]\n      timout: 3\n",
        &[],
    );
    let msg = assemble(&agent, AssembleOptions::default())
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(msg.contains("unknown key config.timout"), "{msg}");
}

#[tokio::test]
async fn invalid_guardrail_regex_is_a_startup_error_with_skill_and_line() {
    // forge-skills already rejects most bad patterns while parsing; assembly compiles them again
    // (with a compiled-size limit) and must name the rule's origin when that fails. The pattern is
    // swapped after loading so this path is exercised with a real origin.
    let skill = "---\nname: broken\ndescription: d\nmetadata:\n  forge:\n    guardrails:\n      deny_output:\n        - pattern: 'fine'\n          action: redact\n---\nbody\n";
    let (_d, mut agent) = agent_from("agent_id: a\nversion: 0.1.0\n", &[("broken", skill)]);
    agent.aggregate.guardrails.deny_output[0].pattern = "(unclosed".into();
    let err = assemble(&agent, AssembleOptions::default())
        .await
        .err()
        .expect("invalid regex");
    let msg = err.to_string();
    assert!(matches!(err, AssembleError::Guardrail(_)), "{msg}");
    assert!(msg.contains("skill \"broken\""), "{msg}");
    assert!(
        msg.contains("SKILL.md:8:"),
        "the line of the pattern: {msg}"
    );
    assert!(
        msg.contains("(unclosed") && msg.contains("deny_output"),
        "{msg}"
    );
    // A pattern that compiles to something huge is refused the same way.
    agent.aggregate.guardrails.deny_output[0].pattern = "\\w{1000}{1000}".into();
    let msg = assemble(&agent, AssembleOptions::default())
        .await
        .err()
        .expect("too big")
        .to_string();
    assert!(msg.contains("SKILL.md:8:"), "{msg}");
}

#[tokio::test]
async fn forge_yaml_denied_tools_remove_tools_and_say_so() {
    let skill =
        "---\nname: notes\nmetadata:\n  forge:\n    denied_tools: [web_fetch]\n---\nTake notes.\n";
    let (_d, agent) = agent_from(
        "agent_id: deny\nversion: 0.1.0\ndenied_tools: [math_calculate, web_fetch]\n",
        &[("notes", skill)],
    );
    assert_eq!(agent.denied_tools(), ["math_calculate", "web_fetch"]);
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let names = present(&tools);
    assert!(names.contains(&"json_parse".to_string()), "{names:?}");
    assert!(!names.contains(&"math_calculate".to_string()), "{names:?}");
    assert!(!names.contains(&"web_fetch".to_string()), "{names:?}");
    let math = reason(&tools, "math_calculate");
    assert!(!math.present);
    assert!(
        math.reason
            .starts_with("denied by denied_tools of forge.yaml (was:"),
        "{}",
        math.reason
    );
    let fetch = reason(&tools, "web_fetch");
    assert!(
        fetch
            .reason
            .starts_with("denied by denied_tools of forge.yaml and skill(s) notes"),
        "{}",
        fetch.reason
    );
}

#[tokio::test]
async fn denied_tools_remove_browser_tools_too() {
    if forge_testkit::require_browser("denied_tools_remove_browser_tools_too").is_none() {
        return;
    }
    let (_d, agent) = agent_copy("tools-browser");
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let names = present(&tools);
    assert!(names.contains(&"browser_navigate".to_string()), "{names:?}");
    assert!(!names.contains(&"browser_hover".to_string()), "{names:?}");
    let hover = reason(&tools, "browser_hover");
    assert!(
        hover
            .reason
            .contains("denied by denied_tools of skill(s) shelf-reader"),
        "{}",
        hover.reason
    );
    let nav = reason(&tools, "browser_navigate");
    assert!(
        nav.reason.contains("shelf-reader")
            && nav.reason.contains("requires.capabilities: [browser]"),
        "{}",
        nav.reason
    );
    assert!(tools.proxy_addr().is_some(), "the browser gets the proxy");
    // Assembly resolves Chromium but does not launch it.
    assert_eq!(tools.browser().unwrap().manager().launch_count(), 0);
    tools.shutdown().await;
}

#[test]
fn cli_config_parsing() {
    use forge_runtime::parse_cli_config;
    let c = parse_cli_config(&json!({"allowed_binaries": ["jq", "git"], "env_passthrough": "A, B", "timeout": "2m", "max_output_bytes": 10})).unwrap();
    assert_eq!(c.allowed_binaries, ["jq", "git"]);
    assert_eq!(c.env_passthrough, ["A", "B"]);
    assert_eq!(c.timeout, std::time::Duration::from_secs(120));
    assert_eq!(c.max_output_bytes, 10);
    assert_eq!(
        parse_cli_config(&json!({"timeout": 30}))
            .unwrap()
            .timeout
            .as_secs(),
        30
    );
    for bad in [
        json!({"timeout": "soon"}),
        json!({"timeout": -1}),
        json!({"max_output_bytes": 0}),
        json!({"allowed_binaries": [1]}),
        json!([1]),
    ] {
        assert!(parse_cli_config(&bad).is_err(), "{bad}");
    }
}

/// forge-build and the "absent" reasons name the browser tools from `forge_skills::BROWSER_TOOLS`
/// without depending on forge-browser: that list must be exactly what forge-browser builds.
#[test]
fn the_shared_browser_tool_list_matches_the_browser_crate() {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;

    // The manager only records the proxy address; nothing is launched or dialed here.
    let proxy = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
    let manager = Arc::new(forge_browser::BrowserManager::new(
        forge_browser::BrowserConfig::with_proxy(proxy),
    ));
    let built: Vec<String> = forge_browser::browser_tools(
        manager,
        forge_browser::BrowserToolOptions {
            allow_sensitive_fill: false,
        },
    )
    .iter()
    .map(|t| t.name().to_string())
    .collect();
    assert_eq!(built, forge_skills::BROWSER_TOOLS);
}

/// forge-skills names the builtins and the script extensions for the tool plan without depending
/// on forge-tools: both lists must be exactly what forge-tools builds and resolves.
#[test]
fn the_plan_lists_match_the_tools_crate() {
    let built: Vec<String> = forge_tools::builtins::always()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    assert_eq!(built, forge_skills::BUILTIN_TOOLS);
    assert_eq!(forge_tools::builtins::ALWAYS, forge_skills::BUILTIN_TOOLS);
    let exts: Vec<&str> = forge_tools::builtins::script::INTERPRETERS
        .iter()
        .map(|(e, _)| *e)
        .collect();
    assert_eq!(exts, forge_skills::SCRIPT_EXTENSIONS);
}

/// The registry is exactly the plan's present tools, and every reason is the plan's (the
/// runtime only adds how: the interpreter, Chromium's path).
#[tokio::test]
async fn assembly_builds_exactly_the_tool_plan() {
    for name in ["tools-plain", "tools-cli", "tools-derived"] {
        let (_d, agent) = agent_copy(name);
        let plan = agent.tool_plan();
        let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
        let planned: Vec<String> = plan.present().map(|t| t.name.clone()).collect();
        assert_eq!(present(&tools), planned, "{name}");
        for p in &plan.tools {
            let r = reason(&tools, &p.name);
            assert_eq!(
                (r.present, r.source),
                (p.present, p.source),
                "{name}: {}",
                p.name
            );
            assert!(
                r.reason.starts_with(&p.reason),
                "{name}: {}: {} vs plan {}",
                p.name,
                r.reason,
                p.reason
            );
        }
        assert_eq!(tools.reasons().len(), plan.tools.len(), "{name}");
        tools.shutdown().await;
    }
}

/// A `## Tool:` heading is text from a SKILL.md: one that is a path never runs a script outside
/// the skill's scripts dir, even when that file exists.
#[tokio::test]
async fn a_tool_name_that_is_a_path_runs_nothing_outside_the_skill() {
    let skill = "---\nname: sneaky\ndescription: d\n---\n## Tool: ../../../outside\nEscape.\n\n## Tool: ok_tool\nFine.\n";
    let (d, agent) = agent_from("agent_id: sneaky\nversion: 0.1.0\n", &[("sneaky", skill)]);
    let scripts = d.path().join("skills/sneaky/scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(scripts.join("ok_tool.sh"), "#!/bin/sh\necho '{}'\n").unwrap();
    // `<scripts>/../../../outside.sh` is the agent dir's outside.sh.
    std::fs::write(d.path().join("outside.sh"), "#!/bin/sh\necho pwned\n").unwrap();
    // The agent was loaded before the scripts existed; load it again.
    let agent = Agent::load(agent.config.path.clone()).unwrap();
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let names = present(&tools);
    assert!(names.contains(&"ok_tool".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("outside")), "{names:?}");
    let r = reason(&tools, "../../../outside");
    assert!(!r.present);
    assert!(r.reason.contains("not a plain file name"), "{}", r.reason);
    tools.shutdown().await;
}

/// Send `CONNECT authority` to the proxy; returns the response head and, on 200, the open tunnel.
async fn connect_head(
    proxy: std::net::SocketAddr,
    authority: &str,
) -> (String, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let step = std::time::Duration::from_secs(10);
    tokio::time::timeout(step, async {
        let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
        s.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        // Bounded: a response head is far below 64 KiB.
        while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
            s.read_exact(&mut b).await.unwrap();
            head.push(b[0]);
        }
        (String::from_utf8_lossy(&head).into_owned(), s)
    })
    .await
    .expect("the proxy answered CONNECT within 10 s")
}

#[tokio::test]
async fn forge_yaml_max_tunnels_caps_the_proxy_tunnels_with_a_prompt_429() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A loopback echo server for the tunnels to reach.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let yaml = format!(
        "agent_id: t\nversion: 0.1.0\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [echo]\negress:\n  mode: allowlist\n  allowed_domains: [\"127.0.0.1:{port}\"]\n  max_tunnels: 2\n"
    );
    let (_d, agent) = agent_from(&yaml, &[]);
    assert_eq!(agent.config.egress.max_tunnels, 2);
    let tools = assemble(&agent, AssembleOptions::default()).await.unwrap();
    let proxy = tools
        .proxy_addr()
        .expect("cli_execute starts the egress proxy");
    let target = format!("127.0.0.1:{port}");
    let mut open = Vec::new();
    for _ in 0..2 {
        let (head, t) = connect_head(proxy, &target).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        open.push(t);
    }
    let (head, _) = connect_head(proxy, &target).await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("retry-after: 1"), "{head}");
    assert!(
        lower.contains("x-forge-egress-reason: too-many-tunnels"),
        "{head}"
    );
    // The tunnels within the cap still carry bytes.
    for t in &mut open {
        t.write_all(b"ping").await.unwrap();
        let mut back = [0u8; 4];
        tokio::time::timeout(std::time::Duration::from_secs(10), t.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(&back, b"ping");
    }
    tools.shutdown().await;
}
