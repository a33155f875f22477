//! The seed's checks against the real proxy on loopback: allowed over CONNECT and plain HTTP,
//! a non-allowed domain, the metadata IP, and private IPs with and without `allow_private_ips`.

mod common;

use std::sync::Arc;

use common::*;
use forge_egress::policy::{EgressMode, EgressPolicy, EgressSettings};
use forge_egress::proxy::{EgressProxy, Outcome, ProxyOptions, REASON_HEADER};
use forge_egress::resolve::StaticResolver;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start(
    policy: EgressPolicy,
    resolver: StaticResolver,
) -> (
    std::net::SocketAddr,
    forge_egress::proxy::ProxyHandle,
    LoopbackDialer,
    Arc<Collect>,
) {
    let dialer = LoopbackDialer::default();
    let observer = Arc::new(Collect::default());
    let opts = ProxyOptions {
        observer: Some(observer.clone()),
        resolver: Arc::new(resolver),
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let (addr, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    (addr, handle, dialer, observer)
}

#[tokio::test]
async fn proxy_binds_loopback_only() {
    let (addr, handle, _, _) = start(
        EgressPolicy::allowlist(["example.com"]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    assert!(addr.ip().is_loopback());
    assert_ne!(addr.port(), 0);
    assert_eq!(handle.url(), format!("http://{addr}"));
    handle.shutdown().await;
}

#[tokio::test]
async fn allowed_host_over_plain_http_is_forwarded_with_host_rewritten() {
    let up = http_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, dialer, obs) = start(
        EgressPolicy::allowlist([entry.as_str()]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    let r = raw(
        proxy,
        &format!(
            "GET http://{entry}/hello?x=1 HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic eA==\r\n\
             X-Forwarded-For: 1.2.3.4\r\nForwarded: for=1.2.3.4\r\nX-Keep: yes\r\nConnection: close\r\n\r\n"
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert!(
        r.body.contains(&format!("host={entry}")),
        "Host rewritten to the URI authority: {}",
        r.body
    );
    assert!(r.body.contains("path=/hello?x=1"), "{}", r.body);
    assert!(r.body.contains("x-keep"), "{}", r.body);
    for stripped in ["proxy-authorization", "x-forwarded-for", "forwarded"] {
        assert!(
            !r.body.contains(stripped),
            "{stripped} must be stripped: {}",
            r.body
        );
    }
    assert_eq!(dialer.attempts(), 1);
    let d = obs.wait_for(1).await;
    assert_eq!(d[0].outcome, Outcome::Allowed);
    assert_eq!(d[0].chosen, Some(up));
    assert_eq!(d[0].resolved, vec![up.ip()]);
    assert!(d[0].bytes_down > 0);
    assert!(d[0].reason.to_string().contains(&entry), "{}", d[0].reason);
    handle.shutdown().await;
}

#[tokio::test]
async fn an_absolute_uri_without_a_path_asks_the_upstream_for_slash() {
    let up = http_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, _, _) = start(
        EgressPolicy::allowlist([entry.as_str()]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    // (target sent to the proxy, path the upstream must see)
    for (target, want) in [
        (format!("http://{entry}#x"), "path=/ "),
        (format!("http://{entry}"), "path=/ "),
        (format!("http://{entry}?q=1"), "path=/?q=1 "),
    ] {
        let r = raw(
            proxy,
            &format!("GET {target} HTTP/1.1\r\nHost: {entry}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert_eq!(r.status, 200, "{target}: {r:?}");
        assert!(r.body.contains(want), "{target}: {}", r.body);
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn allowed_host_over_connect_tunnels_bytes() {
    let up = http_upstream().await;
    let entry = format!("localhost:{}", up.port());
    let (proxy, handle, dialer, obs) = start(
        EgressPolicy::allowlist([entry.as_str()]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    let (r, tunnel) = connect_via(proxy, &entry).await;
    assert_eq!(r.status, 200, "{r:?}");
    let mut t = tunnel.unwrap();
    t.write_all(b"GET /through-tunnel HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(STEP, t.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("path=/through-tunnel"), "{out}");
    assert_eq!(dialer.attempts(), 1);
    assert!(dialer.dialed()[0].ip().is_loopback());
    // The decision is reported when the tunnel ends, i.e. once the client side closes too.
    drop(t);
    let d = obs.wait_for(1).await;
    assert_eq!(d[0].method, "CONNECT");
    assert_eq!(d[0].outcome, Outcome::Allowed);
    assert!(d[0].bytes_up > 0 && d[0].bytes_down > 0, "{:?}", d[0]);
    if cfg!(target_os = "linux") {
        assert!(
            d[0].reason.to_string().contains("zero-copy splice relay"),
            "{}",
            d[0].reason
        );
    }
    handle.shutdown().await;
}

#[tokio::test]
async fn bytes_sent_right_after_the_connect_head_reach_the_upstream() {
    let up = http_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (proxy, handle, _, _) = start(
        EgressPolicy::allowlist([entry.as_str()]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    // CONNECT head and the first tunneled request in one write (a client that does not wait).
    s.write_all(
        format!("CONNECT {entry} HTTP/1.1\r\nHost: {entry}\r\n\r\nGET /eager HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(STEP, s.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("path=/eager"), "{out}");
    handle.shutdown().await;
}

#[tokio::test]
async fn non_allowed_domain_is_blocked_with_reason_and_no_dial() {
    let (proxy, handle, dialer, obs) = start(
        EgressPolicy::allowlist(["example.com"]).unwrap(),
        StaticResolver::new().with("evil.test", [ip("93.184.216.34")]),
    )
    .await;
    let (r, _) = connect_via(proxy, "evil.test:443").await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("blocked-host"));
    assert!(
        r.body
            .starts_with("blocked by egress policy: evil.test is not in this agent's allowlist"),
        "{}",
        r.body
    );
    let r = get_via(proxy, "http://evil.test/", "evil.test").await;
    assert_eq!(r.status, 403);
    assert!(r
        .body
        .starts_with("blocked by egress policy: evil.test is not in this agent's allowlist"));
    assert_eq!(dialer.attempts(), 0);
    let d = obs.wait_for(2).await;
    assert!(d
        .iter()
        .all(|d| d.outcome == Outcome::Blocked && d.chosen.is_none()));
    handle.shutdown().await;
}

#[tokio::test]
async fn metadata_ip_is_blocked_by_the_ip_rule_even_in_dev_open() {
    let policy = EgressPolicy::new(EgressSettings {
        mode: Some(EgressMode::DevOpen),
        ..Default::default()
    })
    .unwrap();
    let (proxy, handle, dialer, _) = start(policy, StaticResolver::new()).await;
    let r = get_via(
        proxy,
        "http://169.254.169.254/latest/meta-data/",
        "169.254.169.254",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(r.header(REASON_HEADER).as_deref(), Some("blocked-ip"));
    assert!(
        r.body
            .starts_with("blocked by egress policy: 169.254.169.254 is a cloud metadata address"),
        "{}",
        r.body
    );
    assert_eq!(dialer.attempts(), 0);
    handle.shutdown().await;
}

#[tokio::test]
async fn private_ip_blocked_without_allow_private_ips_and_allowed_with_it() {
    let settings = |allow| EgressSettings {
        mode: Some(EgressMode::Allowlist),
        allowed_domains: vec!["internal.test".into(), "10.0.0.5".into()],
        allow_private_ips: allow,
        ..Default::default()
    };
    let resolver = || StaticResolver::new().with("internal.test", [ip("10.0.0.5")]);

    let (proxy, handle, dialer, _) =
        start(EgressPolicy::new(settings(false)).unwrap(), resolver()).await;
    for url in ["http://internal.test/", "http://10.0.0.5/"] {
        let r = get_via(proxy, url, "x").await;
        assert_eq!(r.status, 403, "{url}");
        assert_eq!(r.header(REASON_HEADER).as_deref(), Some("blocked-ip"));
        assert!(
            r.body.contains("10.0.0.5") && r.body.contains("private"),
            "{}",
            r.body
        );
    }
    assert_eq!(dialer.attempts(), 0);
    handle.shutdown().await;

    // Allowed by policy: the proxy dials 10.0.0.5:80 (the test dialer refuses to leave loopback, so
    // the proxy answers 502, which proves the policy let it through to the dial).
    let (proxy, handle, dialer, obs) =
        start(EgressPolicy::new(settings(true)).unwrap(), resolver()).await;
    for url in ["http://internal.test/", "http://10.0.0.5/"] {
        let r = get_via(proxy, url, "x").await;
        assert_eq!(r.status, 502, "{url}: {r:?}");
        assert_eq!(r.header(REASON_HEADER).as_deref(), Some("upstream-error"));
    }
    assert_eq!(dialer.dialed(), vec!["10.0.0.5:80".parse().unwrap(); 2]);
    let d = obs.wait_for(2).await;
    assert!(d.iter().all(|d| d.outcome == Outcome::Failed));
    handle.shutdown().await;
}

#[tokio::test]
async fn tls_through_a_connect_tunnel_end_to_end() {
    let tls_up = routed_upstream(
        |r| {
            (
                200,
                vec![],
                format!("tls upstream saw {}", r.path).into_bytes(),
            )
        },
        true,
    )
    .await;
    let entry = format!("localhost:{}", tls_up.port());
    let (proxy, handle, dialer, _) = start(
        EgressPolicy::allowlist([entry.as_str()]).unwrap(),
        StaticResolver::new(),
    )
    .await;
    let (r, tunnel) = connect_via(proxy, &entry).await;
    assert_eq!(r.status, 200);
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(test_roots())
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg));
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio::time::timeout(STEP, connector.connect(name, tunnel.unwrap()))
        .await
        .unwrap()
        .unwrap();
    tls.write_all(b"GET /secret-path HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(STEP, tls.read_to_end(&mut out))
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("tls upstream saw /secret-path"), "{out}");
    assert_eq!(dialer.attempts(), 1);
    handle.shutdown().await;
}
