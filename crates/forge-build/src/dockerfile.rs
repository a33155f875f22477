//! The Dockerfile and `.dockerignore` of the build context. The Dockerfile is the repo-root
//! `Dockerfile.tmpl`, embedded in the binary at compile time (so `forge build` works from any
//! directory) and rendered with minijinja. Each browser engine comes in only when the agent uses
//! it: Chromium as apt packages, Lightpanda as the context's `lightpanda/` directory.

use forge_skills::BrowserEngine;
use minijinja::{context, Environment};
use serde::Serialize;

use crate::error::BuildError;
use crate::lightpanda::{
    LightpandaBinary, LIGHTPANDA_IMAGE_BIN, LIGHTPANDA_IMAGE_DIR, LIGHTPANDA_LICENSE_ID,
    LIGHTPANDA_SOURCE_URL,
};
use crate::spec::BuildSpec;

/// The template, embedded so the binary needs no repository checkout.
pub const DOCKERFILE_TEMPLATE: &str = include_str!("../../../Dockerfile.tmpl");

/// Base image of every agent image.
pub const BASE_IMAGE: &str = "debian:bookworm-slim";
/// Non-root user and group id the agent runs as (also used by the Kubernetes securityContext).
pub const AGENT_UID: u32 = 10001;
/// Port `forge run` serves A2A on inside the container (it answers `/healthz` too).
pub const AGENT_PORT: u16 = 8080;
/// Port of `forge run`'s probe listener (`--probe-port`: `/healthz`, `/readyz`) inside the
/// container: the HEALTHCHECK and the Kubernetes probes ask it, so a connection flood on the A2A
/// port never fails them.
pub(crate) const PROBE_PORT: u16 = 8081;
/// Packages every image gets: CA roots for TLS, and tini as PID 1.
pub const BASE_PACKAGES: &[&str] = &["ca-certificates", "tini"];
/// Packages added when, and only when, an active skill declares the `browser` capability and
/// the agent's browser runs on Chromium (the default engine): Debian's Chromium (its Depends bring the libraries: nss, gtk, ...) and fonts so pages render
/// text with real metrics (Liberation is metric-compatible with Arial/Times/Courier).
pub const BROWSER_PACKAGES: &[&str] = &["chromium", "fonts-liberation", "fonts-dejavu-core"];
/// Where Debian installs Chromium; passed to forge as FORGE_BROWSER_BIN.
pub const BROWSER_BIN: &str = "/usr/bin/chromium";

/// Interpreters the skills' script tools need (`.py` -> python3, `.js` -> nodejs; `.sh` runs
/// with the base image's sh), as (package, script) pairs, sorted.
pub fn script_interpreters(spec: &BuildSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for skill in &spec.skills {
        for tool in &skill.tools {
            let Some(script) = &tool.script else { continue };
            let pkg = if script.ends_with(".py") {
                "python3"
            } else if script.ends_with(".js") {
                "nodejs"
            } else {
                continue;
            };
            out.push((pkg.to_string(), script.clone()));
        }
    }
    out.sort();
    out
}

/// The apt packages of the image's single apt layer, in install order, de-duplicated.
pub fn apt_packages(spec: &BuildSpec) -> Vec<String> {
    let mut out: Vec<String> = BASE_PACKAGES.iter().map(|s| s.to_string()).collect();
    if spec.needs_chromium() {
        out.extend(BROWSER_PACKAGES.iter().map(|s| s.to_string()));
    }
    let mut extra: Vec<String> = spec.apt_packages.iter().map(|p| p.name.clone()).collect();
    extra.extend(script_interpreters(spec).into_iter().map(|(p, _)| p));
    extra.sort();
    for p in extra {
        crate::spec::push_unique(&mut out, p);
    }
    out
}

#[derive(Serialize)]
struct EnvLine {
    name: &'static str,
    value: &'static str,
}

