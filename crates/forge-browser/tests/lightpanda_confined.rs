//! Lightpanda confined in a network namespace of its own (issue 26: "a child of the Lightpanda
//! process ignoring the proxy reaches nothing"), with the real Lightpanda binary, the real egress
//! proxy and real programs (nsenter, curl): the Lightpanda process forge started for a session
//! lives in a network namespace that is not forge's; a process started inside that namespace
//! (`nsenter --target <lightpanda pid> --net`), ignoring every proxy setting, reaches neither a
//! canary on the host's loopback (0 hits) nor another address, while inside the same namespace
//! the proxy listener answers with forge's policy and the session's pages load through it. Its
//! CDP endpoint listens only inside that namespace. (The page canary — fetch, img, WebSocket,
//! beacon, worker, EventSource — under Lightpanda is in lightpanda.rs.)
#![cfg(target_os = "linux")]
// Printing is allowed here (test output: skip notices and diagnostics).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use forge_browser::EngineKind;
use forge_testkit::browser::*;
use forge_testkit::site::{Canary, Request, Response, Site};
use serde_json::json;

/// The Lightpanda processes whose HOME is under `root` (forge gives each Lightpanda a throwaway
/// HOME under the manager's temp root, so these are this fixture's), by pid.
fn lightpanda_pids_under(root: &Path) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.file_name().and_then(|n| n.to_str()) != Some("lightpanda") {
            continue;
        }
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let home_here = env.split(|b| *b == 0).any(|var| {
            var.strip_prefix(b"HOME=")
                .is_some_and(|h| Path::new(std::str::from_utf8(h).unwrap_or("")).starts_with(root))
        });
        if home_here {
            out.push(pid);
        }
    }
    out
}

/// `curl URL` inside the network namespace of `pid`, ignoring any proxy (a direct request).
fn direct_curl(pid: u32, url: &str) -> Output {
    in_netns_of(
        pid,
        &["curl", "-sS", "--max-time", "5", "--noproxy", "*", url],
    )
}

