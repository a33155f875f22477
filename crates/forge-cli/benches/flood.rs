//! Flood bench for `forge run` (issue 20, point 3): a real forge (scripted model) under 1,000 idle
//! and 200 slowloris connections on its A2A port, each reopened as forge closes it (loopback),
//! for `--seconds` (default 30). Meanwhile it polls the probe listener's `/healthz` and `/readyz`
//! and the A2A port's own `/healthz` (1 s deadline each, every 100 ms) and sends real tasks one
//! after another (each takes the scripted model's 500 ms). Prints: probes answered, probe
//! latency p50/p99/max, tasks completed, forge's RSS before and at its peak, and the flood's
//! connection counts.
//!
//! ```text
//! cargo bench -p forge-cli --bench flood -- --idle 1000 --slow 200 --seconds 30
//! ```

// A bench program reports on its own output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

#[path = "../tests/flood/mod.rs"]
mod flood;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flood::{probe, send_task, Flood};

struct Args {
    idle: usize,
    slow: usize,
    seconds: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        idle: 1000,
        slow: 200,
        seconds: 30,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match k.as_str() {
            "--idle" => a.idle = val("--idle")?.parse().map_err(|e| format!("--idle: {e}"))?,
            "--slow" => a.slow = val("--slow")?.parse().map_err(|e| format!("--slow: {e}"))?,
            "--seconds" => {
                a.seconds = val("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            // cargo bench passes --bench; ignore it and other harness flags.
            _ => {}
        }
    }
    Ok(a)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[derive(Default)]
struct Probes {
    answered: usize,
    failed: Vec<String>,
    times: Vec<Duration>,
}

async fn poll(to: SocketAddr, path: &'static str, until: Instant, out: Arc<Mutex<Probes>>) {
    while Instant::now() < until {
        let r = probe(to, path, Duration::from_secs(1)).await;
        {
            let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
            match r {
                Ok(t) => {
                    o.answered += 1;
                    o.times.push(t);
                }
                Err(e) => o.failed.push(format!("{to}{path}: {e}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("flood bench: {e}");
            std::process::exit(2);
        }
    };
    let nofile = flood::raise_nofile();
    let need = (args.idle + args.slow) as u64 + 256;
    if nofile < need {
        eprintln!("flood bench: the open-files limit is {nofile}, need {need}");
        std::process::exit(2);
    }
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("flood bench: temp dir: {e}");
            std::process::exit(1);
        }
    };
    let forge = flood::start_forge(
        Path::new(env!("CARGO_BIN_EXE_forge")),
        dir.path(),
        "done",
        500,
    );
    let pid = forge.child.id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rss_before = flood::rss_kib(pid).unwrap_or(0);

    let total = args.idle + args.slow;
    let flood = Flood::start(forge.a2a, args.idle, args.slow);
    flood
        .wait_opened(total as u64, Duration::from_secs(60))
        .await;
    let until = Instant::now() + Duration::from_secs(args.seconds);

    let probe_port = Arc::new(Mutex::new(Probes::default()));
    let a2a_port = Arc::new(Mutex::new(Probes::default()));
    let pollers = vec![
        tokio::spawn(poll(forge.probe, "/healthz", until, probe_port.clone())),
        tokio::spawn(poll(forge.probe, "/readyz", until, probe_port.clone())),
        tokio::spawn(poll(forge.a2a, "/healthz", until, a2a_port.clone())),
    ];
    let tasks = tokio::spawn(async move {
        let (mut sent, mut completed, mut errors) = (0usize, 0usize, Vec::new());
        while Instant::now() < until {
            sent += 1;
            match send_task(forge.a2a, "hello", Duration::from_secs(30)).await {
                Ok((state, _)) if state == "completed" => completed += 1,
                Ok((state, answer)) => errors.push(format!("{state}: {answer}")),
                Err(e) => errors.push(e),
            }
        }
        (sent, completed, errors)
    });
    let mut rss_peak = 0u64;
    while Instant::now() < until {
        rss_peak = rss_peak.max(flood::rss_kib(pid).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for p in pollers {
        let _ = p.await;
    }
    let (sent, completed, errors) = tasks.await.unwrap_or_default();
    let peak = flood.peak.load(Ordering::Relaxed);
    let opened = flood.opened.load(Ordering::Relaxed);
    let refused = flood.failed.load(Ordering::Relaxed);
    flood.stop().await;
    drop(forge);

    println!(
        "flood: {} idle + {} slowloris connections on the A2A port for {} s (loopback)",
        args.idle, args.slow, args.seconds
    );
    println!("  flood connections: {peak} open at once at most, {opened} opened in all (reopened as forge closed them), {refused} refused or closed at once");
    for (name, p) in [
        ("probe port (/healthz + /readyz)", &probe_port),
        ("A2A port /healthz", &a2a_port),
    ] {
        let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
        p.times.sort();
        let n = p.answered + p.failed.len();
        println!(
            "  {name}: {}/{n} answered within 1 s; p50 {:?}, p99 {:?}, max {:?}",
            p.answered,
            pct(&p.times, 0.5),
            pct(&p.times, 0.99),
            p.times.last().copied().unwrap_or_default()
        );
        for f in p.failed.iter().take(5) {
            println!("    failed: {f}");
        }
    }
    println!("  tasks: {completed}/{sent} completed (500 ms each, one at a time)");
    for e in errors.iter().take(5) {
        println!("    failed: {e}");
    }
    println!(
        "  forge RSS: {:.1} MiB before the flood, {:.1} MiB at its peak",
        rss_before as f64 / 1024.0,
        rss_peak as f64 / 1024.0
    );
}
