//! Rendered diagnostics for bad SKILL.md and forge.yaml files (insta snapshots).
//!
//! Rendering uses miette's graphical handler without colors or unicode at a fixed width so the
//! snapshots are stable across terminals.

use std::path::{Path, PathBuf};

use forge_skills::{parse_skill, Error, ForgeConfig, SkillSource};
use miette::{GraphicalReportHandler, GraphicalTheme};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn render(diag: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::none())
        .with_width(100)
        .render_report(&mut out, diag)
        .unwrap();
    out
}

/// Parse a fixture skill under a repo-relative name (stable in snapshots).
fn skill_error(rel: &str) -> Error {
    let content = std::fs::read_to_string(repo().join(rel)).unwrap();
    parse_skill(&content, Path::new(rel), "x", SkillSource::Local)
        .expect_err("fixture must be invalid")
}

#[test]
fn unknown_capability_points_at_the_entry() {
    let err = skill_error("fixtures/skills/bad/unknown-capability/SKILL.md");
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::skill::unknown-capability");
    assert_eq!((p.line, p.column), (8, 22));
    assert!(p.message.contains("\"browsr\"") && p.message.contains("known: browser"));
    insta::assert_snapshot!(render(&err));
}

#[test]
fn bad_tag_points_at_the_tag() {
    let err = skill_error("fixtures/skills/bad/bad-tag/SKILL.md");
    let p = &err.problems()[0];
    assert_eq!((p.line, p.column), (7, 5));
    insta::assert_snapshot!(render(&err));
}

#[test]
fn bad_category() {
    let err = skill_error("fixtures/skills/bad/bad-category/SKILL.md");
    assert_eq!(err.problems()[0].line, 4);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn yaml_syntax_error() {
    let err = skill_error("fixtures/skills/bad/bad-yaml/SKILL.md");
    assert_eq!(err.problems()[0].code, "forge::yaml::syntax");
    insta::assert_snapshot!(render(&err));
}

#[test]
fn wrong_type_points_at_the_value() {
    let err = skill_error("fixtures/skills/bad/bad-type/SKILL.md");
    let p = &err.problems()[0];
    assert_eq!(p.line, 8, "{p:?}");
    assert!(p.message.contains("timeout_hint"), "{}", p.message);
    insta::assert_snapshot!(render(&err));
}

#[test]
fn unknown_forge_key_is_a_warning() {
    let rel = "fixtures/skills/bad/unknown-forge-key/SKILL.md";
    let content = std::fs::read_to_string(repo().join(rel)).unwrap();
    let skill = parse_skill(&content, Path::new(rel), "x", SkillSource::Local).unwrap();
    assert_eq!(skill.warnings.len(), 1);
    assert_eq!(skill.warnings[0].line, 6);
    insta::assert_snapshot!(render(&skill.warnings[0]));
}

#[test]
fn several_problems_are_all_reported() {
    let text = "---\nname: x\ntags: [Good, bad_one]\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser, camera]\n---\n";
    let err = parse_skill(
        text,
        Path::new("skills/x/SKILL.md"),
        "x",
        SkillSource::Local,
    )
    .unwrap_err();
    let lines: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.code, p.line, p.column))
        .collect();
    assert_eq!(
        lines,
        [
            ("forge::skill::invalid-tag", 3, 14),
            ("forge::skill::unknown-capability", 7, 31)
        ]
    );
    insta::assert_snapshot!(render(&err));
}

fn config_error(text: &str) -> Error {
    ForgeConfig::parse(text, Path::new("agent/forge.yaml")).expect_err("must be invalid")
}

#[test]
fn config_missing_version() {
    let err = config_error("agent_id: a\nmodel:\n  provider: openai\n");
    insta::assert_snapshot!(render(&err));
}

#[test]
fn config_bad_egress_mode() {
    let err = config_error("agent_id: a\nversion: 0.1.0\negress:\n  mode: allow-list\n");
    let p = &err.problems()[0];
    assert_eq!((p.line, p.column), (4, 9));
    insta::assert_snapshot!(render(&err));
}

#[test]
fn config_wrong_type() {
    let err = config_error("agent_id: a\nversion: 0.1.0\negress:\n  allow_private_ips: maybe\n");
    let p = &err.problems()[0];
    assert_eq!(p.line, 4, "{p:?}");
    insta::assert_snapshot!(render(&err));
}

#[test]
fn config_max_tunnels_out_of_range_points_at_the_value() {
    for (value, col) in [("0", 16), ("16385", 16), ("100000", 16)] {
        let err = config_error(&format!(
            "agent_id: a\nversion: 0.1.0\negress:\n  max_tunnels: {value}\n"
        ));
        let p = &err.problems()[0];
        assert_eq!(p.code, "forge::config::egress-max-tunnels", "{value}");
        assert_eq!((p.line, p.column), (4, col), "{value}");
        assert!(p.message.contains(value), "{}", p.message);
        if value == "0" {
            insta::assert_snapshot!(render(&err));
        }
    }
}

