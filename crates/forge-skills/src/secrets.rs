//! forge.yaml `secrets:`: credentials by reference, each bound to where it may be used.
//!
//! ```yaml
//! secrets:
//!   portal_user:     {from: "env:PORTAL_USER",     origins: ["https://portal.example.com"]}
//!   portal_password: {from: "env:PORTAL_PASSWORD", origins: ["https://portal.example.com"]}
//!   crm_token:       {from: "file:/var/run/secrets/crm/token", hosts: ["api.crm.example"]}
//! ```
//!
//! Only the reference is read here (`env:NAME` or `file:/absolute/path`); the value is resolved
//! at start by the runtime. A literal value (a `value:` key, a bare scalar, or a `from` that is
//! neither `env:` nor `file:`) is refused with a diagnostic that points at the key, not at the
//! value, so that the rendered error does not print the credential again.

use std::path::PathBuf;

use serde::Serialize;

use crate::skill::suggest;
use crate::yaml::{Doc, Kind, Node, Seg};
use crate::SourceDiagnostic;

/// Longest secret name.
const MAX_NAME: usize = 64;
const ENTRY_KEYS: &[&str] = &["from", "origins", "hosts"];
const EXAMPLE: &str =
    "portal_password: {from: \"env:PORTAL_PASSWORD\", origins: [\"https://portal.example.com\"]}";

/// `secrets`, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct SecretsConfig {
    pub entries: Vec<SecretSpec>,
}

impl SecretsConfig {
    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&SecretSpec> {
        self.entries.iter().find(|s| s.name == name)
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// One entry of `secrets`: where its value comes from and where it may be used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretSpec {
    /// `[a-z][a-z0-9_]*`, at most 64 characters.
    pub name: String,
    pub source: SecretSource,
    /// Web origins a browser field must belong to (its own frame's origin) for `browser_fill`.
    pub origins: Vec<SecretOrigin>,
    /// Hosts (`host` or `host:port`) `http_request` may send it to, besides `origins`' hosts.
    pub hosts: Vec<String>,
}

/// Where a secret's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SecretSource {
    /// `env:NAME`: the environment variable `NAME` of the forge process.
    Env(String),
    /// `file:/absolute/path`: the file's content, one trailing newline removed (a Kubernetes
    /// Secret mount).
    File(PathBuf),
}

impl std::fmt::Display for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Env(n) => write!(f, "env:{n}"),
            SecretSource::File(p) => write!(f, "file:{}", p.display()),
        }
    }
}

/// A web origin: scheme (`http`/`https`), lowercase host, port (the scheme's default when not
/// written).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct SecretOrigin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

impl std::fmt::Display for SecretOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let default = matches!(
            (self.scheme.as_str(), self.port),
            ("http", 80) | ("https", 443)
        );
        match default {
            true => write!(f, "{}://{}", self.scheme, self.host),
            false => write!(f, "{}://{}:{}", self.scheme, self.host, self.port),
        }
    }
}

impl SecretOrigin {
    /// Parse `scheme://host[:port]` (a trailing `/` allowed; no path, query or credentials).
    pub fn parse(text: &str) -> Result<SecretOrigin, String> {
        let t = text.trim();
        let (scheme, rest) = t
            .split_once("://")
            .ok_or_else(|| "an origin is written scheme://host[:port]".to_string())?;
        let scheme = scheme.to_ascii_lowercase();
        let default_port = match scheme.as_str() {
            "http" => 80,
            "https" => 443,
            _ => return Err(format!("scheme `{scheme}` is not http or https")),
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty()
            || rest.contains(['/', '?', '#', '@'])
            || rest.contains(char::is_whitespace)
        {
            return Err("an origin has no path, query, credentials or spaces".to_string());
        }
        let (host, port) = split_host_port(rest)?;
        Ok(SecretOrigin {
            scheme,
            host,
            port: port.unwrap_or(default_port),
        })
    }
}

/// `host` or `host:port` (IPv6 in brackets) → lowercase host without a trailing dot, port.
fn split_host_port(text: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| "an IPv6 host is written in brackets, [::1]".to_string())?;
        match after {
            "" => (h, None),
            p => match p.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None => return Err("unexpected text after the bracketed host".to_string()),
            },
        }
    } else {
        match text.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (text, None),
        }
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.is_empty()
        || host.contains('*')
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_'))
    {
        return Err(format!(
            "`{host}` is not a host name (exact names only, no wildcards)"
        ));
    }
    let port = match port {
        None => None,
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| format!("`{p}` is not a port (1 to 65535)"))?,
        ),
    };
    Ok((host, port))
}

