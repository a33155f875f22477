//! The one egress policy: mode, host entries, port rule, IP rule and private-range exceptions.
//!
//! Build it once with [`EgressPolicy::new`] from [`EgressSettings`] (forge.yaml `egress` plus skill
//! `egress_domains`, CLI `--allow` entries and forge's own hosts) and share the same `Arc` with every
//! enforcement point (proxy, HTTP client, LLM providers). Decisions are pure functions of the policy
//! and their input; resolving and dialing live in `connect.rs`.
//!
//! Order of a decision (each step can refuse; nothing is dialed before all steps passed):
//! 1. normalise the host (`host.rs`): malformed input is refused;
//! 2. IP literals: the IP rule (`ip.rs`); loopback only via an explicit entry naming it with this port;
//! 3. names: known cloud metadata names are refused; then the host must match an entry (or the mode is
//!    `dev-open`);
//! 4. port: an entry naming the port, else only 80 for plain HTTP and 443 for TLS/CONNECT;
//! 5. names, after resolution: every answer passes the IP rule, or the whole lookup is refused.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use crate::host::{normalize_host, split_authority, Malformed, NormalHost};
use crate::ip::{classify, private_ranges, IpClass};
use crate::refusal::EgressRefusal;
use crate::target::parse_url;
pub use crate::target::Kind;

/// How hosts are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EgressMode {
    /// No host is allowed except forge's own (model provider) entries and `--allow` entries.
    #[default]
    DenyAll,
    /// Hosts matching an entry are allowed.
    Allowlist,
    /// Any host name is allowed; the port and IP rules still apply.
    DevOpen,
}

impl fmt::Display for EgressMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EgressMode::DenyAll => "deny-all",
            EgressMode::Allowlist => "allowlist",
            EgressMode::DevOpen => "dev-open",
        })
    }
}

/// The forge.yaml `egress` section (field names compatible with initializ/forge), plus entries added
/// by forge itself (skills, CLI, model providers), which are not read from YAML.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EgressSettings {
    /// `strict` (deny-all), `standard` (allowlist) or `permissive` (dev-open): the default for `mode`.
    pub profile: Option<String>,
    /// The mode; when absent, the profile's mode, else `deny-all`.
    pub mode: Option<EgressMode>,
    /// Host entries: `example.com`, `*.example.org`, optional `:port`, `127.0.0.1:8080`.
    pub allowed_domains: Vec<String>,
    /// Capability bundles (`slack`, `telegram`) that add their hosts.
    pub capabilities: Vec<String>,
    /// Allow private ranges (10/8, 172.16/12, 192.168/16, fc00::/7). Default false.
    pub allow_private_ips: bool,
    /// Private ranges allowed individually, as canonical CIDRs (`10.20.0.0/16`).
    pub allowed_private_cidrs: Vec<String>,
    /// Entries declared by skills (`egress_domains`), as (skill name, entry).
    #[serde(skip)]
    pub skill_domains: Vec<(String, String)>,
    /// Entries given on the command line (`--allow`). Honoured in every mode, including deny-all.
    #[serde(skip)]
    pub cli_entries: Vec<String>,
    /// Entries forge itself needs (model provider endpoints), as (why, entry). Honoured in every mode,
    /// including deny-all; the port and IP rules still apply.
    #[serde(skip)]
    pub forge_entries: Vec<(String, String)>,
}

impl EgressSettings {
    /// The effective mode (explicit mode, else the profile's, else deny-all).
    pub fn effective_mode(&self) -> Result<EgressMode, PolicyError> {
        if let Some(m) = self.mode {
            return Ok(m);
        }
        match self.profile.as_deref() {
            None | Some("strict") => Ok(EgressMode::DenyAll),
            Some("standard") => Ok(EgressMode::Allowlist),
            Some("permissive") => Ok(EgressMode::DevOpen),
            Some(other) => Err(PolicyError {
                field: "egress.profile".into(),
                value: other.into(),
                why: "unknown profile".into(),
                hint: "use strict, standard or permissive (or set egress.mode)".into(),
            }),
        }
    }
}

