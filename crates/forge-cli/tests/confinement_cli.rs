//! Confinement as a user sees it: `forge tool list` says `confinement: namespace` or
//! `confinement: proxy-only (<reason>)`; the fallback is forced with
//! FORGE_CONFINEMENT_UNAVAILABLE, and forge.yaml `security.confinement: required` turns it into a
//! startup error naming the reason and the fix. A confined `forge tool call cli_execute` runs in a
//! network namespace of its own.

// Test: prints skip notes and diagnostics (the workspace denies printing in library code).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use assert_cmd::Command;
use serde_json::Value;

use fixture_agents::fixture_copy as agent_copy;
use forge_testkit::agents as fixture_agents;

fn forge() -> Command {
    forge_testkit::forge_assert!()
}

fn namespaces_available() -> bool {
    matches!(
        forge_egress::confine::availability(),
        forge_egress::confine::Availability::Namespace(_)
    )
}

#[test]
fn forced_fallback_is_shown_in_tool_list() {
    let dir = agent_copy("tools-cli");
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_CONFINEMENT_UNAVAILABLE", "testing the fallback")
        .args(["tool", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "confinement: proxy-only (FORGE_CONFINEMENT_UNAVAILABLE is set: testing the fallback)"
        ),
        "{text}"
    );
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_CONFINEMENT_UNAVAILABLE", "testing the fallback")
        .args(["tool", "list", "--format", "json"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["confinement"]
            .as_str()
            .unwrap()
            .starts_with("proxy-only ("),
        "{v}"
    );
}

#[test]
fn tool_list_says_namespace_when_available() {
    if forge_testkit::require_namespace("tool_list_says_namespace_when_available").is_none() {
        return;
    }
    let dir = agent_copy("tools-cli");
    let out = forge()
        .current_dir(dir.path())
        .args(["tool", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("confinement: namespace ("), "{text}");
}

#[test]
fn required_without_namespaces_is_a_startup_error_with_reason_and_fix() {
    let dir = agent_copy("tools-cli");
    let yaml = dir.path().join("forge.yaml");
    let mut text = std::fs::read_to_string(&yaml).unwrap();
    text.push_str("security:\n  confinement: required\n");
    std::fs::write(&yaml, text).unwrap();
    let out = forge()
        .current_dir(dir.path())
        .env("FORGE_CONFINEMENT_UNAVAILABLE", "testing required")
        .args(["tool", "list"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "must refuse to start");
    assert!(err.contains("forge.yaml"), "{err}");
    assert!(err.contains("security.confinement is `required`"), "{err}");
    assert!(err.contains("testing required"), "{err}");
    assert!(err.contains("fix:"), "{err}");
    assert!(err.contains("security.confinement: auto"), "{err}");

    // The same agent starts when the platform can confine.
    if namespaces_available() {
        let out = forge()
            .current_dir(dir.path())
            .args(["tool", "list"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("confinement: namespace ("));
    }
}

#[test]
fn confined_cli_execute_gets_the_namespace_proxy() {
    if forge_testkit::require_namespace("confined_cli_execute_gets_the_namespace_proxy").is_none() {
        return;
    }
    let dir = agent_copy("tools-cli");
    let call = |forced: bool| {
        let mut c = forge();
        if forced {
            c.env("FORGE_CONFINEMENT_UNAVAILABLE", "testing");
        }
        let out = c
            .current_dir(dir.path())
            .args([
                "tool",
                "call",
                "cli_execute",
                "--args",
                r#"{"binary": "printenv", "args": ["HTTP_PROXY"]}"#,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let confined = call(false);
    assert!(confined.contains("http://127.0.0.1:3128"), "{confined}");
    let proxy_only = call(true);
    assert!(
        !proxy_only.contains("http://127.0.0.1:3128"),
        "{proxy_only}"
    );
    assert!(proxy_only.contains("http://127.0.0.1:"), "{proxy_only}");
}

/// `forge run --once` with the scripted provider, `extra_env` set.
fn run_once(dir: &std::path::Path, extra_env: &[(&str, &str)]) -> std::process::Output {
    let mut c = forge();
    for (k, v) in extra_env {
        c.env(k, v);
    }
    c.current_dir(dir)
        .args(["run", "--config", "forge.yaml", "--once", "hello"])
        .output()
        .unwrap()
}

#[test]
fn forge_run_says_proxy_only_once_at_startup() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("forge.yaml"),
        "agent_id: run-agent\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\ntools:\n  - name: cli_execute\n    config:\n      allowed_binaries: [echo]\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("s.yaml"), "turns:\n  - text: \"done\"\n").unwrap();
    let out = run_once(
        dir.path(),
        &[("FORGE_CONFINEMENT_UNAVAILABLE", "testing forge run")],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let line =
        "forge: confinement: proxy-only (FORGE_CONFINEMENT_UNAVAILABLE is set: testing forge run)";
    assert_eq!(err.matches(line).count(), 1, "{err}");
    if namespaces_available() {
        let out = run_once(dir.path(), &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert!(!err.contains("proxy-only"), "{err}");
    }
}
