//! Shared test harness: a Chromium check that skips (or fails under FORGE_REQUIRE_BROWSER=1), a
//! tiny loopback HTTP server, and the real egress proxy allowlisting it.
#![allow(dead_code)]
// Printing is allowed here (test output: the skip notice when no Chromium is installed).
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use forge_browser::{BrowserConfig, BrowserManager, RefusalLog};
use forge_egress::policy::EgressPolicy;
use forge_egress::proxy::{EgressProxy, ProxyHandle, ProxyOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The Chromium binary, or None (with a message) when none is installed. Panics instead when
/// FORGE_REQUIRE_BROWSER=1.
pub fn browser_or_skip(test: &str) -> Option<std::path::PathBuf> {
    match forge_browser::find_browser_binary() {
        Ok(p) => Some(p),
        Err(e) => {
            if std::env::var("FORGE_REQUIRE_BROWSER").as_deref() == Ok("1") {
                panic!("{test}: FORGE_REQUIRE_BROWSER=1 but {e}");
            }
            eprintln!("SKIPPED {test}: {e}");
            None
        }
    }
}

pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

pub struct Request {
    pub path: String,
    pub headers: HashMap<String, String>,
}

pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn html(body: impl Into<String>) -> Self {
        Response {
            status: 200,
            content_type: "text/html; charset=utf-8".into(),
            headers: vec![],
            body: body.into().into_bytes(),
        }
    }
}

/// A loopback HTTP/1.1 server (Connection: close) answering with `handler`; counts requests.
pub struct TestServer {
    pub addr: SocketAddr,
    pub hits: Arc<AtomicUsize>,
    pub paths: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    pub async fn start(handler: Handler) -> TestServer {
        Self::start_on("127.0.0.1:0", handler).await
    }

    /// The same server on `bind` (a loopback address, e.g. "127.0.0.2:0" for another site).
    pub async fn start_on(bind: &str, handler: Handler) -> TestServer {
        let listener = TcpListener::bind(bind).await.expect("bind test server");
        let addr = listener.local_addr().expect("addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (h2, p2) = (hits.clone(), paths.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                h2.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                let paths = p2.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let n = match tokio::time::timeout(
                            std::time::Duration::from_secs(5),
                            sock.read(&mut chunk),
                        )
                        .await
                        {
                            Ok(Ok(n)) if n > 0 => n,
                            _ => return,
                        };
                        buf.extend_from_slice(&chunk[..n]);
                        if buf.windows(4).any(|w| w == b"\r\n\r\n") || buf.len() > 65536 {
                            break;
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).to_string();
                    let mut lines = head.split("\r\n");
                    let first = lines.next().unwrap_or("");
                    let path = first.split_whitespace().nth(1).unwrap_or("/").to_string();
                    let mut headers = HashMap::new();
                    for l in lines {
                        if let Some((k, v)) = l.split_once(':') {
                            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                        }
                    }
                    paths.lock().expect("paths").push(path.clone());
                    let resp = handler(&Request { path, headers });
                    let mut out = format!(
                        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
                        resp.status, resp.content_type, resp.body.len()
                    );
                    for (k, v) in &resp.headers {
                        out.push_str(&format!("{k}: {v}\r\n"));
                    }
                    out.push_str("\r\n");
                    let _ = sock.write_all(out.as_bytes()).await;
                    let _ = sock.write_all(&resp.body).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        TestServer { addr, hits, paths }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// The real egress proxy allowlisting exactly `entries`, with a refusal log as its observer.
pub async fn proxy(entries: &[String]) -> (SocketAddr, ProxyHandle, RefusalLog) {
    let policy =
        Arc::new(EgressPolicy::allowlist(entries.iter().map(String::as_str)).expect("policy"));
    let log = RefusalLog::new();
    let opts = ProxyOptions {
        observer: Some(Arc::new(log.clone())),
        ..ProxyOptions::default()
    };
    let (addr, handle) = EgressProxy::serve(policy, opts).await.expect("proxy");
    (addr, handle, log)
}

/// A manager on the proxy at `addr`, profile dirs under `tmp`.
pub fn manager(addr: SocketAddr, log: RefusalLog, tmp: &std::path::Path) -> BrowserManager {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.max_sessions = 32;
    BrowserManager::new(cfg).with_refusals(log)
}

/// The namespace kind this machine offers for confinement, or `None` after a skip note.
pub fn confinement_or_skip(test: &str) -> Option<forge_egress::confine::NsKind> {
    match forge_egress::confine::availability() {
        forge_egress::confine::Availability::Namespace(k) => Some(k),
        forge_egress::confine::Availability::ProxyOnly(why) => {
            eprintln!("SKIP {test}: no network namespace on this machine: {why}");
            None
        }
    }
}

/// A manager like [`manager`] whose Chromium runs confined (its own network namespace, only the
/// proxy reachable).
pub fn confined_manager(
    addr: SocketAddr,
    proxy: &ProxyHandle,
    kind: forge_egress::confine::NsKind,
    log: RefusalLog,
    tmp: &std::path::Path,
) -> BrowserManager {
    let mut cfg = BrowserConfig::with_proxy(addr);
    cfg.temp_root = Some(tmp.to_path_buf());
    cfg.max_sessions = 32;
    cfg.confine = Some(forge_egress::confine::Confiner::new(proxy.entry(), kind));
    BrowserManager::new(cfg).with_refusals(log)
}

/// Processes whose command line mentions `needle` (a profile dir path), zombies excluded.
pub fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        if cmd.contains(needle) {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit_once(')')
                .map(|(_, r)| r.trim().chars().next().unwrap_or('?'))
                .unwrap_or('?');
            if state != 'Z' {
                out.push(pid);
            }
        }
    }
    out
}