/// A configuration error in the egress settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field} value {value:?}: {why} (hint: {hint})")]
pub struct PolicyError {
    /// The field, e.g. `egress.allowed_domains`.
    pub field: String,
    /// The offending value.
    pub value: String,
    /// What is wrong.
    pub why: String,
    /// How to fix it.
    pub hint: String,
}

/// Where an entry came from (shown as the rule that decided).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntrySource {
    Config,
    Capability(String),
    Skill(String),
    Cli,
    Forge(String),
    /// A task's own scope (A2A `metadata.forge.allowed_hosts`, `--task-host`): only narrows.
    Task,
}

impl fmt::Display for EntrySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EntrySource::Config => f.write_str("forge.yaml egress.allowed_domains"),
            EntrySource::Capability(c) => write!(f, "forge.yaml egress.capabilities {c}"),
            EntrySource::Skill(s) => write!(f, "skill {s} egress_domains"),
            EntrySource::Cli => f.write_str("--allow"),
            EntrySource::Forge(why) => write!(f, "forge: {why}"),
            EntrySource::Task => f.write_str("task allowed_hosts"),
        }
    }
}

/// The host part of an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this host.
    Exact(NormalHost),
    /// Any name ending in `.suffix` (any depth), never the apex `suffix` itself.
    Wildcard(String),
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub pattern: HostPattern,
    /// When set, the entry allows exactly this port; when absent, the default port of the scheme.
    pub port: Option<u16>,
    pub source: EntrySource,
    /// The entry as written.
    pub text: String,
}

impl Entry {
    /// Parse an entry (`example.com`, `*.example.org`, `host:port`, `127.0.0.1:8080`, `[::1]:80`).
    pub fn parse(text: &str, source: EntrySource, field: &str) -> Result<Entry, PolicyError> {
        let err = |why: &str, hint: &str| PolicyError {
            field: field.into(),
            value: text.into(),
            why: why.into(),
            hint: hint.into(),
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(err("empty entry", "remove it"));
        }
        if t.contains("://") || t.contains('/') {
            return Err(err(
                "an entry is a host, not a URL",
                "write just the host, e.g. example.com or example.com:8443",
            ));
        }
        let (wild, rest) = match t.strip_prefix("*.") {
            Some(r) => (true, r),
            None => (false, t),
        };
        if rest.contains('*') {
            return Err(err(
                "`*` is only allowed as a leading `*.` label",
                "write *.example.com",
            ));
        }
        let (host, port) =
            split_authority(rest).map_err(|m| err(&m.why, "write host or host:port"))?;
        let host =
            normalize_host(host, true).map_err(|m| err(&m.why, "write a valid host name"))?;
        let pattern = if wild {
            match host {
                NormalHost::Name(n) if n.contains('.') => HostPattern::Wildcard(n),
                NormalHost::Name(_) => {
                    return Err(err(
                        "a wildcard over a top-level domain is too broad",
                        "name the registrable domain, e.g. *.example.com",
                    ))
                }
                NormalHost::Ip(_) => {
                    return Err(err(
                        "a wildcard cannot apply to an IP address",
                        "remove `*.`",
                    ))
                }
            }
        } else {
            HostPattern::Exact(host)
        };
        Ok(Entry {
            pattern,
            port,
            source,
            text: t.to_string(),
        })
    }

    /// True when this entry allows `host` on `port` for a connection of `kind` (the host matches,
    /// and the port is the entry's, or the kind's default when the entry names none).
    fn allows(&self, host: &NormalHost, port: u16, kind: Kind) -> bool {
        self.matches_host(host) && self.port.map_or(port == kind.default_port(), |p| p == port)
    }

    fn matches_host(&self, host: &NormalHost) -> bool {
        match (&self.pattern, host) {
            (HostPattern::Exact(h), _) => h == host,
            (HostPattern::Wildcard(suffix), NormalHost::Name(n)) => {
                n.len() > suffix.len() + 1
                    && n.ends_with(suffix.as_str())
                    && n.as_bytes()[n.len() - suffix.len() - 1] == b'.'
            }
            (HostPattern::Wildcard(_), NormalHost::Ip(_)) => false,
        }
    }

