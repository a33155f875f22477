//! `forge skills list|validate|audit` end to end: the real binary on the repo's fixtures.

use std::path::PathBuf;

use assert_cmd::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `forge` run from the repo root (so paths in diagnostics are relative and stable).
fn forge() -> Command {
    let mut c = forge_testkit::forge_assert!();
    c.current_dir(repo());
    c
}

fn run(c: &mut Command) -> (i32, String, String) {
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn list_embedded_shows_web_browse() {
    let (code, out, err) = run(forge().args(["skills", "list", "--embedded"]));
    assert_eq!(code, 0, "{err}");
    insta::assert_snapshot!("skills_list_embedded", out);

    let (code, out, _) = run(forge().args(["skills", "list", "--embedded", "--format", "json"]));
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let wb = &v[0];
    assert_eq!(wb["name"], "web-browse");
    assert_eq!(wb["source"], "embedded");
    assert_eq!(wb["category"], "research");
    assert_eq!(wb["icon"], "🌐");
    assert_eq!(wb["capabilities"], serde_json::json!(["browser"]));
    assert!(wb["tags"].as_array().unwrap().contains(&"browser".into()));
}

#[test]
fn list_filters_by_category_and_tags() {
    let (code, out, _) = run(forge().args(["skills", "list", "--dir", "fixtures/skills/good"]));
    assert_eq!(code, 0);
    insta::assert_snapshot!("skills_list_good", out);

    let (_, out, _) = run(forge().args([
        "skills",
        "list",
        "--dir",
        "fixtures/skills/good",
        "--tags",
        "browser,research",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["research-browser"]);

    let (_, out, _) = run(forge().args([
        "skills",
        "list",
        "--dir",
        "fixtures/skills/good",
        "--category",
        "developer",
        "--format",
        "json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let names: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["code-runner", "github-issues"]);
}

#[test]
fn list_agent_skills_from_config() {
    let (code, out, err) = run(forge().args([
        "skills",
        "list",
        "--config",
        "fixtures/agents/browse/forge.yaml",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v[0]["name"], "docs-reader");
    assert_eq!(v[0]["source"], "local");
}

#[test]
fn validate_bad_skills_points_at_lines_and_exits_1() {
    let (code, out, err) =
        run(forge().args(["skills", "validate", "--dir", "fixtures/skills/bad"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(
            "fixtures/skills/bad/unknown-capability/SKILL.md:8:22: unknown capability \"browsr\""
        ),
        "{err}"
    );
    assert!(err.contains("known capabilities: browser"), "{err}");
    insta::assert_snapshot!(
        "skills_validate_bad",
        format!("exit {code}\n--- stdout\n{out}--- stderr\n{err}")
    );
}

#[test]
fn validate_checks_bins_on_path_and_env() {
    let tmp = tempfile::tempdir().unwrap();
    let skill = tmp.path().join("needs");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: needs\nmetadata:\n  forge:\n    requires:\n      bins:\n        - sh\n        - name: forge-test-no-such-binary\n          apt: no-such-package\n        - name: forge-test-optional-missing\n          optional: true\n      env:\n        required: [FORGE_TEST_REQUIRED_VAR]\n        one_of: [FORGE_TEST_ONE_A, FORGE_TEST_ONE_B]\n---\nbody\n",
    )
    .unwrap();
    let mut c = Command::cargo_bin("forge").unwrap();
    c.args(["skills", "validate", "--format", "json", "--dir"])
        .arg(tmp.path())
        .env_remove("FORGE_TEST_REQUIRED_VAR")
        .env_remove("FORGE_TEST_ONE_A")
        .env_remove("FORGE_TEST_ONE_B");
    let (code, out, _) = run(&mut c);
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let msgs: Vec<(String, String)> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["severity"].as_str().unwrap().into(),
                p["message"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        msgs,
        [
            (
                "error".to_string(),
                "binary \"forge-test-no-such-binary\" is not on PATH".to_string()
            ),
            (
                "warning".to_string(),
                "binary \"forge-test-optional-missing\" is not on PATH (optional)".to_string()
            ),
            (
                "error".to_string(),
                "required env var FORGE_TEST_REQUIRED_VAR is not set".to_string()
            ),
            (
                "error".to_string(),
                "none of the env vars FORGE_TEST_ONE_A, FORGE_TEST_ONE_B is set (one is required)"
                    .to_string()
            ),
        ]
    );
    assert_eq!(
        v["problems"][0]["fix"],
        "install it, e.g. `apt-get install no-such-package`"
    );

    // With the env set and the missing required binary removed, it passes (the optional one warns).
    let text = std::fs::read_to_string(skill.join("SKILL.md")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        text.replace(
            "        - name: forge-test-no-such-binary\n          apt: no-such-package\n",
            "",
        ),
    )
    .unwrap();
    let mut c = Command::cargo_bin("forge").unwrap();
    c.args(["skills", "validate", "--dir"])
        .arg(tmp.path())
        .env("FORGE_TEST_REQUIRED_VAR", "x")
        .env("FORGE_TEST_ONE_B", "y");
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "ok: 1 skill valid (1 warning)\n");
}

#[test]
fn audit_browser_skills_text_and_json() {
    let (code, out, err) = run(forge().args(["skills", "audit", "--dir", "fixtures/skills/audit"]));
    assert_eq!(
        code, 1,
        "critical capability_trust_conflict fails the audit: {err}"
    );
    assert!(out.contains("+15  capability browser: high-risk: headless browser web access"));
    assert!(out.contains("Capability: browser"));
    assert!(out.contains("CRIT  capability_trust_conflict"));
    assert!(out.contains("WARN  capability_guardrail_gap"));
    let generated = out.lines().nth(2).unwrap_or_default().to_string();
    assert!(
        generated.starts_with("Generated: ") && generated.ends_with('Z'),
        "{generated}"
    );
    insta::assert_snapshot!(
        "skills_audit_text",
        out.replace(&generated, "Generated: [timestamp]")
    );

    let (code, out, _) = run(forge().args([
        "skills",
        "audit",
        "--dir",
        "fixtures/skills/audit",
        "--format",
        "json",
    ]));
    assert_eq!(code, 1);
    let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ts = v["timestamp"].as_str().unwrap().to_string();
    assert!(ts.ends_with('Z'), "{ts}");
    v["timestamp"] = "[timestamp]".into();
    assert_eq!(v["policy_summary"]["passed"], false);
    assert_eq!(v["policy_summary"]["errors"], 1);
    assert_eq!(v["policy_summary"]["warnings"], 1);
    let offline = v["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["skill_name"] == "browser-offline")
        .unwrap();
    assert_eq!(
        offline["violations"][0]["rule"],
        "capability_trust_conflict"
    );
    assert_eq!(offline["violations"][0]["severity"], "critical");
    insta::assert_snapshot!(
        "skills_audit_json",
        serde_json::to_string_pretty(&v).unwrap()
    );
}

#[test]
fn audit_defaults_to_the_agent_in_cwd_and_honours_policy() {
    let mut c = Command::cargo_bin("forge").unwrap();
    c.current_dir(repo().join("fixtures/agents/browse"))
        .args(["skills", "audit", "--format", "json"]);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skill_count"], 1);
    assert_eq!(v["assessments"][0]["skill_name"], "docs-reader");
    assert_eq!(v["assessments"][0]["score"]["value"], 40);

    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("policy.yaml");
    std::fs::write(&policy, "max_risk_score: 30\n").unwrap();
    let (code, out, _) = run(forge()
        .args([
            "skills",
            "audit",
            "--config",
            "fixtures/agents/browse/forge.yaml",
            "--policy",
        ])
        .arg(&policy));
    assert_eq!(code, 1);
    assert!(
        out.contains("ERROR max_risk_score: risk score 40 exceeds maximum 30"),
        "{out}"
    );
}

#[test]
fn embedded_audit_passes_and_names_browser() {
    let (code, out, err) = run(forge().args(["skills", "audit", "--embedded"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("web-browse"));
    assert!(out.contains("capability browser"));
}

#[test]
fn missing_config_and_unknown_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Command::cargo_bin("forge").unwrap();
    c.current_dir(tmp.path()).args(["skills", "list"]);
    let (code, _, err) = run(&mut c);
    assert_eq!(code, 1);
    assert!(err.contains("forge.yaml"), "{err}");

    std::fs::write(
        tmp.path().join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\nentrypoint: main.py\n",
    )
    .unwrap();
    let mut c = Command::cargo_bin("forge").unwrap();
    c.current_dir(tmp.path()).args(["skills", "list"]);
    let (code, out, err) = run(&mut c);
    assert_eq!(code, 0, "a warning does not fail: {err}");
    assert_eq!(out, "no skills found\n");
    assert!(
        err.contains("unknown key `entrypoint` in forge.yaml"),
        "{err}"
    );
}

#[test]
fn bad_forge_yaml_is_a_spanned_error() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("forge.yaml"),
        "agent_id: a\nversion: 0.1.0\negress:\n  mode: open\n",
    )
    .unwrap();
    let mut c = Command::cargo_bin("forge").unwrap();
    c.current_dir(tmp.path()).args(["skills", "audit"]);
    let (code, _, err) = run(&mut c);
    assert_eq!(code, 1);
    assert!(
        err.contains("forge.yaml:4:9: unknown egress mode \"open\""),
        "{err}"
    );
}

#[test]
fn audit_uses_the_policy_path_from_forge_yaml() {
    let (code, out, err) = run(forge().args([
        "skills",
        "audit",
        "--config",
        "fixtures/agents/skills-initializ/forge.yaml",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let scores: Vec<(String, u64)> = v["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["skill_name"].as_str().unwrap().to_string(),
                a["score"]["value"].as_u64().unwrap(),
            )
        })
        .collect();
    // ops-research: docs.github.com 10 + python3 acknowledged by policy.yaml 3.
    // status-page: 2 unknown domains 20 + curl 3 + jq 3 + script 20.
    // web-browse: $BROWSE_HOSTS 10 + browser 15 + BROWSE_HOSTS 5.
    assert_eq!(
        scores,
        [
            ("ops-assistant".to_string(), 5),
            ("ops-research".to_string(), 13),
            ("status-page".to_string(), 46),
            ("web-browse".to_string(), 30),
        ]
    );
    assert_eq!(v["aggregate_score"]["value"], 46);
    assert_eq!(v["policy_summary"]["warnings"], 1, "script_policy warn");
    assert_eq!(v["policy_summary"]["passed"], true);
}

/// Skills in initializ/forge's style (fixtures/skills/compat: `trust_hints.filesystem` as a mode
/// string, bins mappings, `uses`, every guardrail list) load and audit; a wrong filesystem mode
/// is a spanned error.
#[test]
fn initializ_style_skills_load_and_audit() {
    let (code, out, err) = run(forge().args([
        "skills",
        "audit",
        "--dir",
        "fixtures/skills/compat",
        "--format",
        "json",
    ]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("warning"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["skill_count"], 5);
    assert_eq!(v["policy_summary"]["passed"], true);
    let mut names: Vec<&str> = v["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["skill_name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "artifact-packager",
            "changelog-writer",
            "cluster-capacity",
            "docs-browser",
            "legacy-hints"
        ]
    );
    let browser = v["assessments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["skill_name"] == "docs-browser")
        .unwrap();
    assert!(
        browser["factors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["description"]
                .as_str()
                .unwrap_or("")
                .starts_with("capability browser")),
        "{browser}"
    );
    assert_eq!(browser["violations"], serde_json::json!([]));

    let (code, out, err) =
        run(forge().args(["skills", "audit", "--dir", "fixtures/skills/compat"]));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("cluster-capacity"), "{out}");

    // The same shape with a mode forge does not know is refused, pointing at the value.
    let (code, out, err) =
        run(forge().args(["skills", "validate", "--dir", "fixtures/skills/bad"]));
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("fixtures/skills/bad/bad-filesystem-hint/SKILL.md:8:19: invalid trust_hints.filesystem \"wirte\""),
        "{err}"
    );
    // (miette wraps the help line; compare with the wrapping removed)
    let unwrapped = err.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(unwrapped.contains("did you mean `write`?"), "{err}");
}