/// The engines' names, comma-separated (a label value and a log line).
pub(crate) fn engine_names(spec: &BuildSpec) -> String {
    spec.browser_engines()
        .iter()
        .map(|e| e.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// Lightpanda as the template sees it.
#[derive(Serialize)]
struct LightpandaLines<'a> {
    version: &'a str,
    dir: &'static str,
    license: &'static str,
    source: &'static str,
    requested_by: String,
}

/// Renders the Dockerfile for `spec`; `lightpanda` is the binary the context carries, required
/// when the agent uses Lightpanda. Call [`BuildSpec::validate`] first: the agent id, version
/// and package names are pasted into the file.
pub fn render_dockerfile(
    spec: &BuildSpec,
    lightpanda: Option<&LightpandaBinary>,
) -> Result<String, BuildError> {
    let browser = spec.needs_browser();
    let mut purpose = String::from("CA certificates for TLS and tini as init");
    if spec.needs_chromium() {
        let who = spec.skills_on(BrowserEngine::Chromium).join(", ");
        purpose.push_str(&format!(
            ", Debian's Chromium and fonts for the browser tools (capability `browser`, requested by: {who})"
        ));
    }
    let lightpanda = match (spec.needs_lightpanda(), lightpanda) {
        (false, _) => None,
        (true, Some(bin)) if crate::lightpanda::is_plain_version(&bin.version) => {
            Some(LightpandaLines {
                version: &bin.version,
                dir: LIGHTPANDA_IMAGE_DIR,
                license: LIGHTPANDA_LICENSE_ID,
                source: LIGHTPANDA_SOURCE_URL,
                requested_by: spec.skills_on(BrowserEngine::Lightpanda).join(", "),
            })
        }
        (true, _) => {
            return Err(BuildError::Lightpanda {
                problem: "the agent uses browser.engine: lightpanda but no inspected Lightpanda binary was given to the Dockerfile".into(),
                fix: "build through write_build, which finds and checks the binary".into(),
            })
        }
    };
    if !spec.apt_packages.is_empty() {
        let mut decl: Vec<String> = spec
            .apt_packages
            .iter()
            .map(|p| format!("{} (skill {})", p.name, p.skill))
            .collect();
        decl.sort();
        decl.dedup();
        purpose.push_str(&format!(
            ", and what the skills declare: {}",
            decl.join(", ")
        ));
    }
    let interpreters = script_interpreters(spec);
    if !interpreters.is_empty() {
        let list: Vec<String> = interpreters
            .iter()
            .map(|(p, s)| format!("{p} (runs {s})"))
            .collect();
        purpose.push_str(&format!(
            ", interpreters for skill scripts: {}",
            list.join(", ")
        ));
    }
    let mut env: Vec<EnvLine> = Vec::new();
    if spec.needs_chromium() {
        env.push(EnvLine {
            name: "FORGE_BROWSER_BIN",
            value: BROWSER_BIN,
        });
    }
    if lightpanda.is_some() {
        env.push(EnvLine {
            name: "FORGE_LIGHTPANDA_BIN",
            value: LIGHTPANDA_IMAGE_BIN,
        });
    }

    let mut jinja = Environment::new();
    jinja.set_keep_trailing_newline(true);
    jinja
        .add_template("Dockerfile.tmpl", DOCKERFILE_TEMPLATE)
        .map_err(|e| BuildError::Template(e.to_string()))?;
    let tmpl = jinja
        .get_template("Dockerfile.tmpl")
        .map_err(|e| BuildError::Template(e.to_string()))?;
    tmpl.render(context! {
        forge_version => env!("CARGO_PKG_VERSION"),
        agent_id => spec.agent_id,
        version => spec.version,
        base_image => BASE_IMAGE,
        egress_mode => spec.egress.mode.as_str(),
        browser => browser,
        engines => engine_names(spec),
        lightpanda => lightpanda,
        package_purpose => purpose,
        packages => apt_packages(spec),
        uid => AGENT_UID,
        port => AGENT_PORT,
        probe_port => PROBE_PORT,
        env => env,
    })
    .map_err(|e| BuildError::Template(e.to_string()))
}

/// The `.dockerignore`: secrets and local state never enter the image, even if someone builds
/// from a directory that has them.
pub fn render_dockerignore() -> String {
    [
        "# Generated by forge build: keep secrets and local state out of the image.",
        "**/.env",
        "**/.env.*",
        "**/*.pem",
        "**/*.key",
        "**/*.p12",
        "**/*.pfx",
        "**/id_rsa*",
        "**/id_ecdsa*",
        "**/id_ed25519*",
        "**/.forge",
        "**/.forge-output",
        "**/.git",
        "k8s",
        "compiled",
        "image-manifest.json",
        "",
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{AptPackage, BrowserSpec};

    fn spec(browser: bool) -> BuildSpec {
        BuildSpec {
            agent_id: "demo".into(),
            version: "1.0.0".into(),
            capabilities: if browser {
                vec!["browser".into()]
            } else {
                vec![]
            },
            browser: browser.then(|| BrowserSpec {
                skills: vec!["web-browse".into()],
                allow_sensitive_fill: false,
                engines: vec![],
                skill_engines: vec![],
            }),
            apt_packages: vec![AptPackage {
                name: "jq".into(),
                skill: "json-tools".into(),
                bin: "jq".into(),
            }],
            egress: crate::spec::EgressSpec {
                mode: forge_skills::EgressMode::Allowlist,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn browser_agent_gets_chromium_in_one_apt_layer() {
        let d = render_dockerfile(&spec(true), None).unwrap();
        assert_eq!(d.matches("apt-get install").count(), 1, "{d}");
        assert!(d.contains("--no-install-recommends"));
        assert!(d.contains("rm -rf /var/lib/apt/lists/*"));
        for p in BROWSER_PACKAGES
            .iter()
            .chain(["jq", "ca-certificates"].iter())
        {
            assert!(d.contains(&format!("      {p} \\\n")), "{p} missing:\n{d}");
        }
        assert!(d.contains("FORGE_BROWSER_BIN=/usr/bin/chromium"));
    }

    #[test]
    fn python_and_node_scripts_bring_their_interpreters() {
        let mut s = spec(false);
        s.skills = vec![crate::spec::SkillSpec {
            name: "x".into(),
            tools: vec![
                crate::spec::SkillTool {
                    name: "a".into(),
                    script: Some("skills/x/scripts/a.py".into()),
                },
                crate::spec::SkillTool {
                    name: "b".into(),
                    script: Some("skills/x/scripts/b.sh".into()),
                },
                crate::spec::SkillTool {
                    name: "c".into(),
                    script: None,
                },
            ],
            ..Default::default()
        }];
        let pkgs = apt_packages(&s);
        assert!(pkgs.contains(&"python3".to_string()), "{pkgs:?}");
        assert!(!pkgs.contains(&"nodejs".to_string()), "{pkgs:?}");
        let d = render_dockerfile(&s, None).unwrap();
        assert!(d.contains("python3 (runs skills/x/scripts/a.py)"), "{d}");
    }

    #[test]
    fn non_browser_agent_never_mentions_chromium() {
        let d = render_dockerfile(&spec(false), None).unwrap();
        assert!(!d.to_lowercase().contains("chromium"), "{d}");
        assert!(!d.contains("fonts-liberation"));
        assert!(d.contains("      jq \\\n"));
        assert!(d.contains("USER 10001:10001"));
        assert!(d.contains("EXPOSE 8080"));
        assert!(d.contains("HEALTHCHECK"));
        assert!(d.contains("/healthz"));
        assert!(d.contains(
            r#""forge", "run", "--host", "0.0.0.0", "--port", "8080", "--probe-port", "8081""#
        ));
        assert!(d.contains("/dev/tcp/127.0.0.1/8081"));
    }
}