/// Runs `args` inside the network namespace of `pid` (nsenter, no other namespace), with an
/// empty environment (no proxy variables), bounded by curl's own `--max-time` and a 30 s wait.
fn in_netns_of(pid: u32, args: &[&str]) -> Output {
    let mut child = Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .arg("--")
        .args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("nsenter starts (util-linux)");
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("`nsenter ... {}` did not end within 30 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn text(o: &Output) -> String {
    format!(
        "status {}; stdout: {}; stderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// True when this process may enter another network namespace (nsenter needs CAP_SYS_ADMIN over
/// it): effective uid 0 here; the namespace forge makes as root, or as a user namespace owned by
/// root's, is then enterable.
fn may_enter_namespaces() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap_or(false)
}

#[test]
fn a_process_in_lightpandas_namespace_ignoring_the_proxy_reaches_nothing() {
    const TEST: &str = "a_process_in_lightpandas_namespace_ignoring_the_proxy_reaches_nothing";
    if forge_testkit::require_lightpanda(TEST).is_none() {
        return;
    }
    if forge_testkit::gates::require_namespace(TEST).is_none() {
        return;
    }
    if !may_enter_namespaces() {
        forge_testkit::skip_unless_required_by(
            "FORGE_REQUIRE_CONFINEMENT",
            &format!("{TEST}: entering Lightpanda's network namespace (nsenter) needs root"),
        );
        return;
    }
    let canary = Canary::start();
    let site = Site::start(|r: &Request| match r.path.as_str() {
        "/inside.html" => Response::html(
            "<!doctype html><title>Inside page</title><p>Loaded through the proxy.</p>",
        ),
        "/plain" => Response::bare(200, "hello through the proxy"),
        _ => Response::not_found(),
    });
    let Some(b) = Shared::start_engine(
        TEST,
        &[site.entry()],
        Confine::WhereAvailable,
        EngineKind::Lightpanda,
    ) else {
        return;
    };
    assert!(b.manager.is_confined(), "the fixture confines Lightpanda");

    // A session's page loads: through the proxy, the only way out of the namespace.
    let ctx = b.context("lp-ns");
    let nav = b
        .run_tool(
            &ctx,
            "browser_navigate",
            json!({"url": site.url("/inside.html")}),
        )
        .expect("navigate through the proxy");
    assert!(nav.contains("Inside page"), "{nav}");
    assert!(nav.contains("Loaded through the proxy."), "{nav}");
    let site_hits_after_page = site.hits();
    assert!(site_hits_after_page >= 1, "the page came from the site");

    // The Lightpanda process forge started for the session, and its namespace.
    let pids = lightpanda_pids_under(b.tmp.path());
    assert_eq!(
        pids.len(),
        1,
        "one Lightpanda process for the one session: {pids:?}"
    );
    let pid = pids[0];
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .expect("Lightpanda's netns")
        .ino();
    let ours = std::fs::metadata("/proc/self/ns/net")
        .expect("our netns")
        .ino();
    assert_ne!(theirs, ours, "Lightpanda shares forge's network namespace");

    // Inside: the proxy listener(s) and Lightpanda's CDP port; the CDP port is not in ours.
    let inside = loopback_listeners(&pid.to_string());
    let proxy_port = forge_egress::confine::CHILD_PROXY_PORT;
    assert!(inside.contains(&proxy_port), "{inside:?}");
    let cdp: Vec<u16> = inside
        .iter()
        .copied()
        .filter(|p| {
            !(proxy_port..=proxy_port + forge_browser::devtools_relay::SPARE_PROXIES).contains(p)
        })
        .collect();
    assert_eq!(cdp.len(), 1, "one CDP listener inside: {inside:?}");
    assert!(
        !loopback_listeners("self").contains(&cdp[0]),
        "Lightpanda's CDP port {} also listens in forge's namespace",
        cdp[0]
    );

    // The probe really runs in Lightpanda's namespace (not ours, not a fresh one).
    let ns = in_netns_of(pid, &["readlink", "/proc/self/ns/net"]);
    assert!(ns.status.success(), "{}", text(&ns));
    assert_eq!(
        String::from_utf8_lossy(&ns.stdout).trim(),
        format!("net:[{theirs}]"),
        "{}",
        text(&ns)
    );

    // Ignoring the proxy: the canary on the host's loopback is not reachable from there.
    let direct = format!("http://127.0.0.1:{}/direct", canary.port());
    let r = direct_curl(pid, &direct);
    assert!(!r.status.success(), "direct curl must fail: {}", text(&r));
    // Nor is the allowlisted site itself, directly: the namespace has no route to it.
    let r = direct_curl(pid, &site.url("/plain"));
    assert!(!r.status.success(), "direct curl must fail: {}", text(&r));
    assert_eq!(
        site.hits(),
        site_hits_after_page,
        "the site was reached directly"
    );
    // Nor any other address (no route out of the namespace).
    let r = direct_curl(pid, "http://10.255.255.1:80/");
    assert!(!r.status.success(), "{}", text(&r));

    // Control, same namespace: through the proxy listener the allowlisted site answers (so the
    // failures above are the wall, not a broken probe) ...
    let proxy_url = forge_egress::confine::CHILD_PROXY_URL;
    let ok = in_netns_of(
        pid,
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            "-x",
            proxy_url,
            &site.url("/plain"),
        ],
    );
    assert!(ok.status.success(), "{}", text(&ok));
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "hello through the proxy"
    );
    assert_eq!(site.hits(), site_hits_after_page + 1);
    // ... and forge's policy still decides there: the canary is not allowlisted (403).
    let refused = in_netns_of(
        pid,
        &[
            "curl",
            "-sS",
            "--max-time",
            "10",
            "-x",
            proxy_url,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &direct,
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&refused.stdout),
        "403",
        "{}",
        text(&refused)
    );
    canary.assert_untouched("a process in Lightpanda's namespace ignoring the proxy");

    // The session still works after all that.
    let state = b.run_tool(&ctx, "browser_state", json!({})).expect("state");
    assert!(state.contains("Loaded through the proxy."), "{state}");
    b.rt.block_on(b.manager.close_session("lp-ns"));
    b.rt.block_on(b.manager.shutdown());
}
