//! Test support specific to egress tests: upstreams shaped for the proxy and client tests (on the
//! testkit's loopback [`Site`]), the fixture TLS certificate, a raw proxy client, a dialer that records attempts and
//! never leaves loopback, and an observer that collects decisions.
#![allow(dead_code)]

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use forge_egress::connect::{Dialer, TcpDialer};
use forge_egress::proxy::{Decision, EgressObserver};
use forge_testkit::site::{Request, Response, Site};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Every test I/O step is bounded by this.
pub(crate) const STEP: Duration = Duration::from_secs(10);

/// Records every dial; dials loopback for real and refuses anything else without sending a packet.
#[derive(Default, Clone)]
pub(crate) struct LoopbackDialer {
    count: Arc<AtomicUsize>,
    pub dialed: Arc<Mutex<Vec<SocketAddr>>>,
}

impl LoopbackDialer {
    pub(crate) fn attempts(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
    pub(crate) fn dialed(&self) -> Vec<SocketAddr> {
        self.dialed.lock().unwrap().clone()
    }
}

#[async_trait]
impl Dialer for LoopbackDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        self.count.fetch_add(1, Ordering::SeqCst);
        self.dialed.lock().unwrap().push(addr);
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                "test dialer: non-loopback address not dialed",
            ));
        }
        TcpDialer.dial(addr).await
    }
}

/// Collects decisions.
#[derive(Default)]
pub(crate) struct Collect(pub Mutex<Vec<Decision>>);

impl EgressObserver for Collect {
    fn on_decision(&self, d: &Decision) {
        self.0.lock().unwrap().push(d.clone());
    }
}