    /// True for an entry naming loopback (a loopback literal or `localhost`) with a port.
    fn unlocks_loopback(&self) -> bool {
        self.port.is_some()
            && match &self.pattern {
                HostPattern::Exact(NormalHost::Ip(ip)) => ip.is_loopback(),
                HostPattern::Exact(h) => h.is_localhost_name(),
                HostPattern::Wildcard(_) => false,
            }
    }
}

/// A host and port the policy allows (before resolution). Equal values are the same decision (the
/// proxy's connection pool keys on it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Allowed {
    pub host: NormalHost,
    pub port: u16,
    /// The rule that decided, e.g. "entry `*.example.org` (forge.yaml egress.allowed_domains)".
    pub rule: String,
    /// Loopback answers are acceptable (an explicit entry names loopback with this port).
    pub loopback_ok: bool,
}

/// Names of cloud metadata services, refused whatever they resolve to.
const METADATA_NAMES: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.goog",
    "metadata.azure.internal",
    "instance-data",
    "instance-data.ec2.internal",
    "metadata.packet.net",
    "metadata.tencentyun.com",
];

/// Whether agent entry `w` is a wildcard covering `*.suffix` (same or shorter suffix) on `port`.
fn wildcard_covers(w: &Entry, suffix: &str, port: Option<u16>) -> bool {
    let HostPattern::Wildcard(ws) = &w.pattern else {
        return false;
    };
    let under = suffix == ws
        || (suffix.len() > ws.len() + 1
            && suffix.ends_with(ws.as_str())
            && suffix.as_bytes()[suffix.len() - ws.len() - 1] == b'.');
    under && w.port == port
}

fn capability_hosts(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "slack" => Some(&["slack.com", "hooks.slack.com", "api.slack.com"]),
        "telegram" => Some(&["api.telegram.org"]),
        _ => None,
    }
}

/// The egress policy. Cheap to share behind an `Arc`; immutable once built.
///
/// A policy can be narrowed for one task ([`EgressPolicy::narrow`]): the result is the same type,
/// deciding exactly as the agent's policy does and then, for anything but forge's own entries
/// (the model provider, MCP servers), also requiring a match in every scope it was narrowed by.
/// Narrowing never widens: an entry the policy does not allow is an error.
#[derive(Debug, Clone)]
pub struct EgressPolicy {
    mode: EgressMode,
    entries: Vec<Entry>,
    allow_private_ips: bool,
    private_cidrs: Vec<IpNet>,
    /// Task scopes, outermost first; a decision must match an entry of each (empty: no scope).
    scopes: Vec<Vec<Entry>>,
}

