//! [`EgressRefusal`]: why the egress policy refused a request (the kind, the host, the rule),
//! typed from the decision to whoever shows it, and rendered to text in one place: its `Display`,
//! `blocked by egress policy: <reason>`.
//!
//! Refusals stay typed across crates (the HTTP client's error, the proxy's decisions and 403 body,
//! `ToolError::Blocked`, the browser's navigation watcher); nothing parses the text back. The one
//! place where a refusal arrives as text over the wire is the proxy's answer to another program
//! (Chromium): [`EgressRefusal::from_proxy_response`] and [`EgressRefusal::from_tunnel_failure`]
//! read it, here and nowhere else.

use std::fmt;
use std::net::IpAddr;

use crate::host::{Malformed, NormalHost};
use crate::ip::IpBlock;

/// What every refusal's text starts with.
pub const BLOCKED_PREFIX: &str = "blocked by egress policy: ";

/// A refusal of the egress policy. Display: `blocked by egress policy: <reason>` (see
/// [`EgressRefusal::reason`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EgressRefusal {
    /// The host (or the URL around it) is malformed or cannot be normalised.
    Malformed(Malformed),
    /// No entry of the agent's policy names the host; `hint` says how to allow it.
    Host { host: String, hint: String },
    /// A cloud metadata host name, refused whatever it resolves to.
    MetadataHost { host: String },
    /// The agent allows the host, but this task's scope (its `allowed_hosts`) does not.
    OutOfScope {
        host: String,
        port: u16,
        scope: String,
    },
    /// The host is allowed, this port is not.
    Port { host: String, port: u16 },
    /// The address (literal or resolved) is in a blocked IP range.
    Ip {
        host: String,
        ip: IpAddr,
        block: IpBlock,
        hint: Option<String>,
    },
    /// The proxy answered another program's plain-http request with 403 and one of its own reason
    /// codes ([`EgressRefusal::from_proxy_response`]); `host` as the program asked for it.
    ProxyAnswer { host: String, code: &'static str },
    /// The proxy refused another program's CONNECT tunnel, which that program reports only as a
    /// failed tunnel ([`EgressRefusal::from_tunnel_failure`]).
    ProxyTunnel { host: String },
    /// A refusal met inside a larger operation: `<context>: <the refusal's text>`.
    Within {
        context: String,
        refusal: Box<EgressRefusal>,
    },
    /// A refusal whose reason forge rewrote after the decision (a guardrail redaction, a notice
    /// put in front): `reason` is the rewritten reason, `refusal` the original one.
    Rewritten {
        refusal: Box<EgressRefusal>,
        reason: String,
    },
}

impl EgressRefusal {
    /// A short machine-readable code (the proxy's `x-forge-egress-reason` header).
    pub fn code(&self) -> &'static str {
        match self {
            EgressRefusal::Malformed(_) => "malformed",
            EgressRefusal::Host { .. }
            | EgressRefusal::MetadataHost { .. }
            | EgressRefusal::OutOfScope { .. }
            | EgressRefusal::ProxyTunnel { .. } => "blocked-host",
            EgressRefusal::Port { .. } => "blocked-port",
            EgressRefusal::Ip { .. } => "blocked-ip",
            EgressRefusal::ProxyAnswer { code, .. } => code,
            EgressRefusal::Within { refusal, .. } | EgressRefusal::Rewritten { refusal, .. } => {
                refusal.code()
            }
        }
    }

    /// The host the refusal is about (the raw input for malformed hosts).
    pub fn host(&self) -> &str {
        match self {
            EgressRefusal::Malformed(m) => &m.input,
            EgressRefusal::Host { host, .. }
            | EgressRefusal::MetadataHost { host }
            | EgressRefusal::OutOfScope { host, .. }
            | EgressRefusal::Port { host, .. }
            | EgressRefusal::Ip { host, .. }
            | EgressRefusal::ProxyAnswer { host, .. }
            | EgressRefusal::ProxyTunnel { host } => host,
            EgressRefusal::Within { refusal, .. } | EgressRefusal::Rewritten { refusal, .. } => {
                refusal.host()
            }
        }
    }

    pub fn is_malformed(&self) -> bool {
        match self {
            EgressRefusal::Malformed(_) => true,
            EgressRefusal::Within { refusal, .. } | EgressRefusal::Rewritten { refusal, .. } => {
                refusal.is_malformed()
            }
            _ => false,
        }
    }

    /// The text after `blocked by egress policy: `.
    pub fn reason(&self) -> String {
        Reason(self).to_string()
    }

    /// This refusal met inside `context` (e.g. `MCP server docs`).
    pub fn within(self, context: impl Into<String>) -> EgressRefusal {
        EgressRefusal::Within {
            context: context.into(),
            refusal: Box::new(self),
        }
    }

    /// This refusal with its reason rewritten (the kind and host stay).
    pub fn rewritten(self, reason: impl Into<String>) -> EgressRefusal {
        EgressRefusal::Rewritten {
            refusal: Box::new(self),
            reason: reason.into(),
        }
    }

    /// A refusal read from the proxy's answer to another program's plain-http request to `url`:
    /// the proxy answers 403 with a reason code in `x-forge-egress-reason`. Only the proxy's own
    /// codes count (any server can send that header, and its text is never echoed); `None` for
    /// anything else or a URL that does not parse. The caller checks the status and the scheme.
    pub fn from_proxy_response(url: &str, code: &str) -> Option<EgressRefusal> {
        let parsed = url::Url::parse(url).ok()?;
        let bare = parsed.host_str()?.to_string();
        match code {
            "blocked-host" => Some(EgressRefusal::ProxyAnswer {
                host: bare,
                code: "blocked-host",
            }),
            "blocked-port" => Some(EgressRefusal::ProxyAnswer {
                host: host_and_port(url),
                code: "blocked-port",
            }),
            "blocked-ip" => Some(EgressRefusal::ProxyAnswer {
                host: host_and_port(url),
                code: "blocked-ip",
            }),
            _ => None,
        }
    }

    /// A refusal for a CONNECT tunnel to `url`'s host that another program (Chromium) reports
    /// as failed, when no better record of the proxy's decision is at hand.
    pub fn from_tunnel_failure(url: &str) -> EgressRefusal {
        let bare = url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .unwrap_or_else(|| host_and_port(url));
        EgressRefusal::ProxyTunnel { host: bare }
    }
}

