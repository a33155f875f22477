//! The egress HTTP client used by `http_request`, `web_fetch` and the LLM providers.
//!
//! Every hop goes through the same [`Connector`] as the proxy (policy check, one lookup, every answer
//! validated, only a validated address dialed), so the client obeys exactly the proxy's policy.
//! Redirects are followed by the client itself (at most [`ClientOptions::max_redirects`], default
//! 10), each hop re-validated from scratch; `Authorization`, `Proxy-Authorization`, `Cookie` and the
//! API-key headers (`CREDENTIAL_HEADERS`) and headers marked sensitive are dropped on the first hop that leaves the original
//! origin and never restored. HTTPS uses rustls with
//! the webpki root certificates (no OpenSSL, no system trust store). One connection per hop, no
//! pooling: a connection is always to an address validated for that very request.
//! Proxy environment variables are ignored: the client enforces the policy itself.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http::header::{
    HeaderName, HeaderValue, AUTHORIZATION, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, HOST,
    LOCATION, PROXY_AUTHORIZATION, TRANSFER_ENCODING, USER_AGENT,
};
use http::{HeaderMap, Method, Request, StatusCode, Version};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use rustls::RootCertStore;

use crate::connect::{ConnectLimits, Connector, Dialer, TcpDialer};
use crate::error::EgressError;
use crate::host::NormalHost;
use crate::policy::EgressPolicy;
use crate::proxy::{Decision, DecisionReason, EgressObserver, Outcome};
use crate::refusal::EgressRefusal;
use crate::resolve::{Resolver, SystemResolver};
pub use crate::target::{parse_url, ParsedUrl};
use crate::target::{percent_encode_path, resolve_location};

/// How the client behaves.
#[derive(Clone)]
pub struct ClientOptions {
    pub resolver: Arc<dyn Resolver>,
    pub dialer: Arc<dyn Dialer>,
    pub limits: ConnectLimits,
    /// Redirects followed before giving up (default 10).
    pub max_redirects: usize,
    /// Largest response body accepted (default 10 MiB); larger bodies are an error.
    pub max_body_bytes: usize,
    /// Time limit for the whole request, redirects and body included (default 60 s).
    pub timeout: Duration,
    /// `User-Agent` sent when the caller sets none.
    pub user_agent: String,
    /// Trust anchors; `None` means the webpki roots (Mozilla's list). Tests pass their own CA.
    pub root_store: Option<Arc<RootCertStore>>,
    /// Receives one [`Decision`] per hop (redirects included), like the proxy's observer.
    pub observer: Option<Arc<dyn EgressObserver>>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            resolver: Arc::new(SystemResolver),
            dialer: Arc::new(TcpDialer),
            limits: ConnectLimits::default(),
            max_redirects: 10,
            max_body_bytes: 10 * 1024 * 1024,
            timeout: Duration::from_secs(60),
            user_agent: concat!("forge/", env!("CARGO_PKG_VERSION")).to_string(),
            root_store: None,
            observer: None,
        }
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct EgressResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The URL that produced this response (after redirects).
    pub url: String,
    /// The locations followed, in order.
    pub redirects: Vec<String>,
    /// The address the final response came from.
    pub remote: SocketAddr,
}

impl EgressResponse {
    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The HTTP client that applies the egress policy.
#[derive(Clone)]
pub struct EgressClient {
    connector: Connector,
    tls: tokio_rustls::TlsConnector,
    options: ClientOptions,
}

impl std::fmt::Debug for EgressClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressClient")
            .field("policy", &self.connector.policy)
            .finish_non_exhaustive()
    }
}

/// A redirect location (the server's text) as shown in an error: percent-encoded (no spaces, no
/// control characters) and at most 200 bytes.
fn shown_location(loc: &str) -> String {
    let mut s = percent_encode_path(loc);
    if s.len() > 200 {
        // Invariant: the encoded text is ASCII, so any index is a char boundary.
        s.truncate(200);
        s.push_str("...");
    }
    s
}

/// Request headers, besides `Authorization`, `Proxy-Authorization` and `Cookie`, that carry
/// credentials and are dropped on the first hop that leaves the original origin.
const CREDENTIAL_HEADERS: &[&str] = &[
    "cookie2",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "x-auth-token",
    "private-token",
];

