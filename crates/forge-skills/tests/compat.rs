//! initializ/forge compatibility: skills written with every shape `metadata.forge` takes there
//! (fixtures/skills/compat, our own text in their style) load with the values they state, and the
//! wrong types are errors pointing at the value.
//!
//! The fixtures, one per shape:
//! - cluster-capacity: bare `bins` names, empty `required`/`one_of` lists, a `$VAR` egress entry,
//!   `denied_tools`, `timeout_hint`, `trust_hints.filesystem: read`;
//! - changelog-writer: instructional, `workflow_phase`, `version` written as a YAML number,
//!   `filesystem: none` with `network: false`;
//! - artifact-packager: `runtime: binary`, `bins` mappings with every install key, `uses` of type
//!   binary and mcp, every guardrail list, `filesystem: write`;
//! - docs-browser: the browser capability, `guardrails.browser.allow_sensitive_fill`, both
//!   `deny_output` actions, `filesystem: ""` (undeclared);
//! - legacy-hints: forge's older boolean form `filesystem: false`.

use std::path::{Path, PathBuf};

use forge_skills::{
    discover, parse_skill, Aggregate, Capability, FilesystemAccess, OutputAction, Skill,
    SkillSource,
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn compat() -> Vec<Skill> {
    let d = discover(&repo().join("fixtures/skills/compat"));
    assert!(d.errors.is_empty(), "{:?}", d.errors);
    for s in &d.skills {
        assert!(s.warnings.is_empty(), "{}: {:?}", s.name, s.warnings);
    }
    d.skills
}

fn get<'a>(skills: &'a [Skill], name: &str) -> &'a Skill {
    skills
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("fixture {name} not loaded"))
}

#[test]
fn every_compat_fixture_loads_without_warnings() {
    let skills = compat();
    let mut names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
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
}

#[test]
fn filesystem_hint_is_a_mode_string_or_a_boolean() {
    let skills = compat();
    let fs = |name: &str| {
        get(&skills, name)
            .forge
            .as_ref()
            .unwrap()
            .trust_hints
            .filesystem
    };
    assert_eq!(fs("cluster-capacity"), Some(FilesystemAccess::Read));
    assert_eq!(fs("changelog-writer"), Some(FilesystemAccess::None));
    assert_eq!(fs("artifact-packager"), Some(FilesystemAccess::Write));
    assert_eq!(fs("docs-browser"), None, "empty means undeclared");
    assert_eq!(
        fs("legacy-hints"),
        Some(FilesystemAccess::None),
        "false maps to none"
    );
    let hints = &get(&skills, "changelog-writer")
        .forge
        .as_ref()
        .unwrap()
        .trust_hints;
    assert_eq!((hints.network, hints.shell), (Some(false), Some(false)));
    // `true` maps to write, the broadest claim.
    let content = "---\nname: t\ndescription: d\nmetadata:\n  forge:\n    trust_hints: {filesystem: true}\n---\n";
    let s = parse_skill(content, Path::new("t/SKILL.md"), "t", SkillSource::Local).unwrap();
    assert_eq!(
        s.forge.unwrap().trust_hints.filesystem,
        Some(FilesystemAccess::Write)
    );
    // Serialized as initializ/forge writes it.
    let json = serde_json::to_value(&get(&skills, "cluster-capacity").forge).unwrap();
    assert_eq!(json["trust_hints"]["filesystem"], "read");
}

#[test]
fn bare_bins_empty_lists_var_egress_and_denied_tools() {
    let skills = compat();
    let s = get(&skills, "cluster-capacity");
    assert_eq!(s.category.as_deref(), Some("sre"));
    assert_eq!(s.icon.as_deref(), Some("\u{1F4CA}"));
    let f = s.forge.as_ref().unwrap();
    let bins: Vec<&str> = f.requires.bins.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(bins, ["kubectl", "jq"]);
    assert!(f.requires.env.required.is_empty() && f.requires.env.one_of.is_empty());
    assert_eq!(f.requires.env.optional, ["KUBECONFIG", "CAPACITY_API_HOST"]);
    assert_eq!(f.egress_domains, ["$CAPACITY_API_HOST"]);
    assert_eq!(f.denied_tools, ["http_request", "web_fetch"]);
    assert_eq!(f.timeout_hint, Some(90));
    assert_eq!(s.tools.len(), 1);
    assert_eq!(s.tools[0].name, "cluster_capacity");
}

