//! Hostile inputs against the real proxy: IP spellings, IPv6 embeddings, metadata hosts, wildcard DNS
//! answers, allowlist edge cases, userinfo and parser confusion, bad ports, CONNECT targets, a Host
//! header that disagrees with the URI, mixed and rebinding DNS answers. Every refusal must be decided
//! with zero dial attempts (the dialer records every attempt).

mod common;

use std::sync::Arc;

use common::*;
use forge_egress::policy::{EgressMode, EgressPolicy, EgressSettings};
use forge_egress::proxy::{EgressProxy, ProxyOptions, REASON_HEADER};
use forge_egress::resolve::StaticResolver;

/// (what, raw request with `{UP}` for the upstream port, expected status, expected reason header
/// (`None`: answered by hyper's parser, no header), expected dial attempts).
type Row = (&'static str, &'static str, u16, Option<&'static str>, usize);

const G: &str = "\r\nConnection: close\r\n\r\n";

fn get(url: &str) -> String {
    format!("GET {url} HTTP/1.1\r\nHost: x{G}")
}
fn connect(auth: &str) -> String {
    format!("CONNECT {auth} HTTP/1.1\r\nHost: {auth}\r\n\r\n")
}

#[rustfmt::skip]
fn rows() -> Vec<(&'static str, String, u16, Option<&'static str>, usize)> {
    let g: Vec<Row> = vec![
        // IPv4 spellings: only canonical dotted quads are IPs; the rest is malformed, not looked up.
        ("loopback literal without port entry", "http://127.0.0.1/", 403, Some("blocked-ip"), 0),
        ("short form 127.1", "http://127.1/", 400, Some("malformed"), 0),
        ("single zero", "http://0/", 400, Some("malformed"), 0),
        ("dotless decimal", "http://2130706433/", 400, Some("malformed"), 0),
        ("hex dotless", "http://0x7f000001/", 400, Some("malformed"), 0),
        ("hex octet", "http://0x7f.0.0.1/", 400, Some("malformed"), 0),
        ("octal octet", "http://0177.0.0.1/", 400, Some("malformed"), 0),
        ("leading zero", "http://127.0.0.01/", 400, Some("malformed"), 0),
        ("three-part overflow", "http://8.8.2056/", 400, Some("malformed"), 0),
        ("five parts", "http://1.2.3.4.5/", 400, Some("malformed"), 0),
        ("octet over 255", "http://256.0.0.1/", 400, Some("malformed"), 0),
        ("numeric TLD", "http://example.123/", 400, Some("malformed"), 0),
        // Always-blocked IPv4.
        ("cloud metadata", "http://169.254.169.254/latest/meta-data/", 403, Some("blocked-ip"), 0),
        ("ECS metadata", "http://169.254.170.2/", 403, Some("blocked-ip"), 0),
        ("Alibaba metadata", "http://100.100.100.200/", 403, Some("blocked-ip"), 0),
        ("Oracle metadata", "http://192.0.0.192/", 403, Some("blocked-ip"), 0),
        ("unspecified", "http://0.0.0.0/", 403, Some("blocked-ip"), 0),
        ("broadcast", "http://255.255.255.255/", 403, Some("blocked-ip"), 0),
        ("multicast", "http://224.0.0.1/", 403, Some("blocked-ip"), 0),
        ("benchmarking", "http://198.18.0.1/", 403, Some("blocked-ip"), 0),
        ("documentation", "http://192.0.2.1/", 403, Some("blocked-ip"), 0),
        ("CGNAT", "http://100.64.0.1/", 403, Some("blocked-ip"), 0),
        ("reserved", "http://240.0.0.1/", 403, Some("blocked-ip"), 0),
        ("private", "http://192.168.1.1/", 403, Some("blocked-ip"), 0),
        // IPv6 and IPv4 embedded in IPv6.
        ("v6 loopback", "http://[::1]/", 403, Some("blocked-ip"), 0),
        ("v6 unspecified", "http://[::]/", 403, Some("blocked-ip"), 0),
        ("v4-mapped loopback", "http://[::ffff:127.0.0.1]/", 403, Some("blocked-ip"), 0),
        ("v4-mapped loopback, hex", "http://[::ffff:7f00:1]:{UP}/", 403, Some("blocked-ip"), 0),
        ("v4-mapped metadata", "http://[::ffff:a9fe:a9fe]/", 403, Some("blocked-ip"), 0),
        ("v4-compatible loopback", "http://[::127.0.0.1]/", 403, Some("blocked-ip"), 0),
        ("v4-translated private", "http://[::ffff:0:10.0.0.1]/", 403, Some("blocked-ip"), 0),
        ("NAT64 metadata", "http://[64:ff9b::a9fe:a9fe]/", 403, Some("blocked-ip"), 0),
        ("NAT64 local-use", "http://[64:ff9b:1::1]/", 403, Some("blocked-ip"), 0),
        ("6to4 metadata", "http://[2002:a9fe:a9fe::]/", 403, Some("blocked-ip"), 0),
        ("6to4 loopback", "http://[2002:7f00:1::1]/", 403, Some("blocked-ip"), 0),
        ("Teredo", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", 403, Some("blocked-ip"), 0),
        ("ISATAP loopback", "http://[2606:4700::5efe:7f00:1]/", 403, Some("blocked-ip"), 0),
        ("link-local v6", "http://[fe80::1]/", 403, Some("blocked-ip"), 0),
        ("AWS v6 metadata", "http://[fd00:ec2::254]/", 403, Some("blocked-ip"), 0),
        ("ULA private", "http://[fd12::1]/", 403, Some("blocked-ip"), 0),
        ("v6 multicast", "http://[ff02::1]/", 403, Some("blocked-ip"), 0),
        ("v6 documentation", "http://[2001:db8::1]/", 403, Some("blocked-ip"), 0),
        ("v6 zone id", "http://[fe80::1%25eth0]/", 400, None, 0),
        // Metadata host names and names resolving to internal addresses.
        ("metadata name even when listed", "http://metadata.google.internal/", 403, Some("blocked-host"), 0),
        ("wildcard DNS to private", "http://wild.example.org/", 403, Some("blocked-ip"), 0),
        ("nip.io-style name to loopback", "http://127.0.0.1.example.org/", 403, Some("blocked-ip"), 0),
        ("name to loopback on listed port", "http://loop.example.org:{UP}/", 403, Some("blocked-ip"), 0),
        ("name to v4-mapped loopback", "http://mapped.example.org/", 403, Some("blocked-ip"), 0),
        ("mixed public and metadata answers", "http://mixed.example.org/", 403, Some("blocked-ip"), 0),
        ("mixed public and private answers", "http://mixed2.example.org/", 403, Some("blocked-ip"), 0),
        // Allowlist edge cases.
        ("apex is not matched by *.", "http://example.org/", 403, Some("blocked-host"), 0),
        ("suffix confusion", "http://badexample.com/", 403, Some("blocked-host"), 0),
        ("allowed name as prefix", "http://example.com.evil.test/", 403, Some("blocked-host"), 0),
        ("double trailing dot", "http://example.com../", 400, Some("malformed"), 0),
        ("empty label", "http://a..example.org/", 400, Some("malformed"), 0),
        ("over-long label", "http://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.org/", 400, Some("malformed"), 0),
        ("case and trailing dot are normalised", "http://EXAMPLE.com./", 502, Some("upstream-error"), 1),
        ("any-depth subdomain", "http://a.b.example.org/", 502, Some("upstream-error"), 1),
        ("punycode lookalike not listed", "http://xn--exmple-cua.com/", 403, Some("blocked-host"), 0),
        ("invalid punycode", "http://xn--a.example.org/", 400, Some("malformed"), 0),
        // Userinfo and parser confusion.
        ("userinfo", "http://user@example.com/", 400, Some("malformed"), 0),
        ("userinfo hiding the host", "http://example.com@evil.test/", 400, Some("malformed"), 0),
        ("percent-encoded dot", "http://example.com%2eevil.test/", 400, None, 0),
        ("percent in host", "http://exa%6dple.com/", 400, None, 0),
        ("underscore name not listed", "http://a_b.test/", 403, Some("blocked-host"), 0),
        // Ports.
        ("allowed host on another port", "http://example.com:8080/", 403, Some("blocked-port"), 0),
        ("port zero", "http://example.com:0/", 400, None, 0),
        ("port too large", "http://example.com:65536/", 400, None, 0),
        ("https port for plain http", "http://example.com:443/", 403, Some("blocked-port"), 0),
    ];
    let c: Vec<Row> = vec![
        ("CONNECT allowed host on 443", "example.com:443", 502, Some("upstream-error"), 1),
        ("CONNECT allowed host on 80", "example.com:80", 403, Some("blocked-port"), 0),
        ("CONNECT allowed host on 22", "example.com:22", 403, Some("blocked-port"), 0),
        ("CONNECT listed port only", "api.example.net:443", 403, Some("blocked-port"), 0),
        ("CONNECT listed port", "api.example.net:8443", 502, Some("upstream-error"), 1),
        ("CONNECT raw public IP not listed", "93.184.216.34:443", 403, Some("blocked-host"), 0),
        ("CONNECT metadata IP", "169.254.169.254:443", 403, Some("blocked-ip"), 0),
        ("CONNECT loopback on another port", "127.0.0.1:22", 403, Some("blocked-ip"), 0),
        ("CONNECT localhost not listed", "localhost:{UP}", 403, Some("blocked-host"), 0),
        ("CONNECT v6 loopback", "[::1]:443", 403, Some("blocked-ip"), 0),
        ("CONNECT without port", "example.com", 400, None, 0),
        ("CONNECT double port", "example.com:443:443", 400, None, 0),
        ("CONNECT short-form IP", "127.1:443", 400, Some("malformed"), 0),
        ("CONNECT userinfo", "user@example.com:443", 400, None, 0),
        ("CONNECT absolute URI", "http://example.com:443/", 400, None, 0),
        ("CONNECT port zero", "example.com:0", 400, None, 0),
    ];
    let mut out: Vec<(&'static str, String, u16, Option<&'static str>, usize)> = Vec::new();
    for (what, url, s, r, d) in g {
        out.push((what, get(url), s, r, d));
    }
    for (what, auth, s, r, d) in c {
        out.push((what, connect(auth), s, r, d));
    }
    // Requests that are not absolute-form http.
    out.push(("origin-form request", format!("GET / HTTP/1.1\r\nHost: example.com{G}"), 400, Some("malformed"), 0));
    out.push(("absolute https URI (use CONNECT)", get("https://example.com/"), 400, Some("malformed"), 0));
    out.push(("ftp scheme", get("ftp://example.com/"), 400, Some("malformed"), 0));
    out.push(("CONNECT with a body", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nContent-Length: 5\r\n\r\nhello".into(), 400, Some("malformed"), 0));
    // The URI decides, not the Host header.
    out.push((
        "Host header names an allowed upstream, URI a blocked host",
        "GET http://evil.test/ HTTP/1.1\r\nHost: 127.0.0.1:{UP}\r\nConnection: close\r\n\r\n".into(),
        403,
        Some("blocked-host"),
        0,
    ));
    out
}

fn resolver() -> StaticResolver {
    StaticResolver::new()
        .with("example.com", [ip("93.184.216.34")])
        .with("a.b.example.org", [ip("93.184.216.35")])
        .with("api.example.net", [ip("93.184.216.36")])
        .with("metadata.google.internal", [ip("169.254.169.254")])
        .with("wild.example.org", [ip("10.1.2.3")])
        .with("127.0.0.1.example.org", [ip("127.0.0.1")])
        .with("loop.example.org", [ip("127.0.0.1")])
        .with("mapped.example.org", [ip("::ffff:127.0.0.1")])
        .with(
            "mixed.example.org",
            [ip("93.184.216.34"), ip("169.254.169.254")],
        )
        .with("mixed2.example.org", [ip("93.184.216.34"), ip("10.0.0.1")])
        .with("evil.test", [ip("93.184.216.37")])
        .with("example.com.evil.test", [ip("93.184.216.37")])
        .with("badexample.com", [ip("93.184.216.37")])
}

#[tokio::test]
async fn hostile_inputs_are_refused_without_dialing() {
    let up = http_upstream().await;
    let upp = up.port().to_string();
    let policy = EgressPolicy::new(EgressSettings {
        mode: Some(EgressMode::Allowlist),
        allowed_domains: vec![
            "example.com".into(),
            "*.example.org".into(),
            "api.example.net:8443".into(),
            "metadata.google.internal".into(),
            format!("127.0.0.1:{upp}"),
            // A name listed with the upstream's port: the port is allowed, the loopback answer is not
            // (only entries naming loopback itself unlock it).
            format!("loop.example.org:{upp}"),
            "169.254.169.254".into(),
            "[::1]".into(),
        ],
        ..Default::default()
    })
    .unwrap();
    let dialer = LoopbackDialer::default();
    let opts = ProxyOptions {
        resolver: Arc::new(resolver()),
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    let mut failures = Vec::new();
    let rows = rows();
    for (what, req, status, reason, dials) in &rows {
        let req = req.replace("{UP}", &upp);
        let before = dialer.attempts();
        let r = if req.starts_with("CONNECT") {
            let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut s, req.as_bytes())
                .await
                .unwrap();
            tokio::time::timeout(STEP, read_response(&mut s))
                .await
                .unwrap()
                .unwrap()
        } else {
            raw(proxy, &req).await
        };
        let got_dials = dialer.attempts() - before;
        let got_reason = r.header(REASON_HEADER);
        let reason_ok = reason.is_none_or(|want| got_reason.as_deref() == Some(want));
        if r.status != *status || !reason_ok || got_dials != *dials {
            failures.push(format!(
                "{what}: got {} {:?} with {got_dials} dials, want {status} {reason:?} with {dials} dials; body {:?}",
                r.status, got_reason, r.body
            ));
        }
        if r.status == 403 && !r.body.starts_with("blocked by egress policy: ") {
            failures.push(format!("{what}: 403 body {:?}", r.body));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    // Every dial that did happen went to a validated public address (the test dialer refuses to
    // leave loopback, hence the 502s above).
    for a in dialer.dialed() {
        assert!(a.ip().to_string().starts_with("93.184.216."), "dialed {a}");
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn rebinding_answers_are_resolved_once_and_the_validated_address_is_dialed() {
    let resolver = StaticResolver::new().with_sequence(
        "rebind.example.org",
        vec![vec![ip("93.184.216.34")], vec![ip("127.0.0.1")]],
    );
    let policy = EgressPolicy::allowlist(["*.example.org"]).unwrap();
    let dialer = LoopbackDialer::default();
    let opts = ProxyOptions {
        resolver: Arc::new(resolver.clone()),
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    let r = get_via(proxy, "http://rebind.example.org/", "rebind.example.org").await;
    assert_eq!(
        r.status, 502,
        "validated public answer dialed (and refused by the loopback-only test dialer)"
    );
    assert_eq!(
        resolver.lookups("rebind.example.org"),
        1,
        "resolved exactly once"
    );
    assert_eq!(dialer.dialed(), vec!["93.184.216.34:80".parse().unwrap()]);
    // The next connection resolves again and gets the rebound loopback answer: refused, no dial.
    let r = get_via(proxy, "http://rebind.example.org/", "rebind.example.org").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("blocked-ip"));
    assert_eq!(resolver.lookups("rebind.example.org"), 2);
    assert_eq!(dialer.attempts(), 1);
    handle.shutdown().await;
}

#[tokio::test]
async fn loopback_upstream_reachable_only_through_its_explicit_entry() {
    let up = http_upstream().await;
    let policy = EgressPolicy::allowlist([format!("127.0.0.1:{}", up.port())]).unwrap();
    let dialer = LoopbackDialer::default();
    let opts = ProxyOptions {
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    let ok = get_via(
        proxy,
        &format!("http://127.0.0.1:{}/", up.port()),
        "whatever",
    )
    .await;
    assert_eq!(ok.status, 200);
    for other in [
        format!("http://127.0.0.2:{}/", up.port()),
        format!("http://localhost:{}/", up.port()),
        format!("http://[::1]:{}/", up.port()),
    ] {
        let r = get_via(proxy, &other, "x").await;
        assert_eq!(r.status, 403, "{other}: {r:?}");
    }
    assert_eq!(dialer.attempts(), 1);
    handle.shutdown().await;
}