/// Normalise a `hosts` entry (`host` or `host:port`) to its lowercase form.
pub fn normalize_secret_host(text: &str) -> Result<String, String> {
    let (host, port) = split_host_port(text.trim())?;
    let host = match host.contains(':') {
        true => format!("[{host}]"),
        false => host,
    };
    Ok(match port {
        Some(p) => format!("{host}:{p}"),
        None => host,
    })
}

/// Whether `name` is a valid secret name (`[a-z][a-z0-9_]*`, at most 64 characters).
pub fn is_valid_secret_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_NAME
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

impl SecretSpec {
    /// Every binding (origin or host) of this secret that the egress allowlist `entries` (host
    /// or `*.suffix`, optional `:port`; without a port only 80 and 443) does not reach under
    /// `mode`, as text: what `forge skills audit` and `forge package --prod` report. `$VAR`
    /// entries cannot be reviewed and reach nothing here.
    pub fn outside_allowlist(&self, mode: crate::EgressMode, entries: &[String]) -> Vec<String> {
        if mode == crate::EgressMode::DevOpen {
            return Vec::new();
        }
        let reach = |host: &str, port: Option<u16>| {
            mode == crate::EgressMode::Allowlist
                && entries.iter().any(|e| entry_allows(e, host, port))
        };
        let mut out = Vec::new();
        for o in &self.origins {
            if !reach(&o.host, Some(o.port)) {
                out.push(o.to_string());
            }
        }
        for h in &self.hosts {
            let (host, port) = match split_host_port(h) {
                Ok(hp) => hp,
                Err(_) => (h.clone(), None),
            };
            if !reach(&host, port) {
                out.push(h.clone());
            }
        }
        out
    }
}

/// Whether allowlist entry `entry` lets a request reach `host` on `port` (`None`: any port the
/// entry allows).
pub(crate) fn entry_allows(entry: &str, host: &str, port: Option<u16>) -> bool {
    let entry = entry.trim();
    if entry.contains('$') || entry.is_empty() {
        return false;
    }
    let Ok((pattern, entry_port)) = split_host_port(&entry.replace("*.", "wildcard-marker."))
    else {
        return false;
    };
    let host_ok = match pattern.strip_prefix("wildcard-marker.") {
        Some(suffix) => host.ends_with(&format!(".{suffix}")),
        None => pattern == host,
    };
    let port_ok = match (entry_port, port) {
        (_, None) => true,
        (Some(e), Some(p)) => e == p,
        (None, Some(p)) => p == 80 || p == 443,
    };
    host_ok && port_ok
}

/// Read `secrets` from the marked tree: the config, the errors and the warnings.
pub(crate) fn read(doc: &Doc<'_>) -> (SecretsConfig, Vec<SourceDiagnostic>, Vec<SourceDiagnostic>) {
    let (out, errors, warnings, literals) = read_unmasked(doc);
    if literals.is_empty() {
        return (out, errors, warnings);
    }
    // Refused literal values are blanked in the source the diagnostics show (same byte length,
    // newlines kept, so every span stays valid): the rendered error must not print a credential.
    let mut text = doc.src.inner().clone().into_bytes();
    for (start, end) in literals {
        for b in text.get_mut(start..end).into_iter().flatten() {
            if *b != b'\n' && *b != b'\r' {
                *b = b'*';
            }
        }
    }
    // Only ASCII bytes replaced whole characters' bytes: still UTF-8; lossy is a no-op here.
    let masked = std::sync::Arc::new(
        miette::NamedSource::new(doc.src.name(), String::from_utf8_lossy(&text).into_owned())
            .with_language("yaml"),
    );
    let mask = |v: Vec<SourceDiagnostic>| {
        v.into_iter()
            .map(|d| d.with_source(masked.clone()))
            .collect()
    };
    (out, mask(errors), mask(warnings))
}

