//! Network confinement against the real proxy and real programs (curl, sleep): a confined child
//! lives in a network namespace of its own, reaches nothing directly (not even the host's
//! loopback: a canary counts 0 hits) and reaches an allowlisted loopback site through the proxy
//! listener forge serves inside its namespace. The unprivileged path (user + network namespace)
//! runs in a re-executed copy of this test binary that drops to uid/gid 65534.
#![cfg(target_os = "linux")]
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;
use std::time::Duration;

use forge_egress::confine::{self, Availability, Confiner, NsKind, Plan};
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyHandle, ProxyOptions};
use forge_testkit::site::{Canary, Response, Site};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Set in the re-executed child that runs the unprivileged scenario.
const UNPRIV_CHILD: &str = "FORGE_TEST_CONFINE_UNPRIV_CHILD";

/// A loopback site answering `body` to every request (and counting connections).
fn counting_server(body: &'static str) -> Site {
    Site::start(move |_| Response::bare(200, body))
}

async fn proxy_allowing(site: SocketAddr) -> ProxyHandle {
    let entry = format!("127.0.0.1:{}", site.port());
    let policy = EgressPolicy::allowlist([entry.as_str()]).unwrap();
    let (_, handle) = EgressProxy::serve(Arc::new(policy), ProxyOptions::default())
        .await
        .unwrap();
    handle
}

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Run `program args` confined by `confiner`, with the child proxy variables, bounded in time.
async fn run_confined(confiner: &Confiner, program: &str, args: &[&str]) -> Ran {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HTTP_PROXY", confine::CHILD_PROXY_URL)
        .env("http_proxy", confine::CHILD_PROXY_URL)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let pending = confiner
        .prepare(cmd.as_std_mut(), &Plan::proxy_only())
        .unwrap();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => panic!("{}", pending.failure(e)),
    };
    let _serving = pending.attach().unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the confined program ends within 30 s")
        .unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The scenario both paths run: own netns, canary 0 hits, allowlisted site through the proxy.
async fn scenario(kind: NsKind) {
    let canary = Canary::start();
    let site = counting_server("hello from the allowlisted site");
    let proxy = proxy_allowing(site.addr).await;
    let confiner = Confiner::new(proxy.entry(), kind);

    // Direct, ignoring the proxy variables: nothing answers in the child's namespace.
    let direct = format!("http://127.0.0.1:{}/", canary.port());
    let r = run_confined(
        &confiner,
        "curl",
        &["-sS", "--max-time", "5", "--noproxy", "*", &direct],
    )
    .await;
    assert_ne!(r.code, 0, "direct curl must fail: {}", r.stdout);
    assert!(!r.stdout.contains("canary"), "{}", r.stdout);
    // Another address of the host (its own non-loopback ones included) is unreachable too.
    let r2 = run_confined(
        &confiner,
        "curl",
        &[
            "-sS",
            "--max-time",
            "5",
            "--noproxy",
            "*",
            "http://10.255.255.1:80/",
        ],
    )
    .await;
    assert_ne!(r2.code, 0, "{}", r2.stdout);

    // Through the proxy (HTTP_PROXY=http://127.0.0.1:3128 inside the namespace): allowed site.
    let url = format!("http://127.0.0.1:{}/x", site.port());
    let ok = run_confined(&confiner, "curl", &["-sS", "--max-time", "10", &url]).await;
    assert_eq!(ok.code, 0, "curl through the proxy: {}", ok.stderr);
    assert_eq!(ok.stdout, "hello from the allowlisted site");
    assert_eq!(site.hits(), 1);

    // The proxy's policy still decides: the canary is not allowlisted, so 403 through the proxy.
    let refused = run_confined(
        &confiner,
        "curl",
        &[
            "-sS",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            &direct,
        ],
    )
    .await;
    assert_eq!(refused.stdout, "403", "{}", refused.stderr);
    canary.assert_untouched("the confined child and the proxy's policy");
    proxy.shutdown().await;
}

#[tokio::test]
async fn confined_curl_reaches_only_the_proxy() {
    let Some(kind) = forge_testkit::require_namespace("confined_curl_reaches_only_the_proxy")
    else {
        return;
    };
    scenario(kind).await;
}

