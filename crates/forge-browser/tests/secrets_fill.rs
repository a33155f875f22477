//! `browser_fill {ref, secret}` for real: Chromium through the real egress proxy against
//! loopback servers. The portal (127.0.0.1) gets the secret values typed with real keys and the
//! login succeeds; a field in a cross-origin frame (127.0.0.2, allowed by the policy but not bound
//! to the secret) is refused before anything is typed, and that server never receives the value;
//! a non-password field holding a secret shows `value="(secret NAME)"` in the observation.

use std::sync::OnceLock;

use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::{BoundOrigin, Secret, SecretValue, Secrets, ToolError};
use serde_json::{json, Value};

const USER: &str = "alice.k7q";
const PASSWORD: &str = "Pw9x2LmQ4v";

struct Fixture {
    b: Shared,
    portal: Site,
    other: Site,
    /// The same host as the portal on another port: another origin (same site).
    same_host: Site,
}

/// The portal: a login form, an iframe from the other origin, and a result page that echoes the
/// password back ("wrong password: ...") unless the pair is right.
fn portal_page(r: &Request, other: &str, same_host: &str) -> Response {
    match (r.method.as_str(), r.path.as_str()) {
        ("GET", "/port-frame") => Response::html(format!(
            r#"<!doctype html><title>Portal</title><h1>Portal</h1>
<iframe src="{same_host}/frame" title="Same host, other port" width="420" height="160"></iframe>"#
        )),
        ("GET", "/login") => Response::html(format!(
            r#"<!doctype html><title>Portal login</title><h1>Portal</h1>
<form method=post action="/login">
<label for=u>Username</label> <input id=u name=u autocomplete=username>
<label for=p>Password</label> <input id=p name=p type=password autocomplete=current-password>
<button type=submit>Sign in</button>
</form>
<iframe src="{other}/frame" title="Other origin" width="420" height="160"></iframe>"#
        )),
        ("GET", "/grab") => Response::html(
            r#"<!doctype html><title>Grab</title>
<input id=u aria-label="Username"> <input id=x aria-label="Decoy">
<script>document.getElementById('u').addEventListener('keydown', () => setTimeout(() => document.getElementById('x').focus(), 0), {once: true});</script>"#,
        ),
        ("POST", "/login") => {
            let body = String::from_utf8_lossy(&r.body).to_string();
            let ok = body.contains(&format!("u={USER}")) && body.contains(&format!("p={PASSWORD}"));
            let pw = body
                .split('&')
                .find_map(|kv| kv.strip_prefix("p="))
                .unwrap_or("")
                .to_string();
            Response::html(match ok {
                true => "<!doctype html><title>Welcome</title><p>Signed in</p>".to_string(),
                false => format!("<!doctype html><title>Denied</title><p>wrong password: {pw}</p>"),
            })
        }
        _ => Response::not_found(),
    }
}

fn other_page(_r: &Request) -> Response {
    Response::html(
        r#"<!doctype html><title>Other</title>
<form method=post action="/steal"><label for=q>Other password</label> <input id=q name=q type=password></form>"#,
    )
}

fn fixture() -> Option<&'static Fixture> {
    static F: OnceLock<Option<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let other = Site::start_on("127.0.0.2:0", other_page);
        let same_host = Site::start(other_page);
        let o = format!("http://{}", other.addr);
        let sh = format!("http://{}", same_host.addr);
        let portal = Site::start(move |r: &Request| portal_page(r, &o, &sh));
        let b = Shared::start(
            "forge-browser secret fill tests",
            &[portal.entry(), other.entry(), same_host.entry()],
            Confine::WhereAvailable,
        )?;
        Some(Fixture {
            b,
            portal,
            other,
            same_host,
        })
    })
    .as_ref()
}

impl Fixture {
    fn secrets(&self) -> Secrets {
        let origin = BoundOrigin::of_url(&self.portal.url("/")).expect("portal origin");
        let s = |name: &str, v: &str| Secret {
            name: name.into(),
            value: SecretValue::new(v.into()),
            origins: vec![origin.clone()],
            hosts: Vec::new(),
        };
        Secrets::new(
            vec![s("portal_user", USER), s("portal_password", PASSWORD)],
            None,
        )
    }

    fn call(&self, session: &str, name: &str, input: Value) -> Result<String, ToolError> {
        let mut ctx = self.b.context(session);
        ctx.secrets = self.secrets();
        self.b.run_tool(&ctx, name, input)
    }

    fn ok(&self, session: &str, name: &str, input: Value) -> String {
        match self.call(session, name, input.clone()) {
            Ok(t) => t,
            Err(e) => panic!("{name} {input} failed: {e}"),
        }
    }

    fn bodies(site: &Site) -> String {
        site.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|r| format!("{}{}", r.head, String::from_utf8_lossy(&r.body)))
            .collect()
    }
}

/// The ref on the first observation line that mentions `needle`.
fn ref_of(obs: &str, needle: &str) -> String {
    obs.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{obs}"))
        .to_string()
}

