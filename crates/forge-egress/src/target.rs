//! What a request is aimed at: its [`Kind`] (plain HTTP or TLS, which decides the default port)
//! and [`ParsedUrl`], an `http(s)://` URL parsed with forge's host normalisation
//! ([`parse_url`]), with redirect locations resolved against it. Below both the policy (the
//! strict scope check parses URLs) and the client (every hop is a parsed URL).

use crate::error::EgressError;
use crate::host::{normalize_host, split_authority, NormalHost};
use crate::refusal::EgressRefusal;

/// What kind of connection a decision is for; decides the default port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Plain HTTP (absolute-form proxy request, `http://` URL): default port 80.
    Http,
    /// TLS (CONNECT tunnel, `https://` URL): default port 443.
    Tls,
}

impl Kind {
    pub fn default_port(self) -> u16 {
        match self {
            Kind::Http => 80,
            Kind::Tls => 443,
        }
    }
}

/// A parsed `http(s)://` URL (host normalised, never interpreted WHATWG-style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedUrl {
    pub tls: bool,
    pub host: NormalHost,
    pub port: u16,
    /// Path and query, origin-form, percent-encoded.
    pub path: String,
}

impl ParsedUrl {
    fn default_port(&self) -> u16 {
        if self.tls {
            443
        } else {
            80
        }
    }
    /// The `Host` header value.
    pub fn host_header(&self) -> String {
        if self.port == self.default_port() {
            self.host.authority_form()
        } else {
            format!("{}:{}", self.host.authority_form(), self.port)
        }
    }
    pub fn kind(&self) -> Kind {
        if self.tls {
            Kind::Tls
        } else {
            Kind::Http
        }
    }
    pub(crate) fn origin(&self) -> (bool, NormalHost, u16) {
        (self.tls, self.host.clone(), self.port)
    }
}

impl std::fmt::Display for ParsedUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.host_header(), self.path)
    }
}

/// Parse an absolute `http://` or `https://` URL. The host goes through forge's normalisation
/// (Unicode names become punycode; non-canonical IP spellings are refused as malformed).
pub fn parse_url(input: &str) -> Result<ParsedUrl, EgressError> {
    let s = input.trim_matches(|c: char| c.is_ascii_whitespace());
    let Some(colon) = s.find("://") else {
        return Err(EgressError::InvalidRequest(format!(
            "{input:?} is not an absolute http:// or https:// URL"
        )));
    };
    let scheme = s[..colon].to_ascii_lowercase();
    let tls = match scheme.as_str() {
        "http" => false,
        "https" => true,
        _ => {
            return Err(EgressError::InvalidRequest(format!(
                "unsupported scheme {scheme:?} in {input:?} (only http and https)"
            )))
        }
    };
    let rest = &s[colon + 3..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    let mut path = rest[end..].to_string();
    if let Some(h) = path.find('#') {
        path.truncate(h);
    }
    let (raw_host, port) = split_authority(authority)
        .map_err(|m| EgressError::Blocked(EgressRefusal::Malformed(m)))?;
    let host = normalize_host(raw_host, true)
        .map_err(|m| EgressError::Blocked(EgressRefusal::Malformed(m)))?;
    let port = port.unwrap_or(if tls { 443 } else { 80 });
    if path.is_empty() {
        path = "/".into();
    } else if path.starts_with('?') {
        path.insert(0, '/');
    }
    let path = percent_encode_path(&path);
    if path.parse::<http::uri::PathAndQuery>().is_err() {
        return Err(EgressError::InvalidRequest(format!(
            "invalid path in {input:?}"
        )));
    }
    Ok(ParsedUrl {
        tls,
        host,
        port,
        path,
    })
}

pub(crate) fn percent_encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for b in p.bytes() {
        if b.is_ascii_graphic() {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Resolve a redirect `Location` against the current URL.
pub(crate) fn resolve_location(
    current: &ParsedUrl,
    location: &str,
) -> Result<ParsedUrl, EgressError> {
    let loc = location.trim();
    let has_scheme = loc
        .find(':')
        .map(|i| {
            let sch = &loc[..i];
            !sch.is_empty()
                && sch.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && sch
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
        .unwrap_or(false);
    if has_scheme {
        return parse_url(loc);
    }
    if loc.starts_with("//")
        || loc.starts_with("\\\\")
        || loc.starts_with("/\\")
        || loc.starts_with("\\/")
    {
        let scheme = if current.tls { "https:" } else { "http:" };
        return parse_url(&format!("{scheme}{}", loc.replace('\\', "/")));
    }
    // A relative reference: resolve the path against a fixed placeholder origin, so that nothing in
    // the location can change the host.
    let base = url::Url::parse(&format!("http://base.invalid{}", current.path))
        .map_err(|e| EgressError::InvalidRequest(format!("bad base path: {e}")))?;
    let joined = base.join(loc).map_err(|e| {
        EgressError::InvalidRequest(format!("bad redirect location {location:?}: {e}"))
    })?;
    if joined.host_str() != Some("base.invalid")
        || joined.port().is_some()
        || joined.scheme() != "http"
    {
        return Err(EgressError::InvalidRequest(format!(
            "redirect location {location:?} is not a valid relative reference"
        )));
    }
    let mut path = joined.path().to_string();
    if let Some(q) = joined.query() {
        path.push('?');
        path.push_str(q);
    }
    Ok(ParsedUrl {
        tls: current.tls,
        host: current.host.clone(),
        port: current.port,
        path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_without_interpreting_hosts() {
        let u = parse_url("https://Bücher.DE./a b?q=ü#frag").unwrap();
        assert_eq!(u.host, NormalHost::Name("xn--bcher-kva.de".into()));
        assert_eq!(u.port, 443);
        assert_eq!(u.path, "/a%20b?q=%C3%BC");
        assert!(parse_url("http://0x7f.1/")
            .unwrap_err()
            .refusal()
            .unwrap()
            .is_malformed());
        assert!(parse_url("http://user:pw@example.com/")
            .unwrap_err()
            .refusal()
            .is_some());
        assert!(parse_url("http://example.com\\@evil.com/")
            .unwrap_err()
            .refusal()
            .is_some());
        assert!(parse_url("ftp://example.com/").is_err());
        assert_eq!(parse_url("http://a.com?x").unwrap().path, "/?x");
        assert_eq!(
            parse_url("http://[::1]:8080").unwrap().host_header(),
            "[::1]:8080"
        );
    }

    #[test]
    fn redirect_locations_resolve_without_changing_host_unexpectedly() {
        let cur = parse_url("https://a.com/dir/page?x=1").unwrap();
        assert_eq!(resolve_location(&cur, "next").unwrap().path, "/dir/next");
        assert_eq!(resolve_location(&cur, "../up").unwrap().path, "/up");
        assert_eq!(
            resolve_location(&cur, "?y=2").unwrap().path,
            "/dir/page?y=2"
        );
        let other = resolve_location(&cur, "//b.com/p").unwrap();
        assert_eq!(other.host, NormalHost::Name("b.com".into()));
        assert!(other.tls);
        let back = resolve_location(&cur, "/\\evil.com/p").unwrap();
        assert_eq!(back.host, NormalHost::Name("evil.com".into()));
        assert!(resolve_location(&cur, "javascript:alert(1)").is_err());
        assert!(resolve_location(&cur, "file:///etc/passwd").is_err());
    }
}
