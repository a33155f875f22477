//! Manager lifecycle for real: refusing to run unproxied, crash and hang recovery, clean
//! shutdown, session cap and idle timeout, and egress containment of everything a page can send.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use forge_browser::{
    browser_tools, BrowserConfig, BrowserError, BrowserManager, BrowserToolOptions,
};
use forge_testkit::browser::*;
use forge_testkit::site::{Request, Response, Site};
use forge_tools::{Tool, ToolContext};
use serde_json::json;

fn tool(m: &Arc<BrowserManager>, name: &str) -> Arc<dyn Tool> {
    browser_tools(m.clone(), BrowserToolOptions::default())
        .into_iter()
        .find(|t| t.name() == name)
        .expect("tool")
}

async fn simple_server() -> Site {
    Site::serve(Arc::new(|r: &Request| match r.path.as_str() {
        "/ping" => Response::html("pong"),
        _ => Response::html("<!doctype html><title>Simple</title><button>Hello</button>"),
    }))
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
    if forge_testkit::require_browser("crash recovery").is_none() {
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
    if forge_testkit::require_browser("hang recovery").is_none() {
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
    if forge_testkit::require_browser("shutdown").is_none() {
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
    if forge_testkit::require_browser("egress containment").is_none() {
        return;
    }
    let kind = match confined {
        false => None,
        true => match forge_testkit::gates::require_namespace("confined canary") {
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
    let server = Site::serve(Arc::new(move |r: &Request| match r.path.as_str() {
        "/ping" => Response::html("pong"),
        _ => Response::html(page.clone()),
    }));
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
    if forge_testkit::require_browser("no default tab").is_none() {
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
    if forge_testkit::require_browser("browser environment").is_none() {
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
    if forge_testkit::require_browser("idle reaping").is_none() {
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

/// Every host the proxy was asked for, allowed or not.
#[derive(Clone, Default)]
struct SeenHosts(Arc<std::sync::Mutex<Vec<(String, forge_egress::proxy::Outcome)>>>);

impl forge_egress::proxy::EgressObserver for SeenHosts {
    fn on_decision(&self, d: &forge_egress::proxy::Decision) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((d.host.to_ascii_lowercase(), d.outcome));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_start_asks_google_for_nothing() {
    if forge_testkit::require_browser("quiet start").is_none() {
        return;
    }
    let server = simple_server().await;
    let policy = Arc::new(
        forge_egress::policy::EgressPolicy::allowlist([format!(
            "127.0.0.1:{}",
            server.addr.port()
        )
        .as_str()])
        .expect("policy"),
    );
    let seen = SeenHosts::default();
    let (addr, _proxy) = forge_egress::proxy::EgressProxy::serve(
        policy,
        forge_egress::proxy::ProxyOptions {
            observer: Some(Arc::new(seen.clone())),
            ..forge_egress::proxy::ProxyOptions::default()
        },
    )
    .await
    .expect("proxy");
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(addr, forge_browser::RefusalLog::new(), tmp.path()));
    let ctx = ToolContext::new("quiet", tmp.path().join("files"));
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("navigate");
    // Chromium's start-up requests came within a second of launch and retried after 1 s and
    // 3.5 s (measured without the flags); keep a page open well past that.
    tokio::time::sleep(Duration::from_secs(6)).await;
    m.shutdown().await;
    let seen = seen.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // The check can see requests: the page's own one went through this proxy.
    let page_host = format!("127.0.0.1:{}", server.addr.port());
    assert!(
        seen.iter()
            .any(|(h, o)| (h == "127.0.0.1" || *h == page_host)
                && *o == forge_egress::proxy::Outcome::Allowed),
        "the proxy never saw the page's request: {seen:?}"
    );
    let google: Vec<_> = seen
        .iter()
        .filter(|(h, _)| {
            ["google", "gstatic", "gvt1", "doubleclick", "youtube"]
                .iter()
                .any(|g| h.contains(g))
        })
        .collect();
    assert!(google.is_empty(), "Chromium asked Google hosts: {google:?}");
    // Nothing but the page itself was asked for at all.
    assert!(
        seen.iter()
            .all(|(h, _)| h == "127.0.0.1" || *h == page_host),
        "other requests: {seen:?}"
    );
}

/// The crashes a manager reported.
#[derive(Default)]
struct Crashes(std::sync::Mutex<Vec<forge_browser::BrowserCrash>>);

impl forge_browser::CrashObserver for Crashes {
    fn on_crash(&self, crash: &forge_browser::BrowserCrash) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(crash.clone());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_calls_is_said_once_and_audited() {
    if forge_testkit::require_browser("crash notice").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let crashes = Arc::new(Crashes::default());
    let m = Arc::new(manager(addr, log, tmp.path()).with_crash_observer(crashes.clone()));
    let a = ToolContext::new("task-a", tmp.path().join("files"));
    let b = ToolContext::new("task-b", tmp.path().join("files"));
    let nav = tool(&m, "browser_navigate");
    let state = tool(&m, "browser_state");
    for ctx in [&a, &b] {
        let out = nav
            .execute(ctx, json!({"url": server.url("/")}))
            .await
            .expect("navigate");
        assert!(!out.text.contains("notice:"), "{}", out.text);
    }
    let pid = m.browser_pid().await.expect("running");
    unsafe {
        libc::kill(pid as i32, libc::SIGKILL);
    }
    // Between two calls: wait (bounded) until the manager has seen the death.
    let mut noticed = false;
    for _ in 0..200 {
        if m.browser_pid().await.is_none() {
            noticed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(noticed, "the manager never saw Chromium die");
    assert!(crashes.0.lock().expect("crashes").is_empty(), "not yet");

    // Session a's next call relaunches and says so, in the text and in the data.
    let out = state.execute(&a, json!({})).await.expect("relaunched");
    assert_eq!(m.launch_count(), 2);
    let (text, data) = (out.text.clone(), out.data.clone().unwrap_or_default());
    assert!(
        text.starts_with("notice: the browser restarted after a crash")
            && text.contains("this session's pages, tabs and cookies are gone"),
        "{text}"
    );
    assert!(
        data["notice"]
            .as_str()
            .is_some_and(|n| n.contains("restarted after a crash")),
        "{data}"
    );
    // It observes the fresh browser's blank tab, not the old page.
    assert!(!text.contains("button \"Hello\""), "{text}");
    // Once: the next call of the same session says nothing about it.
    let again = state.execute(&a, json!({})).await.expect("state");
    assert!(!again.text.contains("notice:"), "{}", again.text);
    assert!(
        again.data.unwrap_or_default().get("notice").is_none(),
        "no notice in the data either"
    );

    // Session b, whose first call after the crash fails (its ref died with the old page), gets
    // the notice in the error, once.
    let click = tool(&m, "browser_click");
    let err = click
        .execute(&b, json!({"ref": "e1"}))
        .await
        .expect_err("e1 is gone with the old page");
    let msg = err.to_string();
    assert!(
        msg.contains("notice: the browser restarted after a crash"),
        "{msg}"
    );
    let out = state.execute(&b, json!({})).await.expect("state");
    assert!(!out.text.contains("notice:"), "{}", out.text);

    // The observer (the audit log in forge-runtime) heard of it once, with both sessions.
    let seen = crashes.0.lock().expect("crashes").clone();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].pid, pid);
    assert_eq!(
        seen[0].sessions,
        vec!["task-a".to_string(), "task-b".into()]
    );
    assert!(seen[0].relaunching);
    assert!(!seen[0].reason.is_empty());
    // An intentional shutdown is no crash.
    m.shutdown().await;
    assert_eq!(crashes.0.lock().expect("crashes").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_close_ends_a_session_and_the_hook_hears_every_end_with_its_reason() {
    use forge_browser::{CloseReason, SessionOptions};
    if forge_testkit::require_browser("session ends").is_none() {
        return;
    }
    let server = simple_server().await;
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.path().to_path_buf());
    cfg.idle_timeout = Duration::from_millis(600);
    let m = Arc::new(BrowserManager::new(cfg).with_refusals(log));
    let heard: Arc<std::sync::Mutex<Vec<(String, CloseReason)>>> = Arc::default();
    let h = heard.clone();
    m.set_on_session_closed(Arc::new(move |k: &str, why| {
        h.lock().expect("hook lock").push((k.to_string(), why))
    }));
    let close = tool(&m, "browser_close");

    // browser_close on a session that does not exist opens nothing and says so.
    let ctx = ToolContext::new("conv-1", tmp.path().join("files"));
    let out = close.execute(&ctx, json!({})).await.expect("close");
    assert_eq!(out.data, Some(json!({"closed": false})), "{}", out.text);
    assert_eq!(m.launch_count(), 0, "closing launched nothing");

    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/")}))
        .await
        .expect("navigate");
    assert!(m.has_session("conv-1").await);
    let out = close.execute(&ctx, json!({})).await.expect("close");
    assert_eq!(out.data, Some(json!({"closed": true})), "{}", out.text);
    assert!(!m.has_session("conv-1").await);
    assert_eq!(m.session_count().await, 0);

    // A session keeps the scope and proxy it was created with; a later call cannot change them.
    let scope = json!({"allowed_hosts": [format!("127.0.0.1:{}", server.addr.port())]});
    let s = m
        .session_with(
            "conv-2",
            &SessionOptions {
                proxy: None,
                scope: Some(scope.clone()),
            },
        )
        .await
        .expect("session");
    assert_eq!(s.scope(), Some(&scope));
    assert_eq!(s.proxy(), addr);
    let again = m
        .session_with(
            "conv-2",
            &SessionOptions {
                proxy: None,
                scope: Some(json!({"allowed_hosts": ["*.example.org"]})),
            },
        )
        .await
        .expect("same session");
    assert_eq!(again.scope(), Some(&scope), "the first scope stays");
    let far = SessionOptions {
        proxy: Some("10.1.2.3:8080".parse().expect("addr")),
        scope: None,
    };
    assert!(matches!(
        m.session_with("conv-x", &far).await,
        Err(BrowserError::ProxyNotLoopback(_))
    ));
    drop((s, again));

    // conv-2 is left alone: the timer closes it. Bounded: 50 checks, 5 s.
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !m.has_session("conv-2").await {
            break;
        }
    }
    m.session("conv-3").await.expect("session");
    m.shutdown().await;
    let heard = heard.lock().expect("hook lock").clone();
    assert_eq!(
        heard,
        vec![
            ("conv-1".to_string(), CloseReason::Closed),
            ("conv-2".to_string(), CloseReason::Idle),
            ("conv-3".to_string(), CloseReason::Shutdown),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_time_counts_from_the_end_of_a_call_not_its_start() {
    if forge_testkit::require_browser("idle after a long call").is_none() {
        return;
    }
    // The page shows "ready" 2.5 s after it loads: navigate waits for it, so the call lasts longer
    // than the idle timeout (1.5 s).
    let server = Site::serve(Arc::new(|_r: &Request| {
        Response::html(
            "<!doctype html><title>Slow</title><body><script>setTimeout(() => document.body.append('ready'), 2500)</script></body>",
        )
    }));
    let (addr, _proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.path().to_path_buf());
    cfg.idle_timeout = Duration::from_millis(1500);
    let m = Arc::new(BrowserManager::new(cfg).with_refusals(log));
    let ctx = ToolContext::new("long-call", tmp.path().join("files"));
    let started = Instant::now();
    tool(&m, "browser_navigate")
        .execute(&ctx, json!({"url": server.url("/"), "wait_for": "ready"}))
        .await
        .expect("navigate");
    assert!(
        started.elapsed() > Duration::from_millis(1500),
        "precondition: the call outlasted the idle timeout ({:?})",
        started.elapsed()
    );
    // The timer checks every 375 ms: after 700 ms it has looked at least once. Counted from the
    // call's start the session would be idle for more than 1.5 s and closed; from its end, not.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        m.has_session("long-call").await,
        "the session was closed as idle right after a long call"
    );
    m.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_its_own_proxy_goes_through_it_and_is_never_reused_under_another() {
    if forge_testkit::require_browser("per-session proxy").is_none() {
        return;
    }
    let server = simple_server().await;
    let site = format!("127.0.0.1:{}", server.addr.port());
    // The agent's proxy allows the site; the task's own proxy allows nothing.
    let (agent_proxy, _p1, log) = proxy(std::slice::from_ref(&site)).await;
    let (task_proxy, _p2, _log2) = proxy(&[]).await;
    let tmp = tempfile::tempdir().expect("tmp");
    let m = Arc::new(manager(agent_proxy, log, tmp.path()));
    m.set_session_proxy("scoped", Some(task_proxy));
    let nav = tool(&m, "browser_navigate");
    // The task's proxy answers 403 with its reason (this test wires no refusal log to the task
    // proxy, so the page shows the proxy's answer rather than a tool error).
    let refused = match nav
        .execute(
            &ToolContext::new("scoped", tmp.path().join("files")),
            json!({"url": server.url("/")}),
        )
        .await
    {
        Ok(o) => o.text,
        Err(e) => e.to_string(),
    };
    assert!(
        refused.contains("blocked by egress policy") && refused.contains("403"),
        "{refused}"
    );
    nav.execute(
        &ToolContext::new("plain", tmp.path().join("files")),
        json!({"url": server.url("/")}),
    )
    .await
    .expect("the agent's proxy allows it");
    let navs = m.navigations("plain").await;
    assert!(
        navs.iter()
            .any(|n| n.url == server.url("/") && n.status == 200),
        "{navs:?}"
    );
    assert!(
        !m.navigations("scoped")
            .await
            .iter()
            .any(|n| n.status == 200),
        "the scoped session loaded nothing"
    );
    // The open session is not handed out under another proxy.
    m.set_session_proxy("scoped", None);
    let err = m.session("scoped").await.err().expect("scope changed");
    assert!(matches!(err, BrowserError::ScopeChanged(_)), "{err}");
    m.close_session("scoped").await;
    m.session("scoped")
        .await
        .expect("a fresh session after close");
    m.shutdown().await;
}

/// Chromium's parent-death signal (it dies with forge) is tied to the thread that forks it, and
/// tokio's threads come and go: a browser launched from a blocking-pool thread that then ends
/// (idle for longer than its keep-alive) must keep running, answering and unkilled.
#[test]
fn a_browser_launched_from_a_thread_that_then_ends_keeps_running() {
    if forge_testkit::require_browser("lifeline thread").is_none() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_keep_alive(Duration::from_millis(50))
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().expect("tmp");
    let (server, _proxy, m) = rt.block_on(async {
        let server = simple_server().await;
        let (addr, proxy, log) = proxy(&[format!("127.0.0.1:{}", server.addr.port())]).await;
        (server, proxy, Arc::new(manager(addr, log, tmp.path())))
    });
    let launcher = m.clone();
    rt.block_on(async {
        tokio::task::spawn_blocking(move || {
            tokio::runtime::Handle::current()
                .block_on(launcher.session("a"))
                .map(|_| ())
        })
        .await
    })
    .expect("the blocking task ran")
    .expect("launch from a blocking-pool thread");
    let profile = rt.block_on(m.profile_dir()).expect("profile");
    // The blocking-pool thread ends 50 ms after going idle; give it (and a parent-death signal
    // that would follow) ample time.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !processes_mentioning(&profile.display().to_string()).is_empty(),
        "Chromium still runs after the thread that launched it ended"
    );
    let ctx = ToolContext::new("a", tmp.path().join("files"));
    let out = rt
        .block_on(tool(&m, "browser_navigate").execute(&ctx, json!({"url": server.url("/")})))
        .expect("the same browser still answers");
    assert!(out.text.contains("Simple"), "{}", out.text);
    assert_eq!(m.launch_count(), 1, "no relaunch");
    rt.block_on(m.shutdown());
    assert!(processes_mentioning(&profile.display().to_string()).is_empty());
}