#[test]
fn a_login_with_secrets_types_real_keys_on_the_bound_origin_and_never_shows_the_values() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "login",
        "browser_navigate",
        json!({"url": f.portal.url("/login")}),
    );
    let user = ref_of(&obs, "\"Username\"");
    let pw = ref_of(&obs, "\"Password\"");
    let out = f.ok(
        "login",
        "browser_fill",
        json!({"ref": user, "secret": "portal_user"}),
    );
    assert!(!out.contains(USER), "the user name shows: {out}");
    assert!(
        out.contains("(secret portal_user)"),
        "the field is not shown as the secret: {out}"
    );
    // A password field: no allow_sensitive_fill opt-in, the secret is bound to this origin.
    let out = f.ok(
        "login",
        "browser_fill",
        json!({"ref": pw, "secret": "portal_password", "submit": true}),
    );
    assert!(out.contains("Signed in"), "login failed: {out}");
    assert!(!out.contains(PASSWORD) && !out.contains(USER), "{out}");
    let got = Fixture::bodies(&f.portal);
    assert!(
        got.contains(&format!("u={USER}")) && got.contains(&format!("p={PASSWORD}")),
        "the portal did not get the values: {got}"
    );
}

#[test]
fn a_field_in_another_origins_frame_is_refused_and_that_server_never_gets_the_value() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "frame",
        "browser_navigate",
        json!({"url": f.portal.url("/login")}),
    );
    let field = ref_of(&obs, "\"Other password\"");
    let err = f
        .call(
            "frame",
            "browser_fill",
            json!({"ref": field, "secret": "portal_password", "submit": true}),
        )
        .expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("http://{}", f.other.addr))
            && msg.contains(&f.portal.port().to_string()),
        "the refusal must name the field's origin and the secret's: {msg}"
    );
    assert!(msg.contains("nothing was typed"), "{msg}");
    let got = Fixture::bodies(&f.other);
    assert!(
        !got.contains(PASSWORD),
        "the other origin received the value: {got}"
    );
    assert!(
        !got.contains("/steal"),
        "the other origin's form was submitted: {got}"
    );
    // An unknown secret is refused naming the ones there are.
    let err = f
        .call(
            "frame",
            "browser_fill",
            json!({"ref": field, "secret": "nope"}),
        )
        .expect_err("unknown");
    assert!(err.to_string().contains("portal_password"), "{err}");
}

/// The same host on another port is another origin: a field in a frame from
/// `http://127.0.0.1:<other port>` is refused like one from another host (issue 22's "second
/// loopback port"), and that server never gets the value.
#[test]
fn a_field_in_a_frame_of_the_same_host_on_another_port_is_refused() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "port-frame",
        "browser_navigate",
        json!({"url": f.portal.url("/port-frame")}),
    );
    let field = ref_of(&obs, "\"Other password\"");
    let err = f
        .call(
            "port-frame",
            "browser_fill",
            json!({"ref": field, "secret": "portal_password", "submit": true}),
        )
        .expect_err("refused");
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("http://{}", f.same_host.addr)) && msg.contains("nothing was typed"),
        "the refusal must name the field's origin: {msg}"
    );
    let got = Fixture::bodies(&f.same_host);
    assert!(
        !got.contains(PASSWORD),
        "the other port received the value: {got}"
    );
    assert!(!got.contains("/steal"), "its form was submitted: {got}");
}

/// A screenshot of the user-name field, filled in session `session` by `fill` (focus moved away
/// first, so no caret is drawn).
fn field_png(f: &Fixture, session: &str, fill: Value) -> Vec<u8> {
    let obs = f.ok(
        session,
        "browser_navigate",
        json!({"url": f.portal.url("/login")}),
    );
    let mut fill = fill;
    fill["ref"] = json!(ref_of(&obs, "\"Username\""));
    f.ok(session, "browser_fill", fill);
    let heading = ref_of(&f.ok(session, "browser_state", json!({})), "\"Portal\"");
    f.ok(session, "browser_click", json!({"ref": heading}));
    let out = f.ok(
        session,
        "browser_screenshot",
        json!({"selector": "#u", "filename": format!("{session}.png")}),
    );
    let path = f.b.files.path().join(format!("{session}.png"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}; {out}", path.display()))
}

#[test]
fn a_text_field_holding_a_secret_is_masked_in_screenshots() {
    let Some(f) = fixture() else { return };
    let plain_a = field_png(f, "shot-plain-a", json!({"value": USER}));
    let plain_b = field_png(f, "shot-plain-b", json!({"value": USER}));
    assert_eq!(
        plain_a, plain_b,
        "screenshots of the same field are not reproducible"
    );
    let secret = field_png(f, "shot-secret", json!({"secret": "portal_user"}));
    assert_ne!(
        secret, plain_a,
        "the secret's field looks like the plain value"
    );
}

#[test]
fn typing_a_secret_stops_when_the_page_moves_focus_away() {
    let Some(f) = fixture() else { return };
    let obs = f.ok(
        "grab",
        "browser_navigate",
        json!({"url": f.portal.url("/grab")}),
    );
    let field = ref_of(&obs, "\"Username\"");
    let err = f
        .call(
            "grab",
            "browser_fill",
            json!({"ref": field, "secret": "portal_user"}),
        )
        .expect_err("stopped");
    assert!(err.to_string().contains("lost focus"), "{err}");
    let state = f.ok("grab", "browser_state", json!({}));
    let decoy = state
        .lines()
        .find(|l| l.contains("\"Decoy\""))
        .unwrap_or_else(|| panic!("no decoy in {state}"));
    assert!(
        !decoy.contains(&USER[1..3]),
        "the rest of the secret went into the decoy: {decoy}"
    );
}
