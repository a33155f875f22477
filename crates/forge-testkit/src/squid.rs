//! squid as a reference proxy for benches (never a test dependency): found on PATH or in
//! /usr/sbin, started on a temporary config (one process, no cache, no access log, keep-alive on
//! both sides), and the on-CPU time of a measured process.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running squid: its address, its process (the caller kills it) and its temporary dir (config,
/// pid file, cache.log), removed when dropped.
pub struct Squid {
    pub addr: SocketAddr,
    pub child: Child,
    pub dir: tempfile::TempDir,
}

/// The squid binary on PATH or in /usr/sbin.
pub fn binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("squid"))
        .find(|p| p.is_file())
}

/// squid started and accepting on loopback, or `None` when it is not installed or did not start
/// listening within 10 s (said on stderr).
pub fn start() -> Option<Squid> {
    let bin = binary()?;
    let dir = tempfile::tempdir().ok()?;
    // squid drops to its own user when started as root: let it write its pid and cache.log here.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).ok()?;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let d = dir.path().display();
    let conf = format!(
        "http_port 127.0.0.1:{port}\nhttp_access allow all\ncache deny all\ncache_mem 8 MB\n\
         access_log none\ncache_store_log none\ncache_log {d}/cache.log\npid_filename {d}/squid.pid\n\
         coredump_dir {d}\nmax_filedescriptors 16384\nworkers 1\nshutdown_lifetime 0 seconds\n\
         via off\nforwarded_for delete\nclient_persistent_connections on\n\
         server_persistent_connections on\n"
    );
    let conf_path = dir.path().join("squid.conf");
    std::fs::write(&conf_path, conf).ok()?;
    let mut child = Command::new(bin)
        .arg("-N")
        .arg("-f")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], port));
    // Wait (bounded: 10 s) until it accepts.
    for _ in 0..200 {
        if std::net::TcpStream::connect(addr).is_ok() {
            return Some(Squid { addr, child, dir });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("squid did not start listening within 10 s; see its cache.log");
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// CPU time of a process so far: the sum over its threads of their on-CPU time from
/// /proc/PID/task/TID/schedstat (nanoseconds; /proc/PID/stat only counts 10 ms ticks). Threads
/// that already ended are not counted; the measured processes keep their threads.
pub fn proc_cpu(pid: u32) -> Duration {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Duration::ZERO;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    Duration::from_nanos(ns)
}