impl EgressPolicy {
    /// Build the policy, validating every entry and CIDR.
    pub fn new(settings: EgressSettings) -> Result<EgressPolicy, PolicyError> {
        let mode = settings.effective_mode()?;
        let mut entries = Vec::new();
        for (why, e) in &settings.forge_entries {
            entries.push(Entry::parse(
                e,
                EntrySource::Forge(why.clone()),
                "forge provider host",
            )?);
        }
        if mode != EgressMode::DenyAll {
            for e in &settings.allowed_domains {
                entries.push(Entry::parse(
                    e,
                    EntrySource::Config,
                    "egress.allowed_domains",
                )?);
            }
            for c in &settings.capabilities {
                let hosts = capability_hosts(c).ok_or_else(|| PolicyError {
                    field: "egress.capabilities".into(),
                    value: c.clone(),
                    why: "unknown capability bundle".into(),
                    hint: "known bundles: slack, telegram; or list the hosts in allowed_domains"
                        .into(),
                })?;
                for h in hosts {
                    entries.push(Entry::parse(
                        h,
                        EntrySource::Capability(c.clone()),
                        "egress.capabilities",
                    )?);
                }
            }
            for (skill, e) in &settings.skill_domains {
                entries.push(Entry::parse(
                    e,
                    EntrySource::Skill(skill.clone()),
                    &format!("egress_domains of skill {skill}"),
                )?);
            }
        }
        // The operator's own `--allow` entries count in every mode, like forge's entries.
        for e in &settings.cli_entries {
            entries.push(Entry::parse(e, EntrySource::Cli, "--allow")?);
        }
        let mut private_cidrs = Vec::new();
        let ranges = private_ranges();
        for c in &settings.allowed_private_cidrs {
            let err = |why: &str, hint: String| PolicyError {
                field: "egress.allowed_private_cidrs".into(),
                value: c.clone(),
                why: why.into(),
                hint,
            };
            let net: IpNet = match c.parse() {
                Ok(n) => n,
                Err(_) => {
                    return Err(match c.parse::<IpAddr>() {
                        Ok(ip) => err(
                            "a bare IP address is not a CIDR",
                            format!("write {ip}/{}", if ip.is_ipv4() { 32 } else { 128 }),
                        ),
                        Err(_) => err("not a CIDR", "write e.g. 10.20.0.0/16".into()),
                    })
                }
            };
            if net.trunc() != net || net.to_string() != *c {
                return Err(err(
                    "not canonical (host bits set or non-canonical spelling)",
                    format!("write {}", net.trunc()),
                ));
            }
            if !ranges.iter().any(|r| r.contains(&net)) {
                return Err(err(
                    "only private ranges can be allowed (10.0.0.0/8, 172.16.0.0/12, \
                     192.168.0.0/16, fc00::/7)",
                    "always-blocked addresses cannot be allowed".into(),
                ));
            }
            private_cidrs.push(net);
        }
        Ok(EgressPolicy {
            mode,
            entries,
            allow_private_ips: settings.allow_private_ips,
            private_cidrs,
            scopes: Vec::new(),
        })
    }

    /// This policy narrowed to `entries` (the `egress.allowed_domains` syntax), for one task.
    ///
    /// Every entry must be allowed by this policy (an exact host on its port, or on 80 or 443
    /// when it names none; a wildcard only under a wildcard of this policy with the same port, or
    /// in dev-open mode); the first that is not is an error naming it, with `field` (e.g.
    /// `metadata.forge.allowed_hosts[1]`) as where it was written. The narrowed policy allows
    /// what this one allows AND an entry of `entries` allows, except forge's own entries (the
    /// model provider, MCP servers), which stay reachable. Narrowing a narrowed policy keeps
    /// both scopes: it can only narrow further.
    pub fn narrow<S: AsRef<str>>(
        &self,
        entries: &[S],
        field: &str,
    ) -> Result<EgressPolicy, PolicyError> {
        let mut scope = Vec::new();
        for (i, text) in entries.iter().enumerate() {
            let field = format!("{field}[{i}]");
            let e = Entry::parse(text.as_ref(), EntrySource::Task, &field)?;
            if let Some(why) = self.why_not_within(&e) {
                return Err(PolicyError {
                    field,
                    value: e.text.clone(),
                    why,
                    hint: "a task can only narrow the agent's egress policy: name hosts the \
                           agent already allows (see `forge egress check`), or add the host to \
                           the agent's egress.allowed_domains"
                        .into(),
                });
            }
            scope.push(e);
        }
        let mut narrowed = self.clone();
        narrowed.scopes.push(scope);
        Ok(narrowed)
    }

    /// Why entry `e` allows something this policy does not (`None`: it is within the policy).
    fn why_not_within(&self, e: &Entry) -> Option<String> {
        match &e.pattern {
            HostPattern::Exact(host) => {
                let ok = match e.port {
                    Some(p) => {
                        self.check_host(host, p, Kind::Tls).is_ok()
                            || self.check_host(host, p, Kind::Http).is_ok()
                    }
                    None => {
                        self.check_host(host, 443, Kind::Tls).is_ok()
                            || self.check_host(host, 80, Kind::Http).is_ok()
                    }
                };
                (!ok).then(|| match e.port {
                    Some(p) => format!("the agent's egress policy does not allow {host}:{p}"),
                    None => format!("the agent's egress policy does not allow {host}"),
                })
            }
            HostPattern::Wildcard(suffix) => {
                if !self.scopes.is_empty() {
                    // Under a scope, a wildcard must sit under a wildcard of every scope too.
                    let inner = self
                        .scopes
                        .iter()
                        .all(|s| s.iter().any(|w| wildcard_covers(w, suffix, e.port)));
                    if !inner {
                        return Some(format!(
                            "*.{suffix} is wider than the scope this task already has"
                        ));
                    }
                }
                let ok = self.mode == EgressMode::DevOpen
                    || self
                        .entries
                        .iter()
                        .any(|w| wildcard_covers(w, suffix, e.port));
                (!ok).then(|| {
                    format!(
                        "the agent's egress policy has no wildcard entry covering *.{suffix}{}",
                        e.port.map(|p| format!(":{p}")).unwrap_or_default()
                    )
                })
            }
        }
    }

