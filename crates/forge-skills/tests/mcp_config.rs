//! forge.yaml `mcp.servers`: the parsed block, and rendered diagnostics (insta snapshots) for each
//! load-time error, each pointing at the offending entry.

use std::path::Path;
use std::time::Duration;

use forge_skills::{Error, ForgeConfig, McpAuthKind, McpTransport};
use miette::{GraphicalReportHandler, GraphicalTheme};

fn render(diag: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::none())
        .with_width(100)
        .render_report(&mut out, diag)
        .unwrap();
    out
}

fn parse(mcp: &str) -> Result<ForgeConfig, Error> {
    let text = format!("agent_id: a\nversion: 0.1.0\n{mcp}");
    ForgeConfig::parse(&text, Path::new("agent/forge.yaml"))
}

fn error(mcp: &str) -> Error {
    parse(mcp).expect_err("must be invalid")
}

const ISSUE_EXAMPLE: &str = r#"mcp:
  servers:
    - name: linear                # slug; tools become linear__<tool>
      transport: http
      url: https://mcp.example.com/mcp
      auth: { type: bearer, token_env: LINEAR_TOKEN }
      tools: { allow: [create_issue, list_issues], deny: [] }
      timeout: 60s
      required: false
    - name: files
      transport: stdio
      command: python3
      args: [server.py]
      env: [SOME_VAR]
      tools: { allow: ["*"], deny: [delete_file] }
      timeout: 1m30s
"#;

#[test]
fn the_documented_block_parses() {
    let cfg = parse(ISSUE_EXAMPLE).unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let [linear, files] = &cfg.mcp.servers[..] else {
        panic!("two servers expected: {:?}", cfg.mcp.servers)
    };
    assert_eq!(linear.name, "linear");
    assert_eq!(linear.transport, McpTransport::Http);
    assert_eq!(linear.url.as_deref(), Some("https://mcp.example.com/mcp"));
    let auth = linear.auth.as_ref().unwrap();
    assert_eq!(
        (auth.kind, auth.token_env.as_str()),
        (McpAuthKind::Bearer, "LINEAR_TOKEN")
    );
    assert_eq!(linear.tools.allow, ["create_issue", "list_issues"]);
    assert_eq!(linear.timeout, Duration::from_secs(60));
    assert!(!linear.required);
    assert_eq!(linear.tool_name("list_issues"), "linear__list_issues");
    assert_eq!(files.transport, McpTransport::Stdio);
    assert_eq!(files.command.as_deref(), Some("python3"));
    assert_eq!(files.args, ["server.py"]);
    assert_eq!(files.env, ["SOME_VAR"]);
    assert_eq!(files.timeout, Duration::from_secs(90));
    assert!(files.tools.allows("read_file") && !files.tools.allows("delete_file"));
    assert!(files.auth.is_none());
}

#[test]
fn defaults_and_no_block() {
    let cfg = parse("").unwrap();
    assert!(cfg.mcp.servers.is_empty());
    let cfg = parse("mcp:\n  servers:\n    - name: s\n      transport: stdio\n      command: srv\n      tools: { allow: [a] }\n").unwrap();
    let s = &cfg.mcp.servers[0];
    assert_eq!(s.timeout, Duration::from_secs(60));
    assert!(!s.required && s.auth.is_none() && s.tools.deny.is_empty());
}

#[test]
fn bad_slug_points_at_the_name() {
    let err = error("mcp:\n  servers:\n    - name: My_Server\n      transport: stdio\n      command: x\n      tools: { allow: [a] }\n");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::config::mcp-name");
    assert_eq!((p.line, p.column), (5, 13));
    insta::assert_snapshot!(render(&err));
}

#[test]
fn missing_allow_is_an_error() {
    let err = error("mcp:\n  servers:\n    - name: linear\n      transport: http\n      url: https://mcp.example.com/mcp\n      tools: { deny: [x] }\n");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::config::mcp-allow");
    assert_eq!(p.line, 8);
    insta::assert_snapshot!(render(&err));
    // No `tools` at all: the same error, pointing at the server.
    let err = error("mcp:\n  servers:\n    - name: linear\n      transport: http\n      url: https://mcp.example.com/mcp\n");
    assert_eq!(err.problems()[0].code, "forge::config::mcp-allow");
}

