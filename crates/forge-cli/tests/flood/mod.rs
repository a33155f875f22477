//! A connection flood against a real `forge run` (loopback only), shared by the `run_flood` test
//! and the `flood` bench: idle connections (connect, send nothing) and slowloris connections
//! (drip a request head one byte at a time), each reopened as soon as forge closes it, until
//! stopped; probes timed with a deadline; forge started with the scripted provider and
//! `--probe-port`.

#![allow(dead_code)] // the test and the bench each use a part

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Raise this process's soft open-files limit to its hard limit (children inherit it): a flood
/// of a thousand connections needs more than the usual 1,024 descriptors on both ends.
pub(crate) fn raise_nofile() -> u64 {
    // SAFETY: getrlimit/setrlimit on a zeroed struct we own; no other preconditions.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        if r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
        r.rlim_cur
    }
}

/// A `forge run` serving A2A on a free port with a probe listener on another; SIGTERM, then
/// kill, when dropped.
pub(crate) struct Forge {
    pub(crate) child: Child,
    pub(crate) a2a: SocketAddr,
    pub(crate) probe: SocketAddr,
}

impl Drop for Forge {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn addr_in(line: &str) -> SocketAddr {
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"));
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Start `forge` (the binary at `bin`) in `dir`: every task answers `answer` after `delay_ms`.
pub(crate) fn start_forge(bin: &Path, dir: &Path, answer: &str, delay_ms: u64) -> Forge {
    std::fs::write(
        dir.join("forge.yaml"),
        "agent_id: flooded\nversion: 0.1.0\nmodel:\n  provider: scripted\n  name: s.yaml\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("s.yaml"),
        format!("turns:\n  - text: {answer}\n    delay_ms: {delay_ms}\n"),
    )
    .unwrap();
    let mut child = Command::new(bin)
        .current_dir(dir)
        .args([
            "run",
            "--port",
            "0",
            "--probe-port",
            "0",
            "--audit-file",
            "audit.ndjson",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // Reads stdout to its end, so forge never blocks on a full pipe.
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(out)).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut forge = Forge {
        child,
        a2a: SocketAddr::from(([0, 0, 0, 0], 0)),
        probe: SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let (mut a2a, mut probe) = (None, None);
    while a2a.is_none() || probe.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("forge printed its addresses in time");
        if line.contains("over A2A on") {
            a2a = Some(addr_in(&line));
        } else if line.contains("probes (/healthz, /readyz) on") {
            probe = Some(addr_in(&line));
        }
    }
    forge.a2a = a2a.unwrap();
    forge.probe = probe.unwrap();
    forge
}

/// The flood: counters and a stop flag shared with its connection tasks.
pub(crate) struct Flood {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Connections open now.
    pub(crate) live: Arc<AtomicI64>,
    /// Connections opened in all (reopens included).
    pub(crate) opened: Arc<AtomicU64>,
    /// Connects that failed (refused, or closed at once).
    pub(crate) failed: Arc<AtomicU64>,
    /// Most connections open at once.
    pub(crate) peak: Arc<AtomicI64>,
}

impl Flood {
    /// Start `idle` idle and `slow` slowloris connections to `to`, each reopened when closed.
    pub(crate) fn start(to: SocketAddr, idle: usize, slow: usize) -> Flood {
        let stop = Arc::new(AtomicBool::new(false));
        let live = Arc::new(AtomicI64::new(0));
        let opened = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicI64::new(0));
        let mut tasks = Vec::new();
        for i in 0..idle + slow {
            let slowloris = i >= idle;
            let (stop, live, opened, failed, peak) = (
                stop.clone(),
                live.clone(),
                opened.clone(),
                failed.clone(),
                peak.clone(),
            );
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(Ok(mut s)) =
                        tokio::time::timeout(Duration::from_secs(2), TcpStream::connect(to)).await
                    else {
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    };
                    opened.fetch_add(1, Ordering::Relaxed);
                    let now = live.fetch_add(1, Ordering::Relaxed) + 1;
                    peak.fetch_max(now, Ordering::Relaxed);
                    let began = Instant::now();
                    hold(&mut s, slowloris, &stop).await;
                    live.fetch_sub(1, Ordering::Relaxed);
                    if began.elapsed() < Duration::from_millis(100) {
                        // Closed at once: refused at accept. Do not spin.
                        failed.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }));
        }
        Flood {
            stop,
            tasks,
            live,
            opened,
            failed,
            peak,
        }
    }

    /// Wait until `n` connects have been made (panics after `within`).
    pub(crate) async fn wait_opened(&self, n: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.opened.load(Ordering::Relaxed) < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} flood connections made",
                self.opened.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until `n` connections are open at once (panics after `within`).
    pub(crate) async fn wait_live(&self, n: i64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.live.load(Ordering::Relaxed) < n {
            assert!(
                Instant::now() < deadline,
                "only {} of {n} flood connections open",
                self.live.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stop and close every connection.
    pub(crate) async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// Hold one connection until the server closes it or the flood stops: idle sends nothing;
/// slowloris sends a request head one byte every 500 ms and never finishes it.
async fn hold(s: &mut TcpStream, slowloris: bool, stop: &AtomicBool) {
    const HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ";
    let mut sent = 0usize;
    let mut buf = [0u8; 256];
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if slowloris {
            let b = HEAD.get(sent).copied().unwrap_or(b'a');
            if s.write_all(&[b]).await.is_err() {
                return;
            }
            sent += 1;
        }
        match tokio::time::timeout(Duration::from_millis(500), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) | Err(_) => {}
        }
    }
}

/// `GET path` on a fresh connection with a `deadline` for the whole exchange: the time it took
/// when the answer was a 200, else why not.
pub(crate) async fn probe(
    to: SocketAddr,
    path: &str,
    deadline: Duration,
) -> Result<Duration, String> {
    let t0 = Instant::now();
    let exchange = async {
        let mut s = TcpStream::connect(to).await.map_err(|e| e.to_string())?;
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
        let out = String::from_utf8_lossy(&out).into_owned();
        if out.starts_with("HTTP/1.1 200") {
            Ok(())
        } else {
            Err(format!("answer: {:?}", out.lines().next().unwrap_or("")))
        }
    };
    match tokio::time::timeout(deadline, exchange).await {
        Ok(Ok(())) => Ok(t0.elapsed()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(format!("no answer within {deadline:?}")),
    }
}

/// `message/send` (blocking) with `text` on a fresh connection: the task's final state and its
/// answer, or why there was none.
pub(crate) async fn send_task(
    to: SocketAddr,
    text: &str,
    deadline: Duration,
) -> Result<(String, String), String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"role": "user", "messageId": format!("m-{}", Instant::now().elapsed().as_nanos()), "parts": [{"kind": "text", "text": text}]}}
    })
    .to_string();
    let exchange = async {
        let mut s = TcpStream::connect(to).await.map_err(|e| e.to_string())?;
        s.write_all(
            format!(
                "POST / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
        let out = String::from_utf8_lossy(&out).into_owned();
        let json = out.split_once("\r\n\r\n").map(|x| x.1).unwrap_or_default();
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("{e}: {out:?}"))?;
        let status = &v["result"]["status"];
        Ok((
            status["state"].as_str().unwrap_or_default().to_string(),
            status["message"]["parts"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ))
    };
    tokio::time::timeout(deadline, exchange)
        .await
        .map_err(|_| format!("no answer within {deadline:?}"))?
}

/// Resident memory of process `pid` in KiB (`VmRSS`).
pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
