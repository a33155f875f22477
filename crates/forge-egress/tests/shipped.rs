//! The proxy as `forge egress serve` and `forge run` run it: on a thread of its own
//! ([`ProxyThread`]), with the default pool limits, under many keep-alive clients of one host.
//! Everything on loopback.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{Decision, EgressObserver, EgressProxy, Outcome, ProxyOptions};
use forge_egress::thread::ProxyThread;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Records the name of the thread each decision was reported on.
#[derive(Default)]
struct ThreadNames(Mutex<Vec<(Outcome, Option<String>)>>);

impl EgressObserver for ThreadNames {
    fn on_decision(&self, d: &Decision) {
        let name = std::thread::current().name().map(str::to_string);
        self.0.lock().unwrap().push((d.outcome, name));
    }
}

/// Threads of this process named `egress-proxy` (from /proc/self/task/*/comm).
fn proxy_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .filter(|c| c.trim() == "egress-proxy")
                .count()
        })
        .unwrap_or(0)
}

#[tokio::test]
async fn a_proxy_on_its_own_thread_decides_there_serves_extra_listeners_and_its_thread_ends() {
    let up = keep_alive_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let names = Arc::new(ThreadNames::default());
    let thread = ProxyThread::start().unwrap();
    let before = proxy_threads();
    assert!(before >= 1, "the proxy thread runs");
    let opts = ProxyOptions {
        observer: Some(names.clone()),
        dialer: Arc::new(LoopbackDialer::default()),
        thread: Some(thread),
        ..Default::default()
    };
    let policy = EgressPolicy::allowlist([entry.as_str()]).unwrap();
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();

    let ok = get_via(proxy, &format!("http://{entry}/a"), "ignored").await;
    assert_eq!((ok.status, ok.body.as_str()), (200, "ok"));
    let refused = get_via(proxy, "http://169.254.169.254/latest", "ignored").await;
    assert_eq!(refused.status, 403);
    // A listener added later (as a confined child's namespace listener is) is served too.
    let extra = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let extra_addr = extra.local_addr().unwrap();
    let guard = handle.entry().serve_listener(extra).unwrap();
    let via_extra = get_via(extra_addr, &format!("http://{entry}/b"), "ignored").await;
    assert_eq!(via_extra.status, 200);

    // Bounded wait for the three decisions (reported when each exchange has ended).
    for _ in 0..200 {
        if names.0.lock().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let seen = names.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(seen.iter().any(|(o, _)| *o == Outcome::Blocked), "{seen:?}");
    for (_, name) in &seen {
        assert_eq!(name.as_deref(), Some("egress-proxy"), "{seen:?}");
    }

    drop(guard);
    tokio::time::timeout(STEP, handle.shutdown())
        .await
        .expect("shutdown within the step limit");
    // The proxy held the last clone of its thread: once it is gone, the thread ends.
    for _ in 0..200 {
        if proxy_threads() < before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        proxy_threads(),
        before - 1,
        "the proxy thread ended with its proxy"
    );
}

#[tokio::test]
async fn fifty_keep_alive_clients_of_one_host_reuse_upstream_connections() {
    const CLIENTS: usize = 50;
    const EACH: usize = 10;
    let up = keep_alive_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let dialer = LoopbackDialer::default();
    let opts = ProxyOptions {
        dialer: Arc::new(dialer.clone()),
        ..Default::default()
    };
    let policy = EgressPolicy::allowlist([entry.as_str()]).unwrap();
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();
    let url = format!("http://{entry}/x");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut c = TcpStream::connect(proxy).await.unwrap();
                for _ in 0..EACH {
                    let r = tokio::time::timeout(STEP, async {
                        c.write_all(format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                            .await
                            .unwrap();
                        read_response(&mut c).await.unwrap()
                    })
                    .await
                    .expect("answered within the step limit");
                    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    // With room for one idle connection per busy client, upstream connections are reused: at
    // most one per client plus a few replaced at checkout (a connection hyper had not yet marked
    // ready). With 8 kept per decision (the old default) the clients past 8 dialed anew again
    // and again: 195 dials for these 500 requests in a run here.
    let dials = dialer.attempts();
    assert!(
        dials <= 2 * CLIENTS,
        "{dials} upstream dials for {} requests",
        CLIENTS * EACH
    );
    handle.shutdown().await;
}