/// `host[:port]` of a URL as written, or the input when it does not parse.
fn host_and_port(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| {
            u.host_str().map(|h| match u.port() {
                Some(p) => format!("{h}:{p}"),
                None => h.to_string(),
            })
        })
        .unwrap_or_else(|| url.to_string())
}

impl fmt::Display for EgressRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(BLOCKED_PREFIX)?;
        Reason(self).fmt(f)
    }
}

impl std::error::Error for EgressRefusal {}

/// The reason of a refusal, without the prefix.
struct Reason<'a>(&'a EgressRefusal);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            EgressRefusal::Malformed(m) => write!(f, "{m}"),
            EgressRefusal::Host { host, hint } => {
                write!(f, "{host} is not in this agent's allowlist ({hint})")
            }
            EgressRefusal::MetadataHost { host } => {
                write!(f, "{host} is a cloud metadata host name")
            }
            EgressRefusal::OutOfScope { host, port, scope } => write!(
                f,
                "{host}:{port} is outside this task's allowed hosts ({scope}); \
                 the caller narrowed this task, so do not retry it"
            ),
            EgressRefusal::Port { host, port } => write!(
                f,
                "port {port} on {host} is not allowed (without an explicit \
                 entry only 80 for http and 443 for https/CONNECT are allowed; add {host}:{port} to allow it)"
            ),
            EgressRefusal::Ip {
                host,
                ip,
                block,
                hint,
            } => {
                let lit = NormalHost::Ip(*ip).to_string();
                if *host == lit {
                    write!(f, "{lit} is {block}")?;
                } else {
                    write!(f, "{host} resolves to {ip}, which is {block}")?;
                }
                if let Some(h) = hint {
                    write!(f, " ({h})")?;
                }
                Ok(())
            }
            EgressRefusal::ProxyAnswer {
                host,
                code: "blocked-host",
            } => write!(f, "{host} is not in this agent's allowlist"),
            EgressRefusal::ProxyAnswer { host, code } => {
                write!(f, "{host} was refused by the egress proxy ({code})")
            }
            EgressRefusal::ProxyTunnel { host } => write!(
                f,
                "{host} is not in this agent's allowlist (the egress proxy refused the connection)"
            ),
            EgressRefusal::Within { context, refusal } => write!(f, "{context}: {refusal}"),
            EgressRefusal::Rewritten { reason, .. } => f.write_str(reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_prefix_and_the_reason() {
        let r = EgressRefusal::Port {
            host: "example.com".into(),
            port: 8080,
        };
        assert_eq!(r.to_string(), format!("{BLOCKED_PREFIX}{}", r.reason()));
        assert_eq!(r.code(), "blocked-port");
    }

    #[test]
    fn proxy_answers_are_read_from_the_proxy_codes_only() {
        let r = EgressRefusal::from_proxy_response("http://evil.example:8080/x", "blocked-host")
            .expect("a proxy code");
        assert_eq!(r.reason(), "evil.example is not in this agent's allowlist");
        let r = EgressRefusal::from_proxy_response("http://10.0.0.1:8080/", "blocked-ip")
            .expect("a proxy code");
        assert_eq!(
            r.reason(),
            "10.0.0.1:8080 was refused by the egress proxy (blocked-ip)"
        );
        assert_eq!(
            EgressRefusal::from_proxy_response("http://a.example/", "page text"),
            None
        );
        assert_eq!(
            EgressRefusal::from_tunnel_failure("https://b.example/").reason(),
            "b.example is not in this agent's allowlist (the egress proxy refused the connection)"
        );
    }

    #[test]
    fn wrapped_refusals_keep_kind_and_host() {
        let r = EgressRefusal::MetadataHost {
            host: "metadata".into(),
        };
        let w = r.clone().within("MCP server docs");
        assert_eq!(
            w.to_string(),
            "blocked by egress policy: MCP server docs: blocked by egress policy: metadata is a \
             cloud metadata host name"
        );
        assert_eq!(w.host(), "metadata");
        let n = r.rewritten("notice: x\nmetadata is a cloud metadata host name");
        assert_eq!(n.code(), "blocked-host");
        assert_eq!(
            n.to_string(),
            "blocked by egress policy: notice: x\nmetadata is a cloud metadata host name"
        );
    }
}