fn is_hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
    )
}

/// Tells two observers about every decision (the client's own, then a task's).
struct BothObservers(Arc<dyn EgressObserver>, Arc<dyn EgressObserver>);

impl EgressObserver for BothObservers {
    fn on_decision(&self, d: &Decision) {
        self.0.on_decision(d);
        self.1.on_decision(d);
    }
}

/// What one hop was dialed to, for the observer.
struct Hop {
    resolved: Vec<IpAddr>,
    chosen: SocketAddr,
    rule: String,
    start: Instant,
}

impl EgressClient {
    fn report(
        &self,
        method: &Method,
        url: &ParsedUrl,
        (outcome, reason, status): (Outcome, DecisionReason, u16),
        (resolved, chosen, start): (Vec<IpAddr>, Option<SocketAddr>, Instant),
        (bytes_up, bytes_down): (u64, u64),
    ) {
        if let Some(o) = &self.options.observer {
            o.on_decision(&Decision {
                method: method.to_string(),
                host: url.host.to_string(),
                port: url.port,
                resolved,
                chosen,
                outcome,
                reason,
                status,
                bytes_up,
                bytes_down,
                duration: start.elapsed(),
            });
        }
    }

    fn report_error(
        &self,
        method: &Method,
        url: &ParsedUrl,
        e: &EgressError,
        resolved: Vec<IpAddr>,
        start: Instant,
    ) {
        let outcome = match e {
            EgressError::Blocked(r) if r.is_malformed() => Outcome::Malformed,
            EgressError::Blocked(_) => Outcome::Blocked,
            _ => Outcome::Failed,
        };
        self.report(
            method,
            url,
            (outcome, DecisionReason::of_error(e), 0),
            (resolved, None, start),
            (0, 0),
        );
    }

    /// Refuse a request to `url` that a caller (a tool) checked itself against this client's
    /// policy, telling the observers like any refusal here (so a task's `blocked` list and the
    /// audit log have it); returns the error to give back.
    pub fn refuse(&self, url: &str, refusal: EgressRefusal) -> EgressError {
        let e = EgressError::Blocked(refusal);
        if let Ok(parsed) = parse_url(url) {
            self.report_error(&Method::POST, &parsed, &e, Vec::new(), Instant::now());
        }
        e
    }

