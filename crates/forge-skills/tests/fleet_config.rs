//! forge.yaml `state:` and `deploy:`: defaults, the documented block, and each error pointing at
//! its value (rendered diagnostics, checked for the line and the fix).

use std::path::Path;

use forge_skills::{Error, ForgeConfig, Replicas};
use miette::{GraphicalReportHandler, GraphicalTheme};

fn render(diag: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::none())
        .with_width(120)
        .render_report(&mut out, diag)
        .expect("rendering into a String cannot fail");
    out
}

fn parse(extra: &str) -> Result<ForgeConfig, Error> {
    let text = format!("agent_id: a\nversion: 0.1.0\n{extra}");
    ForgeConfig::parse(&text, Path::new("agent/forge.yaml"))
}

fn rendered_error(extra: &str) -> String {
    match parse(extra) {
        Err(Error::Invalid { problems, .. }) => problems
            .iter()
            .map(|p| render(p))
            .collect::<Vec<_>>()
            .join("\n"),
        Err(other) => panic!("expected diagnostics, got {other}"),
        Ok(_) => panic!("expected an error for:\n{extra}"),
    }
}

#[test]
fn defaults_are_sqlite_and_one_replica() {
    let cfg = parse("").expect("minimal");
    assert_eq!(cfg.state.url, None);
    assert!(!cfg.state.is_postgres());
    assert_eq!(
        (
            cfg.state.keep_tasks,
            cfg.state.keep_days,
            cfg.state.max_artifact_bytes
        ),
        (1000, 7, 10 * 1024 * 1024)
    );
    assert_eq!(cfg.deploy.replicas, Replicas { min: 1, max: 1 });
}

#[test]
fn the_documented_block_parses() {
    let cfg = parse(
        "state:\n  url: postgres://forge@db:5432/forge\n  keep_tasks: 50\n  keep_days: 2\n  max_artifact_bytes: 2048\ndeploy:\n  replicas: {min: 2, max: 6}\n",
    )
    .expect("valid");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(cfg.state.is_postgres());
    assert_eq!((cfg.state.keep_tasks, cfg.state.keep_days), (50, 2));
    assert_eq!(cfg.state.max_artifact_bytes, 2048);
    assert_eq!(cfg.deploy.replicas, Replicas { min: 2, max: 6 });
}

#[test]
fn max_below_min_points_at_max() {
    let out = rendered_error("deploy:\n  replicas:\n    min: 3\n    max: 2\n");
    assert!(
        out.contains("deploy.replicas.max (2) is below deploy.replicas.min (3)"),
        "{out}"
    );
    assert!(
        out.contains("agent/forge.yaml:6:"),
        "points at the max line: {out}"
    );
    assert!(out.contains("set max to 3 or more"), "{out}");
}

#[test]
fn zero_values_and_unknown_stores_are_errors_at_their_line() {
    let out = rendered_error("state:\n  keep_tasks: 0\n");
    assert!(
        out.contains("state.keep_tasks must be at least 1") && out.contains("forge.yaml:4:"),
        "{out}"
    );
    let out = rendered_error("deploy:\n  replicas: {min: 0}\n");
    assert!(
        out.contains("deploy.replicas.min must be at least 1"),
        "{out}"
    );
    let out = rendered_error("deploy:\n  replicas: {max: 500}\n");
    assert!(out.contains("above forge's limit of 100"), "{out}");
    let out = rendered_error("state:\n  url: mysql://db/forge\n");
    assert!(
        out.contains("state.url must be a postgres:// URL or sqlite:PATH"),
        "{out}"
    );
    assert!(out.contains("forge.yaml:4:"), "{out}");
    let out = rendered_error("state:\n  keep_days: soon\n");
    assert!(
        out.contains("keep_days"),
        "a type error names the field: {out}"
    );
}

#[test]
fn a_password_in_state_url_is_a_warning_with_the_fix() {
    let cfg = parse("state:\n  url: postgres://forge:hunter2@db/forge\n").expect("still loads");
    let w: Vec<String> = cfg.warnings.iter().map(|w| render(w)).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("FORGE_STATE_URL"), "{}", w[0]);
}

#[test]
fn unknown_keys_in_state_and_deploy_are_named() {
    let cfg = parse("state:\n  keep_task: 5\ndeploy:\n  replica: 2\n").expect("warnings only");
    let w: Vec<String> = cfg.warnings.iter().map(|w| render(w)).collect();
    assert!(
        w.iter()
            .any(|x| x.contains("unknown key `keep_task`") && x.contains("keep_tasks")),
        "{w:?}"
    );
    assert!(
        w.iter()
            .any(|x| x.contains("unknown key `replica`") && x.contains("replicas")),
        "{w:?}"
    );
}
