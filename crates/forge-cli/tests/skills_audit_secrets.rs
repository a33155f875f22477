//! `forge skills audit` on an agent with forge.yaml `secrets:` (and `browser.profiles`): a secret (or a profile) bound to a host the egress
//! allowlist does not reach fails the audit, naming the secret, the host and the fix; with the
//! host allowed it passes. A literal value in forge.yaml is refused without printing it.

fn audit(yaml: &str) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("forge.yaml"), yaml).expect("write");
    let out = forge_testkit::forge!()
        .current_dir(dir.path())
        .args(["skills", "audit"])
        .output()
        .expect("run forge");
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

const HEAD: &str = "agent_id: a\nversion: 0.1.0\negress:\n  mode: allowlist\n  allowed_domains: [portal.example.com]\n";

#[test]
fn a_secret_bound_outside_the_allowlist_fails_the_audit() {
    let (code, out) = audit(&format!(
        "{HEAD}secrets:\n  crm_token: {{from: \"env:CRM\", hosts: [api.crm.example]}}\n"
    ));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("secrets.crm_token")
            && out.contains("api.crm.example")
            && out.contains("fix: add"),
        "{out}"
    );
    let (code, out) = audit(&format!(
        "{HEAD}secrets:\n  pw: {{from: \"env:PW\", origins: [\"https://portal.example.com\"]}}\n"
    ));
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_literal_value_is_refused_without_printing_it() {
    let (code, out) = audit(&format!(
        "{HEAD}secrets:\n  pw: {{value: hunter2-literal, origins: [\"https://portal.example.com\"]}}\n  pw2: \"hunter3-literal\"\n  pw3: {{from: hunter4-literal, hosts: [portal.example.com]}}\n"
    ));
    assert_ne!(code, 0, "{out}");
    for v in ["hunter2", "hunter3", "hunter4"] {
        assert!(!out.contains(v), "the error prints the literal {v}: {out}");
    }
    assert!(out.contains("literal value"), "{out}");
    assert!(out.contains("env:"), "the fix is named: {out}");
}

#[test]
fn a_profile_origin_outside_the_allowlist_fails_the_audit() {
    let (code, out) = audit(&format!(
        "{HEAD}browser:\n  profiles:\n    portal: {{origins: [\"https://portal.example.com\", \"http://127.0.0.1:8080\"]}}\n"
    ));
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("browser.profiles.portal")
            && out.contains("http://127.0.0.1:8080")
            && out.contains("fix: add"),
        "{out}"
    );
    assert!(!out.contains("https://portal.example.com, which"), "{out}");
    let (code, out) = audit(&format!(
        "{HEAD}browser:\n  profiles:\n    portal: {{origins: [\"https://portal.example.com\"]}}\n"
    ));
    assert_eq!(code, 0, "{out}");
}