type Read = (
    SecretsConfig,
    Vec<SourceDiagnostic>,
    Vec<SourceDiagnostic>,
    Vec<(usize, usize)>,
);

fn read_unmasked(doc: &Doc<'_>) -> Read {
    let mut out = SecretsConfig::default();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut literals: Vec<(usize, usize)> = Vec::new();
    let Some(root) = doc.tree.get(&[Seg::Key("secrets")]) else {
        return (out, errors, warnings, literals);
    };
    let entries = match &root.kind {
        Kind::Map(e) => e,
        Kind::Scalar(s) if s.trim().is_empty() => return (out, errors, warnings, literals),
        _ => {
            errors.push(doc.diag(
                "forge::config::secrets",
                "forge.yaml `secrets` must be a mapping of secret names to references",
                &[Seg::Key("secrets")],
                "expected a mapping",
                Some(format!(
                    "write it as `secrets: {{{EXAMPLE}}}` (see docs/secrets.md)"
                )),
            ));
            return (out, errors, warnings, literals);
        }
    };
    for (key, value) in entries {
        let Kind::Scalar(name) = &key.kind else {
            errors.push(doc.key_diag(
                "forge::config::secret-name",
                "a secret name must be a plain word",
                key,
                "not a name",
                Some("name secrets like `portal_password` ([a-z][a-z0-9_]*)".into()),
            ));
            continue;
        };
        if !is_valid_secret_name(name) {
            errors.push(kd(
        doc,
                "forge::config::secret-name",
                format!("secret name `{name}` is not valid"),
                key,
                "bad name",
                format!(
                    "use lowercase letters, digits and `_`, starting with a letter, at most {MAX_NAME} characters (e.g. `portal_password`)"
                ),
            ));
            continue;
        }
        if out.entries.iter().any(|s| &s.name == name) {
            errors.push(kd(
                doc,
                "forge::config::secret-name",
                format!("secret `{name}` is defined twice"),
                key,
                "duplicate",
                "keep one entry per secret name".into(),
            ));
            continue;
        }
        let fields = match &value.kind {
            Kind::Map(f) => f,
            _ => {
                // A bare value (`portal_password: hunter2`) is a literal: refused, and the
                // diagnostic points at the name so that the value is not printed again.
                literals.push(doc.span_of(value));
                errors.push(kd(
        doc,
                    "forge::config::secret-literal",
                    format!("secret `{name}` is written as a literal value; forge.yaml holds references, never values"),
                    key,
                    "literal value refused",
                    format!(
                        "move the value to an environment variable or a file and write `{name}: {{from: \"env:VAR\", origins: [\"https://...\"]}}` (or `from: \"file:/path\"`)"
                    ),
                ));
                continue;
            }
        };
        let at = |k: &'static str| [Seg::Key("secrets"), Seg::Key(name.as_str()), Seg::Key(k)];
        let field = |k: &str| {
            fields
                .iter()
                .find(|(fk, _)| matches!(&fk.kind, Kind::Scalar(s) if s == k))
        };
        let mut bad = false;
        for (fk, fv) in fields {
            let Kind::Scalar(k) = &fk.kind else { continue };
            if ENTRY_KEYS.contains(&k.as_str()) {
                continue;
            }
            if matches!(
                k.as_str(),
                "value" | "literal" | "password" | "token" | "secret"
            ) {
                literals.push(doc.span_of(fv));
                errors.push(kd(
        doc,
                    "forge::config::secret-literal",
                    format!("secrets.{name}.{k}: a literal value is refused; forge.yaml holds references, never values"),
                    fk,
                    "literal value refused",
                    format!(
                        "remove `{k}`, put the value in an environment variable or a mounted file, and write `from: \"env:VAR\"` or `from: \"file:/path\"`"
                    ),
                ));
                bad = true;
                continue;
            }
            warnings.push(
                doc.key_diag(
                    "forge::config::unknown-key",
                    format!("unknown key `{k}` in forge.yaml `secrets.{name}`; it is ignored"),
                    fk,
                    "unknown key",
                    Some(format!(
                        "known keys here: {}{}",
                        ENTRY_KEYS.join(", "),
                        suggest(k, ENTRY_KEYS)
                            .map(|s| format!(" (did you mean `{s}`?)"))
                            .unwrap_or_default()
                    )),
                )
                .warning(),
            );
        }
        let source = match field("from") {
            None => {
                if !bad {
                    errors.push(doc.diag(
                        "forge::config::secret-from",
                        format!("secrets.{name} has no `from`"),
                        &[Seg::Key("secrets"), Seg::Key(name.as_str())],
                        "missing `from`",
                        Some("add `from: \"env:VAR\"` (an environment variable) or `from: \"file:/path\"` (a mounted file)".into()),
                    ));
                }
                None
            }
            Some((fk, fv)) => match &fv.kind {
                Kind::Scalar(s) => {
                    match parse_source(s) {
                        Ok(src) => Some(src),
                        Err(SourceError::Literal) => {
                            literals.push(doc.span_of(fv));
                            errors.push(kd(
        doc,
                            "forge::config::secret-literal",
                            format!("secrets.{name}.from is neither `env:` nor `file:`; a literal value is refused"),
                            fk,
                            "literal value refused",
                            "write `from: \"env:VAR\"` (an environment variable) or `from: \"file:/absolute/path\"` (a mounted file), and keep the value there".into(),
                        ));
                            None
                        }
                        Err(SourceError::Bad(why)) => {
                            errors.push(doc.diag(
                            "forge::config::secret-from",
                            format!("secrets.{name}.from: {why}"),
                            &at("from"),
                            "bad reference",
                            Some("write `from: \"env:VAR\"` or `from: \"file:/absolute/path\"`".into()),
                        ));
                            None
                        }
                    }
                }
                _ => {
                    errors.push(doc.diag(
                        "forge::config::secret-from",
                        format!("secrets.{name}.from must be a single reference"),
                        &at("from"),
                        "expected `env:VAR` or `file:/path`",
                        Some("write `from: \"env:VAR\"` or `from: \"file:/absolute/path\"`".into()),
                    ));
                    None
                }
            },
        };
        let mut list = |k: &'static str| -> Vec<(String, usize)> {
            let Some((_, v)) = field(k) else {
                return Vec::new();
            };
            match &v.kind {
                Kind::Seq(items) => items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, n)| match &n.kind {
                        Kind::Scalar(s) => Some((s.clone(), i)),
                        _ => {
                            errors.push(doc.diag(
                                "forge::config::secret-binding",
                                format!("secrets.{name}.{k}[{i}] must be a single value"),
                                &[
                                    Seg::Key("secrets"),
                                    Seg::Key(name.as_str()),
                                    Seg::Key(k),
                                    Seg::Index(i),
                                ],
                                "expected a string",
                                Some(format!("write `{k}: [\"...\"]`")),
                            ));
                            None
                        }
                    })
                    .collect(),
                Kind::Scalar(s) if !s.trim().is_empty() => vec![(s.clone(), usize::MAX)],
                Kind::Scalar(_) => Vec::new(),
                _ => {
                    errors.push(doc.diag(
                        "forge::config::secret-binding",
                        format!("secrets.{name}.{k} must be a list"),
                        &at(k),
                        "expected a list",
                        Some(format!("write `{k}: [\"...\"]`")),
                    ));
                    Vec::new()
                }
            }
        };
        let raw_origins = list("origins");
        let raw_hosts = list("hosts");
        let seg_at = |k: &'static str, i: usize| -> Vec<Seg<'_>> {
            let mut v = vec![Seg::Key("secrets"), Seg::Key(name.as_str()), Seg::Key(k)];
            if i != usize::MAX {
                v.push(Seg::Index(i));
            }
            v
        };
        let mut origins = Vec::new();
        for (text, i) in &raw_origins {
            match SecretOrigin::parse(text) {
                Ok(o) if !origins.contains(&o) => origins.push(o),
                Ok(_) => {}
                Err(why) => errors.push(doc.diag(
                    "forge::config::secret-binding",
                    format!("secrets.{name}.origins: \"{text}\" is not an origin: {why}"),
                    &seg_at("origins", *i),
                    "not an origin",
                    Some("write an origin as `https://portal.example.com` or `http://127.0.0.1:8080`".into()),
                )),
            }
        }
        let mut hosts = Vec::new();
        for (text, i) in &raw_hosts {
            match normalize_secret_host(text) {
                Ok(h) if !hosts.contains(&h) => hosts.push(h),
                Ok(_) => {}
                Err(why) => errors.push(doc.diag(
                    "forge::config::secret-binding",
                    format!("secrets.{name}.hosts: \"{text}\" is not a host: {why}"),
                    &seg_at("hosts", *i),
                    "not a host",
                    Some("write a host as `api.crm.example` or `127.0.0.1:8080` (no scheme, no path)".into()),
                )),
            }
        }
        if raw_origins.is_empty() && raw_hosts.is_empty() {
            errors.push(doc.diag(
                "forge::config::secret-binding",
                format!("secrets.{name} is bound to nowhere: it has neither `origins` nor `hosts`"),
                &[Seg::Key("secrets"), Seg::Key(name.as_str())],
                "no origins or hosts",
                Some(format!(
                    "add `origins: [\"https://...\"]` (where browser_fill may type it) and/or `hosts: [\"api.example.com\"]` (where http_request may send it) to `{name}`"
                )),
            ));
            continue;
        }
        if let Some(source) = source {
            out.entries.push(SecretSpec {
                name: name.clone(),
                source,
                origins,
                hosts,
            });
        }
    }
    (out, errors, warnings, literals)
}

