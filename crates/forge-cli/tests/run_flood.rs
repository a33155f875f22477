//! A connection flood against a real `forge run` (issue 20, point 3): 600 idle and 100 slowloris
//! connections on the A2A port, reopened as forge closes them, for about 12 s (two head
//! timeouts). Meanwhile the probe listener's `/healthz` and `/readyz`, and the A2A port's own
//! `/healthz`, answer every time within 1 s, and a real task sent on the A2A port completes.
//! Loopback only; bounded in connections (700) and time (about 20 s).

mod flood;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use flood::{probe, send_task, Flood};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_and_a_real_task_survive_a_connection_flood() {
    let nofile = flood::raise_nofile();
    assert!(
        nofile >= 2048,
        "open-files limit {nofile} is too low for the flood"
    );
    let dir = tempfile::tempdir().unwrap();
    let forge = flood::start_forge(
        Path::new(env!("CARGO_BIN_EXE_forge")),
        dir.path(),
        "survived the flood",
        3000,
    );
    let flood = Flood::start(forge.a2a, 600, 100);
    flood.wait_opened(700, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A real task, sent while the flood holds its 700 connections; it takes 3 s (the scripted
    // model's delay), so it runs through the flood.
    let task = tokio::spawn(send_task(forge.a2a, "hello", Duration::from_secs(30)));

    let mut failures = Vec::new();
    let mut answered = 0usize;
    let mut slowest = Duration::ZERO;
    let t0 = Instant::now();
    // 12 s: past two 5 s head timeouts, so the flood has been closed and reopened meanwhile.
    while t0.elapsed() < Duration::from_secs(12) {
        for (to, path) in [
            (forge.probe, "/healthz"),
            (forge.probe, "/readyz"),
            (forge.a2a, "/healthz"),
        ] {
            match probe(to, path, Duration::from_secs(1)).await {
                Ok(took) => {
                    answered += 1;
                    slowest = slowest.max(took);
                }
                Err(e) => failures.push(format!("{to}{path} at {:?}: {e}", t0.elapsed())),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let task = task.await.unwrap();
    let reopened = flood.opened.load(Ordering::Relaxed);
    let peak = flood.peak.load(Ordering::Relaxed);
    flood.stop().await;

    assert!(
        failures.is_empty(),
        "{} of {} probes failed (slowest answer {slowest:?}): {failures:#?}",
        failures.len(),
        failures.len() + answered
    );
    assert!(answered >= 60, "only {answered} probes sent");
    let (state, answer) = task.expect("the task answered");
    assert_eq!(state, "completed", "{answer}");
    assert_eq!(answer, "survived the flood");
    // forge held all 700 head-less connections at once (none was refused)...
    assert!(
        peak >= 700,
        "only {peak} flood connections were open at once"
    );
    // ... and closed them at its head timeout, and the flood reopened them. connections at its head timeout and the flood reopened them.
    assert!(
        reopened >= 1400,
        "the flood opened only {reopened} connections: forge did not close head-less ones"
    );
}
