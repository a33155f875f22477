//! The loopback HTTP site tests browse and fetch: a real HTTP/1.1 server on 127.0.0.1 (or another
//! loopback address), one answer per connection (`Connection: close`), counting connections and
//! recording request paths. Plain std threads, so sync and async tests use it alike. Bounded: it
//! accepts at most [`MAX_CONNECTIONS`] connections and waits at most [`READ_TIMEOUT`] for a request.
//!
//! The [`Canary`] is a site that must never be reached: a test hands its address to whatever must
//! be refused and asserts [`Canary::assert_untouched`] at the end.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many connections one site accepts before it stops listening.
pub const MAX_CONNECTIONS: usize = 10_000;
/// How long the site waits for a request's head (and body) before dropping the connection.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest request head (and body) read.
const MAX_REQUEST: usize = 1 << 20;

/// What the site answers a request with.
pub type Handler = Arc<dyn Fn(&Request) -> Response + Send + Sync>;

/// One request as the handler sees it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target as sent (path and query).
    pub path: String,
    /// Header names lowercased.
    pub headers: HashMap<String, String>,
    /// The body (read up to Content-Length).
    pub body: Vec<u8>,
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// 200 with an HTML body.
    pub fn html(body: impl Into<String>) -> Self {
        Self::with(200, "text/html; charset=utf-8", body)
    }

    /// 200 with a plain-text body.
    pub fn text(body: impl Into<String>) -> Self {
        Self::with(200, "text/plain; charset=utf-8", body)
    }

    /// 404 `not found`.
    pub fn not_found() -> Self {
        Self::with(404, "text/plain", "not found")
    }

    /// Any status, content type and body.
    pub fn with(status: u16, content_type: &str, body: impl Into<String>) -> Self {
        Response {
            status,
            content_type: content_type.into(),
            headers: vec![],
            body: body.into().into_bytes(),
        }
    }

    /// The same answer with one more header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A running loopback site.
pub struct Site {
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub hits: Arc<AtomicUsize>,
    /// Request paths seen so far, in order.
    pub paths: Arc<Mutex<Vec<String>>>,
}

impl Site {
    /// A site on 127.0.0.1 (ephemeral port) answering with `handler`.
    pub fn start(handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Site {
        Self::serve_on("127.0.0.1:0", Arc::new(handler))
    }

    /// [`Site::start`] with a shared handler.
    pub fn serve(handler: Handler) -> Site {
        Self::serve_on("127.0.0.1:0", handler)
    }

    /// A site answering every request with this HTML page.
    pub fn page(html: impl Into<String>) -> Site {
        let html = html.into();
        Self::start(move |_| Response::html(html.clone()))
    }

    /// The same site on `bind`, a loopback address (e.g. "127.0.0.2:0" for a second origin).
    pub fn start_on(
        bind: &str,
        handler: impl Fn(&Request) -> Response + Send + Sync + 'static,
    ) -> Site {
        Self::serve_on(bind, Arc::new(handler))
    }

    /// [`Site::start_on`] with a shared handler.
    pub fn serve_on(bind: &str, handler: Handler) -> Site {
        let listener = TcpListener::bind(bind).expect("bind the loopback test site");
        let addr = listener.local_addr().expect("the test site's address");
        assert!(
            addr.ip().is_loopback(),
            "test sites listen on loopback only"
        );
        let hits = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let (h2, p2) = (hits.clone(), paths.clone());
        std::thread::spawn(move || {
            for sock in listener.incoming().take(MAX_CONNECTIONS) {
                let Ok(sock) = sock else { return };
                h2.fetch_add(1, Ordering::SeqCst);
                let (handler, paths) = (handler.clone(), p2.clone());
                std::thread::spawn(move || answer(sock, &handler, &paths));
            }
        });
        Site { addr, hits, paths }
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The egress allowlist entry naming this site (`127.0.0.1:PORT`).
    pub fn entry(&self) -> String {
        self.addr.to_string()
    }

    /// Connections accepted so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// Requests for exactly `path` so far.
    pub fn hits_for(&self, path: &str) -> usize {
        self.paths
            .lock()
            .expect("paths lock (a handler thread panicked)")
            .iter()
            .filter(|p| *p == path)
            .count()
    }
}

fn answer(mut sock: TcpStream, handler: &Handler, paths: &Mutex<Vec<String>>) {
    let _ = sock.set_read_timeout(Some(READ_TIMEOUT));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        match sock.read(&mut chunk) {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => return,
        }
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > MAX_REQUEST {
            return;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("/").to_string();
    let mut headers = HashMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len = headers
        .get("content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_REQUEST);
    while buf.len() < head_end + len {
        match sock.read(&mut chunk) {
            Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    let body = buf[head_end..buf.len().min(head_end + len)].to_vec();
    paths
        .lock()
        .expect("paths lock (a handler thread panicked)")
        .push(path.clone());
    let resp = handler(&Request {
        method,
        path,
        headers,
        body,
    });
    let mut out = format!(
        "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\n",
        resp.status,
        resp.content_type,
        resp.body.len()
    );
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let _ = sock.write_all(out.as_bytes());
    let _ = sock.write_all(&resp.body);
    let _ = sock.flush();
    let _ = sock.shutdown(std::net::Shutdown::Write);
}

/// A loopback site that must never be reached: every connection counts.
pub struct Canary(pub Site);

impl Canary {
    /// A canary on 127.0.0.1.
    pub fn start() -> Canary {
        Canary(Site::start(|_| Response::text("canary reached")))
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.0.addr
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        self.0.url(path)
    }

    /// Connections that reached it (should stay 0).
    pub fn hits(&self) -> usize {
        self.0.hits()
    }

    /// Panics when anything reached the canary; `what` says what was supposed to stop it.
    pub fn assert_untouched(&self, what: &str) {
        let n = self.hits();
        assert_eq!(
            n, 0,
            "{what}: the canary at {} was reached {n} time(s)",
            self.0.addr
        );
    }
}
