//! cli_execute and skill scripts under network confinement, with real curl, the real proxy and
//! loopback servers: a program ignoring the proxy variables reaches nothing (the canary counts 0
//! hits), the same program through the proxy reaches an allowlisted loopback site.
#![cfg(target_os = "linux")]
// Test: prints skip notes.
#![allow(clippy::print_stderr)]

use std::sync::Arc;
use std::time::Duration;

use forge_egress::confine::{self, Confiner};
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyOptions};
use forge_testkit::require_namespace;
use forge_testkit::site::{Canary, Response, Site};
use forge_tools::builtins::cli_execute::{CliConfig, CliExecute};
use forge_tools::builtins::script::{find_script, ScriptLookup, ScriptTool};
use forge_tools::{Tool, ToolContext};
use serde_json::{json, Value};

/// A loopback site answering `body` (and counting connections).
fn counting_server(body: &'static str) -> Site {
    Site::start(move |_| Response::bare(200, body))
}

#[tokio::test]
async fn cli_execute_curl_ignoring_the_proxy_reaches_nothing() {
    let Some(kind) = require_namespace("cli_execute_curl_ignoring_the_proxy_reaches_nothing")
    else {
        return;
    };
    if which("curl").is_none() {
        eprintln!("SKIP: curl is not installed");
        return;
    }
    let canary = Canary::start();
    let site = counting_server("allowlisted site");
    let entry = format!("127.0.0.1:{}", site.port());
    let policy = Arc::new(EgressPolicy::allowlist([entry.as_str()]).unwrap());
    let (_, proxy) = EgressProxy::serve(policy, ProxyOptions::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut tool = CliExecute::new(
        CliConfig {
            allowed_binaries: vec!["curl".into()],
            ..Default::default()
        },
        Some(proxy.url()),
    )
    .unwrap();
    tool.set_confiner(Some(Confiner::new(proxy.entry(), kind)));
    assert!(tool.is_confined());
    let ctx = ToolContext::new("t", dir.path().join("files"));

    let direct = format!("http://127.0.0.1:{}/", canary.port());
    let out = tool
        .execute(
            &ctx,
            json!({"binary": "curl", "args": ["-sS", "--max-time", "5", "--noproxy", "*", direct]}),
        )
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_ne!(data["exit_code"], json!(0), "{data}");
    // Even forge's own proxy port on the host's loopback is out of reach.
    let host_proxy = proxy.url();
    let out = tool
        .execute(
            &ctx,
            json!({"binary": "curl", "args": ["-sS", "--max-time", "5", "--proxy", host_proxy, format!("http://{entry}/")]}),
        )
        .await
        .unwrap();
    assert_ne!(out.data.unwrap()["exit_code"], json!(0));
    assert_eq!(site.hits(), 0);

    let out = tool
        .execute(
            &ctx,
            json!({"binary": "curl", "args": ["-sS", "--max-time", "10", format!("http://{entry}/page")]}),
        )
        .await
        .unwrap();
    let data = out.data.unwrap();
    assert_eq!(data["exit_code"], json!(0), "{data}");
    assert_eq!(data["stdout"], json!("allowlisted site"));
    assert_eq!(site.hits(), 1);
    canary.assert_untouched("the confined cli_execute child ignoring the proxy");
    proxy.shutdown().await;
}

#[tokio::test]
async fn skill_script_runs_confined_with_the_namespace_proxy() {
    let Some(kind) = require_namespace("skill_script_runs_confined_with_the_namespace_proxy")
    else {
        return;
    };
    let site = counting_server("x");
    let policy =
        Arc::new(EgressPolicy::allowlist([format!("127.0.0.1:{}", site.port()).as_str()]).unwrap());
    let (_, proxy) = EgressProxy::serve(policy, ProxyOptions::default())
        .await
        .unwrap();
    let skill = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(skill.path().join("scripts")).unwrap();
    let script = skill.path().join("scripts/netns.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf '{\"proxy\":\"%s\",\"netns\":\"%s\"}' \"$HTTP_PROXY\" \"$(readlink /proc/self/ns/net)\"\n",
    )
    .unwrap();
    let path_var = std::env::var("PATH").unwrap_or_default();
    let ScriptLookup::Found {
        script,
        interpreter,
    } = find_script(skill.path(), "netns", &path_var)
    else {
        panic!("script not found")
    };
    let tool = ScriptTool {
        name: "netns".into(),
        skill: "demo".into(),
        description: "d".into(),
        script,
        interpreter,
        env_passthrough: vec![],
        proxy_url: Some(proxy.url()),
        confine: Some(Confiner::new(proxy.entry(), kind)),
        timeout: Duration::from_secs(20),
    };
    let out = tool
        .execute(&ToolContext::new("t", skill.path().join("f")), json!({}))
        .await
        .unwrap();
    let data: Value = out.data.expect("script printed JSON");
    assert_eq!(data["proxy"], json!(confine::CHILD_PROXY_URL));
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    assert_ne!(data["netns"], json!(ours.to_string_lossy()), "{data}");
    assert!(
        data["netns"].as_str().unwrap().starts_with("net:["),
        "{data}"
    );
    proxy.shutdown().await;
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    forge_tools::builtins::process::which_in(name, &std::env::var("PATH").unwrap_or_default())
}
