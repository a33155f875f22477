//! http_request with `{{secret:NAME}}` in a header, through the real egress client against
//! loopback servers: sent to the bound host, refused (nothing sent) to an allowed but unbound
//! host, dropped on a redirect to another origin; the value never appears in the tool's result.

use std::sync::{Arc, Mutex};

use forge_egress::client::{ClientOptions, EgressClient};
use forge_egress::EgressPolicy;
use forge_testkit::site::{Response, Site};
use forge_tools::builtins::http::HttpRequest;
use forge_tools::{BoundOrigin, Secret, SecretUseSink, SecretValue, Secrets, Tool, ToolContext};
use serde_json::json;

const VALUE: &str = "crm-token-7f3a9c1e55d2";

#[derive(Default)]
struct Uses(Mutex<Vec<String>>);
impl SecretUseSink for Uses {
    fn used(&self, _task: Option<&str>, name: &str, origin: &str, tool: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{name} {origin} {tool}"));
    }
}

fn site(redirect_to: Option<u16>) -> Site {
    Site::builder().max_connections(20).start(move |r| match (redirect_to, r.path.as_str()) {
        (Some(p), "/go") => Response::raw(format!(
            "HTTP/1.1 302 Found\r\nlocation: http://127.0.0.1:{p}/landed\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        )),
        _ => Response::text(format!("seen: {}", r.head)),
    })
}

fn raw_requests(s: &Site) -> String {
    s.requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|r| format!("{}{}", r.head, String::from_utf8_lossy(&r.body)))
        .collect()
}

fn ctx(allowed: &[u16], bound: u16, uses: Arc<Uses>) -> (ToolContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let entries: Vec<String> = allowed.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let policy = Arc::new(EgressPolicy::allowlist(entries).expect("policy"));
    let mut ctx = ToolContext::new("t", dir.path().join("files"));
    ctx.egress = Some(Arc::new(EgressClient::new(
        policy,
        ClientOptions::default(),
    )));
    ctx.secrets = Secrets::new(
        vec![Secret {
            name: "crm_token".into(),
            value: SecretValue::new(VALUE.into()),
            origins: Vec::new(),
            hosts: vec![format!("127.0.0.1:{bound}")],
        }],
        Some(uses),
    );
    (ctx, dir)
}

#[tokio::test]
async fn a_secret_header_goes_to_its_bound_host_only_and_never_into_the_result() {
    let bound = site(None);
    let other = site(None);
    let uses = Arc::new(Uses::default());
    let (ctx, _d) = ctx(&[bound.port(), other.port()], bound.port(), uses.clone());
    let args = |port: u16| {
        json!({"url": format!("http://127.0.0.1:{port}/api"),
               "headers": {"Authorization": "Bearer {{secret:crm_token}}"}})
    };

    let out = HttpRequest
        .execute(&ctx, args(bound.port()))
        .await
        .expect("sent to the bound host");
    assert!(
        raw_requests(&bound).contains(&format!("Bearer {VALUE}")),
        "the bound server did not get the value: {}",
        raw_requests(&bound)
    );
    // The server echoes the request head back; forge's redactor (in the runtime) replaces it,
    // but the tool itself must not add the value anywhere else: here the echo is the only place.
    assert_eq!(out.text.matches(VALUE).count(), 1, "{}", out.text);
    assert_eq!(
        ctx.secrets.redact(&out.text).matches(VALUE).count(),
        0,
        "redaction left the value"
    );
    let seen = uses.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert_eq!(
        seen,
        vec![format!(
            "crm_token http://127.0.0.1:{} http_request",
            bound.port()
        )]
    );

    let err = HttpRequest
        .execute(&ctx, args(other.port()))
        .await
        .expect_err("refused for an unbound host");
    let msg = err.to_string();
    assert!(
        msg.contains("crm_token") && msg.contains("nothing was sent"),
        "{msg}"
    );
    assert!(!msg.contains(VALUE), "{msg}");
    assert!(
        other
            .requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty(),
        "the unbound server received a request"
    );

    let err = HttpRequest
        .execute(
            &ctx,
            json!({"url": format!("http://127.0.0.1:{}/api", bound.port()),
                   "headers": {"Authorization": "{{secret:nope}}"}}),
        )
        .await
        .expect_err("unknown secret");
    assert!(err.to_string().contains("crm_token"), "{err}");
}

#[tokio::test]
async fn a_secret_header_is_dropped_on_a_redirect_to_another_origin() {
    let target = site(None);
    let bound = site(Some(target.port()));
    let uses = Arc::new(Uses::default());
    let (ctx, _d) = ctx(&[bound.port(), target.port()], bound.port(), uses);
    HttpRequest
        .execute(
            &ctx,
            json!({"url": format!("http://127.0.0.1:{}/go", bound.port()),
                   "headers": {"X-Crm-Key": "{{secret:crm_token}}"}}),
        )
        .await
        .expect("followed the redirect");
    assert!(
        raw_requests(&bound).contains(VALUE),
        "the bound host got no value"
    );
    let landed = raw_requests(&target);
    assert!(
        landed.contains("/landed"),
        "redirect not followed: {landed}"
    );
    assert!(
        !landed.contains(VALUE),
        "the value followed the redirect: {landed}"
    );
}

#[test]
fn bound_origin_of_a_url_has_its_default_port() {
    let o = BoundOrigin::of_url("https://Portal.Example.com/login").expect("origin");
    assert_eq!(o.to_string(), "https://portal.example.com:443");
}

#[tokio::test]
async fn a_secret_cut_in_two_by_max_bytes_shows_none_of_its_start() {
    let bound = site(None);
    let uses = Arc::new(Uses::default());
    let (ctx, _d) = ctx(&[bound.port()], bound.port(), uses);
    let args = |max: Option<usize>| {
        let mut a = json!({"url": format!("http://127.0.0.1:{}/api", bound.port()),
                           "headers": {"Authorization": "Bearer {{secret:crm_token}}"}});
        if let Some(m) = max {
            a["max_bytes"] = json!(m);
        }
        a
    };
    HttpRequest
        .execute(&ctx, args(None))
        .await
        .expect("first request");
    // The body is "seen: " and the request head, which holds the value: cut 8 bytes into it.
    let head = bound
        .requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .first()
        .map(|r| r.head.clone())
        .expect("the server saw the first request");
    let at = "seen: ".len() + head.find(VALUE).expect("the value in the head");
    let out = HttpRequest
        .execute(&ctx, args(Some(at + 8)))
        .await
        .expect("second request");
    assert!(out.text.contains("body cut at"), "{}", out.text);
    assert!(!out.text.contains(&VALUE[..8]), "{}", out.text);
    assert!(out.text.contains("(secret crm_token, cut)"), "{}", out.text);
}
