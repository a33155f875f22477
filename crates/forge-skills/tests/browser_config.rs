//! forge.yaml `browser:` and `a2a:`: the documented block parses to the values it says, absent
//! keys keep the defaults, and each bad value is a diagnostic pointing at that value (its line and
//! column in the rendered report) with the rule and the fix.

use std::path::Path;
use std::time::Duration;

use forge_skills::{Error, ForgeConfig, TaskModel, DEFAULT_INLINE_ARTIFACT_BYTES};
use miette::{GraphicalReportHandler, GraphicalTheme};

fn render(diag: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    GraphicalReportHandler::new_themed(GraphicalTheme::none())
        .with_width(120)
        .render_report(&mut out, diag)
        .unwrap();
    out
}

fn parse(block: &str) -> Result<ForgeConfig, Error> {
    let text = format!("agent_id: a\nversion: 0.1.0\n{block}");
    ForgeConfig::parse(&text, Path::new("agent/forge.yaml"))
}

/// The rendered problems of an invalid `block` (one string per problem).
fn problems(block: &str) -> Vec<String> {
    match parse(block) {
        Err(Error::Invalid { problems, .. }) => problems
            .iter()
            .map(|p| render(p as &dyn miette::Diagnostic))
            .collect(),
        Err(e) => panic!("expected diagnostics, got {e}"),
        Ok(_) => panic!("{block} must be invalid"),
    }
}

const DOCUMENTED: &str = "browser:
  max_sessions: 4
  idle_timeout: 10m
  navigation_timeout: 1m
  action_timeout: 20s
  viewport: {width: 1024, height: 768}
  headless: false
  task_model: {provider: openai, name: gpt-4o-mini}
a2a:
  inline_artifact_bytes: 1000
";

#[test]
fn the_documented_block_parses() {
    let cfg = parse(DOCUMENTED).unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    let b = &cfg.browser;
    assert_eq!(b.max_sessions, Some(4));
    assert_eq!(b.idle_timeout, Some(Duration::from_secs(600)));
    assert_eq!(b.navigation_timeout, Some(Duration::from_secs(60)));
    assert_eq!(b.action_timeout, Some(Duration::from_secs(20)));
    assert_eq!(b.viewport, Some((1024, 768)));
    assert_eq!(b.headless, Some(false));
    assert_eq!(
        b.task_model,
        Some(TaskModel {
            provider: "openai".into(),
            name: "gpt-4o-mini".into()
        })
    );
    assert_eq!(cfg.a2a.inline_artifact_bytes, 1000);
}

#[test]
fn absent_keys_keep_the_defaults() {
    let cfg = parse("browser:\n  idle_timeout: 2s\n").unwrap();
    assert_eq!(cfg.browser.idle_timeout, Some(Duration::from_secs(2)));
    assert_eq!(cfg.browser.max_sessions, None);
    assert_eq!(cfg.browser.viewport, None);
    assert_eq!(cfg.browser.task_model, None);
    assert_eq!(cfg.a2a.inline_artifact_bytes, DEFAULT_INLINE_ARTIFACT_BYTES);
    let none = parse("").unwrap();
    assert_eq!(none.browser, Default::default());
}