    /// The scope this policy was last narrowed to, as written (`None`: not narrowed).
    pub fn scope(&self) -> Option<Vec<String>> {
        self.scopes
            .last()
            .map(|s| s.iter().map(|e| e.text.clone()).collect())
    }

    /// Whether every scope of a narrowed policy names `url`'s host and port itself, without the
    /// exemption of forge's own entries: for a server forge.yaml configures (an MCP server over
    /// HTTP) that a task's caller did not put in its scope. `Ok` when the policy is not narrowed.
    /// A URL that does not parse is refused as malformed.
    pub fn check_scope_strict(&self, url: &str) -> Result<(), EgressRefusal> {
        if self.scopes.is_empty() {
            return Ok(());
        }
        let parsed = parse_url(url).map_err(|e| match e {
            crate::EgressError::Blocked(r) => r,
            other => EgressRefusal::Malformed(Malformed::new(url, other.to_string())),
        })?;
        self.every_scope_allows(&parsed.host, parsed.port, parsed.kind())
    }

    /// Whether every scope allows `host:port` (forge's own entries always do).
    fn in_scope(&self, host: &NormalHost, port: u16, kind: Kind) -> Result<(), EgressRefusal> {
        if self.scopes.is_empty() {
            return Ok(());
        }
        let forge_own = self
            .entries
            .iter()
            .any(|e| matches!(e.source, EntrySource::Forge(_)) && e.allows(host, port, kind));
        if forge_own {
            return Ok(());
        }
        self.every_scope_allows(host, port, kind)
    }

    /// Whether an entry of every scope allows `host:port` (no exemption).
    fn every_scope_allows(
        &self,
        host: &NormalHost,
        port: u16,
        kind: Kind,
    ) -> Result<(), EgressRefusal> {
        for s in &self.scopes {
            if !s.iter().any(|e| e.allows(host, port, kind)) {
                let listed: Vec<&str> = s.iter().map(|e| e.text.as_str()).collect();
                return Err(EgressRefusal::OutOfScope {
                    host: host.to_string(),
                    port,
                    scope: if listed.is_empty() {
                        "none".into()
                    } else {
                        listed.join(", ")
                    },
                });
            }
        }
        Ok(())
    }