#[test]
fn instructional_skill_with_phase_and_numeric_version() {
    let skills = compat();
    let s = get(&skills, "changelog-writer");
    assert!(s.is_instructional());
    let f = s.forge.as_ref().unwrap();
    assert_eq!(f.workflow_phase.as_deref(), Some("finalize"));
    // `version: 1.0` is a YAML float; initializ/forge reads it into a string field as its text.
    assert_eq!(f.version.as_deref(), Some("1.0"));
}

#[test]
fn bin_mappings_uses_and_every_guardrail_list() {
    let skills = compat();
    let f = get(&skills, "artifact-packager").forge.clone().unwrap();
    assert_eq!(f.runtime.as_deref(), Some("binary"));
    assert_eq!(f.version.as_deref(), Some("2.1.0"));
    let pkg = &f.requires.bins[0];
    assert_eq!(pkg.name, "pkgtool");
    assert_eq!(pkg.version.as_deref(), Some("3.4"));
    assert!(!pkg.optional);
    assert_eq!(pkg.apt.as_deref(), Some("pkgtool"));
    assert_eq!(pkg.apk.as_deref(), Some("pkgtool"));
    assert_eq!(
        pkg.url.as_deref(),
        Some("https://downloads.example.com/pkgtool/3.4/pkgtool-linux-amd64")
    );
    assert_eq!(pkg.dest.as_deref(), Some("/usr/local/bin/pkgtool"));
    assert_eq!(pkg.chmod.as_deref(), Some("0755"));
    assert_eq!(pkg.run, ["pkgtool --version"]);
    assert_eq!(pkg.richness(), 7);
    assert!(f.requires.bins[1].optional);
    assert_eq!(f.requires.env.required, ["PACKAGE_BUCKET"]);
    assert_eq!(
        f.requires.env.one_of,
        ["PACKAGE_TOKEN", "PACKAGE_TOKEN_FILE"]
    );
    let uses: Vec<(&str, &str, usize)> = f
        .uses
        .iter()
        .map(|u| (u.kind.as_str(), u.reference.as_str(), u.operations.len()))
        .collect();
    assert_eq!(
        uses,
        [
            ("binary", "binary.pkgtool", 2),
            ("mcp", "mcp.artifact-store", 1)
        ]
    );
    assert_eq!(f.workflow_phase.as_deref(), Some("edit"));
    let g = &f.guardrails;
    assert_eq!(g.deny_commands.len(), 1);
    assert!(g.deny_commands[0].message.contains("release pipeline"));
    assert_eq!(g.deny_output[0].action, OutputAction::Redact);
    assert_eq!(g.deny_prompts.len(), 1);
    assert_eq!(g.deny_responses.len(), 1);
    assert_eq!(f.timeout_hint, Some(300));
    // Aggregation keeps the mapping with the install hints and derives cli_execute from it.
    let agg = Aggregate::from_skills(&skills);
    assert!(agg
        .bins
        .iter()
        .any(|b| b.name == "pkgtool" && b.richness() == 7));
    assert!(agg
        .cli_view()
        .allowed_binaries
        .contains(&"pkgtool".to_string()));
}

#[test]
fn browser_skill_with_sensitive_fill_flag_and_both_output_actions() {
    let skills = compat();
    let s = get(&skills, "docs-browser");
    assert!(s.requires_browser());
    let f = s.forge.as_ref().unwrap();
    assert_eq!(f.requires.capabilities, [Capability::Browser]);
    assert!(!f.guardrails.browser.allow_sensitive_fill);
    let actions: Vec<OutputAction> = f.guardrails.deny_output.iter().map(|r| r.action).collect();
    assert_eq!(actions, [OutputAction::Block, OutputAction::Redact]);
    let view = Aggregate::from_skills(std::slice::from_ref(s))
        .browser_view()
        .unwrap();
    assert_eq!(view.skills, ["docs-browser"]);
}

/// Parse `forge_yaml` (the `metadata.forge` mapping, indented by four spaces) and return the
/// first problem's (code, line, message).
fn first_problem(forge_yaml: &str) -> (String, usize, String) {
    let content =
        format!("---\nname: t\ndescription: d\nmetadata:\n  forge:\n{forge_yaml}---\nbody\n");
    let err = parse_skill(&content, Path::new("t/SKILL.md"), "t", SkillSource::Local)
        .expect_err("must be refused");
    let p = &err.problems()[0];
    (p.code.to_string(), p.line, p.message.clone())
}

