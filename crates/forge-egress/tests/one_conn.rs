//! The proxy at one client connection, as `forge egress serve` and `forge run` run it (on a
//! [`ProxyThread`]): the answer is written before the observer's work for the decision (an audit
//! event) and, with a spin budget, the thread polls its own sockets before it parks, backing off
//! where spins run out. In a test
//! binary of their own: shipped.rs counts this process's proxy threads. Everything on loopback.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{
    Decision, EgressObserver, EgressProxy, Outcome, ProxyHandle, ProxyOptions,
};
use forge_egress::thread::ProxyThread;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Records every decision.
#[derive(Default)]
struct Decisions(Mutex<Vec<Decision>>);

impl EgressObserver for Decisions {
    fn on_decision(&self, d: &Decision) {
        self.0.lock().unwrap().push(d.clone());
    }
}

/// Holds the first allowed decision until released (at most [`STEP`]), then records every
/// decision: an audit log that is slow to write.
struct SlowObserver {
    release: Mutex<Option<std::sync::mpsc::Receiver<()>>>,
    seen: Mutex<Vec<Decision>>,
}

impl EgressObserver for SlowObserver {
    fn on_decision(&self, d: &Decision) {
        if d.outcome == Outcome::Allowed {
            if let Some(rx) = self.release.lock().unwrap().take() {
                let _ = rx.recv_timeout(STEP);
            }
        }
        self.seen.lock().unwrap().push(d.clone());
    }
}

#[tokio::test]
async fn the_client_gets_its_answer_before_the_observer_has_finished_with_the_decision() {
    let up = keep_alive_upstream().await;
    let entry = format!("127.0.0.1:{}", up.port());
    let (tx, rx) = std::sync::mpsc::channel();
    let observer = Arc::new(SlowObserver {
        release: Mutex::new(Some(rx)),
        seen: Mutex::new(Vec::new()),
    });
    let opts = ProxyOptions {
        observer: Some(observer.clone()),
        dialer: Arc::new(LoopbackDialer::default()),
        thread: Some(ProxyThread::start().unwrap()),
        ..Default::default()
    };
    let policy = EgressPolicy::allowlist([entry.as_str()]).unwrap();
    let (proxy, handle) = EgressProxy::serve(Arc::new(policy), opts).await.unwrap();

    // The observer holds the proxy thread for up to STEP once the exchange is done; the answer
    // must already be on its way (before the change it was written after the observer returned).
    let ok = tokio::time::timeout(
        STEP / 2,
        get_via(proxy, &format!("http://{entry}/a"), "ignored"),
    )
    .await
    .expect("the answer arrives while the observer is still busy");
    assert_eq!((ok.status, ok.body.as_str()), (200, "ok"));
    assert!(
        observer.seen.lock().unwrap().is_empty(),
        "the observer is still holding the decision"
    );
    tx.send(()).unwrap();
    // Every decision still reaches the observer, with its byte count.
    let mut seen = Vec::new();
    for _ in 0..200 {
        seen = observer.seen.lock().unwrap().clone();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (seen[0].outcome, seen[0].status, seen[0].bytes_down),
        (Outcome::Allowed, 200, 2)
    );
    tokio::time::timeout(STEP, handle.shutdown())
        .await
        .expect("shutdown within the step limit");
}

/// A proxy on `thread` allowing only `upstream`, telling `observer` its decisions.
async fn spinning_proxy(
    thread: &ProxyThread,
    upstream: std::net::SocketAddr,
    observer: Option<Arc<dyn EgressObserver>>,
) -> (std::net::SocketAddr, ProxyHandle) {
    let entry = format!("127.0.0.1:{}", upstream.port());
    let opts = ProxyOptions {
        observer,
        dialer: Arc::new(LoopbackDialer::default()),
        thread: Some(thread.clone()),
        ..Default::default()
    };
    let policy = EgressPolicy::allowlist([entry.as_str()]).unwrap();
    EgressProxy::serve(Arc::new(policy), opts).await.unwrap()
}

/// `n` requests for `upstream` on one keep-alive connection to `proxy`, with `pause` between
/// an answer and the next request; every answer is checked. The proxy thread waits for the
/// upstream and for the client in turn.
async fn sequential(
    proxy: std::net::SocketAddr,
    upstream: std::net::SocketAddr,
    n: usize,
    pause: Duration,
) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.set_nodelay(true).unwrap();
    let req = format!("GET http://{upstream}/p HTTP/1.1\r\nHost: ignored\r\n\r\n");
    for i in 0..n {
        s.write_all(req.as_bytes()).await.unwrap();
        let r = tokio::time::timeout(STEP, read_response(&mut s))
            .await
            .expect("an answer within the step limit")
            .unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "ok"), "request {i}");
        if !pause.is_zero() {
            tokio::time::sleep(pause).await;
        }
    }
}