impl Collect {
    pub(crate) fn all(&self) -> Vec<Decision> {
        self.0.lock().unwrap().clone()
    }
    /// Wait (bounded) until at least `n` decisions have arrived.
    pub(crate) async fn wait_for(&self, n: usize) -> Vec<Decision> {
        for _ in 0..200 {
            if self.0.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        self.all()
    }
}

/// A loopback site ([`forge_testkit::site::Site`]) answering every request with
/// `upstream saw host=<Host> path=<path> headers=<names> body=<body>` (and `x-upstream: yes`).
pub(crate) async fn http_upstream() -> SocketAddr {
    Site::start(|r| {
        let text = format!(
            "upstream saw host={} path={} headers={} body={}",
            r.headers.get("host").map(String::as_str).unwrap_or(""),
            r.path,
            r.header_names().join(","),
            String::from_utf8_lossy(&r.body)
        );
        Response::bare(200, text).header("x-upstream", "yes")
    })
    .addr
}

/// Read until the end of an HTTP head; returns the head without the final CRLFCRLF.
pub(crate) async fn read_head(s: &mut TcpStream) -> io::Result<String> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        let n = s.read(&mut byte).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "eof in head"));
        }
        buf.push(byte[0]);
        if buf.len() > 1 << 20 {
            return Err(io::Error::other("head too long"));
        }
    }
    buf.truncate(buf.len() - 4);
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// A parsed response.
#[derive(Debug)]
pub(crate) struct Resp {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Resp {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Read one response (head, then body to EOF or content-length).
pub(crate) async fn read_response(s: &mut TcpStream) -> io::Result<Resp> {
    let head = read_head(s).await?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let mut r = Resp {
        status,
        head,
        body: String::new(),
    };
    if let Some(cl) = r.header("content-length") {
        let n: usize = cl.parse().unwrap_or(0);
        let mut body = vec![0u8; n];
        s.read_exact(&mut body).await?;
        r.body = String::from_utf8_lossy(&body).into_owned();
    } else if status != 200 || r.header("connection").as_deref() == Some("close") {
        let mut body = Vec::new();
        s.read_to_end(&mut body).await?;
        r.body = String::from_utf8_lossy(&body).into_owned();
    }
    Ok(r)
}

/// Send raw bytes to the proxy and read one response.
pub(crate) async fn raw(proxy: SocketAddr, request: &str) -> Resp {
    tokio::time::timeout(STEP, async {
        let mut s = TcpStream::connect(proxy).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        read_response(&mut s).await.unwrap()
    })
    .await
    .expect("proxy answered within the step limit")
}

/// `GET <url>` through the proxy in absolute form.
pub(crate) async fn get_via(proxy: SocketAddr, url: &str, host_header: &str) -> Resp {
    raw(
        proxy,
        &format!("GET {url} HTTP/1.1\r\nHost: {host_header}\r\nConnection: close\r\n\r\n"),
    )
    .await
}

/// CONNECT through the proxy; returns the response to the CONNECT and, on 200, the tunnel stream.
pub(crate) async fn connect_via(proxy: SocketAddr, authority: &str) -> (Resp, Option<TcpStream>) {
    tokio::time::timeout(STEP, async {
        let mut s = TcpStream::connect(proxy).await.unwrap();
        s.write_all(
            format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let head = read_head(&mut s).await.unwrap();
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let mut r = Resp {
            status,
            head,
            body: String::new(),
        };
        if status == 200 {
            return (r, Some(s));
        }
        if let Some(cl) = r.header("content-length") {
            let mut body = vec![0u8; cl.parse().unwrap_or(0)];
            s.read_exact(&mut body).await.unwrap();
            r.body = String::from_utf8_lossy(&body).into_owned();
        }
        (r, None)
    })
    .await
    .expect("proxy answered CONNECT within the step limit")
}

pub(crate) fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A request as seen by [`routed_upstream`]: headers in the order sent, repeats kept.
#[derive(Debug, Clone)]
pub(crate) struct SeenRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl SeenRequest {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn of(r: &Request) -> Self {
        SeenRequest {
            method: r.method.clone(),
            path: r.path.clone(),
            headers: r
                .head
                .split("\r\n")
                .skip(1)
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect(),
            body: r.body.clone(),
        }
    }
}

/// A canned response: status, extra headers, body.
pub(crate) type Reply = (u16, Vec<(String, String)>, Vec<u8>);

/// A loopback site ([`forge_testkit::site::Site`]) answering with `handler` and no default headers.
/// Over TLS when `tls` is set (the fixture certificate for localhost/secure.test/127.0.0.1).
pub(crate) async fn routed_upstream<F>(handler: F, tls: bool) -> SocketAddr
where
    F: Fn(&SeenRequest) -> Reply + Send + Sync + 'static,
{
    let mut site = Site::builder();
    if tls {
        site = site.tls(tls_config());
    }
    site.start(move |r| {
        let (status, headers, body) = handler(&SeenRequest::of(r));
        let mut resp = Response::bare(status, body);
        resp.headers = headers;
        resp
    })
    .addr
}

/// The server side of the fixture certificate (tests/fixtures: leaf.pem, leaf.key).
fn tls_config() -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
    let certs = vec![CertificateDer::from_pem_file(format!("{dir}/leaf.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(format!("{dir}/leaf.key")).unwrap();
    let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .unwrap();
    Arc::new(cfg)
}

/// A root store holding only the fixture CA.
pub(crate) fn test_roots() -> Arc<rustls::RootCertStore> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let ca = CertificateDer::from_pem_file(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/ca.pem"
    ))
    .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    Arc::new(roots)
}

/// A keep-alive upstream answering `ok` to every request (at most 1,000 per connection).
pub(crate) async fn keep_alive_upstream() -> SocketAddr {
    keep_alive_upstream_after(Duration::ZERO).await
}

/// The same, answering each request `delay` after its head arrived (a slow upstream).
#[allow(dead_code)]
pub(crate) async fn keep_alive_upstream_after(delay: Duration) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                for _ in 0..1000 {
                    let Ok(Ok(_)) = tokio::time::timeout(STEP, read_head(&mut s)).await else {
                        return;
                    };
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    if s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}
