//! forge.yaml `secrets:` in `forge build` and `--prod`: env sources become `secretKeyRef`s of the
//! agent's Secret (key = the variable's name), file sources a read-only mount of that Secret's key
//! (key = the secret's name) at the file's path; the manifests never hold a value; a secret bound
//! outside the egress allowlist is a `--prod` problem naming the secret and the host.

use forge_build::{audit_agent, prod_problems, render_manifests, spec_from_agent};
use forge_skills::Agent;

const YAML: &str = "agent_id: portal-agent\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [portal.example.com]\nsecrets:\n  portal_password: {from: \"env:PORTAL_PASSWORD\", origins: [\"https://portal.example.com\"]}\n  crm_token: {from: \"file:/var/run/secrets/crm/token\", hosts: [api.crm.example]}\n";

fn spec() -> (tempfile::TempDir, forge_build::BuildSpec) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("forge.yaml"), YAML).expect("write");
    let agent = Agent::load(dir.path().join("forge.yaml")).expect("loads");
    let audit = audit_agent(&agent, None).expect("audit");
    (dir, spec_from_agent(&agent, audit))
}

#[test]
fn secrets_become_secret_references_and_mounts_never_values() {
    let (_d, spec) = spec();
    let docs = render_manifests(&spec, "portal-agent:0.1.0").expect("renders");
    let get = |name: &str| {
        docs.iter()
            .find(|(n, _)| n.ends_with(name))
            .map(|(_, t)| t.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let deployment: serde_norway::Value =
        serde_norway::from_str(&get("deployment.yaml")).expect("yaml");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env = container["env"].as_sequence().expect("env");
    let pw = env
        .iter()
        .find(|e| e["name"].as_str() == Some("PORTAL_PASSWORD"))
        .expect("PORTAL_PASSWORD in env");
    let r = &pw["valueFrom"]["secretKeyRef"];
    assert_eq!(r["name"].as_str(), Some("portal-agent-env"));
    assert_eq!(r["key"].as_str(), Some("PORTAL_PASSWORD"));
    assert_eq!(r["optional"].as_bool(), Some(false));
    let mount = container["volumeMounts"]
        .as_sequence()
        .expect("mounts")
        .iter()
        .find(|m| m["mountPath"].as_str() == Some("/var/run/secrets/crm/token"))
        .expect("the token file is mounted");
    assert_eq!(mount["subPath"].as_str(), Some("crm_token"));
    assert_eq!(mount["readOnly"].as_bool(), Some(true));
    let volume = deployment["spec"]["template"]["spec"]["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("its volume");
    assert_eq!(
        volume["secret"]["secretName"].as_str(),
        Some("portal-agent-env")
    );
    let secret: serde_norway::Value = serde_norway::from_str(&get("secrets.yaml")).expect("yaml");
    let data = &secret["stringData"];
    assert_eq!(data["PORTAL_PASSWORD"].as_str(), Some(""));
    assert_eq!(data["crm_token"].as_str(), Some(""));
}

#[test]
fn prod_names_a_secret_bound_outside_the_egress_allowlist() {
    let (_d, spec) = spec();
    let problems = prod_problems(&spec);
    let p = problems
        .iter()
        .find(|p| p.field == "secrets.crm_token")
        .unwrap_or_else(|| panic!("no secret problem in {problems:?}"));
    assert!(p.problem.contains("api.crm.example"), "{p}");
    assert!(p.fix.contains("egress.allowed_domains"), "{p}");
    assert!(
        !problems
            .iter()
            .any(|p| p.field == "secrets.portal_password"),
        "portal_password's origin is allowed: {problems:?}"
    );
}

/// forge.yaml `browser.profiles`: the Secret gets a required `FORGE_PROFILE_KEY` key (empty, to
/// fill in), and a profile origin outside the allowlist is a `--prod` problem.
#[test]
fn profiles_require_the_key_in_the_secret_and_their_origins_in_the_allowlist() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("forge.yaml"),
        format!("{YAML}browser:\n  profiles:\n    portal: {{origins: [\"https://portal.example.com\", \"https://sso.example.net\"]}}\n"),
    )
    .expect("write");
    let agent = Agent::load(dir.path().join("forge.yaml")).expect("loads");
    let audit = audit_agent(&agent, None).expect("audit");
    let with = spec_from_agent(&agent, audit);
    let files = render_manifests(&with, "img:1").expect("render");
    let secret = files
        .iter()
        .find(|(p, _)| p.ends_with("secrets.yaml"))
        .map(|(_, t)| t.clone())
        .expect("secrets.yaml");
    assert!(
        secret.contains("FORGE_PROFILE_KEY: ''") || secret.contains("FORGE_PROFILE_KEY: \"\""),
        "{secret}"
    );
    let deployment = files
        .iter()
        .find(|(p, _)| p.ends_with("deployment.yaml"))
        .map(|(_, t)| t.clone())
        .expect("deployment.yaml");
    assert!(deployment.contains("FORGE_PROFILE_KEY"), "{deployment}");
    let problems = prod_problems(&with);
    let p = problems
        .iter()
        .find(|p| p.field == "browser.profiles.portal")
        .unwrap_or_else(|| panic!("no profile problem in {problems:?}"));
    assert!(p.problem.contains("https://sso.example.net"), "{p}");
    assert!(!p.problem.contains("https://portal.example.com"), "{p}");
    // Without profiles there is no such key.
    let (_d, plain) = spec();
    let files = render_manifests(&plain, "img:1").expect("render");
    assert!(!files.iter().any(|(_, t)| t.contains("FORGE_PROFILE_KEY")));
}