async fn stop(handle: ProxyHandle) {
    tokio::time::timeout(STEP, handle.shutdown())
        .await
        .expect("shutdown within the step limit");
}

#[tokio::test]
async fn a_spinning_proxy_thread_sees_its_own_sockets_become_ready_and_serves_every_request() {
    const REQUESTS: usize = 100;
    let up = keep_alive_upstream().await;
    let names = Arc::new(Decisions::default());
    let thread = ProxyThread::start_with_spin(Duration::from_millis(1)).unwrap();
    let (proxy, handle) = spinning_proxy(&thread, up, Some(names.clone())).await;
    sequential(proxy, up, REQUESTS, Duration::ZERO).await;
    // Refusals, and a listener added from this (another) thread, still work while it spins.
    let refused = get_via(proxy, "http://169.254.169.254/latest", "ignored").await;
    assert_eq!(refused.status, 403);
    let extra = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let extra_addr = extra.local_addr().unwrap();
    let guard = handle.entry().serve_listener(extra).unwrap();
    let via_extra = get_via(extra_addr, &format!("http://{up}/b"), "ignored").await;
    assert_eq!(via_extra.status, 200);

    for _ in 0..200 {
        if names.0.lock().unwrap().len() >= REQUESTS + 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(names.0.lock().unwrap().len(), REQUESTS + 2);
    // The spin watched the proxy's sockets: some waits ended because one became ready, without
    // the thread sleeping (with no socket in the spin set, every spin would run out).
    let (ready, expired) = thread.spin_counts();
    assert!(ready > 0, "ready {ready}, expired {expired}");
    drop(guard);
    stop(handle).await;
}

#[tokio::test]
async fn a_client_that_pauses_backs_off_its_spins() {
    const REQUESTS: usize = 30;
    let up = keep_alive_upstream().await;
    let thread = ProxyThread::start_with_spin(Duration::from_millis(1)).unwrap();
    // The client pauses 20 ms after each answer: a spin on that wait runs out (1 ms) every time
    // it is tried. Back-off 1, 2, 4, 8, 16 parks after each: about 5 for 30 pauses (a few more
    // on a loaded machine, where an upstream's answer can take longer than 1 ms too); without
    // it, at least one per pause.
    let (proxy, handle) = spinning_proxy(&thread, up, None).await;
    sequential(proxy, up, REQUESTS, Duration::from_millis(20)).await;
    stop(handle).await;
    let (ready, expired) = thread.spin_counts();
    let skipped = thread.spins_skipped();
    assert!(
        (expired as usize) < REQUESTS && skipped >= 10,
        "the client's pauses back the spin off: ready {ready}, expired {expired}, skipped {skipped}"
    );
}

#[tokio::test]
async fn spins_that_run_out_on_a_slow_upstream_back_off() {
    const REQUESTS: usize = 40;
    // Each answer comes 5 ms after its request, longer than the 1 ms budget: every spin runs out.
    let up = keep_alive_upstream_after(Duration::from_millis(5)).await;
    let thread = ProxyThread::start_with_spin(Duration::from_millis(1)).unwrap();
    let (proxy, handle) = spinning_proxy(&thread, up, None).await;
    sequential(proxy, up, REQUESTS, Duration::ZERO).await;
    stop(handle).await;
    let (ready, expired) = thread.spin_counts();
    let skipped = thread.spins_skipped();
    // Without the back-off, every request's wait runs one spin out at least (40); with it
    // (1, 2, 4 ... parks of that kind at once after each spin that ran out), far fewer.
    assert!(
        (expired as usize) < REQUESTS && skipped >= 20,
        "ready {ready}, expired {expired}, skipped {skipped}"
    );
}

#[test]
fn without_a_spin_budget_the_thread_never_spins() {
    let thread = ProxyThread::start_with_spin(Duration::ZERO).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A few parks of the proxy thread: timers on it.
    rt.block_on(async {
        let h = thread
            .handle()
            .spawn(async { tokio::time::sleep(Duration::from_millis(20)).await });
        tokio::time::timeout(STEP, h).await.unwrap().unwrap();
    });
    assert_eq!(thread.spin_counts(), (0, 0));
}
