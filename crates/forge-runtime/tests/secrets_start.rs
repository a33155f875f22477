//! forge.yaml `secrets:` at start and on the call path: a missing source stops assembly naming
//! the secret and the fix; a resolved value is replaced by `(secret NAME)` in what a tool returns
//! (here `http_request` reading a loopback page that echoes the value) and in the audit log.

use std::sync::Arc;

use forge_runtime::{assemble, AssembleError, AssembleOptions, AuditLog};
use forge_skills::Agent;
use forge_testkit::site::{Response, Site};
use serde_json::json;

const VALUE: &str = "pw-3e9d71ab";

fn agent(yaml: &str) -> (tempfile::TempDir, Agent) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("forge.yaml"), yaml).expect("write forge.yaml");
    let agent = Agent::load(dir.path().join("forge.yaml")).expect("agent loads");
    (dir, agent)
}

fn env_with(pairs: &'static [(&'static str, &'static str)]) -> AssembleOptions {
    AssembleOptions {
        env: Some(Arc::new(move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_missing_secret_source_stops_start_naming_the_secret_and_the_fix() {
    let (_d, a) = agent(
        "agent_id: s\nversion: 0.1.0\nsecrets:\n  portal_password: {from: \"env:PORTAL_PASSWORD\", origins: [\"https://portal.example\"]}\n  crm_token: {from: \"file:/nonexistent/forge-test/token\", hosts: [api.crm.example]}\n",
    );
    let err = assemble(&a, env_with(&[])).await.err().expect("refused");
    assert!(matches!(err, AssembleError::Secret { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("portal_password")
            && msg.contains("PORTAL_PASSWORD")
            && msg.contains("fix: export"),
        "{msg}"
    );
    let err = assemble(&a, env_with(&[("PORTAL_PASSWORD", VALUE)]))
        .await
        .err()
        .expect("refused");
    let msg = err.to_string();
    assert!(
        msg.contains("crm_token") && msg.contains("/nonexistent/forge-test/token"),
        "{msg}"
    );
    assert!(!msg.contains(VALUE), "{msg}");
}

#[tokio::test]
async fn a_page_echoing_a_secret_shows_its_name_in_the_result_and_the_audit_log() {
    let site = Site::start(|_| Response::text(format!("wrong password: {VALUE}")));
    let port = site.port();
    let yaml = format!(
        "agent_id: s\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [\"127.0.0.1:{port}\"]\nsecrets:\n  portal_password: {{from: \"env:PORTAL_PASSWORD\", origins: [\"http://127.0.0.1:{port}\"]}}\n"
    );
    let (d, a) = agent(&yaml);
    let tools = assemble(&a, env_with(&[("PORTAL_PASSWORD", VALUE)]))
        .await
        .expect("assembles");
    let audit_path = d.path().join("audit.log");
    let audit = AuditLog::open_file(&audit_path).expect("audit log");
    for s in tools.secrets().iter() {
        audit.add_named_secret(&s.name, s.value.expose());
    }
    let ctx = tools.context("t1");
    let out = tools
        .execute(
            "http_request",
            json!({"url": format!("http://127.0.0.1:{port}/login")}),
            &ctx,
        )
        .await
        .expect("fetched");
    assert!(!out.text.contains(VALUE), "{}", out.text);
    assert!(
        out.text.contains("(secret portal_password)"),
        "{}",
        out.text
    );
    audit.emit(
        Some("t1"),
        "probe",
        json!({"text": format!("echo {VALUE}")}),
    );
    let log = std::fs::read(&audit_path).expect("read audit");
    assert!(
        !log.windows(VALUE.len()).any(|w| w == VALUE.as_bytes()),
        "audit log holds the value"
    );
    assert!(String::from_utf8_lossy(&log).contains("(secret portal_password)"));
    tools.shutdown().await;
}