#[test]
fn wrong_types_are_errors_at_the_value() {
    // (metadata.forge body, line of the offending value, text the message must contain)
    let cases: &[(&str, usize, &str)] = &[
        ("    runtime: [script]\n", 6, "runtime"),
        ("    requires:\n      bins: jq\n", 7, "bins"),
        (
            "    requires:\n      bins:\n        - {name: jq, optional: maybe}\n",
            8,
            "optional",
        ),
        (
            "    requires:\n      bins:\n        - {name: jq, run: {a: b}}\n",
            8,
            "run",
        ),
        (
            "    requires:\n      bins:\n        - [jq]\n",
            8,
            "binary name",
        ),
        (
            "    requires:\n      env:\n        required: KUBECONFIG\n",
            8,
            "required",
        ),
        (
            "    requires:\n      env:\n        one_of: {a: b}\n",
            8,
            "one_of",
        ),
        (
            "    requires:\n      capabilities: browser\n",
            7,
            "capabilities",
        ),
        ("    uses:\n      - {type: mcp}\n", 7, "ref"),
        (
            "    uses:\n      - {type: mcp, ref: m, operations: all}\n",
            7,
            "operations",
        ),
        ("    egress_domains: api.example.com\n", 6, "egress_domains"),
        ("    denied_tools: web_fetch\n", 6, "denied_tools"),
        ("    workflow_phase: [edit]\n", 6, "workflow_phase"),
        (
            "    guardrails:\n      deny_commands:\n        - {message: no pattern}\n",
            8,
            "pattern",
        ),
        (
            "    guardrails:\n      deny_output:\n        - {pattern: x, action: drop}\n",
            8,
            "action",
        ),
        (
            "    guardrails:\n      browser:\n        allow_sensitive_fill: sometimes\n",
            8,
            "allow_sensitive_fill",
        ),
        (
            "    trust_hints:\n      network: yes please\n",
            7,
            "network",
        ),
        ("    trust_hints:\n      shell: none\n", 7, "shell"),
        (
            "    trust_hints:\n      filesystem: [read]\n",
            7,
            "filesystem",
        ),
        ("    trust_hints:\n      filesystem: 3\n", 7, "filesystem"),
        ("    timeout_hint: two minutes\n", 6, "timeout_hint"),
        ("    timeout_hint: -5\n", 6, "timeout_hint"),
        ("    version: [1]\n", 6, "version"),
    ];
    for (yaml, line, needle) in cases {
        let (code, got_line, message) = first_problem(yaml);
        assert_eq!(got_line, *line, "{yaml}: {code}: {message}");
        assert!(
            message.contains(needle),
            "{yaml}: message should name {needle}: {message}"
        );
    }
}

#[test]
fn unknown_filesystem_mode_is_an_error_with_a_suggestion() {
    let rel = "fixtures/skills/bad/bad-filesystem-hint/SKILL.md";
    let content = std::fs::read_to_string(repo().join(rel)).unwrap();
    let err = parse_skill(&content, Path::new(rel), "x", SkillSource::Local).unwrap_err();
    let p = &err.problems()[0];
    assert_eq!(p.code, "forge::skill::invalid-filesystem-hint");
    assert_eq!((p.line, p.column), (8, 19));
    assert!(p.message.contains("\"wirte\""), "{}", p.message);
    assert!(
        p.help
            .as_deref()
            .unwrap_or("")
            .contains("did you mean `write`"),
        "{:?}",
        p.help
    );
}

#[test]
fn unknown_keys_inside_list_entries_and_unknown_use_types_are_warnings() {
    let content = "---\nname: t\ndescription: d\nmetadata:\n  forge:\n    requires:\n      bins:\n        - {name: jq, versoin: '1.7'}\n    uses:\n      - {type: skil, ref: web-browse}\n    guardrails:\n      deny_output:\n        - {pattern: x, action: block, mesage: m}\n---\n";
    let s = parse_skill(content, Path::new("t/SKILL.md"), "t", SkillSource::Local).unwrap();
    let found: Vec<(usize, &str)> = s
        .warnings
        .iter()
        .map(|w| (w.line, w.message.as_str()))
        .collect();
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found
        .iter()
        .any(|(l, m)| *l == 8 && m.contains("`versoin`") && m.contains("requires.bins[0]")));
    assert!(found
        .iter()
        .any(|(l, m)| *l == 13 && m.contains("`mesage`") && m.contains("deny_output[0]")));
    let use_warning = s
        .warnings
        .iter()
        .find(|w| w.code == "forge::skill::unknown-use-type")
        .expect("unknown use type warned");
    assert_eq!(use_warning.line, 10);
    assert!(use_warning
        .help
        .as_deref()
        .unwrap_or("")
        .contains("did you mean `skill`"));
}
