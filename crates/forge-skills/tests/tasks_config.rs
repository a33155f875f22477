//! forge.yaml `tasks:`: defaults, the documented block, and each error pointing at its value
//! (rendered diagnostics, checked for the line and the fix).

use std::path::Path;

use forge_skills::{Error, ForgeConfig, TasksConfig};
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
fn defaults_are_60_steps_300_seconds_capped_at_150_and_1800() {
    let cfg = parse("").expect("minimal");
    assert_eq!(
        cfg.tasks,
        TasksConfig {
            max_steps: 60,
            max_seconds: 300,
            max_steps_cap: 150,
            max_seconds_cap: 1800
        }
    );
}

#[test]
fn the_documented_block_parses() {
    let cfg = parse(
        "tasks:\n  max_steps: 10\n  max_seconds: 60\n  max_steps_cap: 20\n  max_seconds_cap: 600\n",
    )
    .expect("valid");
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert_eq!(
        cfg.tasks,
        TasksConfig {
            max_steps: 10,
            max_seconds: 60,
            max_steps_cap: 20,
            max_seconds_cap: 600
        }
    );
}

#[test]
fn zero_and_above_cap_are_errors_at_their_line_with_the_fix() {
    let out = rendered_error("tasks:\n  max_steps: 0\n");
    assert!(
        out.contains("tasks.max_steps must be at least 1") && out.contains("forge.yaml:4:"),
        "{out}"
    );
    assert!(out.contains("remove it for the default (60)"), "{out}");
    let out = rendered_error("tasks:\n  max_seconds_cap: 100\n  max_seconds: 200\n");
    assert!(
        out.contains("tasks.max_seconds (200) is above tasks.max_seconds_cap (100)"),
        "{out}"
    );
    assert!(
        out.contains("forge.yaml:5:"),
        "points at max_seconds: {out}"
    );
    assert!(
        out.contains("lower tasks.max_seconds to 100 or less"),
        "{out}"
    );
    let out = rendered_error("tasks:\n  max_steps: many\n");
    assert!(out.contains("max_steps"), "{out}");
    assert!(out.contains("forge.yaml:4:"), "{out}");
}

#[test]
fn unknown_keys_under_tasks_are_warnings() {
    let cfg = parse("tasks:\n  max_step: 3\n").expect("a warning, not an error");
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
}
