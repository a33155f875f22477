//! Chromium confined in a network namespace of its own (real Chromium, real proxy): its network
//! namespace differs from forge's, its DevTools endpoint listens only inside it, pages load through
//! the proxy, and spare proxy listeners inside its namespace can be handed out.
//! (The page canary under confinement is in lifecycle.rs.)

use std::os::unix::fs::MetadataExt;

use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_runs_in_its_own_network_namespace_with_devtools_inside() {
    if forge_testkit::require_browser("chromium confined").is_none() {
        return;
    }
    let Some(kind) = forge_testkit::gates::require_namespace("chromium confined") else {
        return;
    };
    let server = Site::serve(std::sync::Arc::new(|_r: &Request| {
        Response::html("<title>inside</title><p>hello</p>")
    }));
    let (addr, proxy_handle, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = confined_manager(addr, &proxy_handle, kind, log, tmp.path());
    assert!(m.is_confined());
    let session = m.session("a").await.expect("confined session");
    drop(session);
    let pid = m.browser_pid().await.expect("chromium runs");
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .expect("ns")
        .ino();
    let ours = std::fs::metadata("/proc/self/ns/net").expect("ns").ino();
    assert_ne!(theirs, ours, "Chromium shares forge's network namespace");

    // Inside: the proxy listeners and DevTools; none of DevTools is in forge's namespace.
    let inside = loopback_listeners(&pid.to_string());
    assert!(inside.contains(&3128), "{inside:?}");
    let devtools: Vec<u16> = inside
        .iter()
        .copied()
        .filter(|p| !(3128..=3128 + forge_browser::devtools_relay::SPARE_PROXIES).contains(p))
        .collect();
    assert_eq!(
        devtools.len(),
        1,
        "one DevTools listener inside: {inside:?}"
    );
    let outside = loopback_listeners("self");
    assert!(
        !outside.contains(&devtools[0]),
        "DevTools port {} also listens in forge's namespace",
        devtools[0]
    );

    // Pages load through the proxy inside the namespace.
    let page = m.active_page("a").await.expect("page");
    page.goto(server.url("/")).await.expect("navigate");
    let title = page.get_title().await.expect("title");
    assert_eq!(title.as_deref(), Some("inside"));

    // Spare proxy listeners inside Chromium's namespace, served by the proxy, one at a time.
    let mut spare = Vec::new();
    let n = forge_browser::devtools_relay::SPARE_PROXIES;
    for _ in 0..n + 4 {
        match m.proxy_in_browser_namespace().await.expect("spare") {
            Some(a) => spare.push(a),
            None => break,
        }
    }
    assert_eq!(spare.len(), usize::from(n), "{spare:?}");
    assert!(spare
        .iter()
        .all(|a| a.ip().is_loopback() && (3129..=3128 + n).contains(&a.port())));
    m.shutdown().await;
}