/// A diagnostic at a key node (so that a refused literal value is not printed again).
fn kd(
    doc: &Doc<'_>,
    code: &'static str,
    msg: String,
    node: &Node,
    label: &str,
    help: String,
) -> SourceDiagnostic {
    doc.key_diag(code, msg, node, label, Some(help))
}

enum SourceError {
    /// Not a reference at all: looks like a literal value.
    Literal,
    /// A reference with a bad name or path.
    Bad(String),
}

fn parse_source(text: &str) -> Result<SecretSource, SourceError> {
    let t = text.trim();
    if let Some(var) = t.strip_prefix("env:") {
        let ok = var
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        return match ok {
            true => Ok(SecretSource::Env(var.to_string())),
            false => Err(SourceError::Bad(format!(
                "`{var}` is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
            ))),
        };
    }
    if let Some(path) = t.strip_prefix("file:") {
        let p = PathBuf::from(path);
        return match p.is_absolute() {
            true => Ok(SecretSource::File(p)),
            false => Err(SourceError::Bad(format!(
                "`{path}` is not an absolute path (a secret file is a mount such as /var/run/secrets/crm/token)"
            ))),
        };
    }
    Err(SourceError::Literal)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::ForgeConfig;

    const HEAD: &str = "agent_id: a\nversion: 0.1.0\n";

    fn parse(body: &str) -> Result<ForgeConfig, crate::Error> {
        ForgeConfig::parse(&format!("{HEAD}{body}"), Path::new("forge.yaml"))
    }

    #[test]
    fn secrets_parse_with_origins_hosts_and_sources() {
        let c = parse(
            "secrets:\n  portal_user: {from: \"env:PORTAL_USER\", origins: [\"https://Portal.Example.com/\"]}\n  crm_token: {from: \"file:/var/run/secrets/crm/token\", hosts: [\"API.crm.example\", \"127.0.0.1:8080\"]}\n",
        )
        .expect("parses");
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let u = c.secrets.get("portal_user").expect("portal_user");
        assert_eq!(u.source, super::SecretSource::Env("PORTAL_USER".into()));
        assert_eq!(u.origins[0].to_string(), "https://portal.example.com");
        assert_eq!(u.origins[0].port, 443);
        let t = c.secrets.get("crm_token").expect("crm_token");
        assert_eq!(
            t.source,
            super::SecretSource::File("/var/run/secrets/crm/token".into())
        );
        assert_eq!(t.hosts, vec!["api.crm.example", "127.0.0.1:8080"]);
    }

    fn first_problem(body: &str) -> crate::SourceDiagnostic {
        let e = parse(body).expect_err("refused");
        e.problems().first().expect("a problem").clone()
    }

    #[test]
    fn bindings_outside_the_allowlist_are_named() {
        let c = parse(
            "secrets:\n  pw: {from: \"env:X\", origins: [\"https://portal.example\", \"http://127.0.0.1:8080\"], hosts: [api.a.example, \"api.b.example:8443\"]}\n",
        )
        .expect("parses");
        let s = c.secrets.get("pw").expect("pw");
        let entries: Vec<String> = vec![
            "portal.example".into(),
            "*.a.example".into(),
            "127.0.0.1:8080".into(),
        ];
        assert_eq!(
            s.outside_allowlist(crate::EgressMode::Allowlist, &entries),
            vec!["api.b.example:8443".to_string()]
        );
        assert_eq!(
            s.outside_allowlist(crate::EgressMode::DenyAll, &entries)
                .len(),
            4
        );
        assert!(s
            .outside_allowlist(crate::EgressMode::DevOpen, &[])
            .is_empty());
        let entries: Vec<String> = vec!["*.portal.example".into(), "127.0.0.1".into()];
        assert_eq!(
            s.outside_allowlist(crate::EgressMode::Allowlist, &entries).len(),
            4,
            "a wildcard never matches the apex; a loopback entry without a port does not reach 8080"
        );
    }

    #[test]
    fn a_literal_value_is_refused_pointing_at_the_key_not_the_value() {
        for body in [
            "secrets:\n  pw: {value: hunter2, origins: [\"https://a.example\"]}\n",
            "secrets:\n  pw: hunter2\n",
            "secrets:\n  pw: {from: hunter2, origins: [\"https://a.example\"]}\n",
        ] {
            let p = first_problem(body);
            assert_eq!(p.code, "forge::config::secret-literal", "{body}: {p:?}");
            assert!(!p.message.contains("hunter2"), "{}", p.message);
            assert!(p.help.as_deref().unwrap_or("").contains("env:"), "{p:?}");
            let text = format!("{HEAD}{body}");
            let span = p.span();
            let shown = &text[span.offset()..span.offset() + span.len()];
            assert!(!shown.contains("hunter2"), "span shows {shown:?}");
        }
    }

    #[test]
    fn bad_names_bindings_and_sources_are_diagnostics_naming_the_field() {
        let p = first_problem("secrets:\n  Portal: {from: \"env:X\", hosts: [a.example]}\n");
        assert_eq!(p.code, "forge::config::secret-name");
        let p = first_problem("secrets:\n  pw: {from: \"env:X\"}\n");
        assert_eq!(p.code, "forge::config::secret-binding");
        assert!(p.message.contains("pw"), "{}", p.message);
        let p = first_problem("secrets:\n  pw: {from: \"file:rel/token\", hosts: [a.example]}\n");
        assert_eq!(p.code, "forge::config::secret-from");
        let p =
            first_problem("secrets:\n  pw: {from: \"env:X\", origins: [\"ftp://a.example\"]}\n");
        assert!(p.message.contains("secrets.pw.origins"), "{}", p.message);
        let p = first_problem("secrets:\n  pw: {from: \"env:X\", hosts: [\"*.a.example\"]}\n");
        assert!(p.message.contains("secrets.pw.hosts"), "{}", p.message);
    }
}
