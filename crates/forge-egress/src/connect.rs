//! Resolve once, validate every answer, dial only a validated address: the one path by which forge
//! opens an outbound connection (proxy and HTTP client alike).
//!
//! Invariants (tests: `tests/hostile.rs` counts dial attempts):
//! - Every refusal (malformed, host, port, metadata, any blocked answer) is decided before the dialer
//!   is called: refusals make zero dial attempts.
//! - A name is resolved exactly once per connection, with a time limit; if any answer is blocked the
//!   whole lookup is refused (a mix of public and internal answers is an attack, not a choice).
//! - Only addresses from that validated answer are dialed, in order, each with a time limit.
//! - `localhost` and `*.localhost` resolve to loopback without asking DNS (RFC 6761).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::net::TcpStream;

use crate::error::EgressError;
use crate::host::NormalHost;
use crate::policy::{Allowed, EgressPolicy, Kind};
use crate::resolve::Resolver;

/// Opens TCP connections. Injectable so that tests can count (and refuse) attempts.
#[async_trait]
pub trait Dialer: Send + Sync {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream>;
}

/// The real dialer (`TcpStream::connect` with `TCP_NODELAY`).
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpDialer;

#[async_trait]
impl Dialer for TcpDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        Ok(s)
    }
}

/// A dialer that records every attempt and then dials for real. For tests.
#[derive(Debug, Default, Clone)]
pub struct RecordingDialer {
    count: Arc<AtomicUsize>,
    addrs: Arc<Mutex<Vec<SocketAddr>>>,
}

impl RecordingDialer {
    pub fn new() -> Self {
        Self::default()
    }
    /// Number of dial attempts so far.
    pub fn attempts(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
    /// The addresses dialed, in order.
    pub fn dialed(&self) -> Vec<SocketAddr> {
        self.addrs.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Dialer for RecordingDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        self.count.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut v) = self.addrs.lock() {
            v.push(addr);
        }
        TcpDialer.dial(addr).await
    }
}

/// Time limits for resolving and connecting.
#[derive(Debug, Clone, Copy)]
pub struct ConnectLimits {
    pub dns_timeout: Duration,
    pub connect_timeout: Duration,
}

impl Default for ConnectLimits {
    fn default() -> Self {
        ConnectLimits {
            dns_timeout: Duration::from_secs(5),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// The validated answer for a host: what the policy allowed and the addresses that may be dialed.
#[derive(Debug, Clone)]
pub struct Validated {
    pub allowed: Allowed,
    /// Every address the lookup returned (all validated), or the literal.
    pub resolved: Vec<IpAddr>,
}

/// Everything needed to dial one host: policy, resolver, dialer and limits.
#[derive(Clone)]
pub struct Connector {
    pub policy: Arc<EgressPolicy>,
    pub resolver: Arc<dyn Resolver>,
    pub dialer: Arc<dyn Dialer>,
    pub limits: ConnectLimits,
}

/// An open connection and what it was opened to.
#[derive(Debug)]
pub struct Connected {
    pub stream: TcpStream,
    pub validated: Validated,
    /// The address actually dialed.
    pub chosen: SocketAddr,
}

impl Connector {
    /// Policy check, one lookup, validation of every answer. No connection is attempted.
    /// On failure the error carries whatever was resolved (for the observer).
    pub async fn validate(
        &self,
        host: &NormalHost,
        port: u16,
        kind: Kind,
    ) -> Result<Validated, (EgressError, Vec<IpAddr>)> {
        let allowed = self
            .policy
            .check_host(host, port, kind)
            .map_err(|r| (EgressError::Blocked(r), Vec::new()))?;
        self.resolve_allowed(allowed).await
    }

    /// One lookup of an already allowed host and validation of every answer (the second half of
    /// [`Connector::validate`], for a caller that made the policy check itself).
    pub async fn resolve_allowed(
        &self,
        allowed: Allowed,
    ) -> Result<Validated, (EgressError, Vec<IpAddr>)> {
        let host = &allowed.host;
        let resolved = match host {
            NormalHost::Ip(ip) => vec![*ip],
            NormalHost::Name(_) if host.is_localhost_name() => vec![
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            NormalHost::Name(name) => {
                let lookup = self.resolver.resolve(name);
                match tokio::time::timeout(self.limits.dns_timeout, lookup).await {
                    Err(_) => {
                        return Err((
                            EgressError::DnsTimeout {
                                host: name.clone(),
                                after: self.limits.dns_timeout,
                            },
                            Vec::new(),
                        ))
                    }
                    Ok(Err(e)) => {
                        return Err((
                            EgressError::Dns {
                                host: name.clone(),
                                message: e.to_string(),
                            },
                            Vec::new(),
                        ))
                    }
                    Ok(Ok(ips)) if ips.is_empty() => {
                        return Err((
                            EgressError::Dns {
                                host: name.clone(),
                                message: "no addresses".into(),
                            },
                            Vec::new(),
                        ))
                    }
                    Ok(Ok(ips)) => ips,
                }
            }
        };
        for ip in &resolved {
            if let Err(r) = self.policy.check_resolved(&allowed, *ip) {
                return Err((EgressError::Blocked(r), resolved.clone()));
            }
        }
        Ok(Validated { allowed, resolved })
    }

    /// Dial the validated addresses in order (each with the connect time limit) until one answers.
    pub async fn dial_validated(
        &self,
        validated: Validated,
    ) -> Result<Connected, (EgressError, Validated)> {
        let port = validated.allowed.port;
        let mut last: Option<EgressError> = None;
        for ip in validated.resolved.clone() {
            let addr = SocketAddr::new(ip, port);
            match tokio::time::timeout(self.limits.connect_timeout, self.dialer.dial(addr)).await {
                Ok(Ok(stream)) => {
                    return Ok(Connected {
                        stream,
                        validated,
                        chosen: addr,
                    })
                }
                Ok(Err(e)) => {
                    last = Some(EgressError::Connect {
                        addr,
                        message: e.to_string(),
                    })
                }
                Err(_) => {
                    last = Some(EgressError::ConnectTimeout {
                        addr,
                        after: self.limits.connect_timeout,
                    })
                }
            }
        }
        // Invariant: `resolved` is never empty (validate refuses empty answers), so `last` is set.
        let err = last.unwrap_or(EgressError::Dns {
            host: validated.allowed.host.to_string(),
            message: "no addresses".into(),
        });
        Err((err, validated))
    }

    /// Validate then dial.
    pub async fn connect(
        &self,
        host: &NormalHost,
        port: u16,
        kind: Kind,
    ) -> Result<Connected, EgressError> {
        let v = self.validate(host, port, kind).await.map_err(|(e, _)| e)?;
        self.dial_validated(v).await.map_err(|(e, _)| e)
    }
}
