//! A tiny static file server for demos (`forge run --demo-site DIR`): GET/HEAD only, files under
//! the directory only, on an ephemeral 127.0.0.1 port. The bundled example's skill allowlists its
//! address through `$FORGE_DEMO_SITE`.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A bound (not yet serving) demo site.
pub(crate) struct DemoSite {
    listener: std::net::TcpListener,
    dir: PathBuf,
    addr: std::net::SocketAddr,
}

impl DemoSite {
    /// Bind 127.0.0.1 on an ephemeral port for `dir`, which must hold an index.html. Binding is
    /// synchronous so the caller can export the address before it starts threads.
    pub(crate) fn bind(dir: &Path) -> Result<Self, String> {
        if !dir.join("index.html").is_file() {
            return Err("not a directory with an index.html".into());
        }
        let dir = dir.canonicalize().map_err(|e| e.to_string())?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("cannot bind 127.0.0.1: {e}"))?;
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        Ok(Self {
            listener,
            dir,
            addr,
        })
    }

    /// The bound address (`127.0.0.1:PORT`).
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// The served directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Serve until `stop` is cancelled (needs a Tokio runtime).
    pub(crate) fn serve(self, stop: CancellationToken) -> std::io::Result<JoinHandle<()>> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        Ok(tokio::spawn(serve_demo_site(listener, self.dir, stop)))
    }
}

/// A minimal static file server for the demo site: GET only, files under `dir` only.
async fn serve_demo_site(listener: tokio::net::TcpListener, dir: PathBuf, stop: CancellationToken) {
    loop {
        let (mut sock, _) = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => match a { Ok(s) => s, Err(_) => continue },
        };
        let dir = dir.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16_384 {
                match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut chunk)).await {
                    Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                    _ => return,
                }
            }
            let head = String::from_utf8_lossy(&buf).to_string();
            let mut first = head.lines().next().unwrap_or("").split(' ');
            let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or("/"));
            let path = target.split(['?', '#']).next().unwrap_or("/");
            let rel = path.trim_start_matches('/');
            let rel = if rel.is_empty() { "index.html" } else { rel };
            let rel_path = Path::new(rel);
            let safe = rel_path
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
            let file = dir.join(rel_path);
            let (status, ctype, body) = match (method, safe) {
                ("GET" | "HEAD", true) => match tokio::fs::read(&file).await {
                    Ok(b) => ("200 OK", content_type(&file), b),
                    Err(_) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
                },
                ("GET" | "HEAD", false) => ("404 Not Found", "text/plain", b"not found\n".to_vec()),
                _ => (
                    "405 Method Not Allowed",
                    "text/plain",
                    b"method not allowed\n".to_vec(),
                ),
            };
            let head = format!("HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n", body.len());
            let _ = sock.write_all(head.as_bytes()).await;
            if method != "HEAD" {
                let _ = sock.write_all(&body).await;
            }
            let _ = sock.shutdown().await;
        });
    }
}

fn content_type(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "text/javascript",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}