#[tokio::test]
async fn confined_child_has_its_own_network_namespace() {
    let Some(kind) =
        forge_testkit::require_namespace("confined_child_has_its_own_network_namespace")
    else {
        return;
    };
    let site = counting_server("x").addr;
    let proxy = proxy_allowing(site).await;
    let confiner = Confiner::new(proxy.entry(), kind);
    let mut cmd = tokio::process::Command::new("sleep");
    cmd.arg("10").kill_on_drop(true);
    let pending = confiner
        .prepare(cmd.as_std_mut(), &Plan::proxy_only())
        .unwrap();
    let mut child = cmd.spawn().unwrap();
    let _serving = pending.attach().unwrap();
    let pid = child.id().unwrap();
    let theirs = std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .unwrap()
        .ino();
    let ours = std::fs::metadata("/proc/self/ns/net").unwrap().ino();
    assert_ne!(theirs, ours, "the child shares forge's network namespace");
    child.kill().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn spare_listeners_and_dial_sockets_live_in_the_child_namespace() {
    let Some(kind) = forge_testkit::require_namespace("spare_listeners_and_dial_sockets") else {
        return;
    };
    let site = counting_server("x").addr;
    let proxy = proxy_allowing(site).await;
    let confiner = Confiner::new(proxy.entry(), kind);
    let mut cmd = tokio::process::Command::new("sleep");
    cmd.arg("10").kill_on_drop(true);
    let plan = Plan {
        listen_ports: vec![confine::CHILD_PROXY_PORT, 3129],
        dial_sockets: 2,
    };
    let pending = confiner.prepare(cmd.as_std_mut(), &plan).unwrap();
    let mut child = cmd.spawn().unwrap();
    let mut inside = pending.attach().unwrap();
    assert_eq!(inside.spare.len(), 1);
    assert_eq!(inside.dial.len(), 2);
    assert_eq!(inside.serve_spare().unwrap(), Some(3129));
    let sock = inside.dial.pop().unwrap();
    let mut s = confine::connect_inside(sock, 3129).await.unwrap();
    // The proxy answers on the spare port inside the namespace (origin-form: 400 from the proxy).
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    // The same port in forge's own namespace is not the child's listener.
    let sock = inside.dial.pop().unwrap();
    let err = confine::connect_inside(sock, 3130).await;
    assert!(err.is_err(), "nothing listens on 3130 inside");
    child.kill().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test]
async fn forced_fallback_names_the_reason() {
    // Read in a child process so the variable does not leak into the other tests of this binary.
    if std::env::var_os(confine::FORCE_ENV).is_some() {
        match confine::availability() {
            Availability::ProxyOnly(why) => {
                assert!(why.contains("testing the fallback"), "{why}");
                return;
            }
            other => panic!("forced fallback ignored: {other:?}"),
        }
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args(["--exact", "forced_fallback_names_the_reason", "--nocapture"])
        .env(confine::FORCE_ENV, "testing the fallback")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

/// The unprivileged path: a copy of this binary, run as uid/gid 65534, confines curl in a user +
/// network namespace.
#[tokio::test]
async fn unprivileged_user_gets_a_user_and_network_namespace() {
    if std::env::var_os(UNPRIV_CHILD).is_some() {
        // The child: not root, so only a user + network namespace can work.
        assert_ne!(unsafe { libc::geteuid() }, 0);
        match confine::probe() {
            Ok(kind) => {
                assert_eq!(kind, NsKind::UserNet);
                scenario(kind).await;
                println!("UNPRIVILEGED-SCENARIO-RAN");
            }
            Err(why) => println!("UNPRIVILEGED-FORBIDDEN: {why}"),
        }
        return;
    }
    if unsafe { libc::geteuid() } != 0 {
        // Not root: run the scenario here directly.
        match confine::probe() {
            Ok(kind) => scenario(kind).await,
            Err(why) => eprintln!(
                "SKIP unprivileged_user_gets_a_user_and_network_namespace: user namespaces are forbidden here: {why}"
            ),
        }
        return;
    }
    // Root: copy the binary where uid 65534 can run it, then run it as 65534.
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("confine-test");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    use std::os::unix::process::CommandExt;
    // Another test of this binary forking while the copy was open for writing can hold that
    // descriptor until its exec: ETXTBSY then, so retry (at most 50 times, 20 ms apart).
    let mut tries = 0;
    let out = loop {
        let r = std::process::Command::new(&exe)
            .args([
                "--exact",
                "unprivileged_user_gets_a_user_and_network_namespace",
                "--nocapture",
                "--test-threads=1",
            ])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env(UNPRIV_CHILD, "1")
            .current_dir(dir.path())
            .uid(65534)
            .gid(65534)
            .output();
        match r {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    if let Some(line) = text.lines().find(|l| l.contains("UNPRIVILEGED-FORBIDDEN")) {
        eprintln!(
            "SKIP unprivileged path: this machine forbids user namespaces to uid 65534: {line}"
        );
        return;
    }
    assert!(text.contains("UNPRIVILEGED-SCENARIO-RAN"), "{text}");
}
