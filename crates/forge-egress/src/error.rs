//! Errors of the egress layer. A policy refusal is [`EgressError::Blocked`]; its Display starts with
//! `blocked by egress policy:` so that tools can pass it to the model verbatim.

use std::net::SocketAddr;
use std::time::Duration;

use crate::refusal::EgressRefusal;

/// Why an outbound request did not complete.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EgressError {
    /// The policy refused the request (host, port, IP or malformed input).
    #[error("{0}")]
    Blocked(EgressRefusal),
    #[error("DNS lookup of {host} failed: {message}")]
    Dns { host: String, message: String },
    #[error("DNS lookup of {host} timed out after {after:?}")]
    DnsTimeout { host: String, after: Duration },
    #[error("connecting to {addr} failed: {message}")]
    Connect { addr: SocketAddr, message: String },
    #[error("connecting to {addr} timed out after {after:?}")]
    ConnectTimeout { addr: SocketAddr, after: Duration },
    #[error("TLS handshake with {host} failed: {message}")]
    Tls { host: String, message: String },
    #[error("HTTP exchange with {host} failed: {message}")]
    Http { host: String, message: String },
    #[error("request to {url} timed out after {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("too many redirects (more than {limit}); last location {location}")]
    TooManyRedirects { limit: usize, location: String },
    #[error("response body larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("invalid request: {0}")]
    InvalidRequest(String),
}

impl EgressError {
    /// The policy refusal, if this is one.
    pub fn refusal(&self) -> Option<&EgressRefusal> {
        match self {
            EgressError::Blocked(r) => Some(r),
            _ => None,
        }
    }

    /// True for DNS and connect time-outs (the proxy answers 504).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            EgressError::DnsTimeout { .. }
                | EgressError::ConnectTimeout { .. }
                | EgressError::Timeout { .. }
        )
    }
}