#[test]
fn config_max_tunnels_not_a_number_points_at_the_value() {
    for value in ["many", "-1", "1.5", "[1]"] {
        let err = config_error(&format!(
            "agent_id: a\nversion: 0.1.0\negress:\n  max_tunnels: {value}\n"
        ));
        let p = &err.problems()[0];
        assert_eq!(p.line, 4, "{value}: {p:?}");
        assert!(p.message.contains("max_tunnels"), "{value}: {}", p.message);
    }
}

#[test]
fn config_max_tunnels_default_and_bounds() {
    let parse = |extra: &str| {
        ForgeConfig::parse(
            &format!("agent_id: a\nversion: 0.1.0\n{extra}"),
            Path::new("agent/forge.yaml"),
        )
        .unwrap()
    };
    assert_eq!(parse("").egress.max_tunnels, 256);
    assert_eq!(
        parse("egress:\n  mode: allowlist\n").egress.max_tunnels,
        256
    );
    assert_eq!(parse("egress:\n  max_tunnels: 1\n").egress.max_tunnels, 1);
    let top = parse("egress:\n  max_tunnels: 16384\n");
    assert_eq!(top.egress.max_tunnels, 16384);
    assert!(top.warnings.is_empty(), "{:?}", top.warnings);
}

#[test]
fn config_unknown_keys_are_warnings_naming_them() {
    let cfg = ForgeConfig::parse(
        "agent_id: a\nversion: 0.1.0\nentrypoint: main.py\negress:\n  mode: allowlist\n  allowed_domain: [x.com]\n",
        Path::new("agent/forge.yaml"),
    )
    .unwrap();
    let keys: Vec<_> = cfg
        .warnings
        .iter()
        .map(|w| (w.message.clone(), w.line))
        .collect();
    assert_eq!(
        keys,
        [
            (
                "unknown key `entrypoint` in forge.yaml; it is ignored".to_string(),
                3
            ),
            (
                "unknown key `allowed_domain` in forge.yaml `egress`; it is ignored".to_string(),
                6
            ),
        ]
    );
    insta::assert_snapshot!(render(&cfg.warnings[1]));
}

#[test]
fn bin_mapping_without_name_says_what_to_write() {
    let text = "---\nname: x\nmetadata:\n  forge:\n    requires:\n      bins:\n        - version: '1.7'\n---\n";
    let err = parse_skill(
        text,
        Path::new("skills/x/SKILL.md"),
        "x",
        SkillSource::Local,
    )
    .unwrap_err();
    let p = &err.problems()[0];
    assert!(
        p.message
            .contains("expected a binary name (`- jq`) or a mapping with `name`"),
        "{}",
        p.message
    );
    assert_eq!(p.line, 7, "{p:?}");
}

#[test]
fn invalid_regex_and_url_in_egress_point_at_the_entry() {
    let text = "---\nname: x\nmetadata:\n  forge:\n    egress_domains:\n      - https://api.example.com/v1\n      - ok.example.com, ${GOOD_VAR}, host:99999\n    guardrails:\n      deny_output:\n        - pattern: '(unclosed'\n          action: block\n---\n";
    let err = parse_skill(
        text,
        Path::new("skills/x/SKILL.md"),
        "x",
        SkillSource::Local,
    )
    .unwrap_err();
    let got: Vec<_> = err
        .problems()
        .iter()
        .map(|p| (p.code, p.line, p.column))
        .collect();
    assert_eq!(
        got,
        [
            ("forge::skill::invalid-egress-domain", 6, 9),
            ("forge::skill::invalid-egress-domain", 7, 38),
            ("forge::skill::invalid-pattern", 10, 20),
        ]
    );
    insta::assert_snapshot!(render(&err));
}

#[test]
fn unclosed_front_matter_is_an_error_not_a_silent_body() {
    let text = "---\nname: x\nmetadata:\n  forge:\n    requires:\n      capabilities: [browser]\n\n# Body\n";
    let err = parse_skill(
        text,
        Path::new("skills/x/SKILL.md"),
        "x",
        SkillSource::Local,
    )
    .unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(
        (p.code, p.line, p.column),
        ("forge::skill::unclosed-front-matter", 1, 1)
    );
    insta::assert_snapshot!(render(&err));
}

#[test]
fn bom_and_crlf_files_parse() {
    let text = "\u{feff}---\r\nname: crlf\r\ntags: [a, b]\r\nmetadata:\r\n  forge:\r\n    requires:\r\n      capabilities: [browser]\r\n---\r\n## Tool: t\r\n**Input:** x\r\n";
    let s = parse_skill(
        text,
        Path::new("skills/x/SKILL.md"),
        "x",
        SkillSource::Local,
    )
    .unwrap();
    assert_eq!(s.name, "crlf");
    assert_eq!(s.tags, ["a", "b"]);
    assert!(s.requires_browser());
    assert_eq!(s.tools[0].input.as_deref(), Some("x"));

    let bad = "---\r\nname: crlf\r\ntags: [a, B_c]\r\n---\r\n";
    let err =
        parse_skill(bad, Path::new("skills/x/SKILL.md"), "x", SkillSource::Local).unwrap_err();
    assert_eq!((err.problems()[0].line, err.problems()[0].column), (3, 11));
}
