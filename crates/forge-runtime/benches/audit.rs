//! The cost of one audit event as the egress proxy writes it (`egress_allowed` for every forwarded
//! request, on the proxy's own thread in `forge run`): `AuditLog::emit` (a JSON value) and
//! `AuditLog::emit_flat` (what the proxy's observer uses) to a file in a fresh temp dir, CPU time
//! per event (this thread's, from `/proc/thread-self/schedstat`) and wall time.
//!
//! Run: `cargo bench -p forge-runtime --bench audit` (release profile).

// Bench: prints its measurements (the workspace denies printing in library code).
#![allow(clippy::print_stdout)]

use std::time::Instant;

use forge_runtime::{AuditField, AuditLog};
use serde_json::json;

const EVENTS: u64 = 100_000;
const ROUNDS: usize = 5;

/// This thread's on-CPU time in ns (`/proc/thread-self/schedstat`, first field).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    for flat in [false, true] {
        let mut cpu = Vec::new();
        let mut wall = Vec::new();
        for round in 0..ROUNDS {
            let path = dir.path().join(format!("audit-{flat}-{round}.ndjson"));
            let log = AuditLog::open_file(&path).expect("audit file");
            let (c0, t0) = (thread_cpu_ns(), Instant::now());
            for i in 0..EVENTS {
                if flat {
                    log.emit_flat(
                        None,
                        "egress_allowed",
                        &[
                            ("via", AuditField::Str("proxy")),
                            ("method", AuditField::Str("GET")),
                            ("host", AuditField::Str("127.0.0.1")),
                            ("port", AuditField::U64(40123)),
                            ("ip", AuditField::Str("127.0.0.1")),
                            ("status", AuditField::U64(200)),
                            (
                                "reason",
                                AuditField::Str("entry `127.0.0.1:40123` (--allow)"),
                            ),
                            ("bytes_up", AuditField::U64(0)),
                            ("bytes_down", AuditField::U64(1024)),
                            ("duration_ms", AuditField::U64(i % 3)),
                        ],
                    );
                } else {
                    log.emit(
                        None,
                        "egress_allowed",
                        json!({
                            "via": "proxy",
                            "method": "GET",
                            "host": "127.0.0.1",
                            "port": 40123,
                            "ip": "127.0.0.1",
                            "status": 200,
                            "reason": "entry `127.0.0.1:40123` (--allow)",
                            "bytes_up": 0,
                            "bytes_down": 1024,
                            "duration_ms": i % 3,
                        }),
                    );
                }
            }
            cpu.push((thread_cpu_ns() - c0) as f64 / EVENTS as f64);
            wall.push(t0.elapsed().as_nanos() as f64 / EVENTS as f64);
            let summary = forge_runtime::verify_audit_file(&path).expect("the chain verifies");
            assert_eq!(summary.events, EVENTS);
        }
        cpu.sort_by(f64::total_cmp);
        wall.sort_by(f64::total_cmp);
        println!(
            "audit {} (egress_allowed, to a file): {EVENTS} events x {ROUNDS} rounds; median per \
             event: CPU {:.2} µs, wall {:.2} µs",
            if flat { "emit_flat" } else { "emit" },
            cpu[ROUNDS / 2] / 1000.0,
            wall[ROUNDS / 2] / 1000.0
        );
    }
}