    /// A policy allowing exactly these entries (allowlist mode), for tests and simple callers.
    pub fn allowlist<I, S>(entries: I) -> Result<EgressPolicy, PolicyError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EgressPolicy::new(EgressSettings {
            mode: Some(EgressMode::Allowlist),
            allowed_domains: entries.into_iter().map(Into::into).collect(),
            ..Default::default()
        })
    }

    pub fn mode(&self) -> EgressMode {
        self.mode
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn allow_private_ips(&self) -> bool {
        self.allow_private_ips
    }

    /// Decide a host (normalised) and port, before resolution: the agent's rules, then the task
    /// scopes (when narrowed).
    pub fn check_host(
        &self,
        host: &NormalHost,
        port: u16,
        kind: Kind,
    ) -> Result<Allowed, EgressRefusal> {
        let allowed = self.check_agent(host, port, kind)?;
        self.in_scope(host, port, kind)?;
        Ok(allowed)
    }

    fn check_agent(
        &self,
        host: &NormalHost,
        port: u16,
        kind: Kind,
    ) -> Result<Allowed, EgressRefusal> {
        let shown = host.to_string();
        let matching: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| e.matches_host(host))
            .collect();
        let explicit = matching.iter().find(|e| e.port == Some(port));
        let loopback_ok = explicit.is_some_and(|e| e.unlocks_loopback());
        if let NormalHost::Ip(ip) = host {
            self.check_ip_inner(&shown, *ip, loopback_ok, port)?;
        }
        if let NormalHost::Name(n) = host {
            if METADATA_NAMES.contains(&n.as_str()) {
                return Err(EgressRefusal::MetadataHost { host: shown });
            }
        }
        if matching.is_empty() && self.mode != EgressMode::DevOpen {
            let hint = match self.mode {
                EgressMode::DenyAll => {
                    "egress mode is deny-all; set egress.mode: allowlist and add \
                                        the host to egress.allowed_domains"
                        .to_string()
                }
                _ => format!(
                    "add {} to egress.allowed_domains in forge.yaml or to a skill's egress_domains",
                    host
                ),
            };
            return Err(EgressRefusal::Host { host: shown, hint });
        }
        if let Some(e) = explicit {
            return Ok(Allowed {
                host: host.clone(),
                port,
                rule: format!("entry `{}` ({})", e.text, e.source),
                loopback_ok,
            });
        }
        if port == kind.default_port() {
            if let Some(e) = matching.iter().find(|e| e.port.is_none()) {
                return Ok(Allowed {
                    host: host.clone(),
                    port,
                    rule: format!("entry `{}` ({})", e.text, e.source),
                    loopback_ok: false,
                });
            }
            if self.mode == EgressMode::DevOpen {
                return Ok(Allowed {
                    host: host.clone(),
                    port,
                    rule: "egress mode dev-open (IP and port rules still apply)".into(),
                    loopback_ok: false,
                });
            }
        }
        Err(EgressRefusal::Port { host: shown, port })
    }

    /// Normalise a raw host (`wire`: proxy input, no Unicode) and decide it with its port.
    pub fn check(
        &self,
        raw_host: &str,
        port: u16,
        kind: Kind,
        wire: bool,
    ) -> Result<Allowed, EgressRefusal> {
        let host = normalize_host(raw_host, !wire).map_err(EgressRefusal::Malformed)?;
        self.check_host(&host, port, kind)
    }

    /// Decide one resolved address of an allowed host.
    pub fn check_resolved(&self, allowed: &Allowed, ip: IpAddr) -> Result<(), EgressRefusal> {
        self.check_ip_inner(
            &allowed.host.to_string(),
            ip,
            allowed.loopback_ok,
            allowed.port,
        )
    }

    fn check_ip_inner(
        &self,
        host: &str,
        ip: IpAddr,
        loopback_ok: bool,
        port: u16,
    ) -> Result<(), EgressRefusal> {
        let block = match classify(ip) {
            Ok(()) => return Ok(()),
            Err(b) => b,
        };
        let hint = match block.class {
            IpClass::Loopback if block.embedded.is_none() => {
                if loopback_ok {
                    return Ok(());
                }
                Some(format!(
                    "loopback is reachable only through an explicit entry naming it with a port, \
                     e.g. {}:{port}",
                    NormalHost::Ip(ip)
                ))
            }
            IpClass::Private => {
                let inner = block.embedded.map(|(_, v4)| IpAddr::V4(v4)).unwrap_or(ip);
                if self.allow_private_ips || self.private_cidrs.iter().any(|c| c.contains(&inner)) {
                    return Ok(());
                }
                Some(
                    "private addresses need egress.allow_private_ips: true or a matching \
                     egress.allowed_private_cidrs entry"
                        .into(),
                )
            }
            _ => None,
        };
        Err(EgressRefusal::Ip {
            host: host.to_string(),
            ip,
            block,
            hint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pol(entries: &[&str]) -> EgressPolicy {
        EgressPolicy::allowlist(entries.iter().copied()).unwrap()
    }

    #[test]
    fn wildcard_matches_any_depth_never_apex_or_suffix_confusion() {
        let p = pol(&["*.example.org"]);
        assert!(p.check("a.example.org", 443, Kind::Tls, true).is_ok());
        assert!(p.check("a.b.example.org", 443, Kind::Tls, true).is_ok());
        assert!(p.check("example.org", 443, Kind::Tls, true).is_err());
        assert!(p.check("badexample.org", 443, Kind::Tls, true).is_err());
        assert!(p
            .check("example.org.evil.com", 443, Kind::Tls, true)
            .is_err());
    }

    #[test]
    fn default_ports_follow_the_kind() {
        let p = pol(&["example.com", "example.com:8443"]);
        assert!(p.check("example.com", 80, Kind::Http, true).is_ok());
        assert!(p.check("example.com", 443, Kind::Tls, true).is_ok());
        assert!(p.check("example.com", 8443, Kind::Tls, true).is_ok());
        assert_eq!(
            p.check("example.com", 443, Kind::Http, true)
                .unwrap_err()
                .code(),
            "blocked-port"
        );
        assert_eq!(
            p.check("example.com", 22, Kind::Tls, true)
                .unwrap_err()
                .code(),
            "blocked-port"
        );
    }

    #[test]
    fn loopback_needs_an_explicit_entry_with_port() {
        let p = pol(&["127.0.0.1:8080", "127.0.0.1", "localhost:3000"]);
        assert!(p.check("127.0.0.1", 8080, Kind::Http, true).is_ok());
        assert_eq!(
            p.check("127.0.0.1", 80, Kind::Http, true)
                .unwrap_err()
                .code(),
            "blocked-ip"
        );
        let a = p.check("localhost", 3000, Kind::Http, true).unwrap();
        assert!(p.check_resolved(&a, "127.0.0.1".parse().unwrap()).is_ok());
        assert!(p
            .check_resolved(&a, "::ffff:127.0.0.1".parse().unwrap())
            .is_err());
        assert!(p.check_resolved(&a, "10.0.0.1".parse().unwrap()).is_err());
        let v6 = pol(&["[::1]:8080"]);
        assert!(v6.check("[::1]", 8080, Kind::Http, true).is_ok());
        assert!(v6.check("[::1]", 8081, Kind::Http, true).is_err());
        assert!(v6.check("127.0.0.1", 8080, Kind::Http, true).is_err());
        // A wildcard never unlocks loopback, even for names under .localhost.
        let w = pol(&["*.example.org:8080"]);
        let a = w.check("x.example.org", 8080, Kind::Http, true).unwrap();
        assert!(w.check_resolved(&a, "127.0.0.1".parse().unwrap()).is_err());
    }

    #[test]
    fn deny_all_ignores_config_entries_but_keeps_forge_entries() {
        let p = EgressPolicy::new(EgressSettings {
            allowed_domains: vec!["example.com".into()],
            forge_entries: vec![("model provider".into(), "api.openai.com".into())],
            cli_entries: vec!["cli.example.net".into()],
            ..Default::default()
        })
        .unwrap();
        assert!(p.check("cli.example.net", 443, Kind::Tls, true).is_ok());
        assert_eq!(p.mode(), EgressMode::DenyAll);
        assert!(p.check("example.com", 443, Kind::Tls, true).is_err());
        assert!(p.check("api.openai.com", 443, Kind::Tls, true).is_ok());
    }

    #[test]
    fn private_cidrs_must_be_canonical_and_private() {
        let mk = |c: &str| {
            EgressPolicy::new(EgressSettings {
                allowed_private_cidrs: vec![c.into()],
                ..Default::default()
            })
        };
        assert!(mk("10.20.0.0/16").is_ok());
        assert!(mk("10.20.0.1/16")
            .unwrap_err()
            .hint
            .contains("10.20.0.0/16"));
        assert!(mk("10.0.0.5").unwrap_err().hint.contains("10.0.0.5/32"));
        assert!(mk("169.254.0.0/16").is_err());
        assert!(mk("8.8.8.0/24").is_err());
    }

    #[test]
    fn entries_are_validated() {
        for bad in [
            "https://example.com",
            "*",
            "*.com",
            "a.*.com",
            "example.com:0",
            "*.1.2.3.4",
            "",
        ] {
            assert!(EgressPolicy::allowlist([bad]).is_err(), "{bad:?}");
        }
        let p = pol(&["BÜCHER.de."]);
        assert!(p.check("xn--bcher-kva.de", 443, Kind::Tls, true).is_ok());
    }

    #[test]
    fn narrowing_only_narrows_and_keeps_forge_entries() {
        let agent = EgressPolicy::new(EgressSettings {
            mode: Some(EgressMode::Allowlist),
            allowed_domains: vec![
                "127.0.0.1:8001".into(),
                "127.0.0.1:8002".into(),
                "*.example.org".into(),
                "example.com".into(),
            ],
            forge_entries: vec![("model provider openai".into(), "api.openai.com".into())],
            ..Default::default()
        })
        .unwrap();
        let task = agent
            .narrow(&["127.0.0.1:8001", "a.example.org"], "t")
            .unwrap();
        assert!(task.check("127.0.0.1", 8001, Kind::Http, true).is_ok());
        let out = task.check("127.0.0.1", 8002, Kind::Http, true).unwrap_err();
        assert!(matches!(out, EgressRefusal::OutOfScope { .. }), "{out}");
        assert_eq!(out.code(), "blocked-host");
        assert!(out.to_string().contains("127.0.0.1:8001, a.example.org"));
        assert!(task.check("a.example.org", 443, Kind::Tls, true).is_ok());
        assert!(task.check("b.example.org", 443, Kind::Tls, true).is_err());
        assert!(task.check("example.com", 443, Kind::Tls, true).is_err());
        // The model host stays reachable.
        assert!(task.check("api.openai.com", 443, Kind::Tls, true).is_ok());
        assert_eq!(
            task.scope(),
            Some(vec![
                "127.0.0.1:8001".to_string(),
                "a.example.org".to_string()
            ])
        );
        assert_eq!(agent.scope(), None);
        // The agent's own rules still apply inside the scope (port rule).
        assert_eq!(
            task.check("a.example.org", 8443, Kind::Tls, true)
                .unwrap_err()
                .code(),
            "blocked-port"
        );
    }

    #[test]
    fn a_scope_entry_the_agent_does_not_allow_is_an_error_naming_it() {
        let agent = pol(&["127.0.0.1:8001", "*.example.org", "example.com"]);
        for (bad, why) in [
            ("127.0.0.1:8002", "does not allow 127.0.0.1:8002"),
            ("127.0.0.1", "does not allow 127.0.0.1"),
            ("evil.com", "does not allow evil.com"),
            ("*.com", "too broad"),
            ("*.example.com", "no wildcard entry covering *.example.com"),
            ("example.com:8443", "does not allow example.com:8443"),
            ("https://example.com", "not a URL"),
            ("metadata.google.internal", "does not allow"),
        ] {
            let e = agent
                .narrow(&["example.com", bad], "allowed_hosts")
                .unwrap_err();
            assert_eq!(e.field, "allowed_hosts[1]", "{bad}");
            assert_eq!(e.value, bad, "{bad}");
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
        // Sub-wildcards and names under an agent wildcard are fine.
        assert!(agent
            .narrow(&["*.a.example.org", "x.example.org"], "f")
            .is_ok());
        assert!(agent.narrow(&["*.example.org"], "f").is_ok());
        // An empty scope leaves only forge's own hosts.
        let none = agent.narrow::<&str>(&[], "f").unwrap();
        assert!(none.check("example.com", 443, Kind::Tls, true).is_err());
    }

    #[test]
    fn narrowing_twice_keeps_both_scopes() {
        let agent = pol(&["a.com", "b.com", "*.example.org"]);
        let first = agent.narrow(&["a.com", "*.example.org"], "f").unwrap();
        assert!(first.narrow(&["b.com"], "g").is_err());
        assert!(first.narrow(&["*.x.example.org"], "g").is_ok());
        let second = first.narrow(&["x.example.org", "a.com"], "g").unwrap();
        assert!(second.check("a.com", 443, Kind::Tls, true).is_ok());
        assert!(second.check("x.example.org", 443, Kind::Tls, true).is_ok());
        assert!(second.check("y.example.org", 443, Kind::Tls, true).is_err());
        assert!(second.check("b.com", 443, Kind::Tls, true).is_err());
    }
}
