//! forge.yaml `security.confinement`: the default, the three values, and a bad value pointing at
//! its line with the fix.

use std::path::Path;

use forge_skills::{Confinement, Error, ForgeConfig};
use miette::{GraphicalReportHandler, GraphicalTheme};

fn parse(extra: &str) -> Result<ForgeConfig, Error> {
    let text = format!("agent_id: a\nversion: 0.1.0\n{extra}");
    ForgeConfig::parse(&text, Path::new("agent/forge.yaml"))
}

#[test]
fn default_is_auto_and_each_value_parses() {
    assert_eq!(parse("").unwrap().security.confinement, Confinement::Auto);
    for (v, want) in [
        ("auto", Confinement::Auto),
        ("required", Confinement::Required),
        ("off", Confinement::Off),
    ] {
        let cfg = parse(&format!("security:\n  confinement: {v}\n")).unwrap();
        assert_eq!(cfg.security.confinement, want);
        assert_eq!(want.as_str(), v);
        assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    }
}

#[test]
fn bad_value_points_at_the_line_with_the_fix() {
    for bad in ["requird", "[auto]", "yes"] {
        let problems = match parse(&format!("security:\n  confinement: {bad}\n")) {
            Err(Error::Invalid { problems, .. }) => problems,
            other => panic!("expected diagnostics for {bad}, got {other:?}"),
        };
        let mut out = String::new();
        GraphicalReportHandler::new_themed(GraphicalTheme::none())
            .with_width(120)
            .render_report(&mut out, &problems[0])
            .expect("rendering into a String cannot fail");
        assert!(out.contains("agent/forge.yaml:4:"), "{out}");
        assert!(out.contains("security.confinement"), "{out}");
        assert!(out.contains("use auto"), "{out}");
        if bad == "requird" {
            assert!(out.contains("did you mean `required`"), "{out}");
        }
    }
}