#[test]
fn missing_url_and_command() {
    let err = error("mcp:\n  servers:\n    - name: web\n      transport: http\n      tools: { allow: [a] }\n    - name: local\n      transport: stdio\n      tools: { allow: [a] }\n");
    let codes: Vec<_> = err.problems().iter().map(|p| p.code).collect();
    assert_eq!(
        codes,
        ["forge::config::mcp-url", "forge::config::mcp-command"]
    );
    insta::assert_snapshot!(render(&err));
}

#[test]
fn unknown_transport_suggests() {
    let err = error("mcp:\n  servers:\n    - name: web\n      transport: htpp\n      url: https://x.example/mcp\n      tools: { allow: [a] }\n");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::config::mcp-transport");
    assert!(p.help.as_deref().unwrap().contains("did you mean `http`"));
    insta::assert_snapshot!(render(&err));
}

#[test]
fn duplicate_names() {
    let err = error("mcp:\n  servers:\n    - name: dup\n      transport: stdio\n      command: a\n      tools: { allow: [a] }\n    - name: dup\n      transport: stdio\n      command: b\n      tools: { allow: [a] }\n");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::config::mcp-duplicate");
    assert_eq!(p.line, 9);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn bad_timeouts() {
    let err = error("mcp:\n  servers:\n    - name: s\n      transport: stdio\n      command: a\n      tools: { allow: [a] }\n      timeout: 500ms\n");
    assert_eq!(err.problems()[0].code, "forge::config::mcp-timeout");
    insta::assert_snapshot!(render(&err));
    let err = error("mcp:\n  servers:\n    - name: s\n      transport: stdio\n      command: a\n      tools: { allow: [a] }\n      timeout: 60\n");
    assert!(
        err.problems()[0].message.contains("no unit"),
        "{}",
        err.problems()[0].message
    );
}

#[test]
fn unknown_keys_in_a_server_are_warnings() {
    let cfg = parse("mcp:\n  servers:\n    - name: s\n      transport: stdio\n      command: a\n      tools: { allow: [a] }\n      comand: b\n").unwrap();
    assert_eq!(cfg.warnings.len(), 1);
    assert!(cfg.warnings[0].message.contains("`comand`"));
    assert!(cfg.warnings[0]
        .help
        .as_deref()
        .unwrap()
        .contains("did you mean `command`"));
}

const REQUIRED_WITH_TOKEN: &str = "mcp:\n  servers:\n    - name: linear\n      transport: http\n      url: https://mcp.example.com/mcp\n      auth: { type: bearer, token_env: LINEAR_TOKEN }\n      tools: { allow: [\"*\"] }\n      required: true\n";

#[test]
fn token_env_unset_for_a_required_server() {
    let cfg = parse(REQUIRED_WITH_TOKEN).unwrap();
    let unset = |_: &str| None;
    let err = cfg.check_mcp_env(&unset).expect_err("token unset");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::config::mcp-token-env");
    assert_eq!((p.line, p.column), (8, 40));
    insta::assert_snapshot!(render(&err));
    // An empty value counts as unset.
    let empty = |_: &str| Some(String::new());
    assert!(cfg.check_mcp_env(&empty).is_err());
    // Set: fine. Only the named variable is looked up.
    let set = |k: &str| (k == "LINEAR_TOKEN").then(|| "t".to_string());
    cfg.check_mcp_env(&set).unwrap();
    // Not required: not checked here.
    let cfg = parse(&REQUIRED_WITH_TOKEN.replace("required: true", "required: false")).unwrap();
    cfg.check_mcp_env(&unset).unwrap();
}

#[test]
fn several_server_problems_are_all_reported() {
    let err = error("mcp:\n  servers:\n    - name: 9bad\n      transport: carrier-pigeon\n    - name: ok\n      transport: stdio\n      command: x\n      tools: { allow: [a] }\n      required: maybe\n");
    let codes: Vec<_> = err.problems().iter().map(|p| p.code).collect();
    assert_eq!(
        codes,
        [
            "forge::config::mcp-name",
            "forge::config::mcp-transport",
            "forge::config::mcp-allow",
            "forge::config::mcp-type"
        ]
    );
}