#[test]
fn a_bare_number_for_a_duration_points_at_it() {
    let p = problems("browser:\n  idle_timeout: 900\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("forge.yaml:4:17"), "{}", p[0]);
    assert!(
        p[0].contains("`browser.idle_timeout` is not a duration"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("ms, s, m, h"), "{}", p[0]);
}

#[test]
fn out_of_range_values_say_the_range_and_the_default() {
    let p = problems("browser:\n  max_sessions: 0\n  action_timeout: 2h\n");
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p[0].contains("forge.yaml:4:17"), "{}", p[0]);
    assert!(p[0].contains("is 0, outside 1 to 64"), "{}", p[0]);
    assert!(p[0].contains("the default (8)"), "{}", p[0]);
    assert!(p[1].contains("forge.yaml:5:19"), "{}", p[1]);
    assert!(p[1].contains("outside 1s to 600s"), "{}", p[1]);
}

#[test]
fn viewport_headless_and_task_model_problems_point_at_them() {
    let p = problems(
        "browser:\n  viewport: {width: 50, height: 800}\n  headless: maybe\n  task_model: {provider: openai}\n",
    );
    assert_eq!(p.len(), 3, "{p:?}");
    let all = p.join("\n");
    assert!(
        all.contains("`browser.viewport.width` is 50, outside 200 to 7680"),
        "{all}"
    );
    assert!(
        all.contains("`browser.headless` must be true or false, not \"maybe\""),
        "{all}"
    );
    assert!(all.contains("`browser.task_model` has no `name`"), "{all}");
    assert!(
        p.iter().any(|x| x.contains("forge.yaml:4:21")),
        "width at line 4: {all}"
    );
    assert!(
        p.iter().any(|x| x.contains("forge.yaml:5:13")),
        "headless at line 5: {all}"
    );
}

#[test]
fn wrong_shapes_and_unknown_keys() {
    let p = problems("browser: 8\n");
    assert!(p[0].contains("`browser` must be a mapping"), "{}", p[0]);
    let p = problems("a2a:\n  inline_artifact_bytes: lots\n");
    assert!(
        p[0].contains("`a2a.inline_artifact_bytes` must be a whole number"),
        "{}",
        p[0]
    );
    let cfg = parse("browser:\n  idle_timeot: 5m\n").unwrap();
    let w: Vec<String> = cfg.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    let shown = render(&cfg.warnings[0]);
    assert!(shown.contains("did you mean `idle_timeout`"), "{shown}");
}

#[test]
fn the_handoff_timeout_parses_and_out_of_range_says_the_range_and_the_default() {
    let cfg = parse("browser:\n  handoff_timeout: 90s\n").unwrap();
    assert_eq!(cfg.browser.handoff_timeout, Some(Duration::from_secs(90)));
    assert_eq!(
        parse("browser: {}\n").unwrap().browser.handoff_timeout,
        None
    );
    let p = problems("browser:\n  handoff_timeout: 2h\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].contains("forge.yaml:4:20"), "{}", p[0]);
    assert!(
        p[0].contains("`browser.handoff_timeout` is 2h, outside 1s to 3600s"),
        "{}",
        p[0]
    );
    assert!(p[0].contains("the default (10m)"), "{}", p[0]);
}

#[test]
fn downloads_caps_parse_and_bad_values_point_at_them() {
    let cfg = parse("browser:\n  downloads: {max_bytes: 1MiB, max_files: 5}\n").unwrap();
    assert_eq!(cfg.browser.download_max_bytes, Some(1024 * 1024));
    assert_eq!(cfg.browser.download_max_files, Some(5));
    let cfg = parse("browser:\n  downloads:\n    max_bytes: 2048\n").unwrap();
    assert_eq!(cfg.browser.download_max_bytes, Some(2048));
    assert_eq!(cfg.browser.download_max_files, None);
    let p = problems("browser:\n  downloads: {max_bytes: lots}\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("`browser.downloads.max_bytes` is not a size"),
        "{}",
        p[0]
    );
    assert!(
        p[0].contains("max_bytes: lots"),
        "the span shows the value: {}",
        p[0]
    );
    let p = problems("browser:\n  downloads: {max_bytes: 8GiB}\n");
    assert!(p[0].contains("outside 1KiB to 4GiB"), "{}", p[0]);
    let p = problems("browser:\n  downloads: {max_files: 0}\n");
    assert!(
        p[0].contains("`browser.downloads.max_files` is 0, outside 1 to 1000"),
        "{}",
        p[0]
    );
    let p = problems("browser:\n  downloads: 5\n");
    assert!(
        p[0].contains("`browser.downloads` must be a mapping"),
        "{}",
        p[0]
    );
}

#[test]
fn browser_engine_parses_and_a_bad_one_points_at_the_value() {
    use forge_skills::BrowserEngine;
    assert_eq!(parse("").unwrap().browser.engine, None, "default: unset");
    assert_eq!(
        parse("browser:\n  engine: lightpanda\n")
            .unwrap()
            .browser
            .engine,
        Some(BrowserEngine::Lightpanda)
    );
    assert_eq!(
        parse("browser:\n  engine: chromium\n")
            .unwrap()
            .browser
            .engine,
        Some(BrowserEngine::Chromium)
    );
    let p = problems("browser:\n  engine: firefox\n");
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("`browser.engine` must be one of chromium, lightpanda, not \"firefox\""),
        "{}",
        p[0]
    );
    assert!(
        p[0].contains("forge.yaml:4:11"),
        "value at line 4: {}",
        p[0]
    );
    assert!(p[0].contains("engine: lightpanda"), "the fix: {}", p[0]);
}