    /// A client enforcing `policy`.
    pub fn new(policy: Arc<EgressPolicy>, options: ClientOptions) -> EgressClient {
        let roots = options.root_store.clone().unwrap_or_else(|| {
            Arc::new(RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            })
        });
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        // Invariant: the ring provider supports the default protocol versions, so this cannot fail;
        // should it ever, fall back to the builder's defaults for the same provider.
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_protocol_versions(rustls::DEFAULT_VERSIONS)
                    .expect("ring supports the default TLS versions")
            });
        let mut cfg = builder.with_root_certificates(roots).with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        EgressClient {
            connector: Connector {
                policy,
                resolver: options.resolver.clone(),
                dialer: options.dialer.clone(),
                limits: options.limits,
            },
            tls: tokio_rustls::TlsConnector::from(Arc::new(cfg)),
            options,
        }
    }

    /// The same client (options, TLS roots, resolver, dialer) on another policy, usually this
    /// one narrowed for a task ([`EgressPolicy::narrow`]), with `extra` told about every decision
    /// besides this client's own observer (a task records its refusals there). Cheap: nothing is
    /// rebuilt.
    pub fn with_policy(
        &self,
        policy: Arc<EgressPolicy>,
        extra: Option<Arc<dyn EgressObserver>>,
    ) -> EgressClient {
        let mut c = self.clone();
        c.connector.policy = policy;
        if let Some(extra) = extra {
            c.options.observer = Some(match c.options.observer.take() {
                Some(own) => Arc::new(BothObservers(own, extra)),
                None => extra,
            });
        }
        c
    }

    /// The policy this client enforces.
    pub fn policy(&self) -> &Arc<EgressPolicy> {
        &self.connector.policy
    }

    /// `GET url`.
    pub async fn get(&self, url: &str) -> Result<EgressResponse, EgressError> {
        self.request(Method::GET, url, HeaderMap::new(), Bytes::new())
            .await
    }

    /// Send a request, following redirects (each hop re-validated), and read the whole body
    /// (up to `max_body_bytes`).
    pub async fn request(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<EgressResponse, EgressError> {
        let limit = self.options.timeout;
        match tokio::time::timeout(limit, self.request_inner(method, url, headers, body)).await {
            Ok(r) => r,
            Err(_) => Err(EgressError::Timeout {
                url: url.to_string(),
                after: limit,
            }),
        }
    }

    async fn request_inner(
        &self,
        mut method: Method,
        url: &str,
        mut headers: HeaderMap,
        mut body: Bytes,
    ) -> Result<EgressResponse, EgressError> {
        let mut current = parse_url(url)?;
        let first_origin = current.origin();
        let mut redirects: Vec<String> = Vec::new();
        loop {
            let (resp, hop) = self
                .send_once(&method, &current, &headers, body.clone())
                .await?;
            let remote = hop.chosen;
            let status = resp.status();
            let location = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let is_redirect = matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308);
            match (is_redirect, location) {
                (true, Some(loc)) => {
                    drop(resp);
                    self.report(
                        &method,
                        &current,
                        (
                            Outcome::Allowed,
                            DecisionReason::Allowed(format!("{}; redirect to {loc}", hop.rule)),
                            status.as_u16(),
                        ),
                        (hop.resolved, Some(hop.chosen), hop.start),
                        (body.len() as u64, 0),
                    );
                    if redirects.len() >= self.options.max_redirects {
                        return Err(EgressError::TooManyRedirects {
                            limit: self.options.max_redirects,
                            location: shown_location(&loc),
                        });
                    }
                    let next = resolve_location(&current, &loc).map_err(|e| match e {
                        EgressError::Blocked(EgressRefusal::Malformed(mut m)) => {
                            m.input = shown_location(&m.input);
                            EgressError::Blocked(EgressRefusal::Malformed(m))
                        }
                        EgressError::InvalidRequest(_) => EgressError::InvalidRequest(format!(
                            "the server redirected to a location forge cannot follow: {}",
                            shown_location(&loc)
                        )),
                        other => other,
                    })?;
                    if next.origin() != first_origin {
                        for h in [AUTHORIZATION, PROXY_AUTHORIZATION, COOKIE] {
                            headers.remove(h);
                        }
                        // API-key headers are credentials too (the LLM providers send their key
                        // in them: Anthropic `x-api-key`, Azure `api-key`, Google `x-goog-api-key`).
                        for h in CREDENTIAL_HEADERS {
                            headers.remove(*h);
                        }
                        // Any header the caller marked sensitive (`HeaderValue::set_sensitive`,
                        // e.g. one carrying a forge secret) is dropped too, whatever its name.
                        let marked: Vec<http::HeaderName> = headers
                            .iter()
                            .filter(|(_, v)| v.is_sensitive())
                            .map(|(k, _)| k.clone())
                            .collect();
                        for h in marked {
                            headers.remove(h);
                        }
                    }
                    let to_get = status == StatusCode::SEE_OTHER && method != Method::HEAD
                        || (matches!(status.as_u16(), 301 | 302) && method == Method::POST);
                    if to_get {
                        method = Method::GET;
                        body = Bytes::new();
                        headers.remove(CONTENT_TYPE);
                        headers.remove(CONTENT_LENGTH);
                    }
                    redirects.push(next.to_string());
                    current = next;
                }
                _ => {
                    let (parts, incoming) = resp.into_parts();
                    let sent = body.len() as u64;
                    let body = match self.read_body(incoming, &current).await {
                        Ok(b) => b,
                        Err(e) => {
                            self.report_error(&method, &current, &e, hop.resolved, hop.start);
                            return Err(e);
                        }
                    };
                    self.report(
                        &method,
                        &current,
                        (
                            Outcome::Allowed,
                            DecisionReason::Allowed(hop.rule),
                            status.as_u16(),
                        ),
                        (hop.resolved, Some(hop.chosen), hop.start),
                        (sent, body.len() as u64),
                    );
                    return Ok(EgressResponse {
                        status,
                        headers: parts.headers,
                        body,
                        url: current.to_string(),
                        redirects,
                        remote,
                    });
                }
            }
        }
    }

    async fn read_body(
        &self,
        mut incoming: Incoming,
        url: &ParsedUrl,
    ) -> Result<Bytes, EgressError> {
        let limit = self.options.max_body_bytes;
        let mut buf = BytesMut::new();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|e| EgressError::Http {
                host: url.host.to_string(),
                message: e.to_string(),
            })?;
            if let Some(d) = frame.data_ref() {
                if buf.len() + d.len() > limit {
                    return Err(EgressError::BodyTooLarge { limit });
                }
                buf.extend_from_slice(d);
            }
        }
        Ok(buf.freeze())
    }

    async fn send_once(
        &self,
        method: &Method,
        url: &ParsedUrl,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<(http::Response<Incoming>, Hop), EgressError> {
        let start = Instant::now();
        let validated = match self
            .connector
            .validate(&url.host, url.port, url.kind())
            .await
        {
            Ok(v) => v,
            Err((e, resolved)) => {
                self.report_error(method, url, &e, resolved, start);
                return Err(e);
            }
        };
        let connected = match self.connector.dial_validated(validated).await {
            Ok(c) => c,
            Err((e, v)) => {
                self.report_error(method, url, &e, v.resolved, start);
                return Err(e);
            }
        };
        let hop = Hop {
            resolved: connected.validated.resolved.clone(),
            chosen: connected.chosen,
            rule: connected.validated.allowed.rule.clone(),
            start,
        };
        match self
            .exchange(method, url, headers, body, connected.stream)
            .await
        {
            Ok(resp) => Ok((resp, hop)),
            Err(e) => {
                self.report_error(method, url, &e, hop.resolved, start);
                Err(e)
            }
        }
    }

    async fn exchange(
        &self,
        method: &Method,
        url: &ParsedUrl,
        headers: &HeaderMap,
        body: Bytes,
        stream: tokio::net::TcpStream,
    ) -> Result<http::Response<Incoming>, EgressError> {
        let host_s = url.host.to_string();
        let http_err = |e: hyper::Error| EgressError::Http {
            host: host_s.clone(),
            message: e.to_string(),
        };
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = method.clone();
        *req.version_mut() = Version::HTTP_11;
        *req.uri_mut() = url
            .path
            .parse()
            .map_err(|_| EgressError::InvalidRequest(format!("invalid path {:?}", url.path)))?;
        let h = req.headers_mut();
        for (k, v) in headers {
            if !is_hop_by_hop(k) {
                h.append(k.clone(), v.clone());
            }
        }
        h.remove(TRANSFER_ENCODING);
        // hyper frames the body from its exact length; a caller-supplied length could disagree.
        h.remove(CONTENT_LENGTH);
        h.remove(CONNECTION);
        let host_value = HeaderValue::from_str(&url.host_header())
            .map_err(|_| EgressError::InvalidRequest("invalid host".into()))?;
        h.insert(HOST, host_value);
        if !h.contains_key(USER_AGENT) {
            if let Ok(v) = HeaderValue::from_str(&self.options.user_agent) {
                h.insert(USER_AGENT, v);
            }
        }
        let resp = if url.tls {
            let name = match &url.host {
                NormalHost::Name(n) => {
                    ServerName::try_from(n.clone()).map_err(|e| EgressError::Tls {
                        host: host_s.clone(),
                        message: e.to_string(),
                    })?
                }
                NormalHost::Ip(ip) => ServerName::IpAddress((*ip).into()),
            };
            let tls = self
                .tls
                .connect(name, stream)
                .await
                .map_err(|e| EgressError::Tls {
                    host: host_s.clone(),
                    message: e.to_string(),
                })?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .map_err(http_err)?;
            tokio::spawn(conn);
            sender.send_request(req).await.map_err(http_err)?
        } else {
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(http_err)?;
            tokio::spawn(conn);
            sender.send_request(req).await.map_err(http_err)?
        };
        Ok(resp)
    }
}
