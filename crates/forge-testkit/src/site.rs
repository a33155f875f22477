//! The loopback HTTP site tests browse and fetch: a real HTTP/1.1 server on 127.0.0.1 (or another
//! loopback address), one answer per connection (`Connection: close`), counting connections and
//! recording request paths. Plain std threads, so sync and async tests use it alike. Bounded: it
//! accepts at most [`MAX_CONNECTIONS`] connections and waits at most [`READ_TIMEOUT`] for a request.
//!
//! What a test needs beyond "this page" goes through one small builder ([`Site::builder`]): another
//! loopback bind, TLS (feature `tls`), fewer connections; and through the [`Response`] it returns:
//! extra headers, a bare answer without the default headers, a raw answer written verbatim (a
//! hostile or broken response on purpose), or a delay before answering (a slow site).
//!
//! The [`Canary`] is a site that must never be reached: a test hands its address to whatever must
//! be refused and asserts [`Canary::assert_untouched`] at the end.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
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
    /// The request head exactly as received (request line and headers, in order, ending with the
    /// blank line).
    pub head: String,
}

impl Request {
    /// The request line (`GET /path HTTP/1.1`).
    pub fn request_line(&self) -> &str {
        self.head.split("\r\n").next().unwrap_or("")
    }

    /// The header names as sent, lowercased, in order (repeats kept).
    pub fn header_names(&self) -> Vec<String> {
        self.head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, _)| k.trim().to_ascii_lowercase())
            .collect()
    }
}

/// One answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Leave out the default headers (Content-Type, Cache-Control): the head is the status line,
    /// Content-Length, `Connection: close` and [`Response::headers`] only.
    pub bare: bool,
    /// Written verbatim instead of a head built from the fields above (see [`Response::raw`]).
    pub raw: Option<Vec<u8>>,
    /// Wait this long before answering (a slow site).
    pub delay: Option<Duration>,
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
            bare: false,
            raw: None,
            delay: None,
        }
    }

    /// Any status and content type with a binary body.
    pub fn bytes(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            body: body.into(),
            ..Self::with(status, content_type, "")
        }
    }

    /// `status` and `body` with no default headers (add any with [`Response::header`]).
    pub fn bare(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type: String::new(),
            headers: vec![],
            body: body.into(),
            bare: true,
            raw: None,
            delay: None,
        }
    }

    /// A whole answer (status line, headers, body) written verbatim, then the connection closes:
    /// for answers a test makes odd on purpose (hostile headers, HTTP/1.0, a bad head).
    pub fn raw(bytes: impl Into<Vec<u8>>) -> Self {
        Response {
            raw: Some(bytes.into()),
            ..Self::bare(0, Vec::new())
        }
    }

    /// The same answer, sent after `delay`.
    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
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
    /// Requests seen so far, in order.
    pub requests: Arc<Mutex<Vec<Request>>>,
}

/// How to start a [`Site`] other than the default (127.0.0.1, plain HTTP, [`MAX_CONNECTIONS`]).
#[derive(Clone)]
pub struct SiteBuilder {
    bind: String,
    max_connections: usize,
    #[cfg(feature = "tls")]
    tls: Option<Arc<rustls::ServerConfig>>,
}

impl SiteBuilder {
    /// Listen on `bind`, a loopback address (e.g. "127.0.0.2:0" for a second origin).
    pub fn bind(mut self, bind: &str) -> Self {
        self.bind = bind.into();
        self
    }

    /// Stop listening after `n` connections.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// Speak HTTPS with this server configuration (its certificate is the test's own).
    #[cfg(feature = "tls")]
    pub fn tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// Start the site answering with `handler`.
    pub fn start(self, handler: impl Fn(&Request) -> Response + Send + Sync + 'static) -> Site {
        self.serve(Arc::new(handler))
    }

    /// [`SiteBuilder::start`] with a shared handler.
    pub fn serve(self, handler: Handler) -> Site {
        let listener = TcpListener::bind(&self.bind).expect("bind the loopback test site");
        let addr = listener.local_addr().expect("the test site's address");
        assert!(
            addr.ip().is_loopback(),
            "test sites listen on loopback only"
        );
        let hits = Arc::new(AtomicUsize::new(0));
        let paths = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Seen {
            paths: paths.clone(),
            requests: requests.clone(),
        };
        let h2 = hits.clone();
        let max = self.max_connections;
        #[cfg(feature = "tls")]
        let tls = self.tls;
        std::thread::spawn(move || {
            for sock in listener.incoming().take(max) {
                let Ok(sock) = sock else { return };
                h2.fetch_add(1, Ordering::SeqCst);
                let (handler, seen) = (handler.clone(), seen.clone());
                #[cfg(feature = "tls")]
                if let Some(cfg) = &tls {
                    let cfg = cfg.clone();
                    std::thread::spawn(move || answer_tls(sock, cfg, &handler, &seen));
                    continue;
                }
                std::thread::spawn(move || {
                    let mut sock = sock;
                    let _ = sock.set_read_timeout(Some(READ_TIMEOUT));
                    answer(&mut sock, &handler, &seen);
                    let _ = sock.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Site {
            addr,
            hits,
            paths,
            requests,
        }
    }
}

/// Where a site records what it saw.
#[derive(Clone)]
struct Seen {
    paths: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Site {
    /// A builder for a site on another bind, over TLS, or with fewer connections.
    pub fn builder() -> SiteBuilder {
        SiteBuilder {
            bind: "127.0.0.1:0".into(),
            max_connections: MAX_CONNECTIONS,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

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
        Self::builder().bind(bind).serve(handler)
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

    /// The requests seen so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests
            .lock()
            .expect("requests lock (a handler thread panicked)")
            .clone()
    }
}

#[cfg(feature = "tls")]
fn answer_tls(
    mut sock: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    handler: &Handler,
    seen: &Seen,
) {
    let _ = sock.set_read_timeout(Some(READ_TIMEOUT));
    let Ok(mut conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    {
        let mut tls = rustls::Stream::new(&mut conn, &mut sock);
        answer(&mut tls, handler, seen);
    }
    conn.send_close_notify();
    let _ = conn.complete_io(&mut sock);
    let _ = sock.shutdown(std::net::Shutdown::Write);
}

fn answer(sock: &mut impl ReadWrite, handler: &Handler, seen: &Seen) {
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
    let request = Request {
        method,
        path,
        headers,
        body,
        head,
    };
    seen.paths
        .lock()
        .expect("paths lock (a handler thread panicked)")
        .push(request.path.clone());
    seen.requests
        .lock()
        .expect("requests lock (a handler thread panicked)")
        .push(request.clone());
    let resp = handler(&request);
    if let Some(d) = resp.delay {
        std::thread::sleep(d);
    }
    if let Some(raw) = &resp.raw {
        let _ = sock.write_all(raw);
        let _ = sock.flush();
        return;
    }
    let mut out = format!("HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    if !resp.bare {
        out.push_str(&format!("Content-Type: {}\r\n", resp.content_type));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n",
        resp.body.len()
    ));
    if !resp.bare {
        out.push_str("Cache-Control: no-store\r\n");
    }
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let _ = sock.write_all(out.as_bytes());
    let _ = sock.write_all(&resp.body);
    let _ = sock.flush();
}

/// A stream the site answers on (plain TCP or TLS).
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The reason phrase for the status codes tests use ("X" for the rest: clients ignore it).
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "X",
    }
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

    /// Its port.
    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// The egress allowlist entry naming it (`127.0.0.1:PORT`).
    pub fn entry(&self) -> String {
        self.0.entry()
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
