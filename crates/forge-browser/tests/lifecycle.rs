//! Manager lifecycle for real: refusing to run unproxied, crash and hang recovery, clean
//! shutdown, session cap and idle timeout, and egress containment of everything a page can send.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use forge_browser::{
    browser_tools, BrowserConfig, BrowserError, BrowserManager, BrowserToolOptions,
};
use forge_tools::{Tool, ToolContext};
use serde_json::json;

fn tool(m: &Arc<BrowserManager>, name: &str) -> Arc<dyn Tool> {
    browser_tools(m.clone(), BrowserToolOptions::default())
        .into_iter()
        .find(|t| t.name() == name)
        .expect("tool")
}

async fn simple_server() -> TestServer {
    TestServer::start(Arc::new(|r: &Request| match r.path.as_str() {
        "/ping" => Response::html("pong"),
        _ => Response::html("<!doctype html><title>Simple</title><button>Hello</button>"),
    }))
    .await
}

#[tokio::test]
async fn refuses_to_start_without_a_proxy_and_launches_nothing() {
    let m = BrowserManager::new(BrowserConfig::default());
    let err = m.session("s").await.err().expect("no proxy is an error");
    assert!(matches!(err, BrowserError::NoProxy), "{err}");
    assert!(
        err.to_string()
            .contains("refuses to start without an egress proxy"),
        "{err}"
    );
    assert_eq!(m.launch_count(), 0);
    let m = BrowserManager::new(BrowserConfig {
        proxy: Some("10.0.0.1:8080".parse().expect("addr")),
        ..BrowserConfig::default()
    });
    let err = m.session("s").await.err().expect("non-loopback proxy");
    assert!(matches!(err, BrowserError::ProxyNotLoopback(_)), "{err}");
    let m = BrowserManager::new(BrowserConfig {
        proxy: Some("127.0.0.1:9".parse().expect("addr")),
        binary: Some("/nonexistent/chromium-for-forge".into()),
        ..BrowserConfig::default()
    });
    let err = m.session("s").await.err().expect("missing binary");
    assert!(
        err.to_string().contains("/nonexistent/chromium-for-forge"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_mid_session_gives_a_clear_error_and_the_next_call_relaunches() {
    if browser_or_skip("crash recovery").is_none() {
        return;
    }
    let server = simple_server().await;
    // A server that accepts and never answers, so a navigation is in flight when Chromium dies.
    let hang = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let hang_addr = hang.local_addr().expect("addr");
    let held = Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let h2 = held.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = hang.accept().await {
            h2.lock().await.push(s);
        }
    });
    let (addr, _proxy, log) = proxy(&[
        format!("127.0.0.1:{}", server.addr.port()),
        format!("127.0.0.1:{}", hang_addr.port()),
    ])
    .await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(addr, log, tmp.path()));
    let ctx = ToolContext::new("crash", tmp.path().join("files"));
    let nav = tool(&m, "browser_navigate");
    nav.execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("first navigation");
    let pid = m.browser_pid().await.expect("running");
    let profile = m.profile_dir().await.expect("profile");
    assert!(profile.exists());

    let in_flight = {
        let nav = nav.clone();
        let ctx = ctx.clone();
        let url = format!("http://{hang_addr}/slow");
        tokio::spawn(async move {
            let t = Instant::now();
            (nav.execute(&ctx, json!({"url": url})).await, t.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    let (res, took) = tokio::time::timeout(Duration::from_secs(20), in_flight)
        .await
        .expect("bounded")
        .expect("join");
    let err = res.expect_err("the call in flight fails");
    let msg = err.to_string();
    assert!(
        msg.contains("Chromium") && msg.contains("next browser call starts a fresh browser"),
        "{msg}"
    );
    assert!(
        took < Duration::from_secs(10),
        "failed promptly, took {took:?}"
    );

    let out = tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("relaunched");
    assert!(out.text.contains("button \"Hello\""), "{}", out.text);
    assert_eq!(m.launch_count(), 2);
    assert_ne!(m.browser_pid().await, Some(pid));
    // Nothing of the dead browser is left.
    assert!(
        processes_mentioning(&profile.display().to_string()).is_empty(),
        "old processes remain"
    );
    assert!(!profile.exists(), "old profile dir removed");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_browser_is_detected_killed_and_replaced() {
    if browser_or_skip("hang recovery").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(addr, log, tmp.path()));
    let ctx = ToolContext::new("hang", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("first");
    let pid = m.browser_pid().await.expect("running");
    let profile = m.profile_dir().await.expect("profile");
    // Freeze the whole browser (every process of its group).
    unsafe {
        libc::killpg(pid as i32, libc::SIGSTOP);
    }
    let t = Instant::now();
    let err = tool(&m, "browser_state")
        .execute(&ctx, json!({}))
        .await
        .expect_err("hung");
    assert!(err.to_string().contains("stopped responding"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(15),
        "detected in {:?}",
        t.elapsed()
    );
    let out = tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("relaunched");
    assert!(out.text.contains("Hello"));
    assert!(
        processes_mentioning(&profile.display().to_string()).is_empty(),
        "frozen processes were killed"
    );
    assert!(!profile.exists());
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_leaves_no_process_and_no_profile_dir_and_limits_hold() {
    if browser_or_skip("shutdown").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.path().to_path_buf());
    cfg.max_sessions = 2;
    let m = Arc::new(BrowserManager::new(cfg).with_refusals(log));
    let ctx = ToolContext::new("one", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("nav");
    let profile = m.profile_dir().await.expect("profile");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(profile.join("profile"))
            .expect("profile")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "profile dir is private");
    }
    assert!(
        !processes_mentioning(&profile.display().to_string()).is_empty(),
        "browser runs from the profile"
    );
    m.session("two").await.expect("second session");
    let err = m.session("three").await.err().expect("cap");
    assert!(matches!(err, BrowserError::TooManySessions(2)), "{err}");
    m.close_session("two").await;
    m.session("three").await.expect("room again after close");

    m.shutdown().await;
    assert!(
        processes_mentioning(&profile.display().to_string()).is_empty(),
        "no process left"
    );
    assert!(!profile.exists(), "profile dir removed");
    assert_eq!(
        std::fs::read_dir(tmp.path())
            .expect("tmp")
            .filter(|e| e
                .as_ref()
                .map(|e| e
                    .file_name()
                    .to_string_lossy()
                    .starts_with("forge-browser-"))
                .unwrap_or(false))
            .count(),
        0
    );

    // Idle sessions are closed on the next session request.
    let tmp2 = tempfile::tempdir().expect("tmp");
    let (addr2, _proxy2, log2) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let mut cfg = BrowserConfig::with_proxy(addr2);
    cfg.temp_root = Some(tmp2.path().to_path_buf());
    cfg.idle_timeout = Duration::from_millis(200);
    let m2 = BrowserManager::new(cfg).with_refusals(log2);
    m2.session("idle").await.expect("session");
    tokio::time::sleep(Duration::from_millis(400)).await;
    m2.session("fresh").await.expect("session");
    assert_eq!(m2.session_count().await, 1, "the idle session was closed");
    m2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_traffic_to_a_non_allowlisted_port_never_arrives() {
    page_canary(false).await;
}

/// The same canary page with Chromium confined in a network namespace of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_traffic_never_arrives_with_chromium_confined() {
    page_canary(true).await;
}

async fn page_canary(confined: bool) {
    if browser_or_skip("egress containment").is_none() {
        return;
    }
    let kind = match confined {
        false => None,
        true => match confinement_or_skip("confined canary") {
            Some(k) => Some(k),
            None => return,
        },
    };
    // The canary: TCP and UDP on the same loopback port, counting every connection and datagram.
    let canary = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("canary");
    let cport = canary.local_addr().expect("addr").port();
    let udp = tokio::net::UdpSocket::bind(("127.0.0.1", cport))
        .await
        .expect("udp canary");
    let hits = Arc::new(AtomicUsize::new(0));
    let (h1, h2) = (hits.clone(), hits.clone());
    tokio::spawn(async move {
        while canary.accept().await.is_ok() {
            h1.fetch_add(1, Ordering::SeqCst);
        }
    });
    tokio::spawn(async move {
        let mut buf = [0u8; 2048];
        while udp.recv_from(&mut buf).await.is_ok() {
            h2.fetch_add(1, Ordering::SeqCst);
        }
    });
    let page = format!(
        r#"<!doctype html><title>canary</title><body><script>
const C = 'http://127.0.0.1:{cport}';
fetch(C + '/fetch').catch(() => {{}});
new Image().src = C + '/img';
try {{ new WebSocket('ws://127.0.0.1:{cport}/ws'); }} catch (e) {{}}
try {{ navigator.sendBeacon(C + '/beacon', 'x'); }} catch (e) {{}}
try {{ new EventSource(C + '/sse'); }} catch (e) {{}}
const src = "fetch('" + C + "/worker').catch(() => {{}}); try {{ new WebSocket('ws://127.0.0.1:{cport}/wsw'); }} catch (e) {{}}";
new Worker(URL.createObjectURL(new Blob([src], {{type: 'text/javascript'}})));
try {{
  const pc = new RTCPeerConnection({{iceServers: [{{urls: 'stun:127.0.0.1:{cport}'}}, {{urls: 'turn:127.0.0.1:{cport}?transport=tcp', username: 'u', credential: 'p'}}, {{urls: 'turn:127.0.0.1:{cport}?transport=udp', username: 'u', credential: 'p'}}]}});
  pc.createDataChannel('x');
  pc.createOffer().then((o) => pc.setLocalDescription(o));
}} catch (e) {{}}
fetch('/ping').then(() => {{ document.title = 'control reached'; }});
</script><img src="{{C}}/static-img"></body>"#
    )
    .replace("{C}", &format!("http://127.0.0.1:{cport}"));
    let server = TestServer::start(Arc::new(move |r: &Request| match r.path.as_str() {
        "/ping" => Response::html("pong"),
        _ => Response::html(page.clone()),
    }))
    .await;
    let (addr, proxy_handle, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(match kind {
        Some(k) => confined_manager(addr, &proxy_handle, k, log.clone(), tmp.path()),
        None => manager(addr, log.clone(), tmp.path()),
    });
    let ctx = ToolContext::new("canary", tmp.path().join("files"));
    let started = Instant::now();
    tool(&m, "browser_navigate").execute(&ctx, json!({"url": server.url("/canary.html"), "wait_for": "never-present-text", "timeout_ms": 3000})).await.expect("nav");
    let out = tool(&m, "browser_state")
        .execute(&ctx, json!({}))
        .await
        .expect("state");
    // The positive control went through the proxy to the allowlisted server.
    assert!(out.text.contains("page: control reached"), "{}", out.text);
    assert!(server
        .paths
        .lock()
        .expect("paths")
        .iter()
        .any(|p| p == "/ping"));
    // The proxy saw and refused the page's attempts (so they were really made).
    let refused = log.hosts_since(started - Duration::from_secs(1));
    assert!(
        refused.iter().any(|h| h.contains("127.0.0.1")),
        "refusals: {refused:?}"
    );
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the canary was reached");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_has_no_default_tab_and_outlives_its_last_session() {
    if browser_or_skip("no default tab").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(addr, log, tmp.path()));
    let ctx = ToolContext::new("only", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("nav");
    let page = m.active_page("only").await.expect("page");
    let targets = page
        .execute(chromiumoxide::cdp::browser_protocol::target::GetTargetsParams::default())
        .await
        .expect("targets")
        .result
        .target_infos;
    let kinds: Vec<String> = targets
        .iter()
        .map(|t| format!("{} {}", t.r#type, t.url))
        .collect();
    // The session's tab only: no startup tab, no preloaded browser UI pages.
    assert_eq!(
        targets.iter().filter(|t| t.r#type == "page").count(),
        1,
        "{kinds:?}"
    );
    assert!(
        targets.iter().all(|t| t.r#type != "browser_ui"),
        "{kinds:?}"
    );
    let pid = m.browser_pid().await.expect("pid");
    m.close_session("only").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        m.browser_pid().await,
        Some(pid),
        "still running with no tab"
    );
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("nav again");
    assert_eq!(m.launch_count(), 1, "no relaunch");
    m.shutdown().await;
}

/// Every process of the browser: the launched one and its descendants (renderers, GPU, zygotes).
fn browser_tree(root: u32) -> Vec<u32> {
    let mut all = vec![root];
    // Bounded: a Chromium has a few dozen processes at most.
    for _ in 0..8 {
        let mut grew = false;
        for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if all.contains(&pid) {
                continue;
            }
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // Field 4 (after the parenthesised name) is the parent pid.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if ppid.is_some_and(|p| all.contains(&p)) {
                all.push(pid);
                grew = true;
            }
        }
        if !grew {
            break;
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_and_its_renderers_see_none_of_forges_environment() {
    if browser_or_skip("browser environment").is_none() {
        return;
    }
    // A variable this test process has (cargo sets it for every test run), standing in for an
    // API key or the runtime token: the check below is real only if forge has it.
    let canary = "CARGO_MANIFEST_DIR";
    assert!(
        std::env::var_os(canary).is_some(),
        "cargo sets CARGO_MANIFEST_DIR for tests"
    );
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(addr, log, tmp.path()));
    let ctx = ToolContext::new("env", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("navigate");
    let pid = m.browser_pid().await.expect("running");
    let profile = m.profile_dir().await.expect("profile");
    let procs = browser_tree(pid);
    assert!(procs.len() >= 3, "browser, renderer and more: {procs:?}");
    let mut read = 0;
    for p in &procs {
        let Ok(raw) = std::fs::read(format!("/proc/{p}/environ")) else {
            continue; // exited meanwhile
        };
        read += 1;
        let vars: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|v| !v.is_empty())
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect();
        assert!(
            !vars.iter().any(|v| v.starts_with(&format!("{canary}="))),
            "process {p} sees forge's environment: {vars:?}"
        );
        // Some children (sandboxed renderers) run with an emptier environment still; where a
        // HOME is set it is the browser's own, and the browser process must have it.
        let home = vars.iter().find_map(|v| v.strip_prefix("HOME="));
        if home.is_some() || *p == pid {
            let home = home.unwrap_or("");
            assert!(
                profile
                    .parent()
                    .is_some_and(|d| std::path::Path::new(home).starts_with(d)),
                "process {p}: HOME {home:?} is not inside the throwaway dir {profile:?}"
            );
        }
    }
    assert!(read >= 3, "read the environment of {read} processes");
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_are_closed_on_a_timer_without_another_call() {
    if browser_or_skip("idle reaping").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.path().to_path_buf());
    cfg.idle_timeout = Duration::from_millis(400);
    let m = Arc::new(BrowserManager::new(cfg).with_refusals(log));
    let ctx = ToolContext::new("idle", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("navigate");
    assert_eq!(m.session_count().await, 1);
    // No browser call from here on: only the timer can close it. Bounded: 50 checks, 5 s.
    let t = Instant::now();
    let mut closed = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if m.session_count().await == 0 {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "the idle session was still open after {:?}",
        t.elapsed()
    );
    assert_eq!(m.launch_count(), 1, "the browser itself stays up");
    m.shutdown().await;
}
